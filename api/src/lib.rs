//! Every custom resource of podcidr-bgp, types only (no client, no runtime): what `deploy/crds/`
//! is generated from ([`crds`]), and what the allocator, the speakers and the CLI read and write.
//!
//! - group `podcidr.io`, version `v1alpha1`: `PodCIDRPool` and `NodePodCIDR` for IPAM (this
//!   file), and `NodeBGPStatus`, the speaker's published report (`speaker.rs`);
//! - group `bgp.podcidr.io`, version `v1beta1`: the configuration kinds `BGPSpeakerConfig` and
//!   `BGPPeer`, with their CEL rules (`config.rs`).
//!
//! CIDRs are kept as strings in the types: one bad value must not make the whole object
//! undecodable (the watcher would fail for every object); parsing and reporting happen in
//! ipam-watch's sources and the allocator.

mod config;
mod schema;
mod speaker;

pub use config::{
    AddressFamilySpec, AsnFromNodeSpec, AsnOverrideSpec, BGPPeer, BGPPeerSpec, BGPSpeakerConfig,
    BGPSpeakerConfigSpec, BfdSpec, CONFIG_GROUP, CONFIG_VERSION, CniPluginSpec, CniSpec,
    ConfigObjectStatus, ConnectRetrySpec, FamilySpec, ForwardingGateSpec, GracefulRestartSpec,
    GracefulShutdownSpec, LocalAsnSpec, LogFormatSpec, LogLevelSpec, LogSpec, MinPrefixLengthSpec,
    NextHopSpec, NumberOrString, OBJECT_FILE_SOURCE_DIR, RolloutSpec, RolloutStatus, SecretKeyRef,
    SourceKindSpec, SourceSpec, StatusSpec, config_condition, object_file_source_path_problem,
    rollout_state,
};

pub use speaker::{
    ConfigReport, HeldCidr, MAX_REPORTED_ROUTES, NodeBGPStatus, NodeBGPStatusSpec,
    NotificationReport, ObjectGeneration, ObjectNotApplied, PeerReport, RefusedCidr, RouteReport,
    SpeakerReport,
};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube_core::{CustomResourceExt, Resource};
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of every podcidr-bgp custom resource.
pub const GROUP: &str = "podcidr.io";
/// The one served and stored version.
pub const VERSION: &str = "v1alpha1";

/// Condition types and reasons written to `status.conditions`.
/// What the speakers, the allocator and the CLI agree on besides the kinds' schemas: one
/// definition each, so a subcommand never reads another's module for them.
pub mod contract {
    use std::time::Duration;

    /// Label on every speaker Lease: `diff` lists Leases by it.
    pub const LEASE_LABEL: &str = "podcidr.io/speaker-lease";

    /// The namespace of the Secrets `BGPPeer.spec.passwordSecretRef` names when the speaker's
    /// own namespace is not known (the shipped install's).
    pub const DEFAULT_SECRET_NAMESPACE: &str = "podcidr-system";

    /// With nothing changed a speaker re-writes its `NodeBGPStatus` this often: an
    /// `updatedAt` much older than this, beside a live Lease, is a speaker whose status writes
    /// do not land (`diff` calls it stale after twice this). Liveness is the Lease's job, not
    /// this (a status write per node per minute was 80-170 writes/s into etcd at 5,000
    /// nodes, for nothing that changed).
    pub const STATUS_REFRESH: Duration = Duration::from_secs(3600);
}

pub mod condition {
    /// `PodCIDRPool`: the pool is valid and allocatable.
    pub const READY: &str = "Ready";
    /// `PodCIDRPool`: one of its CIDRs overlaps another pool of the same family.
    pub const OVERLAPPING: &str = "Overlapping";
    /// `PodCIDRPool`: a node is waiting for a CIDR this pool cannot give.
    pub const EXHAUSTED: &str = "Exhausted";
    /// `NodePodCIDR`: whether `spec.podCIDRs` holds a usable allocation.
    pub const ALLOCATED: &str = "Allocated";
    /// `NodePodCIDR`: the Node's own `spec.podCIDRs` disagree with ours.
    pub const SOURCE_MISMATCH: &str = "SourceMismatch";
}

/// Reasons of the `Allocated` condition on a `NodePodCIDR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllocatedReason {
    /// Every family the node needs has a CIDR (status `True`).
    Allocated,
    /// The allocator has not decided yet (status `Unknown`).
    Pending,
    /// A matching pool exists but has no free block (status `False`).
    PoolExhausted,
    /// No pool selects this node (status `False`).
    NoMatchingPool,
    /// The CIDR is also held by another node; excluded from BGP (status `False`).
    Conflict,
    /// `spec.podCIDRs` holds values that do not parse or are not canonical (status `False`).
    InvalidSpec,
}

