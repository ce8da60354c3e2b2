//! The speaker's ValidatingAdmissionPolicy, evaluated as the API server evaluates it: the
//! rendered policy and binding decide which requests they match (resource rules, namespace
//! selectors on the policy and on the binding), their CEL match conditions and validations
//! run in a CEL evaluator, and `authorizer` answers from the rendered RBAC.
//!
//! What it guards against: an earlier policy matched every Lease write in the cluster and took
//! its parameter from a labelled ClusterRoleBinding with `parameterNotFoundAction: Deny`.
//! The API server resolves parameters before match conditions, so while that binding was
//! missing or not yet in its informer, every Lease write (kubelet heartbeats, every leader
//! election) was denied and nodes went NotReady. Kubernetes 1.20 (the real API server of the
//! test suite) has no admission policies, so this is proven here, with a CEL evaluator.

use crate::common;
use integration_tests::skip::Need;

use std::sync::Arc;

use cel::objects::Value as CelValue;
use cel::{Context, Program};
use common::TempDir;
use common::kustomize::*;
use common::rbac::{self, Ask, User};
use serde_json::{Value, json};

const LEASE_NS: &str = "podcidr-node-lease";

/// One admission request, as far as the policy can see it.
#[derive(Debug, Clone)]
struct Request<'a> {
    user: User,
    /// `authentication.kubernetes.io/node-name` of a node-bound service-account token.
    node_name: Option<&'a str>,
    group: &'a str,
    /// `leases`, `nodebgpstatuses`, `nodebgpstatuses/status`.
    resource: &'a str,
    namespace: Option<&'a str>,
    name: &'a str,
    operation: &'a str,
}

#[derive(Debug, PartialEq, Eq)]
enum Decision {
    /// No policy matched (resource, namespace or match condition): admitted untouched.
    NotEvaluated,
    Admitted,
    Denied(String),
}

/// Labels of a namespace: the rendered Namespace's, else only the label every namespace
/// carries (`kubernetes.io/metadata.name`).
fn namespace_labels(docs: &[Value], ns: &str) -> Value {
    let mut labels = of_kind(docs, "Namespace")
        .into_iter()
        .find(|n| n["metadata"]["name"] == ns)
        .map(|n| n["metadata"]["labels"].clone())
        .unwrap_or_else(|| json!({}));
    labels["kubernetes.io/metadata.name"] = json!(ns);
    labels
}

/// A metav1.LabelSelector against labels; an absent selector selects everything.
fn selects(selector: &Value, labels: &Value) -> bool {
    if selector.is_null() {
        return true;
    }
    let by_label = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels[k.as_str()] == *v);
    let by_expr = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap();
            let values: Vec<&Value> = e["values"].as_array().into_iter().flatten().collect();
            let have = &labels[key];
            match e["operator"].as_str().unwrap() {
                "In" => values.contains(&have),
                "NotIn" => !values.contains(&have),
                "Exists" => !have.is_null(),
                "DoesNotExist" => have.is_null(),
                op => panic!("unknown selector operator {op}"),
            }
        });
    by_label && by_expr
}

fn rules_match(rules: &Value, req: &Request) -> bool {
    rules.as_array().into_iter().flatten().any(|r| {
        let has = |field: &str, want: &str| {
            r[field]
                .as_array()
                .is_some_and(|l| l.iter().any(|v| v == "*" || v == want))
        };
        has("apiGroups", req.group)
            && has("resources", req.resource)
            && has("operations", req.operation)
    })
}

/// `request.namespace` selection: a namespaced request is matched only when its namespace's
/// labels satisfy the selector; a cluster-scoped one is never skipped by a namespace selector.
fn namespace_selected(docs: &[Value], selector: &Value, req: &Request) -> bool {
    match req.namespace {
        Some(ns) => selects(selector, &namespace_labels(docs, ns)),
        None => true,
    }
}

