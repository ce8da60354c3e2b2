//! The speaker and the read-only CLI against a real kube-apiserver (the newest the suite
//! builds) with etcd, each as its own ServiceAccount with the shipped RBAC and the shipped
//! admission policy: what the real API server, the real RBAC authorizer and admission decide
//! about every call they make.
//!
//! Each speaker's token is bound to a Pod on its node (as the kubelet's projected token is),
//! so the admission policy lets it write its own node's NodeBGPStatus and Lease only
//! (`real_api_admission.rs` proves the refusals). Its events.k8s.io/v1 Events about its Node
//! are stored in namespace `default`.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::real_api::{
    self, ControlPlane, Identity, LEASE_NS, SYSTEM_NS, Speaker, WAIT, apply_as, assert_forbidden,
    collector, condition, established_with, get_json, kube_events, labelled, metric, metrics,
    poll_blocking, runtime, start_speaker, table, wait_status,
};
use common::{TempDir, free_port, rbac};
use serde_json::{Value, json};

const SPEAKER: &str = "podcidr-bgp-speaker";

/// Three string fields of every item of `doc[list]` (CLI `-o json` output).
fn triples(doc: &Value, list: &str, keys: [&str; 3]) -> Vec<(String, String, String)> {
    doc[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap_or_default().to_owned();
            (s(keys[0]), s(keys[1]), s(keys[2]))
        })
        .collect()
}

