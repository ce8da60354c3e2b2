//! Which Service addresses one node announces, with which attributes, and why each address
//! that is not announced is not. Pure: Services, EndpointSlices, `BGPAdvertisement`s and the
//! node's own facts in, a [`Plan`] out; no client, no clock, no runtime. The speaker's core
//! turns the plan into routes, and `podcidr-bgp diff --services` prints the same plan for
//! every node, so the two can never disagree about a reason.
//!
//! - [`advertisement`]: a `BGPAdvertisement` read and checked, every error naming its field;
//! - [`service`]: what of a `Service` matters for announcing it;
//! - [`endpoints`]: which endpoints serve, chosen as kube-proxy chooses (KEP-1669);
//! - [`plan`]: the decision.

pub mod advertisement;
pub mod endpoints;
pub mod plan;
pub mod service;

pub use advertisement::{AddressKind, Advertisement, Origin};
pub use endpoints::Endpoints;
pub use plan::{Announce, Drain, NodeFacts, PeerFacts, Plan, Reason, Row, plan};
pub use service::{ServiceFacts, ServiceKey, TrafficPolicy};

/// The virtual labels a `serviceSelector` can match besides the Service's own.
pub const SERVICE_NAME_LABEL: &str = "podcidr.io/service-name";
pub const SERVICE_NAMESPACE_LABEL: &str = "podcidr.io/service-namespace";

/// The well-known label that keeps a node out of external load balancers: such a node
/// announces no LoadBalancer or ExternalIP address.
pub const EXCLUDE_FROM_EXTERNAL_LB_LABEL: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";
