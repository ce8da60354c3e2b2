//! Merge patch (RFC 7386) and JSON patch (RFC 6902).

use serde_json::Value;

use crate::error::ApiError;

/// Applies an RFC 7386 merge patch to `target` in place.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(target_map) = target else {
        return;
    };
    for (key, value) in patch_map {
        if value.is_null() {
            target_map.remove(key);
        } else {
            merge_patch(target_map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Applies an RFC 6902 JSON patch; any failed operation rejects the whole patch.
pub fn json_patch(target: &Value, ops: &Value) -> Result<Value, ApiError> {
    let ops = ops
        .as_array()
        .ok_or_else(|| ApiError::bad_request("json patch must be an array"))?;
    let mut doc = target.clone();
    for op in ops {
        apply_op(&mut doc, op)?;
    }
    Ok(doc)
}

fn apply_op(doc: &mut Value, op: &Value) -> Result<(), ApiError> {
    let name = op["op"]
        .as_str()
        .ok_or_else(|| ApiError::bad_request("json patch op without \"op\""))?;
    let path = op["path"]
        .as_str()
        .ok_or_else(|| ApiError::bad_request("json patch op without \"path\""))?;
    let value = || {
        op.get("value")
            .cloned()
            .ok_or_else(|| ApiError::bad_request("op needs \"value\""))
    };
    let from = || {
        op["from"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| ApiError::bad_request("op needs \"from\""))
    };
    match name {
        "add" => add(doc, path, value()?),
        "remove" => remove(doc, path).map(drop),
        "replace" => {
            let slot = doc.pointer_mut(path).ok_or_else(|| missing(path))?;
            *slot = value()?;
            Ok(())
        }
        "move" => {
            let moved = remove(doc, &from()?)?;
            add(doc, path, moved)
        }
        "copy" => {
            let copied = doc
                .pointer(&from()?)
                .cloned()
                .ok_or_else(|| missing(path))?;
            add(doc, path, copied)
        }
        // The real server answers a failed test with 422 Invalid.
        "test" => match doc.pointer(path) {
            Some(current) if *current == value()? => Ok(()),
            _ => Err(ApiError::invalid(format!(
                "the server rejected our request due to an error in our request: testing value {path} failed"
            ))),
        },
        other => Err(ApiError::bad_request(format!(
            "unknown json patch op {other:?}"
        ))),
    }
}

fn missing(path: &str) -> ApiError {
    ApiError::invalid(format!("json patch: path {path:?} does not exist"))
}

fn split_parent(path: &str) -> Result<(&str, String), ApiError> {
    let idx = path
        .rfind('/')
        .ok_or_else(|| ApiError::bad_request(format!("bad json pointer {path:?}")))?;
    let token = path[idx + 1..].replace("~1", "/").replace("~0", "~");
    Ok((&path[..idx], token))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), ApiError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, token) = split_parent(path)?;
    match doc.pointer_mut(parent).ok_or_else(|| missing(path))? {
        Value::Object(map) => {
            map.insert(token, value);
            Ok(())
        }
        Value::Array(items) => {
            let idx = if token == "-" {
                items.len()
            } else {
                token
                    .parse::<usize>()
                    .ok()
                    .filter(|i| *i <= items.len())
                    .ok_or_else(|| missing(path))?
            };
            items.insert(idx, value);
            Ok(())
        }
        _ => Err(missing(path)),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, ApiError> {
    let (parent, token) = split_parent(path)?;
    match doc.pointer_mut(parent).ok_or_else(|| missing(path))? {
        Value::Object(map) => map.remove(&token).ok_or_else(|| missing(path)),
        Value::Array(items) => {
            let idx = token
                .parse::<usize>()
                .ok()
                .filter(|i| *i < items.len())
                .ok_or_else(|| missing(path))?;
            Ok(items.remove(idx))
        }
        _ => Err(missing(path)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_follows_rfc7386_examples() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut doc, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}}));
        let mut doc = json!({"a": ["b"]});
        merge_patch(&mut doc, &json!({"a": ["c"]}));
        assert_eq!(doc, json!({"a": ["c"]}));
    }

    #[test]
    fn json_patch_applies_ops_and_rejects_failed_test() {
        let doc = json!({"a": [1, 2], "b": {"c": 1}});
        let ops = json!([
            {"op": "add", "path": "/a/-", "value": 3},
            {"op": "remove", "path": "/a/0"},
            {"op": "replace", "path": "/b/c", "value": 2},
            {"op": "test", "path": "/b/c", "value": 2},
            {"op": "copy", "from": "/b", "path": "/d"},
            {"op": "move", "from": "/d/c", "path": "/e~1f"},
        ]);
        assert_eq!(
            json_patch(&doc, &ops).unwrap(),
            json!({"a": [2, 3], "b": {"c": 2}, "d": {}, "e/f": 2})
        );
        let err =
            json_patch(&doc, &json!([{"op": "test", "path": "/b/c", "value": 9}])).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            json_patch(&doc, &json!([{"op": "remove", "path": "/x"}]))
                .unwrap_err()
                .code,
            422
        );
    }
}
