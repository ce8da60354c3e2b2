//! deploy/ renders with `kubectl kustomize`, alone and under overlays, and the speaker's
//! ValidatingAdmissionPolicy stays confined to the speaker's own objects and identity.
//!
//! Needs `kubectl` (with its built-in kustomize). It ships on the project's machine image;
//! Debian bookworm's `kubernetes-client` (kubectl 1.20, kustomize v2) cannot read this
//! layout. Without kubectl the test is skipped with a message on a developer machine and
//! fails under CI (`CI` set), so a missing tool never passes silently there.

use crate::common;
use integration_tests::skip::Need;

use std::collections::BTreeSet;

use common::TempDir;
use common::kustomize::*;
use common::rbac;
use serde_json::Value;

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v}"))
}

/// The username the API server gives the speaker pods: from the rendered DaemonSet's
/// namespace and `serviceAccountName` (which must name a rendered ServiceAccount).
fn speaker_username(docs: &[Value]) -> String {
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
    format!("system:serviceaccount:{ns}:{sa}")
}

/// The namespaces a selector picks among the rendered ones and those every cluster has,
/// each with its rendered labels (or only `kubernetes.io/metadata.name`).
fn selected_namespaces(docs: &[Value], selector: &Value, what: &str) -> BTreeSet<String> {
    assert!(
        selector["matchLabels"]
            .as_object()
            .is_some_and(|m| !m.is_empty()),
        "{what}: a namespace selector with matchLabels: {selector}"
    );
    assert!(
        selector.get("matchExpressions").is_none(),
        "{what}: only matchLabels is evaluated here: {selector}"
    );
    let rendered = of_kind(docs, "Namespace").into_iter().map(|n| {
        (
            str_of(&n["metadata"]["name"], "name").to_owned(),
            n["metadata"]["labels"].clone(),
        )
    });
    let system = ["default", "kube-system", "kube-node-lease", "kube-public"]
        .into_iter()
        .map(|n| (n.to_owned(), serde_json::json!({})));
    rendered
        .chain(system)
        .filter(|(name, labels)| {
            selector["matchLabels"]
                .as_object()
                .unwrap()
                .iter()
                .all(|(k, v)| {
                    if k == "kubernetes.io/metadata.name" {
                        v == name.as_str()
                    } else {
                        labels[k.as_str()] == *v
                    }
                })
        })
        .map(|(name, _)| name)
        .collect()
}

/// Every admission policy, in every rendering a user can apply, can only ever deny writes
/// to the speaker's own kinds in the speaker-lease namespace: no parameter (a missing one
/// cannot deny anything), resource rules naming only NodeBGPStatus and Leases, Leases
/// confined by a namespace selector on the policy and on every binding, and that selector
/// picking exactly the speaker-lease namespace (never kube-node-lease, kube-system, default
/// or the allocator's namespace with its election Lease).
#[test]
fn every_admission_policy_is_confined_to_the_speakers_own_objects() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("kustomize-confined");
    let mut policies_seen = 0;
    // The namespaces are installed with the CRDs (deploy/crds/), beside every rendering.
    let namespaces: Vec<Value> = of_kind(&render(&crds()), "Namespace")
        .into_iter()
        .cloned()
        .collect();
    for (what, mut docs) in all_renderings(&tmp) {
        docs.extend(namespaces.iter().cloned());
        let lease_ns: Vec<&Value> = of_kind(&docs, "Namespace")
            .into_iter()
            .filter(|n| n["metadata"]["labels"]["podcidr.io/speaker-leases"] == "true")
            .collect();
        for policy in of_kind(&docs, "ValidatingAdmissionPolicy") {
            policies_seen += 1;
            let name = &policy["metadata"]["name"];
            let spec = &policy["spec"];
            assert!(
                spec["paramKind"].is_null(),
                "{what}: {name} takes no parameter"
            );
            // The configuration objects' delete guard: DELETE of the config kinds and nothing
            // else, ever.
            if name
                .as_str()
                .is_some_and(|n| n.ends_with("podcidr-bgp-config-delete-guard"))
            {
                for rule in spec["matchConstraints"]["resourceRules"]
                    .as_array()
                    .unwrap()
                {
                    assert_eq!(rule["operations"], serde_json::json!(["DELETE"]), "{what}");
                    assert_eq!(rule["apiGroups"], serde_json::json!(["bgp.podcidr.io"]));
                    assert_eq!(
                        rule["resources"],
                        serde_json::json!(["bgpspeakerconfigs", "bgppeers", "bgpadvertisements"]),
                        "{what}"
                    );
                }
                continue;
            }
            for rule in spec["matchConstraints"]["resourceRules"]
                .as_array()
                .unwrap()
            {
                for op in rule["operations"].as_array().unwrap() {
                    assert!(op == "CREATE" || op == "UPDATE", "{what}: {name}: {rule}");
                }
                let groups = rule["apiGroups"].as_array().unwrap();
                for resource in rule["resources"].as_array().unwrap() {
                    let r = str_of(resource, "resource");
                    let ours = groups.iter().all(|g| g == "podcidr.io")
                        && r.starts_with("nodebgpstatuses");
                    let leases = groups.iter().all(|g| g == "coordination.k8s.io") && r == "leases";
                    assert!(
                        ours || leases,
                        "{what}: {name} matches only its own kinds: {rule}"
                    );
                }
            }
            assert_eq!(
                lease_ns.len(),
                1,
                "{what}: one namespace labelled podcidr.io/speaker-leases"
            );
            let want =
                BTreeSet::from([str_of(&lease_ns[0]["metadata"]["name"], "name").to_owned()]);
            let on_policy = &spec["matchConstraints"]["namespaceSelector"];
            assert_eq!(
                selected_namespaces(&docs, on_policy, &format!("{what}: policy {name}")),
                want,
                "{what}: policy {name}"
            );
            let bindings: Vec<&Value> = of_kind(&docs, "ValidatingAdmissionPolicyBinding")
                .into_iter()
                .filter(|b| b["spec"]["policyName"] == *name)
                .collect();
            assert!(!bindings.is_empty(), "{what}: {name} is bound");
            for b in bindings {
                assert!(b["spec"]["paramRef"].is_null(), "{what}: {b}");
                let on_binding = &b["spec"]["matchResources"]["namespaceSelector"];
                assert_eq!(
                    selected_namespaces(&docs, on_binding, &format!("{what}: binding")),
                    want,
                    "{what}: binding of {name}"
                );
            }
        }
    }
    assert!(policies_seen > 0, "deploy/ ships the speaker policy");
}

