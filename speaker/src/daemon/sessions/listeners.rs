//! Passive peers: one listening socket per local address, kept open across reloads (new
//! addresses are bound before old ones close), each accepting only its configured peers with
//! their MD5 keys. Key files are re-read by each listener's own task, off the loop.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bgp_io::transport::{Accepted, BgpListener, ListenOptions, Md5Key, PassivePeer};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::connector::{KeyError, read_key};
use crate::daemon::core::{ListenerLayout, PassiveSpec};

/// How often each listener re-reads its peers' key files (a rotated Secret's new key is in
/// use within this).
const KEY_RECHECK: Duration = Duration::from_secs(1);

/// The peers a listener accepts and their keys (by position).
type PeersAndKeys = (Vec<PassiveSpec>, Vec<Option<Md5Key>>);

/// Which session an accepted connection from a peer address goes to.
type Dispatch = Arc<std::sync::Mutex<HashMap<IpAddr, mpsc::Sender<TcpStream>>>>;

struct Listener {
    specs: Vec<PassiveSpec>,
    dispatch: Dispatch,
    /// New peers and their keys for the accept task.
    specs_tx: mpsc::Sender<PeersAndKeys>,
    task: JoinHandle<()>,
}

/// Why a listener could not be set up; the other listeners and every session go on.
#[derive(Debug, thiserror::Error)]
pub enum ListenerError {
    #[error("cannot listen on {local}: {source}")]
    Bind {
        local: SocketAddr,
        source: bgp_io::transport::TransportError,
    },
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// The listening sockets by local address.
#[derive(Default)]
pub(super) struct Listeners {
    by_addr: BTreeMap<SocketAddr, Listener>,
}

impl Listeners {
    pub(super) fn addrs(&self) -> Vec<SocketAddr> {
        self.by_addr.keys().copied().collect()
    }

    /// Makes the listeners match `layout` without a gap: a socket whose address stays keeps
    /// listening and gets its new peers (and their keys) in place; new addresses are bound
    /// before old ones close. Errors are per listener.
    pub(super) fn set(&mut self, layout: &ListenerLayout) -> Vec<ListenerError> {
        let mut errors = Vec::new();
        for (local, specs) in layout {
            match self.by_addr.get_mut(local) {
                Some(l) => {
                    if l.specs != *specs {
                        l.specs = specs.clone();
                        let (keys, e) = read_keys(specs, &[]);
                        errors.extend(e.into_iter().map(ListenerError::Key));
                        let _ = l.specs_tx.try_send((specs.clone(), keys));
                    }
                }
                None => match bind(*local, specs) {
                    Ok(l) => {
                        self.by_addr.insert(*local, l);
                    }
                    Err(e) => errors.push(e),
                },
            }
        }
        let gone: Vec<SocketAddr> = self
            .by_addr
            .keys()
            .filter(|a| !layout.contains_key(a))
            .copied()
            .collect();
        for addr in gone {
            if let Some(l) = self.by_addr.remove(&addr) {
                l.task.abort();
            }
        }
        errors
    }

    /// Re-reads every listener's key files now, on the caller's thread, and hands changed
    /// keys to the listeners (each listener also does this itself every [`KEY_RECHECK`]).
    #[cfg(test)]
    pub(super) fn refresh_keys(&mut self) -> Vec<ListenerError> {
        let mut errors = Vec::new();
        for l in self.by_addr.values() {
            let (keys, e) = read_keys(&l.specs, &[]);
            errors.extend(e.into_iter().map(ListenerError::Key));
            let _ = l.specs_tx.try_send((l.specs.clone(), keys));
        }
        errors
    }

    /// Points each listener's peer addresses at the sessions' incoming channels.
    pub(super) fn dispatch(&self, incoming: impl Fn(&str) -> Option<mpsc::Sender<TcpStream>>) {
        for l in self.by_addr.values() {
            let Ok(mut d) = l.dispatch.lock() else {
                continue;
            };
            d.clear();
            for s in &l.specs {
                if let Some(tx) = incoming(&s.name) {
                    d.insert(s.address, tx);
                }
            }
        }
    }

