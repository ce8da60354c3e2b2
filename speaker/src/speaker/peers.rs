//! One session task per peer; start, stop and reset on reload; passive listeners.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::session::driver::{self, SessionEvent, SessionTask, TcpConnector};
use bgp_proto::session::{GracefulRestartConfig, RouteSet, Session, SessionConfig, StopReason};
use bgp_proto::transport::{
    Accepted, BgpListener, ConnectOptions, ListenOptions, Md5Key, PassivePeer,
};
use bgp_proto::{Asn, RouterId};
use podcidr_config::PeerConfig;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// A peer's settings with its MD5 key loaded (a missing key file is a config error).
#[derive(Debug, Clone)]
pub struct PreparedPeer {
    pub config: PeerConfig,
    pub md5: Option<Md5Key>,
}

/// Loads every MD5 key, so a bad key file rejects the config before any session changes.
pub fn prepare(peers: &[PeerConfig]) -> Result<Vec<PreparedPeer>, String> {
    peers
        .iter()
        .map(|p| {
            let md5 = match &p.password_file {
                None => None,
                Some(path) => {
                    let key = podcidr_config::load_md5_key(path)
                        .map_err(|e| format!("peers[{}].passwordFile: {e}", p.name))?;
                    Some(
                        Md5Key::new(key)
                            .map_err(|e| format!("peers[{}].passwordFile: {e}", p.name))?,
                    )
                }
            };
            Ok(PreparedPeer {
                config: p.clone(),
                md5,
            })
        })
        .collect()
}

struct PeerHandle {
    prepared: PreparedPeer,
    task: SessionTask,
    routes: watch::Sender<Arc<RouteSet>>,
    incoming: Option<mpsc::Sender<TcpStream>>,
    forward: JoinHandle<()>,
}

type Dispatch = Arc<std::sync::Mutex<HashMap<IpAddr, mpsc::Sender<TcpStream>>>>;

struct ListenerHandle {
    task: JoinHandle<()>,
}

/// Identity shared by every session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalIdentity {
    pub asn: Asn,
    pub router_id: RouterId,
}

pub struct PeerManager {
    identity: LocalIdentity,
    node_name: String,
    /// First sessions after a process start set the graceful restart R bit.
    restarting: bool,
    peers: BTreeMap<String, PeerHandle>,
    listeners: Vec<ListenerHandle>,
    events: mpsc::UnboundedSender<(String, SessionEvent)>,
}

impl std::fmt::Debug for PeerManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerManager")
            .field("peers", &self.peers.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn session_config(identity: LocalIdentity, node: &str, p: &PeerConfig) -> SessionConfig {
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
        peer_asn: p.asn,
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
        extended_next_hop: false,
        send_hold_time: None,
        jitter_seed: seed,
    }
}

impl PeerManager {
    pub fn new(
        identity: LocalIdentity,
        node_name: String,
        restarting: bool,
        events: mpsc::UnboundedSender<(String, SessionEvent)>,
    ) -> Self {
        PeerManager {
            identity,
            node_name,
            restarting,
            peers: BTreeMap::new(),
            listeners: Vec::new(),
            events,
        }
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.peers.keys()
    }

    pub fn status(&self, name: &str) -> Option<bgp_proto::session::SessionStatus> {
        self.peers.get(name).map(|h| h.task.status.borrow().clone())
    }

