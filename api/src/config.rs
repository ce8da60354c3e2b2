//! Configuration as Kubernetes objects (group `bgp.podcidr.io`, version `v1beta1`):
//! `BGPSpeakerConfig` (what the config file holds at its top level), `BGPPeer` (one entry
//! of its `peers`) and `BGPAdvertisement` (which Service addresses to announce), each
//! selecting nodes by label. Key names and meanings are the file's
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

mod bgp_advertisement;
mod bgp_peer;
mod bgp_speaker_config;
mod rules;

pub use bgp_advertisement::*;
pub use bgp_peer::*;
pub use bgp_speaker_config::*;

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
