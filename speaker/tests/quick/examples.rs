//! deploy/examples/objects/ holds the objects an install starts from (the operator guide applies
//! them): each document parses as its kind, and the set assembles, on any node, into a config
//! the speaker accepts, with the peer's MD5 key taken from the example Secret. The real API
//! server's schema check of the same file is in `real_api_objects.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use podcidr_bgp::objects::check::parse_manifests;
use podcidr_bgp::objects::{assemble, select};
use serde_json::Value;

fn example_text(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/examples/objects")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn example(name: &str) -> Vec<Value> {
    serde_saphyr::from_str_multiple(&example_text(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn example_config_objects_assemble_into_a_valid_config_on_any_node() {
    let docs = example("default.yaml");
    // Keys are referenced, never shipped: a re-apply of the example must not reset them.
    assert!(
        docs.iter().all(|d| d["kind"] != "Secret"),
        "the example ships no Secret (kubectl create secret generic, operator guide)"
    );
    let (objects, _) = parse_manifests(&example_text("default.yaml")).expect("the example reads");
    let node = BTreeMap::from([("kubernetes.io/hostname".to_owned(), "node-a".to_owned())]);
    let selection = select(&objects, &node);
    let config = selection.config.expect("the example selects every node");
    assert!(selection.conflicts.is_empty() && selection.bad_selectors.is_empty());
    for p in &selection.peers {
        let r = p.spec.password_secret_ref.as_ref().expect("an MD5 key");
        assert_eq!(
            r.name, "podcidr-bgp-md5",
            "the Secret the speaker's Role may read"
        );
    }
    let key_file = |secret: &str, r: &podcidr_api::SecretKeyRef| {
        PathBuf::from(format!("/run/podcidr-bgp/keys/{secret}/{}", r.key))
    };
    let assembled = assemble(config, &selection.peers, &|_, r| key_file(&r.name, r))
        .unwrap_or_else(|e| panic!("the example is valid: {e}"));
    assert_eq!(assembled.peers.len(), 1);
    assert_eq!(assembled.peers[0].name, "tor1");
}

/// `speaker --config-source kubernetes --check-config --objects FILE…`, offline.
fn check_objects(files: &[&std::path::Path], labels: &str) -> (i32, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_podcidr-bgp"));
    cmd.args(["speaker", "--config-source", "kubernetes", "--check-config"]);
    for f in files {
        cmd.arg("--objects").arg(f);
    }
    let out = cmd.args(["--node-labels", labels]).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn manifest(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("podcidr-objects-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const CONFIG: &str = "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPSpeakerConfig\n\
    metadata: {name: default}\n\
    spec: {asn: 65001, source: {kind: ipam-crd}, allowedPrefixes: [10.0.0.0/8]}\n";

#[test]
fn check_config_objects_accepts_the_shipped_example() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/objects/default.yaml");
    let (code, out) = check_objects(&[&path], "");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("runs BGPSpeakerConfig default and 1 BGPPeer (tor1)"),
        "{out}"
    );
}

#[test]
fn check_config_objects_names_every_bad_field_on_its_object_unknown_keys_included() {
    let peers = manifest(
        "bad-peer.yaml",
        "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPPeer\nmetadata: {name: tor1}\n\
         spec: {address: 192.0.2.1, asn: 65000, holdTime: 2, holdtime: 9}\n",
    );
    let config = manifest("config.yaml", CONFIG);
    let (code, out) = check_objects(&[&config, &peers], "");
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("BGPPeer tor1: spec.holdTime: 2 is not allowed (0 or 3..65535)"),
        "{out}"
    );
    assert!(
        out.contains("BGPPeer tor1: spec.holdtime: unknown key (did you mean holdTime?)"),
        "{out}"
    );
}

#[test]
fn check_config_objects_follows_node_selectors_and_says_when_nothing_selects_the_node() {
    let rack = "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPSpeakerConfig\n\
        metadata: {name: rack-r2}\n\
        spec: {nodeSelector: {matchLabels: {rack: r2}}, asn: 65002, source: {kind: ipam-crd}, \
        allowedPrefixes: [10.0.0.0/8]}\n---\n\
        apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPPeer\nmetadata: {name: tor-r2}\n\
        spec: {nodeSelector: {matchLabels: {rack: r2}}, address: 192.0.2.9, asn: 65000}\n";
    let path = manifest("rack.yaml", rack);
    let (code, out) = check_objects(&[&path], "rack=r2,zone=a");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("runs BGPSpeakerConfig rack-r2 and 1 BGPPeer (tor-r2)"),
        "{out}"
    );
    let (code, out) = check_objects(&[&path], "rack=r1");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("would announce nothing"), "{out}");
}

/// Issue 30 item 2: an Argo CD prune, a Flux prune or a `helm uninstall` never deletes a CRD
/// (every object of its kind with it) or an example configuration object on its own.
#[test]
fn crds_and_example_objects_carry_the_annotations_gitops_tools_read_to_never_prune_them() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut checked = 0;
    let dirs = [root.join("crds"), root.join("examples/objects")];
    for dir in &dirs {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name == "kustomization.yaml" {
                continue;
            }
            let docs: Vec<Value> =
                serde_saphyr::from_str_multiple(&std::fs::read_to_string(&path).unwrap())
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            for d in docs.iter().filter(|d| !d.is_null()) {
                let a = &d["metadata"]["annotations"];
                for (key, value) in podcidr_api::KEEP_ANNOTATIONS {
                    assert_eq!(
                        a[*key], *value,
                        "{name}: {} {}",
                        d["kind"], d["metadata"]["name"]
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 10, "{checked}");
}

/// Issue 32 item 10: `nextHop.ipv6: self` on an IPv4-only session announces IPv6 pod CIDRs
/// only from nodes with an IPv6 InternalIP (with a file source: never). `--check-config`
/// says so per peer and family, and still accepts the config (exit 0): it runs, and whether
/// a node has that address is not in it.
#[test]
fn check_config_warns_of_a_family_whose_self_next_hop_the_session_cannot_supply() {
    let file = manifest(
        "dual-stack-v4-session.yaml",
        "asn: 65010\nrouterId: 192.0.2.10\nsource: {kind: file, path: /x}\n\
         allowedPrefixes: [10.0.0.0/8, \"fd00::/48\"]\n\
         peers: [{name: tor1, address: 192.0.2.1, asn: 65000}]\n",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_podcidr-bgp"))
        .args(["speaker", "--node-name", "n1", "--check-config", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("config OK"), "{text}");
    assert!(
        text.contains(
            "warning: peer tor1: nextHop.ipv6 is self and the session has no IPv6 address of its \
             own; with a file source there is no Node to take an IPv6 InternalIP from, so no \
             ipv6-unicast route is announced to it"
        ),
        "{text}"
    );
    let config = manifest(
        "dual-stack-config.yaml",
        "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPSpeakerConfig\n\
         metadata: {name: default}\n\
         spec: {asn: 65001, source: {kind: ipam-crd}, allowedPrefixes: [10.0.0.0/8, \"fd00::/48\"]}\n",
    );
    let peer = manifest(
        "v4-peer.yaml",
        "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPPeer\nmetadata: {name: tor1}\n\
         spec: {address: 192.0.2.1, asn: 65000}\n",
    );
    let (code, out) = check_objects(&[&config, &peer], "");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "warning: peer tor1: nextHop.ipv6 is self and the session has no IPv6 address of its \
             own; ipv6-unicast routes go to it only from nodes with an IPv6 InternalIP"
        ),
        "{out}"
    );
}
