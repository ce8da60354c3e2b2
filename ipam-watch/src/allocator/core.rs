//! The allocator: pools, owned slots, quarantine. Pure and synchronous.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::cidr::{Family, NodeUid, PodCidr, Timestamp};
use super::free_runs::FreeRuns;
use super::pool::{PodCidrPool, PoolReport, SlotRange, validate};
use super::prefix_set::PrefixSet;

/// Default quarantine before a released CIDR is reused: BGP hold time (90 s) + graceful-restart
/// stale-path time (120 s) + 90 s margin. A CIDR must not be reissued while peers may still
/// route it to the old node.
pub const DEFAULT_QUARANTINE_SECS: u64 = 90 + 120 + 90;

/// Allocator settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatorConfig {
    /// Families every node needs, primary first (the order of `spec.podCIDRs`).
    pub families: Vec<Family>,
    /// Seconds a released CIDR stays unusable.
    pub quarantine_secs: u64,
}

impl Default for AllocatorConfig {
    fn default() -> Self {
        AllocatorConfig {
            families: vec![Family::V4],
            quarantine_secs: DEFAULT_QUARANTINE_SECS,
        }
    }
}

/// Whether a node's CIDR is known to be in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldState {
    /// Reserved by us, not yet seen in the store. `maybe_published`: a write of it had an
    /// unknown outcome, so it may be live and must be quarantined if dropped.
    Pending {
        /// A write had an unknown outcome.
        maybe_published: bool,
    },
    /// Seen in the store (or written with a known success).
    Confirmed,
}

/// One CIDR held by a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The CIDR.
    pub cidr: PodCidr,
    /// Pending or confirmed.
    pub state: HeldState,
}

/// What the allocator knows about one node UID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntry {
    /// Node name (for messages).
    pub name: String,
    /// Held CIDRs (one per family unless restored from an invalid record).
    pub held: Vec<Held>,
}

impl NodeEntry {
    /// The held CIDR of a family, if any.
    pub fn of(&self, f: Family) -> Option<&Held> {
        self.held.iter().find(|h| h.cidr.family() == f)
    }
}

/// Result of [`Allocator::occupy`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OccupyOutcome {
    /// Now held, inside an active pool at its mask.
    Occupied,
    /// This node already held it (occupy is idempotent; counted once).
    AlreadyOwned,
    /// Held, but outside every active pool (foreign or draining); blocks reuse, not fatal.
    OutOfPool,
    /// Overlaps CIDRs of other nodes: all of them are in conflict, none is absorbed.
    Conflict {
        /// The other claimants.
        with: Vec<NodeUid>,
    },
}

/// Result of a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// Released; reusable after `until` (or immediately if never published).
    Released {
        /// End of quarantine.
        until: Option<Timestamp>,
    },
    /// Held by someone else; nothing changed.
    NotOwner {
        /// Actual holders.
        holders: Vec<NodeUid>,
    },
    /// Held by nobody.
    NotHeld,
}

