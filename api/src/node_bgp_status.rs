//! `NodeBGPStatus`: what one node's speaker announces to each peer, published (rate limited)
//! by `podcidr-bgp speaker` so `podcidr-bgp diff`, `peers` and `routes` work from a laptop.
//! Plain data only: no BGP code lives in this crate.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;

/// Routes listed per peer in a report; the rest are only counted.
pub const MAX_REPORTED_ROUTES: usize = 256;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A node's speaker report. Name = node name; owned by the Node.
#[allow(clippy::duplicated_attributes)] // see PodCIDRPoolSpec
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "podcidr.io",
    version = "v1alpha1",
    kind = "NodeBGPStatus",
    plural = "nodebgpstatuses",
    shortname = "nbs",
    category = "podcidr",
    status = "SpeakerReport",
    derive = "PartialEq",
    doc = "What the podcidr-bgp speaker on the node of the same name announces to each peer.",
    printcolumn(name = "Source", type_ = "string", json_path = ".status.source"),
    printcolumn(name = "ASN", type_ = "integer", json_path = ".status.localAsn"),
    printcolumn(
        name = "Established",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Established\")].status"
    ),
    printcolumn(name = "Announced", type_ = "string", json_path = ".status.announced"),
    printcolumn(
        name = "Mismatch",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"SourceMismatch\")].status"
    ),
    printcolumn(name = "Updated", type_ = "date", json_path = ".status.updatedAt")
)]
#[serde(rename_all = "camelCase")]
pub struct NodeBGPStatusSpec {
    /// The node this speaker runs on.
    pub node_name: String,
}

/// The speaker's report, written to the status subresource.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpeakerReport {
    /// The configured pod-CIDR source (`node-spec`, `ipam-crd`, `cilium-node`, `file`).
    #[serde(default)]
    pub source: String,
    /// The source finished its initial list; before that nothing is withdrawn.
    #[serde(default)]
    pub source_ready: bool,
    /// CIDRs the source assigns to this node.
    #[serde(default)]
    pub allocated: Vec<String>,
    /// CIDRs that passed the announce guard (and, with `forwardingGate`, the node can
    /// deliver to).
    #[serde(default)]
    pub announced: Vec<String>,
    /// CIDRs the forwarding gate holds back, with the reason (first `MAX_REPORTED_ROUTES`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldCidr>,
    /// With `forwardingGate.mode: report`: CIDRs the gate would hold back but announces
    /// anyway, with the reason (first `MAX_REPORTED_ROUTES`). Never in `held` then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub would_hold: Vec<HeldCidr>,
    /// CIDRs the guard refused, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedCidr>,
    /// Refusals beyond the first `MAX_REPORTED_ROUTES`, counted, not listed: the object must
    /// stay far below etcd's object size limit whatever a source holds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_omitted: u64,
    /// The Node's own `spec.podCIDRs` (the other view), when the source has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_spec_pod_cidrs: Vec<String>,
    /// One entry per configured peer that applies to this node.
    #[serde(default)]
    pub peers: Vec<PeerReport>,
    /// `Ready`, `Established`, `SourceMismatch`, `Refused` (and `CNIConfigured` with
    /// `cni.enabled`, `ForwardingHeld` with `forwardingGate.enabled`). `lastTransitionTime`
    /// changes only when a condition's status does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
    /// `metadata.generation` this report was written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// RFC 3339 time of this report; `diff` calls a report older than its threshold stale.
    #[serde(default)]
    pub updated_at: String,
    /// Version of the speaker binary.
    #[serde(default)]
    pub speaker_version: String,
    /// The node's effective local AS; absent while it cannot be resolved (condition
    /// `LocalASN`). Written as `null` then, so a status patch removes the last one.
    #[serde(default)]
    pub local_asn: Option<u32>,
    /// Where the local AS came from: `config`, `asnOverrides[i]`, `label <key>`,
    /// `annotation <key>`, `default (no label <key>)`; empty while unresolved.
    #[serde(default)]
    pub local_asn_source: String,
    /// Which configuration objects the node runs, at which generation, and which it does
    /// not (`--config-source kubernetes`); `null` with a config file.
    #[serde(default)]
    pub config: Option<ConfigReport>,
    /// Service addresses (`BGPAdvertisement`s): counts only, never one entry per Service
    /// (`podcidr-bgp diff --services` has the detail). Absent while no advertisement
    /// selects the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<ServiceRoutesReport>,
}