    /// Starts a session for `peer`.
    pub fn add(&mut self, prepared: PreparedPeer, routes: Arc<RouteSet>) {
        let p = &prepared.config;
        let mut session = Session::new(session_config(self.identity, &self.node_name, p));
        session.set_restarting(self.restarting && p.graceful_restart.enabled);
        let connector = TcpConnector {
            peer: SocketAddr::new(p.address, p.port),
            options: ConnectOptions {
                source: p.local_address,
                md5: prepared.md5.clone(),
                ttl: p.ttl_security(),
                ..ConnectOptions::new(p.ttl_security())
            },
        };
        let (routes_tx, routes_rx) = watch::channel(routes);
        let (incoming, incoming_rx) = if p.passive {
            let (tx, rx) = mpsc::channel(4);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let task = driver::spawn(session, connector, incoming_rx, routes_rx);
        let mut rx = task.events.subscribe();
        let tx = self.events.clone();
        let name = p.name.clone();
        let forward = tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(ev) => {
                        if tx.send((name.clone(), ev)).is_err() {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        self.peers.insert(
            p.name.clone(),
            PeerHandle {
                prepared,
                task,
                routes: routes_tx,
                incoming,
                forward,
            },
        );
    }

    /// Replaces a peer's route set; the session sends only the difference.
    pub fn set_routes(&self, name: &str, routes: Arc<RouteSet>) {
        if let Some(h) = self.peers.get(name) {
            h.routes.send_if_modified(|cur| {
                if **cur == *routes {
                    false
                } else {
                    *cur = routes;
                    true
                }
            });
        }
    }

    /// Stops one peer and waits (bounded) for its NOTIFICATION to go out.
    pub async fn remove(&mut self, name: &str, reason: StopReason) {
        if let Some(h) = self.peers.remove(name) {
            h.task.stop(reason);
            let _ = tokio::time::timeout(Duration::from_secs(10), h.task.wait()).await;
            h.forward.abort();
        }
    }

    /// Updates settings that need no session reset (attributes, retry timers).
    pub fn update(&mut self, prepared: PreparedPeer) {
        if let Some(h) = self.peers.get_mut(&prepared.config.name) {
            h.prepared = prepared;
        }
    }

    /// Stops every session: graceful restart (close without NOTIFICATION) where enabled
    /// and not `final_stop`, Cease/Administrative Shutdown otherwise.
    pub async fn shutdown(&mut self, final_stop: bool, message: &str) {
        let names: Vec<String> = self.peers.keys().cloned().collect();
        for name in &names {
            if let Some(h) = self.peers.get(name) {
                let reason = if !final_stop && h.prepared.config.graceful_restart.enabled {
                    StopReason::GracefulRestart
                } else {
                    StopReason::Shutdown(message.to_owned())
                };
                h.task.stop(reason);
            }
        }
        for name in names {
            if let Some(h) = self.peers.remove(&name) {
                let _ = tokio::time::timeout(Duration::from_secs(10), h.task.wait()).await;
                h.forward.abort();
            }
        }
        for l in self.listeners.drain(..) {
            l.task.abort();
        }
    }

    /// (Re)binds one listener per (local address, port) of the passive peers.
    pub fn rebuild_listeners(&mut self) -> Result<(), String> {
        for l in self.listeners.drain(..) {
            l.task.abort();
        }
        let mut groups: BTreeMap<SocketAddr, Vec<&PeerHandle>> = BTreeMap::new();
        for h in self.peers.values().filter(|h| h.prepared.config.passive) {
            let p = &h.prepared.config;
            let local = match (p.local_address, p.address) {
                (Some(a), _) => a,
                (None, IpAddr::V4(_)) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                (None, IpAddr::V6(_)) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
            };
            groups
                .entry(SocketAddr::new(local, p.port))
                .or_default()
                .push(h);
        }
        for (local, handles) in groups {
            let dispatch: Dispatch = Arc::default();
            let mut passive = Vec::new();
            for h in &handles {
                let p = &h.prepared.config;
                passive.push(PassivePeer {
                    addr: p.address,
                    md5: h.prepared.md5.clone(),
                    ttl: p.ttl_security(),
                });
                if let (Some(tx), Ok(mut d)) = (&h.incoming, dispatch.lock()) {
                    d.insert(p.address, tx.clone());
                }
            }
            let listener = BgpListener::bind(ListenOptions::new(local, passive))
                .map_err(|e| format!("cannot listen on {local}: {e}"))?;
            let task = tokio::spawn(accept_loop(listener, dispatch));
            self.listeners.push(ListenerHandle { task });
        }
        Ok(())
    }
}

async fn accept_loop(listener: BgpListener, dispatch: Dispatch) {
    loop {
        match listener.accept().await {
            Ok(Accepted::Peer { stream, peer, .. }) => {
                let tx = dispatch.lock().ok().and_then(|d| d.get(&peer).cloned());
                if let Some(tx) = tx {
                    let _ = tx.send(stream).await;
                }
            }
            Ok(Accepted::Refused { from }) => {
                tracing::warn!(%from, "connection from an unconfigured address refused");
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                // Bounded pause so a persistent error (e.g. EMFILE) does not spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
