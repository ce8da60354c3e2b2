//! One regression test per public allocator bug in the reference catalogue, named after it.

use std::collections::{BTreeMap, BTreeSet};

use ipam_watch::allocator::*;

fn v4_pool(name: &str, cidrs: &[&str], mask: u8) -> PodCidrPool {
    PodCidrPool {
        name: name.into(),
        ipv4: Some(FamilyPoolSpec {
            cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
            mask_size: mask,
        }),
        ipv6: None,
        node_selector: None,
    }
}

fn dual_pool(name: &str, v4: &[&str], m4: u8, v6: &[&str], m6: u8) -> PodCidrPool {
    let mut p = v4_pool(name, v4, m4);
    p.ipv6 = Some(FamilyPoolSpec {
        cidrs: v6.iter().map(|s| s.to_string()).collect(),
        mask_size: m6,
    });
    p
}

fn cfg(families: &[Family], quarantine_secs: u64) -> AllocatorConfig {
    AllocatorConfig {
        families: families.to_vec(),
        quarantine_secs,
    }
}

fn cidr(s: &str) -> PodCidr {
    PodCidr::parse(s).unwrap()
}

/// A cluster: nodes, the fake store and the reconciler under test.
struct World {
    config: AllocatorConfig,
    pools: Vec<PodCidrPool>,
    store: FakeStore,
    nodes: BTreeMap<String, ObservedNode>,
    rec: Reconciler,
    now: Timestamp,
}

impl World {
    fn new(config: AllocatorConfig, pools: Vec<PodCidrPool>) -> Self {
        let rec = Reconciler::new(Allocator::new(config.clone(), pools.clone()));
        World {
            config,
            pools,
            store: FakeStore::new(),
            nodes: BTreeMap::new(),
            rec,
            now: Timestamp(1_000),
        }
    }

    fn add(&mut self, name: &str) {
        self.add_labeled(name, &[]);
    }

    fn add_labeled(&mut self, name: &str, labels: &[(&str, &str)]) {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let node = ObservedNode {
            name: name.into(),
            uid: NodeUid(format!("uid-{name}")),
            labels,
            deleting: false,
        };
        self.nodes.insert(name.into(), node);
    }

    fn uid(&self, name: &str) -> NodeUid {
        NodeUid(format!("uid-{name}"))
    }

    /// Deletes the Node; the garbage collector removes its record with it.
    fn delete(&mut self, name: &str) {
        self.delete_without_gc(name);
        self.store.remove(name);
    }

    /// Deletes the Node but leaves its record (a slow garbage collector, a late write).
    fn delete_without_gc(&mut self, name: &str) {
        self.nodes.remove(name);
    }

    fn observed(&self) -> Observed {
        Observed::new(self.nodes.values().cloned().collect(), self.store.records())
    }

    fn reconcile(&mut self) -> ExecReport {
        let obs = self.observed();
        self.rec.reconcile(&obs, &mut self.store, self.now)
    }

    fn restart(&mut self) {
        self.rec = Reconciler::new(Allocator::new(self.config.clone(), self.pools.clone()));
    }

    fn set_pools(&mut self, pools: Vec<PodCidrPool>) {
        self.pools = pools.clone();
        self.rec.allocator_mut().set_pools(pools);
    }

    fn advance(&mut self, secs: u64) {
        self.now = self.now.plus(secs);
    }

    fn cidrs(&self, name: &str) -> Vec<String> {
        self.store
            .record(name)
            .map(|r| r.pod_cidrs)
            .unwrap_or_default()
    }

    fn reason(&self, name: &str) -> String {
        self.store
            .record(name)
            .and_then(|r| r.allocated)
            .map(|c| c.reason)
            .unwrap_or_default()
    }

    /// Every CIDR in the store of a live node; panics on any overlap.
    fn assert_unique(&self) -> usize {
        let mut all: Vec<PodCidr> = Vec::new();
        for r in self.store.records() {
            if self
                .nodes
                .get(&r.name)
                .is_some_and(|n| n.uid == r.owner_uid)
            {
                all.extend(r.pod_cidrs.iter().map(|s| cidr(s)));
            }
        }
        all.sort();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert!(!a.overlaps(b), "{a} and {b} overlap");
            }
        }
        all.len()
    }

    fn alloc(&self) -> &Allocator {
        self.rec.allocator()
    }
}

