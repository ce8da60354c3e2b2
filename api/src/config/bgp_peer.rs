//! `BGPPeer` (group `bgp.podcidr.io`): one entry of the config file's `peers` as an object,
//! with the MD5 key in a Secret. Its field schemas and CEL rules come from the parent module.

use super::*;

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
    /// Milliseconds, 50..60000 (userspace BFD's floor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 50, max = 60000))]
    pub min_tx: Option<u32>,
    /// Milliseconds, 50..60000 (userspace BFD's floor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 50, max = 60000))]
    pub min_rx: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 255))]
    pub multiplier: Option<u8>,
    /// BFD strict mode (capability 74): BGP waits for BFD Up when the peer agrees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// Authentication of every BFD packet (RFC 5880 §6.7.4); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<BfdAuthenticationSpec>,
}

/// `bfd.authentication` of the config file, with the key in a Secret instead of a file.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BfdAuthenticationSpec {
    #[serde(rename = "type")]
    pub auth_type: BfdAuthTypeSpec,
    /// Auth Key ID, 0..255: the peer's must be the same.
    #[schemars(range(min = 0, max = 255))]
    pub key_id: u8,
    /// The key (1..20 bytes, a SHA1 Auth Key): a key of a Secret in the speaker's namespace,
    /// as `passwordSecretRef` (the same Secrets may hold both).
    pub secret_ref: SecretKeyRef,
}

/// The RFC 5880 §6.7.4 authentication types the speaker implements.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BfdAuthTypeSpec {
    KeyedSha1,
    MeticulousKeyedSha1,
}
