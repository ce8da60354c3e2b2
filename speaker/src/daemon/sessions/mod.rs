//! Carries out the core's peer effects: one session task per peer, passive listeners kept
//! open across reloads, MD5 keys read from their files when a connection is set up.

use std::collections::BTreeMap;
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6};
use std::sync::Arc;
use std::time::Duration;

use bgp_io::driver::{self, SessionEvent, SessionTask, TcpConnector};
use bgp_io::transport::ConnectOptions;
use bgp_proto::bfd::BfdEvent;
use bgp_proto::session::{BfdInput, RouteSet, Session, SessionStatus, StopReason};
use podcidr_config::{PeerAddress, PeerConfig};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

mod bfd;
mod connector;
mod listeners;
mod refusals;

use bfd::BfdHandle;
use bgp_io::bfd::driver::StopMode;
#[cfg(test)]
use connector::read_key;
pub use connector::{KeyFileConnector, check_keys};
pub use listeners::ListenerError;
use listeners::Listeners;

use super::core::bfd_gate;
use super::core::{ListenerLayout, PeerSetup};

/// Bound on waiting for stopped sessions to deliver their NOTIFICATION (all at once).
pub(super) const STOP_WAIT: Duration = Duration::from_secs(10);

struct PeerHandle {
    task: SessionTask,
    bfd: Option<BfdHandle>,
    /// How long a BFD handover must last (`bfd_gate::handover_window`).
    handover_window: Duration,
    routes: watch::Sender<Option<Arc<RouteSet>>>,
    incoming: Option<mpsc::Sender<TcpStream>>,
    forward: JoinHandle<()>,
}

/// The running sessions and listeners.
pub struct PeerManager {
    peers: BTreeMap<String, PeerHandle>,
    listeners: Listeners,
    events: mpsc::Sender<(String, SessionEvent)>,
}

impl std::fmt::Debug for PeerManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerManager")
            .field("peers", &self.peers.keys().collect::<Vec<_>>())
            .field("listeners", &self.listeners.addrs())
            .finish()
    }
}

impl PeerManager {
    pub fn new(events: mpsc::Sender<(String, SessionEvent)>) -> Self {
        PeerManager {
            peers: BTreeMap::new(),
            listeners: Listeners::default(),
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
        self.listeners.addrs()
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
            handover_window: Duration::from_secs(1),
            routes,
            incoming: None,
            forward,
        };
        self.peers.insert(name.to_owned(), handle);
    }

    /// Starts a session for `setup` (a running one of the same name must be stopped first).
    pub fn start(&mut self, setup: &PeerSetup) {
        let p = &setup.config;
        if p.address.is_unresolved()
            || matches!(p.address, PeerAddress::Interface { peer: None, .. })
        {
            // The core only starts resolved peers (`core::kernel::resolve`).
            tracing::error!(peer = %p.name, address = %p.address, "unresolved peer address");
            return;
        }
        let mut session = Session::new(setup.session_config());
        session.set_restarting(setup.restarting);
        let connector = KeyFileConnector {
            peer: p.name.clone(),
            key_file: p.password_file.clone(),
            interface: p.address.interface().map(str::to_owned),
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
            std::convert::identity,
        ));
        let bfd = match bfd::start(p, setup.restarting, self.events.clone()) {
            None => None,
            Some(Ok(h)) => Some(h),
            Some(Err(e)) => {
                // What BGP does without its BFD is the core's decision (bfd_gate.rs).
                self.bfd_start_failed(&p.name, e.to_string());
                None
            }
        };
        self.peers.insert(
            p.name.clone(),
            PeerHandle {
                task,
                bfd,
                handover_window: bfd_gate::handover_window(p),
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

    /// What the BFD session beside it says, to the BGP session.
    pub fn bfd(&self, name: &str, input: BfdInput) {
        if let Some(h) = self.peers.get(name) {
            h.task.bfd(input);
        }
    }

    /// Tells the core that a peer's BFD session could not start (off this call: the events
    /// channel may be full while the loop is busy with this batch of effects).
    fn bfd_start_failed(&self, peer: &str, error: String) {
        let events = self.events.clone();
        let event = (
            peer.to_owned(),
            SessionEvent::Bfd(BfdEvent::StartFailed(error)),
        );
        tokio::spawn(async move {
            let _ = events.send(event).await;
        });
    }

    /// Applies a reloaded `bfd` to a running peer without touching its BGP session: timers
    /// through a Poll (RFC 5880 §6.8.3), or BFD started or stopped (AdminDown) beside it.
    pub async fn set_bfd(&mut self, p: &PeerConfig) {
        let Some(h) = self.peers.get_mut(&p.name) else {
            return;
        };
        // Another key or type is another session (RFC 5880 §6.7: not negotiated): AdminDown
        // with the old key, which the peer still accepts, then a new session.
        if let (Some(b), Some(c)) = (&h.bfd, &p.bfd)
            && b.authentication != c.authentication
            && let Some(old) = h.bfd.take()
        {
            old.stop(StopMode::AdminDown).await;
        }
        match (&h.bfd, &p.bfd) {
            (Some(b), Some(c)) => b.task.set_intervals(c.min_tx, c.min_rx, c.multiplier),
            (None, Some(_)) => match bfd::start(p, false, self.events.clone()) {
                None => {}
                Some(Ok(b)) => h.bfd = Some(b),
                Some(Err(e)) => self.bfd_start_failed(&p.name, e.to_string()),
            },
            (Some(_), None) => {
                if let Some(b) = h.bfd.take() {
                    b.stop(StopMode::AdminDown).await;
                }
            }
            (None, None) => {}
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
                    handover_window,
                    forward,
                    routes,
                    ..
                } = h;
                waits.push(async move {
                    // A planned stop must not look like a path failure (RFC 5882 §4.3).
                    // Graceful restart: hand BFD over first (the peer's detection time
                    // grows to the restart time), then close BGP without a NOTIFICATION.
                    // Otherwise BGP's Cease goes first, then BFD AdminDown.
                    let mut bfd = bfd;
                    if let StopMode::Handover(window) =
                        bfd_gate::stop_mode(&reason, handover_window)
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
        self.listeners.close_all();
    }

    /// Makes the listeners match `layout` (see [`Listeners::set`]) and points them at the
    /// sessions.
    pub fn set_listeners(&mut self, layout: &ListenerLayout) -> Vec<ListenerError> {
        let errors = self.listeners.set(layout);
        self.refresh_dispatch();
        errors
    }

    /// Re-reads the passive peers' key files now (each listener also does every second).
    #[cfg(test)]
    pub fn refresh_keys(&mut self) -> Vec<ListenerError> {
        self.listeners.refresh_keys()
    }

    /// Points each listener's addresses at the current sessions' incoming channels.
    fn refresh_dispatch(&self) {
        self.listeners
            .dispatch(|name| self.peers.get(name).and_then(|h| h.incoming.clone()));
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

/// Forwards one session's (or its BFD session's) events to the loop. A slow loop loses
/// events here (bounded), never memory; session state is read from the status snapshot.
async fn forward_events<E: Clone>(
    name: String,
    mut rx: tokio::sync::broadcast::Receiver<E>,
    tx: mpsc::Sender<(String, SessionEvent)>,
    wrap: fn(E) -> SessionEvent,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match rx.recv().await {
            Ok(ev) => {
                if tx.send((name.clone(), wrap(ev))).await.is_err() {
                    return;
                }
            }
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests;