fn slash24s(n: usize) -> World {
    let mut w = World::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("default", &["10.0.0.0/12"], 24)],
    );
    for i in 0..n {
        w.add(&format!("n{i:04}"));
    }
    w.reconcile();
    w
}

#[test]
fn k8s_29058_restore_before_allocate_no_duplicates() {
    let mut w = World::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("default", &["10.0.0.0/12"], 24)],
    );
    // 27 existing records scattered over the pool, then 800 nodes in total.
    for i in 0..27 {
        let name = format!("old{i:02}");
        w.add(&name);
        w.store.put_external(
            &name,
            &format!("uid-{name}"),
            &[&format!("10.0.{}.0/24", i * 3)],
        );
    }
    for i in 0..773 {
        w.add(&format!("new{i:03}"));
    }
    w.reconcile();
    assert_eq!(w.assert_unique(), 800);
    // The core refuses to allocate before restore.
    let mut a = Allocator::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("p", &["10.0.0.0/24"], 26)],
    );
    assert_eq!(
        a.allocate(&"u".into(), "n", &BTreeMap::new(), &[Family::V4]),
        Err(AllocError::NotRestored)
    );
}

#[test]
fn k8s_21458_k8s_20048_restart_keeps_every_cidr() {
    let mut w = slash24s(1000);
    let before: Vec<_> = w.store.records();
    assert_eq!(w.assert_unique(), 1000);
    w.restart();
    assert_eq!(
        w.reconcile().writes(),
        0,
        "restart of a fully allocated cluster writes nothing"
    );
    assert_eq!(w.store.records(), before);
}

#[test]
fn cilium_21482_restore_means_processed_not_enqueued() {
    let mut w = World::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("default", &["10.0.0.0/30"], 32)],
    );
    for n in ["a", "b", "c"] {
        w.add(n);
    }
    w.store.put_external("a", "uid-a", &["10.0.0.0/32"]);
    w.store.put_external("b", "uid-b", &["10.0.0.1/32"]);
    // Informer started but only part of the LIST processed: nothing may be allocated.
    let mut partial = w.observed();
    partial.records.truncate(1);
    partial.complete = false;
    assert!(w.rec.plan(&partial, w.now).is_empty());
    assert!(!w.alloc().is_restored());
    w.reconcile();
    assert_eq!(w.cidrs("c"), vec!["10.0.0.2/32"]);
    w.assert_unique();
    // A partial Node list after a relist does not mean the missing nodes are gone.
    let mut partial = w.observed();
    partial.nodes.truncate(1);
    partial.complete = false;
    assert!(w.rec.plan(&partial, w.now.plus(10_000)).is_empty());
    assert_eq!(w.alloc().holders(&cidr("10.0.0.2/32")), vec![w.uid("c")]);
    assert!(w.alloc().quarantined().is_empty());
}

#[test]
fn cilium_17870_no_lease_no_writes() {
    let mut w = slash24s(0);
    w.add("a");
    let mut obs = w.observed();
    obs.leader = false;
    assert!(w.rec.plan(&obs, w.now).is_empty());
    assert!(
        w.alloc().node(&w.uid("a")).is_none(),
        "no reservation either"
    );
    assert_eq!(w.store.writes(), 0);
}

#[test]
fn k8s_29064_write_only_if_still_empty() {
    let mut w = slash24s(0);
    w.add("a");
    w.store.put_external("a", "uid-a", &[]);
    let actions = w.rec.plan(&w.observed(), w.now);
    assert!(
        matches!(&actions[0], Action::PatchSpec { spec, .. } if spec.pod_cidrs == ["10.0.0.0/24"])
    );
    // Someone else fills the field between our read and our write.
    w.store.put_external("a", "uid-a", &["10.0.9.0/24"]);
    let report = w.rec.execute(actions, &mut w.store);
    assert_eq!(report.outcomes[0].1, WriteOutcome::Conflict);
    assert_eq!(w.cidrs("a"), vec!["10.0.9.0/24"], "never overwritten");
    w.reconcile();
    assert_eq!(w.cidrs("a"), vec!["10.0.9.0/24"], "adopted");
    let a = w.alloc().node(&w.uid("a")).unwrap();
    assert_eq!(a.held.len(), 1);
    // Our unpublished reservation went straight back to the pool.
    w.add("b");
    w.reconcile();
    assert_eq!(w.cidrs("b"), vec!["10.0.0.0/24"]);
}

