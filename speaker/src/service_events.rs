//! Events on Services when their announcement first starts (`BGPAnnounced`: from no node to
//! at least one) or fully stops (`BGPWithdrawn`: from at least one to none), written by the
//! allocator's leader: only a cluster-wide view can tell, and 5,000 speakers must not each
//! write per-(node x Service) objects (NodeBGPStatus carries counts, `diff --services` the
//! detail).
//!
//! The decision is `podcidr_services::announced` (the speakers' `plan`, per node, with early
//! exit) and the rate bound `podcidr_services::announced::EventBound`; this module is the
//! watches and the clock. It watches Services, EndpointSlices, Nodes and BGPPeers (and
//! NodeBGPStatus only while some node has no BGPPeer selecting it, for the peers its speaker
//! names, as `diff --services` does) only while leading and while some BGPAdvertisement
//! exists, as the speakers do. What a new leader (or a fresh start) finds is recorded
//! without an Event.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use ipam_watch::allocator::{AllocatorMetrics, LeaderState, ServiceEventLabels};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::events::{Event as Publish, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use podcidr_api::{BGPAdvertisement, BGPPeer, NodeBGPStatus};
use podcidr_services::announced::{
    Announced, Decision, EventBound, NodeView, Scan, ServiceEndpoints, announced,
};
use podcidr_services::{Advertisement, Drain, NodeFacts, ServiceFacts, ServiceKey};
use tokio::sync::watch;

use crate::service_view::{draining, peers_of_node, reported_peers};
use crate::text::cut;
use crate::watches::watch_all;

