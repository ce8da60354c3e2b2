//! UPDATE (RFC 4271 §4.3) and the multiprotocol attributes (RFC 4760, RFC 8950).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bytes::{BufMut, BytesMut};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::error::{DecodeError, EncodeError};
use crate::iana::attr_type as t;
use crate::message::WireOptions;
use crate::message::attribute::{AsPath, AttrValue, Origin, PathAttribute, decode_attributes};
use crate::message::prefix;
use crate::reader::Reader;
use crate::types::{Afi, Family};

/// The next hop of MP_REACH_NLRI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MpNextHop {
    Ipv4(Ipv4Addr),
    /// RFC 2545 §3: a global address, optionally followed by a link-local one.
    Ipv6 {
        global: Ipv6Addr,
        link_local: Option<Ipv6Addr>,
    },
    /// Families we do not decode, kept byte for byte.
    Other(Vec<u8>),
}

impl MpNextHop {
    /// The address used for forwarding: the IPv4 or the global IPv6 address.
    pub fn primary(&self) -> Option<IpAddr> {
        match self {
            MpNextHop::Ipv4(a) => Some(IpAddr::V4(*a)),
            MpNextHop::Ipv6 { global, .. } => Some(IpAddr::V6(*global)),
            MpNextHop::Other(_) => None,
        }
    }

    fn encode(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            MpNextHop::Ipv4(a) => {
                dst.put_u8(4);
                dst.put_slice(&a.octets());
            }
            MpNextHop::Ipv6 { global, link_local } => {
                dst.put_u8(if link_local.is_some() { 32 } else { 16 });
                dst.put_slice(&global.octets());
                if let Some(ll) = link_local {
                    dst.put_slice(&ll.octets());
                }
            }
            MpNextHop::Other(raw) => {
                let len = u8::try_from(raw.len()).map_err(|_| EncodeError::ValueTooLong {
                    what: "MP_REACH_NLRI next hop",
                    length: raw.len(),
                    max: 255,
                })?;
                dst.put_u8(len);
                dst.put_slice(raw);
            }
        }
        Ok(())
    }
}

/// NLRI carried in an MP attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MpNlri {
    Ipv4(Vec<Ipv4Net>),
    Ipv6(Vec<Ipv6Net>),
    /// Families we do not decode, kept byte for byte.
    Other(Vec<u8>),
}

impl MpNlri {
    pub fn prefixes(&self) -> Vec<IpNet> {
        match self {
            MpNlri::Ipv4(v) => v.iter().copied().map(IpNet::V4).collect(),
            MpNlri::Ipv6(v) => v.iter().copied().map(IpNet::V6).collect(),
            MpNlri::Other(_) => Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            MpNlri::Ipv4(v) => v.is_empty(),
            MpNlri::Ipv6(v) => v.is_empty(),
            MpNlri::Other(v) => v.is_empty(),
        }
    }

    fn decode(family: Family, bytes: &[u8], raw: &[u8]) -> Result<Self, DecodeError> {
        let err = |reason| DecodeError::MalformedMpAttribute {
            family,
            reason,
            attribute: raw.to_vec(),
        };
        Ok(match family {
            Family::IPV4_UNICAST => MpNlri::Ipv4(prefix::decode_v4(bytes).map_err(err)?),
            Family::IPV6_UNICAST => MpNlri::Ipv6(prefix::decode_v6(bytes).map_err(err)?),
            _ => MpNlri::Other(bytes.to_vec()),
        })
    }

    fn encode(&self, dst: &mut BytesMut) {
        match self {
            MpNlri::Ipv4(v) => prefix::encode_all_v4(dst, v),
            MpNlri::Ipv6(v) => prefix::encode_all_v6(dst, v),
            MpNlri::Other(raw) => dst.put_slice(raw),
        }
    }
}

/// MP_REACH_NLRI (RFC 4760 §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpReach {
    pub family: Family,
    pub next_hop: MpNextHop,
    pub nlri: MpNlri,
}

