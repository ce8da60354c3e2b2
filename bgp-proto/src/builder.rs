//! Packs many prefixes with one set of attributes into as few UPDATEs as fit the negotiated
//! message size. Never truncates: attributes too large for even one prefix are an error.

use std::net::Ipv4Addr;

use bytes::BytesMut;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::error::EncodeError;
use crate::iana::attr_type as t;
use crate::message::attribute::{AttrValue, PathAttribute};
use crate::message::prefix;
use crate::message::update::{MpNextHop, MpNlri, MpReach, MpUnreach, Update};
use crate::message::{HEADER_LEN, WireOptions};
use crate::types::{Afi, Family};

/// Header plus the two length fields of an UPDATE.
const UPDATE_FIXED: usize = HEADER_LEN + 4;
/// MP attribute header in extended-length form, plus AFI and SAFI.
const MP_FIXED: usize = 4 + 3;

fn base_attributes(
    attrs: &[PathAttribute],
    opts: &WireOptions,
) -> Result<(Vec<PathAttribute>, usize), EncodeError> {
    let kept: Vec<PathAttribute> = attrs
        .iter()
        .filter(|a| {
            !matches!(
                a.type_code(),
                t::NEXT_HOP | t::MP_REACH_NLRI | t::MP_UNREACH_NLRI
            )
        })
        .cloned()
        .collect();
    let mut buf = BytesMut::new();
    for a in &kept {
        a.encode(opts, &mut buf)?;
    }
    Ok((kept, buf.len()))
}

/// Splits `items` greedily into chunks whose encoded size fits `room`.
fn chunks<T>(
    items: &[T],
    room: usize,
    size: impl Fn(&T) -> usize,
) -> Result<Vec<&[T]>, EncodeError> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut used = 0;
    for (i, item) in items.iter().enumerate() {
        let s = size(item);
        if s > room {
            return Err(EncodeError::AttributesTooLarge { length: room });
        }
        if used + s > room {
            out.push(items.get(start..i).unwrap_or_default());
            start = i;
            used = 0;
        }
        used += s;
    }
    if start < items.len() {
        out.push(items.get(start..).unwrap_or_default());
    }
    Ok(out)
}

fn room(max: usize, fixed: usize) -> Result<usize, EncodeError> {
    max.checked_sub(fixed)
        .filter(|r| *r > 0)
        .ok_or(EncodeError::AttributesTooLarge { length: fixed })
}

/// IPv4 prefixes in the NLRI field with a NEXT_HOP attribute (RFC 4271).
/// `attrs` must not carry NEXT_HOP or MP attributes; any such are ignored.
pub fn announce_ipv4(
    attrs: &[PathAttribute],
    next_hop: Ipv4Addr,
    prefixes: &[Ipv4Net],
    opts: &WireOptions,
) -> Result<Vec<Update>, EncodeError> {
    let (mut base, base_len) = base_attributes(attrs, opts)?;
    base.push(PathAttribute::new(AttrValue::NextHop(next_hop)));
    let room = room(opts.max_message_len(), UPDATE_FIXED + base_len + 7)?;
    Ok(
        chunks(prefixes, room, |p| prefix::encoded_len(p.prefix_len()))?
            .into_iter()
            .map(|c| Update {
                withdrawn: Vec::new(),
                attributes: base.clone(),
                nlri: c.to_vec(),
            })
            .collect(),
    )
}

fn mp_next_hop_len(nh: &MpNextHop) -> usize {
    match nh {
        MpNextHop::Ipv4(_) => 4,
        MpNextHop::Ipv6 { link_local, .. } => {
            if link_local.is_some() {
                32
            } else {
                16
            }
        }
        MpNextHop::Other(raw) => raw.len(),
    }
}

/// Prefixes in MP_REACH_NLRI (RFC 4760): IPv6 unicast, or IPv4 unicast with an IPv6 next hop
/// (RFC 8950, only when the peer negotiated extended next hop).
pub fn announce_mp(
    attrs: &[PathAttribute],
    family: Family,
    next_hop: &MpNextHop,
    prefixes: &[IpNet],
    opts: &WireOptions,
) -> Result<Vec<Update>, EncodeError> {
    if family == Family::IPV6_UNICAST && !matches!(next_hop, MpNextHop::Ipv6 { .. }) {
        return Err(EncodeError::NextHopFamily {
            reason: "IPv6 unicast needs an IPv6 next hop",
        });
    }
    let (base, base_len) = base_attributes(attrs, opts)?;
    let fixed = UPDATE_FIXED + base_len + MP_FIXED + 1 + mp_next_hop_len(next_hop) + 1;
    let room = room(opts.max_message_len(), fixed)?;
    let nlri = family_nlri(family, prefixes)?;
    let mut out = Vec::new();
    match &nlri {
        MpNlri::Ipv4(v) => {
            for c in chunks(v, room, |p| prefix::encoded_len(p.prefix_len()))? {
                out.push(mp_update(&base, family, next_hop, MpNlri::Ipv4(c.to_vec())));
            }
        }
        MpNlri::Ipv6(v) => {
            for c in chunks(v, room, |p| prefix::encoded_len(p.prefix_len()))? {
                out.push(mp_update(&base, family, next_hop, MpNlri::Ipv6(c.to_vec())));
            }
        }
        MpNlri::Other(_) => {}
    }
    Ok(out)
}