/// Two speakers (node-a: `ipam-crd`, node-b: `node-spec`) reach a router, publish their
/// NodeBGPStatus by server-side apply and renew their Leases in podcidr-node-lease. Their
/// Their Events about the Node are stored in `default` and counted as published.
#[test]
fn speakers_publish_status_renew_leases_and_record_events_about_their_node() {
    let cp = integration_tests::needs!(real_api::installed_control_plane());
    let rt = runtime();
    let tor = collector(&rt);
    let dir = TempDir::new("real-api-speaker");
    let uid_a = cp.create_node("node-a", "198.18.0.10", &[]);
    let uid_b = cp.create_node("node-b", "198.18.0.11", &["10.244.2.0/24"]);
    cp.apply(
        &json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
                "metadata": {"name": "node-a"}, "spec": {"podCIDRs": ["10.20.1.0/24"]}})
        .to_string(),
    );
    let id = real_api::speaker_identity(&cp, "node-a");
    let id_b = real_api::speaker_identity(&cp, "node-b");
    let port = tor.local_addr().port();
    let a = start_speaker(&dir, &id, "node-a", "ipam-crd", "10.20.0.0/16", port);
    let b = start_speaker(&dir, &id_b, "node-b", "node-spec", "10.244.0.0/16", port);

    let routed = rt.block_on(tor.wait_for(WAIT, |rib| {
        rib.values()
            .filter(|t| t.established && t.routes.len() == 1)
            .count()
            == 2
    }));
    assert!(
        routed,
        "{:?}\n{}\n{}",
        tor.rib(),
        a.proc.log(),
        b.proc.log()
    );
    wait_status(&cp, &a, "node-a", |v| established_with(v, "10.20.1.0/24"));
    wait_status(&cp, &b, "node-b", |v| established_with(v, "10.244.2.0/24"));
    let managed = |node| get_json(&cp, &["nbs", node, "--show-managed-fields"]);
    let (nbs_a, nbs_b) = (managed("node-a"), managed("node-b"));
    for (nbs, uid) in [(&nbs_a, &uid_a), (&nbs_b, &uid_b)] {
        assert_eq!(nbs["metadata"]["ownerReferences"][0]["uid"], uid.as_str());
        // Every write was a server-side apply by the speaker (object once, then status).
        let managers: Vec<(&str, &str)> = nbs["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["manager"].as_str().unwrap(),
                    m["operation"].as_str().unwrap(),
                )
            })
            .collect();
        assert!(
            !managers.is_empty() && managers.iter().all(|m| *m == (SPEAKER, "Apply")),
            "{managers:?}"
        );
        assert_eq!(
            nbs["status"]["observedGeneration"], nbs["metadata"]["generation"],
            "the report names the generation it describes"
        );
    }
    let rows = table(&cp.kubectl(&["get", "nbs"]));
    assert_eq!(
        rows[0][..5],
        ["NAME", "SOURCE", "ASN", "ESTABLISHED", "ANNOUNCED"]
    );
    assert_eq!(
        rows[1][..5],
        ["node-a", "ipam-crd", "64512", "True", "[\"10.20.1.0/24\"]"]
    );
    assert_eq!(
        rows[2][..5],
        [
            "node-b",
            "node-spec",
            "64512",
            "True",
            "[\"10.244.2.0/24\"]"
        ]
    );

    // Leases: one per node in podcidr-node-lease, owned by the Node, found by label.
    let speaker_leases = || {
        get_json(
            &cp,
            &[
                "lease",
                "-n",
                LEASE_NS,
                "-l",
                "podcidr.io/speaker-lease=true",
            ],
        )
    };
    let leases = speaker_leases();
    let first: Vec<Value> = leases["items"].as_array().unwrap().clone();
    assert_eq!(first.len(), 2, "{leases}");
    for (lease, node, uid) in [(&first[0], "node-a", &uid_a), (&first[1], "node-b", &uid_b)] {
        assert_eq!(lease["metadata"]["name"], node);
        assert_eq!(
            lease["spec"]["holderIdentity"],
            format!("{node}/speaker-{node}")
        );
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 180);
        assert_eq!(lease["metadata"]["ownerReferences"][0]["uid"], uid.as_str());
    }

    // The Events: stored about the Node in `default`, counted as published, none failed.
    let published = poll_blocking(WAIT, || {
        kube_events(&rt, &a, "published").filter(|n| *n >= 1.0)
    });
    assert!(
        published.is_some(),
        "no published Event counted\n{}",
        a.proc.log()
    );
    assert_eq!(kube_events(&rt, &a, "failed"), Some(0.0));
    let stored: Value = serde_json::from_str(&cp.kubectl(&[
        "get",
        "events.events.k8s.io",
        "-n",
        "default",
        "-o",
        "json",
    ]))
    .unwrap();
    let about_a = stored["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e["reportingController"] == SPEAKER
                && e["reason"] == "BGPSessionEstablished"
                && e["regarding"]["name"] == "node-a"
        })
        .unwrap_or_else(|| panic!("no BGPSessionEstablished Event about node-a: {stored}"));
    assert_eq!(about_a["regarding"]["uid"], uid_a.as_str(), "{about_a}");
    let calls = real_api::requests_by(&cp, &id.username);
    assert!(
        calls
            .iter()
            .any(|r| r.resource == "events" && r.verb == "create" && r.code == 201),
        "the Event is the server's to store: {calls:#?}"
    );

    // Server-side apply removes what the speaker's next report leaves out: a refusal that
    // ends disappears from the status (`refused` is omitted when empty), on the real server.
    let npc = |cidr: &str| {
        let body = json!({"spec": {"podCIDRs": [cidr]}}).to_string();
        cp.kubectl(&["patch", "npc", "node-a", "--type=merge", "-p", &body]);
    };
    npc("10.30.1.0/24");
    let refused = wait_status(&cp, &a, "node-a", |v| {
        v["status"]["announced"] == json!([]) && v["status"]["refused"].is_array()
    });
    assert_eq!(
        refused["status"]["refused"],
        json!([{"cidr": "10.30.1.0/24", "reason": "outside-allowed-prefixes"}])
    );
    npc("10.20.1.0/24");
    let cleared = wait_status(&cp, &a, "node-a", |v| established_with(v, "10.20.1.0/24"));
    assert_eq!(cleared["status"].get("refused"), None, "{cleared}");

    // Still running: both Leases are renewed (every 60 s), acquireTime kept.
    let renewed = |s: &Speaker| {
        metric(
            &metrics(&rt, s),
            "podcidr_lease_last_renewed_timestamp_seconds",
        )
    };
    let starts = [&a, &b].map(|s| renewed(s).expect("a first renewal"));
    for (s, start) in [&a, &b].into_iter().zip(starts) {
        let again = poll_blocking(Duration::from_secs(90), || {
            renewed(s).filter(|t| *t > start)
        });
        assert!(again.is_some(), "no renewal\n{}", s.proc.log());
        assert_eq!(s.proc.log().matches("renewing the Lease failed").count(), 0);
    }
    let leases = speaker_leases();
    for (now, before) in leases["items"].as_array().unwrap().iter().zip(&first) {
        assert_ne!(
            now["spec"]["renewTime"], before["spec"]["renewTime"],
            "{now}"
        );
        assert_eq!(
            now["spec"]["acquireTime"], before["spec"]["acquireTime"],
            "{now}"
        );
    }
    for s in [&a, &b] {
        let m = metrics(&rt, s);
        assert_eq!(
            metric(&m, "podcidr_status_publish_failures_total"),
            Some(0.0)
        );
        assert_eq!(metric(&m, "podcidr_lease_renew_failures_total"), Some(0.0));
    }
    // Nothing refused.
    let calls = real_api::requests_by(&cp, &id.username);
    for r in &calls {
        assert!(!r.refused_in(&calls), "{r:?}");
    }
}