impl MpReach {
    pub(crate) fn decode(value: &[u8], raw: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(value);
        let too_short = || DecodeError::AttributeLength {
            type_code: t::MP_REACH_NLRI,
            length: value.len(),
            attribute: raw.to_vec(),
        };
        let afi = r.u16().map_err(|_| too_short())?;
        let safi = r.u8().map_err(|_| too_short())?;
        let family = Family::new(afi, safi);
        let err = |reason| DecodeError::MalformedMpAttribute {
            family,
            reason,
            attribute: raw.to_vec(),
        };
        let nh_len = r.u8().map_err(|_| err("truncated next hop length"))?;
        let nh = r
            .take(usize::from(nh_len))
            .map_err(|_| err("next hop runs past the attribute"))?;
        let mut n = Reader::new(nh);
        let bad_nh = |_| err("next hop length does not fit the family");
        let next_hop = match (family.afi, nh_len) {
            (Afi::IPV4, 4) if family == Family::IPV4_UNICAST => {
                MpNextHop::Ipv4(n.ipv4().map_err(bad_nh)?)
            }
            // RFC 8950 allows an IPv6 next hop for IPv4 NLRI; RFC 2545 for IPv6.
            (Afi::IPV4 | Afi::IPV6, 16 | 32) if family.safi == crate::types::Safi::UNICAST => {
                let global = n.ipv6().map_err(bad_nh)?;
                let link_local = if nh_len == 32 {
                    Some(n.ipv6().map_err(bad_nh)?)
                } else {
                    None
                };
                MpNextHop::Ipv6 { global, link_local }
            }
            _ if family == Family::IPV4_UNICAST || family == Family::IPV6_UNICAST => {
                return Err(err("next hop length does not fit the family"));
            }
            _ => MpNextHop::Other(nh.to_vec()),
        };
        // RFC 4760 §3: the reserved octet is ignored on receipt.
        r.u8().map_err(|_| err("missing reserved octet"))?;
        let nlri = MpNlri::decode(family, r.rest(), raw)?;
        Ok(MpReach {
            family,
            next_hop,
            nlri,
        })
    }

    pub(crate) fn encode(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        dst.put_u16(self.family.afi.0);
        dst.put_u8(self.family.safi.0);
        self.next_hop.encode(dst)?;
        dst.put_u8(0);
        self.nlri.encode(dst);
        Ok(())
    }
}

/// MP_UNREACH_NLRI (RFC 4760 §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpUnreach {
    pub family: Family,
    pub withdrawn: MpNlri,
}

impl MpUnreach {
    pub(crate) fn decode(value: &[u8], raw: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(value);
        let too_short = || DecodeError::AttributeLength {
            type_code: t::MP_UNREACH_NLRI,
            length: value.len(),
            attribute: raw.to_vec(),
        };
        let afi = r.u16().map_err(|_| too_short())?;
        let safi = r.u8().map_err(|_| too_short())?;
        let family = Family::new(afi, safi);
        Ok(MpUnreach {
            family,
            withdrawn: MpNlri::decode(family, r.rest(), raw)?,
        })
    }

    pub(crate) fn encode(&self, dst: &mut BytesMut) {
        dst.put_u16(self.family.afi.0);
        dst.put_u8(self.family.safi.0);
        self.withdrawn.encode(dst);
    }
}

/// An UPDATE message. Attributes keep their wire order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Update {
    pub withdrawn: Vec<Ipv4Net>,
    pub attributes: Vec<PathAttribute>,
    pub nlri: Vec<Ipv4Net>,
}

impl Update {
    /// End-of-RIB marker (RFC 4724 §2): an empty UPDATE for IPv4 unicast, an UPDATE with only
    /// an empty MP_UNREACH_NLRI otherwise.
    pub fn end_of_rib(family: Family) -> Self {
        if family == Family::IPV4_UNICAST {
            return Update::default();
        }
        let withdrawn = match family {
            Family::IPV6_UNICAST => MpNlri::Ipv6(Vec::new()),
            _ => MpNlri::Other(Vec::new()),
        };
        Update {
            attributes: vec![PathAttribute::new(AttrValue::MpUnreach(MpUnreach {
                family,
                withdrawn,
            }))],
            ..Update::default()
        }
    }

    /// The family this UPDATE marks the End-of-RIB of, if it is such a marker.
    pub fn end_of_rib_family(&self) -> Option<Family> {
        if !self.withdrawn.is_empty() || !self.nlri.is_empty() {
            return None;
        }
        match self.attributes.as_slice() {
            [] => Some(Family::IPV4_UNICAST),
            [a] => match &a.value {
                AttrValue::MpUnreach(m) if m.withdrawn.is_empty() => Some(m.family),
                _ => None,
            },
            _ => None,
        }
    }

