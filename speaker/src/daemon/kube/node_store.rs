//! One configuration kind as a node runs it: the listing, and what the node keeps running
//! after an object leaves it (issue 30 item 2). Nothing is withdrawn by accident: an object
//! that disappears without `bgp.podcidr.io/allow-delete: "true"` is retained; one deleted on
//! purpose is withdrawn gracefully, after a deadline the loop arms; a kind that does not exist
//! at start runs what `--state-dir` kept.

use std::collections::BTreeMap;

use kube::runtime::watcher::{self, Event};
use tokio::time::Instant;

use crate::objects::{ObjectKind, Objects, deletion_allowed};
use crate::watches::Store;

/// The watch of one config kind as this node runs it: an object that leaves the listing
/// without `bgp.podcidr.io/allow-delete: "true"` (its CRD deleted, which bypasses the delete
/// guard; a relist after a watch gap) keeps running, retained; one deleted on purpose runs
/// on with GRACEFUL_SHUTDOWN until its deadline, then goes. The kind not existing at all at
/// start (404) is "nothing listed", and what `--state-dir` kept is retained.
pub(crate) struct NodeStore<K> {
    store: Store<K>,
    pub(crate) retained: BTreeMap<String, K>,
    /// Deadline `None` until the loop arms it with the config's gracefulShutdown.wait.
    pub(crate) withdrawing: BTreeMap<String, (K, Option<Instant>)>,
    /// The initial list found no such kind (404): the CRD is not installed.
    pub(crate) kind_gone: bool,
    seeded: bool,
}

impl<K: kube::Resource + Clone> NodeStore<K> {
    pub(crate) fn new() -> Self {
        NodeStore {
            store: Store::new(),
            retained: BTreeMap::new(),
            withdrawing: BTreeMap::new(),
            kind_gone: false,
            seeded: false,
        }
    }

    pub(crate) fn ready(&self) -> bool {
        self.store.ready
    }

    /// Whether anything changed.
    pub(crate) fn apply(&mut self, ev: Result<Event<K>, watcher::Error>, what: &str) -> bool {
        match ev {
            Ok(Event::Delete(o)) => {
                let name = o.meta().name.clone().unwrap_or_default();
                let Some(prior) = self.store.objects.remove(&name) else {
                    return false;
                };
                let on_purpose = deletion_allowed(&prior) || deletion_allowed(&o);
                self.vanished(name, prior, on_purpose, what);
                true
            }
            Ok(Event::InitDone) => {
                let before = self.store.objects.clone();
                let changed = self.store.apply(Ok(Event::InitDone), what);
                for (name, prior) in before {
                    if !self.store.objects.contains_key(&name) {
                        let on_purpose = deletion_allowed(&prior);
                        self.vanished(name, prior, on_purpose, what);
                    }
                }
                self.taken_over();
                changed
            }
            Ok(Event::Apply(o)) => {
                let changed = self.store.apply(Ok(Event::Apply(o)), what);
                self.taken_over();
                changed
            }
            // The path of a kind that is not served answers a bare 404 (no Status body).
            Err(watcher::Error::InitialListFailed(kube::Error::Api(s)))
                if s.code == 404 && !self.store.ready =>
            {
                tracing::warn!(
                    kind = what,
                    "the kind does not exist (its CRD is not installed): nothing is listed; what this node kept from before keeps running"
                );
                self.kind_gone = true;
                self.store.ready = true;
                true
            }
            other => self.store.apply(other, what),
        }
    }

    fn vanished(&mut self, name: String, prior: K, on_purpose: bool, what: &str) {
        if on_purpose {
            tracing::info!(kind = what, name = %name, "deleted on purpose (bgp.podcidr.io/allow-delete): withdrawing it gracefully (RFC 8326)");
            self.withdrawing.insert(name, (prior, None));
        } else {
            tracing::warn!(kind = what, name = %name, "gone from the API without bgp.podcidr.io/allow-delete: kept running, nothing is withdrawn by accident");
            self.retained.insert(name, prior);
        }
    }

    /// An object listed again under a retained or withdrawing name takes over.
    fn taken_over(&mut self) {
        let listed = &self.store.objects;
        self.retained.retain(|n, _| !listed.contains_key(n));
        self.withdrawing.retain(|n, _| !listed.contains_key(n));
    }

    /// With the kind gone at start: what the previous process kept runs on, retained.
    pub(crate) fn seed(&mut self, kept: &BTreeMap<String, K>) {
        if self.kind_gone && !self.seeded {
            self.seeded = true;
            for (name, o) in kept {
                self.retained
                    .entry(name.clone())
                    .or_insert_with(|| o.clone());
            }
        }
    }

    /// Gives each new withdrawal its deadline.
    pub(crate) fn arm(&mut self, deadline: Instant) {
        for (_, d) in self.withdrawing.values_mut() {
            d.get_or_insert(deadline);
        }
    }

    /// Drops the withdrawals whose wait is over; whether any was.
    pub(crate) fn expire(&mut self, now: Instant) -> bool {
        let before = self.withdrawing.len();
        self.withdrawing
            .retain(|_, (_, d)| d.is_none_or(|d| d > now));
        before != self.withdrawing.len()
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.withdrawing.values().filter_map(|(_, d)| *d).min()
    }

