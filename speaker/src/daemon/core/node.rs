//! The speaker's own Node, as the core uses it: labels and annotations (peer nodeSelectors,
//! a per-node local AS), `spec.unschedulable` (graceful shutdown while cordoned), deletion,
//! taints and the Ready condition (whether a stop is a departure, see `core::departure`),
//! InternalIPs (`nextHop: node`, the default router ID) and UID (owner of what the speaker writes). The
//! facts arrive with the pod-CIDR source's set, from the same Node watch.

use std::collections::BTreeMap;
use std::net::IpAddr;

pub use ipam_watch::source::NodeFacts;

/// A Node nothing is known about yet (or, in file mode, never will be).
pub static UNKNOWN: NodeFacts = NodeFacts {
    uid: None,
    labels: BTreeMap::new(),
    annotations: BTreeMap::new(),
    unschedulable: false,
    internal_v4: None,
    internal_v6: None,
    deleting: false,
    deleted: false,
    taints: Vec::new(),
    not_ready: None,
};

/// The Node's InternalIPs, IPv4 first.
pub fn internal_ips(node: &NodeFacts) -> Vec<IpAddr> {
    node.internal_v4
        .map(IpAddr::V4)
        .into_iter()
        .chain(node.internal_v6.map(IpAddr::V6))
        .collect()
}
