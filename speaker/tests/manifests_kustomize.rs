//! deploy/ renders with `kubectl kustomize`, alone and under overlays that move it to another
//! namespace (and rename it), and the speaker's ValidatingAdmissionPolicy still applies to the
//! service account the speaker DaemonSet really runs as.
//!
//! Needs `kubectl` (with its built-in kustomize). It ships on the project's machine image;
//! Debian bookworm's `kubernetes-client` (kubectl 1.20, kustomize v2) cannot read this
//! layout. Without kubectl the test is skipped with a message on a developer machine and
//! fails under CI (`CI` set), so a missing tool never passes silently there.

mod common;

use std::collections::BTreeSet;

use common::TempDir;
use common::kustomize::*;
use serde_json::Value;

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v}"))
}

/// The username the API server gives the speaker pods: from the rendered DaemonSet's
/// namespace and `serviceAccountName` (which must name a rendered ServiceAccount).
fn speaker_username(docs: &[Value]) -> (String, String) {
    let ds = of_kind(docs, "DaemonSet");
    assert_eq!(ds.len(), 1, "one DaemonSet (the speaker)");
    let ns = str_of(&ds[0]["metadata"]["namespace"], "DaemonSet namespace");
    let sa = str_of(
        &ds[0]["spec"]["template"]["spec"]["serviceAccountName"],
        "serviceAccountName",
    );
    assert!(
        of_kind(docs, "ServiceAccount")
            .iter()
            .any(|s| s["metadata"]["name"] == sa && s["metadata"]["namespace"] == ns),
        "ServiceAccount {ns}/{sa} is rendered"
    );
    (ns.to_string(), format!("system:serviceaccount:{ns}:{sa}"))
}

fn labels_match(obj: &Value, selector: &Value) -> bool {
    let Some(want) = selector["matchLabels"].as_object() else {
        return selector.as_object().is_some_and(|s| s.is_empty());
    };
    assert!(
        selector.get("matchExpressions").is_none(),
        "only matchLabels is evaluated here: {selector}"
    );
    want.iter()
        .all(|(k, v)| obj["metadata"]["labels"][k.as_str()] == *v)
}

/// The parameter objects the binding resolves to, among the rendered objects (the policy's
/// `paramKind`, by `paramRef.name` or `paramRef.selector`); empty without a `paramKind`.
fn params<'a>(docs: &'a [Value], policy: &Value, binding: &Value) -> Vec<&'a Value> {
    let kind = &policy["spec"]["paramKind"];
    if kind.is_null() {
        return Vec::new();
    }
    let r = &binding["spec"]["paramRef"];
    assert!(!r.is_null(), "a policy with paramKind needs paramRef");
    assert_eq!(
        r["parameterNotFoundAction"], "Deny",
        "a missing parameter must fail closed, not match nobody"
    );
    docs.iter()
        .filter(|d| d["apiVersion"] == kind["apiVersion"] && d["kind"] == kind["kind"])
        .filter(|d| r["namespace"].is_null() || d["metadata"]["namespace"] == r["namespace"])
        .filter(|d| match r["name"].as_str() {
            Some(name) => d["metadata"]["name"] == name,
            None => labels_match(d, &r["selector"]),
        })
        .collect()
}

/// Evaluates the usernames a `speaker-only` match condition accepts, for the two shapes it
/// may take: `request.userInfo.username == <string>` and
/// `[has(params.subjects) &&] params.subjects.exists(s, s.kind == 'ServiceAccount' &&
/// request.userInfo.username == <concatenation of literals and s.<field>>)`.
fn accepted_usernames(expr: &str, params: &[&Value]) -> BTreeSet<String> {
    let expr = expr.split_whitespace().collect::<Vec<_>>().join(" ");
    let (_, rhs) = expr
        .split_once("request.userInfo.username ==")
        .unwrap_or_else(|| panic!("the condition compares request.userInfo.username: {expr}"));
    let Some(exists) = expr.find("params.subjects.exists(") else {
        assert!(params.is_empty() || !expr.contains("params"), "{expr}");
        return [literal(rhs.trim())].into();
    };
    let after = &expr[exists + "params.subjects.exists(".len()..];
    let var = after.split(',').next().unwrap().trim();
    let rhs = rhs
        .trim()
        .strip_suffix(')')
        .expect("exists(...) closes last");
    let only_sa = expr.contains(&format!("{var}.kind == 'ServiceAccount'"));
    let mut out = BTreeSet::new();
    for p in params {
        for s in p["subjects"].as_array().into_iter().flatten() {
            if only_sa && s["kind"] != "ServiceAccount" {
                continue;
            }
            let user: String = rhs
                .split('+')
                .map(str::trim)
                .map(|t| match t.strip_prefix(&format!("{var}.")) {
                    Some(field) => str_of(&s[field], field).to_string(),
                    None => literal(t),
                })
                .collect();
            out.insert(user);
        }
    }
    out
}

fn literal(t: &str) -> String {
    let quoted = (t.starts_with('\'') && t.ends_with('\'') && t.len() >= 2)
        || (t.starts_with('"') && t.ends_with('"') && t.len() >= 2);
    assert!(quoted, "expected a string literal, got {t}");
    t[1..t.len() - 1].to_string()
}

