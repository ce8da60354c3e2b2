//! Install, uninstall and CRD upgrades on real kube-apiservers with etcd, the newest
//! Kubernetes the suite builds and the oldest the README supports: what the API server
//! decides, as docs/operator-guide.md tells an operator to do it.
//!
//! - `kubectl delete` of the workloads (deploy/) keeps the CRDs and every record.
//! - The CRD version policy: a later version is served beside this one (storage unchanged,
//!   conversion `None`, a compatible schema), then becomes the storage version; every
//!   record reads through both; a version that may still hold stored objects
//!   (`status.storedVersions`) cannot be dropped until the objects are rewritten.
//! - Users bound to the built-in `view` / `edit` roles reach our kinds through the
//!   aggregated ClusterRoles.

use crate::common;

use std::time::Duration;

use common::real_api::{
    self as real_api, ControlPlane, Identity, KubeVersion, assert_forbidden, list_cr, poll_blocking,
};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

/// The state kinds' records: two NodePodCIDRs, a pool, a status report, a peer.
fn create_records(cp: &ControlPlane) {
    cp.apply(
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "podcidr.io/v1alpha1", "kind": "PodCIDRPool",
             "metadata": {"name": "main"},
             "spec": {"ipv4": {"cidrs": ["10.20.0.0/16"], "maskSize": 24}}},
            {"apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
             "metadata": {"name": "node-a"}, "spec": {"podCIDRs": ["10.20.1.0/24"], "pool": "main"}},
            {"apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
             "metadata": {"name": "node-b"}, "spec": {"podCIDRs": ["10.20.2.0/24"], "pool": "main"}},
            {"apiVersion": "podcidr.io/v1alpha1", "kind": "NodeBGPStatus",
             "metadata": {"name": "node-a"}, "spec": {"nodeName": "node-a"}},
            {"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
             "metadata": {"name": "tor1"}, "spec": {"address": "192.0.2.1", "asn": 65000}},
        ]})
        .to_string(),
    );
}

/// Name, uid and spec of each object of `plural` in `version` (what must survive).
fn records(cp: &ControlPlane, plural: &str, version: &str) -> Vec<(String, String, Value)> {
    list_cr(cp, plural, version)
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                o["metadata"]["uid"].as_str().unwrap().to_owned(),
                o["spec"].clone(),
            )
        })
        .collect()
}

fn apply_crds(cp: &ControlPlane, crds: &[Value]) -> Result<String, String> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": crds}).to_string();
    cp.kubectl_with_input(
        cp.admin(),
        &["apply", "--validate=strict", "-f", "-"],
        Some(&list),
    )
}

/// The workloads go (`kubectl delete` of what deploy/ renders, as `kubectl delete -k
/// deploy/` does); the CRDs and every record stay.
#[test]
fn deleting_the_workloads_keeps_the_crds_and_every_record() {
    for version in KubeVersion::ALL {
        deleting_the_workloads_keeps_the_crds_and_every_record_on(version);
    }
}

fn deleting_the_workloads_keeps_the_crds_and_every_record_on(version: KubeVersion) {
    let cp = integration_tests::needs!(real_api::control_plane_on(version));
    cp.install_deploy();
    create_records(&cp);
    // The key the operator creates in the workloads' namespace (operator guide, Install).
    cp.kubectl(&[
        "create",
        "secret",
        "generic",
        "podcidr-bgp-md5",
        "-n",
        "podcidr-system",
        "--from-literal=tor1=change-me",
    ]);
    let before: Vec<_> = ["nodepodcidrs", "podcidrpools", "nodebgpstatuses"]
        .iter()
        .map(|p| records(&cp, p, "v1alpha1"))
        .collect();
    assert_eq!(before[0].len(), 2);
    // What `kubectl delete -k deploy/` deletes: everything deploy/ renders.
    let rendered = integration_tests::kustomize::render(&integration_tests::kustomize::deploy());
    let workloads: Vec<&Value> = rendered.iter().collect();
    assert!(workloads.iter().any(|d| d["kind"] == "Deployment"));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": workloads}).to_string();
    cp.kubectl_with_input(
        cp.admin(),
        &["delete", "--wait=false", "-f", "-"],
        Some(&list),
    )
    .unwrap_or_else(|e| panic!("deleting the workloads: {e}"));
    let gone = cp.kubectl_as(
        cp.admin(),
        &["get", "clusterrole", "podcidr-bgp-allocator", "-o", "name"],
    );
    assert!(gone.is_err(), "the workloads were deleted: {gone:?}");
    let crds = cp.kubectl(&["get", "crd", "-o", "name"]);
    assert_eq!(crds.lines().count(), 6, "{crds}");
    let after: Vec<_> = ["nodepodcidrs", "podcidrpools", "nodebgpstatuses"]
        .iter()
        .map(|p| records(&cp, p, "v1alpha1"))
        .collect();
    assert_eq!(after, before);
    let peer = cp.kubectl(&["get", "bgppeers", "tor1", "-o", "jsonpath={.spec.address}"]);
    assert_eq!(peer, "192.0.2.1");
    // The namespaces stay, and the user's Secret with them.
    for ns in ["podcidr-system", "podcidr-node-lease"] {
        let phase = cp.kubectl(&["get", "namespace", ns, "-o", "jsonpath={.status.phase}"]);
        assert_eq!(phase, "Active", "{ns} is kept");
    }
    let key = cp.kubectl(&[
        "get",
        "secret",
        "podcidr-bgp-md5",
        "-n",
        "podcidr-system",
        "-o",
        "jsonpath={.data.tor1}",
    ]);
    assert!(!key.is_empty(), "the MD5 Secret is kept");
}

