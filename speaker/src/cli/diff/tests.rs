//! Truth table of the `diff` core: every verdict, the precedence between them, and the
//! overlap sweep against brute force.

use super::*;
use crate::cli::liveness::LeaseInput;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use podcidr_api::{RefusedCidr, RouteReport};

/// 2026-01-01T00:16:40Z.
const NOW: i64 = 1_767_225_600 + 1000;
const FRESH: &str = "2026-01-01T00:15:00Z"; // 100 s before NOW
const OLD: &str = "2025-12-31T21:16:40Z"; // 3 h before NOW, past the default --stale-after

fn nets(v: &[&str]) -> Vec<IpNet> {
    v.iter().map(|s| s.parse().unwrap()).collect()
}

fn peer(name: &str, state: &str, routes: &[&str]) -> PeerReport {
    let established = state == "Established";
    PeerReport {
        name: name.into(),
        address: format!("192.0.2.{}", name.len()),
        asn: 65000,
        state: state.into(),
        families: if established {
            vec!["ipv4-unicast".into(), "ipv6-unicast".into()]
        } else {
            Vec::new()
        },
        routes: routes
            .iter()
            .map(|p| RouteReport {
                prefix: (*p).into(),
                next_hop: "192.0.2.10".into(),
                ..RouteReport::default()
            })
            .collect(),
        ..PeerReport::default()
    }
}

fn report(announced: &[&str], peers: Vec<PeerReport>, updated_at: &str) -> SpeakerReport {
    SpeakerReport {
        source: "ipam-crd".into(),
        source_ready: true,
        allocated: announced.iter().map(|s| (*s).into()).collect(),
        announced: announced.iter().map(|s| (*s).into()).collect(),
        peers,
        updated_at: updated_at.into(),
        ..SpeakerReport::default()
    }
}

fn node(
    name: &str,
    allocated: Option<&[&str]>,
    spec: Option<&[&str]>,
    speaker: Option<SpeakerReport>,
) -> NodeInput {
    // A node with a report has a running speaker (its Lease renewed 20 s ago) unless a
    // test says otherwise.
    let lease = speaker.as_ref().map(|_| lease(20));
    NodeInput {
        name: name.into(),
        allocated: allocated.map(nets),
        allocator_conflict: false,
        node_spec: spec.map(nets),
        speaker,
        lease,
    }
}

/// A speaker Lease renewed `ago` seconds before NOW, for 180 s.
fn lease(ago: i64) -> LeaseInput {
    LeaseInput {
        namespace: "podcidr-system".into(),
        name: "master1".into(),
        holder: Some("master1/speaker-x".into()),
        renewed_at: Some(NOW - ago),
        duration_secs: Some(180),
    }
}

fn input(nodes: Vec<NodeInput>) -> DiffInput {
    DiffInput {
        source: SourceKind::IpamCrd,
        nodes,
        now: NOW,
        stale_after_secs: DEFAULT_STALE_AFTER_SECS,
    }
}

/// (node, prefix, verdict, also) per row.
fn table(i: &DiffInput) -> Vec<(String, String, Verdict, Vec<Verdict>)> {
    diff(i)
        .into_iter()
        .map(|r| (r.node, r.prefix, r.verdict, r.also))
        .collect()
}

fn one(i: &DiffInput) -> DiffRow {
    let rows = diff(i);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    rows.into_iter().next().unwrap()
}

fn row(n: &str, p: &str, v: Verdict, also: &[Verdict]) -> (String, String, Verdict, Vec<Verdict>) {
    (n.into(), p.into(), v, also.to_vec())
}

const P: &str = "10.5.113.0/24";
const Q: &str = "10.5.112.0/24";

fn healthy(spec: &[&str]) -> NodeInput {
    let r = report(&[P], vec![peer("tor1", "Established", &[P])], FRESH);
    node("master1", Some(&[P]), Some(spec), Some(r))
}

#[test]
fn ok_when_announced_to_every_established_peer() {
    let r = one(&input(vec![healthy(&[P])]));
    assert_eq!((r.verdict, r.also.as_slice()), (Verdict::Ok, &[][..]));
    assert_eq!(r.detail, "announced to tor1");
    assert_eq!(r.announced_to, ["tor1"]);
    assert_eq!(r.status_age_seconds, Some(100));
    assert_eq!(r.peers[0].next_hop.as_deref(), Some("192.0.2.10"));
}

