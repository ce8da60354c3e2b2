//! Watches of Nodes, `NodePodCIDR`s and `PodCIDRPool`s folded into per-type caches.
//!
//! Each cache swaps in a relist only at `InitDone` (never a partial LIST), ignores no-op
//! updates (Node heartbeats), and tracks the highest resourceVersion seen so the loop can
//! wait until its own writes are visible before planning again.
//!
//! Nodes are watched as metadata only (`PartialObjectMetadata`): the allocator needs a
//! Node's name, UID, labels and `deletionTimestamp`, and a real Node object is 5-50 KB
//! (images, conditions). LISTs ask for [`LIST_PAGE`] objects per page: every page is a
//! request through the `--api-qps` bucket, so 500 per page (kube's default) would make the
//! first LIST of a 50,000-node cluster 200 requests, 8.5 s at 20 requests/s.

use std::collections::BTreeMap;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, ListSemantic};
use kube::{Client, Resource};

use super::kube_store;
use super::pool_sync::pool_from_crd;
use super::{NodeUid, ObservedNode, ObservedRecord, PodCidrPool};
use podcidr_api::{NodePodCIDR, PodCIDRPool, PodCIDRPoolStatus};

/// Objects of one type as last listed/watched, by name.
#[derive(Debug)]
pub(crate) struct Cache<V> {
    pub(crate) items: BTreeMap<String, V>,
    init: Option<BTreeMap<String, V>>,
    pub(crate) synced: bool,
    /// Highest object resourceVersion seen (numeric servers): our writes at or below it
    /// are visible in `items`.
    pub(crate) high_water: u64,
    init_high_water: u64,
}

impl<V> Default for Cache<V> {
    fn default() -> Self {
        Cache {
            items: BTreeMap::new(),
            init: None,
            synced: false,
            high_water: 0,
            init_high_water: 0,
        }
    }
}

pub(crate) fn rv_of<K: Resource>(o: &K) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

impl<V: PartialEq> Cache<V> {
    /// Applies one watch event; true if the visible state changed.
    pub(crate) fn apply<K: Resource>(&mut self, ev: Event<K>, conv: impl Fn(&K) -> V) -> bool {
        let name = |o: &K| o.meta().name.clone().unwrap_or_default();
        match ev {
            Event::Init => {
                // A relist: the watch could not resume, so events may be missing until
                // InitDone. Nothing is planned from the cache meanwhile.
                self.synced = false;
                self.init = Some(BTreeMap::new());
                self.init_high_water = 0;
                false
            }
            Event::InitApply(o) => {
                self.init_high_water = self.init_high_water.max(rv_of(&o));
                if let Some(m) = &mut self.init {
                    m.insert(name(&o), conv(&o));
                }
                false
            }
            Event::InitDone => {
                if let Some(m) = self.init.take() {
                    self.items = m;
                }
                self.synced = true;
                self.high_water = self.high_water.max(self.init_high_water);
                true
            }
            Event::Apply(o) => {
                self.high_water = self.high_water.max(rv_of(&o));
                let v = conv(&o);
                let n = name(&o);
                if self.items.get(&n) == Some(&v) {
                    return false;
                }
                self.items.insert(n, v);
                true
            }
            Event::Delete(o) => {
                self.high_water = self.high_water.max(rv_of(&o));
                self.items.remove(&name(&o)).is_some()
            }
        }
    }
}

impl<V> Cache<V> {
    /// A watch error: one after which kube's watcher relists (410 Gone after a compaction
    /// or a restarted watch cache) means events were missed, so the cache stops counting as
    /// synced now, not only at the relist's `Init`, which comes after the watcher's backoff.
    /// Returns whether it was such an error.
    pub(crate) fn watch_failed(&mut self, e: &watcher::Error) -> bool {
        let relists = match e {
            watcher::Error::WatchError(status) => status.code == 410,
            watcher::Error::NoResourceVersion => true,
            _ => false,
        };
        if relists {
            self.synced = false;
        }
        relists
    }

    /// Moves a part of every item out (in name order), leaving `take`'s placeholder.
    pub(crate) fn lend<T>(&mut self, take: impl FnMut(&mut V) -> T) -> Vec<T> {
        self.items.values_mut().map(take).collect()
    }

    /// Puts back what [`Cache::lend`] took; the items must not have changed in between.
    pub(crate) fn give_back<T>(&mut self, lent: Vec<T>, mut put: impl FnMut(&mut V, T)) {
        debug_assert_eq!(lent.len(), self.items.len());
        for (slot, v) in self.items.values_mut().zip(lent) {
            put(slot, v);
        }
    }
}

/// Placeholder while a node is lent to a pass (allocates nothing).
pub(crate) fn vacant_node() -> ObservedNode {
    ObservedNode {
        name: String::new(),
        uid: NodeUid(String::new()),
        labels: BTreeMap::new(),
        deleting: false,
    }
}

