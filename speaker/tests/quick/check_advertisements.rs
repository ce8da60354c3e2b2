//! `speaker --check-config --objects` with `BGPAdvertisement`s: the ones that select the node
//! are named, and one that cannot be read fails the check naming its field (it would announce
//! nothing anywhere, as the speakers and its status say).

use std::path::PathBuf;
use std::process::Command;

use crate::common::{BIN, TempDir};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn check(advertisement: &str) -> (i32, String) {
    let dir = TempDir::new("check-ads");
    let file = dir.path("ads.yaml");
    std::fs::write(&file, advertisement).unwrap();
    let out = Command::new(BIN)
        .args([
            "speaker",
            "--config-source",
            "kubernetes",
            "--check-config",
            "--objects",
        ])
        .arg(repo().join("deploy/examples/objects/default.yaml"))
        .arg("--objects")
        .arg(&file)
        .args(["--node-labels", "rack=r1"])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn a_bgp_advertisement_selecting_the_node_is_named() {
    let (code, out) = check(
        "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: lb}\n\
         spec:\n  nodeSelector: {matchLabels: {rack: r1}}\n  serviceSelector: {}\n  \
         addresses: [LoadBalancerIP]\n  allowedPrefixes: [198.51.100.0/24]\n---\n\
         apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: other-rack}\n\
         spec:\n  nodeSelector: {matchLabels: {rack: r9}}\n  serviceSelector: {}\n  \
         addresses: [ClusterIP]\n  allowedPrefixes: [10.96.0.0/16]\n",
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("announces the Services of 1 BGPAdvertisement (lb)"),
        "{out}"
    );
}

#[test]
fn an_unreadable_bgp_advertisement_fails_the_check_naming_its_field() {
    let (code, out) = check(
        "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: lb}\n\
         spec:\n  serviceSelector: {}\n  addresses: [LoadBalancerIP]\n  \
         allowedPrefixes: [198.51.100.1/24]\n  largeCommunities: [\"1:2\"]\n",
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "BGPAdvertisement lb: spec.allowedPrefixes[0]: \"198.51.100.1/24\" has host bits set"
        ),
        "{out}"
    );
    assert!(
        out.contains("BGPAdvertisement lb: spec.largeCommunities[0]"),
        "{out}"
    );
}
