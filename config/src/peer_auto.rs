//! `peers[i].address: default-gateway` (+ `addressFamily`) and `peers[i].asn: auto`
//! (+ `allowedAsns`): one peer entry that fits every node.

use std::net::IpAddr;
use std::ops::RangeInclusive;

use bgp_proto::AS_TRANS;

use crate::error::{Errors, quoted, show};
use crate::fields::{is_unicast, parse_asn};
use crate::model::{AddrFamily, PeerAddress, PeerAsn};
use crate::tree::{Lookup, Node, Obj, node};

pub(crate) const DEFAULT_GATEWAY: &str = "default-gateway";
pub(crate) const AUTO: &str = "auto";

/// `address` (an IP or `default-gateway`) with `addressFamily` (only with
/// `default-gateway`; default ipv4).
pub(crate) fn peer_address(obj: &Obj<'_>, errs: &mut Errors) -> Option<PeerAddress> {
    let address =
        Lookup::of(obj, "address", errs, parse_address).required(&obj.key_path("address"), errs);
    let family = Lookup::of(obj, "addressFamily", errs, parse_family);
    match (address?, family) {
        (None, Lookup::Valid(f)) => Some(PeerAddress::DefaultGateway(f)),
        (None, Lookup::Absent) => Some(PeerAddress::DefaultGateway(AddrFamily::Ipv4)),
        (None, Lookup::Invalid) => None,
        (Some(ip), Lookup::Absent) => Some(PeerAddress::Fixed(ip)),
        (Some(ip), Lookup::Valid(f)) => {
            errs.not_allowed(
                &obj.key_path("addressFamily"),
                quoted(f.as_str()),
                &format!("only with address: {DEFAULT_GATEWAY}; {ip} has its own family"),
            );
            None
        }
        (Some(_), Lookup::Invalid) => None,
    }
}

/// `Some(None)`: `default-gateway`.
fn parse_address(n: Node<'_, '_>, errs: &mut Errors) -> Option<Option<IpAddr>> {
    let text = n.parse("an IP address or default-gateway", errs, |s| {
        Ok(s.to_owned())
    })?;
    if text == DEFAULT_GATEWAY {
        return Some(None);
    }
    let Ok(addr) = text.parse::<IpAddr>() else {
        errs.push(
            n.path,
            format!(
                "{} is not an IP address or {DEFAULT_GATEWAY}",
                show(n.value)
            ),
        );
        return None;
    };
    let rule = match addr {
        a if !is_unicast(a) => "a unicast address",
        IpAddr::V6(v6) if v6.is_unicast_link_local() => {
            "a link-local peer needs its interface: use interface and peerAddress instead"
        }
        _ => return Some(Some(addr)),
    };
    errs.not_allowed(n.path, quoted(&addr.to_string()), rule);
    None
}

fn parse_family(n: Node<'_, '_>, errs: &mut Errors) -> Option<AddrFamily> {
    n.parse("an address family", errs, |s| match s {
        "ipv4" => Ok(AddrFamily::Ipv4),
        "ipv6" => Ok(AddrFamily::Ipv6),
        _ => Err("is not one of ipv4, ipv6".to_owned()),
    })
}

/// `asn` (a number or `auto`) with `allowedAsns` (required with `auto`, refused otherwise).
pub(crate) fn peer_asn(obj: &Obj<'_>, errs: &mut Errors) -> Option<PeerAsn> {
    let asn = Lookup::of(obj, "asn", errs, |n, e| match n.value.as_str() {
        Some(AUTO) => Some(None),
        // Quoted digits get parse_asn's "remove the quotes".
        Some(s) if !s.bytes().all(|b| b.is_ascii_digit()) => {
            e.push(
                n.path,
                format!("{} is not an AS number or {AUTO}", show(n.value)),
            );
            None
        }
        _ => parse_asn(n, e).map(Some),
    })
    .required(&obj.key_path("asn"), errs);
    let allowed = Lookup::of(obj, "allowedAsns", errs, parse_ranges);
    let path = obj.key_path("allowedAsns");
    match (asn?, allowed) {
        (None, Lookup::Valid(r)) => Some(PeerAsn::Auto(r)),
        (None, Lookup::Absent) => {
            errs.push(
                &path,
                "required with asn: auto (the AS numbers or ranges a peer may have, \
                 e.g. [65000-65100, 64512])",
            );
            None
        }
        (Some(a), Lookup::Absent) => Some(PeerAsn::Fixed(a)),
        (Some(a), Lookup::Valid(_)) => {
            errs.push(
                &path,
                format!("only with asn: auto; this peer's asn is {}", a.0),
            );
            None
        }
        (_, Lookup::Invalid) => None,
    }
}

const RANGE_RULE: &str = "an AS number 1..4294967295 or a range like \"65000-65100\"";

/// A non-empty list of AS numbers and `first-last` ranges.
fn parse_ranges(n: Node<'_, '_>, errs: &mut Errors) -> Option<Vec<RangeInclusive<u32>>> {
    let items = n.list(errs)?;
    if items.is_empty() {
        errs.push(n.path, format!("must not be empty ({RANGE_RULE})"));
        return None;
    }
    let before = errs.0.len();
    let mut out = Vec::new();
    for item in &items {
        if let Some(r) = parse_range(node(item), errs) {
            out.push(r);
        }
    }
    (errs.0.len() == before).then_some(out)
}

fn parse_range(n: Node<'_, '_>, errs: &mut Errors) -> Option<RangeInclusive<u32>> {
    if n.value.is_number() {
        return parse_asn(n, errs).map(|a| a.0..=a.0);
    }
    n.parse(RANGE_RULE, errs, |s| {
        let bound = |b: &str| match b.trim().parse::<u32>() {
            Ok(0) => Err("has AS 0, which is reserved (RFC 7607)".to_owned()),
            Ok(v) if v == u32::from(AS_TRANS) => {
                Err("has AS_TRANS 23456, which is reserved by RFC 6793".to_owned())
            }
            Ok(v) => Ok(v),
            Err(_) => Err(format!("is not {RANGE_RULE}")),
        };
        let (first, last) = match s.split_once('-') {
            Some((a, b)) => (bound(a)?, bound(b)?),
            None => {
                let v = bound(s)?;
                (v, v)
            }
        };
        if first > last {
            return Err(format!("is an empty range ({first} is above {last})"));
        }
        Ok(first..=last)
    })
}
