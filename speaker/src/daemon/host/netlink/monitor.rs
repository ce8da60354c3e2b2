//! A subscription to the kernel's route, address and link notifications (rtnetlink
//! multicast groups): any message means "read the routing table again" for the forwarding
//! gate. What the messages say is not parsed: IPv4 removes the routes of a deleted device
//! without a notification of its own, so a link or address change counts too. A lost
//! notification (the socket's buffer overflowed: ENOBUFS) counts as a change.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;

const GROUPS: u32 = (libc::RTMGRP_LINK
    | libc::RTMGRP_IPV4_IFADDR
    | libc::RTMGRP_IPV4_ROUTE
    | libc::RTMGRP_IPV6_IFADDR
    | libc::RTMGRP_IPV6_ROUTE) as u32;

#[derive(Debug)]
pub struct RouteMonitor {
    fd: AsyncFd<OwnedFd>,
}

impl RouteMonitor {
    /// Subscribes (inside a tokio runtime).
    pub fn open() -> io::Result<Self> {
        // SAFETY: socket(2) with constant arguments; the fd is owned (closed on drop) below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_ROUTE,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an all-zero sockaddr_nl is valid; the fields that matter are set below.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = GROUPS;
        // SAFETY: bind(2) on our fd with a pointer to a live sockaddr_nl of the given size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: an OwnedFd is valid and open, and returns the same fd until it is dropped
        // with the AsyncFd that owns it.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(RouteMonitor { fd })
    }

    /// Waits for the next notification and drains what is queued behind it.
    pub async fn changed(&self) -> io::Result<()> {
        // What a message says is not read: a datagram longer than this is cut, which is fine.
        let mut buf = [0u8; 8192];
        loop {
            let mut guard = self.fd.readable().await?;
            let mut got = false;
            // Bounded: under constant churn the caller re-reads the table meanwhile.
            for _ in 0..1024 {
                // SAFETY: recv(2) into a live buffer of the given length on our fd.
                let n = unsafe {
                    libc::recv(
                        self.fd.get_ref().as_raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if n >= 0 {
                    got = true;
                    continue;
                }
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => break,
                    Some(libc::ENOBUFS) => got = true,
                    Some(libc::EINTR) => {}
                    _ => return Err(e),
                }
            }
            guard.clear_ready();
            if got {
                return Ok(());
            }
        }
    }
}
