//! The interface this node reaches an address through: one RTM_GETROUTE (`ip route get`)
//! over NETLINK_ROUTE, answered by the kernel's own lookup, so policy routing, VRF-less
//! multipath and `onlink` routes count as they do for our packets.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

const NLMSG_HDRLEN: usize = 16;
const RTMSG_LEN: usize = 12;
const NLMSG_ERROR: u16 = 2;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLM_F_REQUEST: u16 = 1;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The request: `nlmsghdr`, `rtmsg` with the family and a host prefix, and RTA_DST.
fn request(dst: IpAddr, seq: u32) -> Vec<u8> {
    let (family, addr): (u8, Vec<u8>) = match dst {
        IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
    };
    let attr_len = 4 + addr.len();
    let len = NLMSG_HDRLEN + RTMSG_LEN + attr_len;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    // rtm_family, rtm_dst_len (a host route), then src_len, tos, table, protocol, scope,
    // type and flags all zero.
    m.push(family);
    m.push((addr.len() * 8) as u8);
    m.resize(NLMSG_HDRLEN + RTMSG_LEN, 0);
    m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    m.extend_from_slice(&RTA_DST.to_ne_bytes());
    m.extend_from_slice(&addr);
    m
}

/// RTA_OIF of the RTM_NEWROUTE reply (pure, checked reads).
pub fn parse_reply(b: &[u8]) -> io::Result<u32> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed RTM_GETROUTE reply");
    let len = usize::try_from(u32_at(b, 0).ok_or_else(bad)?).map_err(|_| bad())?;
    let kind = u16_at(b, 4).ok_or_else(bad)?;
    let msg = b.get(..len).ok_or_else(bad)?;
    if kind == NLMSG_ERROR {
        let errno = u32_at(msg, NLMSG_HDRLEN).ok_or_else(bad)? as i32;
        return Err(io::Error::from_raw_os_error(errno.saturating_neg()));
    }
    if kind != RTM_NEWROUTE {
        return Err(bad());
    }
    let mut at = NLMSG_HDRLEN + RTMSG_LEN;
    while let (Some(alen), Some(atype)) = (u16_at(msg, at), u16_at(msg, at + 2)) {
        let alen = usize::from(alen);
        if alen < 4 {
            break;
        }
        if atype == RTA_OIF {
            return u32_at(msg, at + 4).ok_or_else(bad);
        }
        at = at.saturating_add((alen + 3) & !3);
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "the route has no output interface",
    ))
}

/// The index of the interface the route to `dst` leaves through (`ip route get DST`).
pub fn route_interface(dst: IpAddr) -> io::Result<u32> {
    // SAFETY: plain socket(2); the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new, valid descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let timeout = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    crate::transport::sys::setsockopt(sock.as_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, &timeout)?;
    let req = request(dst, 1);
    // SAFETY: `req` is a live buffer of the stated length; the kernel is the default
    // destination of a netlink socket.
    let sent = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 4096];
    // SAFETY: `buf` is a live buffer of the stated length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    parse_reply(
        buf.get(..usize::try_from(n).unwrap_or(0))
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_address_is_reached_through_lo() {
        // The loopback interface is index 1 in every network namespace.
        assert_eq!(route_interface("127.0.0.1".parse().unwrap()).unwrap(), 1);
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        for b in [&[][..], &[1, 2, 3], &[255; 40]] {
            assert!(parse_reply(b).is_err());
        }
    }
}