    fn find(&self, code: u8) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find(|a| a.type_code() == code)
            .map(|a| &a.value)
    }

    pub fn origin(&self) -> Option<Origin> {
        match self.find(t::ORIGIN) {
            Some(AttrValue::Origin(o)) => Some(*o),
            _ => None,
        }
    }

    pub fn next_hop(&self) -> Option<Ipv4Addr> {
        match self.find(t::NEXT_HOP) {
            Some(AttrValue::NextHop(a)) => Some(*a),
            _ => None,
        }
    }

    pub fn med(&self) -> Option<u32> {
        match self.find(t::MULTI_EXIT_DISC) {
            Some(AttrValue::Med(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn local_pref(&self) -> Option<u32> {
        match self.find(t::LOCAL_PREF) {
            Some(AttrValue::LocalPref(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn mp_reach(&self) -> Option<&MpReach> {
        match self.find(t::MP_REACH_NLRI) {
            Some(AttrValue::MpReach(m)) => Some(m),
            _ => None,
        }
    }

    pub fn mp_unreach(&self) -> Option<&MpUnreach> {
        match self.find(t::MP_UNREACH_NLRI) {
            Some(AttrValue::MpUnreach(m)) => Some(m),
            _ => None,
        }
    }

    /// The AS path as the sender meant it: on a 2-octet session AS4_PATH is merged in, unless
    /// AGGREGATOR shows a 2-octet aggregator (RFC 6793 §4.2.3).
    pub fn effective_as_path(&self, opts: &WireOptions) -> Option<AsPath> {
        let as_path = match self.find(t::AS_PATH) {
            Some(AttrValue::AsPath(p)) => p,
            _ => return None,
        };
        if opts.four_octet_as {
            return Some(as_path.clone());
        }
        if let Some(AttrValue::Aggregator { asn, .. }) = self.find(t::AGGREGATOR)
            && *asn != u32::from(crate::types::AS_TRANS)
        {
            return Some(as_path.clone());
        }
        match self.find(t::AS4_PATH) {
            Some(AttrValue::As4Path(as4)) => Some(as_path.merge_as4(as4)),
            _ => Some(as_path.clone()),
        }
    }

    /// Every announced prefix: IPv4 NLRI and MP_REACH_NLRI.
    pub fn announced(&self) -> Vec<IpNet> {
        let mut out: Vec<IpNet> = self.nlri.iter().copied().map(IpNet::V4).collect();
        if let Some(m) = self.mp_reach() {
            out.extend(m.nlri.prefixes());
        }
        out
    }

    /// Every withdrawn prefix: IPv4 withdrawn routes and MP_UNREACH_NLRI.
    pub fn withdrawn_prefixes(&self) -> Vec<IpNet> {
        let mut out: Vec<IpNet> = self.withdrawn.iter().copied().map(IpNet::V4).collect();
        if let Some(m) = self.mp_unreach() {
            out.extend(m.withdrawn.prefixes());
        }
        out
    }

    pub(crate) fn decode_body(
        body: &[u8],
        opts: &WireOptions,
        errors: &mut Vec<DecodeError>,
    ) -> Result<Self, DecodeError> {
        let list_err = |reason| DecodeError::MalformedAttributeList { reason };
        let mut r = Reader::new(body);
        let wlen = r
            .u16()
            .map_err(|_| list_err("truncated withdrawn routes length"))?;
        let withdrawn = r
            .take(usize::from(wlen))
            .map_err(|_| list_err("withdrawn routes length exceeds the message"))?;
        let alen = r
            .u16()
            .map_err(|_| list_err("truncated total path attribute length"))?;
        let attrs = r
            .take(usize::from(alen))
            .map_err(|_| list_err("total path attribute length exceeds the message"))?;
        let nlri = r.rest();
        let withdrawn =
            prefix::decode_v4(withdrawn).map_err(|reason| DecodeError::InvalidNetworkField {
                field: "withdrawn routes",
                reason,
            })?;
        let nlri = prefix::decode_v4(nlri).map_err(|reason| DecodeError::InvalidNetworkField {
            field: "NLRI",
            reason,
        })?;
        let decoded = decode_attributes(attrs, opts, errors)?;
        let update = Update {
            withdrawn,
            attributes: decoded.attributes,
            nlri,
        };
        // RFC 7606 §3 (d); NEXT_HOP is only mandatory with IPv4 NLRI (RFC 4760 §3).
        let reach =
            !update.nlri.is_empty() || update.mp_reach().is_some_and(|m| !m.nlri.is_empty());
        if reach {
            let mut mandatory = vec![t::ORIGIN, t::AS_PATH];
            if !update.nlri.is_empty() {
                mandatory.push(t::NEXT_HOP);
            }
            for code in mandatory {
                if !decoded
                    .seen
                    .get(usize::from(code))
                    .copied()
                    .unwrap_or(false)
                {
                    errors.push(DecodeError::MissingWellKnownAttribute { type_code: code });
                }
            }
        }
        Ok(update)
    }

    pub(crate) fn encode_body(
        &self,
        opts: &WireOptions,
        dst: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        let too_long = |length| EncodeError::MessageTooLong {
            length,
            max: opts.max_message_len(),
        };
        let len_at = dst.len();
        dst.put_u16(0);
        prefix::encode_all_v4(dst, &self.withdrawn);
        let wlen = dst.len() - len_at - 2;
        patch_u16(
            dst,
            len_at,
            u16::try_from(wlen).map_err(|_| too_long(wlen))?,
        );
        let len_at = dst.len();
        dst.put_u16(0);
        for a in &self.attributes {
            a.encode(opts, dst)?;
        }
        let alen = dst.len() - len_at - 2;
        patch_u16(
            dst,
            len_at,
            u16::try_from(alen).map_err(|_| too_long(alen))?,
        );
        prefix::encode_all_v4(dst, &self.nlri);
        Ok(())
    }
}

fn patch_u16(dst: &mut BytesMut, at: usize, v: u16) {
    if let Some(field) = dst.get_mut(at..at + 2) {
        field.copy_from_slice(&v.to_be_bytes());
    }
}
