//! The Service watch: Services, EndpointSlices, `BGPAdvertisement`s and `BGPPeer` labels, folded
//! into [`Changes`] for the core. What it holds per object is what the decision needs, not the
//! object: per Service its [`ServiceFacts`], per EndpointSlice four counts as seen from this
//! node ([`Endpoints`]), per peer its labels. It tells the core about a Service only when what
//! a plan reads of it changed: its facts, or where it can be served ([`Endpoints::serving`]).
//! Most endpoint churn in a large cluster (a fifth replica becoming ready elsewhere) changes
//! neither and costs the core nothing. Decisions are `podcidr_services`', in the core.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use podcidr_api::{BGPAdvertisement, BGPPeer};
use podcidr_services::{
    Advertisement, Advertisements, Changes, Endpoints, ServiceFacts, ServiceKey,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::watches::watch_all;

/// The label every EndpointSlice of a Service carries (`discovery.k8s.io/v1`).
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// One watched kind folded into what the decision needs, by key; a relist is swapped in whole.
struct Fold<K, V> {
    items: BTreeMap<K, V>,
    relist: Option<BTreeMap<K, V>>,
    ready: bool,
}

/// What one watch event changed in a [`Fold`].
enum Touched<K, V> {
    Nothing,
    /// One object applied or deleted, with what was kept of it before.
    One(K, Option<V>),
    /// A relist replaced everything.
    All,
}

impl<K: Ord, V> Fold<K, V> {
    fn new() -> Self {
        Fold {
            items: BTreeMap::new(),
            relist: None,
            ready: false,
        }
    }

    /// Folds one watch event with `read` (`None`: nothing to keep of it).
    fn apply<O: kube::Resource>(
        &mut self,
        ev: Result<Event<O>, watcher::Error>,
        kind: &str,
        key: impl Fn(&O) -> K,
        read: impl Fn(&O) -> Option<V>,
    ) -> Touched<K, V> {
        match ev {
            Ok(Event::Init) => {
                self.relist = Some(BTreeMap::new());
                Touched::Nothing
            }
            Ok(Event::InitApply(o)) => {
                if let Some(v) = read(&o) {
                    self.relist.get_or_insert_default().insert(key(&o), v);
                }
                Touched::Nothing
            }
            Ok(Event::InitDone) => {
                self.items = self.relist.take().unwrap_or_default();
                self.ready = true;
                Touched::All
            }
            Ok(Event::Apply(o)) => {
                let k = key(&o);
                let old = match read(&o) {
                    Some(v) => self.items.insert(key(&o), v),
                    None => self.items.remove(&k),
                };
                Touched::One(k, old)
            }
            Ok(Event::Delete(o)) => {
                let k = key(&o);
                match self.items.remove(&k) {
                    Some(old) => Touched::One(k, Some(old)),
                    None => Touched::Nothing,
                }
            }
            Err(e) => {
                tracing::warn!(kind, error = %e, "watching for Service routes failed; keeping what is known");
                Touched::Nothing
            }
        }
    }
}

/// `namespace/name` of a namespaced object; cluster-scoped ones have an empty namespace.
fn object_key<O: kube::Resource>(o: &O) -> ServiceKey {
    ServiceKey {
        namespace: o.namespace().unwrap_or_default(),
        name: o.name_any(),
    }
}

/// The Service an EndpointSlice belongs to, and its endpoints seen from `node`.
fn slice_counts(slice: &EndpointSlice, node: &str) -> Option<(ServiceKey, Endpoints)> {
    let service = slice.labels().get(SERVICE_NAME_LABEL)?;
    let key = ServiceKey {
        namespace: slice.namespace().unwrap_or_default(),
        name: service.clone(),
    };
    Some((key, Endpoints::from_slices([slice], node)))
}

type ReadAdvertisement = Result<Advertisement, Vec<String>>;

/// What a watch event of the Service watches touched.
enum Affected {
    Nothing,
    Services(Vec<ServiceKey>),
    AllServices,
    Peers,
}

/// The watches that exist only while some `BGPAdvertisement` does: a cluster that announces
/// no Service pays for no Service watch (5,000 speakers each watching every Service and
/// EndpointSlice is the control plane's cost of the feature, not of the product).
struct ServiceWatches {
    services: BoxStream<'static, Result<Event<Service>, watcher::Error>>,
    slices: BoxStream<'static, Result<Event<EndpointSlice>, watcher::Error>>,
    peers: BoxStream<'static, Result<Event<BGPPeer>, watcher::Error>>,
    service_fold: Fold<ServiceKey, Arc<ServiceFacts>>,
    slice_fold: Fold<ServiceKey, (ServiceKey, Endpoints)>,
    peer_fold: Fold<ServiceKey, BTreeMap<String, String>>,
    /// Per Service, its slices' counts summed.
    sums: BTreeMap<ServiceKey, Endpoints>,
    /// What the core was last told of each Service.
    told: BTreeMap<ServiceKey, (Arc<ServiceFacts>, Endpoints)>,
}

impl ServiceWatches {
    fn start(client: &Client) -> Self {
        let all = watcher::Config::default;
        ServiceWatches {
            services: watch_all(Api::<Service>::all(client.clone()), all()),
            // Only slices that belong to a Service (the label the EndpointSlice controller
            // sets).
            slices: watch_all(
                Api::<EndpointSlice>::all(client.clone()),
                all().labels(SERVICE_NAME_LABEL),
            ),
            peers: watch_all(Api::<BGPPeer>::all(client.clone()), all()),
            service_fold: Fold::new(),
            slice_fold: Fold::new(),
            peer_fold: Fold::new(),
            sums: BTreeMap::new(),
            told: BTreeMap::new(),
        }
    }

    /// The next event of any of them, folded.
    async fn next(&mut self, node: &str) -> Affected {
        tokio::select! {
            Some(ev) = self.services.next() => self.on_service(ev),
            Some(ev) = self.slices.next() => self.on_slice(ev, node),
            Some(ev) = self.peers.next() => {
                match self.peer_fold.apply(ev, "BGPPeer", object_key, |p| Some(p.labels().clone())) {
                    Touched::Nothing => Affected::Nothing,
                    _ => Affected::Peers,
                }
            }
            else => std::future::pending().await,
        }
    }

    fn on_service(&mut self, ev: Result<Event<Service>, watcher::Error>) -> Affected {
        let read = |s: &Service| ServiceFacts::from_service(s).map(Arc::new);
        match self.service_fold.apply(ev, "Service", object_key, read) {
            Touched::Nothing => Affected::Nothing,
            Touched::One(key, _) => Affected::Services(vec![key]),
            Touched::All => Affected::AllServices,
        }
    }

    /// A slice's counts replace its old ones in its Service's sum.
    fn on_slice(
        &mut self,
        ev: Result<Event<EndpointSlice>, watcher::Error>,
        node: &str,
    ) -> Affected {
        let read = |s: &EndpointSlice| slice_counts(s, node);
        match self.slice_fold.apply(ev, "EndpointSlice", object_key, read) {
            Touched::Nothing => Affected::Nothing,
            Touched::One(key, old) => {
                let mut affected = Vec::new();
                if let Some((service, counts)) = old {
                    if let Some(sum) = self.sums.get_mut(&service) {
                        sum.subtract(&counts);
                    }
                    affected.push(service);
                }
                if let Some((service, counts)) = self.slice_fold.items.get(&key) {
                    self.sums.entry(service.clone()).or_default().add(counts);
                    affected.push(service.clone());
                }
                Affected::Services(affected)
            }
            Touched::All => {
                self.sums.clear();
                for (service, counts) in self.slice_fold.items.values() {
                    self.sums.entry(service.clone()).or_default().add(counts);
                }
                Affected::AllServices
            }
        }
    }

    fn synced(&self) -> bool {
        self.service_fold.ready && self.slice_fold.ready && self.peer_fold.ready
    }

    /// What the core must be told of `affected`: each Service whose facts or serving view
    /// changed since it was last told.
    fn changes(&mut self, affected: Affected, into: &mut Changes) {
        let keys: Vec<ServiceKey> = match affected {
            Affected::Nothing => return,
            Affected::Peers => {
                // BGPPeer is cluster-scoped: its key has no namespace.
                into.peer_labels = Some(
                    self.peer_fold
                        .items
                        .iter()
                        .map(|(k, v)| (k.name.clone(), v.clone()))
                        .collect(),
                );
                return;
            }
            Affected::Services(keys) => keys,
            Affected::AllServices => self
                .service_fold
                .items
                .keys()
                .chain(self.told.keys())
                .cloned()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect(),
        };
        for key in keys {
            let now = self.service_fold.items.get(&key).map(|facts| {
                let endpoints = self.sums.get(&key).copied().unwrap_or_default();
                (Arc::clone(facts), endpoints)
            });
            let same = match (self.told.get(&key), &now) {
                (None, None) => true,
                (Some((f0, e0)), Some((f1, e1))) => {
                    (Arc::ptr_eq(f0, f1) || f0 == f1) && e0.serving() == e1.serving()
                }
                _ => false,
            };
            if same {
                continue;
            }
            match &now {
                Some(v) => self.told.insert(key.clone(), v.clone()),
                None => self.told.remove(&key),
            };
            into.services.insert(key, now);
        }
    }
}

/// Starts the watches. The core hears nothing until every watched kind is listed once, then
/// every change.
pub fn spawn(
    client: Client,
    node_name: &str,
) -> (mpsc::UnboundedReceiver<Changes>, JoinHandle<()>) {
    let node = node_name.to_owned();
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut ads = watch_all(
            Api::<BGPAdvertisement>::all(client.clone()),
            watcher::Config::default(),
        );
        let mut ad_fold: Fold<ServiceKey, ReadAdvertisement> = Fold::new();
        let mut rest: Option<ServiceWatches> = None;
        // Changes not sent yet (before everything is listed), and whether anything was sent.
        let mut pending = Changes::default();
        let mut sent_once = false;
        loop {
            tokio::select! {
                Some(ev) = ads.next() => {
                    let touched = ad_fold.apply(ev, "BGPAdvertisement", object_key, |a| Some(Advertisement::from_spec(&a.name_any(), &a.spec)));
                    if matches!(touched, Touched::Nothing) || !ad_fold.ready {
                        continue;
                    }
                    match (ad_fold.items.is_empty(), rest.is_some()) {
                        (false, false) => {
                            tracing::info!("BGPAdvertisements exist: watching Services and EndpointSlices");
                            rest = Some(ServiceWatches::start(&client));
                        }
                        (true, true) => {
                            tracing::info!("no BGPAdvertisement left: no longer watching Services");
                            if let Some(w) = rest.take() {
                                pending.services.extend(w.told.into_keys().map(|k| (k, None)));
                            }
                            pending.peer_labels = Some(BTreeMap::new());
                        }
                        _ => {}
                    }
                    let mut read = Advertisements::default();
                    for (key, ad) in &ad_fold.items {
                        match ad {
                            Ok(a) => read.read.push(a.clone()),
                            Err(problems) => {
                                read.refused.insert(key.name.clone(), problems.clone());
                            }
                        }
                    }
                    pending.advertisements = Some(read);
                }
                affected = async {
                    match rest.as_mut() {
                        Some(w) => w.next(&node).await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Some(w) = rest.as_mut() {
                        w.changes(affected, &mut pending);
                    }
                }
                () = tx.closed() => return,
            }
            let synced = ad_fold.ready && rest.as_ref().is_none_or(ServiceWatches::synced);
            let empty = pending.advertisements.is_none()
                && pending.peer_labels.is_none()
                && pending.services.is_empty();
            if synced && (!empty || !sent_once) {
                sent_once = true;
                if tx.send(std::mem::take(&mut pending)).is_err() {
                    return;
                }
            }
        }
    });
    (rx, task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;
    use serde_json::json;

    fn watches() -> ServiceWatches {
        ServiceWatches {
            services: stream::empty().boxed(),
            slices: stream::empty().boxed(),
            peers: stream::empty().boxed(),
            service_fold: Fold::new(),
            slice_fold: Fold::new(),
            peer_fold: Fold::new(),
            sums: BTreeMap::new(),
            told: BTreeMap::new(),
        }
    }

    fn service() -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local"},
            "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}
        }))
        .unwrap()
    }

    /// A slice of `web` with one endpoint per (node, ready).
    fn slice(name: &str, endpoints: &[(&str, bool)]) -> EndpointSlice {
        let eps: Vec<_> = endpoints
            .iter()
            .map(|(node, ready)| {
                json!({"addresses": ["10.244.0.1"], "nodeName": node,
                                        "conditions": {"ready": ready}})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop",
                         "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": "IPv4", "endpoints": eps
        }))
        .unwrap()
    }

    /// Folds `ev` as `next` does and returns what the core would be told.
    fn told_after_slice(w: &mut ServiceWatches, ev: Event<EndpointSlice>) -> Vec<ServiceKey> {
        let affected = w.on_slice(Ok(ev), "node-a");
        let mut changes = Changes::default();
        w.changes(affected, &mut changes);
        changes.services.into_keys().collect()
    }

    #[test]
    fn endpoint_churn_that_does_not_change_where_a_service_is_served_tells_the_core_nothing() {
        let mut w = watches();
        let affected = w.on_service(Ok(Event::Apply(service())));
        let mut first = Changes::default();
        w.changes(affected, &mut first);
        assert_eq!(first.services.len(), 1, "the Service itself is news");
        // A ready endpoint elsewhere: now served anywhere, not here. News.
        let one = slice("web-1", &[("node-b", true)]);
        assert_eq!(told_after_slice(&mut w, Event::Apply(one)).len(), 1);
        // A second and a third replica elsewhere: nothing a plan reads has changed.
        let more = slice("web-1", &[("node-b", true), ("node-c", true)]);
        assert!(told_after_slice(&mut w, Event::Apply(more)).is_empty());
        let other_slice = slice("web-2", &[("node-d", true)]);
        assert!(told_after_slice(&mut w, Event::Apply(other_slice.clone())).is_empty());
        // A ready endpoint here: news (Local is now served here).
        let here = slice("web-3", &[("node-a", true)]);
        assert_eq!(
            told_after_slice(&mut w, Event::Apply(here.clone())).len(),
            1
        );
        // Gone again: news; the other slices' counts survive the subtraction.
        assert_eq!(told_after_slice(&mut w, Event::Delete(here)).len(), 1);
        assert!(told_after_slice(&mut w, Event::Delete(other_slice)).is_empty());
        let key = object_key(&service());
        assert_eq!(w.sums[&key].remote_ready, 2);
        assert_eq!(w.told[&key].1.serving(), w.sums[&key].serving());
    }
}
