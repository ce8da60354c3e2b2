//! Hand-written OpenAPI schemas for the metav1 types we embed.
//!
//! k8s-openapi's own `JsonSchema` impls sit behind its `schemars` feature, which would make
//! every crate in the workspace compile schemas for the whole Kubernetes API; these two shapes
//! follow the upstream ones (as `controller-gen` emits them) instead.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use schemars::{Schema, SchemaGenerator, json_schema};

/// `[]metav1.Condition`, a list map keyed by `type`.
pub(super) fn conditions(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "Standard metav1 conditions, one per type.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status", "reason", "message", "lastTransitionTime"],
            "properties": {
                "type": {
                    "type": "string",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
                },
                "status": { "type": "string", "enum": ["True", "False", "Unknown"] },
                "reason": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1024,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
                },
                "message": { "type": "string", "maxLength": 32768 },
                "lastTransitionTime": { "type": "string", "format": "date-time" },
                "observedGeneration": { "type": "integer", "format": "int64", "minimum": 0 }
            }
        }
    })
}

/// `metav1.LabelSelector`.
pub(super) fn label_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "A label query over nodes; empty or absent selects every node.",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "matchLabels": {
                "type": "object",
                "additionalProperties": { "type": "string" }
            },
            "matchExpressions": {
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": { "type": "string" },
                        "operator": {
                            "type": "string",
                            "enum": ["In", "NotIn", "Exists", "DoesNotExist"]
                        },
                        "values": {
                            "type": "array",
                            "x-kubernetes-list-type": "atomic",
                            "items": { "type": "string" }
                        }
                    }
                }
            }
        }
    })
}

/// The longest text form of a CIDR (`ffff:…:ffff/128`, or IPv4-mapped IPv6), with room.
const CIDR_MAX_LENGTH: u64 = 64;

/// CEL (for the string `self`, a CIDR) that compiles on Kubernetes 1.30, the oldest supported
/// server, which has no IP/CIDR library (`cidr()` arrives for CRD rules in 1.31): an IPv4 CIDR
/// has no host bits, its address a multiple of 2^(32 - prefix length). IPv6 CIDRs pass here;
/// the readers check their host bits and report them on the object.
pub fn ipv4_no_host_bits_rule() -> String {
    let octets = "self.split('/')[0].split('.')";
    let address = format!(
        "(int({octets}[0]) * 16777216 + int({octets}[1]) * 65536 + int({octets}[2]) * 256 + int({octets}[3]))"
    );
    let block_sizes: Vec<String> = (0..=32u32)
        .rev()
        .map(|bits| (1u64 << bits).to_string())
        .collect();
    format!(
        "self.contains(':') || {address} % [{}][int(self.split('/')[1])] == 0",
        block_sizes.join(", ")
    )
}

/// One CIDR: `format: cidr` (the address and the prefix length parse, checked by the server
/// on every supported version), bounded, and no IPv4 host bits.
pub fn cidr_item() -> serde_json::Value {
    serde_json::json!({
        "type": "string",
        "format": "cidr",
        "maxLength": CIDR_MAX_LENGTH,
        "x-kubernetes-validations": [{
            "rule": ipv4_no_host_bits_rule(),
            "message": "has host bits set (the address must be the network's first, e.g. 10.244.0.0/16)"
        }]
    })
}

/// A list of at most `max_items` CIDRs.
pub fn cidr_array(description: &str, max_items: u64) -> serde_json::Value {
    serde_json::json!({
        "type": "array",
        "description": description,
        "x-kubernetes-list-type": "atomic",
        "maxItems": max_items,
        "items": cidr_item()
    })
}

/// A node's CIDRs (`NodePodCIDR.spec.podCIDRs`): at most one per family.
pub(super) fn cidr_list(_: &mut SchemaGenerator) -> Schema {
    let v = cidr_array("CIDRs in canonical form, primary family first.", 2);
    Schema::try_from(v).unwrap_or_default()
}

/// A pool's CIDRs of one family.
pub(super) fn pool_cidrs(_: &mut SchemaGenerator) -> Schema {
    let mut v = cidr_array("Pool CIDRs in canonical form, e.g. `10.5.112.0/21`.", 256);
    v["minItems"] = 1.into();
    Schema::try_from(v).unwrap_or_default()
}

