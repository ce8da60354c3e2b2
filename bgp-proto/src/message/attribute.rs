//! Path attributes (RFC 4271 §4.3, §5) with RFC 7606 error handling on decode.

use std::net::Ipv4Addr;

use bytes::{BufMut, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::iana::{attr_flags as flag, attr_type as t, origin};
use crate::message::WireOptions;
use crate::reader::Reader;

pub use super::aspath::{AsPath, AsSegment, AsSegmentType};
pub use super::mp::{MpReach, MpUnreach};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Igp,
    Egp,
    Incomplete,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Igp => "igp",
            Origin::Egp => "egp",
            Origin::Incomplete => "incomplete",
        }
    }
}

/// A decoded attribute value. Values we do not know are kept as raw bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrValue {
    Origin(Origin),
    AsPath(AsPath),
    NextHop(Ipv4Addr),
    Med(u32),
    LocalPref(u32),
    AtomicAggregate,
    Aggregator {
        asn: u32,
        address: Ipv4Addr,
    },
    /// RFC 1997, each as a 32-bit value (high 16 bits: AS).
    Communities(Vec<u32>),
    OriginatorId(Ipv4Addr),
    ClusterList(Vec<Ipv4Addr>),
    MpReach(MpReach),
    MpUnreach(MpUnreach),
    /// RFC 4360, 8 octets each.
    ExtendedCommunities(Vec<[u8; 8]>),
    As4Path(AsPath),
    As4Aggregator {
        asn: u32,
        address: Ipv4Addr,
    },
    /// RFC 8092: (global administrator, local data 1, local data 2).
    LargeCommunities(Vec<[u32; 3]>),
    Unknown {
        type_code: u8,
        data: Vec<u8>,
    },
}

impl AttrValue {
    pub fn type_code(&self) -> u8 {
        match self {
            AttrValue::Origin(_) => t::ORIGIN,
            AttrValue::AsPath(_) => t::AS_PATH,
            AttrValue::NextHop(_) => t::NEXT_HOP,
            AttrValue::Med(_) => t::MULTI_EXIT_DISC,
            AttrValue::LocalPref(_) => t::LOCAL_PREF,
            AttrValue::AtomicAggregate => t::ATOMIC_AGGREGATE,
            AttrValue::Aggregator { .. } => t::AGGREGATOR,
            AttrValue::Communities(_) => t::COMMUNITIES,
            AttrValue::OriginatorId(_) => t::ORIGINATOR_ID,
            AttrValue::ClusterList(_) => t::CLUSTER_LIST,
            AttrValue::MpReach(_) => t::MP_REACH_NLRI,
            AttrValue::MpUnreach(_) => t::MP_UNREACH_NLRI,
            AttrValue::ExtendedCommunities(_) => t::EXTENDED_COMMUNITIES,
            AttrValue::As4Path(_) => t::AS4_PATH,
            AttrValue::As4Aggregator { .. } => t::AS4_AGGREGATOR,
            AttrValue::LargeCommunities(_) => t::LARGE_COMMUNITIES,
            AttrValue::Unknown { type_code, .. } => *type_code,
        }
    }
}

/// The Optional and Transitive bits a known attribute must carry (RFC 4271 §5, RFC 4760,
/// RFC 6793, RFC 8092). `None` for attributes we do not know.
fn expected_flags(type_code: u8) -> Option<u8> {
    Some(match type_code {
        t::ORIGIN | t::AS_PATH | t::NEXT_HOP | t::LOCAL_PREF | t::ATOMIC_AGGREGATE => {
            flag::TRANSITIVE
        }
        t::MULTI_EXIT_DISC
        | t::ORIGINATOR_ID
        | t::CLUSTER_LIST
        | t::MP_REACH_NLRI
        | t::MP_UNREACH_NLRI => flag::OPTIONAL,
        t::AGGREGATOR
        | t::COMMUNITIES
        | t::EXTENDED_COMMUNITIES
        | t::AS4_PATH
        | t::AS4_AGGREGATOR
        | t::LARGE_COMMUNITIES => flag::OPTIONAL | flag::TRANSITIVE,
        _ => return None,
    })
}

