//! `BGPSpeakerConfig` (group `bgp.podcidr.io`): the config file's top level as an object,
//! selected per node. Its field schemas and CEL rules come from the parent module.

use super::*;

/// What `BGPSpeakerConfig.spec` holds: the config file's top level (not `nodeName`, `peers`
/// or `admin`: node identity and the admin listener are the process's flags).
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "bgp.podcidr.io",
    version = "v1beta1",
    kind = "BGPSpeakerConfig",
    plural = "bgpspeakerconfigs",
    shortname = "bgpsc",
    category = "podcidr",
    status = "ConfigObjectStatus",
    derive = "PartialEq",
    doc = "How the podcidr-bgp speakers on the selected nodes run: local AS, pod-CIDR source, announce guard, next hops. The oldest object selecting a node wins.",
    printcolumn(
        name = "Source",
        type_ = "string",
        json_path = ".spec.source.kind",
        description = "Pod-CIDR source"
    ),
    printcolumn(
        name = "Accepted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Accepted\")].status",
        description = "Valid and applied"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::speaker_config()))]
pub struct BGPSpeakerConfigSpec {
    /// The nodes this config applies to; empty or absent selects every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_selector")]
    pub node_selector: Option<LabelSelector>,
    /// Which config a node runs when several select it: the highest priority; among equal
    /// priorities the first name in alphabetical order, reported as a conflict. Never the
    /// creation time (a restore or a GitOps bootstrap would reorder it). Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1_000_000, max = 1_000_000))]
    pub priority: Option<i32>,
    /// How an edit that resets sessions reaches the selected nodes: in waves, each after
    /// the previous wave's sessions are Established again. Edits that reset nothing apply
    /// at once. Absent: the default waves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutSpec>,
    /// The local AS as a number. Exactly one of `asn`, `asn_from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "local_asn")]
    pub asn: Option<LocalAsnSpec>,
    /// The local AS read from the Node (see docs/config.md, Per-node local AS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asn_from: Option<AsnFromNodeSpec>,
    /// Per-node local AS by node selector, first match wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asn_overrides: Vec<AsnOverrideSpec>,
    /// The BGP identifier; absent: derived per node (the Node's IPv4 InternalIP, else the
    /// local IPv4 address towards the first IPv4 peer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"
    ))]
    pub router_id: Option<String>,
    /// Where pod CIDRs come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceSpec>,
    /// The announce guard: only pod CIDRs inside one of these are announced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "allowed_prefixes")]
    pub allowed_prefixes: Vec<String>,
    /// The guard refuses shorter prefixes, per family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_prefix_length: Option<MinPrefixLengthSpec>,
    /// The next hop per family: `self`, `node`, or an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_hop: Option<NextHopSpec>,
    /// RFC 8326 graceful shutdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_shutdown: Option<GracefulShutdownSpec>,
    /// The node's CNI conflist, written from the announced CIDRs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni: Option<CniSpec>,
    /// Hold a pod CIDR back until the node can deliver to it (off by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarding_gate: Option<ForwardingGateSpec>,
    /// The node's own default route follows its sessions (off by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressSpec>,
    /// Status publishing (NodeBGPStatus and the node's Lease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusSpec>,
    /// Logging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogSpec>,
}

/// `spec.asn` as read back. The schema declares an integer; `Unsupported` keeps whatever an
/// older server stored without checking (the v1beta1 mapping form, now `asnFrom`) readable, so
/// such an object is reported on its conditions instead of failing the whole watch.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(untagged)]
pub enum LocalAsnSpec {
    Number(u64),
    Unsupported(serde_json::Value),
}

/// `spec.asnFrom`: the local AS from a Node label or annotation (exactly one), with the AS to
/// use when the Node has neither.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::asn_from()))]
pub struct AsnFromNodeSpec {
    /// A label key on the Node whose value is the AS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub node_label: Option<String>,
    /// An annotation key on the Node whose value is the AS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub node_annotation: Option<String>,
    /// The AS when the Node has no such label or annotation (1..4294967295, not 23456).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4_294_967_295_u64))]
    pub default: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::asn_override()))]
