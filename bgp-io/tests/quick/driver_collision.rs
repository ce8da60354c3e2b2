//! Connection collision through the driver (RFC 4271 §6.8): an active session that also
//! accepts the peer's connections, with both connections open at once. Paused time.

use std::net::Ipv4Addr;
use std::time::Duration;

use bgp_io::BgpCodec;
use bgp_io::driver;
use bgp_proto::iana::notification::{CEASE, cease};
use bgp_proto::message::capability::Capability;
use bgp_proto::message::{Message, WireOptions};
use bgp_proto::session::{Session, State};
use bgp_proto::{Asn, Family, HoldTime, Open, RouterId};
use futures::{SinkExt, StreamExt};
use tokio::sync::{mpsc, watch};
use tokio_util::codec::Framed;

use crate::driver_harness;
use driver_harness::*;

/// The router's OPEN with identifier 192.0.2.`id` (ours is 192.0.2.10).
fn open_with_id(id: u8) -> Message {
    let caps = vec![
        Capability::multiprotocol(Family::IPV4_UNICAST),
        Capability::multiprotocol(Family::IPV6_UNICAST),
    ];
    Message::Open(Open::new(
        Asn(65000),
        HoldTime::new(90).unwrap(),
        RouterId::new(Ipv4Addr::new(192, 0, 2, id)).unwrap(),
        caps,
    ))
}

struct Both {
    task: driver::SessionTask,
    /// The router's end of the connection we opened.
    ours: Peer,
    /// The router's end of the connection it opened.
    theirs: Peer,
    /// Where further connections from the router arrive.
    incoming: mpsc::Sender<tokio::io::DuplexStream>,
    _routes: watch::Sender<Option<std::sync::Arc<bgp_proto::session::RouteSet>>>,
}

/// Our connect reaches the router and its connect reaches us; each side has sent its OPEN
/// on its own connection only.
async fn both_connect() -> Both {
    let (tx, mut peers) = mpsc::unbounded_channel();
    let (in_tx, in_rx) = mpsc::channel(1);
    let (routes, rx) = watch::channel(Some(routes(&["198.18.1.0/24"])));
    let task = driver::spawn(
        Session::new(cfg()),
        DuplexConnector {
            peers: tx,
            capacity: 1 << 16,
        },
        Some(in_rx),
        rx,
    );
    let s = tokio::time::timeout(Duration::from_secs(60), peers.recv())
        .await
        .unwrap()
        .unwrap();
    let mut ours = Framed::new(s, BgpCodec::new(WireOptions::four_octet()));
    assert!(matches!(recv(&mut ours).await, Message::Open(_)));
    wait_state(&task, State::OpenSent).await;
    let (near, far) = tokio::io::duplex(1 << 16);
    in_tx.send(near).await.unwrap();
    let theirs = Framed::new(far, BgpCodec::new(WireOptions::four_octet()));
    Both {
        task,
        ours,
        theirs,
        incoming: in_tx,
        _routes: routes,
    }
}

async fn closed(peer: &mut Peer) {
    // Beyond the 240 s a silent second connection is given.
    let end = tokio::time::timeout(Duration::from_secs(300), async {
        while let Some(Ok(_)) = peer.next().await {}
    });
    end.await.expect("connection closed");
}

