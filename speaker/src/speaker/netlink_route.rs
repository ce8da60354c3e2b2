//! The default routes from an rtnetlink dump (`RTM_GETROUTE`), which, unlike
//! `/proc/net/route`, lists every next hop of an IPv4 multipath route (`RTA_MULTIPATH`).
//! The request builder and the reply parser are pure (checked reads only); [`dump`] is the
//! thin socket around them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// linux/netlink.h, linux/rtnetlink.h.
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const RTN_UNICAST: u8 = 1;
const RT_TABLE_MAIN: u32 = 254;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const NLMSG_HDRLEN: usize = 16;
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
    let len = (NLMSG_HDRLEN + RTMSG_LEN) as u32;
    let mut m = Vec::with_capacity(NLMSG_HDRLEN + RTMSG_LEN);
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.push(family);
    m.extend_from_slice(&[0; RTMSG_LEN - 1]);
    m
}

fn align4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// `(type, payload)` of each attribute in `b`; stops at the first malformed one.
fn attributes(b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while let (Some(len), Some(kind)) = (u16_at(b, at), u16_at(b, at + 2)) {
        let len = usize::from(len);
        let Some(data) = b.get(at + 4..at + len.max(4)).filter(|_| len >= 4) else {
            break;
        };
        out.push((kind, data));
        at += align4(len);
    }
    out
}

fn address(data: &[u8]) -> Option<IpAddr> {
    match data.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(data).ok()?))),
        16 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(data).ok()?))),
        _ => None,
    }
}

/// The next hops of one `RTM_NEWROUTE` body (rtmsg + attributes) if it is a unicast
/// default route of the main table.
fn default_route(body: &[u8]) -> Vec<NextHop> {
    let (Some(&dst_len), Some(&table), Some(&rtype)) = (body.get(1), body.get(4), body.get(7))
    else {
        return Vec::new();
    };
    let attrs = attributes(body.get(RTMSG_LEN..).unwrap_or_default());
    let find = |t: u16| attrs.iter().find(|(k, _)| *k == t).map(|(_, d)| *d);
    let table = find(RTA_TABLE)
        .and_then(|d| u32_at(d, 0))
        .unwrap_or(u32::from(table));
    if dst_len != 0 || rtype != RTN_UNICAST || table != RT_TABLE_MAIN {
        return Vec::new();
    }
    let metric = find(RTA_PRIORITY).and_then(|d| u32_at(d, 0)).unwrap_or(0);
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
            if let Some(via) = via {
                out.push(NextHop {
                    via,
                    ifindex,
                    metric,
                });
            }
            at += align4(len);
        }
        return out;
    }
    match (
        find(RTA_GATEWAY).and_then(address),
        find(RTA_OIF).and_then(|d| u32_at(d, 0)),
    ) {
        (Some(via), Some(ifindex)) => vec![NextHop {
            via,
            ifindex,
            metric,
        }],
        _ => Vec::new(),
    }
}

/// One `recv` worth of a dump reply: the default routes' next hops in it, and whether the
/// dump is complete (`NLMSG_DONE`). `Err`: the kernel's error reply, or a truncated message.
pub fn parse_reply(buf: &[u8]) -> Result<(Vec<NextHop>, bool), String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let (Some(len), Some(kind)) = (u32_at(buf, at), u16_at(buf, at + 4)) else {
            return Err(format!("truncated netlink header at byte {at}"));
        };
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let Some(body) = buf
            .get(at + NLMSG_HDRLEN..at.saturating_add(len))
            .filter(|_| len >= NLMSG_HDRLEN)
        else {
            return Err(format!(
                "netlink message of {len} bytes at byte {at} is truncated"
            ));
        };
        match kind {
            NLMSG_DONE => return Ok((out, true)),
            NLMSG_ERROR => {
                let errno = body
                    .get(..4)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, i32::from_ne_bytes);
                return Err(format!("netlink error {errno}"));
            }
            RTM_NEWROUTE => out.extend(default_route(body)),
            _ => {}
        }
        at += align4(len);
    }
    Ok((out, false))
}

/// Bounds on one dump: replies read, and how long one read may wait.
const MAX_READS: usize = 10_000;
const READ_TIMEOUT_SECS: libc::time_t = 1;

/// Dumps the routes of `family` (`libc::AF_INET` or `AF_INET6`) and returns the default
/// routes' next hops with their interface names.
pub fn dump(family: i32) -> std::io::Result<Vec<(NextHop, String)>> {
    use std::io::Error;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: socket(2) with constant arguments; the fd is owned (closed on drop) below.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if raw < 0 {
        return Err(Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let timeout = libc::timeval {
        tv_sec: READ_TIMEOUT_SECS,
        tv_usec: 0,
    };
    // SAFETY: setsockopt(2) on our fd with a pointer to a live timeval of the given size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const timeout).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(Error::last_os_error());
    }
    let family = u8::try_from(family).map_err(Error::other)?;
    let req = dump_request(family, 1);
    // SAFETY: send(2) of a live buffer of the given length on our fd.
    let sent = unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent < 0 {
        return Err(Error::last_os_error());
    }
    let mut hops = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..MAX_READS {
        // SAFETY: recv(2) into a live buffer of the given length on our fd.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let n = usize::try_from(n).map_err(|_| Error::last_os_error())?;
        let (more, done) = parse_reply(buf.get(..n).unwrap_or_default()).map_err(Error::other)?;
        hops.extend(more);
        if done {
            return Ok(hops
                .into_iter()
                .map(|h| {
                    let name = interface_name(h.ifindex);
                    (h, name)
                })
                .collect());
        }
    }
    Err(Error::other("netlink route dump did not finish"))
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
#[path = "netlink_route_tests.rs"]
mod tests;
