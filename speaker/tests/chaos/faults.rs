//! The randomized fault schedule (seeded): every kind once in a shuffled order, then random
//! kinds until the time is up; node churn runs beside it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_kube::{FakeKube, Fault, Gvr, Verb};

use super::cluster::{Cluster, node_json, speaker_node};
use super::invariants::{NOT_WITHDRAWN, TorView, Violations};

/// How long a deleted Node's route may stay at the ToR.
pub const REMOVAL_BOUND: Duration = Duration::from_secs(20);

/// splitmix64: small, seedable, good enough for a schedule.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[usize::try_from(self.below(items.len() as u64)).unwrap()]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Http429,
    Http500,
    Http503,
    Http504,
    AppliedThenTimeout,
    Slow,
    WatchDrop,
    Gone410,
    ApiDown,
    LeaderKillMidWrite,
    LeaseExpiryMidWrite,
    SpeakerKill,
    BirdRestart,
    RogueCidr,
    NodeRemoved,
}

pub const KINDS: [Kind; 15] = [
    Kind::Http429,
    Kind::Http500,
    Kind::Http503,
    Kind::Http504,
    Kind::AppliedThenTimeout,
    Kind::Slow,
    Kind::WatchDrop,
    Kind::Gone410,
    Kind::ApiDown,
    Kind::LeaderKillMidWrite,
    Kind::LeaseExpiryMidWrite,
    Kind::SpeakerKill,
    Kind::BirdRestart,
    Kind::RogueCidr,
    Kind::NodeRemoved,
];

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Http429 => "429 Too Many Requests",
            Kind::Http500 => "500 Internal Server Error",
            Kind::Http503 => "503 Service Unavailable",
            Kind::Http504 => "504 Timeout (not applied)",
            Kind::AppliedThenTimeout => "504 Timeout after applying a write",
            Kind::Slow => "slow response (0.5-3 s)",
            Kind::WatchDrop => "watches dropped",
            Kind::Gone410 => "410 Gone on watches (+ compaction)",
            Kind::ApiDown => "API down",
            Kind::LeaderKillMidWrite => "allocator leader SIGKILLed mid-write",
            Kind::LeaseExpiryMidWrite => "Lease expires while the leader writes (SIGSTOP)",
            Kind::SpeakerKill => "speaker SIGKILLed and restarted",
            Kind::BirdRestart => "BIRD restarted",
            Kind::RogueCidr => "CIDR outside the pool written into a NodePodCIDR",
            Kind::NodeRemoved => "speaker's Node deleted, then added again",
        }
    }

    /// The `CHAOS_SKIP` spelling.
    pub fn id(self) -> &'static str {
        match self {
            Kind::Http429 => "http429",
            Kind::Http500 => "http500",
            Kind::Http503 => "http503",
            Kind::Http504 => "http504",
            Kind::AppliedThenTimeout => "applied-timeout",
            Kind::Slow => "slow",
            Kind::WatchDrop => "watch-drop",
            Kind::Gone410 => "gone410",
            Kind::ApiDown => "api-down",
            Kind::LeaderKillMidWrite => "leader-kill",
            Kind::LeaseExpiryMidWrite => "lease-expiry",
            Kind::SpeakerKill => "speaker-kill",
            Kind::BirdRestart => "bird-restart",
            Kind::RogueCidr => "rogue-cidr",
            Kind::NodeRemoved => "node-removed",
        }
    }
}

/// The kinds a run injects: all but those named in `skip` (comma-separated ids); an unknown
/// id is an error naming it.
pub fn enabled_kinds(skip: &str) -> Result<Vec<Kind>, String> {
    let skip: Vec<&str> = skip
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(bad) = skip.iter().find(|s| !KINDS.iter().any(|k| k.id() == **s)) {
        let ids: Vec<&str> = KINDS.iter().map(|k| k.id()).collect();
        return Err(format!(
            "CHAOS_SKIP: unknown fault {bad:?} (known: {})",
            ids.join(", ")
        ));
    }
    Ok(KINDS
        .into_iter()
        .filter(|k| !skip.contains(&k.id()))
        .collect())
}

const RESOURCES: [Option<&str>; 5] = [
    None,
    Some("nodepodcidrs"),
    Some("leases"),
    Some("nodes"),
    Some("nodebgpstatuses"),
];

/// Node churn: `churn-N` Nodes without speakers, added and deleted.
#[derive(Default)]
pub struct Churn {
    pub next: u64,
    pub live: VecDeque<String>,
    pub added: u64,
    pub deleted: u64,
}

impl Churn {
    pub fn add(&mut self, fake: &FakeKube) {
        let name = format!("churn-{}", self.next);
        self.next += 1;
        if fake.insert(&Gvr::nodes(), node_json(&name)).is_ok() {
            self.live.push_back(name);
            self.added += 1;
        }
    }
    pub fn delete_oldest(&mut self, fake: &FakeKube) {
        if let Some(name) = self.live.pop_front()
            && fake.delete(&Gvr::nodes(), None, &name).is_ok()
        {
            self.deleted += 1;
        }
    }
    /// One churn step at a steady population of `keep` nodes.
    pub fn step(&mut self, fake: &FakeKube, keep: usize) {
        self.add(fake);
        while self.live.len() > keep {
            self.delete_oldest(fake);
        }
    }
}

