//! The Service watch: Services, EndpointSlices, `BGPAdvertisement`s and `BGPPeer` labels, folded
//! into [`Inputs`] for the core. What it holds per object is what the decision needs, not the
//! object: per Service its [`ServiceFacts`], per EndpointSlice four counts as seen from this
//! node ([`Endpoints`]), per peer its labels. Decisions are `podcidr_services::plan`'s, in the
//! core.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use podcidr_api::{BGPAdvertisement, BGPPeer};
use podcidr_services::{Advertisement, Endpoints, Inputs, ServiceFacts, ServiceKey};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::watches::watch_all;

/// The label every EndpointSlice of a Service carries (`discovery.k8s.io/v1`).
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// One watched kind folded into what the decision needs, by `namespace/name`; a relist is
/// swapped in whole.
struct Fold<V> {
    items: BTreeMap<String, V>,
    relist: Option<BTreeMap<String, V>>,
    ready: bool,
}

impl<V> Fold<V> {
    fn new() -> Self {
        Fold {
            items: BTreeMap::new(),
            relist: None,
            ready: false,
        }
    }

    /// Folds one watch event with `read` (`None`: nothing to keep of it); whether anything
    /// changed.
    fn apply<K: kube::Resource>(
        &mut self,
        ev: Result<Event<K>, watcher::Error>,
        kind: &str,
        read: impl Fn(&K) -> Option<V>,
    ) -> bool {
        let key = |o: &K| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
        match ev {
            Ok(Event::Init) => {
                self.relist = Some(BTreeMap::new());
                false
            }
            Ok(Event::InitApply(o)) => {
                if let Some(v) = read(&o) {
                    self.relist.get_or_insert_default().insert(key(&o), v);
                }
                false
            }
            Ok(Event::InitDone) => {
                self.items = self.relist.take().unwrap_or_default();
                self.ready = true;
                true
            }
            Ok(Event::Apply(o)) => {
                match read(&o) {
                    Some(v) => self.items.insert(key(&o), v),
                    None => self.items.remove(&key(&o)),
                };
                true
            }
            Ok(Event::Delete(o)) => self.items.remove(&key(&o)).is_some(),
            Err(e) => {
                tracing::warn!(kind, error = %e, "watching for Service routes failed; keeping what is known");
                false
            }
        }
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

fn add(total: &mut Endpoints, e: &Endpoints) {
    total.local_ready = total.local_ready.saturating_add(e.local_ready);
    total.local_terminating = total.local_terminating.saturating_add(e.local_terminating);
    total.remote_ready = total.remote_ready.saturating_add(e.remote_ready);
    total.remote_terminating = total
        .remote_terminating
        .saturating_add(e.remote_terminating);
}

type ReadAdvertisement = Result<Advertisement, Vec<String>>;

/// The watches that exist only while some `BGPAdvertisement` does: a cluster that announces
/// no Service pays for no Service watch (5,000 speakers each watching every Service and
/// EndpointSlice is the control plane's cost of the feature, not of the product).
struct ServiceWatches {
    services: BoxStream<'static, Result<Event<Service>, watcher::Error>>,
    slices: BoxStream<'static, Result<Event<EndpointSlice>, watcher::Error>>,
    peers: BoxStream<'static, Result<Event<BGPPeer>, watcher::Error>>,
    service_fold: Fold<Arc<ServiceFacts>>,
    slice_fold: Fold<(ServiceKey, Endpoints)>,
    peer_fold: Fold<BTreeMap<String, String>>,
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
        }
    }

    /// The next event of any of them, folded; whether anything changed.
    async fn next(&mut self, node: &str) -> bool {
        tokio::select! {
            Some(ev) = self.services.next() => self.service_fold.apply(ev, "Service", |s| ServiceFacts::from_service(s).map(Arc::new)),
            Some(ev) = self.slices.next() => self.slice_fold.apply(ev, "EndpointSlice", |s| slice_counts(s, node)),
            Some(ev) = self.peers.next() => self.peer_fold.apply(ev, "BGPPeer", |p| Some(p.labels().clone())),
            else => std::future::pending().await,
        }
    }

    fn synced(&self) -> bool {
        self.service_fold.ready && self.slice_fold.ready && self.peer_fold.ready
    }

    /// Services with their endpoints summed over their slices, and the peers' labels.
    fn fill(&self, inputs: &mut Inputs) {
        let mut endpoints: BTreeMap<&ServiceKey, Endpoints> = BTreeMap::new();
        for (key, e) in self.slice_fold.items.values() {
            add(endpoints.entry(key).or_default(), e);
        }
        inputs.services = self
            .service_fold
            .items
            .values()
            .map(|s| {
                (
                    Arc::clone(s),
                    endpoints.get(&s.key).copied().unwrap_or_default(),
                )
            })
            .collect();
        // BGPPeer is cluster-scoped: its key is "/name".
        inputs.peer_labels = self
            .peer_fold
            .items
            .iter()
            .map(|(k, v)| (k.trim_start_matches('/').to_owned(), v.clone()))
            .collect();
    }
}

/// Starts the watches; the receiver holds `None` until what is needed is listed once.
pub fn spawn(
    client: Client,
    node_name: &str,
) -> (watch::Receiver<Option<Arc<Inputs>>>, JoinHandle<()>) {
    let node = node_name.to_owned();
    let (tx, rx) = watch::channel(None);
    let task = tokio::spawn(async move {
        let mut ads = watch_all(
            Api::<BGPAdvertisement>::all(client.clone()),
            watcher::Config::default(),
        );
        let mut ad_fold: Fold<ReadAdvertisement> = Fold::new();
        let mut rest: Option<ServiceWatches> = None;
        loop {
            let changed = tokio::select! {
                Some(ev) = ads.next() => ad_fold.apply(ev, "BGPAdvertisement", |a| Some(Advertisement::from_spec(&a.name_any(), &a.spec))),
                changed = async {
                    match rest.as_mut() {
                        Some(w) => w.next(&node).await,
                        None => std::future::pending().await,
                    }
                } => changed,
                () = tx.closed() => return,
            };
            if !changed || !ad_fold.ready {
                continue;
            }
            match (ad_fold.items.is_empty(), rest.is_some()) {
                (false, false) => {
                    tracing::info!("BGPAdvertisements exist: watching Services and EndpointSlices");
                    rest = Some(ServiceWatches::start(&client));
                    continue;
                }
                (true, true) => {
                    tracing::info!("no BGPAdvertisement left: no longer watching Services");
                    rest = None;
                }
                _ => {}
            }
            let mut inputs = Inputs {
                synced: true,
                ..Inputs::default()
            };
            if let Some(w) = &rest {
                if !w.synced() {
                    continue;
                }
                w.fill(&mut inputs);
            }
            for (key, ad) in &ad_fold.items {
                match ad {
                    Ok(a) => inputs.advertisements.push(a.clone()),
                    Err(problems) => {
                        inputs
                            .refused
                            .insert(key.trim_start_matches('/').to_owned(), problems.clone());
                    }
                }
            }
            tx.send_replace(Some(Arc::new(inputs)));
        }
    });
    (rx, task)
}