#[tokio::test(start_paused = true)]
async fn collision_keeps_our_connection_when_our_identifier_is_higher_rfc4271_6_8() {
    let mut b = both_connect().await;
    b.theirs.send(open_with_id(1)).await.unwrap();
    let Message::Notification(n) = recv(&mut b.theirs).await else {
        panic!("Cease expected on the router's connection");
    };
    assert_eq!(
        (u8::from(n.code), n.subcode),
        (CEASE, cease::CONNECTION_COLLISION_RESOLUTION)
    );
    closed(&mut b.theirs).await;
    // Our connection goes on to Established and carries the routes.
    b.ours.send(open_with_id(1)).await.unwrap();
    b.ours.send(Message::Keepalive).await.unwrap();
    assert_eq!(recv(&mut b.ours).await, Message::Keepalive);
    wait_state(&b.task, State::Established).await;
    let Message::Update(u) = recv(&mut b.ours).await else {
        panic!("the table on our connection")
    };
    assert_eq!(u.nlri.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn collision_moves_to_the_peers_connection_when_its_identifier_is_higher_rfc4271_6_8() {
    let mut b = both_connect().await;
    b.theirs.send(open_with_id(20)).await.unwrap();
    // Ours is closed with Cease 7 ...
    let Message::Notification(n) = recv(&mut b.ours).await else {
        panic!("Cease expected on our connection");
    };
    assert_eq!(
        (u8::from(n.code), n.subcode),
        (CEASE, cease::CONNECTION_COLLISION_RESOLUTION)
    );
    closed(&mut b.ours).await;
    // ... and the router's connection gets our OPEN and KEEPALIVE, then the table.
    assert!(matches!(recv(&mut b.theirs).await, Message::Open(_)));
    assert_eq!(recv(&mut b.theirs).await, Message::Keepalive);
    b.theirs.send(Message::Keepalive).await.unwrap();
    wait_state(&b.task, State::Established).await;
    let Message::Update(u) = recv(&mut b.theirs).await else {
        panic!("the table on the router's connection")
    };
    assert_eq!(u.nlri.len(), 1);
    let st = b.task.status.borrow().clone();
    assert_eq!(st.flaps, 0, "a collision is not a flap");
}

#[tokio::test(start_paused = true)]
async fn second_connection_that_sends_nothing_is_closed_and_the_first_goes_on_rfc4271_8_2_2() {
    let mut b = both_connect().await;
    // The router's connection stays silent; ours completes meanwhile.
    b.ours.send(open_with_id(1)).await.unwrap();
    b.ours.send(Message::Keepalive).await.unwrap();
    assert_eq!(recv(&mut b.ours).await, Message::Keepalive);
    wait_state(&b.task, State::Established).await;
    // The router keeps our session alive while its own connection times out.
    let keepalives = async {
        loop {
            tokio::time::sleep(Duration::from_secs(30)).await;
            b.ours.send(Message::Keepalive).await.unwrap();
        }
    };
    tokio::select! {
        () = closed(&mut b.theirs) => {}
        () = keepalives => unreachable!(),
    }
    assert_eq!(b.task.status.borrow().state, State::Established);
}

#[tokio::test(start_paused = true)]
async fn second_connection_to_an_established_session_is_refused_with_cease_7_rfc4271_6_8() {
    let mut b = both_connect().await;
    b.ours.send(open_with_id(20)).await.unwrap();
    b.ours.send(Message::Keepalive).await.unwrap();
    assert_eq!(recv(&mut b.ours).await, Message::Keepalive);
    wait_state(&b.task, State::Established).await;
    // Higher identifier, but Established wins.
    b.theirs.send(open_with_id(20)).await.unwrap();
    let Message::Notification(n) = recv(&mut b.theirs).await else {
        panic!("Cease expected");
    };
    assert_eq!(n.subcode, cease::CONNECTION_COLLISION_RESOLUTION);
    b.ours.send(Message::Keepalive).await.unwrap();
    let Message::Update(_) = recv(&mut b.ours).await else {
        panic!("the session on our connection goes on")
    };
}

#[tokio::test(start_paused = true)]
async fn a_waiting_second_connection_is_dropped_when_a_newer_one_is_taken_rfc4271_6_8() {
    let mut b = both_connect().await;
    // Our connection fails; the router's first connection is still waiting for its OPEN.
    drop(b.ours);
    wait_state(&b.task, State::Idle).await;
    // A newer connection from the router is taken at once, and the older one is closed.
    let (near, far) = tokio::io::duplex(1 << 16);
    b.incoming.send(near).await.unwrap();
    let mut newer = Framed::new(far, BgpCodec::new(WireOptions::four_octet()));
    // At once, not after the 240 s a silent second connection is given.
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(_)) = b.theirs.next().await {}
    });
    gone.await.expect("the older connection closed at once");
    establish(&mut newer, 90).await;
    wait_state(&b.task, State::Established).await;
}