/// Evaluates one CEL expression with the request's variables; `authorizer` answers from the
/// rendered RBAC for the request's user. `params` exists only when the policy has a parameter.
fn eval(
    docs: &Arc<Vec<Value>>,
    req: &Request,
    params: Option<&Value>,
    expr: &str,
) -> Result<bool, String> {
    let program = Program::compile(expr).map_err(|e| format!("compile {expr}: {e}"))?;
    let mut ctx = Context::default();
    let mut extra = serde_json::Map::new();
    if let Some(node) = req.node_name {
        extra.insert(
            "authentication.kubernetes.io/node-name".into(),
            json!([node]),
        );
    }
    let request = json!({
        "operation": req.operation,
        "namespace": req.namespace.unwrap_or(""),
        "name": req.name,
        "userInfo": {"username": req.user.name, "groups": req.user.groups, "extra": extra},
    });
    let object = json!({"metadata": {"name": req.name, "namespace": req.namespace.unwrap_or("")}});
    ctx.add_variable("request", request).unwrap();
    ctx.add_variable("object", object).unwrap();
    ctx.add_variable("authorizer", json!({})).unwrap();
    if let Some(p) = params {
        ctx.add_variable("params", p.clone()).unwrap();
    }
    // authorizer.group(g).resource(r).check(verb).allowed(), as Kubernetes' CEL library.
    ctx.add_function(
        "group",
        |cel::extractors::This(this): cel::extractors::This<CelValue>, g: Arc<String>| {
            with_key(this, "group", g.as_str())
        },
    )
    .unwrap();
    ctx.add_function(
        "resource",
        |cel::extractors::This(this): cel::extractors::This<CelValue>, r: Arc<String>| {
            with_key(this, "resource", r.as_str())
        },
    )
    .unwrap();
    let (rbac_docs, user, ns) = (
        Arc::clone(docs),
        req.user.clone(),
        req.namespace.map(str::to_owned),
    );
    ctx.add_function(
        "check",
        move |cel::extractors::This(this): cel::extractors::This<CelValue>, verb: Arc<String>| {
            let get = |k: &str| match &this {
                CelValue::Map(m) => match m.get(&cel::objects::Key::from(k)) {
                    Some(CelValue::String(s)) => s.to_string(),
                    _ => String::new(),
                },
                _ => String::new(),
            };
            let (group, resource) = (get("group"), get("resource"));
            let ok = rbac::allowed(
                &rbac_docs,
                &user,
                &Ask {
                    group: &group,
                    resource: &resource,
                    verb: &verb,
                    namespace: ns.as_deref(),
                },
            );
            with_key(this.clone(), "allowed", if ok { "true" } else { "false" })
        },
    )
    .unwrap();
    ctx.add_function(
        "allowed",
        |cel::extractors::This(this): cel::extractors::This<CelValue>| match this {
            CelValue::Map(m) => {
                m.get(&cel::objects::Key::from("allowed")) == Some(&CelValue::from("true"))
            }
            _ => false,
        },
    )
    .unwrap();
    match program.execute(&ctx) {
        Ok(CelValue::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("{expr} gave {other:?}, not a bool")),
        Err(e) => Err(format!("{expr}: {e}")),
    }
}

fn with_key(this: CelValue, key: &str, value: &str) -> CelValue {
    let mut map: std::collections::HashMap<String, String> = match this {
        CelValue::Map(m) => m
            .map
            .iter()
            .filter_map(|(k, v)| match (k, v) {
                (cel::objects::Key::String(k), CelValue::String(v)) => {
                    Some((k.to_string(), v.to_string()))
                }
                _ => None,
            })
            .collect(),
        _ => Default::default(),
    };
    map.insert(key.into(), value.into());
    map.into()
}

