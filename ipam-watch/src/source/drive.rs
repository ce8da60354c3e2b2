//! Folding `watcher::Event` streams into the published desired set.
//!
//! Rules, each guarded by a test in `tests/source_stream.rs`:
//! - not ready until the first `InitDone`;
//! - a relist (`Init` … `InitDone`) is buffered and swapped in whole, so it never withdraws
//!   transiently;
//! - a watch error only sets `last_error`; the last known set stays published;
//! - a `Delete` of the node's object withdraws its CIDRs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::stream::{BoxStream, Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use super::parse::{desired_from_node, node_facts};
use super::{ClusterSet, DesiredSet, NodeCidrs, NodeFacts, SourceError, View, mismatch};

/// Watch events for the Node objects that form a source's second view.
pub type NodeEvents = BoxStream<'static, Result<Event<Node>, watcher::Error>>;

/// One object reduced to what matters here.
#[derive(Debug, Clone)]
pub(super) struct Observed {
    pub name: String,
    pub cidrs: NodeCidrs,
    /// When the object is a Node, in per-node mode: its facts for the speaker.
    pub facts: Option<NodeFacts>,
}

/// A watch event (or failure) on one view, with the object already reduced.
pub(super) type Observation = (View, Result<Event<Observed>, String>);

/// One view (the source kind, or Node), folded from its events.
#[derive(Debug, Default)]
struct ViewState {
    objects: BTreeMap<String, NodeCidrs>,
    /// `Some` between `Init` and `InitDone`: the relist being collected.
    relist: Option<BTreeMap<String, NodeCidrs>>,
    ready: bool,
    last_error: Option<String>,
}

impl ViewState {
    /// Returns whether anything published could have changed.
    fn handle(&mut self, view: View, item: Result<Event<Observed>, String>) -> bool {
        let event = match item {
            Ok(event) => event,
            Err(message) => {
                tracing::warn!(?view, error = %message, "pod-CIDR watch failed; set kept");
                let changed = self.last_error.as_ref() != Some(&message);
                self.last_error = Some(message);
                return changed;
            }
        };
        // Init comes before the list request, so only later events prove the watch recovered.
        let recovered = !matches!(event, Event::Init) && self.last_error.take().is_some();
        if let Event::InitApply(o) | Event::Apply(o) = &event {
            self.log_invalid(view, o);
        }
        let changed = match event {
            Event::Init => {
                self.relist = Some(BTreeMap::new());
                false
            }
            Event::InitApply(o) => {
                self.relist.get_or_insert_default().insert(o.name, o.cidrs);
                false
            }
            Event::InitDone => {
                let relisted = self.relist.take().unwrap_or_default();
                let changed = !self.ready || relisted != self.objects;
                self.objects = relisted;
                self.ready = true;
                changed
            }
            Event::Apply(o) => {
                self.objects.get(&o.name) != Some(&o.cidrs) && {
                    self.objects.insert(o.name, o.cidrs);
                    true
                }
            }
            Event::Delete(o) => self.objects.remove(&o.name).is_some(),
        };
        changed || recovered
    }

    /// Warn when an object's excluded values change, not on every update of the object
    /// (Nodes are updated all the time for reasons unrelated to their CIDRs).
    fn log_invalid(&self, view: View, o: &Observed) {
        let before = self.objects.get(&o.name).map(|c| &c.invalid);
        if !o.cidrs.invalid.is_empty() && before != Some(&o.cidrs.invalid) {
            let invalid: Vec<String> = o.cidrs.invalid.iter().map(ToString::to_string).collect();
            tracing::warn!(?view, object = %o.name, ?invalid, "excluding invalid pod CIDRs");
        }
    }

    fn get(&self, node: &str) -> &[ipnet::IpNet] {
        self.objects.get(node).map_or(&[], |c| &c.valid)
    }
}

/// Both views of a source and the rules that combine them.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    source: ViewState,
    node_spec: ViewState,
    /// The node's Node as last seen, from whichever view watches Nodes (per-node mode).
    node: Option<NodeFacts>,
}

impl Tracker {
    fn handle(&mut self, (view, item): Observation) -> bool {
        // A Node's facts are kept through its deletion (marked `deleted`: a stop then is a
        // departure) and through watch errors.
        let facts_changed = match &item {
            Ok(Event::InitApply(o) | Event::Apply(o)) => match &o.facts {
                Some(f) if self.node.as_ref() != Some(f) => {
                    self.node = Some(f.clone());
                    true
                }
                _ => false,
            },
            Ok(Event::Delete(o)) => match &o.facts {
                Some(f) => {
                    let gone = NodeFacts {
                        deleted: true,
                        ..f.clone()
                    };
                    let changed = self.node.as_ref() != Some(&gone);
                    self.node = Some(gone);
                    changed
                }
                None => false,
            },
            _ => false,
        };
        let changed = match view {
            View::Source => self.source.handle(view, item),
            View::NodeSpec => self.node_spec.handle(view, item),
        };
        changed || facts_changed
    }

    /// The source's own error first: it is the one that matters for announcing.
    fn last_error(&self) -> Option<SourceError> {
        [
            (View::Source, &self.source),
            (View::NodeSpec, &self.node_spec),
        ]
        .into_iter()
        .find_map(|(view, state)| {
            let message = state.last_error.clone()?;
            Some(SourceError { view, message })
        })
    }

    /// A mismatch is judged only once both views have listed, so a slow Node watch cannot
    /// report a phantom disagreement.
    fn mismatch(&self, node: &str) -> Option<super::SourceMismatch> {
        (self.source.ready && self.node_spec.ready)
            .then(|| mismatch(node, self.source.get(node), self.node_spec.get(node)))
            .flatten()
    }

