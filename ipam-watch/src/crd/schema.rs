//! Hand-written OpenAPI schemas for the metav1 types we embed.
//!
//! k8s-openapi's own `JsonSchema` impls sit behind its `schemars` feature, which would make
//! every crate in the workspace compile schemas for the whole Kubernetes API; these two shapes
//! follow the upstream ones (as `controller-gen` emits them) instead.

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

/// A list of CIDR strings. Validity is checked by the readers, not the apiserver, so one bad
/// value is reported on its object instead of blocking the write that would fix it.
pub(super) fn cidr_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "CIDRs in canonical form, primary family first.",
        "x-kubernetes-list-type": "atomic",
        "maxItems": 2,
        "items": { "type": "string", "maxLength": 64 }
    })
}
