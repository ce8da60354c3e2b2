//! Who owns which fields: a person's server-side apply beside the allocator's merge patches,
//! and a later CRD schema (a new optional field, a second served version) over stored objects.

use std::collections::BTreeSet;

use integration_tests::kustomize;
use serde_json::{Value, json};

use super::support::*;
use crate::common::TempDir;
use crate::common::real_api::{
    AllocatorRun, Call, ControlPlane, admin_get, allocator_identity, calls_by,
    installed_control_plane, list_cr, metric_sum, request_as, wait_for,
};

#[test]
fn server_side_apply_by_a_person_and_the_allocators_patches_own_separate_fields() {
    let cp = integration_tests::needs!(installed_control_plane());
    let id = allocator_identity(&cp);
    let dir = TempDir::new("ra-ssa");
    // A person declares a pool (four /26s) and pre-creates node-b's record with a label.
    let pool = pool_yaml("rack1", &["10.40.0.0/24"], 26, None);
    apply_as(&cp, "alice", &pool, false).unwrap();
    apply_as(
        &cp,
        "alice",
        &npc_yaml("node-b", "  labels: {team: net}\n", "{}"),
        false,
    )
    .unwrap();
    let uid_b = cp.create_node("node-b", "198.18.0.11", &[]);
    cp.create_node("node-a", "198.18.0.10", &[]);
    let run = AllocatorRun {
        pod: "allocator-0",
        pool: None,
        extra: &["--resync", "1"],
    };
    let (mut alloc, admin) = run.spawn(&dir, &id);
    let first = wait_allocated(&cp, &["node-a", "node-b"], &mut alloc);
    assert_disjoint_in(&first, "10.40.0.0/24");

    // The allocator filled node-b's record by merge patch and took over only its fields.
    let b = get_json(&cp, NPC_V1, "node-b");
    assert_eq!(b["metadata"]["labels"]["team"], "net", "{b}");
    assert_eq!(first["node-b"].owner_uid, uid_b);
    let allocator = "podcidr-bgp-allocator:Update";
    assert_eq!(
        owners(&b, &["f:metadata", "f:labels", "f:team"]),
        BTreeSet::from(["alice:Apply".into()])
    );
    for path in [
        &["f:spec", "f:podCIDRs"][..],
        &["f:spec", "f:pool"],
        &["f:metadata", "f:ownerReferences"],
        &["f:metadata", "f:annotations", "f:podcidr.io/allocated-by"],
        // The status is the allocator's too (its own managedFields entry, `subresource:
        // status`).
        &["f:status", "f:conditions"],
    ] {
        assert_eq!(
            owners(&b, path),
            BTreeSet::from([allocator.into()]),
            "{path:?}: {b}"
        );
    }

    // A person labels node-a's record (apply) and edits an annotation (merge patch, as
    // `kubectl edit` does); then knocks its condition so the allocator writes again.
    let a_meta = "  labels: {team: net}\n  annotations: {note: hello}\n";
    apply_as(&cp, "alice", &npc_yaml("node-a", a_meta, "{}"), false).unwrap();
    cp.kubectl(&[
        "patch",
        NPC_V1,
        "node-a",
        "--type=merge",
        "-p",
        r#"{"metadata":{"annotations":{"edited":"yes"}}}"#,
    ]);
    // A write the allocator planned before those edits carries the older resourceVersion:
    // the server refuses it (409) instead of merging it over them.
    let stale = json!({"metadata": {"resourceVersion": first["node-a"].resource_version},
                       "spec": {"podCIDRs": ["10.40.0.128/26"]}});
    let (code, message) = request_as(
        &id,
        "PATCH",
        "/apis/podcidr.io/v1alpha1/nodepodcidrs/node-a",
        Some(&stale),
    )
    .expect_err("a stale resourceVersion conflicts");
    assert_eq!(code, 409, "{message}");
    assert_eq!(records(&cp)["node-a"].cidrs, first["node-a"].cidrs);
    cp.kubectl(&[
        "patch", NPC_V1, "node-a", "--subresource=status", "--type=merge", "-p",
        r#"{"status":{"conditions":[{"type":"Allocated","status":"Unknown","reason":"Pending","message":"edited","lastTransitionTime":"2020-01-01T00:00:00Z"}]}}"#,
    ]);
    wait_allocated(&cp, &["node-a"], &mut alloc);
    let a = get_json(&cp, NPC_V1, "node-a");
    assert_eq!(a["metadata"]["labels"]["team"], "net", "{a}");
    assert_eq!(a["metadata"]["annotations"]["note"], "hello", "{a}");
    assert_eq!(a["metadata"]["annotations"]["edited"], "yes", "{a}");
    assert_eq!(record(&a).cidrs, first["node-a"].cidrs);

    // Applying the same again is no conflict; applying other CIDRs conflicts with the
    // allocator's manager and changes nothing.
    apply_as(&cp, "alice", &npc_yaml("node-a", a_meta, "{}"), false).unwrap();
    let theirs = npc_yaml("node-a", "", "{podCIDRs: [10.40.0.192/26]}");
    let err = apply_as(&cp, "alice", &theirs, false).expect_err("a conflict");
    assert!(
        err.contains("conflict with \"podcidr-bgp-allocator\"") && err.contains(".spec.podCIDRs"),
        "{err}"
    );
    assert_eq!(records(&cp)["node-a"].cidrs, first["node-a"].cidrs);

    // Forced: the person owns the CIDRs now; the allocator adopts the record as it stands
    // (the old block goes to quarantine) and never writes the spec back.
    let mark = cp.audit_events().len();
    let m = admin_get(&admin, "/metrics").unwrap();
    let passes = metric_sum(&m, "podcidr_allocator_passes_total", &[]);
    apply_as(&cp, "alice", &theirs, true).unwrap();
    let a = get_json(&cp, NPC_V1, "node-a");
    assert_eq!(
        owners(&a, &["f:spec", "f:podCIDRs"]),
        BTreeSet::from(["alice:Apply".into()])
    );
    let m = after_passes(&admin, passes + 3.0, &mut alloc);
    let pool_status = || get_json(&cp, POOLS_V1, "rack1")["status"]["ipv4"].clone();
    wait_for(WAIT, "rack1 status: two allocated, one quarantined", || {
        let s = pool_status();
        (s["allocated"] == 2 && s["quarantined"] == 1).then_some(())
    });
    assert_eq!(records(&cp)["node-a"].cidrs, ["10.40.0.192/26"], "{m}");
    let spec_writes: Vec<Call> = calls_by(&cp, ALLOCATOR_USER, mark)
        .into_iter()
        .filter(|c| c.is_write() && c.resource == NPC)
        .collect();
    assert!(spec_writes.is_empty(), "{spec_writes:#?}");

    // The pool: the person's spec, the allocator's status; a changed spec is no conflict.
    let p = get_json(&cp, POOLS_V1, "rack1");
    assert_eq!(
        owned_roots(&p, "alice"),
        BTreeSet::from(["f:spec".into()]),
        "{p}"
    );
    assert_eq!(
        owned_roots(&p, "podcidr-bgp-allocator"),
        BTreeSet::from(["f:status".into()]),
        "{p}"
    );
    assert_eq!(pool_status()["capacity"], 4);
    apply_as(
        &cp,
        "alice",
        &pool_yaml("rack1", &["10.40.0.0/24", "10.40.1.0/24"], 26, None),
        false,
    )
    .unwrap();
    wait_for(WAIT, "rack1 capacity 8", || {
        (pool_status()["capacity"] == 8).then_some(())
    });
    let p = get_json(&cp, POOLS_V1, "rack1");
    assert_eq!(
        p["spec"]["ipv4"]["cidrs"].as_array().unwrap().len(),
        2,
        "{p}"
    );
    stop(alloc);
}

