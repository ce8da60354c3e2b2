//! The stream-folding rules of the pod-CIDR sources, driven by fake `watcher::Event` streams.
//!
//! The driver future is polled by hand after each event (`now_or_never`), so every
//! intermediate published value is observed: a transient withdrawal could not hide in a
//! coalesced update, and nothing needs to sleep.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::FutureExt;
use ipam_watch::source::{
    ClusterSet, DesiredSet, InvalidCidr, InvalidReason, NodeEvents, SourceMismatch, View,
    desired_from_node, desired_from_node_pod_cidr, run_cluster, run_node,
};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher::{self, Event};
use podcidr_api::NodePodCIDR;
use tokio::sync::{mpsc, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::common;
use common::{nets, node, npc};

type Item<K> = Result<Event<K>, watcher::Error>;

/// A per-node driver fed step by step.
struct Harness<K> {
    source: mpsc::UnboundedSender<Item<K>>,
    node_spec: mpsc::UnboundedSender<Item<Node>>,
    rx: watch::Receiver<Arc<DesiredSet>>,
    driver: Pin<Box<dyn Future<Output = ()>>>,
    history: Vec<Arc<DesiredSet>>,
}

impl<K: kube::Resource + 'static> Harness<K> {
    fn new(
        node: &str,
        extract: fn(&K) -> ipam_watch::source::NodeCidrs,
        with_node_spec: bool,
    ) -> Self {
        let (source, source_rx) = mpsc::unbounded_channel();
        let (node_spec, node_spec_rx) = mpsc::unbounded_channel();
        let node_events: Option<NodeEvents> = with_node_spec
            .then(|| Box::pin(UnboundedReceiverStream::new(node_spec_rx)) as NodeEvents);
        let (tx, rx) = watch::channel(Arc::default());
        let driver = Box::pin(run_node(
            node.to_owned(),
            UnboundedReceiverStream::new(source_rx),
            extract,
            node_events,
            tx,
        ));
        let mut harness = Self {
            source,
            node_spec,
            rx,
            driver,
            history: Vec::new(),
        };
        harness.poll();
        harness
    }

    /// Let the driver consume everything queued; record what it published.
    fn poll(&mut self) -> Arc<DesiredSet> {
        assert!(
            self.driver.as_mut().now_or_never().is_none(),
            "driver ended early"
        );
        if self.rx.has_changed().unwrap() {
            self.history.push(self.rx.borrow_and_update().clone());
        }
        self.rx.borrow().clone()
    }

    fn send(&mut self, item: Item<K>) -> Arc<DesiredSet> {
        self.source.send(item).unwrap();
        self.poll()
    }

    fn send_node(&mut self, item: Item<Node>) -> Arc<DesiredSet> {
        self.node_spec.send(item).unwrap();
        self.poll()
    }
}

fn node_spec_harness(name: &str) -> Harness<Node> {
    Harness::new(name, desired_from_node, false)
}

fn ipam_harness(name: &str) -> Harness<NodePodCIDR> {
    Harness::new(name, desired_from_node_pod_cidr, true)
}

#[test]
fn not_ready_before_init_done() {
    let mut h = node_spec_harness("node-a");
    assert!(!h.poll().ready);
    assert!(!h.send(Ok(Event::Init)).ready);
    let set = h.send(Ok(Event::InitApply(node("node-a", &["10.5.112.0/24"]))));
    assert!(
        !set.ready && set.cidrs.is_empty(),
        "nothing before InitDone"
    );
    let set = h.send(Ok(Event::InitDone));
    assert!(set.ready);
    assert_eq!(set.cidrs, nets(&["10.5.112.0/24"]));
}

#[test]
fn initial_list_without_own_object_is_ready_and_empty() {
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    let set = h.send(Ok(Event::InitDone));
    assert!(set.ready);
    assert!(set.cidrs.is_empty());
}

#[test]
fn relist_does_not_withdraw() {
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(node("node-a", &["10.5.112.0/24"]))));
    h.send(Ok(Event::InitDone));
    let before = h.history.len();

    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(node("node-a", &["10.5.112.0/24"]))));
    h.send(Ok(Event::InitDone));
    assert_eq!(
        h.history.len(),
        before,
        "an identical relist publishes nothing"
    );

    h.send(Ok(Event::Init));
    let mid = h.send(Ok(Event::InitApply(node("node-a", &["10.5.113.0/24"]))));
    assert_eq!(
        mid.cidrs,
        nets(&["10.5.112.0/24"]),
        "old set until InitDone"
    );
    let after = h.send(Ok(Event::InitDone));
    assert_eq!(after.cidrs, nets(&["10.5.113.0/24"]), "swapped in one step");
    assert!(
        h.history.iter().all(|s| !s.ready || !s.cidrs.is_empty()),
        "no ready empty set was ever published: {:?}",
        h.history
    );
}