/// The shipped RBAC is exactly what the speaker uses. Every call it makes (its Node's and its
/// NodePodCIDR's list/watch, the status apply, the Lease apply) is allowed by the real
/// authorizer and admission: no refusal at all (its Event about a source mismatch is stored).
/// Writes outside the grant are refused with its own token.
#[test]
fn speaker_rbac_allows_every_call_it_makes_and_no_write_outside_its_grant() {
    let cp = integration_tests::needs!(ControlPlane::start());
    let docs = cp.install_deploy();
    let rt = runtime();
    let dir = TempDir::new("real-api-rbac");
    // The Node disagrees with IPAM: the speaker records a PodCIDRSourceMismatch Event.
    cp.create_node("node-a", "198.18.0.10", &["10.20.9.0/24"]);
    cp.create_node("node-b", "198.18.0.11", &[]);
    for (node, cidr) in [("node-a", "10.20.1.0/24"), ("node-b", "10.20.2.0/24")] {
        cp.apply(
            &json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
                    "metadata": {"name": node}, "spec": {"podCIDRs": [cidr]}})
            .to_string(),
        );
    }
    // The allocator's election Lease, as a running allocator keeps it.
    cp.apply(
        &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "podcidr-bgp-allocator", "namespace": SYSTEM_NS},
                "spec": {"holderIdentity": "allocator-0", "leaseDurationSeconds": 15}})
        .to_string(),
    );
    let id = real_api::speaker_identity(&cp, "node-a");
    // A peer that never answers.
    let a = start_speaker(&dir, &id, "node-a", "ipam-crd", "10.20.0.0/16", free_port());
    let status = wait_status(&cp, &a, "node-a", |v| {
        v["status"]["sourceReady"] == true
            && v["status"]["announced"] == json!(["10.20.1.0/24"])
            && condition(v, "SourceMismatch")["status"] == "True"
    });
    assert_eq!(condition(&status, "Ready")["status"], "True");
    get_json(&cp, &["lease", "node-a", "-n", LEASE_NS]);
    let published = poll_blocking(WAIT, || {
        kube_events(&rt, &a, "published").filter(|n| *n >= 1.0)
    });
    assert!(
        published.is_some(),
        "the mismatch Event was not published\n{}",
        a.proc.log()
    );
    // IPAM comes to agree with the Node, and the Node is relabelled: both arrive through the
    // speaker's watches.
    cp.kubectl(&[
        "patch",
        "npc",
        "node-a",
        "--type=merge",
        "-p",
        r#"{"spec":{"podCIDRs":["10.20.9.0/24"]}}"#,
    ]);
    cp.kubectl(&["label", "node", "node-a", "rack=r1"]);
    wait_status(&cp, &a, "node-a", |v| {
        v["status"]["announced"] == json!(["10.20.9.0/24"])
            && condition(v, "SourceMismatch")["status"] == "False"
    });
    let m = metrics(&rt, &a);
    assert_eq!(
        metric(&m, "podcidr_status_publish_failures_total"),
        Some(0.0)
    );
    assert_eq!(metric(&m, "podcidr_lease_renew_failures_total"), Some(0.0));

    // Stopped, so every call it made is in the audit log, each watch with how it ended.
    let mut a = a;
    a.proc.signal(libc::SIGTERM);
    let exit = a.proc.wait_exit(Duration::from_secs(30));
    assert!(
        exit.is_some_and(|e| e.success()),
        "{exit:?}\n{}",
        a.proc.log()
    );
    let calls = poll_blocking(WAIT, || {
        let calls = real_api::requests_by(&cp, &id.username);
        let watches = calls.iter().filter(|r| r.verb == "watch").count();
        (watches >= 2).then_some(calls)
    })
    .unwrap_or_else(|| panic!("{:#?}", real_api::requests_by(&cp, &id.username)));
    // What it called, and what the real authorizer and validation said.
    let used: BTreeSet<(&str, &str, &str, &str)> = calls
        .iter()
        .map(|r| {
            (
                r.verb.as_str(),
                r.group.as_str(),
                r.resource.as_str(),
                r.namespace.as_str(),
            )
        })
        .collect();
    let want: BTreeSet<(&str, &str, &str, &str)> = [
        ("list", "", "nodes", ""),
        ("watch", "", "nodes", ""),
        ("list", "podcidr.io", "nodepodcidrs", ""),
        ("watch", "podcidr.io", "nodepodcidrs", ""),
        ("patch", "podcidr.io", "nodebgpstatuses", ""),
        ("patch", "podcidr.io", "nodebgpstatuses/status", ""),
        ("patch", "coordination.k8s.io", "leases", LEASE_NS),
        ("create", "events.k8s.io", "events", "default"),
        // Service routes: the advertisements, cluster-wide (none here).
        ("list", "bgp.podcidr.io", "bgpadvertisements", ""),
        ("watch", "bgp.podcidr.io", "bgpadvertisements", ""),
    ]
    .into();
    assert_eq!(used, want, "{calls:#?}");
    for r in &calls {
        assert!(!r.refused_in(&calls), "{r:?}\n{}", a.proc.log());
        if r.resource == "nodes" || r.resource == "nodepodcidrs" {
            assert!(
                r.uri.contains("fieldSelector=metadata.name%3Dnode-a"),
                "only its own: {r:?}"
            );
        }
        if r.verb == "patch" {
            assert_eq!(r.name, "node-a", "{r:?}");
        }
    }
    // Every call is in the shipped grant; every grant it did not use is accounted for.
    let user = rbac::User::service_account(SYSTEM_NS, real_api::SPEAKER_SA);
    for (verb, group, resource, ns) in &want {
        let ask = rbac::Ask {
            group,
            resource,
            verb,
            namespace: (!ns.is_empty()).then_some(*ns),
        };
        assert!(rbac::allowed(&docs, &user, &ask), "{ask:?}");
    }
    let mut granted = rbac::granted(&docs, real_api::SPEAKER_SA);
    granted.extend(rbac::granted(&docs, "podcidr-bgp-speaker-events"));
    let unused: BTreeSet<(&str, &str, &str)> = granted
        .iter()
        .map(|(v, g, r)| (v.as_str(), g.as_str(), r.as_str()))
        .filter(|(v, g, r)| !want.iter().any(|w| (w.0, w.1, w.2) == (*v, *g, *r)))
        .collect();
    let explained: BTreeSet<(&str, &str, &str)> = [
        // The cilium-node source's list/watch.
        ("list", "cilium.io", "ciliumnodes"),
        ("watch", "cilium.io", "ciliumnodes"),
        // An apply that creates the object is authorized as create too (no request of its own).
        ("create", "podcidr.io", "nodebgpstatuses"),
        ("create", "coordination.k8s.io", "leases"),
        // A repeated Event patches its series (none repeats within this test).
        ("patch", "events.k8s.io", "events"),
        // `--config-source kubernetes` (the DaemonSet's mode) reads the configuration
        // objects; these speakers run from files. real_api_objects.rs makes these calls.
        ("list", "bgp.podcidr.io", "bgppeers"),
        ("watch", "bgp.podcidr.io", "bgppeers"),
        ("list", "bgp.podcidr.io", "bgpspeakerconfigs"),
        ("watch", "bgp.podcidr.io", "bgpspeakerconfigs"),
        // Service routes: Services and EndpointSlices are watched only while a
        // BGPAdvertisement exists (none here; the fake tier's
        // speaker_rbac_grants_exactly_what_the_speaker_uses makes these calls).
        ("list", "", "services"),
        ("watch", "", "services"),
        ("list", "discovery.k8s.io", "endpointslices"),
        ("watch", "discovery.k8s.io", "endpointslices"),
        // Not an API call: the admission policy's mark for a speaker.
        ("write-own-node-only", "podcidr.io", "nodebgpstatuses"),
    ]
    .into();
    assert_eq!(unused, explained, "a grant the speaker does not use");
    assert!(
        !a.proc.log().to_lowercase().contains("forbidden"),
        "{}",
        a.proc.log()
    );
    let before = calls.len();
    let expected = std::cell::RefCell::new(Vec::new());
    let refuse = |result: Result<String, String>, verb: &str, resource: &str| {
        expected
            .borrow_mut()
            .push((verb.to_owned(), resource.to_owned()));
        assert_forbidden(result, verb, resource);
    };

    let with = |args: &[&str], input: Option<Value>| {
        cp.kubectl_with_input(&id, args, input.map(|v| v.to_string()).as_deref())
    };
    let ssa = |kind: &str, name: &str, ns: Option<&str>, sub: Option<&str>| {
        let api_version = match kind {
            "NodePodCIDR" => "podcidr.io/v1alpha1",
            "Lease" => "coordination.k8s.io/v1",
            _ => "v1",
        };
        apply_as(
            &cp,
            &id,
            SPEAKER,
            &labelled(api_version, kind, name, ns),
            sub,
        )
    };
    // IPAM records: the allocator's alone.
    let npc = json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
                     "metadata": {"name": "node-c"}, "spec": {"podCIDRs": ["10.20.3.0/24"]}});
    refuse(
        with(&["create", "-f", "-"], Some(npc)),
        "create",
        "nodepodcidrs",
    );
    refuse(
        ssa("NodePodCIDR", "node-a", None, None),
        "patch",
        "nodepodcidrs",
    );
    refuse(
        ssa("NodePodCIDR", "node-a", None, Some("status")),
        "patch",
        "nodepodcidrs/status",
    );
    refuse(
        with(&["delete", "npc", "node-a"], None),
        "delete",
        "nodepodcidrs",
    );
    // Leases outside podcidr-node-lease: the allocator's election, kubelet heartbeats, default.
    for ns in [SYSTEM_NS, "kube-node-lease", "default"] {
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                           "metadata": {"name": "node-a", "namespace": ns},
                           "spec": {"holderIdentity": "node-a/speaker-node-a"}});
        refuse(
            with(&["create", "-f", "-"], Some(lease)),
            "create",
            "leases",
        );
    }
    refuse(
        ssa("Lease", "podcidr-bgp-allocator", Some(SYSTEM_NS), None),
        "patch",
        "leases",
    );
    // Nodes: read-only.
    refuse(ssa("Node", "node-a", None, None), "patch", "nodes");
    refuse(
        ssa("Node", "node-a", None, Some("status")),
        "patch",
        "nodes/status",
    );
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-z"}});
    refuse(with(&["create", "-f", "-"], Some(node)), "create", "nodes");
    // Its own objects: no delete.
    refuse(
        with(&["delete", "nbs", "node-a"], None),
        "delete",
        "nodebgpstatuses",
    );
    refuse(
        with(&["delete", "lease", "node-a", "-n", LEASE_NS], None),
        "delete",
        "leases",
    );
    // Each refusal is the authorizer's answer to exactly that request.
    let refused: Vec<(String, String)> = real_api::requests_by(&cp, &id.username)[before..]
        .iter()
        .filter(|r| r.code == 403)
        .map(|r| (r.verb.clone(), r.resource.clone()))
        .collect();
    assert_eq!(refused, expected.into_inner());

    // RBAC cannot tell node-b's objects from node-a's: the authorizer grants node-a's
    // speaker both; the admission policy refuses node-b's (server-side dry run: nothing would
    // be stored either way).
    for (resource, ns) in [
        ("nodebgpstatuses.podcidr.io", None),
        ("leases", Some(LEASE_NS)),
    ] {
        let named = format!("{resource}/node-b");
        let mut args = vec!["auth", "can-i", "patch", named.as_str()];
        args.extend(ns.iter().flat_map(|ns| ["-n", *ns]));
        let can = with(&args, None).unwrap_or_else(|e| e);
        assert_eq!(can.trim(), "yes", "RBAC grants {resource} node-b");
    }
    let dry = |input: Value| {
        with(
            &[
                "apply",
                "--server-side",
                "--field-manager",
                SPEAKER,
                "--dry-run=server",
                "-f",
                "-",
            ],
            Some(input),
        )
    };
    let denied =
        "a speaker may write only the NodeBGPStatus and the Lease named after its own node";
    let other = json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodeBGPStatus",
                       "metadata": {"name": "node-b"}, "spec": {"nodeName": "node-b"}});
    let err = dry(other).expect_err("the admission policy refuses node-b's NodeBGPStatus");
    assert!(err.contains(denied), "{err}");
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "node-b", "namespace": LEASE_NS},
                       "spec": {"holderIdentity": "node-b/speaker-node-a"}});
    let err = dry(lease).expect_err("the admission policy refuses node-b's Lease");
    assert!(err.contains(denied), "{err}");
    assert!(
        cp.kubectl_as(cp.admin(), &["get", "nbs", "node-b"])
            .is_err(),
        "dry run"
    );
}

