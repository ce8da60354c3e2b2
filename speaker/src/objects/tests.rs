use std::collections::BTreeMap;
use std::path::PathBuf;

use podcidr_api::{BGPPeer, BGPSpeakerConfig, SecretKeyRef};

use super::*;

fn config(yaml: &str) -> BGPSpeakerConfig {
    serde_saphyr::from_str(yaml).unwrap()
}

fn peer(yaml: &str) -> BGPPeer {
    serde_saphyr::from_str(yaml).unwrap()
}

fn meta(name: &str, created: &str) -> String {
    format!("metadata: {{name: {name}, creationTimestamp: \"{created}\", generation: 1}}\n")
}

pub(super) fn speaker_config(name: &str, created: &str, spec: &str) -> BGPSpeakerConfig {
    config(&format!(
        "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPSpeakerConfig\n{}spec: {spec}\n",
        meta(name, created)
    ))
}

pub(super) fn bgp_peer(name: &str, created: &str, spec: &str) -> BGPPeer {
    peer(&format!(
        "apiVersion: bgp.podcidr.io/v1beta1\nkind: BGPPeer\n{}spec: {spec}\n",
        meta(name, created)
    ))
}

pub(super) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn key_file(peer: &str, r: &SecretKeyRef) -> PathBuf {
    PathBuf::from(format!("/run/keys/{peer}.{}.{}", r.name, r.key))
}

pub(super) const SPEC: &str =
    "{asn: 65010, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16]}";

#[test]
fn the_highest_priority_speaker_config_wins_never_the_creation_time() {
    let objects = Objects::from_lists(
        vec![
            // Re-created yesterday (a restore, a GitOps bootstrap): its age does not matter.
            speaker_config(
                "young",
                "2026-11-02T00:00:00Z",
                "{priority: 10, asn: 65010, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16]}",
            ),
            speaker_config("old", "2026-11-01T00:00:00Z", SPEC),
            speaker_config(
                "rack9",
                "2026-10-01T00:00:00Z",
                "{priority: 20, asn: 65011, nodeSelector: {matchLabels: {rack: r9}}}",
            ),
        ],
        Vec::new(),
    );
    let s = select(&objects, &labels(&[("rack", "r1")]));
    assert_eq!(
        s.config.map(kube::ResourceExt::name_any).as_deref(),
        Some("young")
    );
    assert_eq!(s.conflicts.len(), 1);
    assert_eq!(
        s.conflicts[0].to_string(),
        "BGPSpeakerConfig old is not applied: BGPSpeakerConfig young has priority 10 (this one 0) and both select this node"
    );
    let s = select(&objects, &labels(&[("rack", "r9")]));
    assert_eq!(
        s.config.map(kube::ResourceExt::name_any).as_deref(),
        Some("rack9")
    );
    assert_eq!(s.conflicts.len(), 2);
}

#[test]
fn equal_priorities_are_settled_by_name_and_reported_never_by_creation_time() {
    // "b" is older; the name decides, whichever was created first.
    for (a_created, b_created) in [
        ("2026-11-02T00:00:00Z", "2026-11-01T00:00:00Z"),
        ("2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"),
    ] {
        let objects = Objects::from_lists(
            vec![
                speaker_config("b", b_created, SPEC),
                speaker_config("a", a_created, SPEC),
            ],
            Vec::new(),
        );
        let s = select(&objects, &labels(&[]));
        assert_eq!(
            s.config.map(kube::ResourceExt::name_any).as_deref(),
            Some("a")
        );
        assert_eq!(
            s.conflicts[0].to_string(),
            "BGPSpeakerConfig b is not applied: BGPSpeakerConfig a has the same priority (0) and comes first by name, and both select this node; set spec.priority to choose"
        );
    }
}

#[test]
fn two_peers_with_one_endpoint_on_a_node_keep_the_higher_priority() {
    let objects = Objects::from_lists(
        Vec::new(),
        vec![
            bgp_peer(
                "tor-b",
                "2026-11-02T00:00:00Z",
                "{priority: 5, address: 192.0.2.1, asn: 65000}",
            ),
            bgp_peer(
                "tor-a",
                "2026-11-01T00:00:00Z",
                "{address: 192.0.2.1, asn: 65001}",
            ),
            bgp_peer(
                "tor-c",
                "2026-11-01T00:00:00Z",
                "{address: 192.0.2.1, port: 1179, asn: 65000}",
            ),
            bgp_peer(
                "elsewhere",
                "2026-11-03T00:00:00Z",
                "{address: 192.0.2.1, asn: 65000, nodeSelector: {matchLabels: {rack: r2}}}",
            ),
        ],
    );
    let s = select(&objects, &labels(&[("rack", "r1")]));
    let names: Vec<String> = s
        .peers
        .iter()
        .map(|p| kube::ResourceExt::name_any(*p))
        .collect();
    assert_eq!(names, ["tor-b", "tor-c"]);
    assert_eq!(s.conflicts.len(), 1);
    assert_eq!(
        s.conflicts[0].to_string(),
        "BGPPeer tor-a is not applied: BGPPeer tor-b has priority 5 (this one 0) and both peer with 192.0.2.1 port 179 on this node"
    );
    assert!(s.config.is_none(), "no BGPSpeakerConfig selects the node");
}