fn mp_update(base: &[PathAttribute], family: Family, next_hop: &MpNextHop, nlri: MpNlri) -> Update {
    // RFC 7606 §5.1: MP_REACH_NLRI first, so a receiver finds the NLRI even if later
    // attributes are malformed.
    let mut attributes = Vec::with_capacity(base.len() + 1);
    attributes.push(PathAttribute::new(AttrValue::MpReach(MpReach {
        family,
        next_hop: next_hop.clone(),
        nlri,
    })));
    attributes.extend_from_slice(base);
    Update {
        withdrawn: Vec::new(),
        attributes,
        nlri: Vec::new(),
    }
}

fn family_nlri(family: Family, prefixes: &[IpNet]) -> Result<MpNlri, EncodeError> {
    let mismatch = EncodeError::NextHopFamily {
        reason: "prefix family differs from the AFI",
    };
    match family.afi {
        Afi::IPV4 => prefixes
            .iter()
            .map(|p| match p {
                IpNet::V4(v) => Ok(*v),
                IpNet::V6(_) => Err(mismatch.clone()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(MpNlri::Ipv4),
        Afi::IPV6 => prefixes
            .iter()
            .map(|p| match p {
                IpNet::V6(v) => Ok(*v),
                IpNet::V4(_) => Err(mismatch.clone()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(MpNlri::Ipv6),
        _ => Err(mismatch),
    }
}

/// Withdrawals: IPv4 in the withdrawn routes field, IPv6 in MP_UNREACH_NLRI.
pub fn withdraw(prefixes: &[IpNet], opts: &WireOptions) -> Result<Vec<Update>, EncodeError> {
    let v4: Vec<Ipv4Net> = prefixes
        .iter()
        .filter_map(|p| match p {
            IpNet::V4(v) => Some(*v),
            IpNet::V6(_) => None,
        })
        .collect();
    let v6: Vec<Ipv6Net> = prefixes
        .iter()
        .filter_map(|p| match p {
            IpNet::V6(v) => Some(*v),
            IpNet::V4(_) => None,
        })
        .collect();
    let mut out = Vec::new();
    let max = opts.max_message_len();
    for c in chunks(&v4, room(max, UPDATE_FIXED)?, |p| {
        prefix::encoded_len(p.prefix_len())
    })? {
        out.push(Update {
            withdrawn: c.to_vec(),
            ..Update::default()
        });
    }
    for c in chunks(&v6, room(max, UPDATE_FIXED + MP_FIXED)?, |p| {
        prefix::encoded_len(p.prefix_len())
    })? {
        out.push(Update {
            attributes: vec![PathAttribute::new(AttrValue::MpUnreach(MpUnreach {
                family: Family::IPV6_UNICAST,
                withdrawn: MpNlri::Ipv6(c.to_vec()),
            }))],
            ..Update::default()
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::message::attribute::{AsPath, Origin};

    fn attrs() -> Vec<PathAttribute> {
        vec![
            PathAttribute::new(AttrValue::Origin(Origin::Igp)),
            PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![4_200_000_001]))),
        ]
    }

    fn v4_prefixes(n: u32) -> Vec<Ipv4Net> {
        (0..n)
            .map(|i| Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (i << 6)), 26).unwrap())
            .collect()
    }

    #[test]
    fn every_packed_update_fits_the_message_size() {
        let opts = WireOptions::four_octet();
        let prefixes = v4_prefixes(10_000);
        let updates =
            announce_ipv4(&attrs(), Ipv4Addr::new(192, 0, 2, 1), &prefixes, &opts).unwrap();
        let mut total = 0;
        for u in &updates {
            let len = Message::Update(u.clone()).to_bytes(&opts).unwrap().len();
            assert!(len <= 4096, "{len}");
            total += u.nlri.len();
        }
        assert_eq!(total, 10_000);
        // 5 bytes per /26: about 800 per message.
        assert!(updates.len() <= 13, "{}", updates.len());
    }

    #[test]
    fn withdrawals_fill_messages_to_the_limit() {
        let opts = WireOptions::four_octet();
        let prefixes: Vec<IpNet> = v4_prefixes(2_000).into_iter().map(IpNet::V4).collect();
        let updates = withdraw(&prefixes, &opts).unwrap();
        let first = Message::Update(updates[0].clone())
            .to_bytes(&opts)
            .unwrap()
            .len();
        assert!(first > 4096 - 5 && first <= 4096, "{first}");
    }

    #[test]
    fn ipv6_without_ipv6_next_hop_is_refused() {
        let opts = WireOptions::four_octet();
        let p: Vec<IpNet> = vec!["fd00::/64".parse().unwrap()];
        let nh = MpNextHop::Ipv4(Ipv4Addr::new(192, 0, 2, 1));
        assert!(announce_mp(&attrs(), Family::IPV6_UNICAST, &nh, &p, &opts).is_err());
    }

    #[test]
    fn oversized_attributes_are_an_error_not_a_truncation() {
        let opts = WireOptions::four_octet();
        let mut a = attrs();
        a.push(PathAttribute::new(AttrValue::Communities(vec![1; 1100])));
        let r = announce_ipv4(&a, Ipv4Addr::new(192, 0, 2, 1), &v4_prefixes(1), &opts);
        assert!(matches!(r, Err(EncodeError::AttributesTooLarge { .. })));
    }
}
