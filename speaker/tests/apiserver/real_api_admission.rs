//! The speaker's ValidatingAdmissionPolicy (`deploy/speaker/admission-policy.yaml`) enforced by
//! real API servers, the newest Kubernetes the suite builds and the oldest the README supports
//! (1.30, where admission policies are GA). `admission_policy.rs` evaluates the same policy
//! with a CEL evaluator for every request shape; this is the server's own verdict.
//!
//! The speaker's token is bound to a Pod on its node, as the kubelet's projected token is, so
//! the server puts the node's name into the request's user info, which the policy compares with
//! the object's name. What must hold, with and without the policy's binding: the kubelet's
//! Leases in `kube-node-lease` and another controller's leader election are never touched.

use crate::common;

use std::time::{Duration, Instant};

use common::real_api::{
    ALLOCATOR_SA, LEASE_NS, SPEAKER_SA, SYSTEM_NS, apply_as, installed_control_plane_with,
};
use integration_tests::control_plane::{ControlPlane, ControlPlaneOptions, Identity, KubeVersion};
use serde_json::{Value, json};

const POLICY: &str = "podcidr-bgp-speaker-own-status";
const DENIED: &str =
    "a speaker may write only the NodeBGPStatus and the Lease named after its own node";
/// Policies and bindings reach the admission plugin through an informer: bounded wait.
const SETTLE: Duration = Duration::from_secs(30);

fn lease(ns: &str, name: &str, holder: &str) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"holderIdentity": holder, "leaseDurationSeconds": 40}})
}

fn status(node: &str) -> Value {
    json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodeBGPStatus",
           "metadata": {"name": node}, "spec": {"nodeName": node}})
}

/// The speaker on `node`: a token bound to a Pod of the DaemonSet's there
/// (`ControlPlane::node_pod_identity`), which the server says carries the node.
fn speaker_on(cp: &ControlPlane, node: &str) -> Identity {
    let id = cp.node_pod_identity(SYSTEM_NS, SPEAKER_SA, node);
    let whoami = cp
        .kubectl_as(&id, &["auth", "whoami", "-o", "json"])
        .expect("auth whoami");
    assert!(
        whoami.contains("authentication.kubernetes.io/node-name") && whoami.contains(node),
        "the bound token carries the node: {whoami}"
    );
    id
}

/// Retries `write` until `done` says its answer is the settled one (bounded by [`SETTLE`]).
fn settled(
    write: impl Fn() -> Result<String, String>,
    done: impl Fn(&Result<String, String>) -> bool,
) -> Result<String, String> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let r = write();
        if done(&r) || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn enforced(version: KubeVersion) {
    let Some(cp) = installed_control_plane_with(ControlPlaneOptions {
        version,
        ..ControlPlaneOptions::default()
    }) else {
        return;
    };
    let v = version.version();
    for node in ["node-a", "node-b"] {
        cp.create_node(node, "198.18.0.10", &[]);
    }
    let speaker = speaker_on(&cp, "node-a");
    let allocator = cp.service_account(SYSTEM_NS, ALLOCATOR_SA);
    // A kubelet's identity (impersonated by the admin) with what the Node authorizer would
    // grant it on Leases, as RBAC here.
    cp.apply(
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "kubelet-lease", "namespace": "kube-node-lease"},
             "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                        "verbs": ["get", "create", "update", "patch"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "kubelet-lease", "namespace": "kube-node-lease"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubelet-lease"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]}]})
        .to_string(),
    );
    let kubelet_renews = |holder: &str| {
        cp.kubectl_with_input(
            cp.admin(),
            &[
                "apply",
                "--server-side",
                "--field-manager=kubelet",
                "--as=system:node:node-b",
                "--as-group=system:nodes",
                "-f",
                "-",
            ],
            Some(&lease("kube-node-lease", "node-b", holder).to_string()),
        )
    };
    // The allocator's election as its Role grants it (get, create, update).
    let election = |holder: &str| {
        let body = lease(SYSTEM_NS, "podcidr-bgp-allocator", holder).to_string();
        cp.kubectl_with_input(&allocator, &["create", "-f", "-"], Some(&body))
            .or_else(|_| cp.kubectl_with_input(&allocator, &["replace", "-f", "-"], Some(&body)))
    };

    // The speaker writes its own node's status and Lease.
    apply_as(&cp, &speaker, "speaker", &status("node-a"), None)
        .unwrap_or_else(|e| panic!("{v}: own NodeBGPStatus: {e}"));
    apply_as(
        &cp,
        &speaker,
        "speaker",
        &lease(LEASE_NS, "node-a", "node-a"),
        None,
    )
    .unwrap_or_else(|e| panic!("{v}: own Lease: {e}"));
    // Another node's: refused by the policy, which RBAC alone would allow.
    let other_status = settled(
        || apply_as(&cp, &speaker, "speaker", &status("node-b"), None),
        Result::is_err,
    );
    let err = other_status.expect_err(&format!("{v}: the policy refuses node-b's status"));
    assert!(err.contains(POLICY) && err.contains(DENIED), "{v}: {err}");
    let err = apply_as(
        &cp,
        &speaker,
        "speaker",
        &lease(LEASE_NS, "node-b", "node-a"),
        None,
    )
    .expect_err(&format!("{v}: the policy refuses node-b's Lease"));
    assert!(err.contains(DENIED), "{v}: {err}");
    // Nobody else is touched: the kubelet's heartbeat, another controller's election.
    kubelet_renews("node-b").unwrap_or_else(|e| panic!("{v}: kubelet Lease: {e}"));
    election("a").unwrap_or_else(|e| panic!("{v}: allocator election: {e}"));

    // Without the binding the policy decides nothing: still nobody else is touched, and
    // (the failure mode an earlier policy had) no Lease write in the cluster is denied.
    cp.kubectl(&[
        "delete",
        "validatingadmissionpolicybinding",
        POLICY,
        "--wait=true",
    ]);
    settled(
        || apply_as(&cp, &speaker, "speaker", &status("node-b"), None),
        Result::is_ok,
    )
    .unwrap_or_else(|e| panic!("{v}: without the binding nothing is enforced: {e}"));
    kubelet_renews("node-b-2").unwrap_or_else(|e| panic!("{v}: kubelet Lease: {e}"));
    election("b").unwrap_or_else(|e| panic!("{v}: allocator election: {e}"));
    apply_as(
        &cp,
        &speaker,
        "speaker",
        &lease(LEASE_NS, "node-a", "node-a-2"),
        None,
    )
    .unwrap_or_else(|e| panic!("{v}: own Lease without the binding: {e}"));
}