pub fn shipped_crds() -> Vec<Value> {
    kustomize::render(&kustomize::crds())
        .into_iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .collect()
}

/// Applies CRDs as `install_deploy` does and waits until Established.
pub fn apply_crds(cp: &ControlPlane, crds: &[Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": crds}).to_string();
    cp.kubectl_with_input(
        cp.admin(),
        &["apply", "--validate=strict", "-f", "-"],
        Some(&list),
    )
    .unwrap_or_else(|e| panic!("applying CRDs: {e}"));
    cp.wait_crds_established();
}

/// A later schema: v1alpha1 (still stored) gains an optional `spec.comment`; v1beta1 is
/// served beside it, not stored, without a conversion webhook (`None`: only apiVersion
/// changes), and also knows `spec.betaOnly`.
pub fn later_revision(crd: &Value) -> Value {
    let mut crd = crd.clone();
    let spec_props = [
        "schema",
        "openAPIV3Schema",
        "properties",
        "spec",
        "properties",
    ];
    let props = |v: &mut Value| {
        spec_props
            .iter()
            .fold(v, |v, k| &mut v[*k])
            .as_object_mut()
            .unwrap()
            .clone()
    };
    let versions = crd["spec"]["versions"].as_array_mut().unwrap();
    assert_eq!(versions.len(), 1, "one version shipped");
    let mut alpha = versions[0].clone();
    let mut p = props(&mut alpha);
    p.insert(
        "comment".into(),
        json!({"type": "string", "description": "added later"}),
    );
    *spec_props.iter().fold(&mut alpha, |v, k| &mut v[*k]) = Value::Object(p.clone());
    let mut beta = alpha.clone();
    beta["name"] = "v1beta1".into();
    beta["storage"] = false.into();
    p.insert("betaOnly".into(), json!({"type": "string"}));
    *spec_props.iter().fold(&mut beta, |v, k| &mut v[*k]) = Value::Object(p);
    *versions = vec![alpha, beta];
    crd
}

pub fn same_list(a: &[Value], b: &[Value], version: &str) -> bool {
    let as_version = |v: &Value| {
        let mut v = v.clone();
        v["apiVersion"] = format!("podcidr.io/{version}").into();
        v
    };
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| as_version(a) == *b)
}