#[test]
fn azure_4556_failed_patch_keeps_reservation_and_retries_same_cidr() {
    for fault in [
        Fault::ServerError,
        Fault::TimeoutNotApplied,
        Fault::TimeoutApplied,
        Fault::Conflict,
        Fault::NotFound,
    ] {
        let mut w = slash24s(0);
        w.add("a");
        w.store.inject(fault);
        w.reconcile();
        let reserved = w.alloc().node(&w.uid("a")).unwrap().held[0].cidr;
        assert_eq!(reserved.to_string(), "10.0.0.0/24");
        // Another node arrives while a's write is unresolved: it must not get a's CIDR.
        w.add("b");
        w.reconcile();
        assert_eq!(
            w.cidrs("a"),
            vec!["10.0.0.0/24"],
            "{fault:?}: retried with the same CIDR"
        );
        assert_eq!(w.cidrs("b"), vec!["10.0.1.0/24"], "{fault:?}");
        assert_eq!(w.reconcile().writes(), 0);
    }
}

#[test]
fn k8s_28879_failed_update_is_retried() {
    let mut w = slash24s(0);
    w.add("a");
    w.store.inject(Fault::Conflict);
    let r = w.reconcile();
    assert_eq!(
        r.skipped.len(),
        1,
        "status write skipped after the failed spec write"
    );
    assert!(w.store.record("a").is_none());
    w.reconcile();
    assert_eq!(w.cidrs("a"), vec!["10.0.0.0/24"]);
    assert_eq!(w.reason("a"), "Allocated");
}

#[test]
fn k8s_96416_occupy_twice_counts_once() {
    let mut a = Allocator::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("p", &["10.0.0.0/16"], 24)],
    );
    let u = NodeUid::from("u");
    assert_eq!(
        a.occupy(&u, "n", cidr("10.0.5.0/24"), HeldState::Confirmed),
        OccupyOutcome::Occupied
    );
    assert_eq!(
        a.occupy(&u, "n", cidr("10.0.5.0/24"), HeldState::Confirmed),
        OccupyOutcome::AlreadyOwned
    );
    let st = a.pool_status("p").unwrap();
    let acc = st.family(Family::V4).unwrap();
    assert_eq!((acc.allocated, acc.free), (1, 255));
    // Restore runs on every pass; counts stay derived from state.
    let mut w = slash24s(3);
    w.reconcile();
    w.reconcile();
    assert_eq!(
        w.alloc()
            .pool_status("default")
            .unwrap()
            .family(Family::V4)
            .unwrap()
            .allocated,
        3
    );
}

#[test]
fn k8s_127792_deletion_timestamp_does_not_release() {
    let mut w = slash24s(2);
    w.nodes.get_mut("n0000").unwrap().deleting = true;
    w.advance(10_000);
    w.reconcile();
    w.add("x");
    w.reconcile();
    assert_eq!(w.cidrs("n0000"), vec!["10.0.0.0/24"]);
    assert_eq!(w.cidrs("x"), vec!["10.0.2.0/24"]);
    assert_eq!(
        w.alloc().holders(&cidr("10.0.0.0/24")),
        vec![w.uid("n0000")]
    );
    // Only when the Node is gone: release, then quarantine.
    w.delete("n0000");
    w.reconcile();
    assert!(
        w.alloc()
            .quarantined()
            .iter()
            .any(|(c, _)| c.to_string() == "10.0.0.0/24")
    );
}

