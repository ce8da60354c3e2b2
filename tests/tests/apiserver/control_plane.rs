//! The real control plane harness itself: etcd and kube-apiserver start, deploy/ installs,
//! every shipped ServiceAccount gets a working token, the audit log records RBAC's decisions,
//! and the faults the product tests use (an API server restart, an etcd compaction) do what
//! they say.

use integration_tests::control_plane::{ControlPlane, ControlPlaneOptions, KubeVersion};

/// On the newest Kubernetes the suite builds and on the oldest the README supports.
#[test]
fn kube_apiserver_starts_installs_deploy_and_issues_service_account_tokens() {
    for version in KubeVersion::ALL {
        starts_installs_and_issues_tokens(version);
    }
}

fn starts_installs_and_issues_tokens(version: KubeVersion) {
    let mut cp = integration_tests::needs!(ControlPlane::start_with(ControlPlaneOptions {
        version,
        ..ControlPlaneOptions::default()
    }));
    let reported = cp.kubectl(&["version", "-o", "json"]);
    assert!(
        reported.contains(&format!("\"gitVersion\": \"v{}\"", version.version())),
        "{reported}"
    );
    let docs = cp.install_deploy();
    assert!(docs.iter().any(|d| d["kind"] == "DaemonSet"));
    let crds = cp.kubectl(&["get", "crd", "-o", "name"]);
    for crd in [
        "nodepodcidrs.podcidr.io",
        "podcidrpools.podcidr.io",
        "nodebgpstatuses.podcidr.io",
        "bgpspeakerconfigs.bgp.podcidr.io",
        "bgppeers.bgp.podcidr.io",
        "bgpadvertisements.bgp.podcidr.io",
    ] {
        assert!(crds.contains(crd), "{crds}");
    }
    let speaker = cp.service_account("podcidr-system", "podcidr-bgp-speaker");
    let who = cp
        .kubectl_as(&speaker, &["auth", "can-i", "list", "nodes"])
        .expect("the speaker may list nodes");
    assert_eq!(who.trim(), "yes");
    let denied = cp.kubectl_as(&speaker, &["auth", "can-i", "delete", "nodes"]);
    assert!(denied.is_err(), "{denied:?}");

    cp.create_node("node-a", "198.18.0.10", &["10.244.0.0/24"]);
    // The audit log says who asked what and what RBAC decided (no metric counts a denial).
    let refused = cp.kubectl_as(&speaker, &["delete", "node", "node-a"]);
    assert!(refused.is_err(), "{refused:?}");
    let audited = cp.audit_events().iter().any(|e| {
        e["user"]["username"] == speaker.username.as_str()
            && e["verb"] == "delete"
            && e["responseStatus"]["code"] == 403
    });
    assert!(audited, "the denied delete is in the audit log");
    let rev = cp.compact_etcd();
    assert!(rev > 0);
    cp.restart_apiserver();
    let nodes = cp.kubectl(&["get", "nodes", "-o", "name"]);
    assert_eq!(
        nodes.trim(),
        "node/node-a",
        "objects survive an API server restart"
    );
}
