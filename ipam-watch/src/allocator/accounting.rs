//! Read-only views of the allocator: pool status and accounting, announcements, holdings.
//! Accounting is recomputed from holdings and quarantine, independently of the free runs,
//! so `capacity == allocated + free + quarantined + blocked` is a real cross-check.

use super::cidr::{Family, NodeUid, PodCidr, Timestamp};
use super::core::{Allocator, HeldState, NodeEntry, PoolState};
use super::pool::SlotRange;
use super::status::{
    Condition, ConditionStatus, EXHAUSTED, FamilyAccounting, OVERLAPPING, PoolStatus, READY,
};

/// A CIDR that may be announced via BGP: confirmed, not in conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// Node name.
    pub node: String,
    /// Node UID.
    pub uid: NodeUid,
    /// The CIDR.
    pub cidr: PodCidr,
    /// Outside every active pool (after a shrink, or foreign); still in use by the node.
    pub draining: bool,
}

/// An active pool CIDR (for inspection and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveRange {
    /// Pool name.
    pub pool: String,
    /// Pool CIDR.
    pub cidr: PodCidr,
    /// Node mask.
    pub mask_size: u8,
    /// Free slots.
    pub free: u128,
    /// Number of free runs (memory use).
    pub runs: usize,
}

/// A held CIDR outside every active pool (pool shrunk or deleted, or foreign from the start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draining {
    /// The CIDR.
    pub cidr: PodCidr,
    /// Pool it was last seen in, if any.
    pub last_pool: Option<String>,
    /// Holders (more than one means conflict).
    pub holders: Vec<NodeUid>,
}

impl Allocator {
    /// Every held CIDR outside the active pools, including those of deleted pools.
    pub fn draining(&self) -> Vec<Draining> {
        self.holdings
            .iter()
            .flat_map(|set| set.iter())
            .filter(|(c, _)| self.pool_of(c).is_none())
            .map(|(cidr, h)| Draining {
                cidr,
                last_pool: h.pool.as_deref().map(str::to_string),
                holders: h.claimants.clone(),
            })
            .collect()
    }

    /// What the allocator holds for a node.
    pub fn node(&self, uid: &NodeUid) -> Option<&NodeEntry> {
        self.nodes.get(uid)
    }

    /// UIDs of every node holding something.
    pub fn node_uids(&self) -> Vec<NodeUid> {
        let mut v: Vec<NodeUid> = self.nodes.keys().cloned().collect();
        v.sort();
        v
    }

    /// Holders of exactly `cidr`.
    pub fn holders(&self, cidr: &PodCidr) -> Vec<NodeUid> {
        self.holdings[cidr.family().index()]
            .get(cidr)
            .map(|h| h.claimants.clone())
            .unwrap_or_default()
    }

    /// Every held CIDR with its claimants.
    pub fn holdings(&self) -> Vec<(PodCidr, Vec<NodeUid>)> {
        self.holdings
            .iter()
            .flat_map(|s| s.iter().map(|(c, h)| (c, h.claimants.clone())))
            .collect()
    }

    /// Quarantined CIDRs and when they become reusable.
    pub fn quarantined(&self) -> Vec<(PodCidr, Timestamp)> {
        self.quarantine.iter().map(|&(t, c)| (c, t)).collect()
    }

    /// Active pool CIDRs.
    pub fn active_ranges(&self) -> Vec<ActiveRange> {
        self.ranges
            .iter()
            .map(|r| ActiveRange {
                pool: r.pool.to_string(),
                cidr: r.cidr,
                mask_size: r.node_len,
                free: r.free.free_count(),
                runs: r.free.run_count(),
            })
            .collect()
    }

    /// CIDRs that may be announced: confirmed and not in conflict.
    pub fn announcements(&self) -> Vec<Announcement> {
        let mut out: Vec<Announcement> = self
            .nodes
            .iter()
            .flat_map(|(uid, e)| e.held.iter().map(move |h| (uid, e, h)))
            .filter(|(_, _, h)| h.state == HeldState::Confirmed && !self.is_conflicted(&h.cidr))
            .map(|(uid, e, h)| Announcement {
                node: e.name.clone(),
                uid: uid.clone(),
                cidr: h.cidr,
                draining: self.pool_of(&h.cidr).is_none(),
            })
            .collect();
        out.sort_by_key(|a| a.cidr);
        out
    }

    /// Status of every pool (sorted by name).
    pub fn pool_statuses(&self) -> Vec<PoolStatus> {
        self.pools.iter().map(|p| self.status_of(p)).collect()
    }

    /// Status of one pool.
    pub fn pool_status(&self, name: &str) -> Option<PoolStatus> {
        self.pools
            .iter()
            .find(|p| p.key == name)
            .map(|p| self.status_of(p))
    }

