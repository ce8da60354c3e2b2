//! State-machine property test: random node churn, faults, restarts and pool changes against
//! the fake store, with the invariants of the allocator design checked after every step.
//!
//! Spaces are tiny (4-slot pool CIDRs) so exhaustion, quarantine and draining happen often.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ipam_watch::allocator::*;
use proptest::prelude::*;

const Q: u64 = 300;
const NAMES: [&str; 6] = ["n0", "n1", "n2", "n3", "n4", "n5"];
/// Candidate CIDRs of pool "a": (cidr, is_v6). Masks: /30 and /126 (4 slots each).
const A_CIDRS: [(&str, bool); 5] = [
    ("10.0.0.0/28", false),
    ("10.0.0.16/28", false),
    ("10.0.0.32/28", false),
    ("fd00::/124", true),
    ("fd00::10/124", true),
];
/// Pool "z" overlaps "a": accepted only where "a" does not already hold the space.
const Z_V4: &str = "10.0.0.0/27";
const Z_V6: &str = "fd00::/123";

#[derive(Debug, Clone)]
enum Op {
    Add(usize),
    Delete(usize),
    MarkDeleting(usize),
    Reconcile,
    Fault(Fault),
    Advance(u64),
    Restart,
    AddCidr(usize),
    Shrink(usize),
    ToggleOverlappingPool,
    /// Kubernetes GC deletes records whose owner Node is gone.
    GarbageCollect,
}

fn op() -> impl Strategy<Value = Op> {
    let fault = prop_oneof![
        Just(Fault::Conflict),
        Just(Fault::TimeoutApplied),
        Just(Fault::TimeoutNotApplied),
        Just(Fault::NotFound),
        Just(Fault::ServerError),
    ];
    prop_oneof![
        4 => (0..NAMES.len()).prop_map(Op::Add),
        2 => (0..NAMES.len()).prop_map(Op::Delete),
        1 => (0..NAMES.len()).prop_map(Op::MarkDeleting),
        5 => Just(Op::Reconcile),
        2 => fault.prop_map(Op::Fault),
        2 => (0u64..400).prop_map(Op::Advance),
        1 => Just(Op::Restart),
        1 => (0..A_CIDRS.len()).prop_map(Op::AddCidr),
        1 => (0..A_CIDRS.len()).prop_map(Op::Shrink),
        1 => Just(Op::ToggleOverlappingPool),
        1 => Just(Op::GarbageCollect),
    ]
}

fn p(s: &str) -> PodCidr {
    PodCidr::parse(s).unwrap()
}

struct Harness {
    config: AllocatorConfig,
    store: FakeStore,
    rec: Reconciler,
    nodes: BTreeMap<String, ObservedNode>,
    uid_seq: u64,
    now: Timestamp,
    a_cidrs: BTreeSet<usize>,
    z_on: bool,
    /// CIDR of a vanished node (store-visible or unknown-outcome) -> when it vanished.
    gone_at: HashMap<PodCidr, u64>,
    /// CIDRs written with an unknown outcome, per node (this allocator instance only).
    unknown: HashMap<NodeUid, BTreeMap<Family, PodCidr>>,
    /// Store CIDRs per live node: never change once seen.
    stable: HashMap<NodeUid, BTreeMap<Family, PodCidr>>,
    /// Every CIDR ever put in an action for a node (first appearance must be in a pool).
    issued: HashMap<NodeUid, BTreeSet<PodCidr>>,
}

impl Harness {
    fn new() -> Self {
        let config = AllocatorConfig {
            families: vec![Family::V4, Family::V6],
            quarantine_secs: Q,
        };
        let mut h = Harness {
            rec: Reconciler::new(Allocator::new(config.clone(), vec![])),
            config,
            store: FakeStore::new(),
            nodes: BTreeMap::new(),
            uid_seq: 0,
            now: Timestamp(10_000),
            a_cidrs: BTreeSet::from([0, 3]),
            z_on: false,
            gone_at: HashMap::new(),
            unknown: HashMap::new(),
            stable: HashMap::new(),
            issued: HashMap::new(),
        };
        h.restart();
        h
    }