pub struct Schedule {
    pub rng: Rng,
    pub kinds: Vec<Kind>,
    pub injected: BTreeMap<Kind, u64>,
    pub outage: Duration,
    pub churn: Arc<Mutex<Churn>>,
    pub view: Arc<TorView>,
    pub violations: Arc<Violations>,
    /// Node removal: time from the Node's deletion to its route leaving the ToR.
    pub removal_withdrawals: Vec<Duration>,
}

impl Schedule {
    pub fn new(
        seed: u64,
        outage: Duration,
        kinds: Vec<Kind>,
        view: Arc<TorView>,
        violations: Arc<Violations>,
    ) -> Schedule {
        Schedule {
            rng: Rng(seed),
            kinds,
            injected: BTreeMap::new(),
            outage,
            churn: Arc::new(Mutex::new(Churn::default())),
            view,
            violations,
            removal_withdrawals: Vec::new(),
        }
    }

    /// Every kind once, shuffled.
    pub fn first_round(&mut self) -> Vec<Kind> {
        let mut k = self.kinds.clone();
        for i in (1..k.len()).rev() {
            let j = usize::try_from(self.rng.below(i as u64 + 1)).unwrap();
            k.swap(i, j);
        }
        k
    }

    pub fn random_kind(&mut self) -> Kind {
        // Outages are long: rarer than the rest after the first round.
        loop {
            let k = *self.rng.pick(&self.kinds);
            if k != Kind::ApiDown || self.rng.below(4) == 0 {
                return k;
            }
        }
    }

    fn api_fault(&mut self, c: &Cluster, make: impl Fn() -> Fault) {
        let res = *self.rng.pick(&RESOURCES);
        let mut f = make().times(usize::try_from(self.rng.range(1, 6)).unwrap());
        if let Some(r) = res {
            f = f.resource(r);
        }
        c.fake.inject(f);
    }

    /// Injects one fault of `kind` (a few take seconds: outage, stalled leader).
    pub async fn inject(&mut self, c: &mut Cluster, kind: Kind) {
        *self.injected.entry(kind).or_default() += 1;
        eprintln!("chaos: {}", kind.label());
        match kind {
            Kind::Http429 => self.api_fault(c, || Fault::fail(429)),
            Kind::Http500 => self.api_fault(c, || Fault::fail(500)),
            Kind::Http503 => self.api_fault(c, || Fault::fail(503)),
            Kind::Http504 => self.api_fault(c, Fault::timeout),
            Kind::AppliedThenTimeout => {
                let res = *self
                    .rng
                    .pick(&["nodepodcidrs", "leases", "nodebgpstatuses"]);
                c.fake
                    .inject(Fault::apply_then_timeout().resource(res).times(2));
                // Give the allocator something to write.
                self.churn.lock().unwrap().add(&c.fake);
            }
            Kind::Slow => {
                let ms = self.rng.range(500, 3000);
                self.api_fault(c, || Fault::delay(Duration::from_millis(ms)));
            }
            Kind::WatchDrop => c.fake.drop_watches(),
            Kind::Gone410 => {
                if self.rng.below(2) == 0 {
                    c.fake.compact();
                }
                c.fake.expire_watches();
            }
            Kind::ApiDown => {
                c.fake.set_outage(true);
                tokio::time::sleep(self.outage).await;
                c.fake.set_outage(false);
            }
            Kind::LeaderKillMidWrite => self.leader_mid_write(c, false).await,
            Kind::LeaseExpiryMidWrite => self.leader_mid_write(c, true).await,
            Kind::SpeakerKill => {
                // Speaker 0 is never killed: its process lives through the run (RSS slope).
                let i = usize::try_from(self.rng.range(1, c.speakers.len() as u64 - 1)).unwrap();
                if let Some(mut p) = c.speakers[i].proc.take() {
                    p.signal(libc::SIGKILL);
                    let _ = p.wait_exit(Duration::from_secs(5));
                }
                c.speakers[i].kills += 1;
                tokio::time::sleep(Duration::from_millis(self.rng.range(200, 2000))).await;
                let p = c.spawn_speaker(&c.speakers[i], i);
                c.speakers[i].proc = Some(p);
            }
            Kind::BirdRestart => {
                let bird = c.bird.clone();
                let cl: &Cluster = c;
                // Bird::start blocks (≤ 10 s) on its control socket.
                tokio::task::block_in_place(|| cl.kill_and_restart_bird());
                drop(bird);
            }
            Kind::RogueCidr => self.rogue_cidr(c).await,
            Kind::NodeRemoved => self.node_removed(c).await,
        }
    }