impl AllocatedReason {
    /// The `reason` string written to the condition.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allocated => "Allocated",
            Self::Pending => "Pending",
            Self::PoolExhausted => "PoolExhausted",
            Self::NoMatchingPool => "NoMatchingPool",
            Self::Conflict => "Conflict",
            Self::InvalidSpec => "InvalidSpec",
        }
    }

    /// The condition `status` that goes with this reason.
    pub fn status(self) -> &'static str {
        match self {
            Self::Allocated => "True",
            Self::Pending => "Unknown",
            _ => "False",
        }
    }
}

impl std::fmt::Display for AllocatedReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cluster pool of pod CIDRs, split into one block per node and family.
// The lint mistakes repeated `type_ = "…"` inside separate `printcolumn(…)` for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "podcidr.io",
    version = "v1alpha1",
    kind = "PodCIDRPool",
    plural = "podcidrpools",
    shortname = "pcp",
    category = "podcidr",
    status = "PodCIDRPoolStatus",
    derive = "PartialEq",
    doc = "A pool of pod CIDRs that the podcidr-bgp allocator splits into one block per node \
           and family.",
    printcolumn(
        name = "IPv4",
        type_ = "string",
        json_path = ".spec.ipv4.cidrs",
        description = "IPv4 pool CIDRs"
    ),
    printcolumn(
        name = "V4Mask",
        type_ = "integer",
        json_path = ".spec.ipv4.maskSize",
        description = "IPv4 per-node prefix length"
    ),
    printcolumn(
        name = "IPv6",
        type_ = "string",
        json_path = ".spec.ipv6.cidrs",
        description = "IPv6 pool CIDRs"
    ),
    printcolumn(
        name = "V6Mask",
        type_ = "integer",
        json_path = ".spec.ipv6.maskSize",
        description = "IPv6 per-node prefix length"
    ),
    printcolumn(
        name = "V4Free",
        type_ = "integer",
        json_path = ".status.ipv4.free",
        description = "free IPv4 node blocks"
    ),
    printcolumn(
        name = "V6Free",
        type_ = "integer",
        json_path = ".status.ipv6.free",
        description = "free IPv6 node blocks"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Exhausted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Exhausted\")].status",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
// The apiserver rejects the obviously bad pools; the allocator still checks everything else
// (parsing, overlaps) and reports it as a condition.
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.ipv4) || has(self.ipv6)",
    "message": "a pool needs ipv4, ipv6 or both"
}]))]
pub struct PodCIDRPoolSpec {
    /// IPv4 part of the pool; absent for an IPv6-only pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.maskSize <= 32",
        "message": "an IPv4 maskSize is at most 32"
    }, {
        "rule": "self.cidrs.all(c, !c.contains(':'))",
        "message": "ipv4.cidrs holds IPv4 CIDRs only"
    }]))]
    pub ipv4: Option<PoolFamily>,
    /// IPv6 part of the pool; absent for an IPv4-only pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.cidrs.all(c, c.contains(':'))",
        "message": "ipv6.cidrs holds IPv6 CIDRs only"
    }]))]
    pub ipv6: Option<PoolFamily>,
    /// Nodes this pool serves; absent selects every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_selector")]
    pub node_selector: Option<LabelSelector>,
}

/// The CIDRs of one address family in a pool and the per-node block size.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolFamily {
    /// Pool CIDRs in canonical form, e.g. `10.5.112.0/21`.
    #[schemars(schema_with = "schema::pool_cidrs")]
    pub cidrs: Vec<String>,
    /// Prefix length of each node's block, e.g. `24` (IPv4) or `64` (IPv6).
    #[schemars(range(min = 1, max = 128))]
    pub mask_size: u8,
}

/// Observed state of a pool, written by the allocator.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodCIDRPoolStatus {
    /// IPv4 block counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<FamilyUsage>,
    /// IPv6 block counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<FamilyUsage>,
    /// `Ready`, `Overlapping`, `Exhausted`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
    /// The pool `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Node-block counts of one family. Counts saturate at `u64::MAX` (an IPv6 /0 split in /64s).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FamilyUsage {
    /// Node blocks the pool holds in total.
    #[serde(default)]
    pub capacity: u64,
    /// Node blocks assigned to live nodes.
    #[serde(default)]
    pub allocated: u64,
    /// Node blocks available now.
    #[serde(default)]
    pub free: u64,
    /// Released blocks still withheld until routers have forgotten them.
    #[serde(default)]
    pub quarantined: u64,
}

