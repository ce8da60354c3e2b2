//! Passive open: one listening socket, accepting configured peers only.
//!
//! MD5 keys are installed per peer on the listener before `listen`, so the kernel checks
//! signatures during the handshake. The TTL policy of a listener is a compromise across
//! peers (its SYN-ACKs and its `MINTTL` check cover all of them): it sends with the highest
//! configured TTL and enforces GTSM's minimum only when every peer uses GTSM. Each accepted
//! socket then gets exactly its peer's policy.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU8;
use std::os::fd::AsFd;

use tokio::net::{TcpListener, TcpSocket, TcpStream};

use super::Family;
use super::dscp;
use super::error::TransportError;
use super::md5::{Md5Key, set_md5_key};
use super::ttl::{self, TtlSecurity};

/// A peer the listener accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassivePeer {
    /// The peer's address; IPv4 peers may be listed on an IPv6 (dual-stack) listener.
    pub addr: IpAddr,
    /// TCP MD5 key shared with this peer.
    pub md5: Option<Md5Key>,
    /// GTSM or plain TTL for this peer's session.
    pub ttl: TtlSecurity,
}

/// Where to listen and whom to accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenOptions {
    /// Local address and port (179 in production, 0 in tests).
    pub local: SocketAddr,
    /// Configured peers; everyone else is refused.
    pub peers: Vec<PassivePeer>,
    /// `listen(2)` backlog.
    pub backlog: u32,
}

impl ListenOptions {
    /// Listen on `local` for `peers` with a backlog of 64.
    #[must_use]
    pub fn new(local: SocketAddr, peers: Vec<PassivePeer>) -> Self {
        Self {
            local,
            peers,
            backlog: 64,
        }
    }
}

/// Outcome of one accepted TCP connection.
#[derive(Debug)]
pub enum Accepted {
    /// From a configured peer; the stream has TCP_NODELAY and the peer's TTL policy set.
    Peer {
        stream: TcpStream,
        /// The configured peer address it matched.
        peer: IpAddr,
        /// The remote address and port as seen on the socket.
        remote: SocketAddr,
    },
    /// From an address that is not configured: already reset and closed. Log it as
    /// "connection from unconfigured address {from} refused".
    Refused { from: SocketAddr },
}

/// A BGP listening socket.
#[derive(Debug)]
pub struct BgpListener {
    listener: TcpListener,
    local: SocketAddr,
    family: Family,
    peers: HashMap<IpAddr, PassivePeer>,
}

impl BgpListener {
    /// Binds and listens with SO_REUSEADDR, per-peer MD5 keys and the listener TTL policy.
    /// Must be called inside a tokio runtime.
    pub fn bind(opts: ListenOptions) -> Result<Self, TransportError> {
        let io_err = |context| {
            move |source| TransportError::Io {
                context,
                addr: opts.local,
                source,
            }
        };
        let (socket, family) = match opts.local {
            SocketAddr::V4(_) => (
                TcpSocket::new_v4().map_err(io_err("creating a socket for"))?,
                Family::V4,
            ),
            SocketAddr::V6(_) => (
                TcpSocket::new_v6().map_err(io_err("creating a socket for"))?,
                Family::V6,
            ),
        };
        let peers = index_peers(opts.local.ip(), family, opts.peers)?;
        socket
            .set_reuseaddr(true)
            .map_err(io_err("setting SO_REUSEADDR on"))?;
        socket
            .bind(opts.local)
            .map_err(|source| TransportError::Bind {
                addr: opts.local,
                source,
            })?;
        for peer in peers.values() {
            if let Some(key) = &peer.md5 {
                set_md5_key(socket.as_fd(), family, peer.addr, Some(key)).map_err(|source| {
                    TransportError::SocketOption {
                        option: "TCP_MD5SIG",
                        addr: peer.addr,
                        source,
                    }
                })?;
            }
        }
        ttl::apply(socket.as_fd(), family, listener_ttl(peers.values()))
            .and_then(|()| dscp::apply_family(socket.as_fd(), family))
            .map_err(|(option, source)| TransportError::SocketOption {
                option,
                addr: opts.local.ip(),
                source,
            })?;
        let listener = socket
            .listen(opts.backlog)
            .map_err(io_err("listening on"))?;
        let local = listener
            .local_addr()
            .map_err(io_err("reading the address of"))?;
        Ok(Self {
            listener,
            local,
            family,
            peers,
        })
    }

    /// Replaces the configured peers (configuration reload): keys of removed peers are
    /// deleted, new keys installed, the listener TTL policy recomputed. A list that fails
    /// validation changes nothing; a kernel error part way may leave keys half updated
    /// (retry, or rebind). Established sessions are not touched.
    pub fn set_peers(&mut self, peers: Vec<PassivePeer>) -> Result<(), TransportError> {
        let new = index_peers(self.local.ip(), self.family, peers)?;
        let fd = self.listener.as_fd();
        let key_err = |addr| {
            move |source| TransportError::SocketOption {
                option: "TCP_MD5SIG",
                addr,
                source,
            }
        };
        for old in self.peers.values().filter(|p| p.md5.is_some()) {
            if new.get(&old.addr).and_then(|p| p.md5.as_ref()).is_none() {
                set_md5_key(fd, self.family, old.addr, None).map_err(key_err(old.addr))?;
            }
        }
        for peer in new.values() {
            if let Some(key) = &peer.md5 {
                set_md5_key(fd, self.family, peer.addr, Some(key)).map_err(key_err(peer.addr))?;
            }
        }
        ttl::apply(fd, self.family, listener_ttl(new.values())).map_err(|(option, source)| {
            TransportError::SocketOption {
                option,
                addr: self.local.ip(),
                source,
            }
        })?;
        self.peers = new;
        Ok(())
    }