    pub(super) fn close_all(&mut self) {
        for (_, l) in std::mem::take(&mut self.by_addr) {
            l.task.abort();
        }
    }
}

/// Every spec's key (none without a key file); on an error the key in `old` at that position
/// stays in use rather than none.
fn read_keys(
    specs: &[PassiveSpec],
    old: &[Option<Md5Key>],
) -> (Vec<Option<Md5Key>>, Vec<KeyError>) {
    let mut errors = Vec::new();
    let keys = specs
        .iter()
        .enumerate()
        .map(|(i, s)| match &s.password_file {
            None => None,
            Some(path) => match read_key(&s.name, path) {
                Ok(k) => Some(k),
                Err(e) => {
                    errors.push(e);
                    old.get(i).cloned().flatten()
                }
            },
        })
        .collect();
    (keys, errors)
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

fn bind(local: SocketAddr, specs: &[PassiveSpec]) -> Result<Listener, ListenerError> {
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
    let (specs_tx, specs_rx) = mpsc::channel(4);
    let task = tokio::spawn(accept_loop(
        listener,
        Arc::clone(&dispatch),
        specs_rx,
        (specs.to_vec(), keys),
    ));
    Ok(Listener {
        specs: specs.to_vec(),
        dispatch,
        specs_tx,
        task,
    })
}

/// Bounds on the pause after a failed accept (e.g. EMFILE), so an error does not spin.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(100);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

enum ListenerInput {
    Accepted(Result<Accepted, bgp_io::transport::TransportError>),
    Specs(Option<PeersAndKeys>),
    Recheck,
}

/// Accepts connections and hands each to its peer's session; installs new peers and keys,
/// re-reading the key files every [`KEY_RECHECK`] (blocking reads off the runtime's workers).
async fn accept_loop(
    mut listener: BgpListener,
    dispatch: Dispatch,
    mut specs_rx: mpsc::Receiver<PeersAndKeys>,
    (mut specs, mut keys): (Vec<PassiveSpec>, Vec<Option<Md5Key>>),
) {
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut recheck = tokio::time::interval(KEY_RECHECK);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported: Vec<String> = Vec::new();
    let mut refusals = super::refusals::RefusalLog::default();
    loop {
        // Peers first: a connection from a peer added a moment ago is not refused.
        let input = tokio::select! {
            biased;
            s = specs_rx.recv() => ListenerInput::Specs(s),
            a = listener.accept() => ListenerInput::Accepted(a),
            _ = recheck.tick() => ListenerInput::Recheck,
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
                let now = std::time::Instant::now();
                if let Some(line) = refusals.refused(now, from.ip()) {
                    super::refusals::log(line);
                }
            }
            ListenerInput::Accepted(Err(e)) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
            ListenerInput::Specs(Some((new_specs, new_keys))) => {
                specs = new_specs;
                keys = new_keys;
                set_peers(&mut listener, &specs, &keys);
            }
            ListenerInput::Specs(None) => return,
            ListenerInput::Recheck => {
                if let Some(line) = refusals.flush(std::time::Instant::now()) {
                    super::refusals::log(line);
                }
                let (read_specs, old) = (specs.clone(), keys.clone());
                let read = tokio::task::spawn_blocking(move || read_keys(&read_specs, &old));
                let Ok((new_keys, errors)) = read.await else {
                    continue;
                };
                report_key_errors(&errors, &mut reported);
                if new_keys != keys {
                    keys = new_keys;
                    set_peers(&mut listener, &specs, &keys);
                }
            }
        }
    }
}

/// Logs key errors that are new since the last read (a bad file is one warning, not one a
/// second).
fn report_key_errors(errors: &[KeyError], reported: &mut Vec<String>) {
    let now: Vec<String> = errors.iter().map(ToString::to_string).collect();
    for e in now.iter().filter(|e| !reported.contains(e)) {
        tracing::warn!(error = %e, "passive peer key; the key in use stays");
    }
    *reported = now;
}

fn set_peers(listener: &mut BgpListener, specs: &[PassiveSpec], keys: &[Option<Md5Key>]) {
    if let Err(e) = listener.set_peers(passive_peers(specs, keys)) {
        tracing::error!(error = %e, local = %listener.local_addr(), "updating the listener's peers failed");
    }
}
