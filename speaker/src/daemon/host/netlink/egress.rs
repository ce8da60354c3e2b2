//! The routes of ours (`egress.followSessions`, decided by `core::egress`): `0.0.0.0/1` and
//! `128.0.0.0/1` (`::/1`, `8000::/1`) in the main table with protocol [`PROTOCOL`], one
//! next hop per live uplink. The message builders are pure; [`set`] and [`read`] are the thin
//! socket around them. The node's own default route is never written.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::route::{self, RouteEntry};
use super::{NLM_F_REQUEST, NLMSG_HDRLEN, align4};
use crate::daemon::core::egress::{EgressRoutes, NextHop};

/// Our rtnetlink protocol number (`RTPROT_*`; `ip route show proto 179`): what marks a route
/// as the speaker's, for the next process to adopt and for operators to find. 179, the BGP
/// port, is in no `rt_protos` list of iproute2, BIRD, FRR or the CNIs we know.
pub const PROTOCOL: u8 = 179;
/// The metric of our routes. They win by prefix length, not metric; a distinct metric keeps
/// a replace from touching another owner's `/1` route (a VPN's) of metric 0.
pub const METRIC: u32 = 179;

/// linux/rtnetlink.h, linux/netlink.h.
const RTM_NEWROUTE: u16 = 24;
const RTM_DELROUTE: u16 = 25;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;
const RT_TABLE_MAIN: u8 = 254;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RT_SCOPE_NOWHERE: u8 = 255;
const RTN_UNICAST: u8 = 1;
const RTA_DST: u16 = 1;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_MULTIPATH: u16 = 9;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// The two halves of the address space of a family.
fn halves(v6: bool) -> [IpAddr; 2] {
    if v6 {
        [
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            IpAddr::V6(Ipv6Addr::new(0x8000, 0, 0, 0, 0, 0, 0, 0)),
        ]
    } else {
        [
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V4(Ipv4Addr::new(128, 0, 0, 0)),
        ]
    }
}

fn octets(a: &IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn attribute(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
    let len = 4 + data.len();
    out.extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(data);
    out.resize(align4(out.len()), 0);
}

/// One route message: header, rtmsg, attributes.
fn message(kind: u16, flags: u16, dst: &IpAddr, scope: u8, attrs: &[u8]) -> Vec<u8> {
    let family = if dst.is_ipv6() { AF_INET6 } else { AF_INET };
    let mut body = vec![
        family,
        1, // dst_len
        0, // src_len
        0, // tos
        RT_TABLE_MAIN,
        PROTOCOL,
        scope,
        RTN_UNICAST,
    ];
    body.extend_from_slice(&0u32.to_ne_bytes()); // rtm_flags
    attribute(&mut body, RTA_DST, &octets(dst));
    attribute(&mut body, RTA_PRIORITY, &METRIC.to_ne_bytes());
    body.extend_from_slice(attrs);
    let len = NLMSG_HDRLEN + body.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK | flags).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid
    m.extend_from_slice(&body);
    m
}

/// `RTM_NEWROUTE` (create or replace) of `dst`/1 through `hops` (`(gateway, ifindex)`), as
/// one `RTA_MULTIPATH` route.
pub fn replace_request(dst: &IpAddr, hops: &[(IpAddr, u32)]) -> Vec<u8> {
    let mut multipath = Vec::new();
    for (via, ifindex) in hops {
        // struct rtnexthop { u16 len; u8 flags; u8 hops; i32 ifindex; } + RTA_GATEWAY.
        let mut gateway = Vec::new();
        attribute(&mut gateway, RTA_GATEWAY, &octets(via));
        let len = 8 + gateway.len();
        multipath.extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_ne_bytes());
        multipath.push(0);
        multipath.push(0);
        multipath.extend_from_slice(&ifindex.to_ne_bytes());
        multipath.extend_from_slice(&gateway);
    }
    let mut attrs = Vec::new();
    attribute(&mut attrs, RTA_MULTIPATH, &multipath);
    message(
        RTM_NEWROUTE,
        NLM_F_CREATE | NLM_F_REPLACE,
        dst,
        RT_SCOPE_UNIVERSE,
        &attrs,
    )
}

/// `RTM_DELROUTE` of our `dst`/1 (protocol and metric must match: never another owner's).
pub fn delete_request(dst: &IpAddr) -> Vec<u8> {
    message(RTM_DELROUTE, 0, dst, RT_SCOPE_NOWHERE, &[])
}