#[test]
fn k8s_50305_k8s_75461_out_of_pool_cidr_drains_not_fatal() {
    let mut w = World::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("default", &["10.1.0.0/16"], 24)],
    );
    w.add("old");
    w.store.put_external("old", "uid-old", &["10.0.7.0/24"]);
    w.add("new");
    w.reconcile();
    assert_eq!(w.cidrs("old"), vec!["10.0.7.0/24"], "kept, not rewritten");
    assert_eq!(w.reason("old"), "Allocated");
    assert!(
        w.store
            .record("old")
            .unwrap()
            .allocated
            .unwrap()
            .message
            .contains("draining")
    );
    assert_eq!(w.cidrs("new"), vec!["10.1.0.0/24"]);
    let ann = w.alloc().announcements();
    assert!(ann.iter().any(|a| a.node == "old" && a.draining));
    assert_eq!(w.reconcile().writes(), 0);
}

#[test]
fn k0s_7186_family_by_parse_not_position() {
    let pool = dual_pool("default", &["10.0.0.0/16"], 24, &["fd00::/48"], 64);
    let mut w = World::new(cfg(&[Family::V4, Family::V6], 300), vec![pool]);
    w.add("a");
    w.store
        .put_external("a", "uid-a", &["fd00::/64", "10.0.0.0/24"]);
    w.add("b");
    w.reconcile();
    assert_eq!(w.reason("a"), "Allocated");
    assert_eq!(
        w.cidrs("a"),
        vec!["fd00::/64", "10.0.0.0/24"],
        "order in the record does not matter"
    );
    assert_eq!(w.cidrs("b"), vec!["10.0.1.0/24", "fd00:0:0:1::/64"]);
    // A pool listing an IPv4 CIDR under ipv6 is a condition, not a crash.
    let bad = dual_pool("bad", &["10.9.0.0/16"], 24, &["10.8.0.0/16"], 64);
    w.set_pools(vec![bad]);
    let st = w.alloc().pool_status("bad").unwrap();
    assert_eq!(st.condition(READY).unwrap().reason, "InvalidSpec");
    assert!(
        st.condition(READY)
            .unwrap()
            .message
            .contains("ipv6.cidrs[0]")
    );
}

#[test]
fn k8s_115528_capacity_added_serves_pending_nodes() {
    let mut w = World::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("default", &["10.0.0.0/24"], 24)],
    );
    w.add("a");
    w.add("b");
    w.reconcile();
    assert_eq!(w.reason("b"), "PoolExhausted");
    w.set_pools(vec![v4_pool(
        "default",
        &["10.0.0.0/24", "10.0.1.0/24"],
        24,
    )]);
    w.reconcile(); // no node event
    assert_eq!(w.cidrs("b"), vec!["10.0.1.0/24"]);
    assert_eq!(w.reason("b"), "Allocated");
}

#[test]
fn k8s_117487_deleted_nodes_are_not_retried() {
    let mut w = slash24s(2);
    w.delete("n0001");
    w.reconcile();
    for _ in 0..3 {
        assert_eq!(w.reconcile().writes(), 0, "no work for a node that is gone");
    }
}

#[test]
fn k8s_85866_tiny_pool_capacity_is_reported() {
    let mut w = World::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("default", &["10.0.0.0/24"], 24)],
    );
    assert_eq!(
        w.alloc()
            .pool_status("default")
            .unwrap()
            .family(Family::V4)
            .unwrap()
            .capacity,
        1
    );
    w.add("a");
    w.add("b");
    w.reconcile();
    assert_eq!(w.reason("b"), "PoolExhausted");
}

#[test]
fn cilium_41130_exhaustion_is_a_structured_condition() {
    let mut w = World::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("default", &["10.0.0.0/30"], 31)],
    );
    for n in ["a", "b", "c"] {
        w.add(n);
    }
    w.reconcile();
    let c = w.store.record("c").unwrap().allocated.unwrap();
    assert_eq!(
        (c.type_.as_str(), c.status, c.reason.as_str()),
        (ALLOCATED, ConditionStatus::False, "PoolExhausted")
    );
    assert!(
        c.message.contains("IPv4") && c.message.contains("default"),
        "{}",
        c.message
    );
    let st = w.alloc().pool_status("default").unwrap();
    let ex = st.condition(EXHAUSTED).unwrap();
    assert_eq!(ex.status, ConditionStatus::True);
    assert!(
        ex.message.contains("capacity 2, allocated 2"),
        "{}",
        ex.message
    );
    assert_eq!(
        w.reconcile().writes(),
        0,
        "a stable message means no status churn"
    );
}

