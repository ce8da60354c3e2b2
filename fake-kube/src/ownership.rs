//! Server-side apply field ownership (`metadata.managedFields`), as kube-apiserver 1.22+
//! keeps it for appliers: one `Apply` entry per manager and subresource, listing the fields
//! its last apply set. A manager's next apply removes the fields it applied before and leaves
//! out now, unless another applier still owns them; a field another writer changed since
//! (an update, or a forced apply with a new value) is no longer the first applier's.
//!
//! Simplified: lists are atomic (owned whole, no per-key ownership of list-maps), only
//! `Apply` entries are recorded (updates take ownership away but get no entry), conflicts
//! are never reported (every apply acts as forced), and entries carry no `time`, so an
//! apply that changes nothing stays a no-op.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The main resource: everything but `.status`.
    Main,
    /// The `/status` subresource: only `.status`.
    Status,
    /// Direct writes from the handle: everything.
    Whole,
}

type Path = Vec<String>;

/// `metadata` fields an apply can own; the rest is the server's or the request's identity.
const OWNED_META: [&str; 4] = ["labels", "annotations", "ownerReferences", "finalizers"];

fn leaves(value: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    match value {
        Value::Null => {}
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                prefix.push(k.clone());
                leaves(v, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The fields an apply body sets within `scope` (`null` sets nothing).
fn applied(body: &Value, scope: Scope) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    for (k, v) in body.as_object().into_iter().flatten() {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                for field in OWNED_META {
                    if let Some(v) = v.get(field) {
                        leaves(v, &mut vec![k.clone(), field.to_owned()], &mut out);
                    }
                }
            }
            "status" if scope != Scope::Status => {}
            _ if scope == Scope::Status && k != "status" => {}
            _ => leaves(v, &mut vec![k.clone()], &mut out),
        }
    }
    out
}

/// `fieldsV1`: `{"f:spec": {"f:nodeName": {}}}`.
fn encode(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in paths {
        let mut node = &mut root;
        for key in path {
            let next = node.entry(format!("f:{key}")).or_insert_with(|| json!({}));
            let Some(map) = next.as_object_mut() else {
                break;
            };
            node = map;
        }
    }
    Value::Object(root)
}

fn decode(fields: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    for (k, v) in fields.as_object().into_iter().flatten() {
        let Some(name) = k.strip_prefix("f:") else {
            continue;
        };
        prefix.push(name.to_owned());
        if v.as_object().is_some_and(Map::is_empty) {
            out.insert(prefix.clone());
        } else {
            decode(v, prefix, out);
        }
        prefix.pop();
    }
}

fn paths_of(entry: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    decode(&entry["fieldsV1"], &mut Vec::new(), &mut out);
    out
}

fn get<'a>(value: &'a Value, path: &Path) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, k| v.get(k))
}

fn remove(value: &mut Value, path: &Path) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let parent = parents.iter().try_fold(&mut *value, |v, k| v.get_mut(k));
    let Some(Value::Object(map)) = parent else {
        return;
    };
    map.remove(last);
    // `metadata` is typed (ObjectMeta): an emptied map such as `labels` is not serialized.
    if map.is_empty() && parents.len() == 2 && parents[0] == "metadata" {
        remove(value, &parents.to_vec());
    }
}

fn entries(obj: &Value) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn set_entries(obj: &mut Value, entries: Vec<Value>) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}

fn is_apply(entry: &Value) -> bool {
    entry["operation"] == "Apply"
}

/// Takes from every applier the fields that differ between `old` and `new` except those in
/// `keep`; drops entries left with nothing.
fn disown_changed(entries: &mut Vec<Value>, old: &Value, new: &Value, keep: Option<usize>) {
    let mut i = 0;
    entries.retain_mut(|entry| {
        let this = i;
        i += 1;
        if Some(this) == keep || !is_apply(entry) {
            return true;
        }
        let before = paths_of(entry);
        let after: BTreeSet<Path> = before
            .iter()
            .filter(|p| get(old, p) == get(new, p))
            .cloned()
            .collect();
        if after.len() != before.len() {
            entry["fieldsV1"] = encode(&after);
        }
        !after.is_empty()
    });
}

/// Completes an apply by `manager` through `scope`: `new` is `old` with `body` merged in.
/// Removes what the manager no longer applies (and nobody else does), records its entry.
pub(crate) fn apply(old: &Value, new: &mut Value, body: &Value, manager: &str, scope: Scope) {
    let subresource = if scope == Scope::Status { "status" } else { "" };
    let owned = applied(body, scope);
    let mut all = entries(old);
    let mine = all.iter().position(|e| {
        is_apply(e)
            && e["manager"] == manager
            && e["subresource"].as_str().unwrap_or_default() == subresource
    });
    let before = mine.map(|i| paths_of(&all[i])).unwrap_or_default();
    let others: BTreeSet<Path> = all
        .iter()
        .enumerate()
        .filter(|(i, e)| Some(*i) != mine && is_apply(e))
        .flat_map(|(_, e)| paths_of(e))
        .collect();
    for path in before.difference(&owned) {
        if !others.contains(path) {
            remove(new, path);
        }
    }
    disown_changed(&mut all, old, new, mine);
    let mut entry = json!({
        "manager": manager, "operation": "Apply",
        "apiVersion": body["apiVersion"].clone(),
        "fieldsType": "FieldsV1", "fieldsV1": encode(&owned),
    });
    if !subresource.is_empty() {
        entry["subresource"] = json!(subresource);
    }
    let mine = all.iter().position(|e| {
        is_apply(e)
            && e["manager"] == manager
            && e["subresource"].as_str().unwrap_or_default() == subresource
    });
    match mine {
        Some(i) => all[i] = entry,
        None => all.push(entry),
    }
    set_entries(new, all);
}

/// Any other write: `managedFields` carry over when the request leaves them out, and the
/// fields it changed are no longer any applier's.
pub(crate) fn update(old: &Value, new: &mut Value) {
    if new["metadata"].get("managedFields").is_none() {
        set_entries(new, entries(old));
    }
    let mut all = entries(new);
    disown_changed(&mut all, old, new, None);
    set_entries(new, all);
}