#[test]
fn ok_with_a_down_peer_next_to_an_established_one_but_says_so() {
    let peers = vec![
        peer("tor1", "Established", &[P]),
        peer("tor2", "Active", &[]),
    ];
    let n = node(
        "a",
        Some(&[P]),
        Some(&[P]),
        Some(report(&[P], peers, FRESH)),
    );
    let r = one(&input(vec![n]));
    assert_eq!(r.verdict, Verdict::Ok);
    assert_eq!(r.detail, "announced to tor1; not Established: tor2 Active");
}

#[test]
fn not_announced_to_one_established_peer_names_it() {
    let peers = vec![
        peer("tor1", "Established", &[P]),
        peer("tor2", "Established", &[]),
    ];
    let mut rep = report(&[P], peers, FRESH);
    rep.refused.push(RefusedCidr {
        cidr: P.into(),
        reason: "next-hop-family".into(),
        peer: Some("tor2".into()),
    });
    let r = one(&input(vec![node("a", Some(&[P]), None, Some(rep))]));
    assert_eq!(r.verdict, Verdict::NotAnnounced);
    assert_eq!(
        r.detail,
        "missing on Established tor2 (refused: next-hop-family)"
    );
    assert_eq!(r.announced_to, ["tor1"]);
}

#[test]
fn zero_established_peers_is_not_announced_naming_the_states() {
    let peers = vec![peer("tor1", "Active", &[]), peer("tor2", "Connect", &[])];
    let n = node("a", Some(&[P]), None, Some(report(&[P], peers, FRESH)));
    let r = one(&input(vec![n]));
    assert_eq!(r.verdict, Verdict::NotAnnounced);
    assert_eq!(
        r.detail,
        "no Established session: tor1 Active, tor2 Connect"
    );
}

#[test]
fn no_peers_is_not_announced() {
    let n = node("a", Some(&[P]), None, Some(report(&[P], vec![], FRESH)));
    let r = one(&input(vec![n]));
    assert_eq!(r.verdict, Verdict::NotAnnounced);
    assert_eq!(r.detail, "no BGP peers configured for this node");
}

#[test]
fn guard_refusal_and_unsynced_source_explain_not_announced() {
    let mut rep = report(&[], vec![peer("tor1", "Established", &[])], FRESH);
    rep.allocated = vec![P.into()];
    rep.refused.push(RefusedCidr {
        cidr: P.into(),
        reason: "outside-allowed-prefixes".into(),
        peer: None,
    });
    let r = one(&input(vec![node("a", Some(&[P]), None, Some(rep.clone()))]));
    assert_eq!(r.verdict, Verdict::NotAnnounced);
    assert_eq!(
        r.detail,
        "refused by the speaker's announce guard (outside-allowed-prefixes)"
    );

    rep.refused.clear();
    rep.source_ready = false;
    let r = one(&input(vec![node("a", Some(&[P]), None, Some(rep))]));
    assert_eq!(r.detail, "the speaker's source is not synced yet");
}

#[test]
fn a_cidr_held_by_the_forwarding_gate_is_not_announced_and_says_why() {
    let mut rep = report(&[], vec![peer("tor1", "Established", &[])], FRESH);
    rep.allocated = vec![P.into()];
    rep.held.push(podcidr_api::HeldCidr {
        cidr: P.into(),
        reason: "no-route".into(),
    });
    let r = one(&input(vec![node("a", Some(&[P]), None, Some(rep))]));
    assert_eq!(r.verdict, Verdict::NotAnnounced);
    assert_eq!(
        r.detail,
        "held by the speaker's forwarding gate (no-route): the node cannot deliver to it yet"
    );
}

#[test]
fn family_without_an_established_session_is_not_announced() {
    let v6 = "fd00:5::/64";
    let mut tor = peer("tor1", "Established", &[P]);
    tor.families = vec!["ipv4-unicast".into()];
    let n = node(
        "a",
        Some(&[P, v6]),
        None,
        Some(report(&[P, v6], vec![tor], FRESH)),
    );
    let rows = diff(&input(vec![n]));
    assert_eq!(rows[0].verdict, Verdict::Ok);
    assert_eq!(rows[1].verdict, Verdict::NotAnnounced);
    assert_eq!(
        rows[1].detail,
        "no Established session carries ipv6-unicast"
    );
}