#[test]
fn relist_missing_own_object_withdraws_after_init_done() {
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(node("node-a", &["10.5.112.0/24"]))));
    h.send(Ok(Event::InitDone));
    assert_eq!(h.send(Ok(Event::Init)).cidrs, nets(&["10.5.112.0/24"]));
    assert!(h.send(Ok(Event::InitDone)).cidrs.is_empty());
}

#[test]
fn delete_of_own_object_withdraws() {
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(node("node-a", &["10.5.112.0/24"]))));
    h.send(Ok(Event::InitDone));
    let set = h.send(Ok(Event::Delete(node("node-a", &["10.5.112.0/24"]))));
    assert!(set.ready);
    assert!(set.cidrs.is_empty());
}

#[test]
fn watch_error_keeps_the_last_set() {
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(node("node-a", &["10.5.112.0/24"]))));
    h.send(Ok(Event::InitDone));
    let set = h.send(Err(watcher::Error::NoResourceVersion));
    assert!(set.ready);
    assert_eq!(set.cidrs, nets(&["10.5.112.0/24"]));
    let error = set.last_error.as_ref().expect("error reported");
    assert_eq!(error.view, View::Source);
    // The watcher restarts with Init: that alone does not prove recovery.
    assert!(h.send(Ok(Event::Init)).last_error.is_some());
    h.send(Ok(Event::InitApply(node("node-a", &["10.5.112.0/24"]))));
    let recovered = h.send(Ok(Event::InitDone));
    assert_eq!(recovered.last_error, None);
    assert_eq!(recovered.cidrs, nets(&["10.5.112.0/24"]));
}

#[test]
fn error_before_first_list_stays_not_ready() {
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    let set = h.send(Err(watcher::Error::NoResourceVersion));
    assert!(!set.ready);
    assert!(set.last_error.is_some());
}

#[test]
fn bad_cidr_is_reported_and_skipped() {
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(node(
        "node-a",
        &["10.5.112.0/24", "10.5.112.9/24", "nonsense"],
    ))));
    let set = h.send(Ok(Event::InitDone));
    assert_eq!(set.cidrs, nets(&["10.5.112.0/24"]));
    assert_eq!(
        set.invalid,
        vec![
            InvalidCidr {
                value: "10.5.112.9/24".into(),
                reason: InvalidReason::HostBitsSet
            },
            InvalidCidr {
                value: "nonsense".into(),
                reason: InvalidReason::Unparseable
            },
        ]
    );
}

#[test]
fn other_nodes_objects_are_ignored() {
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(node("node-b", &["10.5.113.0/24"]))));
    h.send(Ok(Event::InitDone));
    let set = h.send(Ok(Event::Apply(node("node-c", &["10.5.114.0/24"]))));
    assert!(set.ready && set.cidrs.is_empty());
    assert!(
        h.send(Ok(Event::Delete(node("node-b", &[]))))
            .cidrs
            .is_empty()
    );
}

#[test]
fn unchanged_update_does_not_wake_consumers() {
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(node("node-a", &["10.5.112.0/24"]))));
    h.send(Ok(Event::InitDone));
    let published = h.history.len();
    // Nodes change all the time (status, labels); only CIDR changes matter.
    h.send(Ok(Event::Apply(node("node-a", &["10.5.112.0/24"]))));
    assert_eq!(h.history.len(), published);
}

#[test]
fn mismatch_is_detected_and_cleared() {
    let mut h = ipam_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(npc("node-a", &["10.5.113.0/24"]))));
    let set = h.send(Ok(Event::InitDone));
    assert_eq!(
        set.mismatch, None,
        "no judgement before the Node view has listed"
    );

    h.send_node(Ok(Event::Init));
    h.send_node(Ok(Event::InitApply(node("node-a", &["10.5.112.0/24"]))));
    let set = h.send_node(Ok(Event::InitDone));
    assert_eq!(
        set.cidrs,
        nets(&["10.5.113.0/24"]),
        "the chosen source is announced"
    );
    assert_eq!(
        set.mismatch,
        Some(SourceMismatch {
            node: "node-a".into(),
            chosen: nets(&["10.5.113.0/24"]),
            node_spec: nets(&["10.5.112.0/24"]),
        })
    );

    let set = h.send_node(Ok(Event::Apply(node("node-a", &["10.5.113.0/24"]))));
    assert_eq!(set.mismatch, None);
    let set = h.send(Ok(Event::Apply(npc("node-a", &["10.5.114.0/24"]))));
    assert!(set.mismatch.is_some());
    let set = h.send(Ok(Event::Apply(npc("node-a", &["10.5.113.0/24"]))));
    assert_eq!(set.mismatch, None);
}

