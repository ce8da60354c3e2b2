//! Table tests for the Kubernetes Events the core raises about its Node: session up and
//! down, source mismatch, guard refusals. Which occurrences become Events is decided here;
//! how often they are written is the publisher's (`kube_events.rs`).

use std::net::IpAddr;
use std::sync::Arc;

use bgp_proto::session::SessionEvent;
use bgp_proto::session::{DownReason, State, StopReason};
use ipam_watch::source::{DesiredSet, SourceMismatch};
use podcidr_config::Config;

use super::*;
use crate::daemon::core::node_events::REFUSAL_EVENTS;

fn lookup(_: &podcidr_config::PeerAddress) -> Option<IpAddr> {
    Some("192.0.2.10".parse().unwrap())
}

const PEERS: &str = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n";

fn config(source: &str) -> Config {
    Config::from_yaml_str(&format!(
        "asn: 65010\nrouterId: 192.0.2.10\nsource: {source}\nallowedPrefixes: [198.19.0.0/16]\n{PEERS}"
    ))
    .unwrap()
}

/// A core with an API whose Node (uid `uid-a`) is known, so its sessions run.
fn api_core() -> Core {
    let mut core = Core::with_lookup(config("{kind: ipam-crd}"), "node-a".into(), true, lookup);
    core.start();
    core.handle(core.node_seen(NodeFacts {
        uid: Some("uid-a".into()),
        ..NodeFacts::default()
    }));
    // The source's first set: graceful-restart sessions open only once it is known.
    core.handle(Event::Desired(Arc::new(DesiredSet {
        ready: true,
        ..DesiredSet::default()
    })));
    core
}

fn events(out: &[Effect]) -> Vec<&NodeEvent> {
    out.iter()
        .filter_map(|e| match e {
            Effect::KubeEvent(ev) => Some(&**ev),
            _ => None,
        })
        .collect()
}

fn state(from: State, to: State, reason: Option<DownReason>) -> Event {
    Event::Session(
        "tor1".into(),
        SessionEvent::StateChanged { from, to, reason },
    )
}

fn desired(cidrs: &[&str], mismatch: Option<(&str, &str)>) -> Event {
    Event::Desired(Arc::new(DesiredSet {
        ready: true,
        cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
        mismatch: mismatch.map(|(chosen, node_spec)| SourceMismatch {
            node: "node-a".into(),
            chosen: vec![chosen.parse().unwrap()],
            node_spec: vec![node_spec.parse().unwrap()],
        }),
        ..DesiredSet::default()
    }))
}

#[test]
fn session_established_and_down_become_node_events_with_the_reason() {
    let mut core = api_core();
    let out = core.handle(state(State::OpenConfirm, State::Established, None));
    let [up] = events(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (up.reason, up.warning, up.action.as_str()),
        (EventReason::SessionEstablished, false, "Peer tor1")
    );
    assert_eq!(
        (up.node.as_str(), up.node_uid.as_deref()),
        ("node-a", Some("uid-a"))
    );
    assert_eq!(
        up.note,
        "BGP session with tor1 (192.0.2.1, AS 65000) established"
    );

    let out = core.handle(state(
        State::Established,
        State::Idle,
        Some(DownReason::HoldTimerExpired),
    ));
    let [down] = events(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (down.reason, down.warning, down.action.as_str()),
        (EventReason::SessionDown, true, "Peer tor1")
    );
    assert_eq!(
        down.note,
        "BGP session with tor1 (192.0.2.1, AS 65000) left Established: hold timer expired"
    );
    // The way back up is no Event; only reaching Established again is.
    for (from, to) in [
        (State::Idle, State::Connect),
        (State::Connect, State::OpenSent),
        (State::OpenSent, State::Idle),
    ] {
        assert!(events(&core.handle(state(from, to, None))).is_empty());
    }
}

