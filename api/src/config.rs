//! Configuration as Kubernetes objects (group `bgp.podcidr.io`, version `v1beta1`):
//! `BGPSpeakerConfig` (what the config file holds at its top level) and `BGPPeer` (one entry
//! of its `peers`), each selecting nodes by label. Key names and meanings are the file's
//! (docs/config.md); the speaker assembles them into the same `Config` the file gives, with
//! the same validation. The schema enforces what it can (types, enums, ranges, patterns,
//! required keys); what it cannot (cross-field and cross-object rules) is checked when the
//! objects are read, and reported on the objects' conditions.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_derive::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::schema;

mod rules;

/// API group of the configuration objects.
pub const CONFIG_GROUP: &str = "bgp.podcidr.io";
/// Their served and stored version.
pub const CONFIG_VERSION: &str = "v1beta1";

/// Condition types and reasons on the configuration objects.
pub mod config_condition {
    /// The object is valid and applied where it selects nodes (`True`), or why not.
    pub const ACCEPTED: &str = "Accepted";
    /// Reasons of `Accepted`.
    pub const VALID: &str = "Valid";
    pub const INVALID: &str = "Invalid";
    pub const CONFLICT: &str = "Conflict";
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    /// kstatus's condition (sigs.k8s.io/cli-utils), which Flux and `kubectl wait` read: True
    /// when `Accepted` is True for the generation in its `observedGeneration`; False with the
    /// reason of `Accepted` otherwise.
    pub const READY: &str = "Ready";
    /// Reasons of `Ready` while a session-resetting edit rolls out in waves, and when a
    /// wave's nodes did not come back in time (the rollout stopped).
    pub const ROLLOUT_PROGRESSING: &str = "RolloutProgressing";
    pub const ROLLOUT_STALLED: &str = "RolloutStalled";
}

/// `status.rollout.state` values.
pub mod rollout_state {
    pub const PROGRESSING: &str = "Progressing";
    pub const COMPLETE: &str = "Complete";
    pub const STALLED: &str = "Stalled";
}

/// A duration: seconds as an integer, or a string with one unit (`90`, `"90s"`, `"5m"`).
fn duration(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-int-or-string": true,
        "description": "Seconds, or a string with one unit: 90, \"90s\", \"5m\", \"1h\" (not \"90\").",
        "minimum": 0,
        "maxLength": 12,
        "pattern": "^[0-9]+(s|m|h)$"
    })
}

fn optional_duration(g: &mut SchemaGenerator) -> Schema {
    duration(g)
}

/// `spec.asn`: the local AS as a number. Typed, so a Kubernetes 1.25+ server can declare it
/// for CEL; reading it from the Node is `spec.asnFrom` (one meaning per field).
fn local_asn(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "The local AS (1..4294967295, not 23456). Exactly one of asn, asnFrom.",
        "type": "integer",
        "format": "int64",
        "minimum": 1,
        "maximum": 4294967295_u64,
        "x-kubernetes-validations": [{
            "rule": "self != 23456",
            "message": "asn 23456 (AS_TRANS) is reserved by RFC 6793"
        }]
    })
}

fn allowed_prefixes(_: &mut SchemaGenerator) -> Schema {
    let v = schema::cidr_array(
        "The announce guard: only pod CIDRs inside one of these are announced.",
        1024,
    );
    Schema::try_from(v).unwrap_or_default()
}

fn next_hop(description: &str, format: &str) -> Schema {
    let v = json!({
        "type": "string",
        "description": description,
        "maxLength": 64,
        "anyOf": [{"enum": ["self", "node"]}, {"format": format}]
    });
    Schema::try_from(v).unwrap_or_default()
}

fn next_hop_ipv4(_: &mut SchemaGenerator) -> Schema {
    next_hop("`self`, `node`, or an IPv4 address.", "ipv4")
}

fn next_hop_ipv6(_: &mut SchemaGenerator) -> Schema {
    next_hop("`self`, `node`, or an IPv6 address.", "ipv6")
}

fn peer_address(_: &mut SchemaGenerator) -> Schema {
    let v = schema::ip_address(
        "The neighbor's address, or `default-gateway` (the next hop(s) of the node's default route). Exactly one of `address`, `interface`.",
        &["default-gateway"],
    );
    Schema::try_from(v).unwrap_or_default()
}

