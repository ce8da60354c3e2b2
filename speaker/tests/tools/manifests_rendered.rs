//! What `kubectl kustomize` renders from deploy/ (alone, with each component, moved to another
//! namespace) follows the conventions a cluster expects on day one: recommended labels, Linux
//! nodes only, an allocator that can start before any pod network exists, and the admission
//! policy removable for clusters that turn admission policies off.

use crate::common;
use integration_tests::skip::Need;

use common::TempDir;
use common::kustomize::*;
use serde_json::Value;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn pod_spec(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

#[test]
fn every_object_carries_the_recommended_labels() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("rendered-labels");
    let mut renderings = all_renderings(&tmp);
    renderings.push(("deploy/crds/".to_owned(), render(&crds())));
    for (what, docs) in renderings {
        for d in &docs {
            let labels = &d["metadata"]["labels"];
            for (k, v) in [
                ("app.kubernetes.io/part-of", "podcidr-bgp"),
                ("app.kubernetes.io/instance", "podcidr-bgp"),
                ("app.kubernetes.io/version", VERSION),
                ("app.kubernetes.io/managed-by", "kustomize"),
            ] {
                assert_eq!(
                    labels[k], v,
                    "{what}: {} {}: {k}",
                    d["kind"], d["metadata"]["name"]
                );
            }
        }
        for w in of_kind(&docs, "DaemonSet")
            .into_iter()
            .chain(of_kind(&docs, "Deployment"))
        {
            let name = &w["metadata"]["name"];
            let tpl = &w["spec"]["template"]["metadata"]["labels"];
            assert!(
                tpl["app.kubernetes.io/component"].is_string(),
                "{what}: {name}"
            );
            assert_eq!(tpl["app.kubernetes.io/version"], VERSION, "{what}: {name}");
            assert_eq!(
                pod_spec(w)["nodeSelector"]["kubernetes.io/os"],
                "linux",
                "{what}: {name} runs on Linux nodes only"
            );
            let image = pod_spec(w)["containers"][0]["image"].as_str().unwrap();
            assert!(image.ends_with(&format!(":{VERSION}")), "{what}: {image}");
        }
    }
}

#[test]
fn allocator_can_start_before_any_pod_network_exists() {
    integration_tests::require!(Need::Kubectl);
    let docs = render(&deploy());
    let alloc = of_kind(&docs, "Deployment");
    assert_eq!(alloc.len(), 1);
    let d = alloc[0];
    let spec = pod_spec(d);
    assert_eq!(spec["hostNetwork"], true, "no pod network needed");
    assert_eq!(spec["dnsPolicy"], "ClusterFirstWithHostNet");
    assert_eq!(spec["priorityClassName"], "system-cluster-critical");
    let tolerated: Vec<&str> = spec["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["key"].as_str())
        .collect();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.cloudprovider.kubernetes.io/uninitialized",
    ] {
        assert!(tolerated.contains(&key), "tolerates {key}: {tolerated:?}");
    }
    assert_eq!(d["spec"]["replicas"], 2, "a standby for the Lease");
    let anti =
        &spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    assert_eq!(anti[0]["topologyKey"], "kubernetes.io/hostname", "{spec}");
    let selector = &d["spec"]["selector"]["matchLabels"];
    let pdbs = of_kind(&docs, "PodDisruptionBudget");
    assert!(
        pdbs.iter()
            .any(|p| p["spec"]["selector"]["matchLabels"] == *selector
                && p["spec"]["minAvailable"] == 1),
        "a PDB keeps one allocator: {pdbs:?}"
    );
    // On the host network the metrics port is on the node's address, taken from the
    // downward API; the probes have their own listener on loopback, where only the node
    // (the kubelet) reaches them, so no pod can fill its connection cap (issue 31 item 1).
    let c = &spec["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        args.contains(&"--metrics-listen=$(HOST_IP):9181"),
        "{args:?}"
    );
    assert!(args.contains(&"--admin-listen=127.0.0.1:9183"), "{args:?}");
    for probe in ["livenessProbe", "readinessProbe"] {
        let get = &c[probe]["httpGet"];
        assert_eq!(
            (&get["host"], &get["port"]),
            (&Value::from("127.0.0.1"), &Value::from(9183)),
            "{probe}: {c}"
        );
    }
    assert!(
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "HOST_IP"
                && e["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"),
        "{c}"
    );
}

#[test]
fn no_admission_policy_component_removes_the_policy_and_nothing_else() {
    integration_tests::require!(Need::Kubectl);
    let base = render(&deploy());
    let tmp = TempDir::new("rendered-no-vap");
    let without = render(&with_component(&tmp, "no-admission-policy"));
    let kinds = |docs: &[Value]| -> Vec<(String, String)> {
        let mut v: Vec<_> = docs
            .iter()
            .map(|d| {
                (
                    d["kind"].as_str().unwrap().to_owned(),
                    d["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let removed: Vec<_> = kinds(&base)
        .into_iter()
        .filter(|k| !kinds(&without).contains(k))
        .collect();
    // Both policies (the speakers' own-object policy, the config objects' delete guard) and
    // their bindings; nothing else.
    let names = |kind: &str| -> Vec<&str> {
        removed
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, n)| n.as_str())
            .collect()
    };
    let policies = [
        "podcidr-bgp-config-delete-guard",
        "podcidr-bgp-speaker-own-status",
    ];
    assert_eq!(names("ValidatingAdmissionPolicy"), policies);
    assert_eq!(names("ValidatingAdmissionPolicyBinding"), policies);
    assert_eq!(removed.len(), 4, "{removed:?}");
}