/// A path attribute: the flags octet as received (so captures re-encode exactly) and a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathAttribute {
    pub flags: u8,
    pub value: AttrValue,
}

impl PathAttribute {
    /// An attribute with the flags its type requires. MP_REACH/MP_UNREACH use the extended
    /// length form so that message size arithmetic does not depend on their size.
    pub fn new(value: AttrValue) -> Self {
        let code = value.type_code();
        let mut flags = expected_flags(code).unwrap_or(flag::OPTIONAL | flag::TRANSITIVE);
        if matches!(code, t::MP_REACH_NLRI | t::MP_UNREACH_NLRI) {
            flags |= flag::EXTENDED_LENGTH;
        }
        PathAttribute { flags, value }
    }

    pub fn type_code(&self) -> u8 {
        self.value.type_code()
    }

    pub fn is_optional(&self) -> bool {
        self.flags & flag::OPTIONAL != 0
    }

    pub fn is_transitive(&self) -> bool {
        self.flags & flag::TRANSITIVE != 0
    }

    pub fn is_partial(&self) -> bool {
        self.flags & flag::PARTIAL != 0
    }

    /// Appends flags, type, length and value.
    pub(crate) fn encode(&self, opts: &WireOptions, dst: &mut BytesMut) -> Result<(), EncodeError> {
        let mut value = BytesMut::new();
        encode_value(&self.value, opts, &mut value)?;
        let len = value.len();
        let code = self.type_code();
        let mut flags = self.flags & 0xf0;
        if len > 255 {
            flags |= flag::EXTENDED_LENGTH;
        }
        dst.put_u8(flags);
        dst.put_u8(code);
        if flags & flag::EXTENDED_LENGTH != 0 {
            let len = u16::try_from(len).map_err(|_| EncodeError::AttributeTooLong {
                type_code: code,
                length: len,
            })?;
            dst.put_u16(len);
        } else {
            // len <= 255 here.
            dst.put_u8(u8::try_from(len).unwrap_or(u8::MAX));
        }
        dst.put_slice(&value);
        Ok(())
    }
}

/// What to send onwards for attributes received from a peer (RFC 4271 §5, §9.1.4): unknown
/// optional transitive attributes get the Partial bit; unknown optional non-transitive ones
/// are dropped.
pub fn for_readvertisement(attrs: &[PathAttribute]) -> Vec<PathAttribute> {
    attrs
        .iter()
        .filter_map(|a| match &a.value {
            AttrValue::Unknown { .. } if a.is_optional() && !a.is_transitive() => None,
            AttrValue::Unknown { .. } if a.is_optional() => Some(PathAttribute {
                flags: a.flags | flag::PARTIAL,
                value: a.value.clone(),
            }),
            _ => Some(a.clone()),
        })
        .collect()
}

/// What [`decode_attributes`] found.
#[derive(Debug)]
pub(crate) struct DecodedAttributes {
    pub attributes: Vec<PathAttribute>,
    /// Type codes present on the wire, malformed ones included.
    pub seen: [bool; 256],
}

