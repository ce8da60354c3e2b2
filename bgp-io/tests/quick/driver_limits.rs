//! What a misbehaving peer cannot make the session driver do: buffer without bound (a peer
//! that asks for route refreshes and does not read) or flood the logs (malformed UPDATEs).
//! Over `tokio::io::duplex` with paused time, like `driver.rs`.

use std::net::Ipv4Addr;
use std::time::Duration;

use bgp_io::driver::{SessionEvent, UPDATE_ERROR_EVENT_INTERVAL};
use bgp_proto::message::Message;
use bgp_proto::message::attribute::{AsPath, AttrValue, PathAttribute};
use bgp_proto::session::{SessionConfig, State};
use bgp_proto::{ErrorCode, Family, RouteRefresh, Update};
use futures::{SinkExt, StreamExt};
use tokio::time::Instant;

use crate::driver_harness;
use crate::frames;
use driver_harness::*;

fn refresh_v4() -> Message {
    Message::RouteRefresh(RouteRefresh::new(Family::IPV4_UNICAST))
}

fn sent_send_hold_notification(h: &Harness) -> bool {
    h.task
        .status
        .borrow()
        .last_notification_sent
        .as_ref()
        .is_some_and(|n| n.code == u8::from(ErrorCode::SendHoldTimerExpired))
}

/// Each ROUTE-REFRESH used to queue a full table for a peer that never read them: about
/// 95 MB/s. Now one response waits per family, later requests coalesce, and the peer ends
/// like any peer that stops reading.
#[tokio::test(start_paused = true)]
async fn peer_that_loops_route_refresh_and_never_reads_ends_in_send_hold_with_a_bounded_queue_rfc9687()
 {
    let limit = 256 << 10;
    let cfg = SessionConfig {
        send_hold_time: Some(Duration::from_secs(20)),
        send_queue_limit: limit,
        ..cfg()
    };
    // About 80 KB per copy of the table, through a 4 KB pipe nobody reads.
    let mut h = start(cfg, v4_routes(10, 20_000), 4096);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 0).await;
    for _ in 0..300 {
        if peer.send(refresh_v4()).await.is_err() {
            break; // dropped by us: what this test expects
        }
    }
    let st = wait_status(&h.task, |s| s.state != State::Established).await;
    assert!(
        st.last_error
            .as_deref()
            .is_some_and(|e| e.contains("send hold")),
        "{st:?}"
    );
    assert!(sent_send_hold_notification(&h), "NOTIFICATION 8 attempted");
    assert!(
        st.send_queue_high_water <= limit,
        "queued {} bytes, limit {limit}",
        st.send_queue_high_water
    );
    // The normal reconnect follows.
    let _again = next_peer(&mut h).await;
    drop(peer);
}

/// The queue bound holds whatever fills it (here route changes for a peer that stopped
/// reading): passing it counts as send hold expiry, long before the send hold timer.
#[tokio::test(start_paused = true)]
async fn send_queue_limit_counts_as_send_hold_expiry_rfc9687_4() {
    let limit = 64 << 10;
    let cfg = SessionConfig {
        send_hold_time: Some(Duration::from_secs(3600)),
        send_queue_limit: limit,
        ..cfg()
    };
    let (a, b) = (v4_routes(10, 2000), v4_routes(11, 2000));
    let mut h = start(cfg, a.clone(), 4096);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 0).await;
    let t0 = Instant::now();
    let mut changes = 0;
    while h.task.status.borrow().state == State::Established {
        assert!(changes < 100, "still up after {changes} changes of ~16 KB");
        let before = h.task.status.borrow().sent.count("UPDATE");
        h.routes
            .send(Some(if changes % 2 == 0 {
                b.clone()
            } else {
                a.clone()
            }))
            .unwrap();
        wait_status(&h.task, |s| s.sent.count("UPDATE") > before).await;
        changes += 1;
    }
    let st = h.task.status.borrow().clone();
    assert!(
        st.last_error
            .as_deref()
            .is_some_and(|e| e.contains("send hold")),
        "{st:?}"
    );
    assert!(sent_send_hold_notification(&h));
    assert!(st.send_queue_high_water <= limit, "{st:?}");
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "the limit, not the timer"
    );
    let _again = next_peer(&mut h).await;
    drop(peer);
}

