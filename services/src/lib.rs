//! Which Service addresses one node announces, with which attributes, and why each address
//! that is not announced is not. Pure: Services, EndpointSlices, `BGPAdvertisement`s and the
//! node's own facts in, a [`Plan`] out; no client, no clock, no runtime. The speaker's core
//! turns the plan into routes, and `podcidr-bgp diff --services` prints the same plan for
//! every node, so the two can never disagree about a reason.
//!
//! - [`advertisement`]: a `BGPAdvertisement` read and checked, every error naming its field;
//! - [`service`]: what of a `Service` matters for announcing it;
//! - [`endpoints`]: which endpoints serve, chosen as kube-proxy chooses (KEP-1669);
//! - [`plan`]: the decision;
//! - [`planner`]: the same decision kept current one Service at a time;
//! - [`announced`]: whether a Service is announced from any node (the cluster's view, for
//!   its Events), and the Events' rate bound.

pub mod advertisement;
pub mod announced;
pub mod endpoints;
pub mod plan;
pub mod planner;
pub mod service;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use advertisement::{AddressKind, Advertisement, Origin};
pub use endpoints::{Endpoints, Serving};
pub use plan::{Announce, Drain, NodeFacts, PeerFacts, Plan, Reason, Row, plan, probe_targets};
pub use planner::Planner;
pub use service::{ServiceFacts, ServiceKey, TrafficPolicy};

/// The virtual labels a `serviceSelector` can match besides the Service's own.
pub const SERVICE_NAME_LABEL: &str = "podcidr.io/service-name";
pub const SERVICE_NAMESPACE_LABEL: &str = "podcidr.io/service-namespace";

/// The well-known label that keeps a node out of external load balancers: such a node
/// announces no LoadBalancer or ExternalIP address.
pub const EXCLUDE_FROM_EXTERNAL_LB_LABEL: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";

/// What changed in a speaker's view of the cluster's Services since its watch task last told
/// the core. Changes queued before the core reads them are merged ([`Changes::merge`]): the
/// latest value of each Service wins. The first `Changes` a core receives follows the first
/// list of every watched kind, so nothing is withdrawn for lack of an object.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// Every `BGPAdvertisement` that could be read, and those that could not with every
    /// problem; present when either changed.
    pub advertisements: Option<Advertisements>,
    /// `BGPPeer` labels by object name, for `spec.peers`; present when they changed.
    pub peer_labels: Option<BTreeMap<String, BTreeMap<String, String>>>,
    /// Services added or changed (`Some`, with their endpoints seen from this node) or gone
    /// (`None`).
    pub services: BTreeMap<ServiceKey, Option<(Arc<ServiceFacts>, Endpoints)>>,
}

/// The advertisements as read: the good ones, and by name the problems of the others.
#[derive(Debug, Clone, Default)]
pub struct Advertisements {
    pub read: Vec<Advertisement>,
    pub refused: BTreeMap<String, Vec<String>>,
}

impl Changes {
    /// `later` on top of `self`.
    pub fn merge(&mut self, later: Changes) {
        if later.advertisements.is_some() {
            self.advertisements = later.advertisements;
        }
        if later.peer_labels.is_some() {
            self.peer_labels = later.peer_labels;
        }
        self.services.extend(later.services);
    }
}

/// What of a Node decides whether its Service routes drain.
#[derive(Debug, Clone, Copy)]
pub struct NodeDrain<'a> {
    /// The Node is gone, or has a `deletionTimestamp`.
    pub deleted: bool,
    pub deleting: bool,
    /// `spec.taints` keys.
    pub taints: &'a [String],
    pub annotations: &'a BTreeMap<String, String>,
    /// The Ready condition's message while it is not `True`.
    pub not_ready: Option<&'a str>,
}

/// Why a node's Service routes drain now (`None`: they do not). The triggers: the taint or
/// annotation `podcidr.io/drain-services`, the Node deleted or being deleted, a removal taint
/// (the cluster autoscaler's, Karpenter's, out-of-service, cloud shutdown), kubelet's
/// graceful node shutdown. Never a plain cordon: that is maintenance, and the node still
/// serves. The speaker and `diff --services` both decide by this.
pub fn drain_trigger(node: NodeDrain<'_>) -> Option<String> {
    use podcidr_api::contract::{REMOVAL_TAINTS, SERVICE_DRAIN_KEY, SHUTDOWN_MESSAGE};
    if node.taints.iter().any(|t| t == SERVICE_DRAIN_KEY)
        || node
            .annotations
            .get(SERVICE_DRAIN_KEY)
            .is_some_and(|v| v == "true")
    {
        return Some(format!("the Node has {SERVICE_DRAIN_KEY}"));
    }
    if node.deleted {
        return Some("the Node was deleted".into());
    }
    if node.deleting {
        return Some("the Node is being deleted".into());
    }
    if let Some((key, what)) = REMOVAL_TAINTS
        .iter()
        .find(|(k, _)| node.taints.iter().any(|t| t == k))
    {
        return Some(format!("the Node has the taint {key}: {what}"));
    }
    if node.not_ready.is_some_and(|m| m.contains(SHUTDOWN_MESSAGE)) {
        return Some("kubelet is shutting the node down".into());
    }
    None
}