/// `crd` with a second version `next` served beside its one version (a copy of its schema:
/// compatible, conversion `None`); `next_stores` says which one is the storage version.
fn with_next_version(crd: &Value, next: &str, next_stores: bool) -> Value {
    let mut crd = crd.clone();
    let versions = crd["spec"]["versions"].as_array_mut().unwrap();
    assert_eq!(versions.len(), 1, "one version shipped");
    let mut old = versions[0].clone();
    old["storage"] = (!next_stores).into();
    let mut new = versions[0].clone();
    new["name"] = next.into();
    new["storage"] = next_stores.into();
    *versions = vec![old, new];
    crd
}

/// What etcd holds for a cluster-scoped custom resource: the apiVersion it was stored in.
fn stored_as(cp: &ControlPlane, group: &str, plural: &str, name: &str) -> String {
    let raw = cp.etcdctl(&[
        "get",
        &format!("/registry/{group}/{plural}/{name}"),
        "--print-value-only",
    ]);
    let v: Value = serde_json::from_str(raw.trim()).unwrap_or_else(|e| panic!("{e}: {raw}"));
    v["apiVersion"].as_str().unwrap().to_owned()
}

/// The CRD version policy (docs/operator-guide.md, "CRD versions"), step by step, for the
/// IPAM kinds.
#[test]
fn a_later_version_is_served_then_stored_and_no_record_is_lost() {
    for version in KubeVersion::ALL {
        a_later_version_is_served_then_stored_and_no_record_is_lost_on(version);
    }
}

