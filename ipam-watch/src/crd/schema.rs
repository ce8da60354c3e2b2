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