#[test]
fn classic_incident_with_a_correct_speaker_is_source_mismatch_on_both_values() {
    let t = table(&input(vec![healthy(&[Q])]));
    assert_eq!(
        t,
        [
            row("master1", P, Verdict::SourceMismatch, &[]),
            row("master1", Q, Verdict::SourceMismatch, &[]),
        ]
    );
    let rows = diff(&input(vec![healthy(&[Q])]));
    assert_eq!(
        rows[0].detail,
        "Node.spec.podCIDRs says 10.5.112.0/24, IPAM says 10.5.113.0/24; announced to tor1"
    );
    assert_eq!(rows[0].allocated, [P]);
    assert_eq!(rows[0].node_spec, [Q]);
    assert!(rows[1].announced_to.is_empty());
}

#[test]
fn classic_incident_with_a_speaker_announcing_node_spec() {
    // The outage: the speaker trusts Node.spec, IPAM (what the CNI uses) says otherwise.
    let mut rep = report(&[Q], vec![peer("tor1", "Established", &[Q])], FRESH);
    rep.source = "node-spec".into();
    let t = table(&input(vec![node(
        "master1",
        Some(&[P]),
        Some(&[Q]),
        Some(rep),
    )]));
    assert_eq!(
        t,
        [
            row(
                "master1",
                P,
                Verdict::NotAnnounced,
                &[Verdict::SourceMismatch]
            ),
            row(
                "master1",
                Q,
                Verdict::AnnouncedNotAllocated,
                &[Verdict::SourceMismatch]
            ),
        ]
    );
    let rows = diff(&input(vec![node(
        "master1",
        Some(&[P]),
        Some(&[Q]),
        Some(report(&[Q], vec![peer("tor1", "Established", &[Q])], FRESH)),
    )]));
    assert!(
        rows[0]
            .detail
            .starts_with("the speaker's source (ipam-crd) says 10.5.112.0/24"),
        "{}",
        rows[0].detail
    );
}

#[test]
fn announced_not_allocated_names_the_owner() {
    let a = node(
        "a",
        Some(&[P]),
        None,
        Some(report(
            &[P],
            vec![peer("tor1", "Established", &[P, "10.5.114.0/24"])],
            FRESH,
        )),
    );
    let b = node("b", Some(&["10.5.114.0/24"]), None, None);
    let rows = diff(&input(vec![b, a]));
    let t: Vec<_> = rows
        .iter()
        .map(|r| (r.node.as_str(), r.prefix.as_str(), r.verdict))
        .collect();
    assert_eq!(
        t,
        [
            ("a", P, Verdict::Ok),
            ("a", "10.5.114.0/24", Verdict::AnnouncedNotAllocated),
            ("b", "10.5.114.0/24", Verdict::NoSpeaker),
        ]
    );
    assert_eq!(
        rows[1].detail,
        "the speaker announces it; IPAM allocates 10.5.113.0/24 (it belongs to b)"
    );
    assert_eq!(rows[1].announced_to, ["tor1"]);
}

#[test]
fn node_spec_source_and_empty_node_spec_never_mismatch() {
    let mut i = input(vec![healthy(&[Q])]);
    i.source = SourceKind::NodeSpec;
    assert_eq!(table(&i), [row("master1", P, Verdict::Ok, &[])]);
    assert_eq!(
        table(&input(vec![healthy(&[])])),
        [row("master1", P, Verdict::Ok, &[])]
    );
    // Node object missing altogether.
    let mut n = healthy(&[]);
    n.node_spec = None;
    assert_eq!(
        table(&input(vec![n])),
        [row("master1", P, Verdict::Ok, &[])]
    );
}

