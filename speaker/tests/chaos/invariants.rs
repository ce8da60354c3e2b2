//! Continuous invariant checks; each violation is counted (with a sample kept for the report).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_kube::{EventType, FakeKube};
use integration_tests::Bird;
use integration_tests::bird_parse::parse_routes;
use ipnet::IpNet;

use super::cluster::{POOL, cidrs_of};

pub const DOUBLE: &str = "CIDR held by two nodes";
pub const OUTSIDE: &str = "prefix outside allowedPrefixes at the ToR";
pub const WITHDRAWN: &str = "live node's route withdrawn at the ToR";
pub const NOT_WITHDRAWN: &str = "deleted node's route kept at the ToR";
pub const UNCONVERGED: &str = "not converged within the bound";
pub const ALL: [&str; 5] = [DOUBLE, OUTSIDE, WITHDRAWN, NOT_WITHDRAWN, UNCONVERGED];

#[derive(Default)]
pub struct Violations {
    counts: Mutex<BTreeMap<&'static str, u64>>,
    samples: Mutex<Vec<String>>,
}

impl Violations {
    pub fn record(&self, kind: &'static str, detail: String) {
        *self.counts.lock().unwrap().entry(kind).or_default() += 1;
        eprintln!("VIOLATION {kind}: {detail}");
        let mut s = self.samples.lock().unwrap();
        if s.len() < 50 {
            s.push(format!("{kind}: {detail}"));
        }
    }
    pub fn count(&self, kind: &str) -> u64 {
        self.counts.lock().unwrap().get(kind).copied().unwrap_or(0)
    }
    pub fn total(&self) -> u64 {
        self.counts.lock().unwrap().values().sum()
    }
    pub fn samples(&self) -> Vec<String> {
        self.samples.lock().unwrap().clone()
    }
}

/// Reads every store change of the fake API server in order and checks, after each one, that
/// no CIDR is in two `NodePodCIDR`s. A compaction (410) re-reads the current list.
pub fn spawn_cidr_watch(fake: Arc<FakeKube>, v: Arc<Violations>, states: Arc<AtomicU64>) {
    tokio::spawn(async move {
        let npc = crate::common::npc();
        let mut sub = fake.subscribe();
        let mut held: HashMap<String, Vec<IpNet>> = fake
            .list(&npc, None)
            .iter()
            .map(|o| (name(o), cidrs_of(o)))
            .collect();
        let mut reported: BTreeSet<(IpNet, String, String)> = BTreeSet::new();
        loop {
            let ev = match sub.next().await {
                Ok(ev) => ev,
                Err(_) => {
                    sub = fake.subscribe();
                    held = fake
                        .list(&npc, None)
                        .iter()
                        .map(|o| (name(o), cidrs_of(o)))
                        .collect();
                    continue;
                }
            };
            if ev.gvr != npc {
                continue;
            }
            states.fetch_add(1, Ordering::Relaxed);
            match ev.event_type {
                EventType::Deleted => {
                    held.remove(&name(&ev.object));
                }
                EventType::Added | EventType::Modified => {
                    held.insert(name(&ev.object), cidrs_of(&ev.object));
                }
            }
            let mut by_cidr: HashMap<IpNet, &str> = HashMap::new();
            let mut now = BTreeSet::new();
            for (n, cidrs) in &held {
                for c in cidrs {
                    if let Some(other) = by_cidr.insert(*c, n) {
                        let (a, b) = if other < n.as_str() {
                            (other.to_owned(), n.clone())
                        } else {
                            (n.clone(), other.to_owned())
                        };
                        now.insert((*c, a, b));
                    }
                }
            }
            for d in now.difference(&reported) {
                v.record(
                    DOUBLE,
                    format!(
                        "{} in {} and {} (rv {})",
                        d.0, d.1, d.2, ev.resource_version
                    ),
                );
            }
            reported = now;
        }
    });
}

fn name(o: &serde_json::Value) -> String {
    o["metadata"]["name"].as_str().unwrap_or("").to_owned()
}

/// What the ToR poller saw: polls, and per node the prefixes last seen.
#[derive(Default)]
pub struct TorView {
    pub polls: AtomicU64,
    pub routes: Mutex<BTreeMap<String, BTreeSet<IpNet>>>,
    /// Per speaker node whose Node was deleted: the prefixes of that deleted incarnation,
    /// whose withdrawal is the expected one (until the node's next allocation is announced).
    pub removed: Mutex<BTreeMap<String, BTreeSet<IpNet>>>,
    /// Bumped after each poll whose table came from one BIRD process throughout.
    pub clean_polls: AtomicU64,
}

impl TorView {
    /// What the ToR had for `node` at the last poll.
    pub fn routes_of(&self, node: &str) -> BTreeSet<IpNet> {
        self.routes
            .lock()
            .unwrap()
            .get(node)
            .cloned()
            .unwrap_or_default()
    }
}

/// Polls BIRD's table every 200 ms on a thread: every prefix must be inside the pool (the
/// speakers' `allowedPrefixes`), and a route of a stable node, once seen, must stay (stale
/// over a speaker restart is fine: graceful restart) unless BIRD itself was restarted.
pub fn spawn_tor_poller(
    bird: Arc<Mutex<Option<Bird>>>,
    bird_epoch: Arc<AtomicU64>,
    stable: usize,
    v: Arc<Violations>,
    view: Arc<TorView>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let pool: IpNet = POOL.parse().unwrap();
    std::thread::spawn(move || {
        let mut seen: BTreeMap<String, BTreeSet<IpNet>> = BTreeMap::new();
        let mut epoch = u64::MAX;
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(200));
            let before = bird_epoch.load(Ordering::SeqCst);
            let text = {
                let g = bird.lock().unwrap();
                let Some(b) = g.as_ref() else { continue };
                match b.cmd("show route all") {
                    Ok(t) => t,
                    Err(_) => continue,
                }
            };
            if bird_epoch.load(Ordering::SeqCst) != before || before != epoch {
                // A BIRD restart: start over from what the new BIRD has.
                epoch = before;
                seen.clear();
            }
            view.polls.fetch_add(1, Ordering::Relaxed);
            let mut now: BTreeMap<String, BTreeSet<IpNet>> = BTreeMap::new();
            for r in parse_routes(&text) {
                if !(pool.contains(&r.prefix) && r.prefix.prefix_len() == 24) {
                    v.record(OUTSIDE, format!("{} from {}", r.prefix, r.from_protocol));
                }
                let node = r
                    .from_protocol
                    .strip_prefix('n')
                    .map_or(r.from_protocol.clone(), |i| format!("node-{i}"));
                now.entry(node).or_default().insert(r.prefix);
            }
            let removed = view.removed.lock().unwrap().clone();
            for i in 0..stable {
                let node = format!("node-{i}");
                let had = seen.get(&node).cloned().unwrap_or_default();
                let has = now.get(&node).cloned().unwrap_or_default();
                // A deleted Node's withdrawal is the one that is expected.
                let mut lost = &had - &has;
                if let Some(expected) = removed.get(&node) {
                    lost.retain(|p| !expected.contains(p));
                }
                for p in &lost {
                    v.record(WITHDRAWN, format!("{p} of {node}"));
                }
                seen.insert(node, has);
            }
            *view.routes.lock().unwrap() = now;
            if bird_epoch.load(Ordering::SeqCst) == before {
                view.clean_polls.fetch_add(1, Ordering::SeqCst);
            }
        }
    })
}
