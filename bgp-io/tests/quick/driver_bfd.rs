//! BFD and the BGP session, through the driver over `tokio::io::duplex` with paused time:
//! a failed path resets the session with Cease/BFD Down (RFC 9384) and BGP reconnects on its
//! own backoff, whether or not BFD ever comes back (RFC 5882 §3.2 allows holding BGP down only
//! when both sides agreed to strict mode, draft-ietf-idr-bgp-bfd-strict-mode).

use std::time::Duration;

use bgp_proto::iana::notification::cease;
use bgp_proto::message::Message;
use bgp_proto::message::capability::Capability;
use bgp_proto::session::{BfdInput, State};
use bgp_proto::{Asn, Family, HoldTime, Open, RouterId};
use futures::{SinkExt, StreamExt};

use crate::driver_harness;
use driver_harness::*;

async fn notification(peer: &mut Peer) -> (u8, u8) {
    loop {
        if let Message::Notification(n) = recv(peer).await {
            break (u8::from(n.code), n.subcode);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn bfd_timeout_without_bfd_up_lets_bgp_reestablish_rfc5882_3_2() {
    let mut h = start(cfg(), routes(&["198.18.1.0/24"]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    wait_state(&h.task, State::Established).await;
    h.task
        .bfd(BfdInput::Failed("control detection time expired".into()));
    assert_eq!(notification(&mut peer).await, (6, cease::BFD_DOWN));
    assert!(peer.next().await.is_none(), "closed after the NOTIFICATION");
    let st = wait_status(&h.task, |s| s.state != State::Established).await;
    assert_eq!(
        st.last_error.as_deref(),
        Some("BFD down: control detection time expired")
    );
    // No BFD Up is ever sent: BGP reconnects on its ConnectRetry backoff all the same.
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    wait_state(&h.task, State::Established).await;
    // A BFD that comes Up and fails again resets the session again.
    h.task.bfd(BfdInput::Up);
    h.task
        .bfd(BfdInput::Failed("neighbor signaled session down".into()));
    assert_eq!(notification(&mut peer).await, (6, cease::BFD_DOWN));
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    wait_state(&h.task, State::Established).await;
}

#[tokio::test(start_paused = true)]
async fn bfd_down_accepts_the_peers_connection_meanwhile_rfc5882_3_2() {
    // A passive session: after the BFD reset the peer's next connection is taken.
    let mut c = cfg();
    c.passive = true;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let (_routes, routes_rx) = tokio::sync::watch::channel(Some(routes(&["198.18.1.0/24"])));
    let (never, _unused) = tokio::sync::mpsc::unbounded_channel();
    let task = bgp_io::driver::spawn(
        bgp_proto::session::Session::new(c),
        DuplexConnector {
            peers: never,
            capacity: 1 << 16,
        },
        Some(rx),
        routes_rx,
    );
    let connect = |tx: tokio::sync::mpsc::Sender<tokio::io::DuplexStream>| async move {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        tx.send(ours).await.unwrap();
        tokio_util::codec::Framed::new(
            theirs,
            bgp_io::BgpCodec::new(bgp_proto::message::WireOptions::four_octet()),
        )
    };
    let mut peer = connect(tx.clone()).await;
    establish(&mut peer, 90).await;
    wait_state(&task, State::Established).await;
    task.bfd(BfdInput::Failed("control detection time expired".into()));
    assert_eq!(notification(&mut peer).await, (6, cease::BFD_DOWN));
    let mut peer = connect(tx).await;
    establish(&mut peer, 90).await;
    wait_state(&task, State::Established).await;
}

fn strict_open(hold: u16) -> Message {
    Message::Open(Open::new(
        Asn(65000),
        HoldTime::new(hold).unwrap(),
        RouterId::new(std::net::Ipv4Addr::new(192, 0, 2, 1)).unwrap(),
        vec![
            Capability::multiprotocol(Family::IPV4_UNICAST),
            Capability::BfdStrictMode,
        ],
    ))
}

#[tokio::test(start_paused = true)]
async fn strict_mode_waits_for_bfd_up_and_shows_the_wait_draft_bfd_strict_8_5() {
    let mut c = cfg();
    c.bfd_strict = true;
    let mut h = start(c, routes(&["198.18.1.0/24"]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    let Message::Open(ours) = recv(&mut peer).await else {
        panic!("no OPEN")
    };
    assert!(ours.capabilities().any(|c| *c == Capability::BfdStrictMode));
    peer.send(strict_open(90)).await.unwrap();
    let st = wait_status(&h.task, |s| s.waiting_for_bfd_since.is_some()).await;
    assert_eq!(
        (st.state, st.peer_bfd_strict),
        (State::OpenSent, Some(true))
    );
    // No KEEPALIVE while BFD is not Up, however long (short of the hold time).
    let early = tokio::time::timeout(Duration::from_secs(60), peer.next()).await;
    assert!(early.is_err(), "sent before BFD Up: {early:?}");
    h.task.bfd(BfdInput::Up);
    assert_eq!(recv(&mut peer).await, Message::Keepalive);
    peer.send(Message::Keepalive).await.unwrap();
    let st = wait_status(&h.task, |s| s.state == State::Established).await;
    assert_eq!(st.waiting_for_bfd_since, None);
}