fn a_later_version_is_served_then_stored_and_no_record_is_lost_on(version: KubeVersion) {
    let cp = integration_tests::needs!(real_api::control_plane_on(version));
    let shipped = cp.install_crds();
    create_records(&cp);
    let plurals = ["nodepodcidrs", "podcidrpools"];
    let before: Vec<_> = plurals
        .iter()
        .map(|p| records(&cp, p, "v1alpha1"))
        .collect();
    let ipam = |c: &&Value| plurals.iter().any(|p| c["spec"]["names"]["plural"] == *p);
    let next = |next_stores: bool| -> Vec<Value> {
        shipped
            .iter()
            .filter(ipam)
            .map(|c| with_next_version(c, "v1beta1", next_stores))
            .collect()
    };
    let served = |cp: &ControlPlane| {
        poll_blocking(T, || {
            plurals
                .iter()
                .all(|p| {
                    cp.kubectl_as(
                        cp.admin(),
                        &["get", "--raw", &format!("/apis/podcidr.io/v1beta1/{p}")],
                    )
                    .is_ok()
                })
                .then_some(())
        })
        .expect("v1beta1 served");
    };
    let stored_versions = |cp: &ControlPlane, plural: &str| {
        cp.kubectl(&[
            "get",
            "crd",
            &format!("{plural}.podcidr.io"),
            "-o",
            "jsonpath={.status.storedVersions}",
        ])
    };

    // 1. Served beside: storage stays v1alpha1; every record reads through both versions.
    apply_crds(&cp, &next(false)).unwrap();
    served(&cp);
    for (p, b) in plurals.iter().zip(&before) {
        assert_eq!(&records(&cp, p, "v1alpha1"), b);
        assert_eq!(&records(&cp, p, "v1beta1"), b);
        assert_eq!(stored_versions(&cp, p), r#"["v1alpha1"]"#);
    }

    // 2. Storage flipped: old records stay as they were stored, new writes go to v1beta1,
    //    both read through both versions; storedVersions lists both.
    apply_crds(&cp, &next(true)).unwrap();
    cp.apply(
        &json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
                "metadata": {"name": "node-c"}, "spec": {"podCIDRs": ["10.20.3.0/24"], "pool": "main"}})
        .to_string(),
    );
    assert_eq!(
        stored_as(&cp, "podcidr.io", "nodepodcidrs", "node-a"),
        "podcidr.io/v1alpha1"
    );
    assert_eq!(
        stored_as(&cp, "podcidr.io", "nodepodcidrs", "node-c"),
        "podcidr.io/v1beta1"
    );
    let npcs = records(&cp, "nodepodcidrs", "v1beta1");
    assert_eq!(npcs.len(), 3);
    assert_eq!(records(&cp, "nodepodcidrs", "v1alpha1"), npcs);
    assert_eq!(records(&cp, "podcidrpools", "v1beta1"), before[1]);
    for p in plurals {
        assert_eq!(stored_versions(&cp, p), r#"["v1alpha1","v1beta1"]"#);
    }

    // 3. Dropping v1alpha1 while objects may still be stored in it is refused by the server.
    let only_next: Vec<Value> = next(true)
        .into_iter()
        .map(|mut c| {
            let v = c["spec"]["versions"][1].clone();
            c["spec"]["versions"] = json!([v]);
            c
        })
        .collect();
    let refused = apply_crds(&cp, &only_next).expect_err("a stored version cannot be dropped");
    // 1.30 says "must appear in spec.versions", 1.37 "missing from spec.versions".
    assert!(
        refused.contains("storedVersions")
            && (refused.contains("must appear in spec.versions")
                || refused.contains("missing from spec.versions")),
        "{refused}"
    );
    assert_eq!(records(&cp, "nodepodcidrs", "v1alpha1"), npcs);

    // 4. The migration: rewrite every object (now stored as v1beta1), record that in
    //    storedVersions, then v1alpha1 may go; every record is still there.
    for p in plurals {
        let all = cp.kubectl(&["get", &format!("{p}.v1beta1.podcidr.io"), "-o", "json"]);
        cp.kubectl_with_input(cp.admin(), &["replace", "-f", "-"], Some(&all))
            .unwrap_or_else(|e| panic!("rewriting {p}: {e}"));
        cp.kubectl(&[
            "patch",
            "crd",
            &format!("{p}.podcidr.io"),
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"storedVersions":["v1beta1"]}}"#,
        ]);
    }
    assert_eq!(
        stored_as(&cp, "podcidr.io", "nodepodcidrs", "node-a"),
        "podcidr.io/v1beta1"
    );
    apply_crds(&cp, &only_next).expect("v1alpha1 holds no object any more");
    let after = records(&cp, "nodepodcidrs", "v1beta1");
    assert_eq!(
        after.iter().map(|r| &r.1).collect::<Vec<_>>(),
        npcs.iter().map(|r| &r.1).collect::<Vec<_>>(),
        "the same objects (uids)"
    );
    assert_eq!(after, npcs);
    assert_eq!(records(&cp, "podcidrpools", "v1beta1"), before[1]);
}

/// What kube-controller-manager's clusterrole-aggregation controller does (this harness
/// runs no controller-manager): each ClusterRole with an `aggregationRule` gets the rules of
/// every other ClusterRole its selectors match. The selectors are the real server's own
/// bootstrap `view`, `edit` and `admin` roles, read from it; `edit` aggregates `view` by
/// label, so the order matters.
fn aggregate(cp: &ControlPlane, role: &str) {
    let all: Value =
        serde_json::from_str(&cp.kubectl(&["get", "clusterroles", "-o", "json"])).unwrap();
    let all = all["items"].as_array().unwrap();
    let mut target = all
        .iter()
        .find(|r| r["metadata"]["name"] == role)
        .unwrap()
        .clone();
    let selectors = target["aggregationRule"]["clusterRoleSelectors"]
        .as_array()
        .unwrap_or_else(|| panic!("{role} has no aggregationRule"))
        .clone();
    let matches = |r: &Value| {
        selectors.iter().any(|s| {
            assert!(s["matchExpressions"].is_null(), "not modelled: {s}");
            s["matchLabels"]
                .as_object()
                .unwrap()
                .iter()
                .all(|(k, v)| r["metadata"]["labels"][k] == *v)
        })
    };
    let rules: Vec<Value> = all
        .iter()
        .filter(|r| r["metadata"]["name"] != role && matches(r))
        .flat_map(|r| r["rules"].as_array().cloned().unwrap_or_default())
        .collect();
    target["rules"] = Value::Array(rules);
    cp.kubectl_with_input(
        cp.admin(),
        &["replace", "-f", "-"],
        Some(&target.to_string()),
    )
    .unwrap_or_else(|e| panic!("aggregating {role}: {e}"));
}

