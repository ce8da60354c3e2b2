//! Every custom resource of podcidr-bgp, types only (no client, no runtime): what `deploy/crds/`
//! is generated from ([`crds`]), and what the allocator, the speakers and the CLI read and write.
//!
//! - group `podcidr.io`, version `v1alpha1`: `PodCIDRPool` and `NodePodCIDR` for IPAM (this
//!   file), and `NodeBGPStatus`, the speaker's published report (`node_bgp_status.rs`);
//! - group `bgp.podcidr.io`, version `v1beta1`: the configuration kinds `BGPSpeakerConfig` and
//!   `BGPPeer`, with their CEL rules (`config.rs`), and `BGPAdvertisement` (Service routes).
//!
//! CIDRs are kept as strings in the types: one bad value must not make the whole object
//! undecodable (the watcher would fail for every object); parsing and reporting happen in
//! ipam-watch's sources and the allocator.

mod config;
mod node_bgp_status;
mod node_pod_cidr;
mod pod_cidr_pool;
mod schema;

pub use node_pod_cidr::*;
pub use pod_cidr_pool::*;

pub use config::{
    AddressFamilySpec, AdvertisedAddressSpec, AsnFromNodeSpec, AsnOverrideSpec, BGPAdvertisement,
    BGPAdvertisementSpec, BGPPeer, BGPPeerSpec, BGPSpeakerConfig, BGPSpeakerConfigSpec,
    BfdAuthTypeSpec, BfdAuthenticationSpec, BfdSpec, CONFIG_GROUP, CONFIG_VERSION, CniPluginSpec,
    CniSpec, ConfigObjectStatus, ConnectRetrySpec, EgressSpec, FamilySpec, ForwardingGateModeSpec,
    ForwardingGateSpec, GracefulRestartSpec, GracefulShutdownSpec, HealthCheckGateSpec,
    LocalAsnSpec, LogFormatSpec, LogLevelSpec, LogSpec, MinPrefixLengthSpec, NextHopSpec,
    NumberOrString, OBJECT_FILE_SOURCE_DIR, OriginSpec, RolloutSpec, RolloutStatus, SecretKeyRef,
    SourceKindSpec, SourceSpec, StatusSpec, config_condition, object_file_source_path_problem,
    rollout_state,
};

pub use node_bgp_status::{
    ConfigReport, HeldCidr, MAX_REPORTED_ROUTES, NodeBGPStatus, NodeBGPStatusSpec,
    NotificationReport, ObjectGeneration, ObjectNotApplied, PeerReport, RefusedCidr, RouteReport,
    ServiceRoutesReport, SpeakerReport,
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

    /// Taints that mark a node for removal, and what each says.
    pub const REMOVAL_TAINTS: &[(&str, &str)] = &[
        (
            "ToBeDeletedByClusterAutoscaler",
            "the cluster autoscaler is removing it",
        ),
        ("karpenter.sh/disrupted", "Karpenter is removing it"),
        ("karpenter.sh/disruption", "Karpenter is removing it"),
        (
            "node.kubernetes.io/out-of-service",
            "it is out of service (non-graceful node shutdown)",
        ),
        (
            "node.cloudprovider.kubernetes.io/shutdown",
            "its cloud instance is shut down",
        ),
    ];

    /// kubelet's graceful node shutdown sets the Node's Ready condition to False with this in
    /// its message (kubelet 1.21+, the `GracefulNodeShutdown` feature).
    pub const SHUTDOWN_MESSAGE: &str = "node is shutting down";

    /// The taint key or annotation (value `"true"`) that drains a node's Service routes
    /// (withdrawn after the RFC 8326 wait; sessions and pod CIDRs stay). Read by the speakers
    /// and `diff --services`.
    pub const SERVICE_DRAIN_KEY: &str = "podcidr.io/drain-services";
}

/// Condition types and reasons written to `status.conditions`.
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
        BGPAdvertisement::crd(),
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