#[test]
fn mismatch_ignores_order_and_empty_node_spec() {
    let mut h = ipam_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(npc(
        "node-a",
        &["10.5.113.0/24", "fd00:5::/64"],
    ))));
    h.send(Ok(Event::InitDone));
    h.send_node(Ok(Event::Init));
    h.send_node(Ok(Event::InitApply(node("node-a", &[]))));
    assert_eq!(
        h.send_node(Ok(Event::InitDone)).mismatch,
        None,
        "host IPAM off"
    );
    let set = h.send_node(Ok(Event::Apply(node(
        "node-a",
        &["fd00:5::/64", "10.5.113.0/24"],
    ))));
    assert_eq!(set.mismatch, None, "same set, other order");
}

#[test]
fn node_view_error_is_reported_but_keeps_the_set() {
    let mut h = ipam_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(npc("node-a", &["10.5.113.0/24"]))));
    h.send(Ok(Event::InitDone));
    let set = h.send_node(Err(watcher::Error::NoResourceVersion));
    assert_eq!(set.cidrs, nets(&["10.5.113.0/24"]));
    assert_eq!(
        set.last_error.as_ref().map(|e| e.view),
        Some(View::NodeSpec)
    );
}

#[test]
fn driver_ends_when_every_receiver_is_gone() {
    let Harness {
        source,
        mut driver,
        rx,
        ..
    } = node_spec_harness("node-a");
    drop(rx);
    assert!(driver.as_mut().now_or_never().is_some());
    drop(source);
}

#[tokio::test]
async fn cluster_mode_maps_every_node_and_its_mismatch() {
    let source = futures::stream::iter(vec![
        Ok(Event::Init),
        Ok(Event::InitApply(npc("node-a", &["10.5.112.0/24"]))),
        Ok(Event::InitApply(npc("node-b", &["10.5.113.0/24", "bad"]))),
        Ok(Event::InitDone),
    ]);
    let nodes: NodeEvents = Box::pin(futures::stream::iter(vec![
        Ok(Event::Init),
        Ok(Event::InitApply(node("node-a", &["10.5.112.0/24"]))),
        Ok(Event::InitApply(node("node-b", &["10.5.200.0/24"]))),
        Ok(Event::InitApply(node("node-c", &["10.5.201.0/24"]))),
        Ok(Event::InitDone),
    ]));
    // Keep the source open until the Node view has been consumed too.
    let source = source.chain(futures::stream::pending());
    let (tx, mut rx) = watch::channel(Arc::<ClusterSet>::default());
    let driver = tokio::spawn(run_cluster(
        source,
        desired_from_node_pod_cidr,
        Some(nodes),
        tx,
    ));
    let set = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        rx.wait_for(|s| s.ready && s.mismatches.len() == 2),
    )
    .await
    .expect("cluster set published")
    .unwrap()
    .clone();
    driver.abort();
    assert_eq!(set.nodes.len(), 2);
    assert_eq!(set.nodes["node-a"].valid, nets(&["10.5.112.0/24"]));
    assert_eq!(set.nodes["node-b"].invalid.len(), 1);
    assert_eq!(set.mismatches["node-b"].node_spec, nets(&["10.5.200.0/24"]));
    assert_eq!(
        set.mismatches["node-c"].chosen,
        Vec::<IpNet>::new(),
        "a node with Node.spec CIDRs but no allocation disagrees too"
    );
    assert!(!set.mismatches.contains_key("node-a"));
}

fn labelled(name: &str, cidrs: &[&str], label: &str) -> Node {
    let mut n = node(name, cidrs);
    n.metadata.uid = Some(format!("uid-{name}"));
    n.metadata.labels = Some([("rack".to_owned(), label.to_owned())].into());
    n
}

