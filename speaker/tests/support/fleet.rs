//! A fleet of simulated speakers for progressive rollouts, shared by `config_rollout.rs` and
//! the `config_objects_scale` benchmark (included by path, not a module of `common`).
//!
//! Each node runs the speaker's own code for its configuration objects: its Node watch and
//! the objects task (`config_objects::spawn`, which decides which generation the node runs,
//! rollout waves included). What is simulated is the session and the report: when the
//! config the task publishes changes a session setting of peer `tor` (its hold time here),
//! the session goes down as the core resets it, and comes back `reconnect` later, except on
//! a broken node (its router rejects the new setting), where it stays down; the node's
//! NodeBGPStatus says which generation it runs and the session's state, as a speaker's does.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fake_kube::{FakeKube, Gvr};
use podcidr_bgp::daemon::ObjectSettings;
use podcidr_bgp::daemon::kube::{config_objects, node};
use podcidr_bgp::objects::ObjectKind;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub const PEER: &str = "tor";

pub fn nbs() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodebgpstatuses")
}

/// Sessions down now, and the most at any moment.
#[derive(Default)]
pub struct Down {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Down {
    fn enter(&self) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn now(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }

    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    pub fn reset_max(&self) {
        self.max.store(self.now(), Ordering::SeqCst);
    }
}

/// A node ran a generation of the peer from `at`.
pub type Applied = (usize, i64, Instant);

pub struct Fleet {
    pub down: Arc<Down>,
    pub applied: mpsc::UnboundedReceiver<Applied>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The NodeBGPStatus a speaker on `node` running `generation` of the peer writes.
fn report(node: &str, generation: i64, state: &str) -> Value {
    json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodeBGPStatus",
           "metadata": {"name": node}, "spec": {"nodeName": node},
           "status": {"source": "ipam-crd", "sourceReady": true, "updatedAt": "",
                      "speakerVersion": "sim",
                      "config": {"speakerConfig": {"name": "default", "generation": 1},
                                 "peers": [{"name": PEER, "generation": generation}]},
                      "peers": [{"name": PEER, "bgpPeer": PEER, "address": "192.0.2.1",
                                 "asn": 65000, "state": state, "since": ""}]}})
}

fn write_report(fake: &FakeKube, node: &str, generation: i64, state: &str) {
    let r = report(node, generation, state);
    let updated = fake.update(&nbs(), None, node, |o| o["status"] = r["status"].clone());
    if updated.is_err() {
        let _ = fake.insert(&nbs(), r);
    }
}

/// Starts `nodes` simulated speakers, each with `client(i)`; `broken` nodes never get their
/// session back after a reset.
pub fn start(
    fake: &Arc<FakeKube>,
    nodes: &[String],
    client: &dyn Fn(usize) -> kube::Client,
    broken: &BTreeSet<String>,
    reconnect: Duration,
    dir: &std::path::Path,
) -> Fleet {
    let (tx, rx) = mpsc::unbounded_channel();
    let down = Arc::new(Down::default());
    let mut tasks = Vec::with_capacity(3 * nodes.len());
    for (i, name) in nodes.iter().enumerate() {
        let client = client(i);
        let (node_rx, node_task) = node::watch_node(client.clone(), name);
        let settings = ObjectSettings {
            secret_namespace: "podcidr-system".into(),
            key_dir: dir.join(format!("keys-{i}")),
            state_dir: Some(dir.join(format!("state-{i}"))),
        };
        let (mut configs, task) = config_objects::spawn(client, settings, name, node_rx);
        let (tx, down, fake, name) = (tx.clone(), down.clone(), fake.clone(), name.clone());
        let is_broken = broken.contains(&name);
        let sim = tokio::spawn(async move {
            let mut running: Option<(i64, u16)> = None;
            let mut back: Option<JoinHandle<()>> = None;
            let session_down = Arc::new(AtomicBool::new(false));
            while configs.changed().await.is_ok() {
                let now = Instant::now();
                let run = configs.borrow_and_update().as_deref().and_then(|c| {
                    let g = c
                        .peers
                        .iter()
                        .find(|r| r.kind == ObjectKind::Peer && r.name == PEER)?
                        .generation?;
                    let hold = c.config.as_ref()?.peers.first()?.hold_time.seconds();
                    Some((g, hold))
                });
                let Some((g, hold)) = run else { continue };
                if running == Some((g, hold)) {
                    continue;
                }
                let _ = tx.send((i, g, now));
                let reset = running.is_some_and(|(_, h)| h != hold);
                running = Some((g, hold));
                if !reset {
                    let state = if session_down.load(Ordering::SeqCst) {
                        "Connect"
                    } else {
                        "Established"
                    };
                    write_report(&fake, &name, g, state);
                    continue;
                }
                // The core resets the session for the new hold time.
                if let Some(b) = back.take() {
                    b.abort();
                }
                if !session_down.swap(true, Ordering::SeqCst) {
                    down.enter();
                }
                write_report(&fake, &name, g, "Connect");
                if is_broken {
                    continue;
                }
                let (fake, name, down, flag) = (
                    fake.clone(),
                    name.clone(),
                    down.clone(),
                    session_down.clone(),
                );
                back = Some(tokio::spawn(async move {
                    tokio::time::sleep(reconnect).await;
                    if flag.swap(false, Ordering::SeqCst) {
                        write_report(&fake, &name, g, "Established");
                        down.leave();
                    }
                }));
            }
        });
        tasks.extend([node_task, task, sim]);
    }
    Fleet {
        down,
        applied: rx,
        tasks,
    }
}