/// Placeholder while a record is lent to a pass (allocates nothing).
pub(crate) fn vacant_record() -> ObservedRecord {
    ObservedRecord {
        name: String::new(),
        owner_uid: NodeUid(String::new()),
        pod_cidrs: Vec::new(),
        resource_version: String::new(),
        allocated: None,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecordEntry {
    pub(crate) observed: ObservedRecord,
    pub(crate) uid: Option<String>,
    pub(crate) conditions: Vec<meta::Condition>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PoolEntry {
    pub(crate) spec: PodCidrPool,
    pub(crate) status: Option<PodCIDRPoolStatus>,
    pub(crate) generation: Option<i64>,
    pub(crate) uid: Option<String>,
}

/// Objects per LIST page: 50,000 Nodes (metadata only, ~1 KB each) and their records in
/// 10 pages each, within the default burst of 30.
pub(crate) const LIST_PAGE: u32 = 5000;

/// A Node as the allocator watches it: metadata only.
pub(crate) type NodeMeta = PartialObjectMeta<Node>;

pub(crate) fn observed_node(n: &NodeMeta) -> ObservedNode {
    ObservedNode {
        name: n.metadata.name.clone().unwrap_or_default(),
        uid: n.metadata.uid.clone().unwrap_or_default().as_str().into(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        deleting: n.metadata.deletion_timestamp.is_some(),
    }
}

pub(crate) fn record_entry(o: &NodePodCIDR) -> RecordEntry {
    RecordEntry {
        observed: kube_store::observed_record(o),
        uid: o.metadata.uid.clone(),
        conditions: o.status.clone().map(|s| s.conditions).unwrap_or_default(),
    }
}

pub(crate) fn pool_entry(o: &PodCIDRPool) -> PoolEntry {
    PoolEntry {
        spec: pool_from_crd(o),
        status: o.status.clone(),
        generation: o.metadata.generation,
        uid: o.metadata.uid.clone(),
    }
}

pub(crate) enum Ev {
    Node(Box<Result<Event<NodeMeta>, watcher::Error>>),
    Record(Result<Event<NodePodCIDR>, watcher::Error>),
    Pool(Result<Event<PodCIDRPool>, watcher::Error>),
}

pub(crate) fn watch_all(client: &Client) -> impl Stream<Item = Ev> + Send + use<> {
    // Quorum LISTs: this term must not start from a lagging cache.
    let cfg = watcher::Config::default()
        .list_semantic(ListSemantic::MostRecent)
        .page_size(LIST_PAGE);
    let nodes = watcher::watcher(Api::<NodeMeta>::all(client.clone()), cfg.clone())
        .default_backoff()
        .map(|e| Ev::Node(Box::new(e)));
    let records = watcher::watcher(Api::<NodePodCIDR>::all(client.clone()), cfg.clone())
        .default_backoff()
        .map(Ev::Record);
    let pools = watcher::watcher(Api::<PodCIDRPool>::all(client.clone()), cfg)
        .default_backoff()
        .map(Ev::Pool);
    futures::stream::select_all([nodes.boxed(), records.boxed(), pools.boxed()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn node(name: &str, rv: &str, deleting: bool) -> NodeMeta {
        use kube::core::PartialObjectMetaExt;
        ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some(rv.into()),
            deletion_timestamp: deleting.then(|| meta::Time(Default::default())),
            ..ObjectMeta::default()
        }
        .into_response_partial()
    }

    #[test]
    fn relist_swaps_at_init_done_and_no_op_updates_are_ignored() {
        let mut c: Cache<ObservedNode> = Cache::default();
        assert!(!c.apply(Event::Init, observed_node));
        assert!(!c.apply(Event::InitApply(node("a", "5", false)), observed_node));
        assert!(
            !c.synced && c.items.is_empty(),
            "a partial LIST is never visible"
        );
        assert!(c.apply(Event::InitDone, observed_node));
        assert!(c.synced && c.items.len() == 1 && c.high_water == 5);
        assert!(
            !c.apply(Event::Apply(node("a", "9", false)), observed_node),
            "heartbeat"
        );
        assert_eq!(c.high_water, 9);
        assert!(c.apply(Event::Apply(node("a", "10", true)), observed_node));
        assert!(c.items["a"].deleting);
        // A relist replaces everything at once: "a" is gone only after InitDone, and the
        // cache is not synced in between (events may be missing).
        c.apply(Event::Init, observed_node);
        c.apply(Event::InitApply(node("b", "12", false)), observed_node);
        assert!(c.items.contains_key("a") && !c.synced);
        c.apply(Event::InitDone, observed_node);
        assert!(!c.items.contains_key("a") && c.items.contains_key("b") && c.synced);
        assert!(c.apply(Event::Delete(node("b", "13", false)), observed_node));
        assert_eq!(c.high_water, 13);
    }

    #[test]
    fn a_410_unsyncs_the_cache_a_dropped_connection_does_not() {
        let mut c: Cache<ObservedNode> = Cache::default();
        c.apply(Event::Init, observed_node);
        c.apply(Event::InitDone, observed_node);
        let status = |code| {
            let mut s = kube::core::Status::failure("too old resource version", "Expired");
            s.code = code;
            Box::new(s)
        };
        assert!(!c.watch_failed(&watcher::Error::WatchError(status(500))));
        assert!(c.synced, "a resumable watch error keeps the cache");
        assert!(c.watch_failed(&watcher::Error::WatchError(status(410))));
        assert!(!c.synced, "410: events were missed");
    }

    #[test]
    fn lent_items_come_back_in_place() {
        let mut c: Cache<ObservedNode> = Cache::default();
        c.apply(Event::Init, observed_node);
        for (n, rv) in [("b", "2"), ("a", "1"), ("c", "3")] {
            c.apply(Event::InitApply(node(n, rv, false)), observed_node);
        }
        c.apply(Event::InitDone, observed_node);
        let before = c.items.clone();
        let lent = c.lend(|n| std::mem::replace(n, vacant_node()));
        let names: Vec<&str> = lent.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(c.items.values().all(|n| n.name.is_empty()));
        c.give_back(lent, |n, v| *n = v);
        assert_eq!(c.items, before);
    }
}
