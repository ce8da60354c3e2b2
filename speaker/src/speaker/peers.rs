//! Carries out the core's peer effects: one session task per peer, passive listeners kept
//! open across reloads, MD5 keys read from their files when a connection is set up.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::session::driver::{self, Connector, SessionEvent, SessionTask, TcpConnector};
use bgp_proto::session::{
    GracefulRestartConfig, RouteSet, Session, SessionConfig, SessionStatus, StopReason,
};
use bgp_proto::transport::{
    Accepted, BgpListener, ConnectOptions, ListenOptions, Md5Key, PassivePeer,
};
use bgp_proto::{Asn, RouterId};
use podcidr_config::{PeerAddress, PeerAsn, PeerConfig};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::bfd::{self, BfdHandle};
use super::core::{ListenerLayout, PassiveSpec, PeerSetup};
use bgp_proto::bfd::driver::StopMode;

/// Bound on waiting for stopped sessions to deliver their NOTIFICATION (all at once).
pub(super) const STOP_WAIT: Duration = Duration::from_secs(10);

/// Why a peer's MD5 key cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("peers[{peer}].passwordFile: {source}")]
pub struct KeyError {
    pub peer: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// Reads a peer's MD5 key file now (bounded read; see `podcidr_config::load_md5_key`).
pub fn read_key(peer: &str, path: &Path) -> Result<Md5Key, KeyError> {
    let err = |source: Box<dyn std::error::Error + Send + Sync>| KeyError {
        peer: peer.to_owned(),
        source,
    };
    let key = podcidr_config::load_md5_key(path).map_err(|e| err(Box::new(e)))?;
    Md5Key::new(key).map_err(|e| err(Box::new(e)))
}

/// Checks every MD5 key file, so a bad key rejects the config before any session changes.
/// Sessions read the file again when they connect: a rotated Secret needs no reload.
pub fn check_keys(peers: &[PeerConfig]) -> Result<(), KeyError> {
    for p in peers {
        if let Some(path) = &p.password_file {
            read_key(&p.name, path)?;
        }
    }
    Ok(())
}

/// Identity shared by every session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalIdentity {
    pub asn: Asn,
    pub router_id: RouterId,
}