    /// Every object this node may run: listed, retained and withdrawing.
    pub(crate) fn all(&self) -> BTreeMap<String, K> {
        let mut all = self.store.objects.clone();
        for (n, o) in &self.retained {
            all.insert(n.clone(), o.clone());
        }
        for (n, (o, _)) in &self.withdrawing {
            all.insert(n.clone(), o.clone());
        }
        all
    }

    /// Records in `objects` which of this kind's names run retained or withdrawing.
    pub(crate) fn mark(&self, kind: ObjectKind, objects: &mut Objects) {
        let named = |n: &String| (kind, n.clone());
        objects.retained.extend(self.retained.keys().map(named));
        objects
            .withdrawing
            .extend(self.withdrawing.keys().map(named));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::runtime::watcher::{self, Event};
    use podcidr_api::BGPPeer;
    use tokio::time::{Duration, Instant};

    use super::NodeStore;

    fn peer(name: &str, allow_delete: Option<&str>) -> BGPPeer {
        let annotations = allow_delete
            .map(|v| format!(", annotations: {{bgp.podcidr.io/allow-delete: \"{v}\"}}"))
            .unwrap_or_default();
        serde_saphyr::from_str(&format!(
            "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPPeer\nmetadata: {{name: {name}{annotations}}}\nspec: {{address: 192.0.2.1, asn: 65000}}\n"
        ))
        .unwrap()
    }

    fn listed(store: &mut NodeStore<BGPPeer>, peers: &[BGPPeer]) {
        store.apply(Ok(Event::Init), "BGPPeer");
        for p in peers {
            store.apply(Ok(Event::InitApply(p.clone())), "BGPPeer");
        }
        store.apply(Ok(Event::InitDone), "BGPPeer");
    }

    fn names(m: &BTreeMap<String, BGPPeer>) -> Vec<&str> {
        m.keys().map(String::as_str).collect()
    }

    #[test]
    fn an_object_deleted_without_allow_delete_keeps_running_retained() {
        let mut store = NodeStore::new();
        listed(&mut store, &[peer("tor1", None), peer("tor2", None)]);
        // A CRD deletion deletes every object without admission: Delete events.
        assert!(store.apply(Ok(Event::Delete(peer("tor1", None))), "BGPPeer"));
        assert_eq!(names(&store.all()), ["tor1", "tor2"]);
        assert_eq!(names(&store.retained), ["tor1"]);
        // A relist that misses one (deleted during a watch gap): the same.
        listed(&mut store, &[]);
        assert_eq!(names(&store.retained), ["tor1", "tor2"]);
        // Created again: the new object takes over.
        store.apply(Ok(Event::Apply(peer("tor2", None))), "BGPPeer");
        assert_eq!(names(&store.retained), ["tor1"]);
        assert_eq!(names(&store.all()), ["tor1", "tor2"]);
    }

    #[test]
    fn an_object_deleted_with_allow_delete_is_withdrawn_after_the_wait() {
        let mut store = NodeStore::new();
        listed(&mut store, &[peer("tor1", None), peer("tor2", None)]);
        // Annotated (seen), then deleted.
        store.apply(Ok(Event::Apply(peer("tor1", Some("true")))), "BGPPeer");
        store.apply(Ok(Event::Delete(peer("tor1", Some("true")))), "BGPPeer");
        // "yes" is not "true".
        store.apply(Ok(Event::Apply(peer("tor2", Some("yes")))), "BGPPeer");
        store.apply(Ok(Event::Delete(peer("tor2", Some("yes")))), "BGPPeer");
        assert_eq!(store.withdrawing.keys().collect::<Vec<_>>(), ["tor1"]);
        assert_eq!(names(&store.retained), ["tor2"]);
        assert_eq!(store.next_deadline(), None, "armed by the loop");
        let t0 = Instant::now();
        store.arm(t0 + Duration::from_secs(15));
        assert!(!store.expire(t0 + Duration::from_secs(14)));
        assert_eq!(names(&store.all()), ["tor1", "tor2"]);
        assert!(store.expire(t0 + Duration::from_secs(15)));
        assert_eq!(names(&store.all()), ["tor2"]);
    }

    #[test]
    fn a_kind_that_does_not_exist_at_start_runs_what_was_kept() {
        let mut store: NodeStore<BGPPeer> = NodeStore::new();
        let not_found = kube::Error::Api(
            kube::core::Status::failure(
                "the server could not find the requested resource",
                "NotFound",
            )
            .with_code(404)
            .boxed(),
        );
        assert!(store.apply(Err(watcher::Error::InitialListFailed(not_found)), "BGPPeer"));
        assert!(store.ready() && store.kind_gone);
        let kept: BTreeMap<String, BGPPeer> = [("tor1".to_owned(), peer("tor1", None))].into();
        store.seed(&kept);
        assert_eq!(names(&store.retained), ["tor1"]);
        // Another error is no such thing: the store waits, as before.
        let mut other: NodeStore<BGPPeer> = NodeStore::new();
        let forbidden = kube::Error::Api(
            kube::core::Status::failure("forbidden", "Forbidden")
                .with_code(403)
                .boxed(),
        );
        other.apply(Err(watcher::Error::InitialListFailed(forbidden)), "BGPPeer");
        other.seed(&kept);
        assert!(!other.ready() && other.retained.is_empty());
    }
}
