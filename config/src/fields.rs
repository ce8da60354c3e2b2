//! Field parsers shared by the top level ([`crate::validate`]) and `peers[i]`
//! ([`crate::peer`]): AS numbers, file paths and unicast addresses.

use std::net::IpAddr;
use std::path::PathBuf;

use bgp_proto::{AS_TRANS, Asn};

use crate::error::Errors;
use crate::tree::Node;

pub(crate) const ASN_RULE: &str = "1..4294967295 except 23456";

/// Local or peer AS: 4-octet, non-zero, and not AS_TRANS.
pub(crate) fn parse_asn(n: Node<'_, '_>, errs: &mut Errors) -> Option<Asn> {
    let v = n.int(1, u64::from(u32::MAX), ASN_RULE, errs)?;
    if v == u64::from(AS_TRANS) {
        errs.not_allowed(n.path, v, "AS_TRANS is reserved by RFC 6793");
        return None;
    }
    u32::try_from(v).ok().map(Asn)
}

/// A non-empty file path.
pub(crate) fn parse_path(n: Node<'_, '_>, errs: &mut Errors) -> Option<PathBuf> {
    let s = n.parse("a file path", errs, |s| Ok(s.to_owned()))?;
    if s.trim().is_empty() {
        errs.push(n.path, "must not be empty");
        return None;
    }
    Some(PathBuf::from(s))
}

/// Neither unspecified, multicast nor broadcast: usable as a peer or next hop.
pub(crate) fn is_unicast(addr: IpAddr) -> bool {
    let broadcast = matches!(addr, IpAddr::V4(v4) if v4.is_broadcast());
    !(addr.is_unspecified() || addr.is_multicast() || broadcast)
}
