//! Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/{group}/{version}`) built from
//! the registered types plus every type written so far, so `kube::Discovery` works.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::resource::Gvr;
use crate::store::TypeInfo;

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The discovery document for `path`, or `None` if `path` is not a discovery path.
pub(crate) fn document(path: &str, types: &BTreeMap<Gvr, TypeInfo>) -> Option<Value> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["api"] => Some(
            json!({"kind": "APIVersions", "apiVersion": "v1", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        ),
        ["apis"] => Some(group_list(types)),
        ["apis", group] => group_list(types)["groups"]
            .as_array()?
            .iter()
            .find(|g| g["name"] == *group)
            .map(|g| {
                let mut g = g.clone();
                g["kind"] = json!("APIGroup");
                g["apiVersion"] = json!("v1");
                g
            }),
        ["api", version] => Some(resource_list(version, types)),
        ["apis", group, version] => Some(resource_list(&format!("{group}/{version}"), types)),
        _ => None,
    }
}

fn group_list(types: &BTreeMap<Gvr, TypeInfo>) -> Value {
    let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for gvr in types.keys() {
        if let Some((group, version)) = gvr.api_version.split_once('/') {
            let versions = groups.entry(group).or_default();
            if !versions.contains(&version) {
                versions.push(version);
            }
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
                .collect();
            json!({"name": group, "versions": versions, "preferredVersion": versions[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn resource_list(group_version: &str, types: &BTreeMap<Gvr, TypeInfo>) -> Value {
    let resources: Vec<Value> = types
        .iter()
        .filter(|(gvr, _)| gvr.api_version == group_version)
        .flat_map(|(gvr, info)| {
            let main = json!({
                "name": gvr.plural,
                "singularName": info.kind.to_lowercase(),
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": VERBS,
            });
            let status = json!({
                "name": format!("{}/status", gvr.plural),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": ["get", "patch", "update"],
            });
            [main, status]
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}