#[test]
fn cilium_41986_shrink_then_regrow_never_double_issues() {
    let both = v4_pool("default", &["10.0.0.0/30", "10.0.1.0/30"], 32);
    let mut w = World::new(cfg(&[Family::V4], 300), vec![both.clone()]);
    for i in 0..6 {
        w.add(&format!("n{i}"));
    }
    w.reconcile();
    assert_eq!(w.cidrs("n5"), vec!["10.0.1.1/32"]);
    w.set_pools(vec![v4_pool("default", &["10.0.0.0/30"], 32)]);
    w.reconcile();
    let acc = w.alloc().pool_status("default").unwrap().families[0].clone();
    assert_eq!((acc.capacity, acc.allocated, acc.draining), (4, 4, 2));
    assert_eq!(w.cidrs("n5"), vec!["10.0.1.1/32"], "draining, still owned");
    w.add("x");
    w.reconcile();
    assert_eq!(
        w.reason("x"),
        "PoolExhausted",
        "nothing new in the removed CIDR"
    );
    w.set_pools(vec![both]);
    w.add("y");
    w.reconcile();
    assert_eq!(w.cidrs("x"), vec!["10.0.1.2/32"]);
    assert_eq!(w.cidrs("y"), vec!["10.0.1.3/32"]);
    assert_eq!(w.assert_unique(), 8);
    assert_eq!(
        w.alloc().pool_status("default").unwrap().families[0].draining,
        0,
        "re-adopted"
    );
}

#[test]
fn cilium_42126_new_pool_over_orphans_never_reissues_them() {
    let mut w = World::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("a", &["10.0.0.0/30", "10.0.1.0/30"], 32)],
    );
    for i in 0..6 {
        w.add(&format!("n{i}"));
    }
    w.reconcile();
    // Pool a drops 10.0.1.0/30 (two live orphans), pool b claims a supernet of it.
    w.set_pools(vec![
        v4_pool("a", &["10.0.0.0/30"], 32),
        v4_pool("b", &["10.0.1.0/29"], 32),
    ]);
    let b = w.alloc().pool_status("b").unwrap();
    assert_eq!(
        (
            b.families[0].capacity,
            b.families[0].allocated,
            b.families[0].free
        ),
        (8, 2, 6)
    );
    for i in 0..6 {
        w.add(&format!("m{i}"));
    }
    w.reconcile();
    assert_eq!(w.assert_unique(), 12);
    assert_eq!(w.cidrs("m0"), vec!["10.0.1.2/32"]);
}

#[test]
fn cilium_44832_duplicate_v6_does_not_free_persisted_v4() {
    let pool = dual_pool("default", &["10.0.0.0/30"], 32, &["fd00::/126"], 128);
    let mut w = World::new(cfg(&[Family::V4, Family::V6], 300), vec![pool]);
    w.add("a");
    w.add("b");
    w.store
        .put_external("a", "uid-a", &["10.0.0.0/32", "fd00::/128"]);
    w.store
        .put_external("b", "uid-b", &["10.0.0.1/32", "fd00::/128"]);
    w.reconcile();
    assert_eq!(w.reason("a"), "Conflict");
    assert_eq!(w.reason("b"), "Conflict");
    assert_eq!(
        w.alloc().holders(&cidr("10.0.0.1/32")),
        vec![w.uid("b")],
        "b's v4 stays held"
    );
    assert!(
        w.alloc()
            .announcements()
            .iter()
            .all(|a| a.cidr.to_string() != "fd00::/128"),
        "excluded from BGP"
    );
    w.add("c");
    w.reconcile();
    assert_eq!(w.cidrs("c"), vec!["10.0.0.2/32", "fd00::1/128"]);
    assert_eq!(
        w.cidrs("b"),
        vec!["10.0.0.1/32", "fd00::/128"],
        "never auto-moved"
    );
    // Deleting one side resolves the conflict for the other.
    w.delete("a");
    w.reconcile();
    assert_eq!(w.reason("b"), "Allocated");
}