#[test]
fn a_session_we_stopped_on_purpose_is_a_normal_event_not_a_warning() {
    let mut core = api_core();
    let out = core.handle(state(
        State::Established,
        State::Idle,
        Some(DownReason::Stopped(StopReason::ConfigurationChange)),
    ));
    let [down] = events(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (down.reason, down.warning),
        (EventReason::SessionDown, false)
    );
    assert!(
        down.note.ends_with("configuration changed"),
        "{}",
        down.note
    );
}

#[test]
fn no_events_without_an_api_for_unknown_peers_or_after_shutdown() {
    let mut file = Core::with_lookup(
        config("{kind: file, path: /x}"),
        "node-a".into(),
        false,
        lookup,
    );
    file.start();
    let out = file.handle(state(State::OpenConfirm, State::Established, None));
    assert!(events(&out).is_empty(), "file mode without an API");

    let mut core = api_core();
    let stranger = Event::Session(
        "gone".into(),
        SessionEvent::StateChanged {
            from: State::OpenConfirm,
            to: State::Established,
            reason: None,
        },
    );
    assert!(events(&core.handle(stranger)).is_empty());
    core.handle(Event::Shutdown { final_stop: false });
    let out = core.handle(state(
        State::Established,
        State::Idle,
        Some(DownReason::Stopped(StopReason::GracefulRestart)),
    ));
    assert!(events(&out).is_empty(), "a stopping speaker raises nothing");
}

#[test]
fn source_mismatch_raises_one_event_when_it_begins_and_one_when_it_ends() {
    let mut core = api_core();
    let out = core.handle(desired(
        &["198.19.2.0/24"],
        Some(("198.19.2.0/24", "198.19.1.0/24")),
    ));
    let [begins] = events(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (begins.reason, begins.warning, begins.action.as_str()),
        (EventReason::SourceMismatch, true, "Announce")
    );
    assert!(
        begins.note.contains("198.19.2.0/24") && begins.note.contains("198.19.1.0/24"),
        "{}",
        begins.note
    );
    assert!(
        begins
            .note
            .starts_with("source ipam-crd and Node.spec.podCIDRs disagree")
    );
    // Still (or differently) mismatched: the same mismatch, no new Event.
    let same = core.handle(desired(
        &["198.19.2.0/24"],
        Some(("198.19.2.0/24", "198.19.1.0/24")),
    ));
    assert!(events(&same).is_empty());
    let other = core.handle(desired(
        &["198.19.2.0/24"],
        Some(("198.19.2.0/24", "198.19.3.0/24")),
    ));
    assert!(events(&other).is_empty());
    let out = core.handle(desired(&["198.19.2.0/24"], None));
    let [ends] = events(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (ends.reason, ends.warning),
        (EventReason::SourceMismatchResolved, false)
    );
}

#[test]
fn each_new_guard_refusal_raises_one_event_and_a_flood_is_summarised() {
    let mut core = api_core();
    let out = core.handle(desired(&["198.19.1.0/24", "203.0.113.0/24"], None));
    let [refused] = events(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(
        (refused.reason, refused.warning, refused.action.as_str()),
        (EventReason::PodCidrRefused, true, "Announce 203.0.113.0/24")
    );
    assert_eq!(
        refused.note,
        "pod CIDR 203.0.113.0/24 from source ipam-crd is not announced: outside-allowed-prefixes"
    );
    let again = core.handle(desired(&["198.19.1.0/24", "203.0.113.0/24"], None));
    assert!(events(&again).is_empty(), "a refusal already seen");

    let flood: Vec<String> = (0..20).map(|i| format!("203.0.{i}.0/24")).collect();
    let flood: Vec<&str> = flood.iter().map(String::as_str).collect();
    let out = core.handle(desired(&flood, None));
    let raised = events(&out);
    assert_eq!(raised.len(), REFUSAL_EVENTS + 1, "{raised:#?}");
    let summary = raised[REFUSAL_EVENTS];
    assert_eq!(summary.action, "Announce");
    let more = 20 - REFUSAL_EVENTS;
    assert!(
        summary.note.starts_with(&format!("{more} more pod CIDRs")),
        "{}",
        summary.note
    );
    assert!(
        raised
            .iter()
            .all(|e| e.reason == EventReason::PodCidrRefused)
    );
}
