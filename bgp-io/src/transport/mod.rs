//! TCP transport for BGP sessions (Linux, tokio): active connect with an optional source
//! address, a passive listener that accepts configured peers only, TCP MD5 (RFC 2385),
//! GTSM (RFC 5082) / eBGP multihop TTL, DSCP CS6, and a jittered exponential [`Backoff`] for reconnects.
//!
//! Every option is set before `connect`/`listen`, so the first SYN already carries the
//! signature and TTL. RFC 4271 §6.8 collision detection is the session layer's job: both
//! an outgoing and an accepted stream for the same peer can come out of here.

mod connect;
pub(crate) mod dscp;
mod error;
mod listen;
mod md5;
pub(crate) mod sys;
mod ttl;

use std::io;
use std::os::fd::BorrowedFd;

pub use bgp_proto::session::backoff::{Backoff, Jitter, JitterRng};
pub use connect::{ConnectOptions, DEFAULT_CONNECT_TIMEOUT, connect};
pub use dscp::{CS6_TOS, traffic_class};
pub use error::TransportError;
pub use listen::{Accepted, BgpListener, ListenOptions, PassivePeer};
pub use md5::{MD5_MAX_KEY_LEN, Md5Key};
pub use sys::interface_index;
pub use ttl::{
    EBGP_DEFAULT_TTL, GTSM_MIN_TTL, GTSM_SEND_TTL, IBGP_DEFAULT_TTL, TtlConfigError, TtlSecurity,
    min_ttl, ttl,
};

/// Address family of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

/// Reads `SO_DOMAIN`, so helpers work on any socket without knowing how it was made.
fn socket_family(fd: BorrowedFd<'_>) -> io::Result<Family> {
    match sys::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)? {
        libc::AF_INET => Ok(Family::V4),
        libc::AF_INET6 => Ok(Family::V6),
        other => Err(io::Error::other(format!(
            "not an IP socket (family {other})"
        ))),
    }
}