#[test]
fn calico_cni_908_dualstack_v6_exhausted_gives_back_v4() {
    let pool = dual_pool("default", &["10.0.0.0/24"], 28, &["fd00::/64"], 64);
    let mut w = World::new(cfg(&[Family::V4, Family::V6], 300), vec![pool]);
    w.add("a");
    w.reconcile();
    let free = |w: &World| {
        w.alloc()
            .pool_status("default")
            .unwrap()
            .family(Family::V4)
            .unwrap()
            .free
    };
    assert_eq!(free(&w), 15);
    w.add("b");
    for _ in 0..10 {
        w.reconcile();
    }
    assert_eq!(w.reason("b"), "PoolExhausted");
    assert_eq!(free(&w), 15, "no v4 leak per retry");
    assert!(w.cidrs("b").is_empty());
}

#[test]
fn cilium_27090_mask_change_drains_old_allocations() {
    let mut w = World::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("default", &["10.0.0.0/24"], 26)],
    );
    w.add("a");
    w.add("b");
    w.reconcile();
    w.set_pools(vec![v4_pool("default", &["10.0.0.0/24"], 27)]);
    w.add("c");
    w.reconcile();
    assert_eq!(w.cidrs("a"), vec!["10.0.0.0/26"]);
    assert_eq!(w.cidrs("c"), vec!["10.0.0.128/27"]);
    let acc = w.alloc().pool_status("default").unwrap().families[0].clone();
    assert_eq!(
        (
            acc.capacity,
            acc.allocated,
            acc.blocked,
            acc.free,
            acc.draining
        ),
        (8, 1, 4, 3, 2)
    );
    w.assert_unique();
}

#[test]
fn cilium_18852_announce_only_allocator_output() {
    let mut w = slash24s(2);
    w.add("pending");
    w.store.inject(Fault::TimeoutNotApplied);
    w.reconcile();
    let ann: Vec<String> = w
        .alloc()
        .announcements()
        .iter()
        .map(|a| format!("{}={}", a.node, a.cidr))
        .collect();
    assert_eq!(
        ann,
        vec!["n0000=10.0.0.0/24", "n0001=10.0.1.0/24"],
        "unconfirmed CIDRs are not announced"
    );
}

#[test]
fn cilium_21901_release_withdraws_every_cidr() {
    let pool = dual_pool("default", &["10.0.0.0/16"], 24, &["fd00::/48"], 64);
    let mut w = World::new(cfg(&[Family::V4, Family::V6], 300), vec![pool]);
    w.add("a");
    w.add("b");
    w.reconcile();
    assert_eq!(w.alloc().announcements().len(), 4);
    w.delete("a");
    w.reconcile();
    let left: BTreeSet<String> = w
        .alloc()
        .announcements()
        .iter()
        .map(|a| a.node.clone())
        .collect();
    assert_eq!(left, BTreeSet::from(["b".to_string()]));
    assert_eq!(w.alloc().quarantined().len(), 2);
}

#[test]
fn k8s_44918_cilium_20756_ipv6_slash32_to_slash64_no_cap() {
    let pool = PodCidrPool {
        name: "v6".into(),
        ipv4: None,
        ipv6: Some(FamilyPoolSpec {
            cidrs: vec!["2001:db8::/32".into()],
            mask_size: 64,
        }),
        node_selector: None,
    };
    let mut a = Allocator::new(cfg(&[Family::V6], 300), vec![pool]);
    a.mark_restored();
    let mut seen = BTreeSet::new();
    for i in 0..20_000u32 {
        let c = a
            .allocate(
                &NodeUid(i.to_string()),
                "n",
                &BTreeMap::new(),
                &[Family::V6],
            )
            .unwrap();
        assert!(seen.insert(c[0]));
    }
    let acc = a.pool_status("v6").unwrap().families[0].clone();
    assert_eq!(acc.capacity, 1 << 32);
    assert_eq!(acc.free, (1 << 32) - 20_000);
    assert_eq!(
        a.active_ranges()[0].runs,
        1,
        "memory is independent of the split"
    );
}

