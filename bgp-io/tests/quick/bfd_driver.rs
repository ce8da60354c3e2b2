//! The BFD driver over in-memory datagram channels with paused time: handshake, detection
//! of a cut path, the single-hop TTL and source checks, and AdminDown on a planned stop.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bgp_io::bfd::driver::{self, BfdEvent, BfdTask, BfdTransport, Datagram, StopMode};
use bgp_proto::bfd::{BfdSession, BfdSessionConfig, BfdState, Diag};
use tokio::sync::{broadcast, mpsc};

struct Chan {
    me: IpAddr,
    ttl: u8,
    /// Swappable, so a restarted peer process can take over the far end.
    tx: Arc<Mutex<mpsc::UnboundedSender<Datagram>>>,
    rx: mpsc::UnboundedReceiver<Datagram>,
    cut: Arc<AtomicBool>,
}

impl BfdTransport for Chan {
    fn send<'a>(
        &'a mut self,
        packet: &'a [u8],
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'a>> {
        if !self.cut.load(Ordering::SeqCst) {
            let _ = self.tx.lock().unwrap().send(Datagram {
                payload: packet.to_vec(),
                from: self.me,
                ttl: Some(self.ttl),
            });
        }
        Box::pin(async { Ok(()) })
    }

    fn recv(&mut self) -> Pin<Box<dyn Future<Output = io::Result<Datagram>> + Send + '_>> {
        Box::pin(async {
            match self.rx.recv().await {
                Some(d) => Ok(d),
                None => std::future::pending().await,
            }
        })
    }
}

fn shared(tx: mpsc::UnboundedSender<Datagram>) -> Arc<Mutex<mpsc::UnboundedSender<Datagram>>> {
    Arc::new(Mutex::new(tx))
}

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn session(disc: u32) -> BfdSession {
    BfdSession::new(BfdSessionConfig {
        my_discriminator: disc,
        desired_min_tx: Duration::from_millis(100),
        required_min_rx: Duration::from_millis(100),
        detect_mult: 3,
        jitter_seed: u64::from(disc),
    })
}

struct Pair {
    a: BfdTask,
    b: BfdTask,
    a_events: broadcast::Receiver<BfdEvent>,
    b_events: broadcast::Receiver<BfdEvent>,
    cut: Arc<AtomicBool>,
}

/// `a` sends with `a_ttl`; `b` always with 255.
fn pair(a_ttl: u8) -> Pair {
    let (to_b, from_a) = mpsc::unbounded_channel();
    let (to_a, from_b) = mpsc::unbounded_channel();
    let cut = Arc::new(AtomicBool::new(false));
    let (a_ip, b_ip) = (addr("198.18.0.1"), addr("198.18.0.2"));
    let ea = broadcast::channel(64).0;
    let eb = broadcast::channel(64).0;
    let (a_events, b_events) = (ea.subscribe(), eb.subscribe());
    let a = driver::spawn(
        session(1),
        b_ip,
        Chan {
            me: a_ip,
            ttl: a_ttl,
            tx: shared(to_b),
            rx: from_b,
            cut: Arc::clone(&cut),
        },
        ea,
    );
    let b = driver::spawn(
        session(2),
        a_ip,
        Chan {
            me: b_ip,
            ttl: 255,
            tx: shared(to_a),
            rx: from_a,
            cut: Arc::clone(&cut),
        },
        eb,
    );
    Pair {
        a,
        b,
        a_events,
        b_events,
        cut,
    }
}

/// Next state change, skipping other events; bounded by (paused) time.
async fn next_change(
    ev: &mut broadcast::Receiver<BfdEvent>,
) -> (BfdState, BfdState, Diag, BfdState) {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let BfdEvent::StateChanged {
                from,
                to,
                diag,
                remote_state,
            } = ev.recv().await.unwrap()
            {
                return (from, to, diag, remote_state);
            }
        }
    })
    .await
    .expect("a state change within 30 s")
}

