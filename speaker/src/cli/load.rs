//! Reads what `diff`, `peers` and `routes` need from the API: one paginated list per kind,
//! each page reduced to what the commands read before the next page is fetched.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::PathBuf;
use std::time::Duration;

use ipam_watch::source::{
    InvalidReason, NodeCidrs, SourceKind, cilium_node_resource, desired_from_cilium_node,
    desired_from_node, desired_from_node_pod_cidr,
};
use ipnet::IpNet;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use podcidr_api::{NodeBGPStatusSpec, NodePodCIDR, SpeakerReport};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::DiffOptions;
use super::diff::{DiffInput, NodeInput};
use super::liveness::LeaseInput;
use podcidr_api::contract::LEASE_LABEL;

/// Why the API could not be read. `Display` is the message for stderr.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{kind} CRD not installed ({hint})")]
    CrdMissing {
        kind: &'static str,
        hint: &'static str,
    },
    #[error("listing {what}: forbidden ({message}); the account needs list on {what}")]
    Forbidden { what: &'static str, message: String },
    #[error("listing {what}: HTTP {code} {reason}: {message}")]
    Api {
        what: &'static str,
        code: u16,
        reason: String,
        message: String,
    },
    /// No HTTP answer at all (connection refused, TLS, DNS, ...).
    #[error("cannot reach the Kubernetes API{at} (listing {what}): {cause}")]
    Unreachable {
        what: &'static str,
        /// ` at <url>` once known.
        at: String,
        cause: String,
    },
    #[error("no answer from the Kubernetes API within {0:?} (--request-timeout)")]
    Timeout(Duration),
    #[error("{0}")]
    Config(String),
}

/// `--kubeconfig` / `--context`, kubectl style.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KubeArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Give up on the API after this many seconds.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = super::parse_duration)]
    pub request_timeout: u64,
}

impl KubeArgs {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout.max(1))
    }

    /// A client and the API server URL (for error messages).
    pub async fn client(&self) -> Result<(Client, String), LoadError> {
        let config = self.config().await?;
        let url = config.cluster_url.to_string();
        let client = Client::try_from(config).map_err(|e| LoadError::Config(e.to_string()))?;
        Ok((client, url.trim_end_matches('/').to_owned()))
    }

    async fn config(&self) -> Result<kube::Config, LoadError> {
        crate::process::kube_config_in_context(self.kubeconfig.as_deref(), self.context.as_deref())
            .await
            .map_err(|e| LoadError::Config(e.to_string()))
    }
}

const CRD_HINT: &str = "kubectl apply -k deploy/crds";

fn api_error(
    what: &'static str,
    crd: Option<(&'static str, &'static str)>,
) -> impl FnOnce(kube::Error) -> LoadError {
    move |e| match (&e, crd) {
        (kube::Error::Api(s), Some((kind, hint))) if s.code == 404 => {
            LoadError::CrdMissing { kind, hint }
        }
        (kube::Error::Api(s), _) if s.code == 403 => LoadError::Forbidden {
            what,
            message: s.message.clone(),
        },
        (kube::Error::Api(s), _) => LoadError::Api {
            what,
            code: s.code,
            reason: s.reason.clone(),
            message: s.message.clone(),
        },
        _ => LoadError::Unreachable {
            what,
            at: String::new(),
            cause: chain(&e),
        },
    }
}

/// An error and its sources, `: `-separated, skipping repeats (kube nests the same text).
fn chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = s.source();
    }
    parts.join(": ")
}

impl LoadError {
    /// Names the API server in an [`LoadError::Unreachable`] error.
    pub fn at(mut self, url: &str) -> Self {
        if let LoadError::Unreachable { at, .. } = &mut self {
            *at = format!(" at {url}");
        }
        self
    }
}

