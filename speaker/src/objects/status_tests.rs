//! The status writer's verdicts: the rules of issue 22 (precedence by priority and name,
//! reported on the loser where they collide; invalid, secret and conflict reasons) and issue 30
//! (no status change with node churn).

use podcidr_api::config_condition::{CONFLICT, INVALID, SECRET_NOT_FOUND, VALID};
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podcidr_api::{ConfigObjectStatus, SecretKeyRef};

use super::KeyUse;
use super::status::{KeyProblem, NOT_APPLIED_LIMIT, NodeLabels, Verdict, status, verdicts};
use super::tests::{SPEC, bgp_peer, labels, speaker_config, with_generation};
use super::{ObjectKind, Objects};

fn node(name: &str, pairs: &[(&str, &str)]) -> NodeLabels {
    NodeLabels {
        name: name.to_owned(),
        labels: labels(pairs),
    }
}

fn no_key_problem(_: &SecretKeyRef, _: KeyUse) -> Option<KeyProblem> {
    None
}

fn find<'a>(vs: &'a [Verdict], kind: ObjectKind, name: &str) -> &'a Verdict {
    vs.iter()
        .find(|v| v.kind == kind && v.name == name)
        .unwrap_or_else(|| panic!("no verdict on {kind} {name}: {vs:?}"))
}

const OLD: &str = "2026-11-01T00:00:00Z";
const NEW: &str = "2026-11-02T00:00:00Z";

#[test]
fn two_speaker_configs_on_one_node_the_younger_is_a_conflict_only_where_they_meet() {
    let objects = Objects::from_lists(
        vec![
            speaker_config("all", OLD, SPEC),
            speaker_config(
                "rack9",
                NEW,
                "{asn: 65011, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16], nodeSelector: {matchLabels: {rack: r9}}}",
            ),
        ],
        Vec::new(),
    );
    let nodes = [node("a", &[]), node("b", &[("rack", "r9")])];
    let vs = verdicts(&objects, &nodes, &no_key_problem);
    let all = find(&vs, ObjectKind::SpeakerConfig, "all");
    assert_eq!((all.reason, all.selected_nodes), (VALID, 2), "{all:?}");
    assert!(all.not_applied.is_empty());
    let rack9 = find(&vs, ObjectKind::SpeakerConfig, "rack9");
    assert_eq!(
        (rack9.reason, rack9.selected_nodes),
        (CONFLICT, 1),
        "{rack9:?}"
    );
    assert_eq!(rack9.not_applied.keys().collect::<Vec<_>>(), ["b"]);
    assert!(
        rack9
            .message
            .contains("not applied on some nodes it selects")
            && rack9
                .message
                .contains("BGPSpeakerConfig all has the same priority"),
        "{}",
        rack9.message
    );
}

#[test]
fn two_peers_with_one_address_on_one_node_the_second_by_name_is_a_conflict() {
    let objects = Objects::from_lists(
        vec![speaker_config("default", OLD, SPEC)],
        vec![
            bgp_peer("tor", OLD, "{address: 192.0.2.1, asn: 65000}"),
            bgp_peer("tor-copy", NEW, "{address: 192.0.2.1, asn: 65001}"),
        ],
    );
    let vs = verdicts(&objects, &[node("a", &[])], &no_key_problem);
    assert_eq!(find(&vs, ObjectKind::Peer, "tor").reason, VALID);
    let copy = find(&vs, ObjectKind::Peer, "tor-copy");
    assert_eq!(copy.reason, CONFLICT);
    assert!(
        copy.not_applied["a"].contains("192.0.2.1 port 179"),
        "{copy:?}"
    );
}

#[test]
fn a_config_the_schema_admits_but_the_parser_refuses_is_invalid_with_the_field_named() {
    let objects = Objects::from_lists(
        vec![with_generation(
            speaker_config(
                "default",
                OLD,
                "{asn: 65010, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/33]}",
            ),
            4,
        )],
        vec![bgp_peer("tor", OLD, "{address: 192.0.2.1, asn: 65000}")],
    );
    let vs = verdicts(&objects, &[node("a", &[])], &no_key_problem);
    let c = find(&vs, ObjectKind::SpeakerConfig, "default");
    assert_eq!((c.reason, c.generation), (INVALID, Some(4)), "{c:?}");
    assert!(c.message.contains("spec.allowedPrefixes"), "{}", c.message);
    // The peer is fine; it runs nowhere because its node's config is not usable.
    let p = find(&vs, ObjectKind::Peer, "tor");
    assert_eq!(p.reason, VALID, "{p:?}");
    assert!(p.not_applied["a"].contains("BGPSpeakerConfig default is not usable"));
    assert_eq!(p.message, "valid");
}

