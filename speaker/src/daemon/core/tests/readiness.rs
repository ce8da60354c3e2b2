//! Table tests for `/readyz` as a rollout gate (issue 23 item 4, issue 30 item 8): Ready needs
//! the source synced and every peer Established once, except, after the grace, a peer silent
//! all along or one that answers but was never Established on this node before this process.

use std::collections::BTreeMap;
use std::time::Duration;

use bgp_proto::session::{SessionStatus, State};

use super::super::readiness::Readiness;
use super::*;

#[derive(Clone, Copy)]
enum Peer {
    /// Connect/Active: nothing received.
    Silent,
    /// An OPEN came, no Established (capabilities, AS, hold time refused).
    Answers,
    /// A NOTIFICATION came (the router refuses us).
    Refuses,
    Established,
}

fn status(p: Peer) -> SessionStatus {
    let mut s = SessionStatus::new(0);
    match p {
        Peer::Silent => s.state = State::Active,
        Peer::Answers => {
            s.state = State::Idle;
            s.received.messages.insert("OPEN", 1);
        }
        Peer::Refuses => {
            s.state = State::Active;
            s.received.messages.insert("NOTIFICATION", 3);
        }
        Peer::Established => {
            s.state = State::Established;
            s.received.messages.insert("OPEN", 1);
        }
    }
    s
}

fn at(core: &mut Core, secs: u64, tor1: Peer, tor2: Peer) -> Vec<Effect> {
    let statuses: BTreeMap<String, SessionStatus> = [("tor1", tor1), ("tor2", tor2)]
        .into_iter()
        .map(|(n, p)| (n.to_owned(), status(p)))
        .collect();
    core.handle(Event::Tick {
        now: Duration::from_secs(secs),
        unix: 1_700_000_000 + secs,
        statuses,
    })
}

fn readiness(out: &[Effect]) -> Option<&Readiness> {
    out.iter().rev().find_map(|e| match e {
        Effect::SetReadiness(r) => Some(r),
        _ => None,
    })
}

/// The readiness the core reports now (the last one it handed out).
fn now(core: &Core) -> Readiness {
    core.readiness()
}

fn started(grace: u64) -> Core {
    started_after(grace, &[])
}

/// A restarted process: `before` were Established on this node by the previous one.
fn started_after(grace: u64, before: &[&str]) -> Core {
    let mut core = Core::with_lookup(config("", PEERS), "node-a".into(), false, lookup)
        .with_ready_grace(Duration::from_secs(grace))
        .with_established_before(before.iter().map(|s| (*s).to_owned()).collect());
    core.start();
    core
}

#[test]
fn ready_only_when_synced_and_every_peer_established_once() {
    let mut core = started(120);
    let out = core.handle(not_ready());
    assert_eq!(
        readiness(&out).map(|r| (r.ready, r.why.as_str())),
        Some((false, "pod-CIDR source not synced yet"))
    );
    let out = core.handle(ready(&[]));
    let r = readiness(&out).expect("a synced source changes the answer");
    assert!(!r.ready);
    assert!(r.why.contains("tor1 (not Established yet)"), "{}", r.why);
    assert!(r.why.contains("tor2 (not Established yet)"), "{}", r.why);
    at(&mut core, 3, Peer::Established, Peer::Silent);
    let r = now(&core);
    assert!(
        !r.ready && !r.why.contains("tor1") && r.why.contains("tor2"),
        "{r:?}"
    );
    let out = at(&mut core, 4, Peer::Established, Peer::Established);
    assert_eq!(readiness(&out).map(|r| r.ready), Some(true));
}

#[test]
fn once_ready_a_session_loss_never_makes_the_pod_unready_only_the_source_does() {
    let mut core = started(120);
    core.handle(ready(&[]));
    at(&mut core, 2, Peer::Established, Peer::Established);
    assert!(now(&core).ready);
    // A ToR goes down, another refuses us: the rollout gate has passed.
    let out = at(&mut core, 500, Peer::Silent, Peer::Refuses);
    assert_eq!(readiness(&out), None, "no change: {out:?}");
    assert!(now(&core).ready);
    // The source is a live condition, as it always was.
    let out = core.handle(not_ready());
    assert_eq!(readiness(&out).map(|r| r.ready), Some(false));
}