/// Objects per list request: the same page size kubectl uses. Every list is read page by
/// page and each page is reduced to what `diff` needs before the next is fetched, so memory
/// follows the cluster's pod CIDRs and reports, not the size of its Node objects.
pub const PAGE_SIZE: u32 = 500;

/// Folds every object of a kind into `acc`, one page at a time, following `continue` tokens.
async fn fold_pages<K, A>(
    api: &Api<K>,
    params: ListParams,
    mut acc: A,
    mut each: impl FnMut(&mut A, K),
) -> kube::Result<A>
where
    K: Clone + DeserializeOwned + Debug,
{
    let mut params = params.limit(PAGE_SIZE);
    loop {
        let page = api.list(&params).await?;
        for item in page.items {
            each(&mut acc, item);
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(acc),
        }
    }
}

/// Name (and namespace) only: a real Node's metadata carries managedFields, annotations and
/// labels `diff` never reads.
#[derive(Debug, Clone, Default, Deserialize)]
struct NameOnly {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

/// Declares a read-only view of a kind for `Api::list`: only the fields `diff` reads are
/// parsed (a Node's status, its images and conditions, is most of its bytes).
macro_rules! view {
    ($view:ident, $group:literal, $version:literal, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $view {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.meta
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.meta
            }
        }
    };
}

