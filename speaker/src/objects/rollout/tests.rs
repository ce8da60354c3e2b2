use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podcidr_api::{
    BGPPeer, ConfigObjectStatus, ConfigReport, ObjectGeneration, PeerReport, RolloutStatus,
    SpeakerReport, rollout_state,
};

use super::*;
use crate::objects::tests::{ALL_SECRETS, SPEC, bgp_peer, labels, speaker_config, with_generation};
use crate::objects::{LastGood, Objects, node_config};

fn at(s: &str) -> Time {
    Time(s.parse().unwrap())
}

fn peer(generation: i64, spec: &str, rollout: Option<RolloutStatus>) -> BGPPeer {
    let mut p = with_generation(bgp_peer("tor1", "2026-11-01T00:00:00Z", spec), generation);
    p.status = rollout.map(|r| ConfigObjectStatus {
        rollout: Some(r),
        ..ConfigObjectStatus::default()
    });
    p
}

fn progressing(generation: i64, wave: u32, hash_below: u64) -> RolloutStatus {
    RolloutStatus {
        generation,
        state: rollout_state::PROGRESSING.into(),
        wave,
        hash_below: Some(hash_below.to_string()),
        nodes_admitted: 1,
        nodes_selected: 1,
        wave_started_at: Some("2026-11-28T10:00:00Z".into()),
        message: None,
    }
}

/// The node runs generation 1 (hold time 9), then sees `next`: what it runs then.
fn after(next: &BGPPeer) -> crate::objects::NodeConfig {
    let c = speaker_config("default", "2026-11-01T00:00:00Z", SPEC);
    let mut last = LastGood::default();
    let first = Objects::from_lists(
        vec![c.clone()],
        vec![peer(
            1,
            "{address: 192.0.2.1, asn: 65000, holdTime: 9}",
            None,
        )],
    );
    node_config(&first, &labels(&[]), "node-a", &mut last, &ALL_SECRETS);
    let then = Objects::from_lists(vec![c], vec![next.clone()]);
    node_config(&then, &labels(&[]), "node-a", &mut last, &ALL_SECRETS)
}

/// The hold time the node runs after `next`, and why it keeps a last good version.
fn hold_time_after(next: &BGPPeer) -> (u16, Vec<String>) {
    let n = after(next);
    let hold = n.config.unwrap().peers[0].hold_time.seconds();
    (hold, n.last_good.into_iter().map(|(_, why)| why).collect())
}

#[test]
fn a_session_resetting_edit_waits_for_the_nodes_wave() {
    let edit = "{address: 192.0.2.1, asn: 65000, holdTime: 30}";
    let (hold, why) = hold_time_after(&peer(2, edit, Some(progressing(2, 0, 0))));
    assert_eq!(hold, 9, "generation 1 runs until the wave admits the node");
    assert!(
        why[0].contains("waiting for this node's rollout wave"),
        "{why:?}"
    );

    let (hold, why) = hold_time_after(&peer(2, edit, Some(progressing(2, 1, u64::MAX))));
    assert_eq!(hold, 30, "admitted: {why:?}");
    assert!(why.is_empty());
}

#[test]
fn an_edit_that_resets_nothing_applies_at_once_whatever_the_wave() {
    let edit = "{address: 192.0.2.1, asn: 65000, holdTime: 9, med: 50}";
    let n = after(&peer(2, edit, Some(progressing(2, 0, 0))));
    assert_eq!(n.peers[0].generation, Some(2));
    assert_eq!(n.config.unwrap().peers[0].med, Some(50));
}

#[test]
fn without_a_rollout_controller_every_edit_applies_at_once() {
    let (hold, _) = hold_time_after(&peer(
        2,
        "{address: 192.0.2.1, asn: 65000, holdTime: 30}",
        None,
    ));
    assert_eq!(hold, 30);
}

#[test]
fn a_rollout_of_an_older_generation_holds_a_resetting_edit_until_the_controller_starts_its_own() {
    let edit = "{address: 192.0.2.1, asn: 65000, holdTime: 30}";
    let mut done = progressing(1, 3, u64::MAX);
    done.state = rollout_state::COMPLETE.into();
    let (hold, why) = hold_time_after(&peer(2, edit, Some(done)));
    assert_eq!(hold, 9);
    assert!(
        why[0].contains("waiting for its rollout to start"),
        "{why:?}"
    );
}