    fn pools(&self) -> Vec<PodCidrPool> {
        let pick = |v6: bool| {
            self.a_cidrs
                .iter()
                .filter(|&&i| A_CIDRS[i].1 == v6)
                .map(|&i| A_CIDRS[i].0.to_string())
                .collect()
        };
        let mut pools = vec![PodCidrPool {
            name: "a".into(),
            ipv4: Some(FamilyPoolSpec {
                cidrs: pick(false),
                mask_size: 30,
            }),
            ipv6: Some(FamilyPoolSpec {
                cidrs: pick(true),
                mask_size: 126,
            }),
            node_selector: None,
        }];
        if self.z_on {
            pools.push(PodCidrPool {
                name: "z".into(),
                ipv4: Some(FamilyPoolSpec {
                    cidrs: vec![Z_V4.into()],
                    mask_size: 30,
                }),
                ipv6: Some(FamilyPoolSpec {
                    cidrs: vec![Z_V6.into()],
                    mask_size: 126,
                }),
                node_selector: None,
            });
        }
        pools
    }

    fn observed(&self) -> Observed {
        Observed::new(self.nodes.values().cloned().collect(), self.store.records())
    }

    /// Records owned by a live node.
    fn live_records(&self) -> Vec<(ObservedNode, Vec<PodCidr>)> {
        self.store
            .records()
            .into_iter()
            .filter_map(|r| {
                let n = self.nodes.get(&r.name).filter(|n| n.uid == r.owner_uid)?;
                Some((n.clone(), r.pod_cidrs.iter().map(|s| p(s)).collect()))
            })
            .collect()
    }