/// Decodes the path attribute field. Fatal errors return `Err`; treat-as-withdraw and
/// attribute-discard errors are pushed to `errors` and the attribute is left out.
pub(crate) fn decode_attributes(
    bytes: &[u8],
    opts: &WireOptions,
    errors: &mut Vec<DecodeError>,
) -> Result<DecodedAttributes, DecodeError> {
    let mut out = DecodedAttributes {
        attributes: Vec::new(),
        seen: [false; 256],
    };
    let mut r = Reader::new(bytes);
    while !r.is_empty() {
        let start = bytes.len() - r.remaining();
        let header = (|| {
            let flags = r.u8()?;
            let code = r.u8()?;
            let len = if flags & flag::EXTENDED_LENGTH != 0 {
                usize::from(r.u16()?)
            } else {
                usize::from(r.u8()?)
            };
            Ok::<_, crate::reader::Truncated>((flags, code, len))
        })();
        let Ok((flags, code, len)) = header else {
            errors.push(DecodeError::AttributeOverrun {
                reason: "too few octets left for an attribute header",
            });
            break;
        };
        let Ok(value) = r.take(len) else {
            errors.push(DecodeError::AttributeOverrun {
                reason: "attribute length runs past the path attributes",
            });
            break;
        };
        let raw = bytes
            .get(start..start + (bytes.len() - start - r.remaining()))
            .unwrap_or_default();
        let seen = out.seen.get_mut(usize::from(code));
        if let Some(seen) = seen {
            if *seen {
                if matches!(code, t::MP_REACH_NLRI | t::MP_UNREACH_NLRI) {
                    // RFC 7606 §3 (g).
                    return Err(DecodeError::MalformedAttributeList {
                        reason: "MP_REACH_NLRI or MP_UNREACH_NLRI appears more than once",
                    });
                }
                errors.push(DecodeError::DuplicateAttribute { type_code: code });
                continue;
            }
            *seen = true;
        }
        match decode_one(flags, code, value, raw, opts) {
            // RFC 4271 §4.3: the low four flag bits are ignored on receipt.
            Ok(value) => out.attributes.push(PathAttribute {
                flags: flags & 0xf0,
                value,
            }),
            Err(e) if e.action() == crate::error::Action::SessionReset => return Err(e),
            // AFI/SAFI disable (RFC 7606 §7.11, RFC 4760 §7) leaves the attribute out and is
            // reported with the message: the caller disables the family (or resets).
            Err(e) => errors.push(e),
        }
    }
    Ok(out)
}