#[test]
fn canary_nodes_are_admitted_in_wave_zero() {
    let spec: RolloutSpec =
        serde_json::from_str(r#"{"canarySelector": {"matchLabels": {"canary": "yes"}}}"#).unwrap();
    let st = progressing(2, 0, 0);
    let r = Rollout {
        kind: ObjectKind::Peer,
        name: "tor1",
        generation: Some(2),
        spec: Some(&spec),
        status: Some(&st),
    };
    assert!(r.admits("node-a", &labels(&[("canary", "yes")])).is_ok());
    assert!(r.admits("node-b", &labels(&[])).is_err());
}

fn nodes(n: usize) -> Vec<(String, BTreeMap<String, String>)> {
    (0..n)
        .map(|i| (format!("node-{i:04}"), BTreeMap::new()))
        .collect()
}

fn all(ns: &[(String, BTreeMap<String, String>)], p: &Progress) -> Vec<NodeProgress<'static>> {
    ns.iter()
        .map(|(n, l)| NodeProgress {
            name: Box::leak(n.clone().into_boxed_str()),
            labels: Box::leak(Box::new(l.clone())),
            progress: p.clone(),
        })
        .collect()
}

fn rollout<'a>(st: &'a RolloutStatus) -> Rollout<'a> {
    Rollout {
        kind: ObjectKind::Peer,
        name: "tor1",
        generation: Some(2),
        spec: None,
        status: Some(st),
    }
}

fn admitted(st: &RolloutStatus, ns: &[(String, BTreeMap<String, String>)]) -> usize {
    ns.iter()
        .filter(|(n, l)| rollout(st).admits(n, l).is_ok())
        .count()
}

#[test]
fn each_wave_admits_its_share_and_the_next_starts_only_when_the_admitted_nodes_are_back() {
    let ns = nodes(1000);
    let now = at("2026-11-28T10:00:00Z");
    let mut before = progressing(1, 6, 0);
    before.state = rollout_state::COMPLETE.into();
    let s = step(&rollout(&before), &all(&ns, &Progress::Done), &now);
    assert_eq!(s.event.as_ref().unwrap().reason, "RolloutStarted");
    assert_eq!((s.status.wave, s.status.nodes_admitted), (0, 10));
    assert_eq!(admitted(&s.status, &ns), 10, "1% of 1,000 nodes");

    // The admitted nodes are not back: the wave holds (not yet overdue).
    let pending = all(&ns, &Progress::Pending("runs generation 1".into()));
    let later = at("2026-11-28T10:05:00Z");
    let held = step(&rollout(&s.status), &pending, &later);
    assert_eq!(held.status, s.status);
    assert!(held.event.is_none());

    let mut wave = s.status;
    for (w, share) in [(1, 50), (2, 100), (3, 250), (4, 500), (5, 750), (6, 1000)] {
        let next = step(&rollout(&wave), &all(&ns, &Progress::Done), &later);
        assert_eq!(next.status.wave, w);
        assert_eq!(admitted(&next.status, &ns), share, "wave {w}");
        assert_eq!(next.status.state, rollout_state::PROGRESSING);
        wave = next.status;
    }
    let done = step(&rollout(&wave), &all(&ns, &Progress::Done), &later);
    assert_eq!(done.status.state, rollout_state::COMPLETE);
    assert_eq!(done.event.unwrap().reason, "RolloutComplete");
    assert_eq!(admitted(&done.status, &ns), 1000);
}

