//! The tokio session driver over `tokio::io::duplex` with paused time: the test plays the
//! router with a real codec on the other end.

use std::io;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::message::capability::Capability;
use bgp_proto::message::{Message, WireOptions};
use bgp_proto::session::driver::{self, Connector, SessionTask};
use bgp_proto::session::{RouteAttributes, RouteSet, Session, SessionConfig, State, StopReason};
use bgp_proto::{Asn, BgpCodec, ErrorCode, Family, HoldTime, Open, RouterId, Update};
use futures::{SinkExt, StreamExt};
use ipnet::IpNet;
use tokio::io::DuplexStream;
use tokio::sync::{mpsc, watch};
use tokio_util::codec::Framed;

type Peer = Framed<DuplexStream, BgpCodec>;

/// Each connect creates a duplex pair and hands the far end to the test.
struct DuplexConnector {
    peers: mpsc::UnboundedSender<DuplexStream>,
    capacity: usize,
}

impl Connector for DuplexConnector {
    type Stream = DuplexStream;
    fn connect(&mut self) -> Pin<Box<dyn Future<Output = io::Result<DuplexStream>> + Send>> {
        let (ours, theirs) = tokio::io::duplex(self.capacity);
        let _ = self.peers.send(theirs);
        Box::pin(async move { Ok(ours) })
    }
}

fn cfg() -> SessionConfig {
    SessionConfig::new(
        Asn(4_200_000_001),
        RouterId::new(Ipv4Addr::new(192, 0, 2, 10)).unwrap(),
        Asn(65000),
    )
}

fn routes(prefixes: &[&str]) -> Arc<RouteSet> {
    Arc::new(
        prefixes
            .iter()
            .map(|p| {
                let p: IpNet = p.parse().unwrap();
                let nh = match p {
                    IpNet::V4(_) => "192.0.2.10".parse().unwrap(),
                    IpNet::V6(_) => "2001:db8::10".parse().unwrap(),
                };
                (p, Arc::new(RouteAttributes::with_next_hop(nh)))
            })
            .collect(),
    )
}

struct Harness {
    task: SessionTask,
    peers: mpsc::UnboundedReceiver<DuplexStream>,
    routes: watch::Sender<Arc<RouteSet>>,
}

fn start(cfg: SessionConfig, initial: Arc<RouteSet>, capacity: usize) -> Harness {
    let (tx, peers) = mpsc::unbounded_channel();
    let (routes, rx) = watch::channel(initial);
    let task = driver::spawn(
        Session::new(cfg),
        DuplexConnector {
            peers: tx,
            capacity,
        },
        None,
        rx,
    );
    Harness {
        task,
        peers,
        routes,
    }
}

async fn next_peer(h: &mut Harness) -> Peer {
    let s = tokio::time::timeout(Duration::from_secs(600), h.peers.recv())
        .await
        .unwrap()
        .unwrap();
    Framed::new(s, BgpCodec::new(WireOptions::four_octet()))
}

async fn recv(peer: &mut Peer) -> Message {
    tokio::time::timeout(Duration::from_secs(600), peer.next())
        .await
        .expect("a message")
        .expect("open")
        .unwrap()
        .message
}

fn router_open(hold: u16) -> Message {
    let caps = vec![
        Capability::multiprotocol(Family::IPV4_UNICAST),
        Capability::multiprotocol(Family::IPV6_UNICAST),
        Capability::RouteRefresh,
    ];
    Message::Open(Open::new(
        Asn(65000),
        HoldTime::new(hold).unwrap(),
        RouterId::new(Ipv4Addr::new(192, 0, 2, 1)).unwrap(),
        caps,
    ))
}

/// Router side of the OPEN exchange; returns once our KEEPALIVE arrived.
async fn establish(peer: &mut Peer, hold: u16) {
    assert!(matches!(recv(peer).await, Message::Open(_)));
    peer.send(router_open(hold)).await.unwrap();
    peer.send(Message::Keepalive).await.unwrap();
    assert_eq!(recv(peer).await, Message::Keepalive);
}

async fn wait_state(task: &SessionTask, state: State) {
    let mut rx = task.status.clone();
    tokio::time::timeout(Duration::from_secs(600), rx.wait_for(|s| s.state == state))
        .await
        .unwrap()
        .unwrap();
}

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
    h.routes.send(routes(&["198.18.2.0/24"])).unwrap();
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
    let (_routes, rx) = watch::channel(routes(&["198.18.1.0/24"]));
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