    /// Waits for the next connection. Unconfigured addresses come back as
    /// [`Accepted::Refused`]; an `Err` (e.g. out of file descriptors) is per connection, so
    /// callers keep accepting after a short pause.
    pub async fn accept(&self) -> Result<Accepted, TransportError> {
        let (stream, remote) =
            self.listener
                .accept()
                .await
                .map_err(|source| TransportError::Io {
                    context: "accepting on",
                    addr: self.local,
                    source,
                })?;
        // A dual-stack listener shows IPv4 peers as ::ffff:a.b.c.d.
        let remote = SocketAddr::new(remote.ip().to_canonical(), remote.port());
        let Some(peer) = self.peers.get(&remote.ip()) else {
            // RST rather than FIN: the connection was never wanted. Best effort.
            stream.set_zero_linger().ok();
            return Ok(Accepted::Refused { from: remote });
        };
        let option_err = |option, source| TransportError::SocketOption {
            option,
            addr: peer.addr,
            source,
        };
        stream
            .set_nodelay(true)
            .map_err(|e| option_err("TCP_NODELAY", e))?;
        ttl::apply(stream.as_fd(), self.family, peer.ttl)
            .map_err(|(option, e)| option_err(option, e))?;
        dscp::apply_family(stream.as_fd(), self.family)
            .map_err(|(option, e)| option_err(option, e))?;
        Ok(Accepted::Peer {
            stream,
            peer: peer.addr,
            remote,
        })
    }

    /// The bound address (with the real port when 0 was configured).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The underlying listener, e.g. for [`ttl`](super::ttl) / [`min_ttl`](super::min_ttl).
    #[must_use]
    pub fn listener(&self) -> &TcpListener {
        &self.listener
    }
}

/// Checks families and duplicates; keys are canonical addresses.
fn index_peers(
    local: IpAddr,
    family: Family,
    peers: Vec<PassivePeer>,
) -> Result<HashMap<IpAddr, PassivePeer>, TransportError> {
    let mut map = HashMap::with_capacity(peers.len());
    for mut peer in peers {
        peer.addr = peer.addr.to_canonical();
        if family == Family::V4 && peer.addr.is_ipv6() {
            return Err(TransportError::FamilyMismatch {
                local,
                peer: peer.addr,
            });
        }
        let addr = peer.addr;
        if map.insert(addr, peer).is_some() {
            return Err(TransportError::DuplicatePeer { peer: addr });
        }
    }
    Ok(map)
}

/// GTSM only if every peer wants it; otherwise the highest TTL any peer needs.
fn listener_ttl<'a>(peers: impl Iterator<Item = &'a PassivePeer> + Clone) -> TtlSecurity {
    let mut all = peers.clone().peekable();
    if all.peek().is_some() && peers.clone().all(|p| p.ttl.is_gtsm()) {
        return TtlSecurity::Gtsm;
    }
    peers
        .map(|p| p.ttl.send_ttl())
        .max()
        .and_then(NonZeroU8::new)
        .map_or(TtlSecurity::IBGP_DEFAULT, TtlSecurity::Ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(addr: &str, ttl: TtlSecurity) -> PassivePeer {
        PassivePeer {
            addr: addr.parse().unwrap(),
            md5: None,
            ttl,
        }
    }

    #[test]
    fn listener_enforces_gtsm_only_when_every_peer_uses_it_rfc5082() {
        let gtsm = [peer("192.0.2.1", TtlSecurity::Gtsm)];
        assert_eq!(listener_ttl(gtsm.iter()), TtlSecurity::Gtsm);
        let mixed = [
            peer("192.0.2.1", TtlSecurity::Gtsm),
            peer("192.0.2.2", TtlSecurity::EBGP_DEFAULT),
        ];
        let ttl = listener_ttl(mixed.iter());
        assert_eq!((ttl.send_ttl(), ttl.min_ttl()), (255, 0));
        let plain = [
            peer("192.0.2.1", TtlSecurity::EBGP_DEFAULT),
            peer("192.0.2.2", TtlSecurity::IBGP_DEFAULT),
        ];
        assert_eq!(listener_ttl(plain.iter()), TtlSecurity::IBGP_DEFAULT);
        assert_eq!(listener_ttl([].iter()), TtlSecurity::IBGP_DEFAULT);
    }

    #[test]
    fn listener_rejects_duplicate_and_wrong_family_peers() {
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let dup = vec![
            peer("192.0.2.1", TtlSecurity::Gtsm),
            peer("192.0.2.1", TtlSecurity::Gtsm),
        ];
        assert!(matches!(
            index_peers(local, Family::V4, dup),
            Err(TransportError::DuplicatePeer { .. })
        ));
        let v6 = vec![peer("2001:db8::1", TtlSecurity::Gtsm)];
        assert!(matches!(
            index_peers(local, Family::V4, v6),
            Err(TransportError::FamilyMismatch { .. })
        ));
        // A v4-mapped peer on a dual-stack listener is keyed by its IPv4 address.
        let mapped = vec![peer("::ffff:192.0.2.1", TtlSecurity::Gtsm)];
        let map = index_peers(local, Family::V6, mapped).unwrap();
        assert!(map.contains_key(&"192.0.2.1".parse::<IpAddr>().unwrap()));
    }
}
