//! Pure reconciler: observed Nodes + `NodePodCIDR` records + allocator -> API actions.
//!
//! One pass: (1) restore every record (occupy; conflicts flagged), (2) release nodes that are
//! gone (not merely being deleted), (3) only if the LIST was complete: allocate missing
//! families and emit writes. Spec writes are CAS on `resourceVersion`; status writes happen
//! only when the condition changes; nothing is ever deleted.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::cidr::{Family, NodeUid, PodCidr, Timestamp};
use super::core::{AllocError, Allocator, HeldState};
use super::status::{AllocatedReason, Condition, NodeOutcome};
use super::store::{NodePodCidrStore, WriteOutcome};

pub use super::record::{ObservedRecord, RecordSpec};

/// A Node as observed (absent from the list = gone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedNode {
    /// Node name (= record name).
    pub name: String,
    /// Node UID.
    pub uid: NodeUid,
    /// Labels (for pool selectors).
    pub labels: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp` is set; the node still exists and keeps its CIDRs.
    pub deleting: bool,
}

/// Everything one reconcile pass looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Nodes that exist.
    pub nodes: Vec<ObservedNode>,
    /// Records that exist.
    pub records: Vec<ObservedRecord>,
    /// Both lists are complete, processed LISTs (not "informer started"). Until then nothing
    /// is allocated and nothing is released (a node missing from a partial list is not gone).
    pub complete: bool,
    /// We hold a valid Lease; without it nothing is written.
    pub leader: bool,
}

impl Observed {
    /// A complete observation made by the leader.
    pub fn new(nodes: Vec<ObservedNode>, records: Vec<ObservedRecord>) -> Self {
        Observed {
            nodes,
            records,
            complete: true,
            leader: true,
        }
    }
}

/// An API call to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create the record (fails with Conflict if it exists: the create is the CAS).
    CreateRecord {
        /// Record name.
        name: String,
        /// Spec.
        spec: RecordSpec,
    },
    /// Replace the spec if the record is still at `resource_version`.
    PatchSpec {
        /// Record name.
        name: String,
        /// Version at which the record was observed.
        resource_version: String,
        /// Spec.
        spec: RecordSpec,
    },
    /// Write the `Allocated` condition.
    UpdateStatus {
        /// Record name.
        name: String,
        /// Condition.
        condition: Condition,
    },
}

impl Action {
    /// Record name.
    pub fn name(&self) -> &str {
        match self {
            Action::CreateRecord { name, .. }
            | Action::PatchSpec { name, .. }
            | Action::UpdateStatus { name, .. } => name,
        }
    }

    /// The spec written, for spec writes.
    pub fn spec(&self) -> Option<&RecordSpec> {
        match self {
            Action::CreateRecord { spec, .. } | Action::PatchSpec { spec, .. } => Some(spec),
            Action::UpdateStatus { .. } => None,
        }
    }
}

/// What [`Reconciler::execute`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecReport {
    /// Calls made and their outcomes, in order.
    pub outcomes: Vec<(Action, WriteOutcome)>,
    /// Status writes skipped because the spec write before them failed.
    pub skipped: Vec<Action>,
}

impl ExecReport {
    /// Number of API calls made.
    pub fn writes(&self) -> usize {
        self.outcomes.len()
    }
}

/// The allocator plus the bookkeeping of a reconcile loop.
#[derive(Debug, Clone)]
pub struct Reconciler {
    alloc: Allocator,
    /// Nodes whose record is invalid, with the reason.
    invalid: HashMap<NodeUid, String>,
}

impl Reconciler {
    /// Wraps a fresh allocator (a restart is a new `Reconciler`).
    pub fn new(alloc: Allocator) -> Self {
        Reconciler {
            alloc,
            invalid: HashMap::new(),
        }
    }

    /// The allocator.
    pub fn allocator(&self) -> &Allocator {
        &self.alloc
    }

    /// The allocator, mutably (pool changes).
    pub fn allocator_mut(&mut self) -> &mut Allocator {
        &mut self.alloc
    }

    /// Restore and release passes; marks the allocator restored if the LIST was complete.
    pub fn restore(&mut self, obs: &Observed, now: Timestamp) {
        self.alloc.expire(now);
        let live: HashMap<&NodeUid, &ObservedNode> =
            obs.nodes.iter().map(|n| (&n.uid, n)).collect();
        let mut records: Vec<&ObservedRecord> = obs.records.iter().collect();
        records.sort_by(|a, b| a.name.cmp(&b.name));
        self.invalid.clear();
        for rec in &records {
            let (valid, problems) = parse_record(rec);
            match live.get(&rec.owner_uid).filter(|n| n.name == rec.name) {
                Some(node) => {
                    if !problems.is_empty() {
                        self.invalid.insert(node.uid.clone(), problems.join("; "));
                    }
                    self.sync_node(node, &valid, now);
                }
                None => {
                    // Record of a node that is gone: its CIDRs may still be routed somewhere,
                    // and while the record exists they are still held in the API. The
                    // quarantine restarts on every pass until the record is gone (garbage
                    // collected), so a CIDR is never in two records: a record that outlives
                    // the quarantine (a late write, a slow garbage collector) keeps its CIDR.
                    if !obs.complete || self.alloc.node(&rec.owner_uid).is_some() {
                        continue;
                    }
                    for c in valid {
                        self.alloc.quarantine_unheld(c, now);
                    }
                }
            }
        }
        if !obs.complete {
            return;
        }
        for uid in self.alloc.node_uids() {
            if !live.contains_key(&uid) {
                self.alloc.release_node(&uid, now);
            }
        }
        self.alloc.mark_restored();
    }

    /// Makes the allocator mirror the record: a different CIDR of a family replaces ours.
    fn sync_node(&mut self, node: &ObservedNode, valid: &[PodCidr], now: Timestamp) {
        let uid = &node.uid;
        if let Some(entry) = self.alloc.node(uid) {
            let replaced: Vec<PodCidr> = entry
                .held
                .iter()
                .filter(|h| {
                    !valid.contains(&h.cidr) && valid.iter().any(|c| c.family() == h.cidr.family())
                })
                .map(|h| h.cidr)
                .collect();
            for c in replaced {
                self.alloc.release(uid, &c, now);
            }
        }
        for &c in valid {
            self.alloc.occupy(uid, &node.name, c, HeldState::Confirmed);
        }
    }

    /// Computes the actions for one pass (and reserves CIDRs for them).
    pub fn plan(&mut self, obs: &Observed, now: Timestamp) -> Vec<Action> {
        if !obs.leader {
            return Vec::new();
        }
        self.restore(obs, now);
        if !self.alloc.is_restored() {
            return Vec::new();
        }
        let by_name: HashMap<&str, &ObservedRecord> =
            obs.records.iter().map(|r| (r.name.as_str(), r)).collect();
        let mut nodes: Vec<&ObservedNode> = obs.nodes.iter().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let mut actions = Vec::new();
        for node in nodes {
            let rec = by_name.get(node.name.as_str()).copied();
            let owned = rec.filter(|r| r.owner_uid == node.uid);
            if owned.is_none() && node.deleting && self.alloc.node(&node.uid).is_none() {
                continue;
            }
            let outcome = self.decide(node);
            let desired = self.desired(&node.uid);
            let spec = RecordSpec {
                owner_uid: node.uid.clone(),
                pod_cidrs: desired.iter().map(ToString::to_string).collect(),
            };
            match (rec, owned) {
                (None, _) => actions.push(Action::CreateRecord {
                    name: node.name.clone(),
                    spec,
                }),
                (Some(r), Some(_)) => {
                    let mut have = parse_record(r).0;
                    have.sort();
                    let mut want = desired.clone();
                    want.sort();
                    if !self.invalid.contains_key(&node.uid) && have != want {
                        actions.push(Action::PatchSpec {
                            name: node.name.clone(),
                            resource_version: r.resource_version.clone(),
                            spec,
                        });
                    }
                }
                // Record of a previous node with this name (old UID is gone): take it over, CAS.
                (Some(r), None) => actions.push(Action::PatchSpec {
                    name: node.name.clone(),
                    resource_version: r.resource_version.clone(),
                    spec,
                }),
            }
            let cond = outcome.condition();
            if owned.and_then(|r| r.allocated.as_ref()) != Some(&cond) {
                actions.push(Action::UpdateStatus {
                    name: node.name.clone(),
                    condition: cond,
                });
            }
        }
        actions
    }

    /// Outcome for one live node, allocating missing families if allowed.
    fn decide(&mut self, node: &ObservedNode) -> NodeOutcome {
        let out = |reason, message: String| NodeOutcome { reason, message };
        let uid = &node.uid;
        if let Some(msg) = self.invalid.get(uid) {
            return out(AllocatedReason::InvalidSpec, msg.clone());
        }
        let held: Vec<PodCidr> = self
            .alloc
            .node(uid)
            .map(|e| e.held.iter().map(|h| h.cidr).collect())
            .unwrap_or_default();
        let conflicts: Vec<String> = held
            .iter()
            .filter(|c| self.alloc.is_conflicted(c))
            .map(|c| {
                let mut names: Vec<String> = self
                    .alloc
                    .conflict_partners(c, uid)
                    .iter()
                    .map(|u| {
                        self.alloc
                            .node(u)
                            .map_or_else(|| u.to_string(), |e| e.name.clone())
                    })
                    .collect();
                names.sort();
                format!("{c} overlaps CIDRs of node(s) {}", names.join(", "))
            })
            .collect();
        if !conflicts.is_empty() {
            return out(AllocatedReason::Conflict, conflicts.join("; "));
        }
        let missing: Vec<Family> = self
            .alloc
            .config()
            .families
            .iter()
            .copied()
            .filter(|f| !held.iter().any(|c| c.family() == *f))
            .collect();
        if !missing.is_empty() {
            if node.deleting {
                return out(
                    AllocatedReason::Pending,
                    "node is being deleted; no new allocation".into(),
                );
            }
            match self.alloc.allocate(uid, &node.name, &node.labels, &missing) {
                Ok(_) => {}
                Err(e @ AllocError::NotRestored) => {
                    return out(AllocatedReason::Pending, e.to_string());
                }
                Err(e @ AllocError::NoMatchingPool { .. }) => {
                    return out(AllocatedReason::NoMatchingPool, e.to_string());
                }
                Err(e @ AllocError::PoolExhausted { .. }) => {
                    return out(AllocatedReason::PoolExhausted, e.to_string());
                }
            }
        }
        let desired = self.desired(uid);
        let mut msg: Vec<String> = desired.iter().map(ToString::to_string).collect::<Vec<_>>();
        let draining: Vec<String> = desired
            .iter()
            .filter(|c| self.alloc.pool_of(c).is_none())
            .map(ToString::to_string)
            .collect();
        if !draining.is_empty() {
            msg.push(format!(
                "draining (outside every pool): {}",
                draining.join(", ")
            ));
        }
        out(AllocatedReason::Allocated, msg.join(", "))
    }

    /// Held CIDRs in `spec.podCIDRs` order: configured family order, then the rest.
    fn desired(&self, uid: &NodeUid) -> Vec<PodCidr> {
        let fams = &self.alloc.config().families;
        let mut v: Vec<PodCidr> = self
            .alloc
            .node(uid)
            .map(|e| e.held.iter().map(|h| h.cidr).collect())
            .unwrap_or_default();
        v.sort_by_key(|c| {
            (
                fams.iter()
                    .position(|f| *f == c.family())
                    .unwrap_or(usize::MAX),
                *c,
            )
        });
        v
    }

    /// Feeds one call's outcome back: success confirms, an unknown outcome keeps the
    /// reservation (marked possibly published), a definite failure keeps it for the retry.
    pub fn record_outcome(&mut self, action: &Action, outcome: &WriteOutcome) {
        let Some(spec) = action.spec() else { return };
        for c in spec.pod_cidrs.iter().filter_map(|s| PodCidr::parse(s).ok()) {
            match outcome {
                WriteOutcome::Ok => self.alloc.confirm(&spec.owner_uid, &c),
                WriteOutcome::Timeout | WriteOutcome::ServerError(_) => {
                    self.alloc.mark_maybe_published(&spec.owner_uid, &c)
                }
                WriteOutcome::Conflict | WriteOutcome::NotFound => {}
            }
        }
    }

    /// Sends actions to the store in order; a node's status write is skipped if its spec
    /// write in the same batch failed.
    pub fn execute(
        &mut self,
        actions: Vec<Action>,
        store: &mut dyn NodePodCidrStore,
    ) -> ExecReport {
        let mut report = ExecReport::default();
        let mut failed: HashSet<String> = HashSet::new();
        for a in actions {
            if matches!(a, Action::UpdateStatus { .. }) && failed.contains(a.name()) {
                report.skipped.push(a);
                continue;
            }
            let out = match &a {
                Action::CreateRecord { name, spec } => store.create(name, spec),
                Action::PatchSpec {
                    name,
                    resource_version,
                    spec,
                } => store.patch_spec_if_version(name, resource_version, spec),
                Action::UpdateStatus { name, condition } => store.update_status(name, condition),
            };
            self.record_outcome(&a, &out);
            if a.spec().is_some() && out != WriteOutcome::Ok {
                failed.insert(a.name().to_string());
            }
            report.outcomes.push((a, out));
        }
        report
    }

    /// `plan` then `execute`.
    pub fn reconcile(
        &mut self,
        obs: &Observed,
        store: &mut dyn NodePodCidrStore,
        now: Timestamp,
    ) -> ExecReport {
        let actions = self.plan(obs, now);
        self.execute(actions, store)
    }
}

/// Valid CIDRs of a record and the problems found (bad strings, two CIDRs of one family).
fn parse_record(rec: &ObservedRecord) -> (Vec<PodCidr>, Vec<String>) {
    let mut valid: Vec<PodCidr> = Vec::new();
    let mut problems = Vec::new();
    for (i, s) in rec.pod_cidrs.iter().enumerate() {
        match PodCidr::parse(s) {
            Ok(c) => {
                if valid.iter().any(|v| v.family() == c.family()) {
                    problems.push(format!(
                        "spec.podCIDRs[{i}] {s:?}: second {} CIDR",
                        c.family().name()
                    ));
                }
                if !valid.contains(&c) {
                    valid.push(c);
                }
            }
            Err(e) => problems.push(format!("spec.podCIDRs[{i}] {s:?}: {e}")),
        }
    }
    (valid, problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocator::core::AllocatorConfig;
    use crate::allocator::pool::{FamilyPoolSpec, PodCidrPool};
    use crate::allocator::store::FakeStore;

    fn setup() -> (Reconciler, FakeStore) {
        let pool = PodCidrPool {
            name: "p".into(),
            ipv4: Some(FamilyPoolSpec {
                cidrs: vec!["10.0.0.0/24".into()],
                mask_size: 26,
            }),
            ipv6: None,
            node_selector: None,
        };
        let cfg = AllocatorConfig {
            families: vec![Family::V4],
            quarantine_secs: 300,
        };
        (
            Reconciler::new(Allocator::new(cfg, vec![pool])),
            FakeStore::new(),
        )
    }

    fn node(name: &str, uid: &str) -> ObservedNode {
        ObservedNode {
            name: name.into(),
            uid: uid.into(),
            labels: BTreeMap::new(),
            deleting: false,
        }
    }

    fn run(r: &mut Reconciler, s: &mut FakeStore, nodes: &[ObservedNode], now: u64) -> ExecReport {
        let obs = Observed::new(nodes.to_vec(), s.records());
        r.reconcile(&obs, s, Timestamp(now))
    }

    #[test]
    fn deleted_record_of_live_node_is_recreated_with_same_cidr() {
        let (mut r, mut s) = setup();
        let nodes = [node("a", "ua"), node("b", "ub")];
        run(&mut r, &mut s, &nodes, 0);
        assert_eq!(s.record("b").unwrap().pod_cidrs, ["10.0.0.64/26"]);
        s.remove("b");
        let rep = run(&mut r, &mut s, &nodes, 1);
        assert_eq!(rep.writes(), 2, "create + status");
        assert_eq!(s.record("b").unwrap().pod_cidrs, ["10.0.0.64/26"]);
    }

    #[test]
    fn same_name_new_uid_takes_over_record_with_cas_and_fresh_cidr() {
        let (mut r, mut s) = setup();
        run(&mut r, &mut s, &[node("a", "old")], 0);
        let rep = run(&mut r, &mut s, &[node("a", "new")], 10);
        assert!(matches!(
            &rep.outcomes[0],
            (Action::PatchSpec { .. }, WriteOutcome::Ok)
        ));
        let rec = s.record("a").unwrap();
        assert_eq!(
            (rec.owner_uid.0.as_str(), rec.pod_cidrs[0].as_str()),
            ("new", "10.0.0.64/26")
        );
        assert_eq!(r.allocator().quarantined()[0].0.to_string(), "10.0.0.0/26");
    }

    #[test]
    fn invalid_record_is_reported_and_its_valid_cidrs_protected() {
        let (mut r, mut s) = setup();
        s.put_external("a", "ua", &["10.0.0.0/26", "10.0.0.65/26", "10.0.0.128/26"]);
        run(&mut r, &mut s, &[node("a", "ua"), node("b", "ub")], 0);
        let a = s.record("a").unwrap();
        assert_eq!(a.allocated.unwrap().reason, "InvalidSpec");
        assert_eq!(a.pod_cidrs.len(), 3, "never rewritten by guessing");
        assert_eq!(s.record("b").unwrap().pod_cidrs, ["10.0.0.64/26"]);
        assert_eq!(
            run(&mut r, &mut s, &[node("a", "ua"), node("b", "ub")], 1).writes(),
            0
        );
    }

    #[test]
    fn deleting_node_without_cidr_gets_none() {
        let (mut r, mut s) = setup();
        let mut n = node("a", "ua");
        n.deleting = true;
        assert_eq!(run(&mut r, &mut s, &[n], 0).writes(), 0);
        assert!(r.allocator().node(&"ua".into()).is_none());
    }
}