#[test]
fn peer_addresses_compare_as_addresses_not_as_strings() {
    let objects = Objects::from_lists(
        Vec::new(),
        vec![
            bgp_peer(
                "upper",
                "2026-11-01T00:00:00Z",
                "{address: \"2001:DB8::1\", asn: 65000}",
            ),
            bgp_peer(
                "long",
                "2026-11-01T00:00:00Z",
                "{address: \"2001:db8:0:0::1\", asn: 65000}",
            ),
            bgp_peer(
                "mapped",
                "2026-11-01T00:00:00Z",
                "{address: \"::ffff:192.0.2.1\", asn: 65000}",
            ),
            bgp_peer(
                "v4",
                "2026-11-01T00:00:00Z",
                "{address: 192.0.2.1, asn: 65000}",
            ),
            // fe80::1 is a different router on each link.
            bgp_peer(
                "uplink1",
                "2026-11-01T00:00:00Z",
                "{interface: eth1, peerAddress: \"fe80::1\", asn: 65000}",
            ),
            bgp_peer(
                "uplink2",
                "2026-11-01T00:00:00Z",
                "{interface: eth2, peerAddress: \"FE80::1\", asn: 65000}",
            ),
        ],
    );
    let s = select(&objects, &labels(&[]));
    let names: Vec<String> = s
        .peers
        .iter()
        .map(|p| kube::ResourceExt::name_any(*p))
        .collect();
    assert_eq!(names, ["long", "mapped", "uplink1", "uplink2"]);
    let lost: Vec<(&str, &str)> = s
        .conflicts
        .iter()
        .map(|c| (c.loser.as_str(), c.winner.as_str()))
        .collect();
    assert_eq!(lost, [("upper", "long"), ("v4", "mapped")]);
}

#[test]
fn objects_assemble_into_the_config_the_file_gives() {
    let c = speaker_config("default", "2026-11-01T00:00:00Z", SPEC);
    let p = bgp_peer(
        "tor1",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.1, asn: 65000, holdTime: 9, passwordSecretRef: {name: md5, key: tor1}}",
    );
    let from_objects = assemble(&c, &[&p], &key_file).unwrap();
    let from_file = podcidr_config::Config::from_yaml_str(
        "asn: 65010\nsource: {kind: ipam-crd}\nallowedPrefixes: [10.244.0.0/16]\npeers:\n  \
         - {name: tor1, address: 192.0.2.1, asn: 65000, holdTime: 9, passwordFile: /run/keys/tor1.md5.tor1}\n",
    )
    .unwrap();
    assert_eq!(from_objects, from_file);
}

#[test]
fn a_node_with_a_speaker_config_and_no_peer_runs_no_session() {
    let c = speaker_config("default", "2026-11-01T00:00:00Z", SPEC);
    let config = assemble(&c, &[], &key_file).unwrap();
    assert!(config.peers.is_empty());
}

#[test]
fn errors_name_the_object_and_its_field() {
    let c = speaker_config(
        "default",
        "2026-11-01T00:00:00Z",
        "{source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.1/16]}",
    );
    let good = bgp_peer(
        "good",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.1, asn: 65000}",
    );
    let bad = bgp_peer(
        "bad",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.2, asn: 65000, holdTime: 2}",
    );
    let e = assemble(&c, &[&good, &bad], &key_file).unwrap_err();
    let lines: Vec<String> = e.0.iter().map(ToString::to_string).collect();
    assert!(
        lines.contains(&"BGPSpeakerConfig default: spec.asn: required".to_owned()),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(
            "BGPSpeakerConfig default: spec.allowedPrefixes[0]: \"10.244.0.1/16\" has host bits set"
        )),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"BGPPeer bad: spec.holdTime: 2 is not allowed (0 or 3..65535)".to_owned()),
        "{lines:?}"
    );
    assert_eq!(
        e.objects(),
        [
            (ObjectKind::SpeakerConfig, "default"),
            (ObjectKind::Peer, "bad")
        ]
    );
}