/// The speaker policy, bound, applies to the speaker's real username, and to nothing else.
fn assert_policy_matches_speaker(docs: &[Value], want_ns: &str, what: &str) {
    let (ns, user) = speaker_username(docs);
    assert_eq!(
        ns, want_ns,
        "{what}: the speaker runs in the overlay's namespace"
    );
    let policies: Vec<&Value> = of_kind(docs, "ValidatingAdmissionPolicy")
        .into_iter()
        .filter(|p| {
            p["spec"]["matchConstraints"]["resourceRules"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["resources"].to_string().contains("nodebgpstatuses"))
        })
        .collect();
    assert_eq!(policies.len(), 1, "{what}: one policy on NodeBGPStatus");
    let policy = policies[0];
    let name = &policy["metadata"]["name"];
    let bindings = of_kind(docs, "ValidatingAdmissionPolicyBinding");
    let binding = bindings
        .iter()
        .find(|b| b["spec"]["policyName"] == *name)
        .unwrap_or_else(|| panic!("{what}: a binding names policy {name}"));
    assert_eq!(binding["spec"]["validationActions"][0], "Deny", "{what}");
    let params = params(docs, policy, binding);
    if !policy["spec"]["paramKind"].is_null() {
        assert!(
            !params.is_empty(),
            "{what}: the binding finds its parameter"
        );
    }
    let condition = policy["spec"]["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "speaker-only")
        .unwrap_or_else(|| panic!("{what}: match condition speaker-only"));
    let accepted = accepted_usernames(str_of(&condition["expression"], "expression"), &params);
    assert_eq!(
        accepted,
        BTreeSet::from([user.clone()]),
        "{what}: the policy must match the speaker's username {user}"
    );
}

/// The bug: the policy's match condition hard-coded
/// `system:serviceaccount:podcidr-system:podcidr-bgp-speaker`; an overlay with `namespace:`
/// moved the ServiceAccount but not that string, and the policy silently matched nobody.
/// (The overlay also failed to render at all: two Roles of one name, in podcidr-system and
/// default, collided once moved into one namespace.)
#[test]
fn speaker_admission_policy_follows_kustomize_namespace_overlay() {
    if !have_kubectl() {
        return;
    }
    let base = render(&deploy());
    assert_policy_matches_speaker(&base, "podcidr-system", "deploy/");

    let tmp = TempDir::new("kustomize");
    let moved = render(&overlay(&tmp, "ns", "namespace: other-ns"));
    assert_policy_matches_speaker(&moved, "other-ns", "namespace overlay");
    let renamed = render(&overlay(
        &tmp,
        "ns-prefix",
        "namespace: other-ns\nnamePrefix: acme-",
    ));
    assert_policy_matches_speaker(&renamed, "other-ns", "namespace + namePrefix overlay");
    assert!(
        renamed
            .iter()
            .all(|d| !d.to_string().contains("podcidr-system")),
        "nothing in the overlay still names the base namespace"
    );
}

/// The pod's volumes and the speaker container's mounts and security context.
fn speaker_pod(docs: &[Value]) -> (&Value, &Value) {
    let ds = of_kind(docs, "DaemonSet");
    assert_eq!(ds.len(), 1, "one DaemonSet (the speaker)");
    let spec = &ds[0]["spec"]["template"]["spec"];
    let container = spec["containers"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "speaker"))
        .expect("a container named speaker");
    (spec, container)
}

/// cluster-pool mode with the standard CNI plugins: the `cni` component mounts the host's CNI
/// config dir where the documented `confDir` points, and only when asked.
#[test]
fn cni_component_mounts_the_host_cni_config_dir_only_when_asked() {
    if !have_kubectl() {
        return;
    }
    let base = render(&deploy());
    let (spec, _) = speaker_pod(&base);
    assert!(
        !spec.to_string().contains("hostPath"),
        "the base touches no host directory: {spec}"
    );

    let tmp = TempDir::new("kustomize-cni");
    let docs = render(&with_component(&tmp, "cni"));
    let (spec, container) = speaker_pod(&docs);
    let volume = spec["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["hostPath"]["path"] == "/etc/cni/net.d"))
        .unwrap_or_else(|| panic!("a hostPath volume for /etc/cni/net.d: {spec}"));
    let mount = container["volumeMounts"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["name"] == volume["name"]))
        .unwrap_or_else(|| panic!("the speaker mounts it: {container}"));
    assert_eq!(mount["mountPath"], "/host/etc/cni/net.d", "docs' confDir");
    assert_ne!(mount["readOnly"], true);
    let sc = &container["securityContext"];
    assert_eq!(
        sc["runAsUser"], 0,
        "root-owned /etc/cni/net.d (the run model): {sc}"
    );
    assert_eq!(
        sc["capabilities"]["drop"],
        serde_json::json!(["ALL"]),
        "{sc}"
    );
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{sc}");
    // The base's other mounts survive the patch.
    assert!(
        container["volumeMounts"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["name"] == "config")),
        "{container}"
    );
}
