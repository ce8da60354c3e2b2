//! UPDATE (RFC 4271 §4.3). The multiprotocol attributes (RFC 4760, RFC 8950) are defined in
//! `mp` and re-exported here.

use std::net::Ipv4Addr;

use bytes::{BufMut, BytesMut};
use ipnet::{IpNet, Ipv4Net};

use crate::error::{DecodeError, EncodeError};
use crate::iana::attr_type as t;
use crate::message::WireOptions;
use crate::message::attribute::{AsPath, AttrValue, Origin, PathAttribute, decode_attributes};
use crate::message::prefix;
use crate::reader::Reader;
use crate::types::Family;

pub use super::mp::{MpNextHop, MpNlri, MpReach, MpUnreach};

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