/// An IP address (either family), as the server checks it on 1.30 already (`format`).
pub fn ip_address(description: &str, also: &[&str]) -> serde_json::Value {
    let mut any_of = vec![
        serde_json::json!({"format": "ipv4"}),
        serde_json::json!({"format": "ipv6"}),
    ];
    if !also.is_empty() {
        any_of.push(serde_json::json!({"enum": also}));
    }
    serde_json::json!({
        "type": "string",
        "description": description,
        "maxLength": CIDR_MAX_LENGTH,
        "anyOf": any_of
    })
}

/// Calls `f` on `props` and on every schema below it.
fn visit(props: &mut JSONSchemaProps, f: &mut dyn FnMut(&mut JSONSchemaProps)) {
    f(props);
    let children = props
        .properties
        .iter_mut()
        .flat_map(|p| p.values_mut())
        .chain(
            props
                .pattern_properties
                .iter_mut()
                .flat_map(|p| p.values_mut()),
        )
        .chain(props.all_of.iter_mut().flatten())
        .chain(props.any_of.iter_mut().flatten())
        .chain(props.one_of.iter_mut().flatten())
        .chain(props.not.as_deref_mut());
    for child in children {
        visit(child, f);
    }
    match &mut props.items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => visit(s, f),
        Some(JSONSchemaPropsOrArray::Schemas(list)) => list.iter_mut().for_each(|s| visit(s, f)),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(s)) = &mut props.additional_properties {
        visit(s, f);
    }
}

/// Removes `null` from every `enum` (schemars lists it for an `Option` of an enum, beside
/// `nullable: true`). kube-apiserver 1.20.2 refused such a CRD ("per-version schemas may not
/// all be set to identical values": its copy of the schema no longer compared equal to
/// itself), and no writer of ours sends `null`: an unset field is left out.
pub(super) fn drop_null_from_enums(props: &mut JSONSchemaProps) {
    visit(props, &mut |p| {
        if let Some(values) = &mut p.enum_ {
            values.retain(|v| !v.0.is_null());
        }
    });
}

/// Bounds every string, list and map a schema leaves unbounded, so every object has a size
/// the API server knows (its CEL cost estimates use it, and every speaker holds every
/// configuration object in memory). Fields that know their own bound say it where they are
/// declared (`allowedPrefixes`: 1024, a node's CIDRs: 2, reported routes: 256, …); these are
/// the bounds of the rest: names, keys and values 1024 characters in a spec and 4096 in a
/// status (error texts a peer sends), a timestamp 64, a list 1024 items, a map 256 keys
/// (`status.notApplied`, keyed by node, is declared with room for a fleet).
pub(super) fn bound_every_list_and_string(props: &mut JSONSchemaProps) {
    let Some(top) = props.properties.as_mut() else {
        return;
    };
    for (key, child) in top.iter_mut() {
        let text = if key == "status" { 4096 } else { 1024 };
        visit(child, &mut |p| {
            let int_or_string = p.x_kubernetes_int_or_string == Some(true);
            match p.type_.as_deref() {
                Some("string") if p.max_length.is_none() && p.enum_.is_none() => {
                    let date = matches!(p.format.as_deref(), Some("date-time" | "date"));
                    p.max_length = Some(if date { 64 } else { text });
                }
                Some("array") if p.max_items.is_none() => p.max_items = Some(1024),
                Some("object")
                    if p.additional_properties.is_some() && p.max_properties.is_none() =>
                {
                    p.max_properties = Some(256);
                }
                None if int_or_string && p.max_length.is_none() => p.max_length = Some(24),
                _ => {}
            }
        });
    }
}

/// Rewrites schemars' Rust integer formats (`uint8` … `uint64`) to the OpenAPI ones Kubernetes
/// knows (`int32`, `int64`): a current API server warns on every CRD apply about a format it
/// does not recognise. The ranges stay with `minimum`/`maximum`.
pub(super) fn kubernetes_integer_formats(props: &mut JSONSchemaProps) {
    visit(props, &mut |p| {
        let known = match p.format.as_deref() {
            Some("uint8" | "uint16" | "int8" | "int16") => "int32",
            Some("uint32" | "uint64" | "uint") => "int64",
            _ => return,
        };
        p.format = Some(known.to_owned());
    });
}
