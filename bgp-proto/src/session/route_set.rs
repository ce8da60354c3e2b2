//! `RouteSet`: the routes a session should advertise, as one sorted vector.
//!
//! A map would do, but a node's set is built once per change, in prefix order, and then only
//! read (merge-joined by the planner, listed by reports). A sorted vector costs 32 bytes a
//! route with no node overhead or sort scratch: at 100,000 routes 3.2 MB instead of the
//! 5 MB a `BTreeMap` filled in order takes.

use std::sync::Arc;

use ipnet::IpNet;

use super::rib_out::RouteAttributes;

type Route = (IpNet, Arc<RouteAttributes>);

/// Prefix → attributes, sorted by prefix, one entry per prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteSet {
    routes: Vec<Route>,
}

impl RouteSet {
    pub fn new() -> Self {
        RouteSet::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        RouteSet {
            routes: Vec::with_capacity(n),
        }
    }

    /// Sets the attributes of `prefix`, returning the previous ones. Inserting in prefix order
    /// appends (constant time); out of order it shifts the tail.
    pub fn insert(
        &mut self,
        prefix: IpNet,
        attrs: Arc<RouteAttributes>,
    ) -> Option<Arc<RouteAttributes>> {
        if self.routes.last().is_none_or(|(last, _)| *last < prefix) {
            self.routes.push((prefix, attrs));
            return None;
        }
        match self.position(&prefix) {
            Ok(i) => self
                .routes
                .get_mut(i)
                .map(|slot| std::mem::replace(&mut slot.1, attrs)),
            Err(i) => {
                self.routes.insert(i, (prefix, attrs));
                None
            }
        }
    }

    pub fn remove(&mut self, prefix: &IpNet) -> Option<Arc<RouteAttributes>> {
        let i = self.position(prefix).ok()?;
        Some(self.routes.remove(i).1)
    }

    pub fn get(&self, prefix: &IpNet) -> Option<&Arc<RouteAttributes>> {
        let i = self.position(prefix).ok()?;
        self.routes.get(i).map(|(_, a)| a)
    }

    pub fn contains_key(&self, prefix: &IpNet) -> bool {
        self.position(prefix).is_ok()
    }

    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Routes in prefix order.
    pub fn iter(&self) -> Iter<'_> {
        self.routes.iter().map(split)
    }

    pub fn keys(&self) -> impl Iterator<Item = &IpNet> + '_ {
        self.routes.iter().map(|(p, _)| p)
    }

    pub fn values(&self) -> impl Iterator<Item = &Arc<RouteAttributes>> + '_ {
        self.routes.iter().map(|(_, a)| a)
    }

    /// The prefixes inside `cidr` (itself included), in order, found by binary search: a
    /// per-CIDR question asked of every source CIDR after every event must not scan the set.
    pub fn within<'a>(&'a self, cidr: &'a IpNet) -> impl Iterator<Item = &'a IpNet> + 'a {
        // Sorted by (address, length): every prefix whose address lies in `cidr` is in one
        // run, starting at the smallest key with `cidr`'s network address.
        let lowest = IpNet::new(cidr.network(), 0).unwrap_or(*cidr);
        let start = self.routes.partition_point(|(p, _)| *p < lowest);
        self.routes
            .get(start..)
            .unwrap_or_default()
            .iter()
            .map(|(p, _)| p)
            .take_while(move |p| cidr.contains(&p.addr()))
            .filter(move |p| cidr.contains(*p))
    }

    /// A cursor for asking "is any prefix inside this CIDR?" of many CIDRs. Asked in
    /// ascending order (a sorted source list) each answer costs about the log of the distance
    /// the cursor moved, not of the set's size: the coverage count asks it of every source
    /// CIDR, and at 100,000 a binary search each was a third of the speaker's start-up CPU.
    pub fn within_cursor(&self) -> WithinCursor<'_> {
        WithinCursor {
            routes: &self.routes,
            at: 0,
            lowest: None,
        }
    }

    fn position(&self, prefix: &IpNet) -> Result<usize, usize> {
        self.routes.binary_search_by(|(p, _)| p.cmp(prefix))
    }
}

/// See [`RouteSet::within_cursor`]. Answers as `within(cidr).next().is_some()` does, in any
/// order of questions; out of order it falls back to a binary search over the whole set.
#[derive(Debug, Clone)]
pub struct WithinCursor<'a> {
    routes: &'a [Route],
    /// Every route before `at` is below `lowest`, the last question's lower bound.
    at: usize,
    lowest: Option<IpNet>,
}

impl WithinCursor<'_> {
    /// Whether the set holds a prefix inside `cidr` (itself included).
    pub fn any_within(&mut self, cidr: &IpNet) -> bool {
        // The same lower bound as `within`: the smallest key with `cidr`'s network address.
        let lowest = IpNet::new(cidr.network(), 0).unwrap_or(*cidr);
        let below = |(p, _): &Route| *p < lowest;
        self.at = match self.lowest {
            // Ascending: the answer is at or after the last one. Gallop from there.
            Some(last) if last <= lowest => {
                let rest = self.routes.get(self.at..).unwrap_or_default();
                let mut step = 1;
                while rest.get(step - 1).is_some_and(below) {
                    step *= 2;
                }
                let bracket = rest.get(step / 2..step.min(rest.len())).unwrap_or_default();
                self.at + step / 2 + bracket.partition_point(below)
            }
            _ => self.routes.partition_point(below),
        };
        self.lowest = Some(lowest);
        self.routes
            .get(self.at..)
            .unwrap_or_default()
            .iter()
            .map(|(p, _)| p)
            .take_while(|p| cidr.contains(&p.addr()))
            .any(|p| cidr.contains(p))
    }
}