#[test]
fn overlapping_allocations_conflict_on_both_nodes() {
    let a = node("a", Some(&["10.5.0.0/23"]), None, None);
    let b = node("b", Some(&["10.5.1.0/24", "fd00::/64"]), None, None);
    let c = node("c", Some(&["10.5.2.0/24", "fd00:1::/64"]), None, None);
    let rows = diff(&input(vec![a, b, c]));
    let t: Vec<_> = rows
        .iter()
        .map(|r| (r.node.as_str(), r.prefix.as_str(), r.verdict))
        .collect();
    assert_eq!(
        t,
        [
            ("a", "10.5.0.0/23", Verdict::Conflict),
            ("b", "10.5.1.0/24", Verdict::Conflict),
            ("b", "fd00::/64", Verdict::NoSpeaker),
            ("c", "10.5.2.0/24", Verdict::NoSpeaker),
            ("c", "fd00:1::/64", Verdict::NoSpeaker),
        ]
    );
    assert_eq!(rows[0].also, [Verdict::NoSpeaker]);
    assert_eq!(
        rows[0].conflicts_with,
        [ConflictRef {
            node: "b".into(),
            prefix: "10.5.1.0/24".into()
        }]
    );
    assert_eq!(
        rows[1].detail,
        "overlaps a 10.5.0.0/23; no NodeBGPStatus and no Lease for this node (speaker not \
         running, or status.publish is false)"
    );
}

#[test]
fn identical_allocations_conflict_and_own_overlaps_do_not() {
    let mut a = healthy(&[P]);
    a.name = "a".into();
    let mut b = healthy(&[P]);
    b.name = "b".into();
    assert_eq!(
        table(&input(vec![a, b])),
        [
            row("a", P, Verdict::Conflict, &[]),
            row("b", P, Verdict::Conflict, &[]),
        ]
    );
    let own = node("a", Some(&["10.0.0.0/23", "10.0.1.0/24"]), None, None);
    assert!(
        diff(&input(vec![own]))
            .iter()
            .all(|r| r.verdict == Verdict::NoSpeaker)
    );
}

#[test]
fn allocator_marked_conflict_is_conflict() {
    let mut n = healthy(&[P]);
    n.allocator_conflict = true;
    let r = one(&input(vec![n]));
    assert_eq!(r.verdict, Verdict::Conflict);
    assert!(
        r.detail
            .starts_with("the allocator marked it Allocated=False/Conflict")
    );
}

#[test]
fn stale_status_overrides_speaker_verdicts_but_not_conflict() {
    // Fresh enough at the threshold, stale past it.
    let mut i = input(vec![healthy(&[P])]);
    i.stale_after_secs = 100;
    assert_eq!(one(&i).verdict, Verdict::Ok);
    i.stale_after_secs = 99;
    let r = one(&i);
    assert_eq!(r.verdict, Verdict::StaleStatus);
    assert_eq!(
        r.detail,
        "the speaker runs (Lease renewed 20s ago) but its status is 1m40s old \
         (--stale-after 99s): are its status writes failing?"
    );
    assert_eq!(r.liveness, Liveness::Stale);

    let peers = vec![peer("tor1", "Active", &["10.9.9.0/24"])];
    let n = node("a", Some(&[P]), Some(&[Q]), Some(report(&[], peers, OLD)));
    assert_eq!(
        table(&input(vec![n])),
        [
            row(
                "a",
                P,
                Verdict::StaleStatus,
                &[Verdict::NotAnnounced, Verdict::SourceMismatch]
            ),
            row(
                "a",
                "10.9.9.0/24",
                Verdict::StaleStatus,
                &[Verdict::AnnouncedNotAllocated]
            ),
            row("a", Q, Verdict::SourceMismatch, &[]),
        ]
    );

    let mut a = node("a", Some(&[P]), None, Some(report(&[P], vec![], "")));
    a.allocator_conflict = true;
    let r = one(&input(vec![a]));
    assert_eq!(
        (r.verdict, r.also.as_slice()),
        (
            Verdict::Conflict,
            &[Verdict::StaleStatus, Verdict::NotAnnounced][..]
        )
    );
    assert!(r.detail.contains("status has no valid updatedAt"));
    assert_eq!(r.status_age_seconds, None);
}

#[test]
fn no_speaker_only_for_nodes_with_something_to_say() {
    let t = table(&input(vec![
        node("a", Some(&[P]), Some(&[P]), None),
        node("idle", None, Some(&[]), None),
        node("empty", Some(&[]), None, None),
    ]));
    assert_eq!(t, [row("a", P, Verdict::NoSpeaker, &[])]);
}

