//! deploy/examples/objects/ holds the objects an install starts from (the operator guide applies
//! them): each document parses as its kind, and the set assembles, on any node, into a config
//! the speaker accepts, with the peer's MD5 key taken from the example Secret. The real API
//! server's schema check of the same file is in `real_api_objects.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ipam_watch::crd::{BGPPeer, BGPSpeakerConfig};
use podcidr_bgp::objects::{Objects, assemble, select};
use serde_json::Value;

fn example(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/examples/objects")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn example_config_objects_assemble_into_a_valid_config_on_any_node() {
    let docs = example("default.yaml");
    let of = |kind: &'static str| docs.iter().filter(move |d| d["kind"] == kind).cloned();
    let configs: Vec<BGPSpeakerConfig> = of("BGPSpeakerConfig")
        .map(|d| serde_json::from_value(d).expect("a BGPSpeakerConfig"))
        .collect();
    let peers: Vec<BGPPeer> = of("BGPPeer")
        .map(|d| serde_json::from_value(d).expect("a BGPPeer"))
        .collect();
    let secret = of("Secret").next().expect("the MD5 Secret");
    let objects = Objects::from_lists(configs, peers);
    let node = BTreeMap::from([("kubernetes.io/hostname".to_owned(), "node-a".to_owned())]);
    let selection = select(&objects, &node);
    let config = selection.config.expect("the example selects every node");
    assert!(selection.conflicts.is_empty() && selection.bad_selectors.is_empty());
    for p in &selection.peers {
        let r = p.spec.password_secret_ref.as_ref().expect("an MD5 key");
        assert_eq!(secret["metadata"]["name"], r.name.as_str());
        assert!(
            secret["stringData"][&r.key].is_string(),
            "the Secret has key {}",
            r.key
        );
    }
    let key_file = |secret: &str, r: &ipam_watch::crd::SecretKeyRef| {
        PathBuf::from(format!("/run/podcidr-bgp/keys/{secret}/{}", r.key))
    };
    let assembled = assemble(config, &selection.peers, &|_, r| key_file(&r.name, r))
        .unwrap_or_else(|e| panic!("the example is valid: {e}"));
    assert_eq!(assembled.peers.len(), 1);
    assert_eq!(assembled.peers[0].name, "tor1");
}
