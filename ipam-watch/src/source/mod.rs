//! Pod-CIDR sources: where a node's pod CIDRs come from.
//!
//! | [`SourceKind`] | reads | other view |
//! |---|---|---|
//! | `node-spec` | `Node.spec.podCIDRs` (legacy `spec.podCIDR`) | none |
//! | `ipam-crd` | `NodePodCIDR.spec.podCIDRs` | `Node.spec.podCIDRs` |
//! | `cilium-node` | `CiliumNode.spec.ipam.podCIDRs` (`cilium.io/v2`) | `Node.spec.podCIDRs` |
//! | `file` | a YAML file `{nodes: {<node>: [<cidr>, …]}}` | none |
//!
//! Layers: pure extractors (`desired_from_*`) turn one object into [`NodeCidrs`]; a generic
//! driver ([`run_node`], [`run_cluster`]) folds `watcher::Event` streams into the latest
//! [`DesiredSet`] / [`ClusterSet`] on a `tokio::sync::watch` channel; the [`PodCidrSource`]
//! implementations only wire real `kube` watchers (or the file poller) into that driver.

mod api;
mod dir_watch;
mod drive;
mod file;
mod parse;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use futures::future::BoxFuture;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use api::{CiliumNodeSource, IpamCrdSource, NodeSpecSource, cilium_node_resource, node_scope};
pub use drive::{NodeEvents, run_cluster, run_node};
pub use file::{FileError, FileSource, MAX_FILE_BYTES, parse_file, read_file};
pub use parse::{
    desired_from_cilium_node, desired_from_node, desired_from_node_pod_cidr, node_facts,
    parse_cidrs,
};

/// Which IPAM a speaker trusts for its pod CIDRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// `Node.spec.podCIDRs`, written by kube-controller-manager (host-scope IPAM).
    NodeSpec,
    /// `NodePodCIDR.spec.podCIDRs`, written by our allocator (cluster-pool IPAM).
    IpamCrd,
    /// `CiliumNode.spec.ipam.podCIDRs`, written by the Cilium operator.
    CiliumNode,
    /// A static YAML file.
    File,
}

impl SourceKind {
    /// Every kind, in documentation order.
    pub const ALL: [SourceKind; 4] = [Self::NodeSpec, Self::IpamCrd, Self::CiliumNode, Self::File];

    /// The configuration and metric-label spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NodeSpec => "node-spec",
            Self::IpamCrd => "ipam-crd",
            Self::CiliumNode => "cilium-node",
            Self::File => "file",
        }
    }

    /// Whether this source also reads `Node.spec.podCIDRs` to detect a [`SourceMismatch`].
    pub fn has_node_spec_view(self) -> bool {
        matches!(self, Self::IpamCrd | Self::CiliumNode)
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown source name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown pod-CIDR source {0:?} (expected node-spec, ipam-crd, cilium-node or file)")]
pub struct UnknownSourceKind(pub String);

impl FromStr for SourceKind {
    type Err = UnknownSourceKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownSourceKind(s.to_owned()))
    }
}

/// Why a CIDR string was excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InvalidReason {
    /// Not an `address/prefix` (or not a string at all).
    Unparseable,
    /// Bits set after the prefix, e.g. `10.0.0.1/24`.
    HostBitsSet,
    /// `/0`: a pod CIDR is never a default route.
    DefaultRoute,
    /// The same network appeared earlier in the list.
    Duplicate,
    /// The allocator marked the object `Allocated=False`, reason `Conflict`: another node
    /// holds the same CIDR, so announcing it would hijack that node's pods.
    Conflict,
}

impl InvalidReason {
    /// Stable label for metrics and status messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unparseable => "unparseable",
            Self::HostBitsSet => "host-bits-set",
            Self::DefaultRoute => "default-route",
            Self::Duplicate => "duplicate",
            Self::Conflict => "conflict",
        }
    }
}

impl fmt::Display for InvalidReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A CIDR value that was reported and excluded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InvalidCidr {
    /// The value as found on the object.
    pub value: String,
    /// Why it was excluded.
    pub reason: InvalidReason,
}

impl fmt::Display for InvalidCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.value, self.reason)
    }
}

/// The CIDRs one object assigns to one node, split into usable and excluded values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCidrs {
    /// Usable networks in object order (primary family first), without duplicates.
    pub valid: Vec<IpNet>,
    /// Values excluded from announcement, in object order.
    pub invalid: Vec<InvalidCidr>,
}

/// The chosen source and the Node's own `spec.podCIDRs` disagree (the classic outage).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceMismatch {
    /// Node name.
    pub node: String,
    /// What the chosen source says (and what gets announced).
    pub chosen: Vec<IpNet>,
    /// What `Node.spec.podCIDRs` says.
    pub node_spec: Vec<IpNet>,
}

/// Which of a source's watches an error or event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum View {
    /// The object kind the source trusts (Node, NodePodCIDR, CiliumNode or the file).
    Source,
    /// The Node object, read only to detect a [`SourceMismatch`].
    NodeSpec,
}

/// The latest failure of a watch or file load; the last known set stays published meanwhile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceError {
    /// Which watch failed.
    pub view: View,
    /// Human-readable cause.
    pub message: String,
}