/// One rack whose router rejects us must not stop every rollout of the fleet; a release that
/// cannot peer with a router it peered with before must.
#[test]
fn after_the_grace_a_peer_is_excused_unless_it_was_established_before_this_restart_and_answers() {
    // (tor2's behaviour, tick time, grace, tor2 Established before the restart) → Ready?
    let table = [
        (Peer::Silent, 119, 120, false, false),
        (Peer::Silent, 120, 120, false, true),
        (Peer::Silent, 5, 5, false, true),
        (Peer::Silent, 4, 5, false, false),
        // Silent all along, even if Established before: down, not our release.
        (Peer::Silent, 120, 120, true, true),
        (Peer::Answers, 119, 120, false, false),
        (Peer::Answers, 120, 120, false, true),
        (Peer::Refuses, 10_000, 120, false, true),
        (Peer::Answers, 10_000, 120, true, false),
        (Peer::Refuses, 10_000, 120, true, false),
        (Peer::Established, 1, 120, true, true),
    ];
    for (tor2, secs, grace, before, want) in table {
        let before_list: &[&str] = if before { &["tor1", "tor2"] } else { &["tor1"] };
        let mut core = started_after(grace, before_list);
        core.handle(ready(&[]));
        let out = at(&mut core, secs, Peer::Established, tor2);
        let r = now(&core);
        let what = match tor2 {
            Peer::Silent => "silent",
            Peer::Answers => "answers",
            Peer::Refuses => "refuses",
            Peer::Established => "established",
        };
        assert_eq!(
            r.ready, want,
            "tor2 {what} at {secs}s, grace {grace}s, before {before}: {r:?}"
        );
        let answers = matches!(tor2, Peer::Answers | Peer::Refuses);
        if answers && before {
            assert!(
                r.why.contains(
                    "tor2 (Established before this restart; answers, not Established again)"
                ),
                "{r:?}"
            );
        }
        // An excused answering peer is said, for the alert.
        let excused: Vec<&Vec<String>> = out
            .iter()
            .filter_map(|e| match e {
                Effect::Notice(Notice::ExcusedPeers(p)) => Some(p),
                _ => None,
            })
            .collect();
        if answers && !before && secs >= grace {
            assert_eq!(excused, [&vec!["tor2".to_owned()]], "{what} {secs}");
        } else {
            assert!(excused.iter().all(|p| p.is_empty()), "{excused:?}");
        }
    }
}

#[test]
fn a_peer_established_before_the_restart_that_answered_is_not_excused_when_it_falls_silent() {
    let mut core = started_after(120, &["tor2"]);
    core.handle(ready(&[]));
    at(&mut core, 5, Peer::Established, Peer::Refuses);
    at(&mut core, 300, Peer::Established, Peer::Silent);
    assert!(!now(&core).ready, "{:?}", now(&core));
}

/// What the next process needs: the peers Established here, kept as they are reached.
#[test]
fn established_peers_are_kept_for_the_next_process() {
    let mut core = started_after(120, &["tor2", "gone"]);
    core.handle(ready(&[]));
    let kept = |out: &[Effect]| -> Vec<Vec<String>> {
        out.iter()
            .filter_map(|e| match e {
                Effect::KeepEstablished(p) => Some(p.iter().cloned().collect()),
                _ => None,
            })
            .collect()
    };
    // The previous record, minus peers no longer configured ("gone").
    let out = at(&mut core, 1, Peer::Established, Peer::Silent);
    assert_eq!(kept(&out), [vec!["tor1".to_owned(), "tor2".to_owned()]]);
    let out = at(&mut core, 2, Peer::Established, Peer::Established);
    assert!(kept(&out).is_empty(), "nothing new to keep: {out:?}");
}

#[test]
fn a_node_no_peer_selects_is_ready_once_synced() {
    let peers = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, nodeSelector: {matchLabels: {rack: r1}}}\n";
    let mut core = Core::with_lookup(api_config("", peers), "node-a".into(), true, lookup);
    core.start();
    let out = core.handle(core.node_seen(NodeFacts::default()));
    assert_eq!(readiness(&out).map(|r| r.ready), Some(false));
    assert_eq!(
        readiness(&core.handle(ready(&[]))).map(|r| r.ready),
        Some(true)
    );
}

#[test]
fn api_mode_waits_for_the_node_before_judging_its_peers() {
    let mut core = Core::with_lookup(api_config("", PEERS), "node-a".into(), true, lookup)
        .with_ready_grace(Duration::ZERO);
    core.start();
    let out = core.handle(ready(&[]));
    assert_eq!(
        readiness(&out).map(|r| (r.ready, r.why.as_str())),
        Some((false, "the Node has not been seen yet"))
    );
    let out = core.handle(core.node_seen(NodeFacts::default()));
    assert_eq!(readiness(&out).map(|r| r.ready), Some(true), "{out:?}");
}

#[test]
fn readiness_is_handed_out_only_when_it_changes() {
    let mut core = started(120);
    core.handle(ready(&[]));
    assert_eq!(
        readiness(&at(&mut core, 1, Peer::Silent, Peer::Silent)),
        None
    );
    assert_eq!(
        readiness(&at(&mut core, 2, Peer::Silent, Peer::Silent)),
        None
    );
}