fn link_local_address(_: &mut SchemaGenerator) -> Schema {
    let v = json!({
        "type": "string",
        "description": "With `interface`: the neighbor's link-local address (else discovered).",
        "maxLength": 64,
        "format": "ipv6"
    });
    Schema::try_from(v).unwrap_or_default()
}

fn local_address(_: &mut SchemaGenerator) -> Schema {
    let v = schema::ip_address("The session's source address on the node.", &[]);
    Schema::try_from(v).unwrap_or_default()
}

/// A peer AS: a number, or `auto` (learned from the peer's OPEN, within `allowedAsns`).
fn peer_asn(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "The peer's AS: a number (1..4294967295, not 23456), or \"auto\": learned from its OPEN, within allowedAsns.",
        "x-kubernetes-int-or-string": true,
        "minimum": 1,
        "maximum": 4294967295_u64,
        "pattern": "^auto$"
    })
}

/// An AS number or a `"first-last"` range.
fn asn_ranges(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "AS numbers or \"first-last\" ranges (inclusive).",
        "x-kubernetes-list-type": "atomic",
        "minItems": 1,
        "items": {
            "x-kubernetes-int-or-string": true,
            "minimum": 1,
            "maximum": 4294967295_u64,
            "pattern": "^[0-9]+(-[0-9]+)?$"
        }
    })
}

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

/// What `BGPPeer.spec` holds: one entry of the config file's `peers` (the peer's name is the
/// object's), with the MD5 key in a Secret instead of a file.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "bgp.podcidr.io",
    version = "v1beta1",
    kind = "BGPPeer",
    plural = "bgppeers",
    shortname = "bgpp",
    category = "podcidr",
    status = "ConfigObjectStatus",
    derive = "PartialEq",
    doc = "A BGP neighbor of the podcidr-bgp speakers on the selected nodes.",
    printcolumn(
        name = "Address",
        type_ = "string",
        json_path = ".spec.address",
        description = "Peer address, or default-gateway"
    ),
    printcolumn(
        name = "Interface",
        type_ = "string",
        json_path = ".spec.interface",
        description = "Unnumbered: the link",
        priority = 1
    ),
    printcolumn(
        name = "ASN",
        type_ = "string",
        json_path = ".spec.asn",
        description = "Peer AS"
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
#[schemars(extend("x-kubernetes-validations" = rules::peer()))]
pub struct BGPPeerSpec {
    /// The nodes that peer with this neighbor; empty or absent selects every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_selector")]
    pub node_selector: Option<LabelSelector>,
    /// Which peer a node runs when several select it with the same endpoint (address and
    /// port): the highest priority; among equal priorities the first name in alphabetical
    /// order, reported as a conflict. Never the creation time. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1_000_000, max = 1_000_000))]
    pub priority: Option<i32>,
    /// How an edit that resets this peer's sessions reaches the selected nodes (as
    /// `BGPSpeakerConfig.spec.rollout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutSpec>,
    /// The neighbor's address, or `default-gateway` (the next hop(s) of the node's default
    /// route). Exactly one of `address`, `interface`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "peer_address")]
    pub address: Option<String>,
    /// With `address: default-gateway`: which default route (`ipv4`, `ipv6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_family: Option<AddressFamilySpec>,
    /// Unnumbered: peer over IPv6 link-local on this interface's link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 15))]
    pub interface: Option<String>,
    /// With `interface`: the neighbor's link-local address (else discovered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "link_local_address")]
    pub peer_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    #[schemars(schema_with = "peer_asn")]
    pub asn: NumberOrString,
    /// With `asn: auto`: the AS numbers or ranges the peer may have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "asn_ranges")]
    pub allowed_asns: Vec<NumberOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "local_address")]
    pub local_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passive: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_incoming: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    pub families: Vec<FamilySpec>,
    /// Seconds: 0, or 3..65535.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub hold_time: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub keepalive_time: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_retry: Option<ConnectRetrySpec>,
    /// The TCP MD5 key (RFC 2385): a key of a Secret in the speaker's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret_ref: Option<SecretKeyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_security: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 255))]
    pub ebgp_multihop: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_restart: Option<GracefulRestartSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd: Option<BfdSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_next_hop: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub communities: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub large_communities: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 4_294_967_295_u64))]
    pub med: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 4_294_967_295_u64))]
    pub local_pref: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 10))]
    pub as_path_prepend: Option<u8>,
}

