//! `FreeRuns`: the free slots of one pool CIDR as disjoint, coalesced runs.
//!
//! Memory is O(runs), not O(slots), so an IPv6 /32 split into /64s (2^32 slots) costs one
//! entry when empty. Every operation is O(log runs) (plus the runs it touches).

use std::collections::BTreeMap;

/// Disjoint, coalesced runs of free slot indices: `start -> last` (inclusive).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FreeRuns {
    runs: BTreeMap<u128, u128>,
    free: u128,
}

impl FreeRuns {
    /// No free slot.
    pub fn empty() -> Self {
        FreeRuns::default()
    }

    /// Slots `0..=last` all free.
    pub fn full(last: u128) -> Self {
        let mut runs = BTreeMap::new();
        runs.insert(0, last);
        FreeRuns {
            runs,
            free: last.saturating_add(1),
        }
    }

    /// Number of free slots.
    pub fn free_count(&self) -> u128 {
        self.free
    }

    /// Number of runs (memory footprint).
    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// The runs, lowest first.
    pub fn runs(&self) -> impl Iterator<Item = (u128, u128)> + '_ {
        self.runs.iter().map(|(&s, &l)| (s, l))
    }

    /// True if `slot` is free.
    pub fn contains(&self, slot: u128) -> bool {
        self.runs
            .range(..=slot)
            .next_back()
            .is_some_and(|(_, &last)| last >= slot)
    }

    /// Lowest free slot.
    pub fn lowest(&self) -> Option<u128> {
        self.runs.first_key_value().map(|(&s, _)| s)
    }

    /// Takes the lowest free slot.
    pub fn take_lowest(&mut self) -> Option<u128> {
        let (start, last) = self.runs.pop_first()?;
        if last > start {
            self.runs.insert(start + 1, last);
        }
        self.free -= 1;
        Some(start)
    }

    /// Takes one specific slot; false if it was not free.
    pub fn take(&mut self, slot: u128) -> bool {
        let Some((&start, &last)) = self.runs.range(..=slot).next_back() else {
            return false;
        };
        if last < slot {
            return false;
        }
        if start == slot {
            self.runs.remove(&start);
        } else {
            self.runs.insert(start, slot - 1);
        }
        if last > slot {
            self.runs.insert(slot + 1, last);
        }
        self.free -= 1;
        true
    }

    /// Removes `lo..=hi` from the free set; returns how many slots were free there.
    pub fn take_range(&mut self, lo: u128, hi: u128) -> u128 {
        if lo > hi {
            return 0;
        }
        let mut touched = Vec::new();
        if let Some((&s, &l)) = self.runs.range(..lo).next_back()
            && l >= lo
        {
            touched.push((s, l));
        }
        touched.extend(self.runs.range(lo..=hi).map(|(&s, &l)| (s, l)));
        let mut removed = 0;
        for (s, l) in touched {
            self.runs.remove(&s);
            if s < lo {
                self.runs.insert(s, lo - 1);
            }
            if l > hi {
                self.runs.insert(hi + 1, l);
            }
            removed += l.min(hi) - s.max(lo) + 1;
        }
        self.free -= removed;
        removed
    }

    /// Frees one slot; false if it was already free.
    pub fn give(&mut self, slot: u128) -> bool {
        self.give_range(slot, slot) == 1
    }

    /// Frees `lo..=hi` (coalescing with neighbours); returns how many slots became free.
    pub fn give_range(&mut self, lo: u128, hi: u128) -> u128 {
        if lo > hi {
            return 0;
        }
        let already = self.take_range(lo, hi);
        let (mut start, mut last) = (lo, hi);
        if lo > 0
            && let Some((&s, &l)) = self.runs.range(..lo).next_back()
            && l == lo - 1
        {
            self.runs.remove(&s);
            start = s;
        }
        if let Some(next) = hi.checked_add(1)
            && let Some(l) = self.runs.remove(&next)
        {
            last = l;
        }
        self.runs.insert(start, last);
        let span = hi - lo + 1;
        self.free += span;
        span - already
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(f: &FreeRuns) -> Vec<(u128, u128)> {
        f.runs().collect()
    }

    #[test]
    fn lowest_first_and_exhaustion() {
        let mut f = FreeRuns::full(3);
        assert_eq!(
            (0..4).map(|_| f.take_lowest().unwrap()).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
        assert_eq!(f.take_lowest(), None);
        assert_eq!(f.free_count(), 0);
    }

    #[test]
    fn take_splits_and_give_coalesces() {
        let mut f = FreeRuns::full(9);
        assert!(f.take(5));
        assert!(!f.take(5), "taking twice is refused");
        assert_eq!(runs(&f), vec![(0, 4), (6, 9)]);
        assert!(f.take(0) && f.take(9));
        assert_eq!(runs(&f), vec![(1, 4), (6, 8)]);
        assert!(f.give(5));
        assert_eq!(runs(&f), vec![(1, 8)]);
        assert!(!f.give(5), "giving twice is refused");
        assert!(f.give(0) && f.give(9));
        assert_eq!(runs(&f), vec![(0, 9)]);
        assert_eq!(f.free_count(), 10);
    }

    #[test]
    fn ranges_handle_partial_overlap() {
        let mut f = FreeRuns::full(19);
        assert_eq!(f.take_range(5, 14), 10);
        assert_eq!(f.take_range(0, 7), 5);
        assert_eq!(runs(&f), vec![(15, 19)]);
        assert_eq!(f.give_range(10, 16), 5, "15 and 16 were already free");
        assert_eq!(runs(&f), vec![(10, 19)]);
        assert_eq!(f.free_count(), 10);
        assert!(f.contains(10) && !f.contains(9));
        assert_eq!(f.lowest(), Some(10));
    }

    #[test]
    fn huge_ranges_use_constant_memory() {
        let last = (1u128 << 64) - 1;
        let mut f = FreeRuns::full(last);
        for _ in 0..1000 {
            f.take_lowest();
        }
        assert!(f.take(last));
        assert_eq!(f.run_count(), 1);
        assert_eq!(f.free_count(), (1u128 << 64) - 1001);
        assert_eq!(f.lowest(), Some(1000));
    }

    #[test]
    fn extreme_indices_do_not_overflow() {
        let mut f = FreeRuns::full(u128::MAX >> 1);
        assert!(f.take(u128::MAX >> 1));
        assert!(f.give(u128::MAX >> 1));
        assert_eq!(f.run_count(), 1);
    }
}
