//! Type-specific validation the real API server does and code under test can get wrong.
//!
//! Only `events.k8s.io/v1` Events are checked, as upstream's `ValidateEventCreate` and
//! `ValidateEventUpdate` do for that API version (strict mode): required fields and length
//! limits, the namespace rule for cluster-scoped `regarding` objects, a `series` with
//! `count >= 2`, the deprecated core/v1 fields unset, and on update every field but
//! `series` (and metadata) immutable. That is what makes a client's de-duplication (a
//! PATCH of the series, never of the note) testable here.

use serde_json::Value;

use crate::error::ApiError;
use crate::resource::Gvr;

const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const INSTANCE_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

fn is_events_v1(gvr: &Gvr) -> bool {
    gvr.api_version == "events.k8s.io/v1" && gvr.plural == "events"
}

/// Checks an object about to be created.
pub(crate) fn on_create(gvr: &Gvr, obj: &Value) -> Result<(), ApiError> {
    if !is_events_v1(gvr) {
        return Ok(());
    }
    let mut errs = event_fields(obj);
    for field in [
        "deprecatedCount",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedSource",
    ] {
        if !obj[field].is_null() {
            errs.push(format!("{field}: Invalid value: \"\": needs to be unset"));
        }
    }
    errs.extend(series(obj));
    verdict(errs)
}

/// Checks the result of an update or patch against the stored object.
pub(crate) fn on_update(gvr: &Gvr, old: &Value, new: &Value) -> Result<(), ApiError> {
    if !is_events_v1(gvr) {
        return Ok(());
    }
    let mut errs = event_fields(new);
    if old["series"] != new["series"] {
        errs.extend(series(new));
    }
    for field in [
        "regarding",
        "reason",
        "note",
        "type",
        "eventTime",
        "action",
        "related",
        "reportingController",
        "reportingInstance",
        "deprecatedSource",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
    ] {
        if old[field] != new[field] {
            errs.push(format!("{field}: Invalid value: field is immutable"));
        }
    }
    verdict(errs)
}

fn verdict(errs: Vec<String>) -> Result<(), ApiError> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(format!(
            "Event.events.k8s.io is invalid: {}",
            errs.join(", ")
        )))
    }
}

fn text(obj: &Value, field: &str) -> String {
    obj[field].as_str().unwrap_or_default().to_owned()
}

/// Upstream's `legacyValidateEvent` for an Event with `eventTime` set, plus strict mode's
/// `eventTime` and `type` rules.
fn event_fields(obj: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    if text(obj, "eventTime").is_empty() {
        errs.push("eventTime: Required value".to_owned());
    }
    let type_ = text(obj, "type");
    if type_ != "Normal" && type_ != "Warning" {
        errs.push(format!(
            "type: Invalid value: \"{type_}\": has invalid value"
        ));
    }
    let namespace = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let regarding_ns = obj["regarding"]["namespace"].as_str().unwrap_or_default();
    if regarding_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
        errs.push(format!(
            "regarding.namespace: Invalid value: \"\": does not match event.namespace {namespace:?}"
        ));
    }
    let controller = text(obj, "reportingController");
    if controller.is_empty() {
        errs.push("reportingController: Required value".to_owned());
    } else if !is_qualified_name(&controller) {
        errs.push(format!(
            "reportingController: Invalid value: \"{controller}\": must be a qualified name"
        ));
    }
    for (field, required, limit) in [
        ("reportingInstance", true, INSTANCE_LIMIT),
        ("action", true, ACTION_LIMIT),
        ("reason", true, REASON_LIMIT),
        ("note", false, NOTE_LIMIT),
    ] {
        let value = text(obj, field);
        if required && value.is_empty() {
            errs.push(format!("{field}: Required value"));
        }
        if value.len() > limit {
            errs.push(format!(
                "{field}: Invalid value: \"\": can have at most {limit} characters"
            ));
        }
    }
    errs
}

fn series(obj: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let series = &obj["series"];
    if series.is_null() {
        return errs;
    }
    if series["count"].as_i64().unwrap_or(0) < 2 {
        errs.push("series.count: Invalid value: \"\": should be at least 2".to_owned());
    }
    if series["lastObservedTime"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        errs.push("series.lastObservedTime: Required value".to_owned());
    }
    errs
}

/// `[prefix/]name`: a DNS subdomain prefix and a name of at most 63 alphanumerics, `-`, `_`
/// and `.`, starting and ending alphanumeric (upstream `IsQualifiedName`).
fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && alnum(name.chars().next())
        && alnum(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && alnum(label.chars().next())
                    && alnum(label.chars().last())
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok && prefix_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gvr() -> Gvr {
        Gvr::new("events.k8s.io/v1", "events")
    }

    fn event() -> Value {
        json!({
            "metadata": {"name": "node-a.1", "namespace": "default"},
            "eventTime": "2025-01-01T00:00:00.000000Z",
            "type": "Normal",
            "reason": "BGPSessionEstablished",
            "action": "Peer tor1",
            "note": "up",
            "reportingController": "podcidr-bgp-speaker",
            "reportingInstance": "node-a",
            "regarding": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}
        })
    }

    #[test]
    fn events_v1_create_rules_follow_the_api_server() {
        assert_eq!(on_create(&gvr(), &event()), Ok(()));
        for (field, value) in [
            ("eventTime", Value::Null),
            ("type", json!("Info")),
            ("reason", Value::Null),
            ("action", json!("x".repeat(129))),
            ("note", json!("x".repeat(1025))),
            ("reportingController", json!("Not A Name")),
            ("reportingInstance", Value::Null),
            ("deprecatedCount", json!(1)),
            (
                "series",
                json!({"count": 1, "lastObservedTime": "2025-01-01T00:00:00Z"}),
            ),
        ] {
            let mut e = event();
            e[field] = value;
            assert!(on_create(&gvr(), &e).is_err(), "{field} accepted");
        }
        // A cluster-scoped object's Events live in "default" or "kube-system" only.
        let mut e = event();
        e["metadata"]["namespace"] = json!("podcidr-system");
        assert!(on_create(&gvr(), &e).is_err());
        // Other types are not checked.
        assert_eq!(on_create(&Gvr::new("v1", "events"), &json!({})), Ok(()));
    }

    #[test]
    fn events_v1_updates_may_change_only_the_series() {
        let old = event();
        let mut new = event();
        new["series"] = json!({"count": 2, "lastObservedTime": "2025-01-01T00:00:01.000000Z"});
        assert_eq!(on_update(&gvr(), &old, &new), Ok(()));
        new["note"] = json!("changed");
        assert!(on_update(&gvr(), &old, &new).is_err());
    }

    #[test]
    fn qualified_names() {
        for ok in ["podcidr-bgp-speaker", "podcidr.io/speaker", "a", "a_b.c"] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "Has Space", "UPPER.io/x", &"x".repeat(64)] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
    }
}