    fn restart(&mut self) {
        self.rec = Reconciler::new(Allocator::new(self.config.clone(), self.pools()));
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Add(i) => {
                if !self.nodes.contains_key(NAMES[i]) {
                    self.uid_seq += 1;
                    let uid = NodeUid(format!("{}-{}", NAMES[i], self.uid_seq));
                    let node = ObservedNode {
                        name: NAMES[i].into(),
                        uid,
                        labels: BTreeMap::new(),
                        deleting: false,
                    };
                    self.nodes.insert(NAMES[i].into(), node);
                }
            }
            Op::Delete(i) => {
                let Some(n) = self.nodes.get(NAMES[i]).cloned() else {
                    return;
                };
                let mut vanished: Vec<PodCidr> = self
                    .live_records()
                    .into_iter()
                    .filter(|(m, _)| m.uid == n.uid)
                    .flat_map(|(_, c)| c)
                    .collect();
                vanished.extend(
                    self.unknown
                        .remove(&n.uid)
                        .unwrap_or_default()
                        .into_values(),
                );
                for c in vanished {
                    self.gone_at.insert(c, self.now.0);
                }
                self.stable.remove(&n.uid);
                self.nodes.remove(NAMES[i]);
            }
            Op::MarkDeleting(i) => {
                if let Some(n) = self.nodes.get_mut(NAMES[i]) {
                    n.deleting = true;
                }
            }
            Op::Reconcile => self.reconcile(),
            Op::Fault(f) => self.store.inject(f),
            Op::Advance(d) => self.now = self.now.plus(d),
            Op::Restart => self.restart_and_check(),
            Op::AddCidr(i) => {
                self.a_cidrs.insert(i);
                let pools = self.pools();
                self.rec.allocator_mut().set_pools(pools);
            }
            Op::Shrink(i) => {
                self.a_cidrs.remove(&i);
                let pools = self.pools();
                self.rec.allocator_mut().set_pools(pools);
            }
            Op::GarbageCollect => self.garbage_collect(),
            Op::ToggleOverlappingPool => {
                self.z_on = !self.z_on;
                let pools = self.pools();
                self.rec.allocator_mut().set_pools(pools);
            }
        }
    }

    fn garbage_collect(&mut self) {
        let live: BTreeSet<NodeUid> = self.nodes.values().map(|n| n.uid.clone()).collect();
        for r in self.store.records() {
            if !live.contains(&r.owner_uid) {
                self.store.remove(&r.name);
            }
        }
    }

    fn reconcile(&mut self) {
        let clean = self.store.pending_faults() == 0;
        let obs = self.observed();
        // Restore is idempotent: run it alone first to snapshot the state allocation starts from.
        self.rec.restore(&obs, self.now);
        let before = self.rec.allocator().clone();
        let actions = self.rec.plan(&obs, self.now);
        check_lowest_free_first(&before, &actions);
        self.check_actions(&actions);
        let report = self.rec.execute(actions, &mut self.store);
        for (a, out) in &report.outcomes {
            let Some(spec) = a.spec() else { continue };
            let fams = spec.pod_cidrs.iter().map(|s| (p(s).family(), p(s)));
            match out {
                WriteOutcome::Timeout | WriteOutcome::ServerError(_) => self
                    .unknown
                    .entry(spec.owner_uid.clone())
                    .or_default()
                    .extend(fams),
                WriteOutcome::Ok => {
                    self.unknown.remove(&spec.owner_uid);
                }
                _ => {}
            }
        }
        // I8: after a pass without faults, the next pass writes nothing.
        if clean {
            let again = self.rec.plan(&self.observed(), self.now);
            assert!(again.is_empty(), "second reconcile wants writes: {again:?}");
        }
        // Nodes that are gone hold nothing; quarantine past its time is processed.
        let live: BTreeSet<&NodeUid> = self.nodes.values().map(|n| &n.uid).collect();
        for u in self.rec.allocator().node_uids() {
            assert!(live.contains(&u), "gone node {u} still holds CIDRs");
        }
        assert!(
            self.rec
                .allocator()
                .quarantined()
                .iter()
                .all(|(_, t)| *t > self.now)
        );
    }

    fn check_actions(&mut self, actions: &[Action]) {
        let alloc = self.rec.allocator();
        for a in actions {
            let Some(spec) = a.spec() else { continue };
            let uid = &spec.owner_uid;
            let cidrs: Vec<PodCidr> = spec.pod_cidrs.iter().map(|s| p(s)).collect();
            let fams: BTreeSet<Family> = cidrs.iter().map(|c| c.family()).collect();
            assert_eq!(fams.len(), cidrs.len(), "two CIDRs of one family: {spec:?}");
            for c in &cidrs {
                let first = self.issued.entry(uid.clone()).or_default().insert(*c);
                if first {
                    assert!(
                        alloc.pool_of(c).is_some(),
                        "{c} issued outside every active pool"
                    );
                }
                if let Some(&t) = self.gone_at.get(c) {
                    assert!(
                        self.now.0 >= t + Q,
                        "{c} reissued {}s after its node vanished",
                        self.now.0 - t
                    );
                }
                if let Some(&u) = self.unknown.get(uid).and_then(|m| m.get(&c.family())) {
                    assert_eq!(u, *c, "unknown-outcome write retried with another CIDR");
                }
                for (other, m) in &self.unknown {
                    assert!(
                        other == uid || !m.values().any(|x| x.overlaps(c)),
                        "{c} of {other}'s unresolved write given to {uid}"
                    );
                }
            }
        }
    }

    fn restart_and_check(&mut self) {
        let old = self.rec.allocator().clone();
        self.restart();
        let obs = self.observed();
        self.rec.restore(&obs, self.now);
        let new = self.rec.allocator();
        for (n, cidrs) in self.live_records() {
            let held: BTreeSet<PodCidr> = new
                .node(&n.uid)
                .map(|e| e.held.iter().map(|h| h.cidr).collect())
                .unwrap_or_default();
            assert_eq!(
                held,
                cidrs.iter().copied().collect(),
                "restore of {} differs from the store",
                n.name
            );
            assert!(
                new.node(&n.uid)
                    .is_none_or(|e| e.held.iter().all(|h| h.state == HeldState::Confirmed))
            );
            let confirmed: BTreeSet<PodCidr> = old
                .node(&n.uid)
                .map(|e| {
                    e.held
                        .iter()
                        .filter(|h| h.state == HeldState::Confirmed)
                        .map(|h| h.cidr)
                        .collect()
                })
                .unwrap_or_default();
            assert!(
                confirmed.is_subset(&held),
                "confirmed CIDRs of {} lost by restart",
                n.name
            );
        }
        // Documented: unresolved writes and quarantine not visible in the store do not survive.
        self.unknown.clear();
        let in_store: BTreeSet<PodCidr> = self
            .store
            .records()
            .iter()
            .flat_map(|r| r.pod_cidrs.iter().map(|s| p(s)))
            .collect();
        self.gone_at.retain(|c, _| in_store.contains(c));
    }

    fn check_state(&mut self) {
        let alloc = self.rec.allocator();
        // I1/I5: store CIDRs of live nodes never overlap; one per family.
        let recs = self.live_records();
        let mut all: Vec<(NodeUid, PodCidr)> = Vec::new();
        for (n, cidrs) in &recs {
            let fams: BTreeSet<Family> = cidrs.iter().map(|c| c.family()).collect();
            assert_eq!(fams.len(), cidrs.len(), "{}: {cidrs:?}", n.name);
            all.extend(cidrs.iter().map(|c| (n.uid.clone(), *c)));
            let cond = self.store.record(&n.name).and_then(|r| r.allocated);
            assert!(
                cond.is_none_or(|c| c.reason != "Conflict"),
                "allocator created a conflict"
            );
        }
        for (i, (u, a)) in all.iter().enumerate() {
            for (v, b) in &all[i + 1..] {
                assert!(u == v || !a.overlaps(b), "{u}:{a} overlaps {v}:{b}");
            }
        }
        // The allocator's own view: single owners, no overlaps.
        let holdings = alloc.holdings();
        for (i, (a, owners)) in holdings.iter().enumerate() {
            assert_eq!(owners.len(), 1, "{a} held by {owners:?}");
            for (b, _) in &holdings[i + 1..] {
                assert!(!a.overlaps(b), "held {a} overlaps held {b}");
            }
        }
        // I10/I13: a live node's store CIDRs never change once set (deletionTimestamp included).
        for (n, cidrs) in &recs {
            let seen = self.stable.entry(n.uid.clone()).or_default();
            let now: BTreeMap<Family, PodCidr> = cidrs.iter().map(|c| (c.family(), *c)).collect();
            for (f, c) in seen.iter() {
                assert_eq!(
                    now.get(f),
                    Some(c),
                    "{} changed/lost its {} CIDR",
                    n.name,
                    f.name()
                );
            }
            seen.extend(now);
        }
        // I2/I11: active ranges are disjoint and come from the configuration.
        let ranges = alloc.active_ranges();
        let configured: BTreeSet<PodCidr> = self
            .pools()
            .iter()
            .flat_map(|pl| {
                Family::ALL
                    .into_iter()
                    .filter_map(|f| pl.spec(f))
                    .flat_map(|s| s.cidrs.clone())
            })
            .map(|s| p(&s))
            .collect();
        for (i, r) in ranges.iter().enumerate() {
            assert!(configured.contains(&r.cidr));
            for s in &ranges[i + 1..] {
                assert!(
                    !r.cidr.overlaps(&s.cidr),
                    "active {} overlaps {}",
                    r.cidr,
                    s.cidr
                );
            }
        }
        if self.z_on {
            let z = alloc.pool_status("z").unwrap();
            let active_z = ranges.iter().filter(|r| r.pool == "z").count();
            assert_eq!(
                active_z < 2,
                z.condition(OVERLAPPING).unwrap().status == ConditionStatus::True
            );
        }
        // I4: accounting adds up and the free runs match a brute-force count.
        let quarantined = alloc.quarantined();
        for r in &ranges {
            let bits = r.cidr.family().bits();
            let slots = 1u128 << (r.mask_size - r.cidr.prefix_len());
            let step = 1u128 << (bits - r.mask_size);
            let free = (0..slots)
                .filter(|i| {
                    let s = PodCidr::new(r.cidr.family(), r.cidr.addr() + i * step, r.mask_size)
                        .unwrap();
                    !holdings.iter().any(|(h, _)| h.overlaps(&s))
                        && !quarantined.iter().any(|(q, _)| q.overlaps(&s))
                })
                .count() as u128;
            assert_eq!(
                r.free, free,
                "free runs of {} disagree with holdings",
                r.cidr
            );
        }
        for st in alloc.pool_statuses() {
            for a in &st.families {
                assert_eq!(
                    a.capacity,
                    a.allocated + a.free + a.quarantined + a.blocked,
                    "{}: {a:?}",
                    st.name
                );
                let cap: u128 = ranges
                    .iter()
                    .filter(|r| r.pool == st.name && r.cidr.family() == a.family)
                    .map(|r| 1u128 << (r.mask_size - r.cidr.prefix_len()))
                    .sum();
                assert_eq!(a.capacity, cap);
            }
        }
    }
}