#[test]
fn a_wave_not_back_within_its_timeout_stalls_the_rollout_and_resumes_when_it_is() {
    let ns = nodes(100);
    let st = progressing(2, 1, u64::MAX);
    let mut progress = all(&ns, &Progress::Done);
    progress[7].progress = Progress::Pending("not Established again: tor1 Active".into());
    let stalled = step(&rollout(&st), &progress, &at("2026-11-28T10:10:00Z"));
    assert_eq!(stalled.status.state, rollout_state::STALLED);
    assert_eq!(stalled.status.wave, 1, "no further wave");
    let e = stalled.event.unwrap();
    assert!(e.warning && e.reason == "RolloutStalled");
    assert!(
        e.note
            .contains("node-0007: not Established again: tor1 Active"),
        "{}",
        e.note
    );
    // Stalled stays stalled, with no second Event.
    let again = step(
        &rollout(&stalled.status),
        &progress,
        &at("2026-11-28T11:00:00Z"),
    );
    assert_eq!(again.status, stalled.status);
    assert!(again.event.is_none());
    // The node comes back: the rollout goes on.
    let back = step(
        &rollout(&stalled.status),
        &all(&ns, &Progress::Done),
        &at("2026-11-28T11:00:00Z"),
    );
    assert_eq!(
        (back.status.wave, back.status.state.as_str()),
        (2, rollout_state::PROGRESSING)
    );
}

#[test]
fn nodes_with_no_speaker_report_hold_no_wave() {
    let ns = nodes(10);
    let st = progressing(2, 0, u64::MAX);
    let mut progress = all(&ns, &Progress::Done);
    progress[0].progress = Progress::Silent;
    assert_eq!(
        step(&rollout(&st), &progress, &at("2026-11-28T10:00:01Z"))
            .status
            .wave,
        1
    );
}

#[test]
fn a_first_sight_is_complete_not_a_rollout() {
    let r = Rollout {
        kind: ObjectKind::SpeakerConfig,
        name: "default",
        generation: Some(4),
        spec: None,
        status: None,
    };
    let s = step(
        &r,
        &all(&nodes(3), &Progress::Done),
        &at("2026-11-28T10:00:00Z"),
    );
    assert_eq!(
        (s.status.generation, s.status.state.as_str()),
        (4, rollout_state::COMPLETE)
    );
    assert!(s.event.is_none());
}

#[test]
fn waves_are_read_as_cumulative_shares_whatever_their_order_ending_at_all_nodes() {
    let spec: RolloutSpec =
        serde_json::from_str(r#"{"waves": ["50%", "5%"], "waveTimeout": "2m"}"#).unwrap();
    let plan = Plan::of(Some(&spec));
    assert_eq!(plan.waves, [5, 50, 100]);
    assert_eq!(plan.wave_timeout, Duration::from_secs(120));
    assert_eq!(Plan::of(None).waves, DEFAULT_WAVES);
}

fn report(generation: i64, peers: &[(&str, &str)]) -> SpeakerReport {
    SpeakerReport {
        config: Some(ConfigReport {
            peers: vec![ObjectGeneration {
                name: "tor1".into(),
                generation: Some(generation),
                last_good: None,
            }],
            ..ConfigReport::default()
        }),
        peers: peers
            .iter()
            .map(|(name, state)| PeerReport {
                name: (*name).into(),
                bgp_peer: Some("tor1".into()),
                state: (*state).into(),
                ..PeerReport::default()
            })
            .collect(),
        ..SpeakerReport::default()
    }
}

#[test]
fn a_node_is_back_when_it_runs_the_generation_and_the_sessions_up_before_are_up_again() {
    let before = report(1, &[("tor1-a", "Established"), ("tor1-b", "Active")]);
    let baseline = established(&before, ObjectKind::Peer, "tor1");
    assert_eq!(baseline.len(), 1);
    let p = |r: &SpeakerReport| progress(Some(r), ObjectKind::Peer, "tor1", 2, &baseline);
    assert_eq!(p(&before), Progress::Pending("runs generation 1".into()));
    let resetting = report(2, &[("tor1-a", "OpenSent"), ("tor1-b", "Active")]);
    assert_eq!(
        p(&resetting),
        Progress::Pending("not Established again: tor1-a OpenSent".into())
    );
    // tor1-b was down before the edit (its router rejects): it holds nothing.
    let back = report(2, &[("tor1-a", "Established"), ("tor1-b", "Active")]);
    assert_eq!(p(&back), Progress::Done);
    assert_eq!(
        progress(None, ObjectKind::Peer, "tor1", 2, &baseline),
        Progress::Silent
    );
}
