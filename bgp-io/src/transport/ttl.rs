//! GTSM (RFC 5082) and eBGP multihop TTL through `IP_TTL`/`IP_MINTTL` and
//! `IPV6_UNICAST_HOPS`/`IPV6_MINHOPCOUNT`. The policy ([`TtlSecurity`]) is
//! `bgp_proto::session::ttl`'s.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

pub use bgp_proto::session::ttl::{
    EBGP_DEFAULT_TTL, GTSM_MIN_TTL, GTSM_SEND_TTL, IBGP_DEFAULT_TTL, TtlConfigError, TtlSecurity,
};

use super::sys;
use super::{Family, socket_family};

/// Sets send and minimum TTL. IPv6 sockets get the IPv4 options as well, because a
/// dual-stack socket carries IPv4 peers as v4-mapped addresses under the IPv4 rules.
/// On error returns the name of the option that failed.
pub(super) fn apply(
    fd: BorrowedFd<'_>,
    family: Family,
    ttl: TtlSecurity,
) -> Result<(), (&'static str, io::Error)> {
    let send = libc::c_int::from(ttl.send_ttl());
    let min = libc::c_int::from(ttl.min_ttl());
    let set = |level, name, label: &'static str, value: libc::c_int| {
        sys::setsockopt(fd, level, name, &value).map_err(|e| (label, e))
    };
    set(libc::IPPROTO_IP, libc::IP_TTL, "IP_TTL", send)?;
    set(libc::IPPROTO_IP, libc::IP_MINTTL, "IP_MINTTL", min)?;
    if family == Family::V6 {
        set(
            libc::IPPROTO_IPV6,
            libc::IPV6_UNICAST_HOPS,
            "IPV6_UNICAST_HOPS",
            send,
        )?;
        set(
            libc::IPPROTO_IPV6,
            libc::IPV6_MINHOPCOUNT,
            "IPV6_MINHOPCOUNT",
            min,
        )?;
    }
    Ok(())
}

/// Effective send TTL (IPv4) or unicast hop limit (IPv6) of a socket, stream or listener.
pub fn ttl(sock: &impl AsFd) -> io::Result<u8> {
    let fd = sock.as_fd();
    let value = match socket_family(fd)? {
        Family::V4 => sys::getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TTL)?,
        Family::V6 => sys::getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS)?,
    };
    to_u8(value)
}

/// Effective minimum accepted TTL (`IP_MINTTL`) or hop limit (`IPV6_MINHOPCOUNT`); 0 = none.
pub fn min_ttl(sock: &impl AsFd) -> io::Result<u8> {
    let fd = sock.as_fd();
    let value = match socket_family(fd)? {
        Family::V4 => sys::getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MINTTL)?,
        Family::V6 => sys::getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MINHOPCOUNT)?,
    };
    to_u8(value)
}

fn to_u8(value: libc::c_int) -> io::Result<u8> {
    u8::try_from(value).map_err(|_| io::Error::other(format!("TTL {value} out of range")))
}