#[test]
fn raw_manifests_report_unknown_and_file_only_keys() {
    let config = serde_json::json!({"asn": 65010, "allowedPrefixes": ["10.244.0.0/16"], "admin": {}, "nodeName": "x"});
    let peer = serde_json::json!({"address": "192.0.2.1", "asn": 65000, "holdtime": 9, "passwordFile": "/k"});
    let e = assemble_specs(("default", &config), &[("tor1", &peer)], &key_file).unwrap_err();
    let lines: Vec<String> = e.0.iter().map(ToString::to_string).collect();
    for want in [
        "BGPSpeakerConfig default: spec.nodeName: not a BGPSpeakerConfig key",
        "BGPSpeakerConfig default: spec.admin: not a BGPSpeakerConfig key",
        "BGPPeer tor1: spec.passwordFile: not a BGPPeer key (use passwordSecretRef",
        "BGPPeer tor1: spec.holdtime: unknown key (did you mean holdTime?)",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(want)),
            "{want}\n{lines:#?}"
        );
    }
}

fn missing(r: &SecretKeyRef, _: KeyUse) -> Option<String> {
    Some(format!("Secret {} has no key {:?}", r.name, r.key))
}

const NO_SECRETS: Keys = Keys {
    problem: &missing,
    kept: &|_| false,
    file: &key_file,
};

pub(super) const ALL_SECRETS: Keys = Keys {
    problem: &|_, _| None,
    kept: &|_| false,
    file: &key_file,
};

pub(super) fn with_generation<K: kube::Resource>(mut o: K, generation: i64) -> K {
    o.meta_mut().generation = Some(generation);
    o
}

#[test]
fn an_object_that_becomes_invalid_keeps_its_last_good_version_on_the_node() {
    let c = speaker_config("default", "2026-11-01T00:00:00Z", SPEC);
    let good = with_generation(
        bgp_peer(
            "tor1",
            "2026-11-01T00:00:00Z",
            "{address: 192.0.2.1, asn: 65000, holdTime: 9}",
        ),
        1,
    );
    let mut last = LastGood::default();
    let objects = Objects::from_lists(vec![c.clone()], vec![good]);
    let first = node_config(&objects, &labels(&[]), "node-a", &mut last, &ALL_SECRETS);
    assert_eq!(
        first.config.as_ref().unwrap().peers[0].hold_time.seconds(),
        9
    );
    assert!(first.last_good.is_empty() && first.not_applied.is_empty());

    let broken = with_generation(
        bgp_peer(
            "tor1",
            "2026-11-01T00:00:00Z",
            "{address: 192.0.2.1, asn: 65000, holdTime: 2}",
        ),
        2,
    );
    let objects = Objects::from_lists(vec![c], vec![broken]);
    let second = node_config(&objects, &labels(&[]), "node-a", &mut last, &ALL_SECRETS);
    let config = second.config.clone().expect("the node keeps running");
    assert_eq!(config.peers[0].hold_time.seconds(), 9, "generation 1 runs");
    assert_eq!(second.peers[0].generation, Some(1));
    assert_eq!(second.last_good.len(), 1);
    assert!(
        second.last_good[0]
            .1
            .contains("spec.holdTime: 2 is not allowed"),
        "{second:?}"
    );
}