#[test]
fn k8s_44918_fill_slash8_with_65536_slash24_then_exhausted() {
    let mut a = Allocator::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("p", &["10.0.0.0/8"], 24)],
    );
    a.mark_restored();
    let none = BTreeMap::new();
    for i in 0..65_536u32 {
        a.allocate(&NodeUid(i.to_string()), "n", &none, &[Family::V4])
            .unwrap();
    }
    let err = a
        .allocate(&"x".into(), "x", &none, &[Family::V4])
        .unwrap_err();
    assert!(matches!(err, AllocError::PoolExhausted { .. }));
}

#[test]
fn calico_libcalico_72_allocation_is_not_a_scan() {
    let mut a = Allocator::new(
        cfg(&[Family::V4], 0),
        vec![v4_pool("p", &["10.0.0.0/16"], 24)],
    );
    a.mark_restored();
    let none = BTreeMap::new();
    for i in 0..256u32 {
        a.allocate(&NodeUid(i.to_string()), "n", &none, &[Family::V4])
            .unwrap();
    }
    assert_eq!(
        a.active_ranges()[0].runs,
        0,
        "a full range is zero runs, not 256 bits"
    );
    a.release(&NodeUid("77".into()), &cidr("10.0.77.0/24"), Timestamp(0));
    assert_eq!(a.active_ranges()[0].runs, 1);
    let c = a
        .allocate(&"new".into(), "new", &none, &[Family::V4])
        .unwrap();
    assert_eq!(
        c[0].to_string(),
        "10.0.77.0/24",
        "lowest free, found without probing"
    );
}

#[test]
fn calico_564_7839_gone_nodes_leak_nothing() {
    let mut w = slash24s(0);
    w.add("unpublished");
    w.store.inject(Fault::Conflict);
    w.reconcile();
    let acc = |w: &World| w.alloc().pool_status("default").unwrap().families[0].clone();
    assert_eq!(acc(&w).allocated, 1);
    w.delete("unpublished");
    w.add("published");
    w.reconcile();
    assert_eq!(
        (acc(&w).allocated, acc(&w).quarantined),
        (1, 0),
        "never published: no quarantine"
    );
    assert_eq!(w.cidrs("published"), vec!["10.0.0.0/24"]);
    w.delete("published");
    w.reconcile();
    assert_eq!(
        (acc(&w).allocated, acc(&w).quarantined),
        (0, 1),
        "published: quarantined"
    );
    w.advance(300);
    w.reconcile();
    assert_eq!(
        (acc(&w).allocated, acc(&w).quarantined, acc(&w).free),
        (0, 0, 4096)
    );
}

#[test]
fn calicoctl_871_libcalico_56_overlapping_pools_rejected_with_condition() {
    let mut w = World::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("a", &["10.0.0.0/24"], 26)],
    );
    w.add("n");
    w.reconcile();
    w.set_pools(vec![
        v4_pool("a", &["10.0.0.0/24"], 26),
        v4_pool("b", &["10.0.0.0/16", "10.1.0.0/24"], 26),
    ]);
    let b = w.alloc().pool_status("b").unwrap();
    assert_eq!(
        b.condition(OVERLAPPING).unwrap().status,
        ConditionStatus::True
    );
    assert!(
        b.condition(OVERLAPPING)
            .unwrap()
            .message
            .contains("10.0.0.0/24 of pool \"a\"")
    );
    assert_eq!(
        b.families[0].capacity, 4,
        "only the non-overlapping CIDR is active"
    );
    assert_eq!(
        w.alloc()
            .pool_status("a")
            .unwrap()
            .condition(OVERLAPPING)
            .unwrap()
            .status,
        ConditionStatus::False
    );
    // Deleting a pool with live allocations: they drain, nothing is forgotten.
    w.set_pools(vec![v4_pool("b", &["10.1.0.0/24"], 26)]);
    w.reconcile();
    assert_eq!(w.cidrs("n"), vec!["10.0.0.0/26"]);
    assert!(w.alloc().announcements()[0].draining);
    let d = w.alloc().draining();
    assert_eq!(d.len(), 1, "visible even though its pool is gone");
    assert_eq!(d[0].last_pool.as_deref(), Some("a"));
}

