//! FRR's bfdd (10.3) replaces a peer's BFD session the moment BGP reaches Established: the
//! old session's last packet is Down with diag 3 and the old discriminator, then a new
//! session (a new discriminator) starts with Down/Your Discriminator 0, at the not-Up rate.
//! Debian's FRR here is 8.4, which does not, so a scripted peer replays that sequence
//! against the real driver and session (in-memory datagrams, paused time): the session
//! must not report a path failure, which would reset the fresh BGP session.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::time::Duration;

use bgp_io::bfd::driver::{self, BfdEvent, BfdTransport, Datagram};
use bgp_proto::bfd::{BfdSession, BfdSessionConfig, BfdState, ControlPacket, Diag};
use tokio::sync::{broadcast, mpsc};

const OURS: u32 = 0x0101;
const OLD: u32 = 0xA001;
const NEW: u32 = 0xB002;

struct Wire {
    to_peer: mpsc::UnboundedSender<Vec<u8>>,
    from_peer: mpsc::UnboundedReceiver<Datagram>,
}

impl BfdTransport for Wire {
    fn send<'a>(
        &'a mut self,
        packet: &'a [u8],
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'a>> {
        let _ = self.to_peer.send(packet.to_vec());
        Box::pin(async { Ok(()) })
    }

    fn recv(&mut self) -> Pin<Box<dyn Future<Output = io::Result<Datagram>> + Send + '_>> {
        Box::pin(async {
            match self.from_peer.recv().await {
                Some(d) => Ok(d),
                None => std::future::pending().await,
            }
        })
    }
}

fn peer_ip() -> IpAddr {
    "198.18.0.1".parse().unwrap()
}

/// What FRR sends: 100 ms × 3 once Up, 1 s while not Up (RFC 5880 §6.8.3).
fn frr(state: BfdState, mine: u32, yours: u32, diag: Diag) -> Datagram {
    let slow = state != BfdState::Up;
    let p = ControlPacket {
        diag,
        state,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discriminator: mine,
        your_discriminator: yours,
        desired_min_tx: if slow { 1_000_000 } else { 100_000 },
        required_min_rx: 100_000,
        required_min_echo_rx: 50_000,
        auth: None,
    };
    Datagram {
        payload: p.encode().unwrap().to_vec(),
        from: peer_ip(),
        ttl: Some(255),
    }
}

/// Our next packet in `state`, skipping others; bounded by (paused) time.
async fn ours_in(rx: &mut mpsc::UnboundedReceiver<Vec<u8>>, state: BfdState) -> ControlPacket {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let p = ControlPacket::decode(&rx.recv().await.unwrap()).unwrap();
            if p.state == state {
                return p;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {state:?} packet from us"))
}

#[tokio::test(start_paused = true)]
async fn peer_session_replaced_after_established_is_not_a_path_failure_rfc5880_6_8_6() {
    let (to_us, from_peer) = mpsc::unbounded_channel();
    let (to_peer, mut ours) = mpsc::unbounded_channel();
    let events = broadcast::channel(64).0;
    let mut ev = events.subscribe();
    let session = BfdSession::new(BfdSessionConfig {
        my_discriminator: OURS,
        desired_min_tx: Duration::from_millis(100),
        required_min_rx: Duration::from_millis(100),
        detect_mult: 3,
        jitter_seed: 5,
    });
    let task = driver::spawn(session, peer_ip(), Wire { to_peer, from_peer }, events);
    // The first session (FRR's, registered before it knew the interface) comes Up.
    to_us.send(frr(BfdState::Down, OLD, 0, Diag::None)).unwrap();
    assert_eq!(
        ours_in(&mut ours, BfdState::Init).await.your_discriminator,
        OLD
    );
    to_us
        .send(frr(BfdState::Up, OLD, OURS, Diag::None))
        .unwrap();
    ours_in(&mut ours, BfdState::Up).await;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        to_us
            .send(frr(BfdState::Up, OLD, OURS, Diag::None))
            .unwrap();
    }
    assert_eq!(task.status.borrow().state, BfdState::Up);
    while ev.try_recv().is_ok() {}
    // BGP Established: `session-delete` (the old session's last packet: Down, diag 3, Your
    // Discriminator zeroed) ...
    to_us
        .send(frr(
            BfdState::Down,
            OLD,
            0,
            Diag::NeighborSignaledSessionDown,
        ))
        .unwrap();
    // ... then `session-new`: its first packet comes at the not-Up rate, 0.75-1 s later.
    tokio::time::sleep(Duration::from_millis(950)).await;
    to_us.send(frr(BfdState::Down, NEW, 0, Diag::None)).unwrap();
    assert_eq!(
        ours_in(&mut ours, BfdState::Init).await.your_discriminator,
        NEW
    );
    to_us
        .send(frr(BfdState::Up, NEW, OURS, Diag::None))
        .unwrap();
    let up = tokio::time::timeout(Duration::from_secs(5), async {
        while task.status.borrow().state != BfdState::Up {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(up.is_ok(), "not Up with the new session");
    // Past the grace: nothing comes late either.
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        to_us
            .send(frr(BfdState::Up, NEW, OURS, Diag::None))
            .unwrap();
    }
    let mut seen = Vec::new();
    while let Ok(e) = ev.try_recv() {
        seen.push(e);
    }
    assert!(
        !seen.iter().any(|e| matches!(
            e,
            BfdEvent::StateChanged {
                from: BfdState::Up,
                ..
            }
        )),
        "a path failure reported to BGP: {seen:?}"
    );
    assert!(
        seen.contains(&BfdEvent::PeerReplaced { old: OLD, new: NEW }),
        "{seen:?}"
    );
}
