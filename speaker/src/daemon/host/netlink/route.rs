//! The main routing table from an rtnetlink dump (`RTM_GETROUTE`), which, unlike
//! `/proc/net/route`, lists every next hop of an IPv4 multipath route (`RTA_MULTIPATH`): its
//! default routes (peers at `default-gateway`) and every route (the forwarding gate).
//! The request builder and the reply parser are pure (checked reads only); [`dump`] is the
//! thin socket around them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{self as netlink, align4, attributes, u16_at, u32_at};

/// linux/rtnetlink.h.
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTN_UNICAST: u8 = 1;
const RTN_BLACKHOLE: u8 = 6;
const RTN_UNREACHABLE: u8 = 7;
const RTN_PROHIBIT: u8 = 8;
const RTN_THROW: u8 = 9;
const RT_TABLE_MAIN: u32 = 254;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTMSG_LEN: usize = 12;

/// One next hop of a default route in the main table, before its interface is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHop {
    pub via: IpAddr,
    pub ifindex: u32,
    pub metric: u32,
}

/// `RTM_GETROUTE` dump request for one address family (`AF_INET`, `AF_INET6`).
pub fn dump_request(family: u8, seq: u32) -> Vec<u8> {
    netlink::dump_request(RTM_GETROUTE, family, RTMSG_LEN, seq)
}

fn address(data: &[u8]) -> Option<IpAddr> {
    match data.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(data).ok()?))),
        16 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(data).ok()?))),
        _ => None,
    }
}

/// One route of the main table, one entry per next hop (a route without a device has one
/// entry with `ifindex` 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteEntry {
    pub dst: Option<IpAddr>,
    pub dst_len: u8,
    /// `RTN_*`.
    pub rtype: u8,
    pub ifindex: u32,
    pub via: Option<IpAddr>,
    pub metric: u32,
    /// `RTPROT_*`: who installed it.
    pub protocol: u8,
}

impl RouteEntry {
    /// Blackhole, unreachable, prohibit or throw: what matches is dropped.
    pub fn drops(&self) -> bool {
        matches!(
            self.rtype,
            RTN_BLACKHOLE | RTN_UNREACHABLE | RTN_PROHIBIT | RTN_THROW
        )
    }

    pub fn unicast(&self) -> bool {
        self.rtype == RTN_UNICAST
    }
}

/// The entries of one `RTM_NEWROUTE` body (rtmsg + attributes) if it is a route of the main
/// table.
fn main_table_route(body: &[u8]) -> Vec<RouteEntry> {
    let (Some(&family), Some(&dst_len), Some(&table), Some(&protocol), Some(&rtype)) = (
        body.first(),
        body.get(1),
        body.get(4),
        body.get(5),
        body.get(7),
    ) else {
        return Vec::new();
    };
    let attrs = attributes(body.get(RTMSG_LEN..).unwrap_or_default());
    let find = |t: u16| attrs.iter().find(|(k, _)| *k == t).map(|(_, d)| *d);
    let table = find(RTA_TABLE)
        .and_then(|d| u32_at(d, 0))
        .unwrap_or(u32::from(table));
    if table != RT_TABLE_MAIN {
        return Vec::new();
    }
    // A destination of the message's own family and a prefix length that fits it; anything
    // else is not a route the kernel writes (the netlink_dump fuzz target found a /116 IPv4
    // route without a destination passing through).
    let dst = find(RTA_DST).and_then(address);
    let fits = match (family, dst) {
        (AF_INET, Some(IpAddr::V4(_))) => dst_len <= 32,
        (AF_INET6, Some(IpAddr::V6(_))) => dst_len <= 128,
        (AF_INET | AF_INET6, None) => dst_len == 0,
        _ => false,
    };
    if !fits {
        return Vec::new();
    }
    let entry = |ifindex: u32, via: Option<IpAddr>| RouteEntry {
        dst,
        dst_len,
        rtype,
        ifindex,
        via,
        metric: find(RTA_PRIORITY).and_then(|d| u32_at(d, 0)).unwrap_or(0),
        protocol,
    };
    if let Some(mp) = find(RTA_MULTIPATH) {
        // struct rtnexthop { u16 len; u8 flags; u8 hops; i32 ifindex; } + attributes.
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(len) = u16_at(mp, at).map(usize::from) {
            let (Some(ifindex), Some(nh)) = (u32_at(mp, at + 4), mp.get(at + 8..at + len.max(8)))
            else {
                break;
            };
            if len < 8 {
                break;
            }
            let via = attributes(nh)
                .into_iter()
                .find(|(k, _)| *k == RTA_GATEWAY)
                .and_then(|(_, d)| address(d));
            out.push(entry(ifindex, via));
            at += align4(len);
        }
        return out;
    }
    vec![entry(
        find(RTA_OIF).and_then(|d| u32_at(d, 0)).unwrap_or(0),
        find(RTA_GATEWAY).and_then(address),
    )]
}