fn split(r: &Route) -> (&IpNet, &Arc<RouteAttributes>) {
    (&r.0, &r.1)
}

/// Iterator over a [`RouteSet`], in prefix order.
pub type Iter<'a> =
    std::iter::Map<std::slice::Iter<'a, Route>, fn(&Route) -> (&IpNet, &Arc<RouteAttributes>)>;

impl<'a> IntoIterator for &'a RouteSet {
    type Item = (&'a IpNet, &'a Arc<RouteAttributes>);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Like a map: for a prefix given twice, the last attributes win.
impl FromIterator<Route> for RouteSet {
    fn from_iter<I: IntoIterator<Item = Route>>(iter: I) -> Self {
        let mut routes: Vec<Route> = iter.into_iter().collect();
        if !routes.is_sorted_by(|a, b| a.0 < b.0) {
            routes.sort_by_key(|r| r.0); // stable: equal prefixes keep their order
            routes.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(&mut later.1, &mut kept.1);
                }
                same
            });
        }
        RouteSet { routes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::net::{IpAddr, Ipv4Addr};

    fn attrs(last: u8) -> Arc<RouteAttributes> {
        Arc::new(RouteAttributes::with_next_hop(IpAddr::V4(Ipv4Addr::new(
            192, 0, 2, last,
        ))))
    }

    fn prefix(i: u8) -> IpNet {
        IpNet::V4(ipnet::Ipv4Net::new(Ipv4Addr::new(10, i, 0, 0), 16).unwrap())
    }

    proptest! {
        /// Whatever the order of inserts, removals and collects, the set behaves like a
        /// `BTreeMap` (the type it replaced).
        #[test]
        fn behaves_like_a_btreemap(
            ops in prop::collection::vec((any::<bool>(), 0u8..32, 0u8..4), 0..64),
            collected in prop::collection::vec((0u8..32, 0u8..4), 0..64),
        ) {
            let mut set = RouteSet::new();
            let mut map = BTreeMap::new();
            for (insert, p, a) in ops {
                if insert {
                    prop_assert_eq!(set.insert(prefix(p), attrs(a)), map.insert(prefix(p), attrs(a)));
                } else {
                    prop_assert_eq!(set.remove(&prefix(p)), map.remove(&prefix(p)));
                }
                prop_assert_eq!(set.len(), map.len());
            }
            prop_assert!(set.iter().eq(map.iter()));
            for p in 0..32 {
                prop_assert_eq!(set.get(&prefix(p)), map.get(&prefix(p)));
                prop_assert_eq!(set.contains_key(&prefix(p)), map.contains_key(&prefix(p)));
            }
            let items: Vec<Route> = collected.iter().map(|&(p, a)| (prefix(p), attrs(a))).collect();
            let set: RouteSet = items.iter().cloned().collect();
            let map: BTreeMap<IpNet, Arc<RouteAttributes>> = items.into_iter().collect();
            prop_assert!(set.iter().eq(map.iter()), "collect keeps the last value per prefix");
        }

        /// `within` finds exactly what a scan with `contains` finds, for prefixes of any
        /// length and family, host bits set or not, so the coverage count can use it.
        #[test]
        fn within_finds_what_a_scan_finds(
            keys in prop::collection::vec(any_prefix(), 0..48),
            cidr in any_prefix(),
        ) {
            let set: RouteSet = keys.iter().map(|&k| (k, attrs(0))).collect();
            let scanned: Vec<&IpNet> = set.keys().filter(|k| cidr.contains(*k)).collect();
            let found: Vec<&IpNet> = set.within(&cidr).collect();
            prop_assert_eq!(found, scanned);
        }
    }

    proptest! {
        /// The cursor answers every question as `within` does, whether the questions come
        /// in ascending order (the fast path), out of order or repeated.
        #[test]
        fn cursor_answers_as_within_does(
            keys in prop::collection::vec(any_prefix(), 0..64),
            mut cidrs in prop::collection::vec(any_prefix(), 0..48),
            sorted in any::<bool>(),
        ) {
            let set: RouteSet = keys.iter().map(|&k| (k, attrs(0))).collect();
            if sorted {
                cidrs.sort();
            }
            let mut cursor = set.within_cursor();
            for cidr in &cidrs {
                prop_assert_eq!(cursor.any_within(cidr), set.within(cidr).next().is_some(), "{}", cidr);
            }
        }
    }

    /// A dense sorted set asked in order (the 100,000-CIDR start-up): every CIDR found, the
    /// gallop crossing long runs both ways.
    #[test]
    fn cursor_finds_each_of_a_dense_sorted_set() {
        let keys: Vec<IpNet> = (0u32..5000)
            .map(|i| {
                IpNet::V4(ipnet::Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (i << 6)), 26).unwrap())
            })
            .collect();
        let set: RouteSet = keys.iter().step_by(3).map(|&k| (k, attrs(0))).collect();
        let mut cursor = set.within_cursor();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(cursor.any_within(k), i % 3 == 0, "{k}");
        }
        let wide: IpNet = "10.0.0.0/8".parse().unwrap();
        assert!(
            cursor.any_within(&wide),
            "a question below the last one starts over"
        );
    }

    /// Addresses in a few /24s of both families, so prefixes nest and overlap often.
    fn any_prefix() -> impl Strategy<Value = IpNet> {
        prop_oneof![
            (0u8..4, any::<u8>(), 16u8..=32).prop_map(|(c, d, len)| {
                IpNet::new(IpAddr::V4(Ipv4Addr::new(10, 0, c, d)), len).unwrap()
            }),
            (0u16..4, any::<u16>(), 112u8..=128).prop_map(|(c, d, len)| {
                let a = std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, c, d);
                IpNet::new(IpAddr::V6(a), len).unwrap()
            }),
        ]
    }
}