/// Issue 30 item 1: what a process ran, kept as JSON and read by the next one, runs where the
/// current version cannot; the key the kept version names is the one written for it, even
/// after the current version renamed it; deleted objects are forgotten.
#[test]
fn last_good_kept_by_one_process_runs_in_the_next_where_the_current_version_cannot() {
    let c = with_generation(speaker_config("default", "2026-11-01T00:00:00Z", SPEC), 1);
    let good = with_generation(
        bgp_peer(
            "tor1",
            "2026-11-01T00:00:00Z",
            "{address: 192.0.2.1, asn: 65000, passwordSecretRef: {name: md5, key: tor1}}",
        ),
        1,
    );
    let mut first = LastGood::default();
    let objects = Objects::from_lists(vec![c.clone()], vec![good]);
    node_config(&objects, &labels(&[]), "node-a", &mut first, &ALL_SECRETS);
    let kept = serde_json::to_string(&first).unwrap();

    // The next process: the config's new generation has host bits in a prefix, the peer's
    // names a key the Secret does not have (renamed before the BGPPeers were updated).
    let broken_config = with_generation(
        speaker_config(
            "default",
            "2026-11-01T00:00:00Z",
            "{asn: 65010, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.1/16]}",
        ),
        2,
    );
    let renamed = with_generation(
        bgp_peer(
            "tor1",
            "2026-11-01T00:00:00Z",
            "{address: 192.0.2.1, asn: 65000, passwordSecretRef: {name: md5, key: tor-1}}",
        ),
        2,
    );
    let keys = Keys {
        problem: &|r, _| (r.key != "tor1").then(|| format!("Secret md5 has no key {:?}", r.key)),
        kept: &|_| false,
        file: &key_file,
    };
    let objects = Objects::from_lists(vec![broken_config], vec![renamed]);
    let mut next: LastGood = serde_json::from_str(&kept).unwrap();
    let n = node_config(&objects, &labels(&[]), "node-a", &mut next, &keys);
    assert!(n.cannot_run.is_empty(), "{n:?}");
    assert_eq!(n.speaker_config.as_ref().unwrap().generation, Some(1));
    assert_eq!(n.peers[0].generation, Some(1));
    assert_eq!(n.last_good.len(), 2, "{n:?}");
    assert_eq!(
        n.key_refs[&("tor1".to_owned(), KeyUse::TcpMd5)].key,
        "tor1",
        "the kept version's own key"
    );
    assert_eq!(next.secret_names().collect::<Vec<_>>(), ["md5"]);

    // Without what the previous process kept: nothing runs, and the node says it cannot.
    let n = node_config(
        &objects,
        &labels(&[]),
        "node-a",
        &mut LastGood::default(),
        &keys,
    );
    assert!(n.config.is_none());
    assert_eq!(
        n.cannot_run,
        [(ObjectKind::SpeakerConfig, "default".to_owned())]
    );
    assert!(
        n.cannot_run_reason()
            .unwrap()
            .contains("BGPSpeakerConfig default: spec.allowedPrefixes[0]"),
        "{n:?}"
    );

    next.retain_existing(&Objects::default());
    assert!(next.is_empty(), "deleted objects are not run again");
}

#[test]
fn an_object_never_valid_is_not_applied_and_the_rest_runs() {
    let c = speaker_config("default", "2026-11-01T00:00:00Z", SPEC);
    let good = bgp_peer(
        "good",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.1, asn: 65000}",
    );
    let bad = bgp_peer(
        "bad",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.2, asn: 23456}",
    );
    let keyed = bgp_peer(
        "keyed",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.3, asn: 65000, passwordSecretRef: {name: md5, key: keyed}}",
    );
    let objects = Objects::from_lists(vec![c], vec![good, bad, keyed]);
    let mut last = LastGood::default();
    let n = node_config(&objects, &labels(&[]), "node-a", &mut last, &NO_SECRETS);
    let names: Vec<&str> = n
        .config
        .as_ref()
        .unwrap()
        .peers
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["good"]);
    let not: Vec<(&str, &str)> = n
        .not_applied
        .iter()
        .map(|(_, name, why)| (name.as_str(), why.as_str()))
        .collect();
    assert_eq!(not.len(), 2, "{not:?}");
    assert!(
        not.iter()
            .any(|(n, why)| *n == "keyed" && why.contains("Secret md5 has no key \"keyed\""))
    );
    assert!(
        not.iter()
            .any(|(n, why)| *n == "bad" && why.contains("spec.asn"))
    );
}

#[test]
fn a_node_no_speaker_config_selects_runs_nothing_and_says_why() {
    let c = speaker_config(
        "rack9",
        "2026-11-01T00:00:00Z",
        "{asn: 65010, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16], nodeSelector: {matchLabels: {rack: r9}}}",
    );
    let objects = Objects::from_lists(vec![c], Vec::new());
    let n = node_config(
        &objects,
        &labels(&[("rack", "r1")]),
        "node-a",
        &mut LastGood::default(),
        &ALL_SECRETS,
    );
    assert!(n.config.is_none() && n.speaker_config.is_none());
}

