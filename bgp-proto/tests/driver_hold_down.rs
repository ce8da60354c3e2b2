//! BFD Down holds the BGP session down (RFC 5882 §3.2) until BFD is Up again: the driver's
//! hold_down/resume over `tokio::io::duplex` with paused time.

use std::time::Duration;

use bgp_proto::iana::notification::cease;
use bgp_proto::message::Message;
use bgp_proto::session::{State, StopReason};
use futures::StreamExt;

mod driver_harness;
use driver_harness::*;

#[tokio::test(start_paused = true)]
async fn bfd_down_sends_cease_bfd_down_and_stays_down_until_resumed_rfc9384() {
    let mut h = start(cfg(), routes(&["198.18.1.0/24"]), 1 << 16);
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    let hold = h.task.hold_control();
    hold.hold_down(StopReason::BfdDown("control detection time expired".into()));
    let n = loop {
        if let Message::Notification(n) = recv(&mut peer).await {
            break n;
        }
    };
    assert_eq!((u8::from(n.code), n.subcode), (6, cease::BFD_DOWN));
    assert!(peer.next().await.is_none(), "closed after the NOTIFICATION");
    wait_state(&h.task, State::Idle).await;
    assert_eq!(
        h.task.status.borrow().last_error.as_deref(),
        Some("BFD down: control detection time expired")
    );
    // Far past any ConnectRetry backoff: no new connection while held down.
    let again = tokio::time::timeout(Duration::from_secs(300), h.peers.recv()).await;
    assert!(again.is_err(), "no reconnect while BFD is down");
    assert!(!h.task.is_finished(), "the task waits, it does not end");
    hold.resume();
    let mut peer = next_peer(&mut h).await;
    establish(&mut peer, 90).await;
    wait_state(&h.task, State::Established).await;
}