/// A Node's name and pod CIDRs.
#[derive(Debug, Clone, Default, Deserialize)]
struct NodeView {
    #[serde(default, rename = "metadata")]
    name_only: NameOnly,
    #[serde(default)]
    spec: Option<NodeSpecView>,
    #[serde(skip)]
    meta: ObjectMeta,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct NodeSpecView {
    #[serde(default, rename = "podCIDRs")]
    pod_cidrs: Option<Vec<String>>,
    #[serde(default, rename = "podCIDR")]
    pod_cidr: Option<String>,
}

view!(
    NodeView,
    "",
    "v1",
    "Node",
    "nodes",
    kube::core::ClusterResourceScope
);

impl NodeView {
    /// The Node source's reading (`spec.podCIDRs`, else the legacy `spec.podCIDR`).
    fn pod_cidrs(self) -> Vec<IpNet> {
        let spec = self.spec.map(|s| k8s_openapi::api::core::v1::NodeSpec {
            pod_cidrs: s.pod_cidrs,
            pod_cidr: s.pod_cidr,
            ..Default::default()
        });
        desired_from_node(&Node {
            spec,
            ..Node::default()
        })
        .valid
    }
}

/// A `NodeBGPStatus`'s name, node and report.
#[derive(Debug, Clone, Default, Deserialize)]
struct StatusView {
    #[serde(default, rename = "metadata")]
    name_only: NameOnly,
    #[serde(default)]
    spec: Option<NodeBGPStatusSpec>,
    #[serde(default)]
    status: Option<SpeakerReport>,
    #[serde(skip)]
    meta: ObjectMeta,
}

view!(
    StatusView,
    "podcidr.io",
    "v1alpha1",
    "NodeBGPStatus",
    "nodebgpstatuses",
    kube::core::ClusterResourceScope
);

/// A Lease's name, namespace and timing.
#[derive(Debug, Clone, Default, Deserialize)]
struct LeaseView {
    #[serde(default, rename = "metadata")]
    name_only: NameOnly,
    #[serde(default)]
    spec: Option<LeaseSpec>,
    #[serde(skip)]
    meta: ObjectMeta,
}

view!(
    LeaseView,
    "coordination.k8s.io",
    "v1",
    "Lease",
    "leases",
    kube::core::NamespaceResourceScope
);

fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// Every published speaker report, by node name.
pub async fn speaker_reports(
    client: &Client,
) -> Result<BTreeMap<String, SpeakerReport>, LoadError> {
    reports_as(client, |r| r).await
}

/// What `diff` reads of a report. The rest (conditions, counters, capabilities, route
/// attributes other than the next hop, notifications) is dropped as each page arrives: at
/// 5,000 nodes the full reports were half of `diff`'s heap.
fn for_diff(mut r: SpeakerReport) -> SpeakerReport {
    r.conditions = Vec::new();
    r.node_spec_pod_cidrs = Vec::new();
    r.speaker_version = String::new();
    for p in &mut r.peers {
        p.since = String::new();
        p.capabilities = Vec::new();
        p.prefixes_sent = BTreeMap::new();
        p.last_notification_sent = None;
        p.last_notification_received = None;
        for route in &mut p.routes {
            route.as_path = Vec::new();
            route.communities = Vec::new();
            route.large_communities = Vec::new();
        }
    }
    r
}

/// Every published speaker report, by node name, each passed through `keep`.
async fn reports_as(
    client: &Client,
    keep: fn(SpeakerReport) -> SpeakerReport,
) -> Result<BTreeMap<String, SpeakerReport>, LoadError> {
    let api: Api<StatusView> = Api::all(client.clone());
    fold_pages(&api, ListParams::default(), BTreeMap::new(), |acc, o| {
        let name = match o.name_only.name {
            Some(n) if !n.is_empty() => n,
            _ => o.spec.map(|s| s.node_name).unwrap_or_default(),
        };
        // An object without status never reported: it reads as stale (no updatedAt).
        acc.insert(name, keep(o.status.unwrap_or_default()));
    })
    .await
    .map_err(api_error(
        "nodebgpstatuses",
        Some(("NodeBGPStatus", CRD_HINT)),
    ))
}

/// The speaker Leases (label `podcidr.io/speaker-lease`) in `namespace`, by node name; never
/// from another namespace. Two Leases for one node: the later renewal counts.
pub async fn speaker_leases(
    client: &Client,
    namespace: &str,
) -> Result<BTreeMap<String, LeaseInput>, LoadError> {
    let api: Api<LeaseView> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(&format!("{LEASE_LABEL}=true"));
    fold_pages(
        &api,
        params,
        BTreeMap::new(),
        |acc: &mut BTreeMap<String, LeaseInput>, o| {
            let spec = o.spec.unwrap_or_default();
            let name = o.name_only.name.unwrap_or_default();
            let lease = LeaseInput {
                namespace: o.name_only.namespace.unwrap_or_default(),
                name: name.clone(),
                holder: spec.holder_identity,
                renewed_at: spec.renew_time.map(|t| t.0.as_second()),
                duration_secs: spec
                    .lease_duration_seconds
                    .and_then(|d| u64::try_from(d).ok()),
            };
            match acc.get(&name) {
                Some(have) if have.renewed_at >= lease.renewed_at => {}
                _ => {
                    acc.insert(name, lease);
                }
            }
        },
    )
    .await
    .map_err(api_error("leases", None))
}

/// Allocated CIDRs plus those the allocator excluded as conflicting (still claimed).
fn allocation(c: NodeCidrs) -> (Vec<IpNet>, bool) {
    let conflicting: Vec<IpNet> = c
        .invalid
        .iter()
        .filter(|i| i.reason == InvalidReason::Conflict)
        .filter_map(|i| i.value.parse().ok())
        .collect();
    let flagged = !conflicting.is_empty();
    let mut all = conflicting;
    all.extend(c.valid);
    (all, flagged)
}

/// Lists Nodes, the chosen IPAM objects, every `NodeBGPStatus` and every speaker Lease into
/// a [`DiffInput`], concurrently, page by page.
pub async fn load_input(
    client: &Client,
    options: &DiffOptions,
    now: i64,
) -> Result<DiffInput, LoadError> {
    let source = options.source;
    if source == SourceKind::File {
        return Err(LoadError::Config(
            "the file source has no cluster-wide view; use ipam-crd, node-spec or cilium-node"
                .to_owned(),
        ));
    }
    let nodes_api: Api<NodeView> = Api::all(client.clone());
    let nodes = async {
        fold_pages(&nodes_api, ListParams::default(), Vec::new(), |acc, n| {
            let name = n.name_only.name.clone().unwrap_or_default();
            acc.push((name, n.pod_cidrs()));
        })
        .await
        .map_err(api_error("nodes", None))
    };
    let (nodes, ipam, reports, leases) = tokio::join!(
        nodes,
        ipam_allocations(client, source),
        reports_as(client, for_diff),
        speaker_leases(client, &options.lease_namespace),
    );
    let (nodes, ipam, reports, leases) = (nodes?, ipam?, reports?, leases?);
    let mut by_name: BTreeMap<String, NodeInput> = BTreeMap::new();
    for (name, spec) in nodes {
        let n = slot(&mut by_name, &name);
        if source == SourceKind::NodeSpec {
            n.allocated = Some(spec.clone());
        }
        n.node_spec = Some(spec);
    }
    for (name, (cidrs, flagged)) in ipam {
        let n = slot(&mut by_name, &name);
        n.allocated = Some(cidrs);
        n.allocator_conflict = flagged;
    }
    for (name, report) in reports {
        slot(&mut by_name, &name).speaker = Some(report);
    }
    for (name, lease) in leases {
        slot(&mut by_name, &name).lease = Some(lease);
    }
    Ok(DiffInput {
        source,
        nodes: by_name.into_values().collect(),
        now,
        stale_after_secs: options.stale_after_secs,
    })
}

fn slot<'a>(m: &'a mut BTreeMap<String, NodeInput>, name: &str) -> &'a mut NodeInput {
    m.entry(name.to_owned()).or_insert_with(|| NodeInput {
        name: name.to_owned(),
        ..NodeInput::default()
    })
}

