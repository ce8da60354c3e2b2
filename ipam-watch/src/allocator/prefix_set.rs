//! Prefix index of one family with overlap queries (equal, ancestors, descendants).

use std::collections::BTreeMap;

use super::cidr::{Family, PodCidr, host_mask};

/// Map keyed by `(network, length)`; entries may overlap each other (conflicts are kept,
/// not absorbed). Ancestor lookups only probe the lengths actually present.
#[derive(Debug, Clone)]
pub(crate) struct PrefixSet<V> {
    family: Family,
    map: BTreeMap<(u128, u8), V>,
    lens: BTreeMap<u8, usize>,
}

impl<V> PrefixSet<V> {
    pub(crate) fn new(family: Family) -> Self {
        PrefixSet {
            family,
            map: BTreeMap::new(),
            lens: BTreeMap::new(),
        }
    }

    fn cidr(&self, (addr, len): (u128, u8)) -> PodCidr {
        PodCidr::from_raw(self.family, addr, len)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn get(&self, c: &PodCidr) -> Option<&V> {
        self.map.get(&(c.addr(), c.prefix_len()))
    }

    pub(crate) fn get_mut(&mut self, c: &PodCidr) -> Option<&mut V> {
        self.map.get_mut(&(c.addr(), c.prefix_len()))
    }

    pub(crate) fn insert(&mut self, c: &PodCidr, v: V) -> Option<V> {
        let old = self.map.insert((c.addr(), c.prefix_len()), v);
        if old.is_none() {
            *self.lens.entry(c.prefix_len()).or_default() += 1;
        }
        old
    }

    pub(crate) fn remove(&mut self, c: &PodCidr) -> Option<V> {
        let old = self.map.remove(&(c.addr(), c.prefix_len()))?;
        if let Some(n) = self.lens.get_mut(&c.prefix_len()) {
            *n -= 1;
            if *n == 0 {
                self.lens.remove(&c.prefix_len());
            }
        }
        Some(old)
    }

    /// Every stored prefix sharing an address with `c` (including `c` itself if stored).
    pub(crate) fn overlapping(&self, c: &PodCidr) -> Vec<PodCidr> {
        let bits = self.family.bits();
        let mut out = Vec::new();
        for &l in self.lens.range(..c.prefix_len()).map(|(l, _)| l) {
            let a = c.addr() & !host_mask(l, bits);
            if a < c.addr() && self.map.contains_key(&(a, l)) {
                out.push(self.cidr((a, l)));
            }
        }
        out.extend(
            self.map
                .range((c.addr(), 0)..=(c.last(), u8::MAX))
                .map(|(&k, _)| self.cidr(k)),
        );
        out
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (PodCidr, &V)> + '_ {
        self.map.iter().map(|(&k, v)| (self.cidr(k), v))
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (PodCidr, &mut V)> + '_ {
        let family = self.family;
        self.map
            .iter_mut()
            .map(move |(&(a, l), v)| (PodCidr::from_raw(family, a, l), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PodCidr {
        PodCidr::parse(s).unwrap()
    }

    #[test]
    fn finds_equal_ancestors_and_descendants() {
        let mut s = PrefixSet::new(Family::V4);
        for c in [
            "10.0.0.0/8",
            "10.1.0.0/16",
            "10.1.2.0/24",
            "10.2.0.0/24",
            "11.0.0.0/24",
        ] {
            s.insert(&p(c), ());
        }
        let mut got: Vec<String> = s
            .overlapping(&p("10.1.0.0/16"))
            .iter()
            .map(ToString::to_string)
            .collect();
        got.sort();
        assert_eq!(got, vec!["10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24"]);
        assert_eq!(s.overlapping(&p("12.0.0.0/8")), vec![]);
        assert_eq!(s.overlapping(&p("10.2.0.128/25")).len(), 2);
        s.remove(&p("10.0.0.0/8"));
        assert_eq!(s.overlapping(&p("10.3.0.0/24")), vec![]);
        assert_eq!(s.len(), 4);
    }
}