#[test]
fn crd_upgrade_to_a_second_served_version_keeps_every_object_and_the_allocator_writes_nothing() {
    let cp = integration_tests::needs!(installed_control_plane());
    let id = allocator_identity(&cp);
    let dir = TempDir::new("ra-crd");
    cp.apply(&pool_yaml(
        "rack1",
        &["10.50.0.0/24"],
        26,
        Some(("rack", "r1")),
    ));
    for (i, n) in ["node-a", "node-b", "node-c"].iter().enumerate() {
        cp.create_node(n, &format!("198.18.0.{}", 10 + i), &[]);
    }
    cp.kubectl(&["label", "node", "node-a", "rack=r1"]);
    let run = AllocatorRun {
        pod: "allocator-0",
        pool: Some("10.20.0.0/16"),
        extra: &["--resync", "1"],
    };
    let (mut alloc, _) = run.spawn(&dir, &id);
    wait_allocated(&cp, &["node-a", "node-b", "node-c"], &mut alloc);
    wait_for(WAIT, "rack1 status written", || {
        let p = list_cr(&cp, "podcidrpools", "v1alpha1");
        (p[0]["status"]["ipv4"]["allocated"] == 1).then_some(())
    });
    stop(alloc);
    let npcs = list_cr(&cp, "nodepodcidrs", "v1alpha1");
    let pools = list_cr(&cp, "podcidrpools", "v1alpha1");
    assert_eq!(npcs[0]["spec"]["pool"], "rack1", "{npcs:#?}");

    // The CRDs as shipped, applied again: nothing changes.
    let shipped = shipped_crds();
    apply_crds(&cp, &shipped);
    assert_eq!(list_cr(&cp, "nodepodcidrs", "v1alpha1"), npcs);
    assert_eq!(list_cr(&cp, "podcidrpools", "v1alpha1"), pools);

    // The later schema: the same records through both versions, stored as before.
    let later: Vec<Value> = shipped
        .iter()
        .map(|c| {
            // The allocator's two kinds only (the status and configuration kinds are not its).
            if c["spec"]["group"] != "podcidr.io" || c["spec"]["names"]["kind"] == "NodeBGPStatus" {
                c.clone()
            } else {
                later_revision(c)
            }
        })
        .collect();
    apply_crds(&cp, &later);
    for crd in ["nodepodcidrs.podcidr.io", "podcidrpools.podcidr.io"] {
        let stored = cp.kubectl(&["get", "crd", crd, "-o", "jsonpath={.status.storedVersions}"]);
        assert_eq!(stored, r#"["v1alpha1"]"#, "{crd}");
    }
    assert_eq!(list_cr(&cp, "nodepodcidrs", "v1alpha1"), npcs);
    assert_eq!(list_cr(&cp, "podcidrpools", "v1alpha1"), pools);
    assert!(same_list(
        &npcs,
        &list_cr(&cp, "nodepodcidrs", "v1beta1"),
        "v1beta1"
    ));
    assert!(same_list(
        &pools,
        &list_cr(&cp, "podcidrpools", "v1beta1"),
        "v1beta1"
    ));
    // Discovery now prefers v1beta1: a bare `kubectl get npc` reads that version.
    let group: Value =
        serde_json::from_str(&cp.kubectl(&["get", "--raw", "/apis/podcidr.io"])).unwrap();
    assert_eq!(group["preferredVersion"]["version"], "v1beta1", "{group}");

    // A person sets the new field through v1beta1. A field only the non-stored version knows
    // is pruned on write by the stored version's schema, without an error.
    let beta = "nodepodcidrs.v1beta1.podcidr.io";
    cp.kubectl(&[
        "patch",
        beta,
        "node-a",
        "--type=merge",
        "-p",
        r#"{"spec":{"comment":"rack r1","betaOnly":"x"}}"#,
    ]);
    let a: Value =
        serde_json::from_str(&cp.kubectl(&["get", NPC_V1, "node-a", "-o", "json"])).unwrap();
    assert_eq!(a["spec"]["comment"], "rack r1", "{a}");
    assert!(a["spec"].get("betaOnly").is_none(), "{a}");
    let npcs: Vec<Value> = list_cr(&cp, "nodepodcidrs", "v1alpha1");

    // The allocator (which knows neither field) restarts over them and writes nothing.
    let mark = cp.audit_events().len();
    let (mut alloc, admin) = run.spawn(&dir, &id);
    after_passes(&admin, 3.0, &mut alloc);
    assert_eq!(list_cr(&cp, "nodepodcidrs", "v1alpha1"), npcs);
    assert_eq!(list_cr(&cp, "podcidrpools", "v1alpha1"), pools);
    // Its next write to node-a (a merge patch of the status) keeps the new field.
    cp.kubectl(&[
        "patch", NPC_V1, "node-a", "--subresource=status", "--type=merge", "-p",
        r#"{"status":{"conditions":[{"type":"Allocated","status":"Unknown","reason":"Pending","message":"edited","lastTransitionTime":"2020-01-01T00:00:00Z"}]}}"#,
    ]);
    wait_allocated(&cp, &["node-a"], &mut alloc);
    stop(alloc);
    // Over both phases: the Lease, and that one status write after the knock.
    let calls = calls_until_release(&cp, mark);
    let written: Vec<(&str, &str)> = writes(&calls)
        .iter()
        .filter(|c| c.resource != "leases.coordination.k8s.io")
        .map(|c| (c.resource.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(
        written,
        [("nodepodcidrs.podcidr.io/status", "node-a")],
        "{calls:#?}"
    );
    let a: Value =
        serde_json::from_str(&cp.kubectl(&["get", NPC_V1, "node-a", "-o", "json"])).unwrap();
    assert_eq!(a["spec"]["comment"], "rack r1", "{a}");

    // Back to the shipped CRDs: v1beta1 is gone, every object still reads through v1alpha1;
    // the removed field is hidden (pruned on read) but still in etcd.
    apply_crds(&cp, &shipped);
    assert!(
        cp.kubectl_as(cp.admin(), &["get", "--raw", "/apis/podcidr.io/v1beta1"])
            .is_err()
    );
    let now = list_cr(&cp, "nodepodcidrs", "v1alpha1");
    assert_eq!(now.len(), 3);
    assert!(
        now.iter().all(|o| o["spec"].get("comment").is_none()),
        "{now:#?}"
    );
    let stored = cp.etcdctl(&[
        "get",
        "/registry/podcidr.io/nodepodcidrs/node-a",
        "--print-value-only",
    ]);
    assert!(stored.contains(r#""comment":"rack r1""#), "{stored}");
}