    /// A buggy or hostile writer adds a CIDR outside the pool (and `allowedPrefixes`) to a
    /// speaker's NodePodCIDR for 1-3 s: the speakers' guard must keep it from the ToR (the
    /// poller counts any such prefix).
    async fn rogue_cidr(&mut self, c: &Cluster) {
        let i = self.rng.below(c.speakers.len() as u64);
        let node = speaker_node(usize::try_from(i).unwrap());
        let rogue = format!("10.99.{i}.0/24");
        let npc = crate::common::npc();
        let edit = |add: bool| {
            let r = rogue.clone();
            c.fake.update(&npc, None, &node, move |o| {
                let Some(list) = o["spec"]["podCIDRs"].as_array_mut() else {
                    return;
                };
                list.retain(|v| v.as_str() != Some(r.as_str()));
                if add {
                    list.push(serde_json::Value::String(r));
                }
            })
        };
        if edit(true).is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(self.rng.range(1000, 3000))).await;
        let _ = edit(false);
    }

    /// A speaker's Node is deleted (its NodePodCIDR goes with it): its route must leave the
    /// ToR (the one withdrawal that is not a violation), within [`REMOVAL_BOUND`]; then the
    /// Node comes back and gets an allocation again. "Left the ToR" needs two polls of one
    /// BIRD process after the Node is deleted: a BIRD restarted meanwhile has no routes yet.
    async fn node_removed(&mut self, c: &Cluster) {
        // Speaker 0 keeps its Node: its process and allocation live through the run.
        let i = usize::try_from(self.rng.range(1, c.speakers.len() as u64 - 1)).unwrap();
        let node = speaker_node(i);
        let mut old = c.allocation_of(&node);
        old.extend(self.view.routes_of(&node));
        self.view
            .removed
            .lock()
            .unwrap()
            .insert(node.clone(), old.clone());
        let start = tokio::time::Instant::now();
        if c.fake.delete(&Gvr::nodes(), None, &node).is_err() {
            self.view.removed.lock().unwrap().remove(&node);
            return;
        }
        let mut gone = false;
        let mut since = self.view.clean_polls.load(Ordering::SeqCst);
        while start.elapsed() < REMOVAL_BOUND {
            // The ToR view is refreshed by the poller every 200 ms.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let at_tor = self.view.routes_of(&node);
            if !at_tor.is_disjoint(&old) {
                since = self.view.clean_polls.load(Ordering::SeqCst);
            } else if self.view.clean_polls.load(Ordering::SeqCst) >= since + 2 {
                gone = true;
                break;
            }
        }
        if gone {
            self.removal_withdrawals.push(start.elapsed());
        } else {
            self.violations.record(
                NOT_WITHDRAWN,
                format!(
                    "{node}: route still at the ToR {REMOVAL_BOUND:?} after its Node was deleted"
                ),
            );
        }
        let _ = c.fake.insert(&Gvr::nodes(), node_json(&node));
        // The old prefixes stay expected-to-go until they are gone and the new incarnation
        // is announced (a late withdrawal is this removal's, already counted if too late).
        let back = tokio::time::Instant::now();
        while back.elapsed() < 2 * REMOVAL_BOUND {
            let alloc = c.allocation_of(&node);
            let at_tor = self.view.routes_of(&node);
            if !alloc.is_empty() && at_tor == alloc && (alloc == old || at_tor.is_disjoint(&old)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.view.removed.lock().unwrap().remove(&node);
    }

    /// Holds the leader's next NodePodCIDR creates (slow API), gives it nodes to allocate,
    /// waits until a create is in flight, then SIGKILLs the leader or SIGSTOPs it for longer
    /// than the Lease (the standby takes over; the old leader wakes mid-write).
    async fn leader_mid_write(&mut self, c: &Cluster, stall: bool) {
        let Some(leader) = c.leader() else {
            eprintln!("chaos: no leader right now");
            return;
        };
        let pid = leader.pid.load(Ordering::SeqCst);
        if pid <= 0 {
            return;
        }
        let before = c.fake.requests(Verb::Create, "nodepodcidrs");
        let delay = Duration::from_millis(self.rng.range(1000, 4000));
        c.fake.inject(
            Fault::delay(delay)
                .verb(Verb::Create)
                .resource("nodepodcidrs")
                .times(3),
        );
        {
            let mut ch = self.churn.lock().unwrap();
            for _ in 0..3 {
                ch.add(&c.fake);
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while c.fake.requests(Verb::Create, "nodepodcidrs") == before
            && tokio::time::Instant::now() < deadline
        {
            // Polling a request counter: the fake API offers no event for it.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // SAFETY: kill(2) on a child this harness started.
        unsafe {
            if stall {
                libc::kill(pid, libc::SIGSTOP);
                tokio::time::sleep(Duration::from_secs(c.lease_secs + 2)).await;
                libc::kill(pid, libc::SIGCONT);
            } else {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}