/// Node name → (allocated CIDRs, allocator-marked conflict) from the chosen IPAM kind.
async fn ipam_allocations(
    client: &Client,
    source: SourceKind,
) -> Result<BTreeMap<String, (Vec<IpNet>, bool)>, LoadError> {
    let params = ListParams::default;
    match source {
        SourceKind::IpamCrd => {
            let api: Api<NodePodCIDR> = Api::all(client.clone());
            fold_pages(&api, params(), BTreeMap::new(), |acc, o| {
                let alloc = allocation(desired_from_node_pod_cidr(&o));
                acc.insert(name_of(&o.metadata), alloc);
            })
            .await
            .map_err(api_error("nodepodcidrs", Some(("NodePodCIDR", CRD_HINT))))
        }
        SourceKind::CiliumNode => {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &cilium_node_resource());
            fold_pages(&api, params(), BTreeMap::new(), |acc, o| {
                let alloc = allocation(desired_from_cilium_node(&o));
                acc.insert(name_of(&o.metadata), alloc);
            })
            .await
            .map_err(api_error(
                "ciliumnodes",
                Some((
                    "CiliumNode (cilium.io/v2)",
                    "is Cilium installed? otherwise use --source ipam-crd or node-spec",
                )),
            ))
        }
        // Read from the Nodes themselves in `load_input`.
        SourceKind::NodeSpec | SourceKind::File => Ok(BTreeMap::new()),
    }
}

