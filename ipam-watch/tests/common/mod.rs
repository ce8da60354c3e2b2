//! Helpers shared by the source tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use ipam_watch::source::DesiredSet;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, NodeSpec};
use kube::api::ObjectMeta;
use podcidr_api::{NodePodCIDR, NodePodCIDRSpec};
use tokio::sync::watch;

pub fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

pub fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|s| net(s)).collect()
}

/// A Node with `spec.podCIDRs`.
pub fn node(name: &str, cidrs: &[&str]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            pod_cidrs: Some(cidrs.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }),
        status: None,
    }
}

/// A NodePodCIDR for `name` (no pool).
pub fn npc(name: &str, cidrs: &[&str]) -> NodePodCIDR {
    NodePodCIDR::new(
        name,
        NodePodCIDRSpec {
            pod_cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
            pool: None,
        },
    )
}

/// Waits (at most `limit`) for a published set that satisfies `f`.
pub async fn until(
    rx: &mut watch::Receiver<Arc<DesiredSet>>,
    limit: Duration,
    what: &str,
    f: impl FnMut(&Arc<DesiredSet>) -> bool,
) -> Arc<DesiredSet> {
    tokio::time::timeout(limit, rx.wait_for(f))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .expect("driver alive")
        .clone()
}
