//! `peers[i].address` (an address or `default-gateway`, see `peer_auto`) or
//! `peers[i].interface` (+ `peerAddress`): where the neighbor is.

use std::net::{IpAddr, Ipv6Addr};

use crate::error::{Errors, quoted, show};
use crate::model::PeerAddress;
use crate::tree::{Lookup, Node, Obj};

/// Linux `IFNAMSIZ` less the terminating NUL.
const MAX_INTERFACE_NAME: usize = 15;

/// Exactly one of `address` and `interface`; `peerAddress` only with `interface` (without
/// it the neighbor is discovered from the kernel's neighbor table).
pub(crate) fn parse_endpoint(obj: &Obj<'_>, errs: &mut Errors) -> Option<PeerAddress> {
    let path = |key: &str| obj.key_path(key);
    let interface = Lookup::of(obj, "interface", errs, parse_interface).optional();
    let peer = Lookup::of(obj, "peerAddress", errs, parse_link_local).optional();
    if obj.get("address").is_some() && obj.get("interface").is_some() {
        errs.push(
            &path("interface"),
            format!(
                "cannot be set together with {}: a peer is either at a fixed address or the \
                 neighbor on an interface; remove one",
                path("address")
            ),
        );
        return None;
    }
    if let Some((p, v)) = obj.get("peerAddress")
        && obj.get("interface").is_none()
    {
        errs.not_allowed(
            &p,
            show(v),
            "peerAddress names the neighbor on an interface; set interface too, or use address",
        );
        return None;
    }
    if obj.get("address").is_some() {
        return crate::peer_auto::peer_address(obj, errs);
    }
    if obj.get("interface").is_none() {
        errs.push(&path("address"), "required");
        return None;
    }
    if let Some((p, v)) = obj.get("addressFamily") {
        errs.not_allowed(
            &p,
            show(v),
            "only with address: default-gateway; an interface peer is IPv6 link-local",
        );
        return None;
    }
    let name = interface.flatten()?;
    Some(PeerAddress::Interface { name, peer: peer? })
}

fn parse_ip(n: Node<'_, '_>, errs: &mut Errors) -> Option<IpAddr> {
    n.parse("an IP address", errs, |s| {
        s.parse::<IpAddr>()
            .map_err(|_| "is not an IP address".to_owned())
    })
}

fn parse_link_local(n: Node<'_, '_>, errs: &mut Errors) -> Option<Ipv6Addr> {
    let addr = parse_ip(n, errs)?;
    match addr {
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Some(v6),
        _ => {
            errs.not_allowed(
                n.path,
                quoted(&addr.to_string()),
                "peerAddress must be an IPv6 link-local (fe80::/10) address; use address for any other",
            );
            None
        }
    }
}

fn parse_interface(n: Node<'_, '_>, errs: &mut Errors) -> Option<String> {
    let name = n.parse("an interface name", errs, |s| Ok(s.to_owned()))?;
    let valid = !name.is_empty()
        && name.len() <= MAX_INTERFACE_NAME
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c == '%' || c.is_whitespace() || c.is_control());
    if !valid {
        errs.not_allowed(
            n.path,
            quoted(&name),
            "an interface name is 1..15 characters without '/', ':', '%' or whitespace",
        );
        return None;
    }
    Some(name)
}