/// Why an allocation failed (nothing is kept: a failed step rolls back its own slots).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// Existing allocations have not all been restored yet.
    #[error("existing allocations not restored yet")]
    NotRestored,
    /// No pool with this family selects the node.
    #[error("no pool serves {} for this node", .family.name())]
    NoMatchingPool {
        /// Family.
        family: Family,
    },
    /// Matching pools are full.
    #[error("no free {} slot in pools {pools:?}", .family.name())]
    PoolExhausted {
        /// Family.
        family: Family,
        /// Pools tried, in order.
        pools: Vec<String>,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Holding {
    pub(crate) claimants: Vec<NodeUid>,
    /// Other holdings overlapping this one (conflicts).
    pub(crate) overlaps: u32,
    /// Pool it was last seen in (for draining accounting).
    pub(crate) pool: Option<Arc<str>>,
}

#[derive(Debug, Clone)]
pub(crate) struct PoolState {
    pub(crate) spec: PodCidrPool,
    pub(crate) key: String,
    pub(crate) report: PoolReport,
    pub(crate) ranges: [Vec<usize>; 2],
}

/// The cluster-pool allocator. See the module docs for the rules it enforces.
#[derive(Debug, Clone)]
pub struct Allocator {
    pub(crate) config: AllocatorConfig,
    pub(crate) pools: Vec<PoolState>,
    pub(crate) ranges: Vec<SlotRange>,
    pub(crate) range_index: [BTreeMap<u128, usize>; 2],
    pub(crate) holdings: [PrefixSet<Holding>; 2],
    pub(crate) quarantine: BTreeSet<(Timestamp, PodCidr)>,
    pub(crate) quarantined: [PrefixSet<Timestamp>; 2],
    pub(crate) nodes: HashMap<NodeUid, NodeEntry>,
    pub(crate) restored: bool,
}

impl Allocator {
    /// A fresh allocator; it refuses to allocate until [`Allocator::mark_restored`].
    pub fn new(config: AllocatorConfig, pools: Vec<PodCidrPool>) -> Self {
        let mut a = Allocator {
            config,
            pools: Vec::new(),
            ranges: Vec::new(),
            range_index: Default::default(),
            holdings: [PrefixSet::new(Family::V4), PrefixSet::new(Family::V6)],
            quarantine: BTreeSet::new(),
            quarantined: [PrefixSet::new(Family::V4), PrefixSet::new(Family::V6)],
            nodes: HashMap::new(),
            restored: false,
        };
        a.set_pools(pools);
        a
    }

    /// Settings.
    pub fn config(&self) -> &AllocatorConfig {
        &self.config
    }

    /// Replaces the pool set. Bad pools become conditions; overlapping CIDRs are rejected
    /// (the pool sorting first by name wins); removed CIDRs drain: allocations stay owned.
    pub fn set_pools(&mut self, pools: Vec<PodCidrPool>) {
        let v = validate(&pools);
        let mut old: HashMap<(PodCidr, u8), FreeRuns> = self
            .ranges
            .drain(..)
            .map(|r| ((r.cidr, r.node_len), r.free))
            .collect();
        let mut entries = v.entries;
        entries.sort_by(|a, b| {
            (&a.pool, a.cidr.family(), a.index).cmp(&(&b.pool, b.cidr.family(), b.index))
        });
        for e in entries {
            let mut r = SlotRange::new(e.pool, e.cidr, e.node_len);
            match old.remove(&(e.cidr, e.node_len)) {
                Some(free) => r.free = free,
                None => r.free = self.free_runs_for(&r),
            }
            self.ranges.push(r);
        }
        let mut sorted = pools;
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        self.pools.clear();
        for spec in sorted {
            let mut key = spec.name.clone();
            if self.pools.iter().any(|p| p.key == key) {
                key = format!("{key} (duplicate)");
            }
            let report = v.reports.get(&key).cloned().unwrap_or_default();
            self.pools.push(PoolState {
                spec,
                key,
                report,
                ranges: Default::default(),
            });
        }
        self.range_index = Default::default();
        for (i, r) in self.ranges.iter().enumerate() {
            let f = r.cidr.family().index();
            self.range_index[f].insert(r.cidr.addr(), i);
            if let Some(p) = self.pools.iter_mut().find(|p| *p.key == *r.pool) {
                p.ranges[f].push(i);
            }
        }
        // Re-attribute holdings that now sit in a pool (re-adoption after shrink + regrow).
        let (ranges, index) = (&self.ranges, &self.range_index);
        for set in &mut self.holdings {
            for (c, h) in set.iter_mut() {
                if let Some(i) = slot_range(ranges, index, &c) {
                    h.pool = Some(ranges[i].pool.clone());
                }
            }
        }
    }

    /// Free slots of a new range: everything not held and not quarantined.
    fn free_runs_for(&self, r: &SlotRange) -> FreeRuns {
        let f = r.cidr.family().index();
        let mut spans: Vec<(u128, u128)> = self.holdings[f]
            .overlapping(&r.cidr)
            .iter()
            .filter_map(|c| r.slot_span(c))
            .collect();
        spans.extend(
            self.quarantined[f]
                .overlapping(&r.cidr)
                .iter()
                .filter_map(|c| r.slot_span(c)),
        );
        let mut free = FreeRuns::empty();
        for (lo, hi) in gaps(0, r.last_slot(), spans) {
            free.give_range(lo, hi);
        }
        free
    }

    /// Allows allocations; call once every existing record has been processed.
    pub fn mark_restored(&mut self) {
        self.restored = true;
    }

    /// True once restore finished.
    pub fn is_restored(&self) -> bool {
        self.restored
    }

    fn ranges_overlapping(&self, c: &PodCidr) -> Vec<usize> {
        use std::ops::Bound::{Excluded, Included};
        let idx = &self.range_index[c.family().index()];
        let mut out: Vec<usize> = idx
            .range(..=c.addr())
            .next_back()
            .map(|(_, &i)| i)
            .filter(|&i| self.ranges[i].cidr.overlaps(c))
            .into_iter()
            .collect();
        out.extend(
            idx.range((Excluded(c.addr()), Included(c.last())))
                .map(|(_, &i)| i),
        );
        out
    }

    /// Pool whose active CIDR holds `c` as one slot at its mask.
    pub fn pool_of(&self, c: &PodCidr) -> Option<&str> {
        slot_range(&self.ranges, &self.range_index, c).map(|i| &*self.ranges[i].pool)
    }

    /// Records `uid` as holder of `cidr` (restore / observed record). Idempotent per node;
    /// a CIDR overlapping another node's is a conflict for both, never absorbed.
    pub fn occupy(
        &mut self,
        uid: &NodeUid,
        name: &str,
        cidr: PodCidr,
        state: HeldState,
    ) -> OccupyOutcome {
        let entry = self.nodes.entry(uid.clone()).or_insert_with(|| NodeEntry {
            name: name.to_string(),
            held: Vec::new(),
        });
        if let Some(h) = entry.held.iter_mut().find(|h| h.cidr == cidr) {
            if state == HeldState::Confirmed {
                h.state = HeldState::Confirmed;
            }
            return OccupyOutcome::AlreadyOwned;
        }
        entry.held.push(Held { cidr, state });
        let pool =
            slot_range(&self.ranges, &self.range_index, &cidr).map(|i| self.ranges[i].pool.clone());
        let in_pool = pool.is_some();
        let set = &mut self.holdings[cidr.family().index()];
        let maybe_conflict = if let Some(h) = set.get_mut(&cidr) {
            h.claimants.push(uid.clone());
            true
        } else {
            let others = set.overlapping(&cidr);
            for o in &others {
                if let Some(h) = set.get_mut(o) {
                    h.overlaps += 1;
                }
            }
            let overlaps = others.len() as u32;
            set.insert(
                &cidr,
                Holding {
                    claimants: vec![uid.clone()],
                    overlaps,
                    pool,
                },
            );
            self.carve(&cidr);
            overlaps > 0
        };
        let with = if maybe_conflict {
            self.conflict_partners(&cidr, uid)
        } else {
            Vec::new()
        };
        if !with.is_empty() {
            OccupyOutcome::Conflict { with }
        } else if in_pool {
            OccupyOutcome::Occupied
        } else {
            OccupyOutcome::OutOfPool
        }
    }

    fn carve(&mut self, c: &PodCidr) {
        if let Some(i) = slot_range(&self.ranges, &self.range_index, c) {
            // Common case: exactly one slot of one range.
            if let Some((lo, _)) = self.ranges[i].slot_span(c) {
                self.ranges[i].free.take(lo);
            }
            return;
        }
        for i in self.ranges_overlapping(c) {
            if let Some((lo, hi)) = self.ranges[i].slot_span(c) {
                self.ranges[i].free.take_range(lo, hi);
            }
        }
    }

    /// Other nodes whose CIDRs overlap `cidr` (empty unless in conflict).
    pub fn conflict_partners(&self, cidr: &PodCidr, except: &NodeUid) -> Vec<NodeUid> {
        let set = &self.holdings[cidr.family().index()];
        let mut out: Vec<NodeUid> = set
            .overlapping(cidr)
            .iter()
            .filter_map(|c| set.get(c))
            .flat_map(|h| h.claimants.iter().cloned())
            .filter(|u| u != except)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// True if `cidr` is claimed twice or overlaps another claim.
    pub fn is_conflicted(&self, cidr: &PodCidr) -> bool {
        self.holdings[cidr.family().index()]
            .get(cidr)
            .is_some_and(|h| h.claimants.len() > 1 || h.overlaps > 0)
    }

    /// Reserves one CIDR per requested family, lowest free first, from the most specific
    /// matching pool. All-or-nothing: on failure the slots taken in this call are given back.
    pub fn allocate(
        &mut self,
        uid: &NodeUid,
        name: &str,
        labels: &BTreeMap<String, String>,
        families: &[Family],
    ) -> Result<Vec<PodCidr>, AllocError> {
        if !self.restored {
            return Err(AllocError::NotRestored);
        }
        let mut taken: Vec<(usize, u128)> = Vec::new();
        for &f in families {
            match self.take_slot(f, labels) {
                Ok(t) => taken.push(t),
                Err(e) => {
                    for (i, s) in taken {
                        self.ranges[i].free.give(s);
                    }
                    return Err(e);
                }
            }
        }
        let entry = self.nodes.entry(uid.clone()).or_insert_with(|| NodeEntry {
            name: name.to_string(),
            held: Vec::new(),
        });
        let mut out = Vec::with_capacity(taken.len());
        for (i, s) in taken {
            let r = &self.ranges[i];
            let cidr = r.slot_cidr(s);
            let holding = Holding {
                claimants: vec![uid.clone()],
                overlaps: 0,
                pool: Some(r.pool.clone()),
            };
            self.holdings[cidr.family().index()].insert(&cidr, holding);
            entry.held.push(Held {
                cidr,
                state: HeldState::Pending {
                    maybe_published: false,
                },
            });
            out.push(cidr);
        }
        Ok(out)
    }

    fn take_slot(
        &mut self,
        f: Family,
        labels: &BTreeMap<String, String>,
    ) -> Result<(usize, u128), AllocError> {
        let fi = f.index();
        let mut candidates: Vec<usize> = (0..self.pools.len())
            .filter(|&i| !self.pools[i].ranges[fi].is_empty() && self.pools[i].spec.selects(labels))
            .collect();
        if candidates.is_empty() {
            return Err(AllocError::NoMatchingPool { family: f });
        }
        // Most specific selector first, then name (pools are sorted by name).
        if candidates.len() > 1 {
            candidates.sort_by_key(|&i| {
                std::cmp::Reverse(
                    self.pools[i]
                        .spec
                        .node_selector
                        .as_ref()
                        .map_or(0, |s| s.specificity()),
                )
            });
        }
        for &p in &candidates {
            for &r in &self.pools[p].ranges[fi] {
                if let Some(s) = self.ranges[r].free.take_lowest() {
                    return Ok((r, s));
                }
            }
        }
        let pools = candidates
            .iter()
            .map(|&i| self.pools[i].key.clone())
            .collect();
        Err(AllocError::PoolExhausted { family: f, pools })
    }

    /// Owner-checked release of one CIDR. Published CIDRs go to quarantine.
    pub fn release(&mut self, uid: &NodeUid, cidr: &PodCidr, now: Timestamp) -> ReleaseOutcome {
        let pos = self
            .nodes
            .get(uid)
            .and_then(|e| e.held.iter().position(|h| h.cidr == *cidr));
        let Some(pos) = pos else {
            let holders = self.holders(cidr);
            return if holders.is_empty() {
                ReleaseOutcome::NotHeld
            } else {
                ReleaseOutcome::NotOwner { holders }
            };
        };
        let held = match self.nodes.get_mut(uid) {
            Some(e) => {
                let h = e.held.remove(pos);
                if e.held.is_empty() {
                    self.nodes.remove(uid);
                }
                h
            }
            None => return ReleaseOutcome::NotHeld,
        };
        let until = self.unclaim(uid, &held, now);
        ReleaseOutcome::Released { until }
    }

    /// Releases everything a node holds (the Node object is gone).
    pub fn release_node(
        &mut self,
        uid: &NodeUid,
        now: Timestamp,
    ) -> Vec<(PodCidr, ReleaseOutcome)> {
        let Some(entry) = self.nodes.remove(uid) else {
            return Vec::new();
        };
        entry
            .held
            .iter()
            .map(|h| {
                (
                    h.cidr,
                    ReleaseOutcome::Released {
                        until: self.unclaim(uid, h, now),
                    },
                )
            })
            .collect()
    }

    fn unclaim(&mut self, uid: &NodeUid, held: &Held, now: Timestamp) -> Option<Timestamp> {
        let cidr = held.cidr;
        let set = &mut self.holdings[cidr.family().index()];
        let h = set.get_mut(&cidr)?;
        h.claimants.retain(|c| c != uid);
        if !h.claimants.is_empty() {
            return None;
        }
        set.remove(&cidr);
        for o in set.overlapping(&cidr) {
            if let Some(h) = set.get_mut(&o) {
                h.overlaps = h.overlaps.saturating_sub(1);
            }
        }
        let published = held.state
            != HeldState::Pending {
                maybe_published: false,
            };
        if published && self.config.quarantine_secs > 0 {
            let until = now.plus(self.config.quarantine_secs);
            self.add_quarantine(cidr, until);
            Some(until)
        } else {
            self.give_back(&cidr);
            None
        }
    }

    /// Quarantines a CIDR found in a record of a node that is already gone (restart), unless
    /// someone holds an overlapping CIDR. Returns true if quarantined.
    pub fn quarantine_unheld(&mut self, cidr: PodCidr, now: Timestamp) -> bool {
        if self.config.quarantine_secs == 0
            || !self.holdings[cidr.family().index()]
                .overlapping(&cidr)
                .is_empty()
        {
            return false;
        }
        self.add_quarantine(cidr, now.plus(self.config.quarantine_secs));
        true
    }

    fn add_quarantine(&mut self, cidr: PodCidr, until: Timestamp) {
        let q = &mut self.quarantined[cidr.family().index()];
        if let Some(&old) = q.get(&cidr) {
            if old >= until {
                return;
            }
            self.quarantine.remove(&(old, cidr));
        }
        q.insert(&cidr, until);
        self.quarantine.insert((until, cidr));
        self.carve(&cidr);
    }

    /// Returns quarantined CIDRs whose time is up to the free runs.
    pub fn expire(&mut self, now: Timestamp) {
        while let Some(&(t, c)) = self.quarantine.first() {
            if t > now {
                break;
            }
            self.quarantine.pop_first();
            self.quarantined[c.family().index()].remove(&c);
            self.give_back(&c);
        }
    }

    /// Frees the slots of `c` that nothing else blocks.
    fn give_back(&mut self, c: &PodCidr) {
        let f = c.family().index();
        let mut blockers = self.holdings[f].overlapping(c);
        blockers.extend(self.quarantined[f].overlapping(c));
        for i in self.ranges_overlapping(c) {
            let r = &mut self.ranges[i];
            let Some((lo, hi)) = r.slot_span(c) else {
                continue;
            };
            let spans: Vec<(u128, u128)> = blockers.iter().filter_map(|b| r.slot_span(b)).collect();
            for (a, b) in gaps(lo, hi, spans) {
                r.free.give_range(a, b);
            }
        }
    }

    /// Marks a pending CIDR as confirmed (write succeeded or seen in the store).
    pub fn confirm(&mut self, uid: &NodeUid, cidr: &PodCidr) {
        self.set_state(uid, cidr, |_| HeldState::Confirmed);
    }

    /// Notes that a write of a pending CIDR had an unknown outcome.
    pub fn mark_maybe_published(&mut self, uid: &NodeUid, cidr: &PodCidr) {
        self.set_state(uid, cidr, |s| match s {
            HeldState::Pending { .. } => HeldState::Pending {
                maybe_published: true,
            },
            s => s,
        });
    }

    fn set_state(&mut self, uid: &NodeUid, cidr: &PodCidr, f: impl Fn(HeldState) -> HeldState) {
        if let Some(h) = self
            .nodes
            .get_mut(uid)
            .and_then(|e| e.held.iter_mut().find(|h| h.cidr == *cidr))
        {
            h.state = f(h.state);
        }
    }
}

/// Range whose active CIDR holds `c` as exactly one slot.
pub(crate) fn slot_range(
    ranges: &[SlotRange],
    index: &[BTreeMap<u128, usize>; 2],
    c: &PodCidr,
) -> Option<usize> {
    let (_, &i) = index[c.family().index()].range(..=c.addr()).next_back()?;
    ranges[i].is_slot(c).then_some(i)
}

/// Sub-runs of `lo..=hi` not covered by `spans`.
fn gaps(lo: u128, hi: u128, mut spans: Vec<(u128, u128)>) -> Vec<(u128, u128)> {
    spans.sort_unstable();
    let mut out = Vec::new();
    let mut next = Some(lo);
    for (a, b) in spans {
        let Some(n) = next else { break };
        if b < n {
            continue;
        }
        if a > n {
            out.push((n, (a - 1).min(hi)));
        }
        next = b.checked_add(1);
    }
    if let Some(n) = next
        && n <= hi
    {
        out.push((n, hi));
    }
    out.retain(|&(a, b)| a >= lo && a <= b && b <= hi);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocator::pool::FamilyPoolSpec;
    use crate::allocator::selector::NodeSelector;

    fn pool(name: &str, v4: &str, mask: u8, selector: Option<(&str, &str)>) -> PodCidrPool {
        PodCidrPool {
            name: name.into(),
            ipv4: Some(FamilyPoolSpec {
                cidrs: vec![v4.into()],
                mask_size: mask,
            }),
            ipv6: None,
            node_selector: selector
                .map(|(k, v)| NodeSelector::labels([(k.to_string(), v.to_string())])),
        }
    }

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn restored(pools: Vec<PodCidrPool>, quarantine_secs: u64) -> Allocator {
        let mut a = Allocator::new(
            AllocatorConfig {
                families: vec![Family::V4],
                quarantine_secs,
            },
            pools,
        );
        a.mark_restored();
        a
    }

    #[test]
    fn shareable_across_tasks() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Allocator>();
        send_sync::<crate::allocator::Reconciler>();
    }

    #[test]
    fn most_specific_matching_pool_wins() {
        let pools = vec![
            pool("all", "10.0.0.0/16", 24, None),
            pool("gpu", "10.9.0.0/16", 24, Some(("gpu", "yes"))),
        ];
        let mut a = restored(pools, 0);
        let got = a
            .allocate(&"g".into(), "g", &labels(&[("gpu", "yes")]), &[Family::V4])
            .unwrap();
        assert_eq!(got[0].to_string(), "10.9.0.0/24");
        let got = a
            .allocate(&"c".into(), "c", &labels(&[]), &[Family::V4])
            .unwrap();
        assert_eq!(got[0].to_string(), "10.0.0.0/24");
        let mut only_gpu = restored(
            vec![pool("gpu", "10.9.0.0/16", 24, Some(("gpu", "yes")))],
            0,
        );
        let err = only_gpu
            .allocate(&"c".into(), "c", &labels(&[]), &[Family::V4])
            .unwrap_err();
        assert_eq!(err, AllocError::NoMatchingPool { family: Family::V4 });
    }

    #[test]
    fn lowest_free_first_skips_quarantine_until_expiry() {
        let mut a = restored(vec![pool("p", "10.0.0.0/24", 26, None)], 300);
        let none = BTreeMap::new();
        for u in ["a", "b", "c"] {
            a.allocate(&u.into(), u, &none, &[Family::V4]).unwrap();
            a.confirm(&u.into(), &a.node(&u.into()).unwrap().held[0].cidr.clone());
        }
        let out = a.release(
            &"a".into(),
            &PodCidr::parse("10.0.0.0/26").unwrap(),
            Timestamp(100),
        );
        assert_eq!(
            out,
            ReleaseOutcome::Released {
                until: Some(Timestamp(400))
            }
        );
        let next = |a: &mut Allocator, u: &str| {
            a.allocate(&u.into(), u, &none, &[Family::V4])
                .map(|v| v[0].to_string())
        };
        assert_eq!(next(&mut a, "d").unwrap(), "10.0.0.192/26");
        assert!(next(&mut a, "e").is_err(), "quarantined slot is not free");
        a.expire(Timestamp(399));
        assert!(next(&mut a, "e").is_err());
        a.expire(Timestamp(400));
        assert_eq!(next(&mut a, "e").unwrap(), "10.0.0.0/26");
    }

    #[test]
    fn dual_stack_failure_rolls_back_only_this_step() {
        let mut p = pool("p", "10.0.0.0/24", 25, None);
        p.ipv6 = Some(FamilyPoolSpec {
            cidrs: vec!["fd00::/127".into()],
            mask_size: 128,
        });
        let cfg = AllocatorConfig {
            families: vec![Family::V4, Family::V6],
            quarantine_secs: 0,
        };
        let mut a = Allocator::new(cfg, vec![p]);
        a.mark_restored();
        let none = BTreeMap::new();
        let both = [Family::V4, Family::V6];
        a.allocate(&"a".into(), "a", &none, &both).unwrap();
        a.occupy(
            &"b".into(),
            "b",
            PodCidr::parse("fd00::1/128").unwrap(),
            HeldState::Confirmed,
        );
        let err = a.allocate(&"c".into(), "c", &none, &both).unwrap_err();
        assert!(matches!(
            err,
            AllocError::PoolExhausted {
                family: Family::V6,
                ..
            }
        ));
        assert_eq!(
            a.pool_status("p").unwrap().family(Family::V4).unwrap().free,
            1,
            "v4 given back"
        );
        assert!(a.node(&"c".into()).is_none());
        // Only the missing family is requested for a node that already has v6.
        let got = a.allocate(&"b".into(), "b", &none, &[Family::V4]).unwrap();
        assert_eq!(got[0].to_string(), "10.0.0.128/25");
    }

    #[test]
    fn gaps_complement_spans() {
        assert_eq!(gaps(0, 9, vec![]), vec![(0, 9)]);
        assert_eq!(
            gaps(0, 9, vec![(3, 4), (0, 0), (4, 6)]),
            vec![(1, 2), (7, 9)]
        );
        assert_eq!(gaps(5, 5, vec![(5, 5)]), vec![]);
        assert_eq!(gaps(2, 8, vec![(0, 3), (7, 20)]), vec![(4, 6)]);
        assert_eq!(gaps(0, u128::MAX, vec![(0, u128::MAX)]), vec![]);
    }
}
