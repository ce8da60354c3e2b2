//! Transport errors, worded so an operator can act on them.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Why a BGP transport operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The peer answered the SYN with a RST: nothing listens there, or it refuses us.
    #[error("connection to {peer} refused")]
    Refused { peer: SocketAddr },
    /// ICMP unreachable or no route.
    #[error("{peer} unreachable: {source}")]
    Unreachable {
        peer: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// No answer at all, without MD5 or GTSM to blame.
    #[error("no response from {peer} (waited {after:?})")]
    Timeout { peer: SocketAddr, after: Duration },
    /// No answer while TCP MD5 is configured: RFC 2385 says a segment with a wrong or missing
    /// signature is silently dropped, so a key mismatch looks exactly like this.
    #[error("no response from {peer}; check the MD5 password (waited {after:?})")]
    TimeoutWithMd5 { peer: SocketAddr, after: Duration },
    /// No answer while GTSM is on: replies with TTL < 254 are dropped by the kernel, so a
    /// peer without GTSM (or more than one hop away) looks exactly like this.
    #[error(
        "no response from {peer}; check that GTSM (TTL security) is enabled on both ends and \
         the peer is directly connected (waited {after:?})"
    )]
    TimeoutWithGtsm { peer: SocketAddr, after: Duration },
    /// The configured source address could not be bound (not local, in use, wrong family).
    #[error("cannot bind source address {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// A socket option could not be set; `addr` is the peer (or the local listen address).
    #[error("cannot set {option} for {addr}: {source}")]
    SocketOption {
        option: &'static str,
        addr: IpAddr,
        #[source]
        source: io::Error,
    },
    /// TCP MD5 keys are 1..=80 bytes (`TCP_MD5SIG_MAXKEYLEN`).
    #[error("TCP MD5 key must be 1..=80 bytes, got {len}")]
    InvalidMd5Key { len: usize },
    /// Local and peer addresses belong to different families.
    #[error("address family mismatch: {local} cannot talk to {peer}")]
    FamilyMismatch { local: IpAddr, peer: IpAddr },
    /// The same peer address appears twice in a listener's configuration.
    #[error("peer {peer} configured twice on the listener")]
    DuplicatePeer { peer: IpAddr },
    /// Any other socket error (`addr` is the peer, or the local address for listeners).
    #[error("{context} {addr}: {source}")]
    Io {
        context: &'static str,
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
}

impl TransportError {
    /// The error for "waited `after` for `peer` and heard nothing", blaming MD5 first (the most
    /// common cause), then GTSM. Also meant for the session layer when a hold or connect
    /// timer expires without a single byte from the peer.
    #[must_use]
    pub fn no_response(peer: SocketAddr, after: Duration, md5: bool, gtsm: bool) -> Self {
        match (md5, gtsm) {
            (true, _) => Self::TimeoutWithMd5 { peer, after },
            (false, true) => Self::TimeoutWithGtsm { peer, after },
            (false, false) => Self::Timeout { peer, after },
        }
    }

    /// True for the "no response" family of errors.
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            Self::Timeout { .. } | Self::TimeoutWithMd5 { .. } | Self::TimeoutWithGtsm { .. }
        )
    }

    /// Maps a failed `connect` to refused / unreachable / timeout / other.
    pub(super) fn from_connect(
        peer: SocketAddr,
        source: io::Error,
        after: Duration,
        md5: bool,
        gtsm: bool,
    ) -> Self {
        match source.raw_os_error() {
            Some(libc::ECONNREFUSED) => Self::Refused { peer },
            Some(libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN | libc::ENETDOWN) => {
                Self::Unreachable { peer, source }
            }
            Some(libc::ETIMEDOUT) => Self::no_response(peer, after, md5, gtsm),
            _ => Self::Io {
                context: "connecting to",
                addr: peer,
                source,
            },
        }
    }
}