/// Makes the routes of ours what `routes` says: each family's two halves through its next
/// hops, or none.
pub fn set(routes: &EgressRoutes) -> io::Result<()> {
    for (v6, hops) in [(false, &routes.ipv4), (true, &routes.ipv6)] {
        if hops.is_empty() {
            for dst in halves(v6) {
                delete(&dst)?;
            }
            continue;
        }
        let hops: Vec<(IpAddr, u32)> = hops
            .iter()
            .map(|h| {
                bgp_io::transport::interface_index(&h.dev)
                    .map(|i| (h.via, i))
                    .map_err(|e| io::Error::new(e.kind(), format!("interface {}: {e}", h.dev)))
            })
            .collect::<io::Result<_>>()?;
        for dst in halves(v6) {
            super::request(&replace_request(&dst, &hops))?;
        }
    }
    Ok(())
}

/// Deletes every route of ours at `dst`/1 (an IPv6 multipath route may go one sibling at a
/// time): until the kernel has none (ESRCH/ENOENT), at most 64 times.
fn delete(dst: &IpAddr) -> io::Result<()> {
    for _ in 0..64 {
        match super::request(&delete_request(dst)) {
            Ok(()) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ESRCH | libc::ENOENT)) => {
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!("{dst}/1 still there")))
}

/// The routes of ours as the main-table entries of a dump give them: each family's lower
/// half's next hops; when the halves differ (one written, one not), both halves' (so the
/// core, which never asks for that, writes them again).
pub fn installed(entries: &[RouteEntry], names: impl Fn(u32) -> String) -> EgressRoutes {
    let mut by_dst: BTreeMap<(bool, bool), Vec<NextHop>> = BTreeMap::new();
    for e in entries {
        let (Some(dst), Some(via)) = (e.dst, e.via) else {
            continue;
        };
        if e.protocol != PROTOCOL || e.dst_len != 1 || e.metric != METRIC {
            continue;
        }
        let v6 = dst.is_ipv6();
        let upper = dst != halves(v6)[0];
        let hop = NextHop {
            via,
            dev: names(e.ifindex),
        };
        let hops = by_dst.entry((v6, upper)).or_default();
        if !hops.contains(&hop) {
            hops.push(hop);
        }
    }
    let family = |v6: bool| {
        let mut lower = by_dst.get(&(v6, false)).cloned().unwrap_or_default();
        let upper = by_dst.get(&(v6, true)).cloned().unwrap_or_default();
        if lower != upper {
            lower.extend(upper);
        }
        lower
    };
    EgressRoutes {
        ipv4: family(false),
        ipv6: family(true),
    }
}

/// The routes of ours in the kernel now.
pub fn read() -> io::Result<EgressRoutes> {
    let keep = |e: &RouteEntry| e.protocol == PROTOCOL && e.dst_len == 1;
    let mut entries = Vec::new();
    let mut names = BTreeMap::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        for (e, name) in route::dump_main(family, &keep)? {
            if let Some(name) = name {
                names.insert(e.ifindex, name);
            }
            entries.push(e);
        }
    }
    Ok(installed(&entries, |i| {
        names.get(&i).cloned().unwrap_or_else(|| format!("if{i}"))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the route dump's parser reads back from our own request is what was asked.
    #[test]
    fn a_replace_request_reads_back_as_the_route_it_asks_for() {
        let dst: IpAddr = "128.0.0.0".parse().unwrap();
        let hops = [
            ("198.18.1.1".parse().unwrap(), 3),
            ("198.18.2.1".parse().unwrap(), 4),
        ];
        let mut m = replace_request(&dst, &hops);
        // As a dump reply would carry it: RTM_NEWROUTE, then NLMSG_DONE.
        m.extend_from_slice(&20u32.to_ne_bytes());
        m.extend_from_slice(&3u16.to_ne_bytes());
        m.extend_from_slice(&[0; 14]);
        let entries = route::parse_main_reply(&m).unwrap();
        assert_eq!(entries.len(), 2);
        let names = |i: u32| format!("eth{i}");
        let got = installed(&entries, names);
        // Only the upper half: the halves differ, both are reported.
        assert_eq!(
            got.ipv4,
            vec![
                NextHop {
                    via: "198.18.1.1".parse().unwrap(),
                    dev: "eth3".into()
                },
                NextHop {
                    via: "198.18.2.1".parse().unwrap(),
                    dev: "eth4".into()
                }
            ]
        );
        assert!(
            entries
                .iter()
                .all(|e| e.protocol == PROTOCOL && e.dst == Some(dst))
        );
    }
}