#[test]
fn a_secret_deleted_under_a_running_peer_keeps_it_on_its_key_file() {
    let c = speaker_config("default", "2026-11-01T00:00:00Z", SPEC);
    let keyed = with_generation(
        bgp_peer(
            "tor1",
            "2026-11-01T00:00:00Z",
            "{address: 192.0.2.1, asn: 65000, passwordSecretRef: {name: md5, key: tor1}}",
        ),
        4,
    );
    let objects = Objects::from_lists(vec![c], vec![keyed]);
    let mut last = LastGood::default();
    let first = node_config(&objects, &labels(&[]), "node-a", &mut last, &ALL_SECRETS);
    assert_eq!(first.peers.len(), 1);

    // The Secret is gone and its file still holds the key the session runs with.
    let kept = Keys {
        problem: &missing,
        kept: &|_| true,
        file: &key_file,
    };
    let second = node_config(&objects, &labels(&[]), "node-a", &mut last, &kept);
    assert_eq!(second.peers.len(), 1, "{second:?}");
    assert_eq!(second.last_good.len(), 1);
    assert!(
        second.last_good[0]
            .1
            .contains("Secret md5 has no key \"tor1\"")
    );

    // A node that never had the key does not start the peer.
    let fresh = node_config(
        &objects,
        &labels(&[]),
        "node-a",
        &mut LastGood::default(),
        &NO_SECRETS,
    );
    assert!(
        fresh.peers.is_empty() && fresh.not_applied.len() == 1,
        "{fresh:?}"
    );
}

#[test]
fn a_forwarding_gate_object_field_runs_as_the_file_key_does() {
    let c = speaker_config(
        "default",
        "2026-11-01T00:00:00Z",
        "{asn: 65010, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16], \
         forwardingGate: {enabled: true, interfaces: [\"cali*\"], mode: report, withdrawHoldDown: 30s}}",
    );
    let p = bgp_peer(
        "tor1",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.1, asn: 65000}",
    );
    let from_objects = assemble(&c, &[&p], &key_file).unwrap();
    let from_file = podcidr_config::Config::from_yaml_str(
        "asn: 65010\nsource: {kind: ipam-crd}\nallowedPrefixes: [10.244.0.0/16]\n\
         forwardingGate: {enabled: true, interfaces: [\"cali*\"], mode: report, withdrawHoldDown: 30s}\n\
         peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n",
    )
    .unwrap();
    assert!(from_objects.forwarding_gate.enabled);
    assert_eq!(
        from_objects.forwarding_gate.mode,
        podcidr_config::GateMode::Report
    );
    assert_eq!(
        from_objects.forwarding_gate.withdraw_hold_down.as_secs(),
        30
    );
    assert_eq!(from_objects, from_file);
}

#[test]
fn an_egress_object_field_runs_as_the_file_key_does() {
    let c = speaker_config(
        "default",
        "2026-11-01T00:00:00Z",
        "{asn: 65010, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16], \
         egress: {followSessions: true}}",
    );
    let p = bgp_peer(
        "tor1",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.1, asn: 65000}",
    );
    let from_objects = assemble(&c, &[&p], &key_file).unwrap();
    let from_file = podcidr_config::Config::from_yaml_str(
        "asn: 65010\nsource: {kind: ipam-crd}\nallowedPrefixes: [10.244.0.0/16]\n\
         egress: {followSessions: true}\n\
         peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n",
    )
    .unwrap();
    assert!(from_objects.egress.follow_sessions);
    assert_eq!(from_objects, from_file);
}

/// A node reads its AS from the Node through `spec.asnFrom`; the speaker runs it as the file's
/// `asn: {fromNodeLabel: …}`.
#[test]
fn asn_from_runs_as_the_files_asn_from_node_label() {
    let c = speaker_config(
        "default",
        "2026-11-01T00:00:00Z",
        "{asnFrom: {nodeLabel: example.com/asn, default: 64512}, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16]}",
    );
    let p = bgp_peer(
        "tor",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.1, asn: 65000}",
    );
    let from_object = assemble(&c, &[&p], &key_file).unwrap();
    let from_file = podcidr_config::Config::from_yaml_str(
        "asn: {fromNodeLabel: example.com/asn, default: 64512}\nsource: {kind: ipam-crd}\n\
         allowedPrefixes: [10.244.0.0/16]\npeers: [{name: tor, address: 192.0.2.1, asn: 65000}]\n",
    )
    .unwrap();
    assert_eq!(from_object.local_asn, from_file.local_asn);
}

/// The errors of `asnFrom` name the object's fields, not the file's spelling the reader uses.
#[test]
fn asn_from_errors_name_the_objects_fields() {
    let c = speaker_config(
        "default",
        "2026-11-01T00:00:00Z",
        "{asnFrom: {nodeLabel: 'not a key!', default: 23456}, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16]}",
    );
    let lines: Vec<String> = assemble(&c, &[], &key_file)
        .unwrap_err()
        .0
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("BGPSpeakerConfig default: spec.asnFrom.nodeLabel: ")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("BGPSpeakerConfig default: spec.asnFrom.default: ")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("fromNode")), "{lines:?}");
}