#[test]
fn summary_counts_every_verdict() {
    let rows = diff(&input(vec![
        healthy(&[Q]),
        node("b", Some(&["10.5.114.0/24"]), None, None),
    ]));
    let s = summarize(&rows);
    assert_eq!(
        (s.rows, s.nodes, s.problems, s.nodes_with_problems),
        (3, 2, 3, 2)
    );
    assert_eq!(s.verdicts.get(Verdict::SourceMismatch), 2);
    assert_eq!(s.verdicts.get(Verdict::NoSpeaker), 1);
    let json = serde_json::to_value(&s).unwrap();
    let keys: Vec<&String> = json["verdicts"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        Verdict::ALL
            .iter()
            .map(|v| v.as_str().to_owned())
            .collect::<Vec<_>>()
            .iter()
            .collect::<Vec<_>>()
    );
}

#[test]
fn verdict_names_are_the_contract() {
    for v in Verdict::ALL {
        assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
    }
    let names: Vec<&str> = Verdict::ALL.iter().map(|v| v.as_str()).collect();
    assert_eq!(
        names,
        [
            "ok",
            "not-announced",
            "announced-not-allocated",
            "source-mismatch",
            "conflict",
            "stale-status",
            "no-speaker",
            "speaker-dead"
        ]
    );
}

#[test]
fn sweep_finds_the_same_pairs_as_brute_force() {
    // Deterministic pseudo-random prefixes in a small space, so many nest or repeat.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        seed >> 33
    };
    let nodes: Vec<NodeInput> = (0..40)
        .map(|i| {
            let prefixes: Vec<IpNet> = (0..(next() % 3))
                .map(|_| {
                    let len = 20 + (next() % 9) as u8;
                    let addr = std::net::Ipv4Addr::from(0x0a05_0000 | ((next() as u32) & 0xfff0));
                    IpNet::new(addr.into(), len).unwrap().trunc()
                })
                .collect();
            NodeInput {
                name: format!("n{i:02}"),
                allocated: Some(prefixes),
                ..NodeInput::default()
            }
        })
        .collect();
    let fast = find_conflicts(&nodes);
    let mut slow: BTreeMap<(usize, IpNet), Vec<ConflictRef>> = BTreeMap::new();
    for (i, a) in nodes.iter().enumerate() {
        for (j, b) in nodes.iter().enumerate() {
            if i == j {
                continue;
            }
            for p in a.allocated.iter().flatten() {
                for q in b.allocated.iter().flatten() {
                    if overlaps(p, q) {
                        slow.entry((i, *p)).or_default().push(ConflictRef {
                            node: b.name.clone(),
                            prefix: q.to_string(),
                        });
                    }
                }
            }
        }
    }
    for v in slow.values_mut() {
        v.sort();
        v.dedup();
    }
    assert!(!slow.is_empty());
    assert_eq!(fast, slow);
}

#[test]
fn human_durations() {
    assert_eq!(human_secs(5), "5s");
    assert_eq!(human_secs(65), "1m5s");
    assert_eq!(human_secs(3 * 3600 + 240), "3h4m");
    assert_eq!(human_secs(2 * 86400 + 5 * 3600), "2d5h");
}

#[test]
fn routes_left_out_of_a_large_report_still_count_as_announced() {
    // The report lists no route for P but says routes were omitted: P is in `announced`
    // and the peer is Established for its family, so it is announced.
    let mut tor = peer("tor1", "Established", &[]);
    tor.routes_omitted = 300;
    let r = one(&input(vec![node(
        "master1",
        Some(&[P]),
        Some(&[P]),
        Some(report(&[P], vec![tor.clone()], FRESH)),
    )]));
    assert_eq!(r.verdict, Verdict::Ok, "{}", r.detail);
    tor.routes_omitted = 0;
    let r = one(&input(vec![node(
        "master1",
        Some(&[P]),
        Some(&[P]),
        Some(report(&[P], vec![tor], FRESH)),
    )]));
    assert_eq!(
        r.verdict,
        Verdict::NotAnnounced,
        "without omitted routes, a missing route is drift"
    );
}