/// The pod CIDRs the allocator assigned to one node. Name = node name; owned by the Node.
#[allow(clippy::duplicated_attributes)] // see PodCIDRPoolSpec
#[derive(
    CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema,
)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "podcidr.io",
    version = "v1alpha1",
    kind = "NodePodCIDR",
    plural = "nodepodcidrs",
    shortname = "npc",
    category = "podcidr",
    status = "NodePodCIDRStatus",
    derive = "PartialEq",
    doc = "The pod CIDRs the podcidr-bgp allocator assigned to the node of the same name.",
    printcolumn(
        name = "PodCIDRs",
        type_ = "string",
        json_path = ".spec.podCIDRs",
        description = "allocated pod CIDRs, primary family first"
    ),
    printcolumn(name = "Pool", type_ = "string", json_path = ".spec.pool"),
    printcolumn(
        name = "Allocated",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Allocated\")].reason"
    ),
    printcolumn(
        name = "Mismatch",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"SourceMismatch\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct NodePodCIDRSpec {
    /// Pod CIDRs in canonical form, primary family first. Written only by the allocator.
    #[serde(rename = "podCIDRs", default)]
    #[schemars(schema_with = "schema::cidr_list")]
    pub pod_cidrs: Vec<String>,
    /// Name of the `PodCIDRPool` the CIDRs came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// Observed state of a node's allocation.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePodCIDRStatus {
    /// `Allocated` (reasons Allocated, Pending, PoolExhausted, NoMatchingPool, Conflict,
    /// InvalidSpec) and `SourceMismatch` (the Node's own spec.podCIDRs disagree).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

impl NodePodCIDR {
    /// A `NodePodCIDR` for `node`, named after it and owned by it, so it goes when the Node goes.
    pub fn for_node(node: &Node, spec: NodePodCIDRSpec) -> Self {
        let mut object = Self::new(node.meta().name.as_deref().unwrap_or_default(), spec);
        object.metadata.owner_references = node.owner_ref(&()).map(|r| vec![r]);
        object
    }
}

/// What GitOps tools and Helm read to never prune or delete an object on their own: the CRDs
/// (deleting one deletes every object of its kind: the IPAM record, the routing config) and
/// the configuration objects `config convert` and the examples write. Removing either is a
/// deliberate step (docs/operator-guide.md, "Removing routing configuration").
pub const KEEP_ANNOTATIONS: &[(&str, &str)] = &[
    (
        "argocd.argoproj.io/sync-options",
        "Delete=false,Prune=false",
    ),
    ("kustomize.toolkit.fluxcd.io/prune", "disabled"),
    ("helm.sh/resource-policy", "keep"),
];

/// [`KEEP_ANNOTATIONS`] as an object's annotations.
pub fn keep_annotations() -> std::collections::BTreeMap<String, String> {
    KEEP_ANNOTATIONS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Every CRD of this crate, in a fixed order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        PodCIDRPool::crd(),
        NodePodCIDR::crd(),
        NodeBGPStatus::crd(),
        BGPSpeakerConfig::crd(),
        BGPPeer::crd(),
    ];
    for crd in &mut crds {
        crd.metadata.annotations = Some(keep_annotations());
    }
    for version in crds.iter_mut().flat_map(|c| c.spec.versions.iter_mut()) {
        if let Some(props) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema::drop_null_from_enums(props);
            schema::kubernetes_integer_formats(props);
            schema::bound_every_list_and_string(props);
        }
    }
    crds
}

/// Header of each generated file under `deploy/crds/`.
pub const GENERATED_HEADER: &str = "# Generated from api/src/lib.rs; do not edit.\n\
     # Regenerate: UPDATE_CRDS=1 cargo test -p podcidr-api --test quick crds_in_sync\n";

/// All CRDs as one multi-document YAML string (`kubectl apply -f -` ready).
pub fn crds_yaml() -> Result<String, serde_saphyr::SerializeError> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}

/// The files under `deploy/crds/`: `(<crd name>.yaml, contents)`, one CRD each.
pub fn crd_files() -> Result<Vec<(String, String)>, serde_saphyr::SerializeError> {
    crds()
        .into_iter()
        .map(|crd| {
            let name = format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or_default());
            let yaml = serde_saphyr::to_string(&crd)?;
            Ok((name, format!("{GENERATED_HEADER}{yaml}")))
        })
        .collect()
}