/// What the API server decides for `req` under every rendered policy and binding.
fn decide(docs: &Arc<Vec<Value>>, req: &Request) -> Decision {
    let mut decision = Decision::NotEvaluated;
    for policy in of_kind(docs, "ValidatingAdmissionPolicy") {
        let spec = &policy["spec"];
        let constraints = &spec["matchConstraints"];
        if !rules_match(&constraints["resourceRules"], req)
            || !namespace_selected(docs, &constraints["namespaceSelector"], req)
        {
            continue;
        }
        for binding in of_kind(docs, "ValidatingAdmissionPolicyBinding")
            .into_iter()
            .filter(|b| b["spec"]["policyName"] == policy["metadata"]["name"])
        {
            let resources = &binding["spec"]["matchResources"];
            if !namespace_selected(docs, &resources["namespaceSelector"], req) {
                continue;
            }
            let fail = |why: String| match spec["failurePolicy"].as_str() {
                Some("Ignore") => Decision::Admitted,
                _ => Decision::Denied(why),
            };
            // The API server resolves a policy's parameter before its match conditions.
            let params = param(docs, spec, &binding["spec"]);
            if !spec["paramKind"].is_null() && params.is_none() {
                match binding["spec"]["paramRef"]["parameterNotFoundAction"].as_str() {
                    Some("Deny") => return fail("no params found for policy binding".into()),
                    _ => continue,
                }
            }
            let mut matched = true;
            for c in spec["matchConditions"].as_array().into_iter().flatten() {
                match eval(docs, req, params, c["expression"].as_str().unwrap()) {
                    Ok(true) => {}
                    Ok(false) => matched = false,
                    Err(e) => return fail(e),
                }
            }
            if !matched {
                continue;
            }
            decision = Decision::Admitted;
            for v in spec["validations"].as_array().into_iter().flatten() {
                match eval(docs, req, params, v["expression"].as_str().unwrap()) {
                    Ok(true) => {}
                    Ok(false) => return Decision::Denied(v["message"].to_string()),
                    Err(e) => return fail(e),
                }
            }
        }
    }
    decision
}

/// The binding's parameter among the objects (by `paramRef.name` or `.selector`).
fn param<'a>(docs: &'a [Value], spec: &Value, binding: &Value) -> Option<&'a Value> {
    let kind = &spec["paramKind"];
    let r = &binding["paramRef"];
    if kind.is_null() {
        return None;
    }
    docs.iter()
        .filter(|d| d["apiVersion"] == kind["apiVersion"] && d["kind"] == kind["kind"])
        .find(|d| match r["name"].as_str() {
            Some(name) => d["metadata"]["name"] == name,
            None => selects(&r["selector"], &d["metadata"]["labels"]),
        })
}

fn speaker() -> User {
    User::service_account("podcidr-system", "podcidr-bgp-speaker")
}

fn lease<'a>(user: User, node: Option<&'a str>, ns: &'a str, name: &'a str) -> Request<'a> {
    Request {
        user,
        node_name: node,
        group: "coordination.k8s.io",
        resource: "leases",
        namespace: Some(ns),
        name,
        operation: "UPDATE",
    }
}

fn status<'a>(user: User, node: Option<&'a str>, name: &'a str) -> Request<'a> {
    Request {
        user,
        node_name: node,
        group: "podcidr.io",
        resource: "nodebgpstatuses/status",
        namespace: None,
        name,
        operation: "UPDATE",
    }
}

/// `docs` as installed: with the namespaces (deploy/crds/, applied first) and `admin`.
fn rendered(mut docs: Vec<Value>, admin: &User) -> Arc<Vec<Value>> {
    docs.extend(
        render(&crds())
            .into_iter()
            .filter(|d| d["kind"] == "Namespace"),
    );
    Arc::new(rbac::with_cluster_admin(&docs, admin))
}

/// The incident: kubelet heartbeats and leader elections elsewhere must never reach the
/// policy, whatever else exists: checked with the rendered install intact and with every
/// ClusterRoleBinding gone (deleted first by an uninstall, or not yet seen by the API
/// server's informer; the old policy's parameter was one of them).
#[test]
fn lease_writes_outside_the_speaker_lease_namespace_are_never_evaluated() {
    integration_tests::require!(Need::Kubectl);
    let admin = User::named("kubernetes-admin", &["system:masters"]);
    let intact = render(&deploy());
    let no_bindings: Vec<Value> = intact
        .iter()
        .filter(|d| d["kind"] != "ClusterRoleBinding")
        .cloned()
        .collect();
    for docs in [rendered(no_bindings, &admin), rendered(intact, &admin)] {
        writes_elsewhere_are_not_evaluated(&docs, &admin);
    }
}