/// The Lease, not the report's age, says whether a speaker runs: an expired Lease is
/// `speaker-dead` however fresh the report, and the report still explains the routes.
#[test]
fn an_expired_lease_is_a_dead_speaker_whatever_its_report_says() {
    let mut n = healthy(&[P]);
    n.lease = Some(lease(181));
    let r = one(&input(vec![n.clone()]));
    assert_eq!(
        (r.verdict, r.also.as_slice()),
        (Verdict::SpeakerDead, &[][..])
    );
    assert_eq!(r.liveness, Liveness::Dead);
    assert_eq!(r.lease_age_seconds, Some(181));
    assert!(
        r.detail.starts_with(
            "speaker dead: Lease podcidr-system/master1 (held by master1/speaker-x) expired 1s ago"
        ),
        "{}",
        r.detail
    );
    assert!(r.detail.ends_with("status is 1m40s old"), "{}", r.detail);
    // At exactly renewTime + leaseDurationSeconds it is still live.
    n.lease = Some(lease(180));
    let r = one(&input(vec![n]));
    assert_eq!((r.verdict, r.liveness), (Verdict::Ok, Liveness::Live));

    // A dead speaker's announcements are what it said last: flagged first.
    let peers = vec![peer("tor1", "Established", &[P, "10.9.9.0/24"])];
    let mut n = node("a", Some(&[P]), None, Some(report(&[P], peers, FRESH)));
    n.lease = Some(lease(4000));
    assert_eq!(
        table(&input(vec![n])),
        [
            row("a", P, Verdict::SpeakerDead, &[]),
            row(
                "a",
                "10.9.9.0/24",
                Verdict::SpeakerDead,
                &[Verdict::AnnouncedNotAllocated]
            ),
        ]
    );
}

#[test]
fn a_report_without_a_lease_is_dead_a_lease_without_a_report_is_stale() {
    let mut n = healthy(&[P]);
    n.lease = None;
    let r = one(&input(vec![n]));
    assert_eq!(
        (r.verdict, r.liveness),
        (Verdict::SpeakerDead, Liveness::Dead)
    );
    assert!(r.detail.contains("no Lease for this node"), "{}", r.detail);
    assert_eq!(r.lease_age_seconds, None);

    let mut n = node("a", Some(&[P]), Some(&[P]), None);
    n.lease = Some(lease(5));
    let r = one(&input(vec![n.clone()]));
    assert_eq!(
        (r.verdict, r.liveness),
        (Verdict::StaleStatus, Liveness::Stale)
    );
    assert!(
        r.detail.contains("NodeBGPStatus was never written"),
        "{}",
        r.detail
    );
    n.lease = Some(lease(500));
    let r = one(&input(vec![n]));
    assert_eq!(
        (r.verdict, r.liveness),
        (Verdict::SpeakerDead, Liveness::Dead)
    );
    assert!(r.detail.ends_with("; no NodeBGPStatus"), "{}", r.detail);

    let r = one(&input(vec![node("a", Some(&[P]), None, None)]));
    assert_eq!(
        (r.verdict, r.liveness),
        (Verdict::NoSpeaker, Liveness::None)
    );
}

/// `diff` at cluster scale is linear: 5,000 dual-stack nodes, each with a report and a
/// Lease, one healthy row per prefix. (Its wall time is the bench's business.)
#[test]
fn five_thousand_dual_stack_nodes_all_ok() {
    let nodes: Vec<NodeInput> = (0..5000u32)
        .map(|i| {
            let v4 = format!("10.{}.{}.0/24", 64 + (i >> 8), i & 0xff);
            let v6 = format!("fd00:{:x}::/64", i + 1);
            let cidrs = [v4.as_str(), v6.as_str()];
            let r = report(&cidrs, vec![peer("tor1", "Established", &cidrs)], FRESH);
            node(&format!("node-{i:04}"), Some(&cidrs), Some(&cidrs), Some(r))
        })
        .collect();
    let rows = diff(&input(nodes));
    assert_eq!(rows.len(), 10_000);
    let s = summarize(&rows);
    assert_eq!((s.problems, s.nodes), (0, 5000));
}