#[test]
fn a_peer_invalid_with_its_nodes_config_is_invalid_naming_the_config() {
    let objects = Objects::from_lists(
        vec![speaker_config("default", OLD, SPEC)],
        vec![bgp_peer(
            "tor",
            OLD,
            "{address: 192.0.2.1, asn: 65000, holdTime: 2}",
        )],
    );
    let vs = verdicts(&objects, &[node("a", &[])], &no_key_problem);
    let p = find(&vs, ObjectKind::Peer, "tor");
    assert_eq!(p.reason, INVALID);
    assert!(
        p.message.contains("with BGPSpeakerConfig default") && p.message.contains("spec.holdTime"),
        "{}",
        p.message
    );
}

#[test]
fn a_peer_selecting_no_node_is_still_checked_against_the_configs() {
    let objects = Objects::from_lists(
        vec![speaker_config("default", OLD, SPEC)],
        vec![
            bgp_peer(
                "nowhere-bad",
                OLD,
                "{address: 192.0.2.1, asn: 65000, holdTime: 2, nodeSelector: {matchLabels: {x: y}}}",
            ),
            bgp_peer(
                "nowhere-good",
                OLD,
                "{address: 192.0.2.2, asn: 65000, nodeSelector: {matchLabels: {x: y}}}",
            ),
        ],
    );
    let vs = verdicts(&objects, &[node("a", &[])], &no_key_problem);
    assert_eq!(find(&vs, ObjectKind::Peer, "nowhere-bad").reason, INVALID);
    let good = find(&vs, ObjectKind::Peer, "nowhere-good");
    assert_eq!((good.reason, good.selected_nodes), (VALID, 0));
    assert_eq!(good.message, "valid");
}

/// The BFD key's Secret is checked as the MD5 key's is, and its problem said on the BGPPeer
/// at its own field; the peer without it stays accepted.
#[test]
fn a_missing_bfd_key_is_reported_on_the_bgppeer_and_the_other_peers_stay_valid() {
    let bfd = |key: &str| {
        format!(
            "{{address: 192.0.2.1, asn: 65000, passwordSecretRef: {{name: md5, key: ok}}, \
             bfd: {{authentication: {{type: keyed-sha1, keyId: 1, secretRef: {{name: md5, key: {key}}}}}}}}}"
        )
    };
    let objects = Objects::from_lists(
        vec![speaker_config("default", OLD, SPEC)],
        vec![
            bgp_peer("gone", OLD, &bfd("nope")),
            bgp_peer("long", OLD, &bfd("long").replace("192.0.2.1", "192.0.2.2")),
            bgp_peer("plain", OLD, "{address: 192.0.2.3, asn: 65000}"),
        ],
    );
    let keys = |r: &SecretKeyRef, key_use| match (r.key.as_str(), key_use) {
        ("nope", KeyUse::BfdSha1) => Some(KeyProblem::Missing(
            "Secret ns/md5 has no key \"nope\"".into(),
        )),
        ("long", KeyUse::BfdSha1) => Some(KeyProblem::Invalid("BFD key is 21 bytes".into())),
        _ => None,
    };
    let vs = verdicts(&objects, &[node("a", &[])], &keys);
    let gone = find(&vs, ObjectKind::Peer, "gone");
    assert_eq!(gone.reason, SECRET_NOT_FOUND);
    assert!(
        gone.message
            .starts_with("spec.bfd.authentication.secretRef: Secret ns/md5 has no key \"nope\""),
        "{gone:?}"
    );
    let long = find(&vs, ObjectKind::Peer, "long");
    assert_eq!(long.reason, INVALID);
    assert!(
        long.message
            .starts_with("spec.bfd.authentication.secretRef: BFD key is 21 bytes"),
        "{long:?}"
    );
    assert_eq!(find(&vs, ObjectKind::Peer, "plain").reason, VALID);
}