/// An AS number or a string (`auto`, a `"first-last"` range), kept as written. Not
/// `IntOrString`: its integer is 32-bit signed, and 4-octet AS numbers reach 4294967295.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(untagged)]
pub enum NumberOrString {
    Number(u64),
    String(String),
}

impl Default for NumberOrString {
    fn default() -> Self {
        NumberOrString::Number(0)
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AddressFamilySpec {
    Ipv4,
    Ipv6,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FamilySpec {
    Ipv4Unicast,
    Ipv6Unicast,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::connect_retry()))]
pub struct ConnectRetrySpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub base: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub max: Option<IntOrString>,
}

/// A key of a Secret in the speaker's namespace.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = rules::graceful_restart()))]
pub struct GracefulRestartSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Seconds, 0..4095.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub restart_time: Option<IntOrString>,
    /// RFC 9494 long-lived stale time, seconds 0..16777215; 0 (the default) is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub long_lived_stale_time: Option<IntOrString>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BfdSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Milliseconds, 10..60000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 60000))]
    pub min_tx: Option<u32>,
    /// Milliseconds, 10..60000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 60000))]
    pub min_rx: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 255))]
    pub multiplier: Option<u8>,
    /// BFD strict mode (capability 74): BGP waits for BFD Up when the peer agrees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

fn rollout_waves(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "Cumulative shares of the selected nodes, one per wave, e.g. [\"10%\", \"50%\"]; default [\"1%\", \"5%\", \"10%\", \"25%\", \"50%\", \"75%\", \"100%\"]. Order does not matter; a last wave of 100% is implied; [\"100%\"]: every node at once.",
        "x-kubernetes-list-type": "atomic",
        "maxItems": 10,
        "items": {"type": "string", "maxLength": 4, "pattern": "^([1-9][0-9]?|100)%$"}
    })
}

/// Progressive rollout of edits that reset sessions.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// Nodes that take a session-resetting edit first, as wave 0, before the percentages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_selector")]
    pub canary_selector: Option<LabelSelector>,
    /// Cumulative shares of the selected nodes, one per wave (default 1%, 5%, 10%, 25%, 50%,
    /// 75%, 100%). `["100%"]`: every node at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "rollout_waves")]
    pub waves: Vec<String>,
    /// How long a wave's nodes may take to run the edit with their sessions Established
    /// again before the rollout stops (default 10m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration")]
    pub wave_timeout: Option<IntOrString>,
}

/// Where the rollout of the object's current generation is, written by the status
/// controller. Speakers read it: a node whose running version would reset sessions takes
/// the new generation only once its wave is admitted.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The `metadata.generation` being rolled out.
    pub generation: i64,
    /// `Progressing`, `Complete` or `Stalled`.
    #[schemars(length(max = 16))]
    pub state: String,
    /// The last admitted wave (0: the canaries, or the first share).
    pub wave: u32,
    /// Nodes whose rollout hash (FNV-1a 64 of `<kind>/<name>/<node>`) is below this number
    /// (decimal) are admitted; `canarySelector` nodes are from wave 0. Fixed per wave, so
    /// nodes that join do not move the boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 20))]
    pub hash_below: Option<String>,
    /// Selected nodes in the admitted waves when the wave started.
    #[serde(default)]
    pub nodes_admitted: u32,
    /// Selected nodes when the wave started.
    #[serde(default)]
    pub nodes_selected: u32,
    /// When the current wave started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 40))]
    pub wave_started_at: Option<String>,
    /// Why it stalled: the wave's nodes that did not come back, and what they run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub message: Option<String>,
}

/// Status of a configuration object, written by the one controller of the cluster.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigObjectStatus {
    /// The `metadata.generation` the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Accepted` (True; False with reason Invalid, Conflict or SecretNotFound).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
    /// Deprecated, no longer written: it changed with every node join, leave or relabel,
    /// and each status write is a watch event to every speaker. Each node's NodeBGPStatus
    /// says what it runs (`status.config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_nodes: Option<u32>,
    /// Deprecated, no longer written (as `selectedNodes`): each node's NodeBGPStatus lists
    /// what it does not apply and why (`status.config.notApplied`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 10000))]
    pub not_applied: BTreeMap<String, String>,
    /// The progressive rollout of the current generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
}