/// Lists what `diff --services` compares: Services, EndpointSlices (those of a Service),
/// BGPAdvertisements, Nodes, BGPPeers and every speaker report, concurrently, page by page.
pub async fn load_services(client: &Client) -> Result<super::services::ServicesInput, LoadError> {
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use podcidr_api::{BGPAdvertisement, BGPPeer};
    async fn all<K: Clone + DeserializeOwned + Debug>(
        api: Api<K>,
        params: ListParams,
        what: &'static str,
        crd: Option<(&'static str, &'static str)>,
    ) -> Result<Vec<K>, LoadError> {
        fold_pages(&api, params, Vec::new(), |acc, o| acc.push(o))
            .await
            .map_err(api_error(what, crd))
    }
    const CONFIG_CRDS: &str = "kubectl apply -k deploy/crds";
    let (services, slices, advertisements, nodes, peers, reports) = tokio::join!(
        all(
            Api::<Service>::all(client.clone()),
            ListParams::default(),
            "services",
            None
        ),
        all(
            Api::<EndpointSlice>::all(client.clone()),
            ListParams::default().labels("kubernetes.io/service-name"),
            "endpointslices",
            None,
        ),
        all(
            Api::<BGPAdvertisement>::all(client.clone()),
            ListParams::default(),
            "bgpadvertisements",
            Some(("BGPAdvertisement", CONFIG_CRDS)),
        ),
        all(
            Api::<Node>::all(client.clone()),
            ListParams::default(),
            "nodes",
            None
        ),
        all(
            Api::<BGPPeer>::all(client.clone()),
            ListParams::default(),
            "bgppeers",
            Some(("BGPPeer", CONFIG_CRDS)),
        ),
        speaker_reports(client),
    );
    Ok(super::services::ServicesInput {
        services: services?,
        slices: slices?,
        advertisements: advertisements?,
        nodes: nodes?,
        peers: peers?,
        reports: reports?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipam_watch::source::parse_cidrs;

    #[test]
    fn allocator_marked_conflicts_stay_in_the_allocation() {
        let mut c = parse_cidrs(["10.5.1.0/24", "bogus"]);
        assert_eq!(
            allocation(c.clone()),
            (vec!["10.5.1.0/24".parse().unwrap()], false)
        );
        c.invalid.push(ipam_watch::source::InvalidCidr {
            value: "10.5.2.0/24".into(),
            reason: InvalidReason::Conflict,
        });
        let (cidrs, flagged) = allocation(c);
        assert!(flagged);
        assert_eq!(cidrs.len(), 2);
    }

    /// The views parse what `diff` reads from real objects and skip the rest.
    #[test]
    fn views_read_pod_cidrs_reports_and_lease_timing() {
        let node: NodeView = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "managedFields": [{"manager": "kubelet"}]},
            "spec": {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24", "fd00::/64"]},
            "status": {"images": [{"names": ["x"], "sizeBytes": 1}]}
        }))
        .unwrap();
        assert_eq!(node.name_only.name.as_deref(), Some("n1"));
        assert_eq!(
            node.pod_cidrs(),
            [
                "10.0.0.0/24".parse::<IpNet>().unwrap(),
                "fd00::/64".parse().unwrap()
            ]
        );
        let legacy: NodeView = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n2"}, "spec": {"podCIDR": "10.0.1.0/24"}
        }))
        .unwrap();
        assert_eq!(
            legacy.pod_cidrs(),
            ["10.0.1.0/24".parse::<IpNet>().unwrap()]
        );
        let lease: LeaseView = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "namespace": "podcidr-system"},
            "spec": {"holderIdentity": "n1/pod", "leaseDurationSeconds": 180,
                     "renewTime": "2026-01-01T00:00:00.000000Z"}
        }))
        .unwrap();
        let spec = lease.spec.unwrap();
        assert_eq!(spec.lease_duration_seconds, Some(180));
        assert_eq!(spec.renew_time.unwrap().0.as_second(), 1_767_225_600);
        let status: StatusView = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"}, "spec": {"nodeName": "n1"},
            "status": {"announced": ["10.0.0.0/24"], "updatedAt": "2026-01-01T00:00:00Z"}
        }))
        .unwrap();
        assert_eq!(status.status.unwrap().announced, ["10.0.0.0/24"]);
    }

    #[test]
    fn unreachable_errors_name_the_server() {
        let e = LoadError::Unreachable {
            what: "nodes",
            at: String::new(),
            cause: "refused".into(),
        };
        assert_eq!(
            e.at("https://10.0.0.1:6443").to_string(),
            "cannot reach the Kubernetes API at https://10.0.0.1:6443 (listing nodes): refused"
        );
    }
}