/// `asn` and `asnFrom` together are refused: one meaning per field, as the CRD's rule says.
#[test]
fn asn_and_asn_from_together_are_refused() {
    let c = speaker_config(
        "default",
        "2026-11-01T00:00:00Z",
        "{asn: 65010, asnFrom: {nodeLabel: example.com/asn}, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16]}",
    );
    let e = assemble(&c, &[], &key_file).unwrap_err().to_string();
    assert!(
        e.contains("spec.asnFrom: cannot be set with spec.asn"),
        "{e}"
    );
}

/// An object stored by a server that did not check the schema (the first v1beta1 spelling,
/// `asn: {fromNodeLabel: …}`) still reads, and is refused on that object with where the
/// field moved, instead of breaking the watch of every object.
#[test]
fn an_asn_mapping_stored_before_asn_from_is_reported_on_its_object() {
    let c = speaker_config(
        "old",
        "2026-11-01T00:00:00Z",
        "{asn: {fromNodeLabel: example.com/asn}, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16]}",
    );
    assert!(matches!(
        c.spec.asn,
        Some(podcidr_api::LocalAsnSpec::Unsupported(_))
    ));
    let e = assemble(&c, &[], &key_file).unwrap_err().to_string();
    assert!(
        e.contains("BGPSpeakerConfig old: spec.asn: is a number; the AS read from a Node label or annotation is spec.asnFrom"),
        "{e}"
    );
}

/// Issue 30 item 2: what left the API still runs, said so; what was deleted on purpose
/// announces with GRACEFUL_SHUTDOWN (RFC 8326 §3: 65535:0) before the speaker drops it, on
/// its own session, or on every session when it is the config.
#[test]
fn deleted_objects_run_on_retained_or_withdraw_with_graceful_shutdown_rfc8326() {
    let gshut = podcidr_config::Community::GRACEFUL_SHUTDOWN;
    let c = speaker_config("default", "2026-11-01T00:00:00Z", SPEC);
    let peers = vec![
        bgp_peer(
            "kept",
            "2026-11-01T00:00:00Z",
            "{address: 192.0.2.1, asn: 65000}",
        ),
        bgp_peer(
            "leaving",
            "2026-11-01T00:00:00Z",
            "{address: 192.0.2.2, asn: 65000}",
        ),
        bgp_peer(
            "staying",
            "2026-11-01T00:00:00Z",
            "{address: 192.0.2.3, asn: 65000}",
        ),
    ];
    let mut objects = Objects::from_lists(vec![c], peers);
    objects.retained.insert((ObjectKind::Peer, "kept".into()));
    objects
        .withdrawing
        .insert((ObjectKind::Peer, "leaving".into()));
    let n = node_config(
        &objects,
        &labels(&[]),
        "node-a",
        &mut LastGood::default(),
        &ALL_SECRETS,
    );
    let config = n.config.as_ref().unwrap();
    let with_gshut: Vec<&str> = config
        .peers
        .iter()
        .filter(|p| p.communities.contains(&gshut))
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(with_gshut, ["leaving"]);
    assert_eq!(config.peers.len(), 3, "all three still run");
    let said: Vec<(&str, &str)> = n
        .last_good
        .iter()
        .map(|(r, why)| (r.name.as_str(), why.as_str()))
        .collect();
    assert_eq!(
        said,
        [
            ("kept", crate::objects::node_config::RETAINED),
            ("leaving", crate::objects::node_config::WITHDRAWING)
        ]
    );

    // The config deleted on purpose: every session warns its router.
    objects.withdrawing = [(ObjectKind::SpeakerConfig, "default".to_owned())].into();
    objects.retained.clear();
    let n = node_config(
        &objects,
        &labels(&[]),
        "node-a",
        &mut LastGood::default(),
        &ALL_SECRETS,
    );
    assert!(
        n.config
            .unwrap()
            .peers
            .iter()
            .all(|p| p.communities.contains(&gshut))
    );
}

/// Issue 30 item 5: a BGPSpeakerConfig may make the speakers read pod CIDRs only from files
/// under /etc/podcidr-bgp/cidrs/, never another file of the node (its MD5 keys, say).
#[test]
fn a_file_source_in_an_object_is_confined_to_its_directory() {
    for (path, ok) in [
        ("/etc/podcidr-bgp/cidrs/cidrs.yaml", true),
        ("/etc/podcidr-bgp/cidrs/rack1/cidrs.yaml", true),
        ("/run/podcidr-bgp/keys/podcidr-bgp-md5/tor1", false),
        (
            "/etc/podcidr-bgp/cidrs/../../../run/podcidr-bgp/keys/x",
            false,
        ),
        ("/etc/podcidr-bgp/cidrs/./x", false),
        ("/etc/podcidr-bgp/cidrs/", false),
        ("etc/podcidr-bgp/cidrs/x", false),
        ("/etc/podcidr-bgp/cidrsx/y", false),
    ] {
        let c = speaker_config(
            "default",
            "2026-11-01T00:00:00Z",
            &format!("{{asn: 65010, source: {{kind: file, path: \"{path}\"}}}}"),
        );
        let r = assemble(&c, &[], &key_file);
        assert_eq!(r.is_ok(), ok, "{path}: {r:?}");
        if let Err(e) = r {
            assert!(e.to_string().contains("spec.source.path"), "{e}");
        }
    }
}