fn decode_one(
    flags: u8,
    code: u8,
    value: &[u8],
    raw: &[u8],
    opts: &WireOptions,
) -> Result<AttrValue, DecodeError> {
    let Some(expected) = expected_flags(code) else {
        if flags & flag::OPTIONAL == 0 {
            return Err(DecodeError::UnrecognizedWellKnownAttribute {
                type_code: code,
                attribute: raw.to_vec(),
            });
        }
        return Ok(AttrValue::Unknown {
            type_code: code,
            data: value.to_vec(),
        });
    };
    if flags & (flag::OPTIONAL | flag::TRANSITIVE) != expected {
        return Err(DecodeError::AttributeFlags {
            type_code: code,
            flags,
            attribute: raw.to_vec(),
        });
    }
    let bad_len = || DecodeError::AttributeLength {
        type_code: code,
        length: value.len(),
        attribute: raw.to_vec(),
    };
    let aggregator_as_zero = || DecodeError::AggregatorAsZero {
        type_code: code,
        attribute: raw.to_vec(),
    };
    let from_new_speaker = || DecodeError::As4AttributeFromNewSpeaker {
        type_code: code,
        attribute: raw.to_vec(),
    };
    let exact = |n: usize| {
        if value.len() == n {
            Ok(())
        } else {
            Err(bad_len())
        }
    };
    // RFC 7606 §7: lists must be non-empty multiples of their element size.
    let multiple = |n: usize| {
        if !value.is_empty() && value.len().is_multiple_of(n) {
            Ok(())
        } else {
            Err(bad_len())
        }
    };
    let mut r = Reader::new(value);
    let v = match code {
        t::ORIGIN => {
            exact(1)?;
            match r.u8().map_err(|_| bad_len())? {
                origin::IGP => AttrValue::Origin(Origin::Igp),
                origin::EGP => AttrValue::Origin(Origin::Egp),
                origin::INCOMPLETE => AttrValue::Origin(Origin::Incomplete),
                other => {
                    return Err(DecodeError::InvalidOrigin {
                        value: other,
                        attribute: raw.to_vec(),
                    });
                }
            }
        }
        t::AS_PATH => {
            let path = AsPath::decode(value, opts.four_octet_as)
                .and_then(no_as_zero)
                .map_err(|reason| DecodeError::MalformedAsPath {
                    reason,
                    attribute: raw.to_vec(),
                })?;
            AttrValue::AsPath(path)
        }
        t::AS4_PATH => {
            if opts.four_octet_as {
                return Err(from_new_speaker());
            }
            if value.is_empty() {
                return Err(bad_len());
            }
            let path = AsPath::decode(value, true)
                .and_then(no_as_zero)
                .map_err(|reason| DecodeError::MalformedAs4Path {
                    reason,
                    attribute: raw.to_vec(),
                })?;
            AttrValue::As4Path(path)
        }
        t::NEXT_HOP => {
            exact(4)?;
            AttrValue::NextHop(r.ipv4().map_err(|_| bad_len())?)
        }
        t::MULTI_EXIT_DISC => {
            exact(4)?;
            AttrValue::Med(r.u32().map_err(|_| bad_len())?)
        }
        t::LOCAL_PREF => {
            exact(4)?;
            AttrValue::LocalPref(r.u32().map_err(|_| bad_len())?)
        }
        t::ATOMIC_AGGREGATE => {
            exact(0)?;
            AttrValue::AtomicAggregate
        }
        t::AGGREGATOR => {
            exact(if opts.four_octet_as { 8 } else { 6 })?;
            let asn = if opts.four_octet_as {
                r.u32()
            } else {
                r.u16().map(u32::from)
            }
            .map_err(|_| bad_len())?;
            let address = r.ipv4().map_err(|_| bad_len())?;
            if asn == 0 {
                return Err(aggregator_as_zero());
            }
            AttrValue::Aggregator { asn, address }
        }
        t::AS4_AGGREGATOR => {
            if opts.four_octet_as {
                return Err(from_new_speaker());
            }
            exact(8)?;
            let asn = r.u32().map_err(|_| bad_len())?;
            let address = r.ipv4().map_err(|_| bad_len())?;
            if asn == 0 {
                return Err(aggregator_as_zero());
            }
            AttrValue::As4Aggregator { asn, address }
        }
        t::COMMUNITIES => {
            multiple(4)?;
            let mut c = Vec::with_capacity(value.len() / 4);
            while !r.is_empty() {
                c.push(r.u32().map_err(|_| bad_len())?);
            }
            AttrValue::Communities(c)
        }
        t::ORIGINATOR_ID => {
            exact(4)?;
            AttrValue::OriginatorId(r.ipv4().map_err(|_| bad_len())?)
        }
        t::CLUSTER_LIST => {
            multiple(4)?;
            let mut c = Vec::with_capacity(value.len() / 4);
            while !r.is_empty() {
                c.push(r.ipv4().map_err(|_| bad_len())?);
            }
            AttrValue::ClusterList(c)
        }
        t::EXTENDED_COMMUNITIES => {
            multiple(8)?;
            let mut c = Vec::with_capacity(value.len() / 8);
            while !r.is_empty() {
                c.push(r.array::<8>().map_err(|_| bad_len())?);
            }
            AttrValue::ExtendedCommunities(c)
        }
        t::LARGE_COMMUNITIES => {
            multiple(12)?;
            let mut c = Vec::with_capacity(value.len() / 12);
            while !r.is_empty() {
                let g = r.u32().map_err(|_| bad_len())?;
                let l1 = r.u32().map_err(|_| bad_len())?;
                let l2 = r.u32().map_err(|_| bad_len())?;
                c.push([g, l1, l2]);
            }
            AttrValue::LargeCommunities(c)
        }
        t::MP_REACH_NLRI => AttrValue::MpReach(MpReach::decode(value, raw)?),
        t::MP_UNREACH_NLRI => AttrValue::MpUnreach(MpUnreach::decode(value, raw)?),
        _ => AttrValue::Unknown {
            type_code: code,
            data: value.to_vec(),
        },
    };
    Ok(v)
}

