//! The Kubernetes-backed sources: thin wiring of `kube` watchers into [`run_node`] /
//! [`run_cluster`].

use std::fmt::Debug;
use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::drive::{NodeEvents, run_cluster, run_node};
use super::parse::{desired_from_cilium_node, desired_from_node, desired_from_node_pod_cidr};
use super::{ClusterSet, DesiredSet, Driver, NodeCidrs, PodCidrSource, SourceKind};
use podcidr_api::NodePodCIDR;

/// Watcher configuration for one node's objects (`metadata.name=<node>`), or for all objects.
/// Every kind here is cluster-scoped and named after its node, so one field selector fits all.
pub fn node_scope(node: Option<&str>) -> watcher::Config {
    match node {
        Some(node) => watcher::Config::default().fields(&format!("metadata.name={node}")),
        None => watcher::Config::default(),
    }
}

/// `cilium.io/v2` `CiliumNode`, for a `DynamicObject` API.
pub fn cilium_node_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cilium.io", "v2", "CiliumNode"),
        "ciliumnodes",
    )
}

/// A watcher with kube's default backoff, so a failing API is retried at a bounded rate.
fn events<K>(
    api: Api<K>,
    node: Option<&str>,
) -> BoxStream<'static, Result<Event<K>, watcher::Error>>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, node).boxed()
}

fn watcher<K>(
    api: Api<K>,
    node: Option<&str>,
) -> impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher::watcher(api, node_scope(node)).default_backoff()
}

fn node_events(client: &Client, node: Option<&str>) -> NodeEvents {
    events(Api::<Node>::all(client.clone()), node)
}

fn per_node<K>(
    node: &str,
    source: BoxStream<'static, Result<Event<K>, watcher::Error>>,
    extract: fn(&K) -> NodeCidrs,
    node_spec: Option<NodeEvents>,
) -> (watch::Receiver<Arc<DesiredSet>>, Driver)
where
    K: kube::Resource + Send + 'static,
{
    let (tx, rx) = watch::channel(Arc::default());
    let driver = run_node(node.to_owned(), source, extract, node_spec, tx);
    (rx, Box::pin(driver))
}

fn cluster<K>(
    source: BoxStream<'static, Result<Event<K>, watcher::Error>>,
    extract: fn(&K) -> NodeCidrs,
    node_spec: Option<NodeEvents>,
) -> (watch::Receiver<Arc<ClusterSet>>, Driver)
where
    K: kube::Resource + Send + 'static,
{
    let (tx, rx) = watch::channel(Arc::default());
    (rx, Box::pin(run_cluster(source, extract, node_spec, tx)))
}

/// `node-spec`: `Node.spec.podCIDRs`, as written by kube-controller-manager.
#[derive(Clone)]
pub struct NodeSpecSource {
    client: Client,
}

impl NodeSpecSource {
    /// A source reading Nodes through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Debug for NodeSpecSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeSpecSource")
    }
}

impl PodCidrSource for NodeSpecSource {
    fn kind(&self) -> SourceKind {
        SourceKind::NodeSpec
    }

    fn watch_node(&self, node: &str) -> (watch::Receiver<Arc<DesiredSet>>, Driver) {
        self.watch_node_with(node, node_events(&self.client, Some(node)))
    }

    fn watch_node_with(
        &self,
        node: &str,
        node_events: NodeEvents,
    ) -> (watch::Receiver<Arc<DesiredSet>>, Driver) {
        per_node(node, node_events, desired_from_node, None)
    }

    fn watch_cluster(&self) -> (watch::Receiver<Arc<ClusterSet>>, Driver) {
        cluster(node_events(&self.client, None), desired_from_node, None)
    }
}

/// `ipam-crd`: `NodePodCIDR.spec.podCIDRs` from our allocator; also watches the Node.
#[derive(Clone)]
pub struct IpamCrdSource {
    client: Client,
}

impl IpamCrdSource {
    /// A source reading `NodePodCIDR`s and Nodes through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Debug for IpamCrdSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IpamCrdSource")
    }
}

impl PodCidrSource for IpamCrdSource {
    fn kind(&self) -> SourceKind {
        SourceKind::IpamCrd
    }

    fn watch_node(&self, node: &str) -> (watch::Receiver<Arc<DesiredSet>>, Driver) {
        self.watch_node_with(node, node_events(&self.client, Some(node)))
    }

    fn watch_node_with(
        &self,
        node: &str,
        node_events: NodeEvents,
    ) -> (watch::Receiver<Arc<DesiredSet>>, Driver) {
        let source = events(Api::<NodePodCIDR>::all(self.client.clone()), Some(node));
        per_node(node, source, desired_from_node_pod_cidr, Some(node_events))
    }

    fn watch_cluster(&self) -> (watch::Receiver<Arc<ClusterSet>>, Driver) {
        let source = events(Api::<NodePodCIDR>::all(self.client.clone()), None);
        let node_spec = node_events(&self.client, None);
        cluster(source, desired_from_node_pod_cidr, Some(node_spec))
    }
}

/// `cilium-node`: `CiliumNode.spec.ipam.podCIDRs` (read untyped); also watches the Node.
#[derive(Clone)]
pub struct CiliumNodeSource {
    client: Client,
}

impl CiliumNodeSource {
    /// A source reading `CiliumNode`s and Nodes through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    fn api(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &cilium_node_resource())
    }
}

impl Debug for CiliumNodeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CiliumNodeSource")
    }
}

impl PodCidrSource for CiliumNodeSource {
    fn kind(&self) -> SourceKind {
        SourceKind::CiliumNode
    }

    fn watch_node(&self, node: &str) -> (watch::Receiver<Arc<DesiredSet>>, Driver) {
        self.watch_node_with(node, node_events(&self.client, Some(node)))
    }

    fn watch_node_with(
        &self,
        node: &str,
        node_events: NodeEvents,
    ) -> (watch::Receiver<Arc<DesiredSet>>, Driver) {
        let source = events(self.api(), Some(node));
        per_node(node, source, desired_from_cilium_node, Some(node_events))
    }

    fn watch_cluster(&self) -> (watch::Receiver<Arc<ClusterSet>>, Driver) {
        let node_spec = node_events(&self.client, None);
        cluster(
            events(self.api(), None),
            desired_from_cilium_node,
            Some(node_spec),
        )
    }
}