/// The key-file lifecycle is decided purely (the objects task only carries it out): each
/// running peer's key goes to its file, a file no running peer uses is removed, and a peer
/// whose Secret cannot be read keeps the file it has.
#[test]
fn key_files_follow_the_running_peers_and_a_gone_secret_keeps_its_file() {
    use super::key_files::key_file_plan;
    let c = speaker_config("default", "2026-11-01T00:00:00Z", SPEC);
    let tor1 = bgp_peer(
        "tor1",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.1, asn: 65000, passwordSecretRef: {name: md5, key: tor1}}",
    );
    let plain = bgp_peer(
        "tor2",
        "2026-11-01T00:00:00Z",
        "{address: 192.0.2.2, asn: 65000}",
    );
    let objects = Objects::from_lists(vec![c], vec![tor1, plain]);
    let running = node_config(
        &objects,
        &labels(&[]),
        "node-a",
        &mut LastGood::default(),
        &ALL_SECRETS,
    );
    let tor1_file = PathBuf::from("/run/keys/tor1.md5.tor1");
    let stale = PathBuf::from("/run/keys/gone.md5.gone");
    let written = [tor1_file.clone(), stale.clone()].into_iter().collect();

    let plan = key_file_plan(&running, |r, _| Some(r.key.clone().into_bytes()), &written);
    assert_eq!(plan.write, [(tor1_file.clone(), b"tor1".to_vec())]);
    assert_eq!(plan.remove, [stale]);
    assert_eq!(plan.in_use, [tor1_file.clone()].into_iter().collect());

    // The Secret cannot be read now: nothing is written and the file stays.
    let plan = key_file_plan(&running, |_, _| None, &plan.in_use);
    assert!(plan.write.is_empty() && plan.remove.is_empty(), "{plan:?}");
    assert!(plan.in_use.contains(&tor1_file));

    // The peer is gone from the config: its file is removed.
    let without = Objects::from_lists(
        vec![speaker_config("default", "2026-11-01T00:00:00Z", SPEC)],
        vec![],
    );
    let none = node_config(
        &without,
        &labels(&[]),
        "node-a",
        &mut LastGood::default(),
        &ALL_SECRETS,
    );
    let plan = key_file_plan(&none, |_, _| None, &plan.in_use);
    assert_eq!(plan.remove, [tor1_file]);
    assert!(plan.in_use.is_empty());
}

/// A peer's BFD key is a Secret's like its MD5 key: `config convert` turns the file's
/// `secretFile` into a `secretRef` to key `<peer>_bfd` of the MD5 Secret, and says so.
#[test]
fn convert_turns_a_bfd_secret_file_into_a_secret_ref_of_the_md5_secret() {
    use super::convert::{MD5_SECRET, convert, notes};
    let doc: serde_json::Value = serde_json::json!({
        "asn": 64512,
        "peers": [{"name": "tor", "address": "192.0.2.1", "asn": 65000,
                   "bfd": {"authentication": {"type": "keyed-sha1", "keyId": 1, "secretFile": "/k"}}}]
    });
    let c = convert(&doc, "default").unwrap();
    let auth = c.peers[0]
        .spec
        .bfd
        .as_ref()
        .unwrap()
        .authentication
        .as_ref();
    assert_eq!(
        auth,
        Some(&podcidr_api::BfdAuthenticationSpec {
            auth_type: podcidr_api::BfdAuthTypeSpec::KeyedSha1,
            key_id: 1,
            secret_ref: SecretKeyRef {
                name: MD5_SECRET.into(),
                key: "tor_bfd".into()
            },
        })
    );
    assert_eq!(c.secret_keys, [("tor_bfd".to_owned(), "/k".to_owned())]);
    let notes = notes(&c).join("\n");
    assert!(
        notes.contains("bfd.authentication.secretFile became bfd.authentication.secretRef")
            && notes.contains("--from-file=tor_bfd=/k"),
        "{notes}"
    );
}

