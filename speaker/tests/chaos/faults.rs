//! The randomized fault schedule (seeded): every kind once in a shuffled order, then random
//! kinds until the time is up; node churn runs beside it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_kube::{FakeKube, Fault, Gvr, Verb};

use crate::cluster::{Cluster, node_json};

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
}

pub const KINDS: [Kind; 13] = [
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
        }
    }
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
    pub injected: BTreeMap<Kind, u64>,
    pub outage: Duration,
    pub churn: Arc<Mutex<Churn>>,
}

impl Schedule {
    pub fn new(seed: u64, outage: Duration) -> Schedule {
        Schedule {
            rng: Rng(seed),
            injected: BTreeMap::new(),
            outage,
            churn: Arc::new(Mutex::new(Churn::default())),
        }
    }

    /// Every kind once, shuffled.
    pub fn first_round(&mut self) -> Vec<Kind> {
        let mut k = KINDS.to_vec();
        for i in (1..k.len()).rev() {
            let j = usize::try_from(self.rng.below(i as u64 + 1)).unwrap();
            k.swap(i, j);
        }
        k
    }

    pub fn random_kind(&mut self) -> Kind {
        // Outages are long: rarer than the rest after the first round.
        loop {
            let k = *self.rng.pick(&KINDS);
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
        }
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