/// One Node watch feeds both the CIDRs and the speaker's facts about its Node: a Node update
/// that changes both arrives as one published set (a second watch made them two unordered
/// updates, each running the speaker's whole pipeline).
#[test]
fn one_node_update_publishes_its_cidrs_and_its_facts_together() {
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(labelled(
        "node-a",
        &["10.5.112.0/24"],
        "r1",
    ))));
    let set = h.send(Ok(Event::InitDone));
    let facts = set.node.as_ref().expect("the Node's facts");
    assert_eq!(facts.uid.as_deref(), Some("uid-node-a"));
    assert_eq!(facts.labels.get("rack").map(String::as_str), Some("r1"));
    let before = h.history.len();
    let set = h.send(Ok(Event::Apply(labelled(
        "node-a",
        &["10.5.113.0/24"],
        "r2",
    ))));
    assert_eq!(h.history.len(), before + 1, "one update for both changes");
    assert_eq!(set.cidrs, nets(&["10.5.113.0/24"]));
    assert_eq!(set.node.as_ref().unwrap().labels["rack"], "r2");
    // Another node's object changes nothing; a deleted Node's facts are kept.
    h.send(Ok(Event::Apply(labelled(
        "node-b",
        &["10.5.114.0/24"],
        "r9",
    ))));
    let set = h.send(Ok(Event::Delete(labelled(
        "node-a",
        &["10.5.113.0/24"],
        "r2",
    ))));
    assert!(set.cidrs.is_empty());
    assert_eq!(set.node.as_ref().unwrap().labels["rack"], "r2");
    assert!(
        set.node.as_ref().unwrap().deleted,
        "a stop now is a departure"
    );
}

/// What says a node is leaving (the speaker's departure-or-restart choice at SIGTERM):
/// `deletionTimestamp`, taint keys, and the Ready condition's message while not Ready, but
/// not its heartbeat (which would wake the speaker on every status update).
#[test]
fn node_facts_carry_deletion_taints_and_the_not_ready_message() {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let mut h = node_spec_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(labelled("node-a", &[], "r1"))));
    let set = h.send(Ok(Event::InitDone));
    let facts = set.node.clone().unwrap();
    assert!(!facts.deleting && !facts.deleted && facts.taints.is_empty());
    assert_eq!(facts.not_ready, None);
    let leaving = |heartbeat: i64| {
        let mut n = labelled("node-a", &[], "r1");
        n.metadata.deletion_timestamp = Some(Time(chrono_at(0)));
        let spec = n.spec.get_or_insert_default();
        spec.taints = Some(
            [
                "ToBeDeletedByClusterAutoscaler",
                "a.example/b",
                "a.example/b",
            ]
            .iter()
            .map(|k| Taint {
                key: (*k).into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            })
            .collect(),
        );
        n.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "False".into(),
                reason: Some("KubeletNotReady".into()),
                message: Some("node is shutting down".into()),
                last_heartbeat_time: Some(Time(chrono_at(heartbeat))),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        });
        n
    };
    let set = h.send(Ok(Event::Apply(leaving(1))));
    let facts = set.node.clone().unwrap();
    assert!(facts.deleting);
    assert_eq!(
        facts.taints,
        ["ToBeDeletedByClusterAutoscaler", "a.example/b"]
    );
    assert_eq!(facts.not_ready.as_deref(), Some("node is shutting down"));
    let before = h.history.len();
    h.send(Ok(Event::Apply(leaving(2))));
    assert_eq!(
        h.history.len(),
        before,
        "a heartbeat alone publishes nothing"
    );
}

fn chrono_at(secs: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(secs).unwrap()
}

/// With a second view (ipam-crd), the Node's facts come from that view's watch.
#[test]
fn the_node_view_of_a_crd_source_carries_the_nodes_facts() {
    let mut h = ipam_harness("node-a");
    h.send(Ok(Event::Init));
    h.send(Ok(Event::InitApply(npc("node-a", &["10.5.113.0/24"]))));
    let set = h.send(Ok(Event::InitDone));
    assert!(set.node.is_none(), "not seen yet");
    h.send_node(Ok(Event::Init));
    h.send_node(Ok(Event::InitApply(labelled(
        "node-a",
        &["10.5.113.0/24"],
        "r1",
    ))));
    let set = h.send_node(Ok(Event::InitDone));
    assert_eq!(
        set.node.as_ref().unwrap().uid.as_deref(),
        Some("uid-node-a")
    );
    let set = h.send_node(Err(watcher::Error::NoResourceVersion));
    assert!(set.node.is_some(), "kept through a watch error");
}
