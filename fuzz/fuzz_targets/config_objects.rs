//! Any JSON as the configuration objects a speaker lists (issue 31 item 9: one bad object
//! reaches every speaker it selects). The input is a JSON array of `BGPSpeakerConfig` and
//! `BGPPeer` objects (by `kind`); each that deserialises as the kube client would deserialise
//! it is selected and assembled for one node, with every selector, conflict, peer reference,
//! Secret reference and field rule the speaker applies. Oracle: no panic; the same objects
//! give the same node config twice, also from the last good state the first call left; a
//! config runs only from a selected `BGPSpeakerConfig`; every object not applied says why.
#![no_main]

use std::collections::BTreeMap;
use std::path::PathBuf;

use podcidr_api::{BGPPeer, BGPSpeakerConfig, SecretKeyRef};
use libfuzzer_sys::fuzz_target;
use podcidr_bgp::objects::{KeyUse, Keys, LastGood, Objects, node_config};
use serde_json::Value;

fn key_file(ns: &str, r: &SecretKeyRef) -> PathBuf {
    PathBuf::from(format!("/run/keys/{ns}/{}/{}", r.name, r.key))
}

fn no_problem(_: &SecretKeyRef, _: KeyUse) -> Option<String> {
    None
}

fn not_kept(_: &SecretKeyRef) -> bool {
    false
}

fuzz_target!(|data: &[u8]| {
    if data.len() > 64 * 1024 {
        return;
    }
    let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let mut configs = Vec::new();
    let mut peers = Vec::new();
    for item in items {
        match item.get("kind").and_then(Value::as_str) {
            Some("BGPSpeakerConfig") => {
                if let Ok(c) = serde_json::from_value::<BGPSpeakerConfig>(item) {
                    configs.push(c);
                }
            }
            Some("BGPPeer") => {
                if let Ok(p) = serde_json::from_value::<BGPPeer>(item) {
                    peers.push(p);
                }
            }
            _ => {}
        }
    }
    let objects = Objects::from_lists(configs, peers);
    let labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", "node-a"),
        ("topology.kubernetes.io/zone", "rack-1"),
        ("node-role.kubernetes.io/worker", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let keys = Keys {
        problem: &no_problem,
        kept: &not_kept,
        file: &key_file,
    };
    let mut last = LastGood::default();
    let first = node_config(&objects, &labels, "node-a", &mut last, &keys);
    let mut last_again = LastGood::default();
    let second = node_config(&objects, &labels, "node-a", &mut last_again, &keys);
    assert_eq!(format!("{first:?}"), format!("{second:?}"));
    assert_eq!(last, last_again);
    if first.config.is_some() {
        assert!(first.speaker_config.is_some(), "a config without its object");
    }
    for (kind, name, why) in &first.not_applied {
        assert!(!why.is_empty(), "{kind} {name} not applied without a reason");
    }
    // From the state the first call left, the same objects run the same config.
    let third = node_config(&objects, &labels, "node-a", &mut last, &keys);
    assert_eq!(format!("{:?}", first.config), format!("{:?}", third.config));
});