pub struct AsnOverrideSpec {
    #[schemars(schema_with = "schema::label_selector")]
    pub node_selector: LabelSelector,
    #[schemars(range(min = 1, max = 4_294_967_295_u64))]
    pub asn: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::source()))]
pub struct SourceSpec {
    pub kind: SourceKindSpec,
    /// `file` only: the YAML file mapping node names to CIDRs, under
    /// /etc/podcidr-bgp/cidrs/ (mount it there): an object may not make the speakers read
    /// any other file of their node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = rules::object_file_source_path()))]
    pub path: Option<String>,
}

/// The one directory a `BGPSpeakerConfig`'s `source.path` may name a file in. The config file
/// (written by the node's admin) may name any path; an object (written through the API) may
/// not make every speaker read, say, its MD5 key directory.
pub const OBJECT_FILE_SOURCE_DIR: &str = "/etc/podcidr-bgp/cidrs/";

/// Why `path` is not a file an object may name, or `None`: it is (absolute, under
/// [`OBJECT_FILE_SOURCE_DIR`], no `.`/`..` component). Symlinks are checked when the file is
/// read (`ipam_watch::source::FileSource::within`).
pub fn object_file_source_path_problem(path: &str) -> Option<String> {
    let bad = path
        .strip_prefix(OBJECT_FILE_SOURCE_DIR)
        .is_none_or(|inside| {
            inside.is_empty()
                || inside
                    .split('/')
                    .any(|c| c.is_empty() || c == "." || c == "..")
        });
    bad.then(|| {
        format!(
            "{path:?} is not a file under {OBJECT_FILE_SOURCE_DIR}: a BGPSpeakerConfig may read pod CIDRs only from there (mount the file in the speaker's pod there)"
        )
    })
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKindSpec {
    NodeSpec,
    IpamCrd,
    CiliumNode,
    File,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MinPrefixLengthSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 32))]
    pub ipv4: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 128))]
    pub ipv6: Option<u8>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NextHopSpec {
    /// `self`, `node`, or an IPv4 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "next_hop_ipv4")]
    pub ipv4: Option<String>,
    /// `self`, `node`, or an IPv6 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "next_hop_ipv6")]
    pub ipv6: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::graceful_shutdown()))]
pub struct GracefulShutdownSpec {
    /// On a final stop: how long routes carry GRACEFUL_SHUTDOWN before the Cease (0..300 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub wait: Option<IntOrString>,
    /// Attach GRACEFUL_SHUTDOWN to every route while the Node is cordoned (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_cordon: Option<bool>,
    /// A SIGTERM on a cordoned node is a departure (RFC 8326 wait, then the Cease); default
    /// false: a cordon alone is a restart (graceful-restart close).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depart_on_cordon: Option<bool>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CniSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<CniPluginSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 68, max = 65535))]
    pub mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForwardingGateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Devices whose routes count: names, or a prefix ending in `*`; empty: any device but
    /// the uplinks and `lo`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub interfaces: Vec<String>,
    /// `enforce` (default): held CIDRs are not announced; `report`: everything is announced
    /// and what would be held is only reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ForwardingGateModeSpec>,
    /// How long an announced CIDR the gate would hold stays announced before it is withdrawn
    /// (0..300 s, default 10 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub withdraw_hold_down: Option<IntOrString>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ForwardingGateModeSpec {
    Enforce,
    Report,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressSpec {
    /// While every peer at a next hop of the node's default route is down, leave that next
    /// hop out of the node's egress (a route of the speaker's own, protocol 179).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_sessions: Option<bool>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CniPluginSpec {
    Bridge,
    Ptp,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::status()))]
pub struct StatusSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<bool>,
    /// Minimum time between status writes (1..3600 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub min_interval: Option<IntOrString>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<LogFormatSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<LogLevelSpec>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormatSpec {
    Text,
    Json,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogLevelSpec {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}