pub fn session_config(identity: LocalIdentity, node: &str, p: &PeerConfig) -> SessionConfig {
    let keepalive =
        (!p.hold_time.is_disabled()).then(|| Duration::from_secs(p.keepalive_time.into()));
    // Different speakers retry at different moments even with equal settings.
    let seed = node
        .bytes()
        .chain(p.name.bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    SessionConfig {
        local_asn: identity.asn,
        router_id: identity.router_id,
        peer_asn: p.asn.fixed().unwrap_or(Asn(0)),
        peer_asn_ranges: match &p.asn {
            PeerAsn::Fixed(_) => None,
            PeerAsn::Auto(ranges) => Some(ranges.clone()),
        },
        hold_time: p.hold_time,
        keepalive,
        families: p.families.clone(),
        passive: p.passive,
        connect_retry_base: p.connect_retry.base,
        connect_retry_max: p.connect_retry.max,
        graceful_restart: p.graceful_restart.enabled.then_some(GracefulRestartConfig {
            restart_time: p.graceful_restart.restart_time,
            preserve_forwarding: true,
        }),
        jitter_seed: seed,
        extended_next_hop: p.extended_next_hop,
        ..SessionConfig::new(identity.asn, identity.router_id, Asn(0))
    }
}

/// Active connections that read the MD5 key file at every attempt, so the key in use is
/// the one in the file when the session is set up.
#[derive(Debug, Clone)]
pub struct KeyFileConnector {
    pub peer: String,
    pub key_file: Option<PathBuf>,
    /// An interface peer's interface: its index (the scope id) is looked up at every
    /// attempt, so an interface that appears or is recreated later is used.
    pub interface: Option<String>,
    /// No `peerAddress`: the neighbor is read from the kernel's neighbor table at every
    /// attempt (it appears once the ToR talks on the link: its connection attempts, RAs).
    pub discover: bool,
    pub tcp: TcpConnector,
}

impl Connector for KeyFileConnector {
    type Stream = TcpStream;

    fn connect(&mut self) -> Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>> {
        if let Some(path) = &self.key_file {
            match read_key(&self.peer, path) {
                Ok(key) => self.tcp.options.md5 = Some(key),
                Err(e) => {
                    let e = io::Error::other(e.to_string());
                    return Box::pin(async move { Err(e) });
                }
            }
        }
        if let (Some(name), SocketAddr::V6(peer)) = (&self.interface, &mut self.tcp.peer) {
            let fail =
                |e: io::Error| -> Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>> {
                    Box::pin(async move { Err(e) })
                };
            let index = match bgp_proto::transport::interface_index(name) {
                Ok(index) => index,
                Err(e) => return fail(io::Error::new(e.kind(), format!("interface {name}: {e}"))),
            };
            peer.set_scope_id(index);
            if self.discover {
                match super::neighbors::discover(index) {
                    Ok(Some(a)) => peer.set_ip(a),
                    Ok(None) => {
                        return fail(io::Error::new(
                            io::ErrorKind::NotFound,
                            format!(
                                "no IPv6 link-local neighbor on {name} in the kernel's neighbor \
                                 table yet; set peerAddress, or let the ToR connect or send \
                                 Router Advertisements"
                            ),
                        ));
                    }
                    Err(e) => {
                        return fail(io::Error::new(
                            e.kind(),
                            format!("reading the neighbor table for {name}: {e}"),
                        ));
                    }
                }
            }
        }
        self.tcp.connect()
    }

    fn no_response(&self, after: Duration) -> String {
        self.tcp.no_response(after)
    }
}

struct PeerHandle {
    task: SessionTask,
    bfd: Option<BfdHandle>,
    /// Our graceful-restart time: how long a BFD handover must last.
    restart_time: u16,
    routes: watch::Sender<Option<Arc<RouteSet>>>,
    incoming: Option<mpsc::Sender<TcpStream>>,
    forward: JoinHandle<()>,
}

type Dispatch = Arc<std::sync::Mutex<HashMap<IpAddr, mpsc::Sender<TcpStream>>>>;

struct ListenerHandle {
    specs: Vec<PassiveSpec>,
    /// The keys last installed, to notice a rotated Secret.
    keys: Vec<Option<Md5Key>>,
    dispatch: Dispatch,
    peers: mpsc::Sender<Vec<PassivePeer>>,
    task: JoinHandle<()>,
}

/// Why a listener could not be set up; the other listeners and every session go on.
#[derive(Debug, thiserror::Error)]
pub enum ListenerError {
    #[error("cannot listen on {local}: {source}")]
    Bind {
        local: SocketAddr,
        source: bgp_proto::transport::TransportError,
    },
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// The running sessions and listeners.
pub struct PeerManager {
    peers: BTreeMap<String, PeerHandle>,
    listeners: BTreeMap<SocketAddr, ListenerHandle>,
    events: mpsc::Sender<(String, SessionEvent)>,
}

impl std::fmt::Debug for PeerManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerManager")
            .field("peers", &self.peers.keys().collect::<Vec<_>>())
            .field("listeners", &self.listeners.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl PeerManager {
    pub fn new(events: mpsc::Sender<(String, SessionEvent)>) -> Self {
        PeerManager {
            peers: BTreeMap::new(),
            listeners: BTreeMap::new(),
            events,
        }
    }

    /// Snapshots of every session's status.
    pub fn statuses(&self) -> BTreeMap<String, SessionStatus> {
        self.peers
            .iter()
            .map(|(n, h)| (n.clone(), h.task.status.borrow().clone()))
            .collect()
    }

    #[cfg(test)]
    pub fn listener_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.keys().copied().collect()
    }

    /// Adds a session driven by a test's own connector (duplex pipes, paused time).
    #[cfg(test)]
    pub fn insert_session(
        &mut self,
        name: &str,
        task: SessionTask,
        routes: watch::Sender<Option<Arc<RouteSet>>>,
    ) {
        let forward = tokio::spawn(async {});
        let handle = PeerHandle {
            task,
            bfd: None,
            restart_time: 0,
            routes,
            incoming: None,
            forward,
        };
        self.peers.insert(name.to_owned(), handle);
    }

    /// Starts a session for `setup` (a running one of the same name must be stopped first).
    pub fn start(&mut self, setup: &PeerSetup) {
        let p = &setup.config;
        if p.address.is_unresolved() {
            // The core only starts resolved peers (`default_route::resolve_peers`).
            tracing::error!(peer = %p.name, address = %p.address, "unresolved peer address");
            return;
        }
        let mut cfg = setup.session_config();
        // RFC 2545 §3: the peer on our link also gets our link-local address.
        cfg.link_local_next_hop = link_local_source(&p.address);
        let mut session = Session::new(cfg);
        session.set_restarting(setup.restarting);
        let connector = KeyFileConnector {
            peer: p.name.clone(),
            key_file: p.password_file.clone(),
            interface: p.address.interface().map(str::to_owned),
            discover: matches!(p.address, PeerAddress::Interface { peer: None, .. }),
            tcp: TcpConnector {
                peer: peer_socket(&p.address, p.port),
                options: ConnectOptions {
                    source: p.local_address,
                    ..ConnectOptions::new(p.ttl_security())
                },
            },
        };
        let (routes_tx, routes_rx) = watch::channel(setup.routes.clone());
        let (incoming, incoming_rx) = if p.accept_incoming {
            let (tx, rx) = mpsc::channel(4);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        // Subscribed before the session runs, so no transition goes unheard.
        let (events_tx, events_rx) = tokio::sync::broadcast::channel(256);
        let task = driver::spawn_with_events(session, connector, incoming_rx, routes_rx, events_tx);
        let forward = tokio::spawn(forward_events(
            p.name.clone(),
            events_rx,
            self.events.clone(),
        ));
        let bfd = match bfd::start(
            p,
            setup.restarting,
            task.hold_control(),
            self.events.clone(),
        ) {
            None => None,
            Some(Ok(h)) => Some(h),
            Some(Err(e)) => {
                // The BGP session runs without BFD: detection falls back to the hold timer.
                tracing::error!(peer = %p.name, error = %e, "BFD not started; failures are detected by the hold timer only");
                None
            }
        };
        self.peers.insert(
            p.name.clone(),
            PeerHandle {
                task,
                bfd,
                restart_time: p.graceful_restart.restart_time,
                routes: routes_tx,
                incoming,
                forward,
            },
        );
        self.refresh_dispatch();
    }

    /// Replaces a peer's route set; the session sends only the difference.
    pub fn set_routes(&self, name: &str, routes: Arc<RouteSet>) {
        if let Some(h) = self.peers.get(name) {
            h.routes.send_replace(Some(routes));
        }
    }

    pub fn set_connect_retry(&self, name: &str, base: Duration, max: Duration) {
        if let Some(h) = self.peers.get(name) {
            h.task.set_connect_retry(base, max);
        }
    }

    /// Stops these sessions at once and waits, concurrently and bounded, for their
    /// NOTIFICATIONs to go out.
    pub async fn stop(&mut self, stops: Vec<(String, StopReason)>) {
        let mut waits = Vec::new();
        for (name, reason) in stops {
            if let Some(h) = self.peers.remove(&name) {
                // Destructure so the routes sender lives until the task ends: a closed routes
                // channel reads as "speaker gone" and would turn this stop into a Cease.
                let PeerHandle {
                    task,
                    bfd,
                    restart_time,
                    forward,
                    routes,
                    ..
                } = h;
                waits.push(async move {
                    // BFD AdminDown first (RFC 5882 §4.3): a planned stop, graceful restart
                    // included, must not look like a path failure to the peer.
                    // Graceful restart: hand BFD over first (the peer's detection time
                    // grows to the restart time), then close BGP without a NOTIFICATION.
                    // Otherwise BGP's Cease goes first, then BFD AdminDown.
                    let mut bfd = bfd;
                    if let StopMode::Handover(window) = bfd::stop_mode(&reason, restart_time)
                        && let Some(b) = bfd.take()
                    {
                        b.stop(StopMode::Handover(window)).await;
                    }
                    task.stop(reason);
                    task.wait().await;
                    if let Some(b) = bfd {
                        b.stop(StopMode::AdminDown).await;
                    }
                    forward.abort();
                    drop(routes);
                });
            }
        }
        if waits.is_empty() {
            return;
        }
        self.refresh_dispatch();
        if tokio::time::timeout(STOP_WAIT, futures::future::join_all(waits))
            .await
            .is_err()
        {
            tracing::warn!("some sessions did not close within {STOP_WAIT:?}");
        }
    }

    /// Stops everything: sessions (concurrently) and listeners.
    pub async fn shutdown(&mut self, stops: Vec<(String, StopReason)>) {
        self.stop(stops).await;
        for (_, l) in std::mem::take(&mut self.listeners) {
            l.task.abort();
        }
    }

    /// Makes the listeners match `layout` without a gap: a socket whose address stays keeps
    /// listening and gets the new peers and keys in place; new addresses are bound before
    /// old ones close. Errors are per listener.
    pub fn set_listeners(&mut self, layout: &ListenerLayout) -> Vec<ListenerError> {
        let mut errors = Vec::new();
        for (local, specs) in layout {
            match self.listeners.get_mut(local) {
                Some(l) => {
                    l.specs = specs.clone();
                    l.keys.clear(); // re-read and re-install below
                }
                None => match bind_listener(*local, specs) {
                    Ok(l) => {
                        self.listeners.insert(*local, l);
                    }
                    Err(e) => errors.push(e),
                },
            }
        }
        let gone: Vec<SocketAddr> = self
            .listeners
            .keys()
            .filter(|a| !layout.contains_key(a))
            .copied()
            .collect();
        for addr in gone {
            if let Some(l) = self.listeners.remove(&addr) {
                l.task.abort();
            }
        }
        errors.extend(self.refresh_keys());
        self.refresh_dispatch();
        errors
    }

    /// Re-reads the passive peers' key files and installs changed keys on their listener
    /// (a rotated Secret reaches the listener as it reaches the connector).
    pub fn refresh_keys(&mut self) -> Vec<ListenerError> {
        let mut errors = Vec::new();
        for l in self.listeners.values_mut() {
            let mut keys = Vec::with_capacity(l.specs.len());
            for s in &l.specs {
                match &s.password_file {
                    None => keys.push(None),
                    Some(path) => match read_key(&s.name, path) {
                        Ok(k) => keys.push(Some(k)),
                        Err(e) => {
                            errors.push(ListenerError::Key(e));
                            // Keep the key in use rather than none.
                            let i = keys.len();
                            keys.push(l.keys.get(i).cloned().flatten());
                        }
                    },
                }
            }
            if keys != l.keys {
                l.keys = keys;
                let _ = l.peers.try_send(passive_peers(&l.specs, &l.keys));
            }
        }
        errors
    }

    /// Points each listener's addresses at the current sessions' incoming channels.
    fn refresh_dispatch(&self) {
        for l in self.listeners.values() {
            let Ok(mut d) = l.dispatch.lock() else {
                continue;
            };
            d.clear();
            for s in &l.specs {
                if let Some(tx) = self.peers.get(&s.name).and_then(|h| h.incoming.clone()) {
                    d.insert(s.address, tx);
                }
            }
        }
    }
}

/// The peer's socket address; an interface peer's scope id is set at each connect.
fn peer_socket(address: &PeerAddress, port: u16) -> SocketAddr {
    match address {
        PeerAddress::Fixed(ip) => SocketAddr::new(*ip, port),
        PeerAddress::Interface { peer, .. } => {
            SocketAddrV6::new(peer.unwrap_or(Ipv6Addr::UNSPECIFIED), port, 0, 0).into()
        }
        // Never started unresolved (see `PeerManager::start`).
        PeerAddress::DefaultGateway(_) => SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port),
    }
}

/// Our link-local address on an interface peer's link.
fn link_local_source(address: &PeerAddress) -> Option<Ipv6Addr> {
    address.interface()?;
    match super::routes::peer_source(address)? {
        IpAddr::V6(a) if a.is_unicast_link_local() => Some(a),
        _ => None,
    }
}

fn passive_peers(specs: &[PassiveSpec], keys: &[Option<Md5Key>]) -> Vec<PassivePeer> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| PassivePeer {
            addr: s.address,
            md5: keys.get(i).cloned().flatten(),
            ttl: s.ttl,
        })
        .collect()
}

