//! The speaker's own Node: labels and annotations (for peer nodeSelectors and a per-node
//! local AS), `spec.unschedulable` (graceful shutdown while cordoned), InternalIPs (for `nextHop: node`
//! and the default router ID) and UID (owner of the status object).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInfo {
    /// The Node was seen at least once.
    pub known: bool,
    pub uid: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// For `asn: {fromNodeAnnotation: …}`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.unschedulable` (cordoned or drained): routes carry GRACEFUL_SHUTDOWN.
    pub unschedulable: bool,
    pub internal_v4: Option<Ipv4Addr>,
    pub internal_v6: Option<Ipv6Addr>,
}

impl NodeInfo {
    pub fn from_node(node: &Node) -> Self {
        let internal: Vec<IpAddr> = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == "InternalIP")
            .filter_map(|a| a.address.parse().ok())
            .collect();
        NodeInfo {
            known: true,
            uid: node.uid(),
            labels: node.labels().clone(),
            annotations: node.annotations().clone(),
            unschedulable: node
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false),
            internal_v4: internal.iter().find_map(|a| match a {
                IpAddr::V4(v) => Some(*v),
                IpAddr::V6(_) => None,
            }),
            internal_v6: internal.iter().find_map(|a| match a {
                IpAddr::V6(v) => Some(*v),
                IpAddr::V4(_) => None,
            }),
        }
    }

    pub fn internal_ips(&self) -> Vec<IpAddr> {
        self.internal_v4
            .map(IpAddr::V4)
            .into_iter()
            .chain(self.internal_v6.map(IpAddr::V6))
            .collect()
    }
}

/// Watches only this node; keeps the last known info through API errors.
pub fn watch_node(
    client: Client,
    name: &str,
) -> (watch::Receiver<NodeInfo>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(NodeInfo::default());
    let api: Api<Node> = Api::all(client);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, cfg)
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(item) = stream.next().await {
            match item {
                Ok(node) => {
                    let info = NodeInfo::from_node(&node);
                    tx.send_if_modified(|cur| {
                        let changed = *cur != info;
                        *cur = info;
                        changed
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "watching the Node failed; keeping the last known labels and addresses")
                }
            }
        }
    });
    (rx, task)
}