#[test]
fn a_missing_secret_is_secret_not_found_and_a_bad_key_is_invalid() {
    let objects = Objects::from_lists(
        vec![speaker_config("default", OLD, SPEC)],
        vec![
            bgp_peer(
                "gone",
                OLD,
                "{address: 192.0.2.1, asn: 65000, passwordSecretRef: {name: nope, key: k}}",
            ),
            bgp_peer(
                "long",
                OLD,
                "{address: 192.0.2.2, asn: 65000, passwordSecretRef: {name: md5, key: long}}",
            ),
        ],
    );
    let keys = |r: &SecretKeyRef, _| match r.name.as_str() {
        "nope" => Some(KeyProblem::Missing("Secret ns/nope does not exist".into())),
        _ => Some(KeyProblem::Invalid("longer than 80 bytes".into())),
    };
    let vs = verdicts(&objects, &[node("a", &[])], &keys);
    let gone = find(&vs, ObjectKind::Peer, "gone");
    assert_eq!(gone.reason, SECRET_NOT_FOUND);
    assert!(gone.message.contains("ns/nope does not exist"), "{gone:?}");
    assert_eq!(find(&vs, ObjectKind::Peer, "long").reason, INVALID);
}

#[test]
fn a_selector_that_cannot_be_evaluated_is_invalid() {
    let objects = Objects::from_lists(
        vec![speaker_config(
            "bad",
            OLD,
            "{asn: 65010, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16], nodeSelector: {matchExpressions: [{key: a, operator: Gt, values: [x]}]}}",
        )],
        Vec::new(),
    );
    let vs = verdicts(&objects, &[node("a", &[])], &no_key_problem);
    let bad = find(&vs, ObjectKind::SpeakerConfig, "bad");
    assert_eq!(bad.reason, INVALID);
    assert!(bad.message.contains("spec.nodeSelector"), "{}", bad.message);
}

#[test]
fn not_applied_keeps_a_bounded_number_of_nodes_and_the_message_names_the_conflict_not_a_count() {
    let objects = Objects::from_lists(
        vec![
            speaker_config("old", OLD, SPEC),
            speaker_config("new", NEW, SPEC),
        ],
        Vec::new(),
    );
    // Equal priorities: "new" wins by name, "old" is the conflict.
    let nodes: Vec<NodeLabels> = (0..NOT_APPLIED_LIMIT + 30)
        .map(|i| node(&format!("n{i:03}"), &[]))
        .collect();
    let vs = verdicts(&objects, &nodes, &no_key_problem);
    let old = find(&vs, ObjectKind::SpeakerConfig, "old");
    assert_eq!(old.not_applied.len(), NOT_APPLIED_LIMIT);
    assert!(
        old.message
            .starts_with("not applied on some nodes it selects: BGPSpeakerConfig old"),
        "{}",
        old.message
    );
}

#[test]
fn the_transition_time_moves_only_when_accepted_changes() {
    let objects = Objects::from_lists(vec![speaker_config("default", OLD, SPEC)], Vec::new());
    let v = &verdicts(&objects, &[node("a", &[])], &no_key_problem)[0];
    let t0 = Time("2026-11-26T10:00:00Z".parse().unwrap());
    let t1 = Time("2026-11-26T11:00:00Z".parse().unwrap());
    let first = status(v, None, None, t0.clone());
    assert_eq!(first.conditions[0].last_transition_time, t0);
    assert_eq!(first.observed_generation, Some(1));
    let again = status(v, Some(&first), None, t1.clone());
    assert_eq!(again, first, "nothing changed: no new status to write");
    let mut refused = v.clone();
    refused.reason = INVALID;
    let flipped = status(&refused, Some(&first), None, t1.clone());
    assert_eq!(flipped.conditions[0].status, "False");
    assert_eq!(flipped.conditions[0].last_transition_time, t1);
    let empty = ConfigObjectStatus::default();
    assert_eq!(
        status(v, Some(&empty), None, t1.clone()).conditions[0].last_transition_time,
        t1
    );
}