#[test]
fn antrea_7893_rolling_node_replacement_never_duplicates() {
    let mut w = World::new(
        cfg(&[Family::V4], 120),
        vec![v4_pool("default", &["10.0.0.0/20"], 26)],
    );
    for i in 0..40 {
        w.add(&format!("n{i}"));
    }
    w.reconcile();
    for round in 0..10 {
        for i in 0..4 {
            w.delete(&format!("n{}", round * 4 + i));
            w.add(&format!("r{round}-{i}"));
        }
        w.reconcile();
        w.advance(60);
        w.assert_unique();
    }
    for _ in 0..5 {
        w.advance(60);
        w.reconcile();
    }
    assert_eq!(w.assert_unique(), 40);
    assert!(w.nodes.keys().all(|n| w.reason(n) == "Allocated"));
}

#[test]
fn k8s_occupy_of_taken_slot_is_conflict_and_release_is_owner_checked() {
    let mut a = Allocator::new(
        cfg(&[Family::V4], 300),
        vec![v4_pool("p", &["10.0.0.0/16"], 24)],
    );
    let (x, y) = (NodeUid::from("x"), NodeUid::from("y"));
    a.occupy(&x, "x", cidr("10.0.1.0/24"), HeldState::Confirmed);
    assert_eq!(
        a.occupy(&y, "y", cidr("10.0.1.0/24"), HeldState::Confirmed),
        OccupyOutcome::Conflict {
            with: vec![x.clone()]
        }
    );
    assert_eq!(
        a.release(&NodeUid::from("z"), &cidr("10.0.1.0/24"), Timestamp(0)),
        ReleaseOutcome::NotOwner {
            holders: vec![x.clone(), y.clone()]
        }
    );
    a.release(&x, &cidr("10.0.1.0/24"), Timestamp(0));
    assert_eq!(
        a.holders(&cidr("10.0.1.0/24")),
        vec![y.clone()],
        "the other holder keeps it"
    );
    assert!(!a.is_conflicted(&cidr("10.0.1.0/24")));
    assert_eq!(
        a.release(&x, &cidr("10.0.9.0/24"), Timestamp(0)),
        ReleaseOutcome::NotHeld
    );
}

/// Found by the chaos suite (`speaker/tests/routers/chaos.rs`, seed 1795638119): a `NodePodCIDR`
/// created late (the leader was killed while the API server held the create; it landed after
/// its Node was deleted) outlived the quarantine, and its CIDR was handed to a new node while
/// the record still held it: one CIDR in two records. A CIDR in any record stays unavailable
/// until that record is gone, then the quarantine runs.
#[test]
fn chaos_lingering_record_of_a_gone_node_keeps_its_cidr() {
    let mut w = slash24s(0);
    w.add("a");
    w.reconcile();
    assert_eq!(w.cidrs("a"), vec!["10.0.0.0/24"]);
    w.delete_without_gc("a");
    w.reconcile();
    // The record is not collected (yet); the quarantine passes, many times over.
    for _ in 0..3 {
        w.advance(300);
        w.reconcile();
    }
    w.add("b");
    w.reconcile();
    assert_eq!(
        w.cidrs("b"),
        vec!["10.0.1.0/24"],
        "not the lingering record's CIDR"
    );
    // The same after a restart of the allocator.
    w.restart();
    w.advance(300);
    w.reconcile();
    w.add("c");
    w.reconcile();
    assert_eq!(w.cidrs("c"), vec!["10.0.2.0/24"]);
    // Collected: reusable after the quarantine.
    assert!(w.store.remove("a"));
    w.reconcile();
    w.advance(300);
    w.reconcile();
    w.add("d");
    w.reconcile();
    assert_eq!(w.cidrs("d"), vec!["10.0.0.0/24"]);
}