fn encode_value(
    value: &AttrValue,
    opts: &WireOptions,
    dst: &mut BytesMut,
) -> Result<(), EncodeError> {
    match value {
        AttrValue::Origin(o) => dst.put_u8(match o {
            Origin::Igp => origin::IGP,
            Origin::Egp => origin::EGP,
            Origin::Incomplete => origin::INCOMPLETE,
        }),
        AttrValue::AsPath(p) => p.encode(dst, opts.four_octet_as)?,
        AttrValue::As4Path(p) => p.encode(dst, true)?,
        AttrValue::NextHop(a) | AttrValue::OriginatorId(a) => dst.put_slice(&a.octets()),
        AttrValue::Med(v) | AttrValue::LocalPref(v) => dst.put_u32(*v),
        AttrValue::AtomicAggregate => {}
        AttrValue::Aggregator { asn, address } => {
            if opts.four_octet_as {
                dst.put_u32(*asn);
            } else {
                let two = u16::try_from(*asn)
                    .map_err(|_| EncodeError::AsnNeedsFourOctets { asn: *asn })?;
                dst.put_u16(two);
            }
            dst.put_slice(&address.octets());
        }
        AttrValue::As4Aggregator { asn, address } => {
            dst.put_u32(*asn);
            dst.put_slice(&address.octets());
        }
        AttrValue::Communities(c) => c.iter().for_each(|v| dst.put_u32(*v)),
        AttrValue::ClusterList(c) => c.iter().for_each(|a| dst.put_slice(&a.octets())),
        AttrValue::ExtendedCommunities(c) => c.iter().for_each(|v| dst.put_slice(v)),
        AttrValue::LargeCommunities(c) => c.iter().flatten().for_each(|v| dst.put_u32(*v)),
        AttrValue::MpReach(m) => m.encode(dst)?,
        AttrValue::MpUnreach(m) => m.encode(dst),
        AttrValue::Unknown { data, .. } => dst.put_slice(data),
    }
    Ok(())
}

/// `65000:100`
pub fn format_community(c: u32) -> String {
    format!("{}:{}", c >> 16, c & 0xffff)
}

/// `4200000001:1:1`
pub fn format_large_community(c: &[u32; 3]) -> String {
    format!("{}:{}:{}", c[0], c[1], c[2])
}

/// RFC 4360/5668/7153 route target and route origin in their usual text forms; other
/// extended communities as 16 hex digits.
pub fn format_extended_community(c: &[u8; 8]) -> String {
    let [typ, sub, a, b, c2, d, e, f] = *c;
    let kind = match sub {
        0x02 => Some("rt"),
        0x03 => Some("soo"),
        _ => None,
    };
    match (typ & 0xbf, kind) {
        (0x00, Some(k)) => format!(
            "{k}:{}:{}",
            u16::from_be_bytes([a, b]),
            u32::from_be_bytes([c2, d, e, f])
        ),
        (0x01, Some(k)) => format!(
            "{k}:{}.{}.{}.{}:{}",
            a,
            b,
            c2,
            d,
            u16::from_be_bytes([e, f])
        ),
        (0x02, Some(k)) => format!(
            "{k}:{}:{}",
            u32::from_be_bytes([a, b, c2, d]),
            u16::from_be_bytes([e, f])
        ),
        _ => c.iter().map(|x| format!("{x:02x}")).collect(),
    }
}

/// RFC 7607 §2: AS 0 must never appear in a path.
fn no_as_zero(path: AsPath) -> Result<AsPath, &'static str> {
    if path.segments.iter().any(|s| s.asns.contains(&0)) {
        Err("contains AS 0 (RFC 7607)")
    } else {
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_optional_transitive_gets_partial_bit_rfc4271_5() {
        let unknown_t = PathAttribute {
            flags: flag::OPTIONAL | flag::TRANSITIVE,
            value: AttrValue::Unknown {
                type_code: 99,
                data: vec![1],
            },
        };
        let unknown_nt = PathAttribute {
            flags: flag::OPTIONAL,
            value: AttrValue::Unknown {
                type_code: 98,
                data: vec![2],
            },
        };
        let med = PathAttribute::new(AttrValue::Med(5));
        let out = for_readvertisement(&[unknown_t, unknown_nt, med.clone()]);
        assert_eq!(out.len(), 2);
        assert!(out[0].is_partial());
        assert_eq!(out[1], med);
    }

    #[test]
    fn extended_community_text_forms() {
        assert_eq!(
            format_extended_community(&[0, 2, 0xfd, 0xe8, 0, 0, 0, 100]),
            "rt:65000:100"
        );
        assert_eq!(
            format_extended_community(&[2, 2, 0xfa, 0x56, 0xea, 0x01, 0, 7]),
            "rt:4200000001:7"
        );
        assert_eq!(
            format_extended_community(&[0x80, 6, 0, 0, 0, 0, 0, 0]),
            "8006000000000000"
        );
    }
}