/// The speaker's Role reaches Leases only in the speaker-lease namespace, never the
/// allocator's election Lease (with or without the admission policy).
#[test]
fn the_speaker_cannot_write_the_allocators_election_lease() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("kustomize-election");
    for (what, docs) in all_renderings(&tmp) {
        let speaker = speaker_username(&docs);
        let alloc = of_kind(&docs, "Deployment");
        assert_eq!(alloc.len(), 1, "{what}: one Deployment (the allocator)");
        let alloc_ns = str_of(&alloc[0]["metadata"]["namespace"], "namespace");
        for verb in ["create", "update", "patch"] {
            let holders = rbac::service_accounts_allowed(
                &docs,
                &rbac::Ask {
                    group: "coordination.k8s.io",
                    resource: "leases",
                    verb,
                    namespace: Some(alloc_ns),
                },
            );
            assert!(
                !holders.contains(&speaker),
                "{what}: {speaker} may {verb} Leases in {alloc_ns}: {holders:?}"
            );
        }
    }
}

/// The speaker is recognised by the policy through the grant of `write-own-node-only`: in
/// every rendering exactly the speaker's service account holds it, and it cannot delete
/// NodeBGPStatuses (a holder of every verb is not taken for a speaker).
#[test]
fn the_policys_speaker_mark_is_granted_to_the_speaker_only() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("kustomize-mark");
    for (what, docs) in all_renderings(&tmp) {
        let ask = |verb| rbac::Ask {
            group: "podcidr.io",
            resource: "nodebgpstatuses",
            verb,
            namespace: None,
        };
        let marked = rbac::service_accounts_allowed(&docs, &ask("write-own-node-only"));
        assert_eq!(marked, vec![speaker_username(&docs)], "{what}");
        assert!(
            rbac::service_accounts_allowed(&docs, &ask("delete")).is_empty(),
            "{what}: no shipped identity deletes NodeBGPStatuses"
        );
    }
}

/// A `namespace:` overlay used to move the ServiceAccount but not the policy's identity. Now
/// deploy/ uses two namespaces and kustomize refuses to fold them into one, loudly, rather
/// than render an install whose Leases share a namespace with the election Lease (the
/// ConfigMap of one name in each, deploy/namespace-layout.yaml, collides).
#[test]
fn a_namespace_overlay_is_refused_rather_than_folding_the_lease_namespace() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("kustomize-ns");
    let dir = overlay(&tmp, "ns", "namespace: other-ns");
    let out = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("run kubectl kustomize");
    assert!(!out.status.success(), "a namespace overlay must not render");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("namespace transformation produces ID conflict")
            && err.contains("podcidr-bgp-namespace"),
        "{err}"
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
    integration_tests::require!(Need::Kubectl);
    let base = render(&deploy());
    let (spec, _) = speaker_pod(&base);
    let host_paths = |spec: &Value| -> Vec<String> {
        spec["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["hostPath"]["path"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(
        host_paths(spec),
        ["/var/lib/podcidr-bgp"],
        "the base touches one host directory, its own state: {spec}"
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
            .is_some_and(|m| m.iter().any(|m| m["name"] == "keys")),
        "{container}"
    );
}

/// The speaker is told the pod's termination grace (a pod cannot read its own), so it must be
/// the DaemonSet's: a departure's RFC 8326 wait is fitted to it.
#[test]
fn the_speakers_termination_grace_flag_is_the_pods_termination_grace() {
    integration_tests::require!(Need::Kubectl);
    let docs = render(&deploy());
    let (spec, container) = speaker_pod(&docs);
    let grace = spec["terminationGracePeriodSeconds"].as_u64().expect("set");
    let flag = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix("--termination-grace="))
        .expect("--termination-grace in the speaker's args");
    assert_eq!(flag, format!("{grace}s"));
}