#[test]
fn the_server_lets_a_speaker_write_only_its_own_nodes_status_and_lease_and_touches_nothing_else() {
    for version in KubeVersion::ALL {
        enforced(version);
    }
}

/// Issue 30 item 2: the configuration objects' delete guard
/// (`deploy/admission/config-delete-guard.yaml`) on every supported server: a DELETE of a
/// BGPPeer or BGPSpeakerConfig, one by one or as a collection (`--all`, what a prune or a
/// `deletecollection` sends), is refused with the command that allows it, until the object
/// carries `bgp.podcidr.io/allow-delete: "true"`.
fn delete_guarded(version: KubeVersion) {
    let Some(cp) = installed_control_plane_with(ControlPlaneOptions {
        version,
        ..ControlPlaneOptions::default()
    }) else {
        return;
    };
    let v = version.version();
    cp.apply(
        &json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPSpeakerConfig",
             "metadata": {"name": "default"},
             "spec": {"asn": 65010, "source": {"kind": "node-spec"}, "allowedPrefixes": ["10.244.0.0/16"]}},
            {"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
             "metadata": {"name": "tor"}, "spec": {"address": "192.0.2.1", "asn": 65000}},
            {"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
             "metadata": {"name": "tor2"}, "spec": {"address": "192.0.2.2", "asn": 65000}}]})
        .to_string(),
    );
    let delete = |what: &[&str]| {
        let mut args = vec!["delete", "--wait=false"];
        args.extend_from_slice(what);
        cp.kubectl_as(cp.admin(), &args)
    };
    // The policy reaches the admission plugin through an informer: until it refuses a probe
    // (re-created after each delete that still went through), nothing is asserted.
    let probe = json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
        "metadata": {"name": "probe"}, "spec": {"address": "192.0.2.9", "asn": 65000}})
    .to_string();
    let deadline = Instant::now() + SETTLE;
    loop {
        cp.apply(&probe);
        match delete(&["bgppeer", "probe"]) {
            Err(e) if e.contains("podcidr-bgp-config-delete-guard") => break,
            r => assert!(
                Instant::now() < deadline,
                "{v}: the guard never took effect: {r:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let err = delete(&["bgppeer", "tor"])
        .expect_err(&format!("{v}: the guard refuses deleting a BGPPeer"));
    assert!(
        err.contains("podcidr-bgp-config-delete-guard")
            && err.contains("kubectl annotate bgppeer tor bgp.podcidr.io/allow-delete=true"),
        "{v}: {err}"
    );
    let err = delete(&["bgppeers", "--all"]).expect_err("a collection delete is refused too");
    assert!(
        err.contains("podcidr-bgp-config-delete-guard"),
        "{v}: {err}"
    );
    let err = delete(&["bgpspeakerconfig", "default"]).expect_err("and a BGPSpeakerConfig");
    assert!(
        err.contains("BGPSpeakerConfig default configures BGP"),
        "{v}: {err}"
    );
    let left = cp.kubectl(&["get", "bgppeers,bgpspeakerconfigs", "-o", "name"]);
    assert_eq!(left.lines().count(), 4, "{v}: nothing was deleted: {left}");
    // Any other value than "true" is no permission.
    cp.kubectl(&[
        "annotate",
        "bgppeer",
        "tor2",
        "bgp.podcidr.io/allow-delete=yes",
    ]);
    assert!(delete(&["bgppeer", "tor2"]).is_err(), "{v}");

    // On purpose: annotated first, then deleted (one, and the rest as a collection once each
    // carries it).
    cp.kubectl(&[
        "annotate",
        "bgppeer",
        "tor",
        "bgp.podcidr.io/allow-delete=true",
    ]);
    delete(&["bgppeer", "tor"]).unwrap_or_else(|e| panic!("{v}: annotated: {e}"));
    cp.kubectl(&[
        "annotate",
        "--overwrite",
        "bgppeer",
        "tor2",
        "bgp.podcidr.io/allow-delete=true",
    ]);
    cp.kubectl(&[
        "annotate",
        "bgpspeakerconfig",
        "default",
        "bgp.podcidr.io/allow-delete=true",
    ]);
    cp.kubectl(&[
        "annotate",
        "bgppeer",
        "probe",
        "bgp.podcidr.io/allow-delete=true",
    ]);
    delete(&["bgppeers", "--all"]).unwrap_or_else(|e| panic!("{v}: all annotated: {e}"));
    delete(&["bgpspeakerconfig", "default"]).unwrap_or_else(|e| panic!("{v}: {e}"));
    let left = cp.kubectl(&["get", "bgppeers,bgpspeakerconfigs", "-o", "name"]);
    assert!(left.trim().is_empty(), "{v}: {left}");
}

#[test]
fn deleting_a_config_object_needs_the_allow_delete_annotation_first_on_every_supported_server() {
    for version in KubeVersion::ALL {
        delete_guarded(version);
    }
}
