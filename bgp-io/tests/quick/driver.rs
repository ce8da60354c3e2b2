//! The tokio session driver over `tokio::io::duplex` with paused time: the test plays the
//! router with a real codec on the other end.

use std::io;
use std::pin::Pin;
use std::time::Duration;

use bgp_io::BgpCodec;
use bgp_io::driver::{self, Connector};
use bgp_proto::message::{Message, WireOptions};
use bgp_proto::session::{Session, SessionConfig, State, StopReason};
use bgp_proto::{ErrorCode, Family, Update};
use futures::{SinkExt, StreamExt};
use ipnet::IpNet;
use tokio::io::DuplexStream;
use tokio::sync::{mpsc, watch};
use tokio_util::codec::Framed;

use crate::driver_harness;
use driver_harness::*;

#[tokio::test(start_paused = true)]
async fn establishes_then_sends_table_and_end_of_rib() {
    let mut h = start(cfg(), routes(&["198.18.1.0/24", "fd00:1::/64"]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    let Message::Update(u) = recv(&mut peer).await else {
        panic!()
    };
    assert_eq!(u.nlri, vec!["198.18.1.0/24".parse().unwrap()]);
    let Message::Update(u) = recv(&mut peer).await else {
        panic!()
    };
    assert_eq!(u.announced(), vec!["fd00:1::/64".parse::<IpNet>().unwrap()]);
    for family in [Family::IPV4_UNICAST, Family::IPV6_UNICAST] {
        let Message::Update(u) = recv(&mut peer).await else {
            panic!()
        };
        assert_eq!(u.end_of_rib_family(), Some(family));
    }
    wait_state(&h.task, State::Established).await;
    let st = h.task.status.borrow().clone();
    assert_eq!(st.advertised.get("ipv4-unicast"), Some(&1));
    assert_eq!(st.sent.count("UPDATE"), 4);
    assert_eq!(st.negotiated.unwrap().hold_time.seconds(), 90);
}

#[tokio::test(start_paused = true)]
async fn keepalives_every_third_of_hold_time_then_hold_timer_expiry_sends_4_0() {
    let mut h = start(cfg(), routes(&[]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    let started = tokio::time::Instant::now();
    let mut keepalives = 0;
    let notification = loop {
        match recv(&mut peer).await {
            Message::Keepalive => keepalives += 1,
            Message::Update(u) if u.end_of_rib_family().is_some() => {}
            Message::Notification(n) => break n,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(
        (notification.code, notification.subcode),
        (ErrorCode::HoldTimerExpired, 0)
    );
    assert_eq!(started.elapsed(), Duration::from_secs(90));
    assert_eq!(keepalives, 2, "at 30 s and 60 s");
    // Reconnects after a backoff and sends the table again.
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
}

#[tokio::test(start_paused = true)]
async fn route_changes_send_only_the_difference() {
    let mut h = start(cfg(), routes(&["198.18.1.0/24"]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    for _ in 0..3 {
        recv(&mut peer).await;
    }
    h.routes.send(Some(routes(&["198.18.2.0/24"]))).unwrap();
    let Message::Update(w) = recv(&mut peer).await else {
        panic!()
    };
    assert_eq!(w.withdrawn, vec!["198.18.1.0/24".parse().unwrap()]);
    let Message::Update(a) = recv(&mut peer).await else {
        panic!()
    };
    assert_eq!(a.nlri, vec!["198.18.2.0/24".parse().unwrap()]);
}

#[tokio::test(start_paused = true)]
async fn stop_sends_cease_with_shutdown_message_and_ends_the_task() {
    let mut h = start(cfg(), routes(&[]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    h.task
        .stop(StopReason::Shutdown("maintenance window".into()));
    let n = loop {
        if let Message::Notification(n) = recv(&mut peer).await {
            break n;
        }
    };
    assert_eq!(n.shutdown_message().as_deref(), Some("maintenance window"));
    assert!(
        peer.next().await.is_none(),
        "connection closed after the NOTIFICATION"
    );
    tokio::time::timeout(Duration::from_secs(10), h.task.wait())
        .await
        .unwrap();
}

/// A speaker that stops for graceful restart and then drops its route sender must still
/// close without a NOTIFICATION: the closed routes channel once won the race and sent a
/// Cease, so the router flushed the routes it should have kept stale.
#[tokio::test(start_paused = true)]
async fn graceful_restart_stop_wins_over_a_route_sender_dropped_with_it_rfc4724_4() {
    // tokio::select! polls its branches in random order: repeat so a race shows.
    for _ in 0..16 {
        gr_stop_then_drop_routes().await;
    }
}

async fn gr_stop_then_drop_routes() {
    let mut h = start(cfg(), routes(&["198.18.0.0/24"]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    let Harness { task, routes, .. } = h;
    task.stop(StopReason::GracefulRestart);
    drop(routes);
    loop {
        match tokio::time::timeout(Duration::from_secs(5), peer.next())
            .await
            .expect("the connection closes")
        {
            None => break,
            Some(Ok(d)) => {
                if let Message::Notification(n) = d.message {
                    panic!("graceful restart sends no NOTIFICATION, got {n:?}")
                }
            }
            Some(_) => {}
        }
    }
    tokio::time::timeout(Duration::from_secs(10), task.wait())
        .await
        .unwrap();
}

/// A speaker exits as soon as its session tasks end: a task that ended before its final
/// NOTIFICATION was written lost the Cease (seen as a flaky "BIRD logged our Cease").
#[tokio::test(start_paused = true)]
async fn the_task_ends_only_after_its_final_notification_is_written() {
    // A pipe too small for the NOTIFICATION: it is written only as the peer reads.
    let mut h = start(cfg(), routes(&[]), 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    h.task
        .stop(StopReason::Shutdown("maintenance window".into()));
    let mut wait = Box::pin(h.task.wait());
    assert!(
        tokio::time::timeout(Duration::from_secs(1), &mut wait)
            .await
            .is_err(),
        "the task outlives its unwritten NOTIFICATION"
    );
    let n = loop {
        if let Message::Notification(n) = recv(&mut peer).await {
            break n;
        }
    };
    assert_eq!(n.shutdown_message().as_deref(), Some("maintenance window"));
    drop(peer);
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap();
}

/// Closing a socket with unread data sends a RST, and a RST can make the peer's kernel drop
/// our NOTIFICATION before the router reads it: after our FIN we keep reading until the peer
/// closes (bounded).
#[tokio::test(start_paused = true)]
async fn the_close_after_a_notification_lingers_until_the_peer_closes() {
    let mut h = start(cfg(), routes(&[]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    h.task
        .stop(StopReason::Shutdown("maintenance window".into()));
    while !matches!(recv(&mut peer).await, Message::Notification(_)) {}
    assert!(
        peer.next().await.is_none(),
        "our FIN follows the NOTIFICATION"
    );
    peer.send(Message::Keepalive)
        .await
        .expect("our side still reads after its FIN");
    let t0 = tokio::time::Instant::now();
    drop(peer);
    tokio::time::timeout(Duration::from_secs(10), h.task.wait())
        .await
        .unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "the peer's close ends the linger at once"
    );
}

#[tokio::test(start_paused = true)]
async fn malformed_update_from_peer_gets_its_notification() {
    let mut h = start(cfg(), routes(&[]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    // UPDATE whose withdrawn prefix claims /33.
    let mut raw = vec![0xffu8; 16];
    raw.extend_from_slice(&[0, 28, 2, 0, 5, 33, 1, 2, 3, 4, 0, 0]);
    use tokio::io::AsyncWriteExt;
    peer.get_mut().write_all(&raw).await.unwrap();
    let n = loop {
        if let Message::Notification(n) = recv(&mut peer).await {
            break n;
        }
    };
    assert_eq!((n.code, n.subcode), (ErrorCode::UpdateMessage, 10));
    wait_state(&h.task, State::Idle).await;
}

#[tokio::test(start_paused = true)]
async fn peer_that_stops_reading_trips_the_send_hold_timer_rfc9687() {
    let cfg = SessionConfig {
        send_hold_time: Some(Duration::from_secs(20)),
        ..cfg()
    };
    let many: Vec<String> = (0..20_000)
        .map(|i| format!("10.{}.{}.0/24", i / 256 % 256, i % 256))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let mut h = start(cfg, routes(&many), 4096);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 0).await;
    // Stop reading: the table (about 80 KB) cannot drain through a 4 KB pipe and the
    // reader's buffer.
    let mut rx = h.task.status.clone();
    tokio::time::timeout(
        Duration::from_secs(60),
        rx.wait_for(|s| {
            s.last_error
                .as_deref()
                .is_some_and(|e| e.contains("send hold"))
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("send hold timer did not fire: {:?}", h.task.status.borrow()))
    .unwrap();
    drop(peer);
}

#[tokio::test(start_paused = true)]
async fn passive_session_uses_incoming_connections() {
    struct NoConnector;
    impl Connector for NoConnector {
        type Stream = DuplexStream;
        fn connect(&mut self) -> Pin<Box<dyn Future<Output = io::Result<DuplexStream>> + Send>> {
            Box::pin(async { Err(io::Error::other("passive sessions never connect")) })
        }
    }
    let (in_tx, in_rx) = mpsc::channel(1);
    let (_routes, rx) = watch::channel(Some(routes(&["198.18.1.0/24"])));
    let task = driver::spawn(
        Session::new(SessionConfig {
            passive: true,
            ..cfg()
        }),
        NoConnector,
        Some(in_rx),
        rx,
    );
    wait_state(&task, State::Active).await;
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    in_tx.send(ours).await.unwrap();
    let mut peer = Framed::new(theirs, BgpCodec::new(WireOptions::four_octet()));
    establish(&mut peer, 90).await;
    let Message::Update(u) = recv(&mut peer).await else {
        panic!()
    };
    assert_eq!(u.nlri.len(), 1);
    assert_eq!(task.status.borrow().connect_attempts, 0);
}

#[tokio::test(start_paused = true)]
async fn end_of_rib_follows_the_table_after_reconnect_rfc4724() {
    let mut h = start(cfg(), routes(&["198.18.1.0/24"]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    drop(peer);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    let mut seen: Vec<Update> = Vec::new();
    while seen.len() < 3 {
        if let Message::Update(u) = recv(&mut peer).await {
            seen.push(u);
        }
    }
    assert_eq!(seen[0].nlri.len(), 1);
    assert!(seen[1].end_of_rib_family().is_some() && seen[2].end_of_rib_family().is_some());
}

/// Keeps the session up (one KEEPALIVE of ours) and asserts the next `span` brings only
/// KEEPALIVEs.
async fn only_keepalives_for(peer: &mut Peer, span: Duration) {
    peer.send(Message::Keepalive).await.unwrap();
    let quiet = tokio::time::timeout(span, async {
        loop {
            assert_eq!(recv(peer).await, Message::Keepalive);
        }
    });
    assert!(quiet.await.is_err());
}

/// After a speaker restart the route source may not be ready: an empty table and End-of-RIB
/// then would make a graceful-restart router flush every route it kept for us.
#[tokio::test(start_paused = true)]
async fn no_end_of_rib_until_the_route_source_is_ready_rfc4724_4() {
    let mut h = start_with(cfg(), None, 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    only_keepalives_for(&mut peer, Duration::from_secs(60)).await;

    h.routes.send(Some(routes(&["198.18.1.0/24"]))).unwrap();
    let mut seen: Vec<Update> = Vec::new();
    while seen.len() < 3 {
        if let Message::Update(u) = recv(&mut peer).await {
            seen.push(u);
        }
    }
    assert_eq!(seen[0].nlri, vec!["198.18.1.0/24".parse().unwrap()]);
    assert_eq!(seen[1].end_of_rib_family(), Some(Family::IPV4_UNICAST));
    assert_eq!(seen[2].end_of_rib_family(), Some(Family::IPV6_UNICAST));

    // The source going away again keeps what was announced.
    h.routes.send(None).unwrap();
    only_keepalives_for(&mut peer, Duration::from_secs(60)).await;
    let st = h.task.status.borrow().clone();
    assert_eq!(st.advertised.get("ipv4-unicast"), Some(&1));
    assert_eq!(st.state, State::Established);
}

#[tokio::test(start_paused = true)]
async fn set_connect_retry_reaches_a_running_session() {
    let hour = Duration::from_secs(3600);
    let cfg = SessionConfig {
        connect_retry_base: hour,
        connect_retry_max: hour,
        ..cfg()
    };
    let mut h = start(cfg, routes(&[]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 3).await;
    h.task
        .set_connect_retry(Duration::from_secs(1), Duration::from_secs(2));
    let t0 = tokio::time::Instant::now();
    // The peer stays silent: the hold timer (3 s) drops the session and the retry comes
    // within the new bounds, not after an hour.
    let _again = next_peer(&mut h).await;
    assert!(t0.elapsed() <= Duration::from_secs(5), "{:?}", t0.elapsed());
    drop(peer);
}

/// The speaker logs and raises Kubernetes Events from these transitions: a session that
/// reaches Established before its owner looks (a fast link, a busy machine) must still have
/// told a listener subscribed at spawn about every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_subscribed_at_spawn_hear_every_transition_of_a_fast_session() {
    use bgp_io::driver::SessionEvent;
    let (tx, mut peers) = mpsc::unbounded_channel();
    let (events, mut heard) = tokio::sync::broadcast::channel(256);
    let (_routes, rx) = watch::channel(Some(routes(&["198.18.1.0/24"])));
    let task = driver::spawn_with_events(
        Session::new(cfg()),
        DuplexConnector {
            peers: tx,
            capacity: 1 << 16,
        },
        None,
        rx,
        events,
    );
    let s = tokio::time::timeout(Duration::from_secs(10), peers.recv())
        .await
        .unwrap()
        .unwrap();
    let mut peer = Framed::new(s, BgpCodec::new(WireOptions::four_octet()));
    establish(&mut peer, 90).await;
    wait_state(&task, State::Established).await;
    let mut states = Vec::new();
    while states.last() != Some(&State::Established) {
        let ev = tokio::time::timeout(Duration::from_secs(10), heard.recv())
            .await
            .expect("every transition was sent")
            .unwrap();
        if let SessionEvent::StateChanged { to, .. } = ev {
            states.push(to);
        }
    }
    assert_eq!(
        states,
        [
            State::Connect,
            State::OpenSent,
            State::OpenConfirm,
            State::Established
        ]
    );
}