async fn wait_up(ev: &mut broadcast::Receiver<BfdEvent>) {
    loop {
        if next_change(ev).await.1 == BfdState::Up {
            return;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn three_way_handshake_brings_both_up_rfc5880_6_2() {
    let mut p = pair(255);
    wait_up(&mut p.a_events).await;
    wait_up(&mut p.b_events).await;
    assert_eq!(p.a.status.borrow().remote_discriminator, 2);
    assert_eq!(p.b.status.borrow().remote_discriminator, 1);
}

#[tokio::test(start_paused = true)]
async fn cut_path_detected_within_detection_time_rfc5880_6_8_4() {
    let mut p = pair(255);
    wait_up(&mut p.a_events).await;
    wait_up(&mut p.b_events).await;
    // Let the poll sequence settle the fast interval on both sides.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let detect = p.a.status.borrow().detection_time.unwrap();
    assert_eq!(detect, Duration::from_millis(300));
    p.cut.store(true, Ordering::SeqCst);
    let cut_at = tokio::time::Instant::now();
    let change = next_change(&mut p.a_events).await;
    assert_eq!(
        change,
        (
            BfdState::Up,
            BfdState::Down,
            Diag::ControlDetectionTimeExpired,
            BfdState::Down
        )
    );
    // The last packet arrived at most one (jittered) interval before the cut.
    assert!(cut_at.elapsed() <= detect, "{:?}", cut_at.elapsed());
}

#[tokio::test(start_paused = true)]
async fn packets_with_ttl_below_255_are_dropped_rfc5881_5() {
    let mut p = pair(254);
    // b hears nothing valid from a: it never leaves Down, and says why.
    let dropped = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let BfdEvent::Dropped { kind, .. } = p.b_events.recv().await.unwrap() {
                return kind;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(dropped, "ttl");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(p.b.status.borrow().state, BfdState::Down);
}

#[tokio::test(start_paused = true)]
async fn planned_stop_sends_admin_down_and_peer_sees_it_rfc5880_6_8_16() {
    let mut p = pair(255);
    wait_up(&mut p.a_events).await;
    wait_up(&mut p.b_events).await;
    p.a.stop(StopMode::AdminDown);
    tokio::time::timeout(Duration::from_secs(5), p.a.wait())
        .await
        .unwrap();
    assert_eq!(
        next_change(&mut p.b_events).await,
        (
            BfdState::Up,
            BfdState::Down,
            Diag::NeighborSignaledSessionDown,
            BfdState::AdminDown
        )
    );
}

#[tokio::test(start_paused = true)]
async fn packets_from_another_address_are_dropped_rfc5881_4() {
    let ev = broadcast::channel(16).0;
    let mut events = ev.subscribe();
    // Feed a stranger's packet straight into a's receive side.
    let (feed, a_rx) = mpsc::unbounded_channel();
    let (a_tx, _sink) = mpsc::unbounded_channel();
    let a = driver::spawn(
        session(1),
        addr("198.18.0.2"),
        Chan {
            me: addr("198.18.0.1"),
            ttl: 255,
            tx: shared(a_tx),
            rx: a_rx,
            cut: Arc::new(AtomicBool::new(false)),
        },
        ev,
    );
    let mut pkt = session(9).handle(bgp_proto::bfd::BfdInput::Start);
    let bytes = match pkt.remove(0) {
        bgp_proto::bfd::BfdOutput::Send(p) => p.encode().unwrap(),
        other => panic!("{other:?}"),
    };
    feed.send(Datagram {
        payload: bytes.to_vec(),
        from: addr("198.18.0.3"),
        ttl: Some(255),
    })
    .unwrap();
    let kind = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let BfdEvent::Dropped { kind, .. } = events.recv().await.unwrap() {
                return kind;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(kind, "unknown_source");
    assert_eq!(a.status.borrow().remote_discriminator, 0);
}

/// Real sockets on loopback (two addresses, each owning its control port): TTL 255 is
/// set on send and read back from each datagram on receive.
#[tokio::test]
async fn udp_transport_on_loopback_comes_up_with_ttl_255_rfc5881_5() {
    use bgp_io::bfd::udp::UdpTransport;
    let (a_ip, b_ip) = (addr("127.0.0.61"), addr("127.0.0.62"));
    let ta = UdpTransport::bind(Some(a_ip), b_ip).unwrap();
    let tb = UdpTransport::bind(Some(b_ip), a_ip).unwrap();
    assert!((49152..=65535).contains(&ta.source_port().unwrap()));
    let ea = broadcast::channel(64).0;
    let mut a_events = ea.subscribe();
    let a = driver::spawn(session(1), b_ip, ta, ea);
    let b = driver::spawn(session(2), a_ip, tb, broadcast::channel(64).0);
    wait_up(&mut a_events).await;
    assert_eq!(a.status.borrow().remote_discriminator, 2);
    b.stop(StopMode::AdminDown);
    b.wait().await;
    let change = next_change(&mut a_events).await;
    assert_eq!((change.1, change.3), (BfdState::Down, BfdState::AdminDown));
}

#[tokio::test]
async fn udp_transport_sends_with_dscp_cs6_network_control_rfc4594() {
    use bgp_io::bfd::udp::UdpTransport;
    for (local, peer) in [("127.0.0.63", "127.0.0.64"), ("::1", "::1")] {
        let t = UdpTransport::bind(Some(addr(local)), addr(peer)).unwrap();
        assert_eq!(t.traffic_class().unwrap(), 0xC0, "{local}");
    }
}

/// A planned restart: the old session stretches the peer's detection time and falls
/// silent; the next process's resuming session continues it. The peer never leaves Up.
#[tokio::test(start_paused = true)]
async fn handover_keeps_the_peer_up_across_a_restart() {
    let (to_b, from_a) = mpsc::unbounded_channel();
    let (to_a, from_b) = mpsc::unbounded_channel();
    let b_to_a = shared(to_a);
    let (a_ip, b_ip) = (addr("198.18.0.1"), addr("198.18.0.2"));
    let cut = Arc::new(AtomicBool::new(false));
    let (ea, eb) = (broadcast::channel(64).0, broadcast::channel(64).0);
    let (mut a_events, mut b_events) = (ea.subscribe(), eb.subscribe());
    let to_b = shared(to_b);
    let a = driver::spawn(
        session(1),
        b_ip,
        Chan {
            me: a_ip,
            ttl: 255,
            tx: Arc::clone(&to_b),
            rx: from_b,
            cut: Arc::clone(&cut),
        },
        ea,
    );
    let b = driver::spawn(
        session(2),
        a_ip,
        Chan {
            me: b_ip,
            ttl: 255,
            tx: Arc::clone(&b_to_a),
            rx: from_a,
            cut: Arc::clone(&cut),
        },
        eb,
    );
    wait_up(&mut a_events).await;
    wait_up(&mut b_events).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    a.stop(StopMode::Handover(Duration::from_secs(120)));
    tokio::time::timeout(Duration::from_secs(5), a.wait())
        .await
        .unwrap();
    let detect = b.status.borrow().detection_time.unwrap();
    assert!(detect >= Duration::from_secs(119), "{detect:?}");
    // The restart: 10 s of silence, far past the 300 ms detection time before handover.
    tokio::time::sleep(Duration::from_secs(10)).await;
    // The next process: a new receiver for b's packets, a new discriminator of its own.
    let (to_a2, from_b2) = mpsc::unbounded_channel();
    *b_to_a.lock().unwrap() = to_a2;
    let ea2 = broadcast::channel(64).0;
    let mut a2_events = ea2.subscribe();
    let _a2 = driver::spawn(
        BfdSession::resuming(
            BfdSessionConfig {
                my_discriminator: 99,
                desired_min_tx: Duration::from_millis(100),
                required_min_rx: Duration::from_millis(100),
                detect_mult: 3,
                jitter_seed: 99,
            },
            Duration::from_secs(120),
        ),
        b_ip,
        Chan {
            me: a_ip,
            ttl: 255,
            tx: to_b,
            rx: from_b2,
            cut,
        },
        ea2,
    );
    wait_up(&mut a2_events).await;
    // Back to the fast detection time once the new process's packets arrive.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        b.status.borrow().detection_time,
        Some(Duration::from_millis(300))
    );
    assert_eq!(
        b.status.borrow().remote_discriminator,
        1,
        "the old discriminator lives on"
    );
    while let Ok(ev) = b_events.try_recv() {
        assert!(
            !matches!(ev, BfdEvent::StateChanged { .. }),
            "b left Up: {ev:?}"
        );
    }
    assert_eq!(b.status.borrow().state, BfdState::Up);
}

/// Two peers behind one local address (a node with two ToRs): one control port, each
/// datagram to the session of its source.
#[tokio::test]
async fn two_sessions_share_one_local_control_port_rfc5881_4() {
    use bgp_io::bfd::udp::UdpTransport;
    let node = addr("127.0.0.71");
    let (tor1, tor2) = (addr("127.0.0.72"), addr("127.0.0.73"));
    let mut events = Vec::new();
    let mut tasks = Vec::new();
    for (i, (local, peer)) in [(node, tor1), (node, tor2), (tor1, node), (tor2, node)]
        .into_iter()
        .enumerate()
    {
        let t = UdpTransport::bind(Some(local), peer).unwrap();
        let ev = broadcast::channel(64).0;
        events.push(ev.subscribe());
        tasks.push(driver::spawn(session(10 + i as u32), peer, t, ev));
    }
    assert!(
        UdpTransport::bind(Some(node), tor1).is_err(),
        "one session per peer"
    );
    for ev in &mut events {
        wait_up(ev).await;
    }
    assert_eq!(tasks[0].status.borrow().remote_discriminator, 12);
    assert_eq!(tasks[1].status.borrow().remote_discriminator, 13);
}

/// The far end of a loopback session as a plain socket on the peer's control port, which
/// records the source port of every packet it receives.
struct PortSpy {
    sock: tokio::net::UdpSocket,
    peer: IpAddr,
    ports: Arc<Mutex<Vec<u16>>>,
}

impl BfdTransport for PortSpy {
    fn send<'a>(
        &'a mut self,
        packet: &'a [u8],
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'a>> {
        Box::pin(async move {
            let to = std::net::SocketAddr::new(self.peer, 3784);
            self.sock.send_to(packet, to).await.map(|_| ())
        })
    }

    fn recv(&mut self) -> Pin<Box<dyn Future<Output = io::Result<Datagram>> + Send + '_>> {
        Box::pin(async move {
            let mut buf = [0u8; 128];
            let (n, from) = self.sock.recv_from(&mut buf).await?;
            self.ports.lock().unwrap().push(from.port());
            Ok(Datagram {
                payload: buf[..n].to_vec(),
                from: from.ip(),
                // Loopback; the TTL check is the other tests' subject.
                ttl: Some(255),
            })
        })
    }
}

/// A planned restart over real sockets: the next process sends from the source port the
/// peer knows (RFC 5881 §4: one port for the life of a session), and the peer stays Up.
#[tokio::test]
async fn handover_keeps_the_source_port_rfc5881_4() {
    use bgp_io::bfd::udp::{SourcePort, UdpTransport, stable_source_port};
    let (a_ip, b_ip) = (addr("127.0.0.91"), addr("127.0.0.92"));
    let sock = std::net::UdpSocket::bind((b_ip, 3784)).unwrap();
    sock.set_ttl(255).unwrap();
    sock.set_nonblocking(true).unwrap();
    let ports = Arc::new(Mutex::new(Vec::new()));
    let spy = PortSpy {
        sock: tokio::net::UdpSocket::from_std(sock).unwrap(),
        peer: a_ip,
        ports: Arc::clone(&ports),
    };
    let eb = broadcast::channel(64).0;
    let mut b_events = eb.subscribe();
    let b = driver::spawn(session(2), a_ip, spy, eb);
    let port = stable_source_port("a>b");
    let ta = UdpTransport::bind_with(Some(a_ip), b_ip, 0, SourcePort::Prefer(port)).unwrap();
    assert_eq!(ta.source_port().unwrap(), port);
    let a = driver::spawn(session(1), b_ip, ta, broadcast::channel(64).0);
    wait_up(&mut b_events).await;
    a.stop(StopMode::Handover(Duration::from_secs(120)));
    a.wait().await;
    // The next process: the same port or nothing.
    let ta2 = UdpTransport::bind_with(Some(a_ip), b_ip, 0, SourcePort::Exactly(port)).unwrap();
    let ea2 = broadcast::channel(64).0;
    let mut a2_events = ea2.subscribe();
    let resumed = BfdSession::resuming(
        BfdSessionConfig {
            my_discriminator: 99,
            desired_min_tx: Duration::from_millis(100),
            required_min_rx: Duration::from_millis(100),
            detect_mult: 3,
            jitter_seed: 99,
        },
        Duration::from_secs(120),
    );
    let before = ports.lock().unwrap().len();
    let _a2 = driver::spawn(resumed, b_ip, ta2, ea2);
    wait_up(&mut a2_events).await;
    // Bounded: the resumed session polls back at 100 ms; wait for its packets to arrive.
    tokio::time::timeout(Duration::from_secs(10), async {
        while ports.lock().unwrap().len() < before + 3 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("packets from the resumed session");
    let seen = ports.lock().unwrap().clone();
    assert!(seen.iter().all(|p| *p == port), "source ports {seen:?}");
    assert_eq!(b.status.borrow().state, BfdState::Up);
    while let Ok(ev) = b_events.try_recv() {
        assert!(
            !matches!(ev, BfdEvent::StateChanged { .. }),
            "the peer left Up: {ev:?}"
        );
    }
}

/// The stretched detection time is the restart window, not 255 × the transmit interval:
/// 10 s at 100 ms is 100 × 100 ms (it was 255 × 100 ms = 25.5 s).
#[tokio::test(start_paused = true)]
async fn handover_detection_time_is_the_window_rfc5882_4_3() {
    let mut p = pair(255);
    wait_up(&mut p.a_events).await;
    wait_up(&mut p.b_events).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    p.a.stop(StopMode::Handover(Duration::from_secs(10)));
    tokio::time::timeout(Duration::from_secs(5), p.a.wait())
        .await
        .unwrap();
    assert_eq!(
        p.b.status.borrow().detection_time,
        Some(Duration::from_secs(10))
    );
}

/// A counting far end: how many AdminDown packets arrive.
#[tokio::test(start_paused = true)]
async fn admin_down_lasts_a_detection_time_rfc5880_6_8_16() {
    let (to_b, mut from_a) = mpsc::unbounded_channel();
    let (to_a, from_b) = mpsc::unbounded_channel();
    let (a_ip, b_ip) = (addr("198.18.0.1"), addr("198.18.0.2"));
    let chan = |me, tx, rx| Chan {
        me,
        ttl: 255,
        tx: shared(tx),
        rx,
        cut: Arc::new(AtomicBool::new(false)),
    };
    let cfg = |disc| BfdSessionConfig {
        my_discriminator: disc,
        desired_min_tx: Duration::from_millis(100),
        required_min_rx: Duration::from_millis(100),
        detect_mult: 10,
        jitter_seed: u64::from(disc),
    };
    let ea = broadcast::channel(64).0;
    let a = driver::spawn(BfdSession::new(cfg(1)), b_ip, chan(a_ip, to_b, from_b), ea);
    // b: a plain session fed by hand, so every packet from a can be inspected.
    let mut b = BfdSession::new(cfg(2));
    let mut admin_down = 0;
    let reply = |outs: Vec<bgp_proto::bfd::BfdOutput>| {
        for o in outs {
            if let bgp_proto::bfd::BfdOutput::Send(p) = o {
                let _ = to_a.send(Datagram {
                    payload: p.encode().unwrap().to_vec(),
                    from: b_ip,
                    ttl: Some(255),
                });
            }
        }
    };
    reply(b.handle(bgp_proto::bfd::BfdInput::Start));
    let mut stopped = false;
    let result = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            tokio::select! {
                d = from_a.recv() => {
                    let Some(d) = d else { return };
                    let p = bgp_proto::bfd::ControlPacket::decode(&d.payload).unwrap();
                    if p.state == BfdState::AdminDown {
                        admin_down += 1;
                    }
                    reply(b.handle(bgp_proto::bfd::BfdInput::Received(p)));
                }
                // b transmits too, so a stays Up and its interval settles at 100 ms.
                _ = tokio::time::sleep(Duration::from_millis(100)) => {
                    reply(b.handle(bgp_proto::bfd::BfdInput::TimerFired(
                        bgp_proto::bfd::BfdTimer::Transmit,
                    )));
                }
            }
            if !stopped
                && a.status.borrow().state == BfdState::Up
                && a.status.borrow().tx_interval == Duration::from_millis(100)
            {
                stopped = true;
                a.stop(StopMode::AdminDown);
            }
            if a.is_finished() && stopped {
                // Drain what is queued.
                while let Ok(d) = from_a.try_recv() {
                    let p = bgp_proto::bfd::ControlPacket::decode(&d.payload).unwrap();
                    if p.state == BfdState::AdminDown {
                        admin_down += 1;
                    }
                }
                return;
            }
        }
    })
    .await;
    result.expect("a stopped within 60 s");
    // 10 × 100 ms: one packet at the stop and one per interval for a detection time.
    assert_eq!(admin_down, 11);
}

/// A link-local peer is only an address on one interface (RFC 4007): without the interface
/// the session cannot tell its packets from another uplink's neighbour with the same address.
#[tokio::test]
async fn link_local_peer_needs_its_interface_rfc4007_6() {
    use bgp_io::bfd::udp::{SourcePort, UdpTransport};
    let err = UdpTransport::bind_with(None, addr("fe80::1"), 0, SourcePort::Any).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("needs its interface"), "{err}");
}
