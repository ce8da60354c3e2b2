//! Active open: bind the source address, set MD5/TTL, connect within a deadline.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};

use super::Family;
use super::dscp;
use super::error::TransportError;
use super::md5::{Md5Key, set_md5_key};
use super::ttl::{self, TtlSecurity};

/// Default bound on one connect attempt. The kernel alone would retry SYNs for about two
/// minutes; a BGP speaker would rather report and back off.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to open a connection to one peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Local address to connect from (port chosen by the kernel); `None` lets routing pick.
    pub source: Option<IpAddr>,
    /// TCP MD5 key shared with the peer.
    pub md5: Option<Md5Key>,
    /// GTSM or plain TTL.
    pub ttl: TtlSecurity,
    /// Bound on the TCP handshake.
    pub connect_timeout: Duration,
}

impl ConnectOptions {
    /// No source address, no MD5, the given TTL policy, [`DEFAULT_CONNECT_TIMEOUT`].
    #[must_use]
    pub fn new(ttl: TtlSecurity) -> Self {
        Self {
            source: None,
            md5: None,
            ttl,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

/// Connects to `peer` (IPv4 or IPv6) with TCP_NODELAY, MD5 and TTL set before the SYN.
///
/// A handshake that does not finish within `connect_timeout` is reported as "no response",
/// pointing at the MD5 password or GTSM when those are configured.
pub async fn connect(peer: SocketAddr, opts: &ConnectOptions) -> Result<TcpStream, TransportError> {
    let socket_err = |source| TransportError::Io {
        context: "creating a socket for",
        addr: peer,
        source,
    };
    let (socket, family) = match peer {
        SocketAddr::V4(_) => (TcpSocket::new_v4().map_err(socket_err)?, Family::V4),
        SocketAddr::V6(_) => (TcpSocket::new_v6().map_err(socket_err)?, Family::V6),
    };
    if let Some(source) = opts.source {
        if source.is_ipv4() != peer.is_ipv4() {
            return Err(TransportError::FamilyMismatch {
                local: source,
                peer: peer.ip(),
            });
        }
        let addr = SocketAddr::new(source, 0);
        socket
            .bind(addr)
            .map_err(|source| TransportError::Bind { addr, source })?;
    }
    let option_err = |option, source| TransportError::SocketOption {
        option,
        addr: peer.ip(),
        source,
    };
    socket
        .set_nodelay(true)
        .map_err(|e| option_err("TCP_NODELAY", e))?;
    ttl::apply(socket.as_fd(), family, opts.ttl).map_err(|(name, e)| option_err(name, e))?;
    dscp::apply_family(socket.as_fd(), family).map_err(|(name, e)| option_err(name, e))?;
    if let Some(key) = &opts.md5 {
        set_md5_key(socket.as_fd(), family, peer.ip(), Some(key))
            .map_err(|e| option_err("TCP_MD5SIG", e))?;
    }

    let md5 = opts.md5.is_some();
    let gtsm = opts.ttl.is_gtsm();
    match tokio::time::timeout(opts.connect_timeout, socket.connect(peer)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(TransportError::from_connect(
            peer,
            e,
            opts.connect_timeout,
            md5,
            gtsm,
        )),
        Err(_elapsed) => Err(TransportError::no_response(
            peer,
            opts.connect_timeout,
            md5,
            gtsm,
        )),
    }
}
