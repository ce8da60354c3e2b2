use std::time::Duration;

use fake_kube::{FakeKube, Gvr, Verb};

use super::*;
use crate::daemon::core::EventReason;

fn event(reason: EventReason, warning: bool, action: &str, note: &str) -> NodeEvent {
    NodeEvent {
        node: "node-a".into(),
        node_uid: Some("uid-a".into()),
        reason,
        warning,
        action: action.into(),
        note: note.into(),
    }
}

fn up() -> NodeEvent {
    event(
        EventReason::SessionEstablished,
        false,
        "Peer tor1",
        "BGP session with tor1 (127.0.0.1, AS 65000) established",
    )
}

fn down() -> NodeEvent {
    event(
        EventReason::SessionDown,
        true,
        "Peer tor1",
        "BGP session with tor1 (127.0.0.1, AS 65000) left Established: hold timer expired",
    )
}

#[test]
fn throttle_admits_a_burst_then_one_per_refill_period() {
    let mut t = Throttle::default();
    let start = Instant::now();
    let admitted = |t: &mut Throttle, at: Instant, n: usize| {
        (0..n).filter(|_| t.admit(key(&down()), at)).count()
    };
    assert_eq!(admitted(&mut t, start, 100), BURST as usize);
    assert_eq!(admitted(&mut t, start + REFILL / 2, 100), 0);
    assert_eq!(admitted(&mut t, start + REFILL, 100), 1);
    assert_eq!(admitted(&mut t, start + REFILL * 3, 100), 2);
    // A long quiet spell refills the burst, no more.
    assert_eq!(admitted(&mut t, start + REFILL * 1000, 100), BURST as usize);
}

#[test]
fn throttle_keeps_events_apart_by_reason_action_and_node() {
    let mut t = Throttle::default();
    let now = Instant::now();
    for _ in 0..BURST {
        assert!(t.admit(key(&down()), now));
    }
    assert!(!t.admit(key(&down()), now));
    assert!(t.admit(key(&up()), now), "another reason");
    let mut other_peer = down();
    other_peer.action = "Peer tor2".into();
    assert!(t.admit(key(&other_peer), now), "another peer");
    let mut recreated = down();
    recreated.node_uid = Some("uid-b".into());
    assert!(t.admit(key(&recreated), now), "a recreated Node");
}

#[test]
fn throttle_forgets_idle_events_when_it_remembers_too_many() {
    let mut t = Throttle::default();
    let now = Instant::now();
    for i in 0..MAX_KEYS {
        let mut e = down();
        e.action = format!("Announce 10.{}.{}.0/24", i / 256, i % 256);
        assert!(t.admit(key(&e), now));
    }
    assert_eq!(t.keys(), MAX_KEYS);
    // Their buckets are full again after a refill period: forgotten on the next new key.
    assert!(t.admit(key(&up()), now + REFILL));
    assert_eq!(t.keys(), 1);
}

#[test]
fn free_text_is_escaped_and_cut_to_the_api_limits() {
    let mut e = down();
    e.note = format!("bye\n\x1b[31m{}", "é".repeat(2000));
    e.action = format!("Announce {}", "x".repeat(500));
    let (publish, regarding) = to_api(&e);
    let note = publish.note.unwrap();
    assert!(note.len() <= NOTE_LIMIT && !note.contains('\n') && !note.contains('\x1b'));
    assert!(publish.action.len() <= ACTION_LIMIT);
    assert_eq!(publish.type_, EventType::Warning);
    assert_eq!(publish.reason, "BGPSessionDown");
    assert_eq!(regarding.kind.as_deref(), Some("Node"));
    assert_eq!(regarding.api_version.as_deref(), Some("v1"));
    assert_eq!(regarding.namespace, None);
    assert_eq!(regarding.uid.as_deref(), Some("uid-a"));
}

/// A session flapping 10,000 times: the queue and the throttle bound the writes, the
/// Recorder's de-duplication the objects (one per reason), and every occurrence is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flap_storm_creates_one_event_per_reason_and_bounded_writes() {
    let fake = FakeKube::start().await.unwrap();
    let metrics = Arc::new(Metrics::new());
    let (sink, task) = EventSink::spawn(fake.client(), "node-a", Arc::clone(&metrics));
    const FLAPS: u64 = 10_000;
    for _ in 0..FLAPS {
        sink.send(up());
        sink.send(down());
    }
    drop(sink);
    tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("the publisher drains its queue and ends")
        .unwrap();

    let stored = fake.list(&Gvr::events(), Some("default"));
    let mut reasons: Vec<&str> = stored.iter().filter_map(|e| e["reason"].as_str()).collect();
    reasons.sort_unstable();
    assert_eq!(
        reasons,
        ["BGPSessionDown", "BGPSessionEstablished"],
        "one object per reason: {stored:#?}"
    );
    for e in &stored {
        let count = e["series"]["count"].as_u64().unwrap_or(1);
        assert!(count <= u64::from(BURST), "series count {count}");
        assert_eq!(e["regarding"]["name"], "node-a");
        assert_eq!(e["reportingController"], REPORTER);
        assert_eq!(e["reportingInstance"], "node-a");
    }
    let writes = fake.requests(Verb::Create, "events") + fake.requests(Verb::Patch, "events");
    assert!(writes <= 2 * u64::from(BURST), "{writes} writes");

    let text = metrics.encode();
    let count = |result: &str| -> u64 {
        let prefix = format!("podcidr_kube_events_total{{result=\"{result}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
    };
    assert_eq!(count("published"), writes);
    assert_eq!(count("failed"), 0);
    assert!(count("dropped") > 0, "the queue was full at times");
    assert_eq!(
        count("published") + count("throttled") + count("dropped"),
        2 * FLAPS,
        "every occurrence is accounted for"
    );
}