/// `reportingController` of the Events.
pub const REPORTER: &str = "podcidr-bgp-service-events";
/// `reason` when a Service is announced from a first node.
pub const ANNOUNCED: &str = "BGPAnnounced";
/// `reason` when no node announces it any more.
pub const WITHDRAWN: &str = "BGPWithdrawn";
/// Changes are folded this long before the Services they touch are asked again (a rollout
/// of many pods, a relabelled rack): one pass, not one per watch event.
const SETTLE: Duration = Duration::from_secs(1);
/// Bound on one Event write.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Longest Event note the API accepts (bytes).
const NOTE_LIMIT: usize = 1024;
/// The label every EndpointSlice of a Service carries.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Runs until `leadership`'s sender is dropped; watches and writes only while leading.
pub async fn run(
    client: Client,
    mut leadership: watch::Receiver<LeaderState>,
    metrics: Arc<AllocatorMetrics>,
) {
    let reporter = Reporter {
        controller: REPORTER.into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    loop {
        if leading(&leadership) {
            tracing::info!("leading: watching BGPAdvertisements for Service Events");
            let mut term = Term::new(&client, &recorder, &metrics);
            if !term.run(&mut leadership).await {
                return;
            }
            tracing::info!("no longer leading: Service Events stop");
        }
        if leadership.changed().await.is_err() {
            return;
        }
    }
}

fn leading(leadership: &watch::Receiver<LeaderState>) -> bool {
    matches!(*leadership.borrow(), LeaderState::Leader { .. })
}

/// A watch's relist, folded: which keys the new list had, so the rest can go.
#[derive(Default)]
struct Relist {
    seen: Option<HashSet<String>>,
    ready: bool,
}

/// What one watch event asks of a store.
enum Step<K> {
    Upsert(String, K),
    Remove(String),
    /// A relist ended: keep only these keys.
    Keep(HashSet<String>),
    Nothing,
}

impl Relist {
    fn step<K: kube::Resource>(
        &mut self,
        ev: Result<Event<K>, watcher::Error>,
        kind: &str,
    ) -> Step<K> {
        let key = |o: &K| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
        match ev {
            Ok(Event::Init) => {
                self.seen = Some(HashSet::new());
                Step::Nothing
            }
            Ok(Event::InitApply(o)) => {
                let k = key(&o);
                self.seen.get_or_insert_default().insert(k.clone());
                Step::Upsert(k, o)
            }
            Ok(Event::InitDone) => {
                self.ready = true;
                Step::Keep(self.seen.take().unwrap_or_default())
            }
            Ok(Event::Apply(o)) => Step::Upsert(key(&o), o),
            Ok(Event::Delete(o)) => Step::Remove(key(&o)),
            Err(e) => {
                tracing::warn!(kind, error = %e, "watching for Service Events failed; keeping what is known");
                Step::Nothing
            }
        }
    }
}

type Stream<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

/// A Service as kept: what the decision reads and what an Event refers to.
struct Svc {
    facts: Arc<ServiceFacts>,
    uid: Option<String>,
}

/// A node as kept: its labels and drain (from the Node), the peer names its speaker
/// reports, and the view the decision reads (recomputed when any of them, or a BGPPeer,
/// changes).
#[derive(Default)]
struct NodeEntry {
    labels: BTreeMap<String, String>,
    draining: bool,
}

/// The cluster as the decision needs it.
#[derive(Default)]
struct ClusterView {
    services: HashMap<ServiceKey, Svc>,
    /// Slice key -> its Service and counts.
    slices: HashMap<String, (ServiceKey, ServiceEndpoints)>,
    slices_of: HashMap<ServiceKey, BTreeSet<String>>,
    endpoints: HashMap<ServiceKey, ServiceEndpoints>,
    nodes: BTreeMap<String, NodeEntry>,
    peers: BTreeMap<String, BGPPeer>,
    /// `peers`' values, for `peers_of_node`.
    peer_list: Vec<BGPPeer>,
    /// Node -> peer names its NodeBGPStatus names (kept only while watched).
    reported: BTreeMap<String, Vec<String>>,
    views: BTreeMap<String, NodeView>,
    /// Services to ask again at the next pass; `all` after a node, peer or advertisement
    /// change.
    dirty: HashSet<ServiceKey>,
    all: bool,
}

impl ClusterView {
    fn service(&mut self, step: Step<Service>) {
        match step {
            Step::Upsert(_, s) => {
                let Some(facts) = ServiceFacts::from_service(&s) else {
                    return self.remove_service(&key_of(&s));
                };
                let uid = s.uid();
                let same = self
                    .services
                    .get(&facts.key)
                    .is_some_and(|old| *old.facts == facts && old.uid == uid);
                if !same {
                    self.dirty.insert(facts.key.clone());
                    self.services.insert(
                        facts.key.clone(),
                        Svc {
                            facts: Arc::new(facts),
                            uid,
                        },
                    );
                }
            }
            Step::Remove(k) => self.remove_service(&parse_key(&k)),
            Step::Keep(seen) => {
                let gone: Vec<ServiceKey> = self
                    .services
                    .keys()
                    .filter(|k| !seen.contains(&k.to_string()))
                    .cloned()
                    .collect();
                for k in gone {
                    self.remove_service(&k);
                }
            }
            Step::Nothing => {}
        }
    }

    fn remove_service(&mut self, key: &ServiceKey) {
        if self.services.remove(key).is_some() {
            self.dirty.insert(key.clone());
        }
    }

    fn slice(&mut self, step: Step<EndpointSlice>) {
        match step {
            Step::Upsert(k, s) => {
                let Some(service) = s.labels().get(SERVICE_NAME_LABEL) else {
                    return self.remove_slice(&k);
                };
                let svc = ServiceKey {
                    namespace: s.namespace().unwrap_or_default(),
                    name: service.clone(),
                };
                let counts = ServiceEndpoints::from_slice(&s);
                if self.slices.get(&k) == Some(&(svc.clone(), counts.clone())) {
                    return;
                }
                self.remove_slice(&k);
                self.slices_of
                    .entry(svc.clone())
                    .or_default()
                    .insert(k.clone());
                self.slices.insert(k, (svc.clone(), counts));
                self.sum(&svc);
            }
            Step::Remove(k) => self.remove_slice(&k),
            Step::Keep(seen) => {
                let gone: Vec<String> = self
                    .slices
                    .keys()
                    .filter(|k| !seen.contains(*k))
                    .cloned()
                    .collect();
                for k in gone {
                    self.remove_slice(&k);
                }
            }
            Step::Nothing => {}
        }
    }

    fn remove_slice(&mut self, key: &str) {
        if let Some((svc, _)) = self.slices.remove(key) {
            if let Some(set) = self.slices_of.get_mut(&svc) {
                set.remove(key);
                if set.is_empty() {
                    self.slices_of.remove(&svc);
                }
            }
            self.sum(&svc);
        }
    }

    /// The Service's counts, summed again over its slices.
    fn sum(&mut self, svc: &ServiceKey) {
        let sum = ServiceEndpoints::sum(
            self.slices_of
                .get(svc)
                .into_iter()
                .flatten()
                .filter_map(|k| self.slices.get(k).map(|(_, c)| c)),
        );
        if sum == ServiceEndpoints::default() {
            self.endpoints.remove(svc);
        } else {
            self.endpoints.insert(svc.clone(), sum);
        }
        self.dirty.insert(svc.clone());
    }

    fn node(&mut self, step: Step<Node>) {
        match step {
            Step::Upsert(_, n) => {
                let name = n.name_any();
                let entry = NodeEntry {
                    labels: n.labels().clone(),
                    draining: draining(&n),
                };
                // Heartbeats and status changes are most Node updates: only labels and the
                // drain matter here.
                let same = self
                    .nodes
                    .get(&name)
                    .is_some_and(|o| o.labels == entry.labels && o.draining == entry.draining);
                if !same {
                    self.nodes.insert(name.clone(), entry);
                    self.view(&name);
                }
            }
            Step::Remove(k) => self.remove_node(k.trim_start_matches('/')),
            Step::Keep(seen) => {
                let gone: Vec<String> = self
                    .nodes
                    .keys()
                    .filter(|k| !seen.contains(&format!("/{k}")))
                    .cloned()
                    .collect();
                for k in gone {
                    self.remove_node(&k);
                }
            }
            Step::Nothing => {}
        }
    }

    fn remove_node(&mut self, name: &str) {
        if self.nodes.remove(name).is_some() {
            self.views.remove(name);
            self.all = true;
        }
    }

    fn peer(&mut self, step: Step<BGPPeer>) {
        match step {
            Step::Upsert(k, p) => {
                self.peers.insert(k, p);
            }
            Step::Remove(k) => {
                self.peers.remove(&k);
            }
            Step::Keep(seen) => self.peers.retain(|k, _| seen.contains(k)),
            Step::Nothing => return,
        }
        self.peer_list = self.peers.values().cloned().collect();
        self.views_again();
    }

    fn report(&mut self, step: Step<NodeBGPStatus>) {
        match step {
            Step::Upsert(_, r) => {
                let name = r.name_any();
                let names = r.status.as_ref().map(reported_peers).unwrap_or_default();
                if self.reported.get(&name) != Some(&names) {
                    self.reported.insert(name.clone(), names);
                    self.view(&name);
                }
            }
            Step::Remove(k) => {
                let name = k.trim_start_matches('/').to_owned();
                if self.reported.remove(&name).is_some() {
                    self.view(&name);
                }
            }
            Step::Keep(seen) => {
                self.reported.retain(|k, _| seen.contains(&format!("/{k}")));
                self.views_again();
            }
            Step::Nothing => {}
        }
    }

    fn views_again(&mut self) {
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        for n in names {
            self.view(&n);
        }
    }

    /// Recomputes one node's view; every Service is asked again if it changed.
    fn view(&mut self, name: &str) {
        let Some(entry) = self.nodes.get(name) else {
            return;
        };
        let view = NodeView {
            facts: NodeFacts {
                name: name.to_owned(),
                labels: entry.labels.clone(),
                drain: if entry.draining {
                    Drain::Withdrawn
                } else {
                    Drain::No
                },
                datapath: BTreeMap::new(),
            },
            peers: peers_of_node(
                &entry.labels,
                &self.peer_list,
                self.reported.get(name).cloned().unwrap_or_default(),
            ),
        };
        let changed = self.views.get(name).is_none_or(|old| {
            old.facts.labels != view.facts.labels
                || old.facts.drain != view.facts.drain
                || old.peers.len() != view.peers.len()
                || old
                    .peers
                    .iter()
                    .zip(&view.peers)
                    .any(|(a, b)| a.name != b.name || a.labels != b.labels)
        });
        if changed {
            self.views.insert(name.to_owned(), view);
            self.all = true;
        }
    }

    /// Some node has no BGPPeer selecting it: its peers are the ones its speaker reports.
    fn needs_reports(&self) -> bool {
        self.nodes
            .values()
            .any(|n| peers_of_node(&n.labels, &self.peer_list, Vec::new()).is_empty())
    }

    fn decide(&self, key: &ServiceKey, ads: &[Advertisement], scan: Scan) -> Option<Announced> {
        let svc = self.services.get(key)?;
        let none = ServiceEndpoints::default();
        let eps = self.endpoints.get(key).unwrap_or(&none);
        Some(announced(&svc.facts, eps, ads, &self.views, scan))
    }
}

fn key_of(s: &Service) -> ServiceKey {
    ServiceKey {
        namespace: s.namespace().unwrap_or_default(),
        name: s.name_any(),
    }
}

fn parse_key(k: &str) -> ServiceKey {
    let (namespace, name) = k.split_once('/').unwrap_or(("", k));
    ServiceKey {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

/// The watches that run only while some BGPAdvertisement exists.
struct Watches {
    services: Stream<Service>,
    slices: Stream<EndpointSlice>,
    nodes: Stream<Node>,
    peers: Stream<BGPPeer>,
    reports: Option<(Stream<NodeBGPStatus>, Relist)>,
    relists: [Relist; 4],
}

impl Watches {
    fn start(client: &Client) -> Self {
        let all = watcher::Config::default;
        Watches {
            services: watch_all(Api::all(client.clone()), all()),
            slices: watch_all(Api::all(client.clone()), all().labels(SERVICE_NAME_LABEL)),
            // Whole Nodes: the drain reads taints and annotations, not only labels.
            nodes: watch_all(Api::all(client.clone()), all()),
            peers: watch_all(Api::all(client.clone()), all()),
            reports: None,
            relists: Default::default(),
        }
    }

    fn synced(&self) -> bool {
        self.relists.iter().all(|r| r.ready) && self.reports.as_ref().is_none_or(|(_, r)| r.ready)
    }

    async fn next(&mut self, view: &mut ClusterView) {
        let [s, e, n, p] = &mut self.relists;
        tokio::select! {
            Some(ev) = self.services.next() => view.service(s.step(ev, "Service")),
            Some(ev) = self.slices.next() => view.slice(e.step(ev, "EndpointSlice")),
            Some(ev) = self.nodes.next() => view.node(n.step(ev, "Node")),
            Some(ev) = self.peers.next() => view.peer(p.step(ev, "BGPPeer")),
            Some(ev) = async {
                match self.reports.as_mut() {
                    Some((w, _)) => w.next().await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some((_, r)) = self.reports.as_mut() {
                    view.report(r.step(ev, "NodeBGPStatus"));
                }
            }
            else => std::future::pending().await,
        }
    }
}

enum Wake {
    /// Whether the sender is still there.
    Leadership(bool),
    Advertisement(Box<Result<Event<BGPAdvertisement>, watcher::Error>>),
    Folded,
    Tick,
}

/// One leadership term.
struct Term<'a> {
    client: &'a Client,
    recorder: &'a Recorder,
    metrics: &'a AllocatorMetrics,
    ads: BTreeMap<String, Option<Advertisement>>,
    ad_relist: Relist,
    watches: Option<Watches>,
    view: ClusterView,
    bound: EventBound<ServiceKey>,
    /// The next first sync is the term's start: recorded, not announced.
    silent: bool,
    /// The state has been recorded since the watches (re)started.
    known: bool,
    suppressed: u64,
}

impl<'a> Term<'a> {
    fn new(client: &'a Client, recorder: &'a Recorder, metrics: &'a AllocatorMetrics) -> Self {
        Term {
            client,
            recorder,
            metrics,
            ads: BTreeMap::new(),
            ad_relist: Relist::default(),
            watches: None,
            view: ClusterView::default(),
            bound: EventBound::new(),
            silent: true,
            known: false,
            suppressed: 0,
        }
    }

    /// Until leadership is lost (true) or its sender dropped (false).
    async fn run(&mut self, leadership: &mut watch::Receiver<LeaderState>) -> bool {
        let mut ads: Stream<BGPAdvertisement> =
            watch_all(Api::all(self.client.clone()), watcher::Config::default());
        let mut tick = tokio::time::interval(SETTLE);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // The branches only borrow; the work is done once the select has ended.
            let wake = tokio::select! {
                r = leadership.changed() => Wake::Leadership(r.is_ok()),
                Some(ev) = ads.next() => Wake::Advertisement(Box::new(ev)),
                () = async {
                    match self.watches.as_mut() {
                        Some(w) => w.next(&mut self.view).await,
                        None => std::future::pending().await,
                    }
                } => Wake::Folded,
                _ = tick.tick() => Wake::Tick,
            };
            match wake {
                Wake::Leadership(false) => return false,
                Wake::Leadership(true) if !leading(leadership) => return true,
                Wake::Leadership(true) | Wake::Folded => {}
                Wake::Advertisement(ev) => self.advertisement(*ev).await,
                Wake::Tick => {
                    if leadership.borrow().may_write() {
                        self.pass(Instant::now()).await;
                    }
                }
            }
        }
    }

    async fn advertisement(&mut self, ev: Result<Event<BGPAdvertisement>, watcher::Error>) {
        let read = |a: &BGPAdvertisement| Advertisement::from_spec(&a.name_any(), &a.spec).ok();
        match self.ad_relist.step(ev, "BGPAdvertisement") {
            Step::Upsert(k, a) => {
                self.ads.insert(k, read(&a));
            }
            Step::Remove(k) => {
                self.ads.remove(&k);
            }
            Step::Keep(seen) => self.ads.retain(|k, _| seen.contains(k)),
            Step::Nothing => return,
        }
        self.view.all = true;
        if !self.ad_relist.ready {
            return;
        }
        match (self.ads.is_empty(), self.watches.is_some()) {
            (false, false) => {
                tracing::info!(
                    "BGPAdvertisements exist: watching Services for their announcement Events"
                );
                self.watches = Some(Watches::start(self.client));
                self.known = false;
            }
            // Every announced Service is withdrawn now: the watches stay until that is said
            // (the end of `pass`), windows included.
            (true, true) | (false, true) => {}
            (true, false) => self.silent = false,
        }
    }

    /// Asks the Services whose inputs changed (all after a node, peer or advertisement
    /// change, and those whose window ended) and writes the Events due.
    async fn pass(&mut self, now: Instant) {
        let Some(w) = self.watches.as_mut() else {
            return;
        };
        // The speakers' report watch only while some node's peers come from it (asked again
        // only when a node, peer or advertisement changed).
        if self.view.all && w.relists[2].ready && w.relists[3].ready {
            match (self.view.needs_reports(), w.reports.is_some()) {
                (true, false) => {
                    w.reports = Some((
                        watch_all(Api::all(self.client.clone()), watcher::Config::default()),
                        Relist::default(),
                    ));
                }
                (false, true) => {
                    w.reports = None;
                    self.view.report(Step::Keep(HashSet::new()));
                }
                _ => {}
            }
        }
        if !(self.ad_relist.ready && w.synced()) {
            return;
        }
        let ads: Vec<Advertisement> = self.ads.values().flatten().cloned().collect();
        let keys: Vec<ServiceKey> = if self.view.all || !self.known {
            self.view.services.keys().cloned().collect()
        } else {
            let mut k: Vec<ServiceKey> = self.view.dirty.iter().cloned().collect();
            k.extend(self.bound.due(now));
            k
        };
        self.view.all = false;
        self.view.dirty.clear();
        if !self.known {
            self.known = true;
            if self.silent {
                self.silent = false;
                for k in &keys {
                    let state = self
                        .view
                        .decide(k, &ads, Scan::First)
                        .is_some_and(|a| a.anywhere());
                    self.bound.baseline(k.clone(), state);
                }
                tracing::info!(
                    services = keys.len(),
                    "Service announcement state recorded (no Events for what a new leader finds)"
                );
                return;
            }
        }
        for k in keys {
            let Some(state) = self.view.decide(&k, &ads, Scan::First) else {
                self.bound.forget(&k);
                continue;
            };
            match self.bound.observe(&k, state.anywhere(), now) {
                Decision::Emit => {
                    let full = self.view.decide(&k, &ads, Scan::All).unwrap_or_default();
                    let uid = self.view.services.get(&k).and_then(|s| s.uid.clone());
                    event(self.recorder, self.metrics, &k, uid, &full).await;
                }
                Decision::Quiet | Decision::Wait(_) | Decision::Suppressed => {}
            }
        }
        let more = self.bound.suppressed.saturating_sub(self.suppressed);
        if more > 0 {
            self.metrics.service_events_suppressed.inc_by(more);
            self.suppressed = self.bound.suppressed;
        }
        // No BGPAdvertisement left and every withdrawal said (none waits for its window):
        // the watches go, as the speakers' do.
        if self.ads.is_empty() && self.bound.next_due().is_none() {
            tracing::info!("no BGPAdvertisement left: no longer watching Services");
            self.watches = None;
            self.view = ClusterView::default();
            self.bound = EventBound::new();
            self.suppressed = 0;
            self.silent = false;
        }
    }
}

/// The Event of one transition, on the Service.
async fn event(
    recorder: &Recorder,
    metrics: &AllocatorMetrics,
    key: &ServiceKey,
    uid: Option<String>,
    a: &Announced,
) {
    let (reason, action, note) = if a.anywhere() {
        let addresses: Vec<String> = a.addresses.iter().map(ToString::to_string).collect();
        let nodes = if a.nodes == 1 { "node" } else { "nodes" };
        (
            ANNOUNCED,
            "Announce",
            format!(
                "announced from {} {nodes}: {}",
                a.nodes,
                addresses.join(", ")
            ),
        )
    } else {
        (
            WITHDRAWN,
            "Withdraw",
            format!(
                "withdrawn from every node: {}",
                a.why_not.as_deref().unwrap_or("not announced")
            ),
        )
    };
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Service".into()),
        namespace: Some(key.namespace.clone()),
        name: Some(key.name.clone()),
        uid,
        ..ObjectReference::default()
    };
    let publish = Publish {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(cut(&note, NOTE_LIMIT)),
        action: action.into(),
        secondary: None,
    };
    tracing::info!(service = %key, reason, %note, "Service announcement");
    match tokio::time::timeout(TIMEOUT, recorder.publish(&publish, &reference)).await {
        Ok(Ok(())) => {
            metrics
                .service_events
                .get_or_create(&ServiceEventLabels {
                    reason: reason.into(),
                })
                .inc();
        }
        Ok(Err(e)) => {
            tracing::warn!(service = %key, error = %e, "Service Event not published")
        }
        Err(_) => tracing::warn!(service = %key, "publishing a Service Event timed out"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn node(name: &str, rv: &str, labels: Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "resourceVersion": rv,
                                                   "labels": labels}}))
        .unwrap()
    }

    fn slice(name: &str, service: &str, nodes: &[&str]) -> EndpointSlice {
        let eps: Vec<Value> = nodes
            .iter()
            .map(|n| json!({"addresses": ["10.244.1.5"], "nodeName": n}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop",
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "endpoints": eps
        }))
        .unwrap()
    }

    fn key(name: &str) -> ServiceKey {
        ServiceKey {
            namespace: "shop".into(),
            name: name.into(),
        }
    }

    /// Most Node updates are heartbeats: they must not make 10,000 Services be asked again;
    /// a label change (a node leaving an advertisement's selector) must.
    #[test]
    fn a_node_heartbeat_asks_no_service_again_a_relabel_asks_all() {
        let mut v = ClusterView::default();
        v.node(Step::Upsert(
            "/a".into(),
            node("a", "1", json!({"rack": "r1"})),
        ));
        assert!(v.all, "a new node");
        v.all = false;
        v.node(Step::Upsert(
            "/a".into(),
            node("a", "2", json!({"rack": "r1"})),
        ));
        assert!(!v.all, "heartbeat");
        v.node(Step::Upsert(
            "/a".into(),
            node("a", "3", json!({"rack": "r2"})),
        ));
        assert!(v.all, "relabelled");
        v.all = false;
        v.node(Step::Keep(HashSet::new()));
        assert!(v.all && v.views.is_empty(), "gone from the relist");
    }

    #[test]
    fn endpoints_are_summed_over_a_services_slices_and_follow_a_slice_that_moves() {
        let mut v = ClusterView::default();
        v.slice(Step::Upsert("shop/w1".into(), slice("w1", "web", &["a"])));
        v.slice(Step::Upsert("shop/w2".into(), slice("w2", "web", &["b"])));
        let e = v.endpoints[&key("web")].endpoints("a");
        assert_eq!((e.local_ready, e.remote_ready), (1, 1));
        v.dirty.clear();
        // The same slice again: nothing to ask.
        v.slice(Step::Upsert("shop/w2".into(), slice("w2", "web", &["b"])));
        assert!(v.dirty.is_empty());
        // w2 now belongs to api: web keeps w1 only, both are asked again.
        v.slice(Step::Upsert("shop/w2".into(), slice("w2", "api", &["b"])));
        assert_eq!(v.endpoints[&key("web")].endpoints("a").remote_ready, 0);
        assert_eq!(v.endpoints[&key("api")].endpoints("b").local_ready, 1);
        assert!(v.dirty.contains(&key("web")) && v.dirty.contains(&key("api")));
        v.slice(Step::Remove("shop/w1".into()));
        assert!(!v.endpoints.contains_key(&key("web")), "served nowhere");
    }

    /// With a BGPPeer selecting every node the speakers' reports are not watched; a node no
    /// BGPPeer selects gets its peers from its report, as `diff --services` does.
    #[test]
    fn reports_are_needed_only_for_a_node_no_bgp_peer_selects() {
        let mut v = ClusterView::default();
        v.node(Step::Upsert(
            "/a".into(),
            node("a", "1", json!({"rack": "r1"})),
        ));
        v.node(Step::Upsert(
            "/b".into(),
            node("b", "1", json!({"rack": "r2"})),
        ));
        let peer: BGPPeer = serde_json::from_value(json!({
            "apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
            "metadata": {"name": "tor1"},
            "spec": {"address": "192.0.2.1", "asn": 65000,
                     "nodeSelector": {"matchLabels": {"rack": "r1"}}}
        }))
        .unwrap();
        v.peer(Step::Upsert("/tor1".into(), peer));
        assert!(v.needs_reports(), "b has no BGPPeer");
        assert!(v.views["b"].peers.is_empty());
        let report: NodeBGPStatus = serde_json::from_value(json!({
            "apiVersion": "podcidr.io/v1alpha1", "kind": "NodeBGPStatus",
            "metadata": {"name": "b"}, "spec": {"nodeName": "b"},
            "status": {"peers": [{"name": "tor2", "address": "192.0.2.2", "asn": 65000,
                                  "state": "Established"}]}
        }))
        .unwrap();
        v.all = false;
        v.report(Step::Upsert("/b".into(), report));
        assert_eq!(v.views["b"].peers[0].name, "tor2");
        assert!(v.all, "b's peers changed: every Service is asked again");
        v.node(Step::Upsert(
            "/b".into(),
            node("b", "2", json!({"rack": "r1"})),
        ));
        assert!(!v.needs_reports());
    }
}