/// I6: every newly issued CIDR is the lowest slot (pool order, then address) that was neither
/// held nor quarantined when allocation started, nor issued earlier in the same pass.
fn check_lowest_free_first(before: &Allocator, actions: &[Action]) {
    let held: Vec<PodCidr> = before.holdings().into_iter().map(|(c, _)| c).collect();
    let quarantined: Vec<PodCidr> = before.quarantined().into_iter().map(|(c, _)| c).collect();
    let mut taken: Vec<PodCidr> = Vec::new();
    for spec in actions.iter().filter_map(Action::spec) {
        for c in spec.pod_cidrs.iter().map(|s| p(s)) {
            let had = before
                .node(&spec.owner_uid)
                .is_some_and(|e| e.held.iter().any(|h| h.cidr == c));
            if had {
                continue;
            }
            let expected = before
                .active_ranges()
                .into_iter()
                .filter(|r| r.cidr.family() == c.family())
                .flat_map(|r| {
                    let step = 1u128 << (r.cidr.family().bits() - r.mask_size);
                    let n = 1u128 << (r.mask_size - r.cidr.prefix_len());
                    (0..n).map(move |i| {
                        PodCidr::new(r.cidr.family(), r.cidr.addr() + i * step, r.mask_size)
                            .unwrap()
                    })
                })
                .find(|s| {
                    !held
                        .iter()
                        .chain(&quarantined)
                        .chain(&taken)
                        .any(|x| x.overlaps(s))
                });
            assert_eq!(Some(c), expected, "not the lowest free slot");
            taken.push(c);
        }
    }
}

proptest! {
    #[test]
    fn allocator_state_machine(ops in prop::collection::vec(op(), 1..64)) {
        let mut h = Harness::new();
        for op in &ops {
            h.apply(op);
            h.check_state();
        }
        // Liveness: with faults drained, the records of gone nodes collected (a record
        // keeps its CIDR while it exists) and quarantine over, every live node is served
        // and a restart writes nothing.
        h.store.clear_faults();
        h.garbage_collect();
        h.reconcile();
        h.now = h.now.plus(Q + 1);
        h.reconcile();
        h.reconcile();
        h.check_state();
        h.restart();
        let obs = h.observed();
        let actions = h.rec.plan(&obs, h.now);
        prop_assert!(actions.is_empty(), "restart of a settled cluster writes: {:?}", actions);
    }
}