fn bind_listener(
    local: SocketAddr,
    specs: &[PassiveSpec],
) -> Result<ListenerHandle, ListenerError> {
    let keys = specs
        .iter()
        .map(|s| {
            s.password_file
                .as_deref()
                .map(|p| read_key(&s.name, p))
                .transpose()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let listener = BgpListener::bind(ListenOptions::new(local, passive_peers(specs, &keys)))
        .map_err(|source| ListenerError::Bind { local, source })?;
    let dispatch: Dispatch = Arc::default();
    let (peers, peers_rx) = mpsc::channel(4);
    let task = tokio::spawn(accept_loop(listener, Arc::clone(&dispatch), peers_rx));
    Ok(ListenerHandle {
        specs: specs.to_vec(),
        keys,
        dispatch,
        peers,
        task,
    })
}

async fn forward_events(
    name: String,
    mut rx: tokio::sync::broadcast::Receiver<SessionEvent>,
    tx: mpsc::Sender<(String, SessionEvent)>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match rx.recv().await {
            Ok(ev) => {
                if tx.send((name.clone(), ev)).await.is_err() {
                    return;
                }
            }
            // A slow main loop loses events here (bounded), never memory; session state is
            // read from the status snapshot anyway.
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        }
    }
}

/// Bounds on the pause after a failed accept (e.g. EMFILE), so an error does not spin.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(100);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

enum ListenerInput {
    Accepted(Result<Accepted, bgp_proto::transport::TransportError>),
    Peers(Option<Vec<PassivePeer>>),
}

async fn accept_loop(
    mut listener: BgpListener,
    dispatch: Dispatch,
    mut peers: mpsc::Receiver<Vec<PassivePeer>>,
) {
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let input = tokio::select! {
            a = listener.accept() => ListenerInput::Accepted(a),
            p = peers.recv() => ListenerInput::Peers(p),
        };
        match input {
            ListenerInput::Accepted(Ok(Accepted::Peer { stream, peer, .. })) => {
                backoff = ACCEPT_BACKOFF_MIN;
                let tx = dispatch.lock().ok().and_then(|d| d.get(&peer).cloned());
                if let Some(tx) = tx {
                    let _ = tx.try_send(stream);
                }
            }
            ListenerInput::Accepted(Ok(Accepted::Refused { from })) => {
                tracing::warn!(%from, "connection from an unconfigured address refused");
            }
            ListenerInput::Accepted(Err(e)) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
            ListenerInput::Peers(Some(p)) => {
                if let Err(e) = listener.set_peers(p) {
                    tracing::error!(error = %e, local = %listener.local_addr(), "updating the listener's peers failed");
                }
            }
            ListenerInput::Peers(None) => return,
        }
    }
}

#[cfg(test)]
#[path = "peers_tests.rs"]
mod tests;