    fn status_of(&self, p: &PoolState) -> PoolStatus {
        let mut families = Vec::new();
        for f in Family::ALL {
            let Some(spec) = p.spec.spec(f) else { continue };
            let ranges: Vec<&SlotRange> = p.ranges[f.index()]
                .iter()
                .map(|&i| &self.ranges[i])
                .collect();
            let draining = self.holdings[f.index()]
                .iter()
                .filter(|(c, h)| {
                    h.pool.as_deref() == Some(p.key.as_str())
                        && self.pool_of(c) != Some(p.key.as_str())
                })
                .count() as u128;
            families.push(family_accounting(
                self,
                f,
                spec.mask_size,
                &ranges,
                draining,
            ));
        }
        let r = &p.report;
        let active: usize = p.ranges.iter().map(Vec::len).sum();
        let ready = if !r.invalid.is_empty() {
            Condition::new(
                READY,
                ConditionStatus::False,
                "InvalidSpec",
                r.invalid.join("; "),
            )
        } else if active == 0 {
            Condition::new(
                READY,
                ConditionStatus::False,
                "NoActiveCidrs",
                "no usable CIDR",
            )
        } else {
            Condition::new(
                READY,
                ConditionStatus::True,
                "Active",
                format!("{active} CIDR(s) active"),
            )
        };
        let overlapping = if r.overlapping.is_empty() {
            Condition::new(OVERLAPPING, ConditionStatus::False, "NoOverlap", "")
        } else {
            Condition::new(
                OVERLAPPING,
                ConditionStatus::True,
                "CidrOverlap",
                r.overlapping.join("; "),
            )
        };
        let full: Vec<String> = families
            .iter()
            .filter(|a| a.capacity > 0 && a.free == 0)
            .map(|a| {
                format!(
                    "no free /{} for {} (capacity {}, allocated {}, quarantined {})",
                    a.mask_size,
                    a.family.name(),
                    a.capacity,
                    a.allocated,
                    a.quarantined
                )
            })
            .collect();
        let exhausted = if full.is_empty() {
            Condition::new(EXHAUSTED, ConditionStatus::False, "FreeSlotsAvailable", "")
        } else {
            Condition::new(
                EXHAUSTED,
                ConditionStatus::True,
                "NoFreeSlots",
                full.join("; "),
            )
        };
        PoolStatus {
            name: p.key.clone(),
            families,
            conditions: vec![ready, overlapping, exhausted],
        }
    }
}

type Spans = Vec<(u128, u128)>;

fn merge(mut v: Spans) -> Spans {
    v.sort_unstable();
    let mut out: Spans = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn size(v: &[(u128, u128)]) -> u128 {
    v.iter()
        .fold(0u128, |n, (a, b)| n.saturating_add(b - a + 1))
}

/// Slots in both merged lists.
fn common(x: &[(u128, u128)], y: &[(u128, u128)]) -> u128 {
    let (mut i, mut j, mut n) = (0, 0, 0u128);
    while i < x.len() && j < y.len() {
        let (lo, hi) = (x[i].0.max(y[j].0), x[i].1.min(y[j].1));
        if lo <= hi {
            n = n.saturating_add(hi - lo + 1);
        }
        if x[i].1 < y[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    n
}

fn family_accounting(
    a: &Allocator,
    f: Family,
    mask_size: u8,
    ranges: &[&SlotRange],
    draining: u128,
) -> FamilyAccounting {
    let mut acc = FamilyAccounting {
        family: f,
        mask_size,
        capacity: 0,
        allocated: 0,
        free: 0,
        quarantined: 0,
        blocked: 0,
        draining,
    };
    for r in ranges {
        acc.capacity = acc.capacity.saturating_add(r.capacity());
        acc.free = acc.free.saturating_add(r.free.free_count());
        let (mut exact, mut other) = (Vec::new(), Vec::new());
        for c in a.holdings[f.index()].overlapping(&r.cidr) {
            match r.slot_span(&c) {
                Some(s) if r.is_slot(&c) => exact.push(s),
                Some(s) => other.push(s),
                None => {}
            }
        }
        acc.allocated = acc.allocated.saturating_add(exact.len() as u128);
        let (exact, other) = (merge(exact), merge(other));
        acc.blocked = acc
            .blocked
            .saturating_add(size(&other) - common(&other, &exact));
        let held = merge(exact.iter().chain(&other).copied().collect());
        let q = merge(
            a.quarantined[f.index()]
                .overlapping(&r.cidr)
                .iter()
                .filter_map(|c| r.slot_span(c))
                .collect(),
        );
        acc.quarantined = acc.quarantined.saturating_add(size(&q) - common(&q, &held));
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_helpers() {
        assert_eq!(
            merge(vec![(5, 6), (0, 1), (2, 3), (9, 9)]),
            vec![(0, 3), (5, 6), (9, 9)]
        );
        assert_eq!(size(&[(0, 3), (5, 6)]), 6);
        assert_eq!(common(&[(0, 3), (5, 9)], &[(2, 6)]), 4);
        assert_eq!(common(&[], &[(2, 6)]), 0);
    }
}