/// Issue 30 item 6: the status the one writer applies must not change with node churn, or
/// every node join, leave or relabel becomes a watch event to every speaker (5,000 of them).
/// Nodes joining an object's selection, leaving it and being relabelled into a conflict's
/// reach change no status; only the verdict itself (Valid → Conflict) does.
#[test]
fn a_node_joining_leaving_or_relabelled_changes_no_status_the_writer_applies() {
    let objects = Objects::from_lists(
        vec![
            speaker_config("all", OLD, SPEC),
            speaker_config(
                "rack9",
                NEW,
                "{asn: 65011, source: {kind: ipam-crd}, allowedPrefixes: [10.244.0.0/16], nodeSelector: {matchLabels: {rack: r9}}}",
            ),
        ],
        vec![bgp_peer("tor", OLD, "{address: 192.0.2.1, asn: 65000}")],
    );
    let now = Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap());
    let statuses = |nodes: &[NodeLabels]| -> BTreeMap<String, ConfigObjectStatus> {
        verdicts(&objects, nodes, &no_key_problem)
            .iter()
            .map(|v| {
                (
                    format!("{} {}", v.kind, v.name),
                    status(v, None, None, now.clone()),
                )
            })
            .collect()
    };
    let fleets: Vec<Vec<NodeLabels>> = vec![
        vec![node("a", &[]), node("b", &[("rack", "r9")])],
        // 1,000 nodes join, some in rack r9.
        (0..1000)
            .map(|i| {
                node(
                    &format!("n{i}"),
                    if i % 7 == 0 { &[("rack", "r9")] } else { &[] },
                )
            })
            .chain([node("a", &[]), node("b", &[("rack", "r9")])])
            .collect(),
        // Most leave; one is relabelled into r9.
        vec![
            node("b", &[("rack", "r9")]),
            node("c", &[("rack", "r9")]),
            node("d", &[]),
        ],
    ];
    let first = statuses(&fleets[0]);
    for fleet in &fleets[1..] {
        assert_eq!(statuses(fleet), first, "{} nodes", fleet.len());
    }
    // What does change it: the verdict (no node in r9 any more: no conflict).
    assert_ne!(statuses(&[node("a", &[])]), first);
}

#[test]
fn an_unreadable_bgp_advertisement_is_invalid_naming_every_field_and_a_good_one_is_valid() {
    let ad = |name: &str, spec: serde_json::Value| -> podcidr_api::BGPAdvertisement {
        let mut a = podcidr_api::BGPAdvertisement::new(name, serde_json::from_value(spec).unwrap());
        a.metadata.generation = Some(3);
        a
    };
    let objects = Objects {
        advertisements: [
            ad(
                "bad",
                serde_json::json!({"addresses": ["LoadBalancerIP"],
                                   "allowedPrefixes": ["198.51.100.1/24"],
                                   "communities": ["65000:x"]}),
            ),
            ad(
                "good",
                serde_json::json!({"serviceSelector": {}, "addresses": ["ClusterIP"],
                                   "allowedPrefixes": ["10.96.0.0/16"]}),
            ),
        ]
        .into_iter()
        .map(|a| (a.metadata.name.clone().unwrap(), a))
        .collect(),
        ..Objects::default()
    };
    let vs = verdicts(&objects, &[node("a", &[])], &no_key_problem);
    let bad = find(&vs, ObjectKind::Advertisement, "bad");
    assert_eq!((bad.reason, bad.generation), (INVALID, Some(3)), "{bad:?}");
    assert!(bad.message.contains("spec.allowedPrefixes[0]"), "{bad:?}");
    assert!(bad.message.contains("spec.communities[0]"), "{bad:?}");
    assert!(
        bad.message.contains("speakers announce nothing for it"),
        "{bad:?}"
    );
    let good = find(&vs, ObjectKind::Advertisement, "good");
    assert_eq!(good.reason, VALID, "{good:?}");
    let s = status(
        good,
        None,
        None,
        Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    );
    assert_eq!(s.observed_generation, Some(3));
    let types: Vec<(&str, &str)> = s
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(types, [("Accepted", "True"), ("Ready", "True")]);
}