#[test]
fn per_node_local_asn_is_shown_on_the_row_and_a_bad_one_is_why_nothing_is_announced() {
    let mut n = healthy(&[P]);
    if let Some(r) = n.speaker.as_mut() {
        r.local_asn = Some(65020);
        r.local_asn_source = "label example.com/asn".into();
    }
    let r = one(&input(vec![n]));
    assert_eq!(r.verdict, Verdict::Ok);
    assert_eq!(
        r.detail,
        "announced to tor1 as local AS 65020 from label example.com/asn"
    );
    assert_eq!(
        (r.local_asn, r.local_asn_source.as_str()),
        (Some(65020), "label example.com/asn")
    );

    // The speaker stopped every session: its LocalASN condition says why.
    let mut bad = report(&[P], Vec::new(), FRESH);
    bad.conditions.push(Condition {
        type_: "LocalASN".into(),
        status: "False".into(),
        reason: "LocalASNInvalid".into(),
        message: "label \"example.com/asn\": \"65x\" is not an AS number".into(),
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ),
        observed_generation: None,
    });
    let r = one(&input(vec![node(
        "master1",
        Some(&[P]),
        Some(&[P]),
        Some(bad),
    )]));
    assert_eq!(r.verdict, Verdict::NotAnnounced);
    assert_eq!(
        r.detail,
        "the node's local AS cannot be used (LocalASNInvalid): label \"example.com/asn\": \"65x\" is not an AS number"
    );
    assert_eq!(r.local_asn, None);
}

/// Issue 32 item 10: `nextHop.ipv6: self` on an IPv4 session of a node without an IPv6
/// InternalIP. The peer says which family has no next hop (`noNextHop`); the row names the
/// peer and the reason even when the report lists no refusal for the prefix (past 256), the
/// JSON cell carries `refused`, and the wide table says it per peer.
#[test]
fn a_family_without_a_next_hop_is_shown_per_peer_with_its_reason() {
    let v6 = "fd00:5::/64";
    let mut tor = peer("tor1", "Established", &[P]);
    tor.no_next_hop = vec!["ipv6-unicast".into()];
    let n = node(
        "a",
        Some(&[P, v6]),
        None,
        Some(report(&[P, v6], vec![tor], FRESH)),
    );
    let rows = diff(&input(vec![n.clone()]));
    assert_eq!(rows[0].verdict, Verdict::Ok);
    assert_eq!(rows[0].peers[0].refused, None);
    assert_eq!(rows[1].verdict, Verdict::NotAnnounced);
    assert_eq!(
        rows[1].detail,
        "missing on Established tor1 (refused: no-next-hop)"
    );
    assert_eq!(rows[1].peers[0].refused.as_deref(), Some("no-next-hop"));
    let json = serde_json::to_value(&rows[1]).unwrap();
    assert_eq!(json["peers"][0]["refused"], "no-next-hop");
    assert_eq!(
        crate::cli::render::peers_cell(&rows[1]),
        "tor1=Established(refused: no-next-hop)"
    );
    // The ToR did not negotiate IPv6 either: still the speaker's side is named.
    let mut n = n;
    let r = n.speaker.as_mut().unwrap();
    r.peers[0].families = vec!["ipv4-unicast".into()];
    let rows = diff(&input(vec![n]));
    assert_eq!(
        rows[1].detail,
        "no Established session carries ipv6-unicast; no next hop for it on tor1"
    );
}

/// Review 2 F8 (`forwardingGate.mode: report`): the prefix is announced (no drift: `ok`, the
/// exit code does not change) and the row says what an enforcing gate would do.
#[test]
fn report_mode_rows_say_what_the_gate_would_hold_and_stay_ok() {
    let mut rep = report(&[P], vec![peer("tor1", "Established", &[P])], FRESH);
    rep.would_hold.push(podcidr_api::HeldCidr {
        cidr: P.into(),
        reason: "no-route".into(),
    });
    let r = one(&input(vec![node("a", Some(&[P]), None, Some(rep))]));
    assert_eq!(r.verdict, Verdict::Ok);
    assert_eq!(
        r.detail,
        "announced to tor1; the forwarding gate (mode report) would hold it (no-route)"
    );
    assert_eq!(r.would_hold.as_deref(), Some("no-route"));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["wouldHold"], "no-route");
}
