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

/// Seconds from `300` (bare: seconds), `90s`, `5m` or `1h`: the one duration syntax of config
/// keys and command-line flags. A single unit, no fractions: these are timer settings, and a
/// compound like `1h30m` is easier to get wrong than to write as `90m`.
pub fn parse_seconds(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 300, 90s, 5m, 1h)"))?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use s, m or h)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// A duration key: seconds as a number, or a string with a unit (`"90s"`, `"5m"`, `"1h"`),
/// within `lo..=hi` seconds.
pub(crate) fn seconds(
    n: Node<'_, '_>,
    lo: u64,
    hi: u64,
    rule: &str,
    errs: &mut Errors,
) -> Option<u64> {
    match n.value {
        // Quoted digits get int's "remove the quotes"; any other string is read with units.
        serde_json::Value::String(s) if !s.bytes().all(|b| b.is_ascii_digit()) => {
            match parse_seconds(s) {
                Ok(v) if (lo..=hi).contains(&v) => Some(v),
                Ok(_) => {
                    errs.not_allowed(n.path, crate::error::show(n.value), rule);
                    None
                }
                Err(e) => {
                    errs.push(n.path, e);
                    None
                }
            }
        }
        _ => n.int(lo, hi, rule, errs),
    }
}