const BFD_PEER: &str = "{address: 192.0.2.1, asn: 65000, bfd: {authentication: \
     {type: meticulous-keyed-sha1, keyId: 7, secretRef: {name: md5, key: tor1-bfd}}}}";

/// Object → config: `bfd.authentication.secretRef` becomes the `secretFile` the BFD session
/// reads, and the node writes the Secret's key there (checked as a BFD key, not an MD5 one).
#[test]
fn a_bfd_secret_ref_becomes_the_bfd_key_file_the_node_writes() {
    use super::key_files::key_file_plan;
    let objects = Objects::from_lists(
        vec![speaker_config("default", "2026-11-01T00:00:00Z", SPEC)],
        vec![bgp_peer("tor1", "2026-11-01T00:00:00Z", BFD_PEER)],
    );
    let running = node_config(
        &objects,
        &labels(&[]),
        "node-a",
        &mut LastGood::default(),
        &ALL_SECRETS,
    );
    let file = PathBuf::from("/run/keys/tor1.md5.tor1-bfd");
    let peer = &running.config.as_ref().unwrap().peers[0];
    let auth = peer.bfd.as_ref().unwrap().authentication.as_ref().unwrap();
    assert_eq!(auth.secret_file, file);
    assert_eq!(auth.key_id, 7);
    assert_eq!(
        auth.auth_type,
        podcidr_config::BfdAuthType::MeticulousKeyedSha1
    );
    let plan = key_file_plan(
        &running,
        |r, key_use| (key_use == KeyUse::BfdSha1).then(|| r.key.clone().into_bytes()),
        &Default::default(),
    );
    assert_eq!(plan.write, [(file.clone(), b"tor1-bfd".to_vec())]);
    assert_eq!(plan.in_use, [file].into_iter().collect());
}

/// A BFD key the node cannot use keeps its peer out (named by its field) while the other
/// peers run; a key that fits TCP MD5 but not SHA1 (over 20 bytes) is refused.
#[test]
fn a_missing_bfd_key_is_reported_on_its_peer_and_the_other_peers_run() {
    let objects = Objects::from_lists(
        vec![speaker_config("default", "2026-11-01T00:00:00Z", SPEC)],
        vec![
            bgp_peer("tor1", "2026-11-01T00:00:00Z", BFD_PEER),
            bgp_peer(
                "tor2",
                "2026-11-01T00:00:00Z",
                "{address: 192.0.2.2, asn: 65000, passwordSecretRef: {name: md5, key: tor2}}",
            ),
        ],
    );
    let keys = Keys {
        problem: &|r, key_use| {
            (key_use == KeyUse::BfdSha1).then(|| format!("Secret md5 has no key {:?}", r.key))
        },
        kept: &|_| false,
        file: &key_file,
    };
    let n = node_config(
        &objects,
        &labels(&[]),
        "node-a",
        &mut LastGood::default(),
        &keys,
    );
    let running: Vec<&str> = n
        .config
        .as_ref()
        .unwrap()
        .peers
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(running, ["tor2"]);
    assert_eq!(n.not_applied.len(), 1, "{n:?}");
    let (_, name, why) = &n.not_applied[0];
    assert_eq!(name, "tor1");
    assert_eq!(
        why,
        "spec.bfd.authentication.secretRef: Secret md5 has no key \"tor1-bfd\""
    );

    assert!(KeyUse::BfdSha1.key_from_bytes(vec![b'k'; 20]).is_ok());
    assert!(KeyUse::TcpMd5.key_from_bytes(vec![b'k'; 21]).is_ok());
    let e = KeyUse::BfdSha1.key_from_bytes(vec![b'k'; 21]).unwrap_err();
    assert!(e.contains("21 bytes, the limit is 20"), "{e}");
}

/// An object names its BFD key by Secret: a `secretFile` (a path on the node) is refused, and
/// an error about the key is named at `secretRef`.
#[test]
fn an_object_may_not_name_a_bfd_key_file() {
    let c = serde_json::json!({"asn": 65010, "source": {"kind": "ipam-crd"}});
    let p = serde_json::json!({"address": "192.0.2.1", "asn": 65000, "bfd": {"authentication":
        {"type": "keyed-sha1", "keyId": 1, "secretFile": "/etc/shadow"}}});
    let e = assemble_specs(("default", &c), &[("tor1", &p)], &key_file).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(
            "BGPPeer tor1: spec.bfd.authentication.secretFile: not a BGPPeer key (use secretRef"
        ),
        "{text}"
    );
    assert!(
        text.contains("BGPPeer tor1: spec.bfd.authentication.secretRef:"),
        "{text}"
    );
}