/// How many Service addresses a node announces and holds back, and why.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceRoutesReport {
    /// Addresses (per advertisement) announced to at least one peer.
    pub announced: u32,
    /// Addresses selected and not announced.
    pub held: u32,
    /// `held` by reason (`noLocalEndpoint`, `notReady`, `draining`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub held_by_reason: BTreeMap<String, u32>,
}

/// The configuration objects one node runs (condition `ConfigApplied` sums it up).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReport {
    /// The `BGPSpeakerConfig` the node runs; absent when none selects it (nothing is
    /// announced then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker_config: Option<ObjectGeneration>,
    /// The `BGPPeer`s the node runs, by name.
    #[serde(default)]
    pub peers: Vec<ObjectGeneration>,
    /// Objects that select this node and are not applied here, with why (a conflict with an
    /// older object, unusable with no earlier version here, a missing Secret).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_applied: Vec<ObjectNotApplied>,
}

/// One object at the generation the node runs.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectGeneration {
    pub name: String,
    /// `metadata.generation` of the version the node runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Set when the node runs its last good version because the current one is not usable
    /// here: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_good: Option<String>,
}

/// An object selecting this node that the node does not run.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectNotApplied {
    /// `BGPSpeakerConfig` or `BGPPeer`.
    pub kind: String,
    pub name: String,
    pub reason: String,
}

/// A CIDR the announce guard refused.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefusedCidr {
    pub cidr: String,
    /// `outside-allowed-prefixes`, `default-route`, `conflict`, `invalid`,
    /// `family-not-negotiated`, `next-hop-family`.
    pub reason: String,
    /// The peer that refused it, for per-peer reasons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
}

/// A CIDR the forwarding gate holds back until the node can deliver to it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeldCidr {
    pub cidr: String,
    /// `no-route`, `unreachable`, `via-uplink`, `interface-not-listed`, `cni-not-written`.
    pub reason: String,
}

/// One BGP session.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeerReport {
    pub name: String,
    /// The `BGPPeer` object this session comes from (`--config-source kubernetes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bgp_peer: Option<String>,
    pub address: String,
    pub asn: u32,
    /// RFC 4271 state: Idle, Connect, Active, OpenSent, OpenConfirm, Established.
    pub state: String,
    /// RFC 3339 time the session entered `state`.
    #[serde(default)]
    pub since: String,
    /// Negotiated hold time in seconds (absent until OPEN was exchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_time: Option<u16>,
    /// Negotiated keepalive interval in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive_time: Option<u16>,
    /// Negotiated families.
    #[serde(default)]
    pub families: Vec<String>,
    /// Capabilities the peer sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Families this peer is configured for that have pod CIDRs to announce and no usable
    /// next hop (e.g. `nextHop.ipv6: self` on an IPv4 session on a node without an IPv6
    /// InternalIP): announced to no one on this session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_next_hop: Vec<String>,
    /// Prefixes advertised, per family.
    #[serde(default)]
    pub prefixes_sent: BTreeMap<String, u64>,
    /// The advertised routes with their attributes, at most
    /// [`MAX_REPORTED_ROUTES`] (the object must stay small; pod CIDRs are a handful per node).
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub routes: Vec<RouteReport>,
    /// Advertised routes left out of `routes` (`prefixesSent` has the full counts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub routes_omitted: u64,
    #[serde(default)]
    pub messages_sent: u64,
    #[serde(default)]
    pub messages_received: u64,
    /// Times the session left Established.
    #[serde(default)]
    pub flaps: u64,
    /// Why the session last went down or failed to come up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_notification_sent: Option<NotificationReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_notification_received: Option<NotificationReport>,
    /// BFD strict mode (`bfd.strict`): `negotiated` (both OPENs carry capability 74: BGP
    /// waits for BFD Up), `peerNotStrict` (the peer's OPEN does not: the session runs
    /// non-strict), `configured` (no OPEN from the peer yet). Absent when not configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd_strict: Option<String>,
    /// Held waiting for BFD (strict mode, both sides): RFC 3339 time the session began to
    /// wait in OpenSent for BFD Up. Absent when it does not wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for_bfd_since: Option<String>,
}

/// One advertised route.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteReport {
    pub prefix: String,
    pub next_hop: String,
    #[serde(default)]
    pub as_path: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub med: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_pref: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub communities: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub large_communities: Vec<String>,
}

/// A NOTIFICATION as operators read it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NotificationReport {
    pub code: u8,
    pub subcode: u8,
    /// e.g. `Cease/Administrative Shutdown`.
    pub name: String,
    /// RFC 9003 shutdown communication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// RFC 3339.
    pub at: String,
}
