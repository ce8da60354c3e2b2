//! The multiprotocol attributes MP_REACH_NLRI and MP_UNREACH_NLRI (RFC 4760, RFC 8950).
//! Shared by [`super::attribute`] (they are attribute values) and [`super::update`] (which
//! reads them); both re-export these types.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bytes::{BufMut, BytesMut};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::error::{DecodeError, EncodeError};
use crate::iana::attr_type as t;
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
