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
//! - [`announced`]: whether a Service is announced from any node (the cluster's view, for
//!   its Events), and the Events' rate bound.

pub mod advertisement;
pub mod announced;
pub mod endpoints;
pub mod plan;
pub mod service;

pub use advertisement::{AddressKind, Advertisement, Origin};
pub use endpoints::Endpoints;
pub use plan::{Announce, Drain, NodeFacts, PeerFacts, Plan, Reason, Row, plan, probe_targets};
pub use service::{ServiceFacts, ServiceKey, TrafficPolicy};

/// The virtual labels a `serviceSelector` can match besides the Service's own.
pub const SERVICE_NAME_LABEL: &str = "podcidr.io/service-name";
pub const SERVICE_NAMESPACE_LABEL: &str = "podcidr.io/service-namespace";

/// The well-known label that keeps a node out of external load balancers: such a node
/// announces no LoadBalancer or ExternalIP address.
pub const EXCLUDE_FROM_EXTERNAL_LB_LABEL: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";

/// What a speaker knows of the cluster's Services for its node, as its watch task hands it to
/// the core: every input of [`plan`] but the node's own facts and peers, which the core has.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Every watched kind has been listed once: before that nothing is withdrawn for lack of
    /// an object.
    pub synced: bool,
    pub advertisements: Vec<Advertisement>,
    /// `BGPAdvertisement`s that could not be read, with every problem.
    pub refused: std::collections::BTreeMap<String, Vec<String>>,
    /// Every Service with an address, with its endpoints as seen from this node.
    pub services: Vec<(std::sync::Arc<ServiceFacts>, Endpoints)>,
    /// `BGPPeer` labels by object name, for `spec.peers`.
    pub peer_labels: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
}
