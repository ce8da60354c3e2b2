//! The control port's single-hop checks run before a datagram is queued for its session
//! (RFC 5881 §5): what fails them never takes a place in the session's queue.

use std::net::{IpAddr, UdpSocket};
use std::time::Duration;

use bgp_io::bfd::driver::BfdTransport;
use bgp_io::bfd::udp::UdpTransport;

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A flood with TTL 64 from the peer's address, then one datagram with TTL 255: the session
/// receives the TTL 255 one first, and the drops are counted as `ttl`.
#[tokio::test]
async fn datagrams_without_ttl_255_are_dropped_before_the_session_queue_rfc5881_5() {
    let (local, peer) = ("127.0.0.101", "127.0.0.102");
    let mut t = UdpTransport::bind(Some(addr(local)), addr(peer)).unwrap();
    let count = |reason| {
        bgp_io::bfd::drops::snapshot()
            .into_iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| n)
    };
    let before = count("ttl");
    let from = UdpSocket::bind((peer, 0)).unwrap();
    from.set_ttl(64).unwrap();
    // More than the session's 64-deep queue holds.
    for _ in 0..100 {
        from.send_to(b"ttl 64", (local, 3784)).unwrap();
    }
    from.set_ttl(255).unwrap();
    from.send_to(b"ttl 255", (local, 3784)).unwrap();
    let d = tokio::time::timeout(Duration::from_secs(5), t.recv())
        .await
        .expect("the TTL 255 datagram")
        .unwrap();
    assert_eq!(d.payload, b"ttl 255");
    assert_eq!(d.ttl, Some(255));
    assert!(count("ttl") >= before + 100);
}