/// Runs `podcidr-bgp <args> --kubeconfig <id>` to completion (bounded).
fn cli(rt: &tokio::runtime::Runtime, id: &Identity, args: &[&str]) -> common::Run {
    let mut all = args.to_vec();
    all.extend(["--kubeconfig", id.kubeconfig.to_str().unwrap()]);
    rt.block_on(common::run(&all))
}

/// A read-only identity with exactly the grant docs/operator-guide.md gives `diff`, `peers`
/// and `routes`: `list` on nodes, nodepodcidrs, nodebgpstatuses and leases (every namespace).
fn viewer(cp: &ControlPlane) -> Identity {
    cp.apply(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: podcidr-viewer, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: podcidr-viewer}
rules:
  - {apiGroups: [""], resources: [nodes], verbs: [list]}
  - {apiGroups: [podcidr.io], resources: [nodepodcidrs, nodebgpstatuses], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: podcidr-viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: podcidr-viewer}
subjects: [{kind: ServiceAccount, name: podcidr-viewer, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: podcidr-viewer-leases, namespace: podcidr-node-lease}
rules:
  - {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: podcidr-viewer-leases, namespace: podcidr-node-lease}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: podcidr-viewer-leases}
subjects: [{kind: ServiceAccount, name: podcidr-viewer, namespace: default}]
"#,
    );
    cp.service_account("default", "podcidr-viewer")
}