    pub(super) fn desired(&self, node: &str) -> DesiredSet {
        let object = self.source.objects.get(node);
        DesiredSet {
            ready: self.source.ready,
            cidrs: object.map(|o| o.valid.clone()).unwrap_or_default(),
            invalid: object.map(|o| o.invalid.clone()).unwrap_or_default(),
            mismatch: self.mismatch(node),
            last_error: self.last_error(),
            node: self.node.clone(),
        }
    }

    pub(super) fn cluster(&self) -> ClusterSet {
        let names: BTreeSet<&String> = self
            .source
            .objects
            .keys()
            .chain(self.node_spec.objects.keys())
            .collect();
        ClusterSet {
            ready: self.source.ready,
            nodes: self.source.objects.clone(),
            mismatches: names
                .into_iter()
                .filter_map(|name| Some((name.clone(), self.mismatch(name)?)))
                .collect(),
            last_error: self.last_error(),
        }
    }
}

/// Reduce a watcher stream of `K` to observations on `view`; in per-node mode objects of other
/// names are dropped, so a server that ignores the field selector cannot leak them in.
fn observe<K, S>(
    view: View,
    events: S,
    extract: fn(&K) -> NodeCidrs,
    only: Option<String>,
) -> impl Stream<Item = Observation>
where
    K: kube::Resource + 'static,
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
{
    let per_node = only.is_some();
    let keep = move |name: &str| only.as_deref().is_none_or(|n| n == name);
    events.filter_map(move |item| {
        let reduce = |object: K| Observed {
            name: object.name_any(),
            cidrs: extract(&object),
            // Whichever view watches Nodes gives the speaker its Node's facts.
            facts: per_node
                .then(|| {
                    (&object as &dyn std::any::Any)
                        .downcast_ref::<Node>()
                        .map(node_facts)
                })
                .flatten(),
        };
        let mapped = match item {
            Err(error) => Some(Err(error.to_string())),
            Ok(Event::Init) => Some(Ok(Event::Init)),
            Ok(Event::InitDone) => Some(Ok(Event::InitDone)),
            Ok(Event::InitApply(o)) => keep(&o.name_any()).then(|| Ok(Event::InitApply(reduce(o)))),
            Ok(Event::Apply(o)) => keep(&o.name_any()).then(|| Ok(Event::Apply(reduce(o)))),
            Ok(Event::Delete(o)) => keep(&o.name_any()).then(|| Ok(Event::Delete(reduce(o)))),
        };
        std::future::ready(mapped.map(|m| (view, m)))
    })
}

/// The source stream tagged, merged with the optional Node stream; ends when the source ends.
fn merge<K, S>(
    source: S,
    extract: fn(&K) -> NodeCidrs,
    node_spec: Option<NodeEvents>,
    only: Option<String>,
) -> impl Stream<Item = Observation>
where
    K: kube::Resource + 'static,
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
{
    let source = observe(View::Source, source, extract, only.clone())
        .map(Some)
        .chain(futures::stream::once(async { None }));
    let node_spec = match node_spec {
        Some(events) => observe(View::NodeSpec, events, desired_from_node, only).boxed(),
        None => futures::stream::empty().boxed(),
    };
    futures::stream::select(source, node_spec.map(Some))
        .take_while(|item| {
            let more = item.is_some();
            async move { more }
        })
        .filter_map(std::future::ready)
}

/// Feed observations into a tracker and publish through `tx` until the stream ends or every
/// receiver is gone.
pub(super) async fn drive<T, S, F>(events: S, tx: watch::Sender<Arc<T>>, view: F)
where
    T: PartialEq,
    S: Stream<Item = Observation>,
    F: Fn(&Tracker) -> T,
{
    let mut events = std::pin::pin!(events);
    let mut tracker = Tracker::default();
    loop {
        let observation = tokio::select! {
            () = tx.closed() => return,
            next = events.next() => match next {
                Some(observation) => observation,
                None => return,
            },
        };
        if tracker.handle(observation) {
            let value = view(&tracker);
            tx.send_if_modified(|current| {
                let modified = **current != value;
                if modified {
                    *current = Arc::new(value);
                }
                modified
            });
        }
    }
}

/// Per-node driver: fold `source` (and, for sources with a second view, the node's Node
/// watch) into `tx`. Objects not named `node` are ignored.
pub async fn run_node<K, S>(
    node: String,
    source: S,
    extract: fn(&K) -> NodeCidrs,
    node_spec: Option<NodeEvents>,
    tx: watch::Sender<Arc<DesiredSet>>,
) where
    K: kube::Resource + 'static,
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
{
    let events = merge(source, extract, node_spec, Some(node.clone()));
    drive(events, tx, |tracker| tracker.desired(&node)).await;
}

/// Cluster-wide driver: fold every object of `source` (and every Node) into `tx`.
pub async fn run_cluster<K, S>(
    source: S,
    extract: fn(&K) -> NodeCidrs,
    node_spec: Option<NodeEvents>,
    tx: watch::Sender<Arc<ClusterSet>>,
) where
    K: kube::Resource + 'static,
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
{
    drive(
        merge(source, extract, node_spec, None),
        tx,
        Tracker::cluster,
    )
    .await;
}

/// Snapshot events for a source that reloads everything at once (the file): a whole new set
/// is one relist.
pub(super) fn snapshot(objects: BTreeMap<String, NodeCidrs>) -> Vec<Observation> {
    let mut out = vec![(View::Source, Ok(Event::Init))];
    out.extend(objects.into_iter().map(|(name, cidrs)| {
        let observed = Observed {
            name,
            cidrs,
            facts: None,
        };
        (View::Source, Ok(Event::InitApply(observed)))
    }));
    out.push((View::Source, Ok(Event::InitDone)));
    out
}