/// A peer that asks 1,000 times while our answers are still on their way gets a few table
/// copies, not 1,000; and the session stays up.
#[tokio::test(start_paused = true)]
async fn a_thousand_route_refreshes_from_a_slow_reader_get_few_table_copies_rfc2918_4() {
    // About 8 KB per copy through a 4 KB pipe.
    let mut h = start(cfg(), v4_routes(10, 2000), 4096);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    let mut end_of_ribs = 0;
    let mut first = None;
    while end_of_ribs < 2 {
        if let Message::Update(u) = recv(&mut peer).await {
            first = first.or(u.nlri.first().copied());
            if u.end_of_rib_family().is_some() {
                end_of_ribs += 1;
            }
        }
    }
    // Each copy of the table carries its first prefix once (a plain response has no EoR).
    let first = first.expect("an IPv4 table");
    let (mut sink, mut stream) = peer.split();
    let asking = tokio::spawn(async move {
        for _ in 0..1000 {
            sink.send(refresh_v4()).await.unwrap();
        }
        sink
    });
    let mut copies = 0;
    loop {
        // Five quiet seconds: every answer was written (keepalives come every 30 s).
        match tokio::time::timeout(Duration::from_secs(5), stream.next()).await {
            Err(_) => break,
            Ok(Some(Ok(d))) => {
                if let Message::Update(u) = d.message
                    && u.nlri.contains(&first)
                {
                    copies += 1;
                }
            }
            Ok(other) => panic!("connection ended: {other:?}"),
        }
    }
    assert!(asking.is_finished(), "all 1,000 requests were sent");
    assert!((1..=50).contains(&copies), "{copies} table copies");
    let st = h.task.status.borrow().clone();
    assert_eq!(st.state, State::Established);
    assert_eq!(st.connect_attempts, 1);
    assert_eq!(st.received.count("ROUTE-REFRESH"), 1000);
}

/// 247 MB of malformed UPDATEs once made 2.3 GB of logs: one event per UPDATE. Now errors
/// are counted per kind and reported at most once per interval.
#[tokio::test(start_paused = true)]
async fn malformed_update_flood_is_summarised_in_at_most_two_events_rfc7606() {
    let mut h = start(cfg(), routes(&[]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    let mut events = h.task.events.subscribe();
    // No ORIGIN: treat-as-withdraw (RFC 7606 §3 d), the session stays up.
    let bad = Message::Update(Update {
        withdrawn: Vec::new(),
        attributes: vec![
            PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![65000]))),
            PathAttribute::new(AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1))),
        ],
        nlri: vec!["198.51.100.0/24".parse().unwrap()],
    });
    let t0 = Instant::now();
    for _ in 0..10_000 {
        peer.feed(bad.clone()).await.unwrap();
    }
    SinkExt::<Message>::flush(&mut peer).await.unwrap();
    let mut reports = Vec::new();
    let mut total = 0u64;
    while total < 10_000 {
        let ev = tokio::time::timeout(3 * UPDATE_ERROR_EVENT_INTERVAL, events.recv())
            .await
            .unwrap_or_else(|_| panic!("{total} errors reported in {reports:?}"))
            .expect("no events lost");
        if let SessionEvent::UpdateErrors { counts, example } = ev {
            assert_eq!(
                counts.keys().copied().collect::<Vec<_>>(),
                ["missing-well-known-attribute"]
            );
            assert!(
                example.contains("missing well-known attribute 1"),
                "{example}"
            );
            total += counts.values().sum::<u64>();
            reports.push((t0.elapsed(), counts));
        }
    }
    assert_eq!(total, 10_000);
    assert!(reports.len() <= 2, "{reports:?}");
    assert_eq!(reports[0].0, Duration::ZERO, "the first at once");
    let st = h.task.status.borrow().clone();
    assert_eq!(
        st.update_errors.get("missing-well-known-attribute"),
        Some(&10_000)
    );
    assert_eq!(st.state, State::Established);
    drop(peer);
}

/// A malformed MP_REACH_NLRI (AFI/SAFI disable, RFC 7606 §7.11) is counted and the connection
/// keeps being read: a decode error ends a `FramedRead` stream, so the decoder must hand these
/// to the session as a message with errors, not as an error.
#[tokio::test(start_paused = true)]
async fn malformed_mp_reach_is_counted_and_the_connection_keeps_reading_rfc7606_7_11() {
    use tokio::io::AsyncWriteExt;
    let mut h = start(cfg(), routes(&[]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    // IPv6 unicast with a 4-octet next hop.
    let mp = &[
        0x90, 14, 0, 14, 0, 2, 1, 4, 192, 0, 2, 1, 0, 32, 0x20, 0x01, 0x0d, 0xb8,
    ];
    let bad = frames::update(&[], &[mp, frames::ORIGIN, frames::AS_PATH].concat(), &[]);
    for n in 1..=2u64 {
        peer.get_mut().write_all(&bad).await.unwrap();
        let st = wait_status(&h.task, |s| {
            s.update_errors.get("malformed-mp-attribute") == Some(&n)
                || s.state != State::Established
        })
        .await;
        assert_eq!(st.state, State::Established, "{st:?}");
        assert_eq!(st.last_notification_sent, None);
    }
    drop(peer);
}