/// What a speaker needs to know about its own Node besides its pod CIDRs: read from the same
/// watch as them (the Node is the source object, or its second view), so one change arrives
/// as one update.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFacts {
    pub uid: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// `spec.unschedulable`: cordoned or drained.
    pub unschedulable: bool,
    /// The first InternalIP of each family.
    pub internal_v4: Option<std::net::Ipv4Addr>,
    pub internal_v6: Option<std::net::Ipv6Addr>,
    /// `metadata.deletionTimestamp` is set: the Node is being deleted.
    #[serde(default)]
    pub deleting: bool,
    /// The watch saw the Node deleted (the other facts are its last state).
    #[serde(default)]
    pub deleted: bool,
    /// `spec.taints` keys, sorted (drain and removal markers such as
    /// `ToBeDeletedByClusterAutoscaler`).
    #[serde(default)]
    pub taints: Vec<String>,
    /// The `Ready` condition's message while it is not `True` (kubelet's graceful node
    /// shutdown says `node is shutting down`); `None` while Ready.
    #[serde(default)]
    pub not_ready: Option<String>,
}

/// What one node should announce, as published by a per-node source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesiredSet {
    /// The initial list has been processed; before that, nothing may be withdrawn.
    pub ready: bool,
    /// The node's full desired set (empty when its object is gone).
    pub cidrs: Vec<IpNet>,
    /// Values on the node's object that were excluded.
    pub invalid: Vec<InvalidCidr>,
    /// Set while the chosen source and `Node.spec.podCIDRs` disagree.
    pub mismatch: Option<SourceMismatch>,
    /// The latest watch failure or bad file. Cleared by the next event that proves delivery
    /// (an object event or a completed relist); a watch that resumes silently leaves it set.
    pub last_error: Option<SourceError>,
    /// The node's Node as last seen (kept when it is deleted or the watch fails); `None`
    /// until it is seen, and always for the `file` source.
    pub node: Option<NodeFacts>,
}

/// Every node's CIDRs, as published by a cluster-wide source (allocator, `diff`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSet {
    /// The initial list has been processed.
    pub ready: bool,
    /// Node name → CIDRs from the chosen source; nodes without an object are absent.
    pub nodes: BTreeMap<String, NodeCidrs>,
    /// Node name → disagreement with `Node.spec.podCIDRs`.
    pub mismatches: BTreeMap<String, SourceMismatch>,
    /// The latest watch failure or bad file (cleared as in [`DesiredSet::last_error`]).
    pub last_error: Option<SourceError>,
}

/// The future that keeps a source's channel up to date. Spawn it; it ends when every receiver
/// is gone (or when a finite test stream ends).
pub type Driver = BoxFuture<'static, ()>;

/// A pod-CIDR source: per-node for the speaker, cluster-wide for the allocator and `diff`.
pub trait PodCidrSource: fmt::Debug + Send + Sync {
    /// Which source this is.
    fn kind(&self) -> SourceKind;

    /// Watch only `node`'s objects (field selector `metadata.name=<node>`).
    fn watch_node(&self, node: &str) -> (watch::Receiver<Arc<DesiredSet>>, Driver);

    /// As [`PodCidrSource::watch_node`], with the events of `node`'s own Node from the
    /// caller's watch instead of a watch of the source's own: one watch of the Node can feed
    /// several readers (the speaker also needs the Node's labels). Sources without a Node
    /// view ignore them.
    fn watch_node_with(
        &self,
        node: &str,
        node_events: NodeEvents,
    ) -> (watch::Receiver<Arc<DesiredSet>>, Driver);

    /// Watch every node.
    fn watch_cluster(&self) -> (watch::Receiver<Arc<ClusterSet>>, Driver);
}

/// The mismatch rule: `Node.spec.podCIDRs` is set and differs (as a set) from the chosen CIDRs.
/// An empty Node spec is no signal: host-scope IPAM may simply be off.
pub fn mismatch(node: &str, chosen: &[IpNet], node_spec: &[IpNet]) -> Option<SourceMismatch> {
    use std::collections::BTreeSet;
    let same = chosen.iter().collect::<BTreeSet<_>>() == node_spec.iter().collect::<BTreeSet<_>>();
    (!node_spec.is_empty() && !same).then(|| SourceMismatch {
        node: node.to_owned(),
        chosen: chosen.to_vec(),
        node_spec: node_spec.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_kind_names_round_trip() {
        for kind in SourceKind::ALL {
            assert_eq!(kind.as_str().parse::<SourceKind>(), Ok(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
        }
        assert!("nodespec".parse::<SourceKind>().is_err());
    }

    #[test]
    fn only_crd_sources_have_a_node_spec_view() {
        let with: Vec<_> = SourceKind::ALL
            .into_iter()
            .filter(|k| k.has_node_spec_view())
            .collect();
        assert_eq!(with, [SourceKind::IpamCrd, SourceKind::CiliumNode]);
    }

    #[test]
    fn building_a_file_driver_needs_no_runtime() {
        let (rx, driver) = FileSource::new("/nonexistent").watch_node("node-a");
        assert!(!rx.borrow().ready);
        drop(driver);
    }
}
