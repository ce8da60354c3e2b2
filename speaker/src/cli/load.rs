//! Reads what `diff`, `peers` and `routes` need from the API: one paginated list per kind.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::PathBuf;
use std::time::Duration;

use ipam_watch::crd::{NodeBGPStatus, NodePodCIDR, SpeakerReport};
use ipam_watch::source::{
    InvalidReason, NodeCidrs, SourceKind, cilium_node_resource, desired_from_cilium_node,
    desired_from_node, desired_from_node_pod_cidr,
};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use super::diff::{DiffInput, NodeInput};

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

const CRD_HINT: &str = "kubectl apply -f deploy/crds/";

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

/// Every object of a kind, following `continue` tokens.
async fn list_all<K>(api: &Api<K>) -> kube::Result<Vec<K>>
where
    K: Clone + DeserializeOwned + Debug,
{
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        out.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(out),
        }
    }
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// Every published speaker report, by node name.
pub async fn speaker_reports(
    client: &Client,
) -> Result<BTreeMap<String, SpeakerReport>, LoadError> {
    let api: Api<NodeBGPStatus> = Api::all(client.clone());
    let objects = list_all(&api).await.map_err(api_error(
        "nodebgpstatuses",
        Some(("NodeBGPStatus", CRD_HINT)),
    ))?;
    Ok(objects
        .into_iter()
        .map(|o| {
            let name = match name_of(&o.metadata) {
                n if n.is_empty() => o.spec.node_name.clone(),
                n => n,
            };
            // An object without status never reported: it reads as stale (no updatedAt).
            (name, o.status.unwrap_or_default())
        })
        .collect())
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

/// Lists Nodes, the chosen IPAM objects and every `NodeBGPStatus` into a [`DiffInput`].
pub async fn load_input(
    client: &Client,
    source: SourceKind,
    now: i64,
    stale_after_secs: u64,
) -> Result<DiffInput, LoadError> {
    if source == SourceKind::File {
        return Err(LoadError::Config(
            "the file source has no cluster-wide view; use ipam-crd, node-spec or cilium-node"
                .to_owned(),
        ));
    }
    let nodes_api: Api<Node> = Api::all(client.clone());
    let (nodes, ipam, reports) = tokio::join!(
        async { list_all(&nodes_api).await.map_err(api_error("nodes", None)) },
        ipam_allocations(client, source),
        speaker_reports(client),
    );
    let (nodes, ipam, reports) = (nodes?, ipam?, reports?);
    let mut by_name: BTreeMap<String, NodeInput> = BTreeMap::new();
    for node in &nodes {
        let name = name_of(&node.metadata);
        let spec = desired_from_node(node).valid;
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
        let n = slot(&mut by_name, &name);
        n.speaker = Some(report);
    }
    Ok(DiffInput {
        source,
        nodes: by_name.into_values().collect(),
        now,
        stale_after_secs,
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
    match source {
        SourceKind::IpamCrd => {
            let api: Api<NodePodCIDR> = Api::all(client.clone());
            let objects = list_all(&api)
                .await
                .map_err(api_error("nodepodcidrs", Some(("NodePodCIDR", CRD_HINT))))?;
            Ok(objects
                .iter()
                .map(|o| {
                    (
                        name_of(&o.metadata),
                        allocation(desired_from_node_pod_cidr(o)),
                    )
                })
                .collect())
        }
        SourceKind::CiliumNode => {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &cilium_node_resource());
            let objects = list_all(&api).await.map_err(api_error(
                "ciliumnodes",
                Some((
                    "CiliumNode (cilium.io/v2)",
                    "is Cilium installed? otherwise use --source ipam-crd or node-spec",
                )),
            ))?;
            Ok(objects
                .iter()
                .map(|o| {
                    (
                        name_of(&o.metadata),
                        allocation(desired_from_cilium_node(o)),
                    )
                })
                .collect())
        }
        // Read from the Nodes themselves in `load_input`.
        SourceKind::NodeSpec | SourceKind::File => Ok(BTreeMap::new()),
    }
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