/// `diff`, `peers` and `routes` answer from the API with nothing but the documented list
/// grant: with the allocator allocating and two speakers announcing to a router, `diff` exits
/// 0 with one `ok` row per node, `peers` and `routes` show the sessions and routes; the same
/// token cannot write anything.
#[test]
fn diff_peers_and_routes_run_with_the_documented_read_only_grant() {
    let cp = integration_tests::needs!(real_api::installed_control_plane());
    let rt = runtime();
    let tor = collector(&rt);
    let dir = TempDir::new("real-api-cli");
    cp.create_node("node-a", "198.18.0.10", &[]);
    cp.create_node("node-b", "198.18.0.11", &[]);
    let (_allocator, _) = real_api::spawn_allocator(
        &dir,
        &real_api::allocator_identity(&cp),
        &[],
        "allocator.log",
    );
    let id = real_api::speaker_identity(&cp, "node-a");
    let id_b = real_api::speaker_identity(&cp, "node-b");
    let port = tor.local_addr().port();
    let speakers = [
        start_speaker(&dir, &id, "node-a", "ipam-crd", "10.20.0.0/16", port),
        start_speaker(&dir, &id_b, "node-b", "ipam-crd", "10.20.0.0/16", port),
    ];
    let mut allocated = Vec::new();
    for (node, s) in ["node-a", "node-b"].into_iter().zip(&speakers) {
        let cidr = poll_blocking(WAIT, || {
            let out = cp
                .kubectl_as(
                    cp.admin(),
                    &["get", "npc", node, "-o", "jsonpath={.spec.podCIDRs[0]}"],
                )
                .ok()?;
            (!out.is_empty()).then_some(out)
        })
        .unwrap_or_else(|| {
            panic!(
                "{node}: no allocation\n{}",
                dir.path("allocator.log").display()
            )
        });
        wait_status(&cp, s, node, |v| established_with(v, &cidr));
        allocated.push(cidr);
    }
    let me = viewer(&cp);

    let r = cli(&rt, &me, &["diff", "-o", "json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let rows: Vec<(String, String, String, Value, String)> = r.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let s = |k: &str| row[k].as_str().unwrap_or_default().to_owned();
            (
                s("node"),
                s("prefix"),
                s("verdict"),
                row["announcedTo"].clone(),
                s("liveness"),
            )
        })
        .collect();
    let want: Vec<(String, String, String, Value, String)> = ["node-a", "node-b"]
        .iter()
        .zip(&allocated)
        .map(|(n, c)| {
            (
                (*n).into(),
                c.clone(),
                "ok".into(),
                json!(["tor1"]),
                "live".into(),
            )
        })
        .collect();
    assert_eq!(rows, want);
    let r = cli(&rt, &me, &["diff"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("2 nodes, 2 rows: all ok"), "{}", r.stdout);

    let r = cli(&rt, &me, &["peers", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let peers = triples(&r.json(), "peers", ["node", "name", "state"]);
    assert_eq!(
        peers,
        [
            ("node-a", "tor1", "Established"),
            ("node-b", "tor1", "Established")
        ]
        .map(|(n, p, s)| (n.to_owned(), p.to_owned(), s.to_owned()))
    );
    let r = cli(&rt, &me, &["routes", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let routes = triples(&r.json(), "routes", ["node", "prefix", "nextHop"]);
    assert_eq!(
        routes,
        [
            (
                "node-a".to_owned(),
                allocated[0].clone(),
                "198.18.0.10".to_owned()
            ),
            (
                "node-b".to_owned(),
                allocated[1].clone(),
                "198.18.0.11".to_owned()
            ),
        ]
    );

    // The CLI's requests, by the audit log: the documented lists, nothing else, all answered.
    let calls = real_api::requests_by(&cp, &me.username);
    let used: BTreeSet<(&str, &str, &str, &str, u16)> = calls
        .iter()
        .map(|r| {
            (
                r.verb.as_str(),
                r.group.as_str(),
                r.resource.as_str(),
                r.namespace.as_str(),
                r.code,
            )
        })
        .collect();
    let want: BTreeSet<(&str, &str, &str, &str, u16)> = [
        ("list", "", "nodes", "", 200),
        ("list", "podcidr.io", "nodepodcidrs", "", 200),
        ("list", "podcidr.io", "nodebgpstatuses", "", 200),
        (
            "list",
            "coordination.k8s.io",
            "leases",
            "podcidr-node-lease",
            200,
        ),
    ]
    .into();
    assert_eq!(used, want, "{calls:#?}");

    // The same token writes nothing.
    let with = |args: &[&str], input: Option<Value>| {
        cp.kubectl_with_input(&me, args, input.map(|v| v.to_string()).as_deref())
    };
    let npc = json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
                     "metadata": {"name": "node-c"}, "spec": {"podCIDRs": ["10.20.200.0/24"]}});
    assert_forbidden(
        with(&["create", "-f", "-"], Some(npc)),
        "create",
        "nodepodcidrs",
    );
    let nbs = labelled("podcidr.io/v1alpha1", "NodeBGPStatus", "node-a", None);
    assert_forbidden(
        apply_as(&cp, &me, "viewer", &nbs, None),
        "patch",
        "nodebgpstatuses",
    );
    let node = labelled("v1", "Node", "node-a", None);
    assert_forbidden(apply_as(&cp, &me, "viewer", &node, None), "patch", "nodes");
    assert_forbidden(
        with(&["delete", "lease", "node-a", "-n", LEASE_NS], None),
        "delete",
        "leases",
    );
    assert_forbidden(
        with(&["delete", "npc", "node-b"], None),
        "delete",
        "nodepodcidrs",
    );
}