fn writes_elsewhere_are_not_evaluated(docs: &Arc<Vec<Value>>, admin: &User) {
    let kubelet = User::named("system:node:node-a", &["system:nodes"]);
    let kcm = User::named("system:kube-controller-manager", &[]);
    let allocator = User::service_account("podcidr-system", "podcidr-bgp-allocator");
    for (what, req) in [
        (
            "kubelet heartbeat",
            lease(kubelet, Some("node-a"), "kube-node-lease", "node-a"),
        ),
        (
            "controller-manager election",
            lease(kcm, None, "kube-system", "kube-controller-manager"),
        ),
        (
            "allocator election",
            lease(
                allocator,
                Some("node-b"),
                "podcidr-system",
                "podcidr-bgp-allocator",
            ),
        ),
        (
            "speaker token elsewhere",
            lease(speaker(), Some("node-a"), "default", "node-b"),
        ),
        (
            "admin in default",
            lease(admin.clone(), None, "default", "anything"),
        ),
    ] {
        for op in ["CREATE", "UPDATE"] {
            let req = Request {
                operation: op,
                ..req.clone()
            };
            assert_eq!(decide(docs, &req), Decision::NotEvaluated, "{what} ({op})");
        }
    }
}

#[test]
fn a_speaker_writes_only_the_lease_and_status_named_after_its_node() {
    integration_tests::require!(Need::Kubectl);
    let admin = User::named("kubernetes-admin", &["system:masters"]);
    let docs = rendered(render(&deploy()), &admin);
    assert_eq!(
        decide(&docs, &lease(speaker(), Some("node-a"), LEASE_NS, "node-a")),
        Decision::Admitted
    );
    assert_eq!(
        decide(&docs, &status(speaker(), Some("node-a"), "node-a")),
        Decision::Admitted
    );
    for req in [
        lease(speaker(), Some("node-a"), LEASE_NS, "node-b"),
        status(speaker(), Some("node-a"), "node-b"),
        // A token not bound to a node (a stolen, non-pod token) writes nothing.
        lease(speaker(), None, LEASE_NS, "node-a"),
        status(speaker(), None, "node-a"),
    ] {
        assert!(
            matches!(decide(&docs, &req), Decision::Denied(_)),
            "{req:?} must be denied"
        );
    }
}

/// Only the speaker's identity is ever denied: an administrator (every verb) and other pods'
/// service accounts writing the same objects are not speakers.
#[test]
fn no_identity_but_the_speakers_is_denied() {
    integration_tests::require!(Need::Kubectl);
    let admin = User::named("kubernetes-admin", &["system:masters"]);
    let docs = rendered(render(&deploy()), &admin);
    let other = User::service_account("podcidr-system", "podcidr-bgp-allocator");
    for req in [
        lease(admin.clone(), None, LEASE_NS, "node-b"),
        status(admin.clone(), None, "node-b"),
        lease(other.clone(), Some("node-a"), LEASE_NS, "node-b"),
        status(other, Some("node-a"), "node-b"),
    ] {
        assert_eq!(decide(&docs, &req), Decision::NotEvaluated, "{req:?}");
    }
}

/// Identity comes from the RBAC grant, so it follows kustomize renames (no string inside CEL
/// to go stale): with `namePrefix`, the renamed service account is still the one pinned.
#[test]
fn the_policy_follows_a_name_prefix_overlay() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("policy-prefix");
    let admin = User::named("kubernetes-admin", &["system:masters"]);
    let docs = rendered(
        render(&overlay(&tmp, "prefix", "namePrefix: acme-")),
        &admin,
    );
    let renamed = User::service_account("podcidr-system", "acme-podcidr-bgp-speaker");
    assert!(matches!(
        decide(
            &docs,
            &lease(renamed.clone(), Some("node-a"), LEASE_NS, "node-b")
        ),
        Decision::Denied(_)
    ));
    assert_eq!(
        decide(&docs, &lease(renamed, Some("node-a"), LEASE_NS, "node-a")),
        Decision::Admitted
    );
}