/// The next hops of one `RTM_NEWROUTE` body (rtmsg + attributes) if it is a unicast
/// default route of the main table.
fn default_route(body: &[u8]) -> Vec<NextHop> {
    main_table_route(body)
        .into_iter()
        .filter(|e| e.dst_len == 0 && e.unicast() && e.ifindex != 0)
        .filter_map(|e| {
            Some(NextHop {
                via: e.via?,
                ifindex: e.ifindex,
                metric: e.metric,
            })
        })
        .collect()
}

/// The routes of the main table of `family` that `keep` keeps, with their device's name
/// (`None`: no device). The rest are parsed past, one reply buffer at a time, and never held.
pub fn dump_main(
    family: i32,
    keep: &dyn Fn(&RouteEntry) -> bool,
) -> std::io::Result<Vec<(RouteEntry, Option<String>)>> {
    let family = u8::try_from(family).map_err(std::io::Error::other)?;
    let entries = netlink::dump_parsed(&dump_request(family, 2), RTM_NEWROUTE, |body| {
        let mut v = main_table_route(body);
        v.retain(|e| keep(e));
        v
    })?;
    Ok(entries
        .into_iter()
        .map(|e| {
            let name = (e.ifindex != 0).then(|| interface_name(e.ifindex));
            (e, name)
        })
        .collect())
}

/// The main-table routes of one `recv` of a dump reply (what [`dump_main`] reads; the tests'
/// and the fuzzer's view of it).
pub fn parse_main_reply(buf: &[u8]) -> Result<Vec<RouteEntry>, String> {
    netlink::walk_parsed(buf, RTM_NEWROUTE, main_table_route)
        .map(|(v, _)| v)
        .map_err(|e| e.to_string())
}

/// One `recv` worth of a dump reply: the default routes' next hops in it, and whether the
/// dump is complete (`NLMSG_DONE`). `Err`: the kernel's error reply, or a truncated message.
pub fn parse_reply(buf: &[u8]) -> Result<(Vec<NextHop>, bool), String> {
    netlink::walk_parsed(buf, RTM_NEWROUTE, default_route).map_err(|e| e.to_string())
}

/// Dumps the routes of `family` (`libc::AF_INET` or `AF_INET6`) and returns the default
/// routes' next hops with their interface names.
pub fn dump(family: i32) -> std::io::Result<Vec<(NextHop, String)>> {
    let family = u8::try_from(family).map_err(std::io::Error::other)?;
    let hops = netlink::dump_parsed(&dump_request(family, 1), RTM_NEWROUTE, default_route)?;
    Ok(hops
        .into_iter()
        .map(|h| {
            let name = interface_name(h.ifindex);
            (h, name)
        })
        .collect())
}

/// `if_indextoname(3)`, or `if<index>` for an interface gone meanwhile.
fn interface_name(index: u32) -> String {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: the buffer holds IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return format!("if{index}");
    }
    // SAFETY: on success the buffer holds a NUL-terminated name.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests;