fn bound_to(cp: &ControlPlane, role: &str) -> Identity {
    let sa = format!("{role}-user");
    cp.apply(
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": sa, "namespace": "default"}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": sa},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
             "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": "default"}]}]})
        .to_string(),
    );
    cp.service_account("default", &sa)
}

/// A user with the built-in `view` reads every kind (`kubectl get nbs`); so does one with
/// `edit` or `admin`, and neither writes any of them (issue 30 item 4: routing control is not
/// in `edit`); a user bound to `podcidr-bgp-network-admin` writes pools and configuration but
/// not the allocator's records. The suite runs no kube-controller-manager: `aggregate` does
/// what its clusterrole-aggregation controller does, from the server's own aggregationRules.
#[test]
fn view_and_edit_users_reach_the_podcidr_kinds_through_the_bootstrap_roles() {
    for version in KubeVersion::ALL {
        view_and_edit_users_reach_the_podcidr_kinds_through_the_bootstrap_roles_on(version);
    }
}

fn view_and_edit_users_reach_the_podcidr_kinds_through_the_bootstrap_roles_on(
    version: KubeVersion,
) {
    let cp = integration_tests::needs!(real_api::control_plane_on(version));
    cp.install_deploy();
    create_records(&cp);
    let viewer = bound_to(&cp, "view");
    let editor = bound_to(&cp, "edit");
    let admin = bound_to(&cp, "admin");
    let network = bound_to(&cp, "podcidr-bgp-network-admin");
    // Before aggregation the built-in roles know nothing of our kinds: the check can fail.
    assert_forbidden(
        cp.kubectl_as(&viewer, &["get", "nbs"]),
        "list",
        "nodebgpstatuses",
    );
    for role in ["view", "edit", "admin"] {
        aggregate(&cp, role);
    }
    for kind in [
        "nbs",
        "npc",
        "podcidrpools",
        "bgppeers",
        "bgpspeakerconfigs",
    ] {
        for who in [&viewer, &editor, &admin, &network] {
            cp.kubectl_as(who, &["get", kind])
                .unwrap_or_else(|e| panic!("get {kind}: {e}"));
        }
    }
    cp.kubectl_as(&viewer, &["get", "npc", "node-a", "-o", "name"])
        .expect("view reads one record");
    let pool = json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "PodCIDRPool",
        "metadata": {"name": "rack2"},
        "spec": {"ipv4": {"cidrs": ["10.21.0.0/16"], "maskSize": 24}}})
    .to_string();
    assert_forbidden(
        cp.kubectl_with_input(&viewer, &["create", "-f", "-"], Some(&pool)),
        "create",
        "podcidrpools",
    );
    let patch_peer = |who| {
        cp.kubectl_as(
            who,
            &[
                "patch",
                "bgppeers",
                "tor1",
                "--type=merge",
                "-p",
                r#"{"spec":{"asn":65001}}"#,
            ],
        )
    };
    for who in [&editor, &admin] {
        assert_forbidden(
            cp.kubectl_with_input(who, &["create", "-f", "-"], Some(&pool)),
            "create",
            "podcidrpools",
        );
        assert_forbidden(patch_peer(who), "patch", "bgppeers");
        assert_forbidden(
            cp.kubectl_as(who, &["delete", "bgppeers", "--all"]),
            "delete",
            "bgppeers",
        );
    }
    cp.kubectl_with_input(&network, &["create", "-f", "-"], Some(&pool))
        .expect("the network role creates a pool");
    patch_peer(&network).expect("the network role changes a peer");
    assert_forbidden(
        cp.kubectl_as(&network, &["delete", "npc", "node-a"]),
        "delete",
        "nodepodcidrs",
    );
}
