//! DSCP CS6 ("network control", RFC 4594 §3.1) on BGP and BFD packets, as FRR and BIRD
//! mark them: a saturated uplink queue then delays keepalives and BFD packets behind pod
//! traffic less, so a busy link is not mistaken for a dead one.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use super::{Family, socket_family, sys};

/// The TOS / traffic-class byte: DSCP 48 (CS6) in the upper six bits, ECN bits 0.
pub const CS6_TOS: u8 = 0xC0;

/// Sets `IP_TOS` (and `IPV6_TCLASS` on IPv6 sockets; `IP_TOS` too, for v4-mapped peers of
/// a dual-stack socket). On error returns the name of the option that failed.
pub(crate) fn apply(fd: BorrowedFd<'_>, v6: bool) -> Result<(), (&'static str, io::Error)> {
    let tos = libc::c_int::from(CS6_TOS);
    sys::setsockopt(fd, libc::IPPROTO_IP, libc::IP_TOS, &tos).map_err(|e| ("IP_TOS", e))?;
    if v6 {
        sys::setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, &tos)
            .map_err(|e| ("IPV6_TCLASS", e))?;
    }
    Ok(())
}

pub(super) fn apply_family(
    fd: BorrowedFd<'_>,
    family: Family,
) -> Result<(), (&'static str, io::Error)> {
    apply(fd, family == Family::V6)
}

/// The TOS byte (IPv4) or traffic class (IPv6) a socket sends with.
pub fn traffic_class(sock: &impl AsFd) -> io::Result<u8> {
    let fd = sock.as_fd();
    let value = match socket_family(fd)? {
        Family::V4 => sys::getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS)?,
        Family::V6 => sys::getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS)?,
    };
    u8::try_from(value).map_err(|_| io::Error::other(format!("traffic class {value}")))
}
