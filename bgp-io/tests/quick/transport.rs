//! BGP TCP transport over loopback: source address, peer filtering, TCP MD5 (RFC 2385),
//! GTSM (RFC 5082) and multihop TTL. Needs root for MD5/MINTTL (CAP_NET_ADMIN is not
//! required, but MD5 keys need CONFIG_TCP_MD5SIG); binds only 127.0.0.0/8 and ::1.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU8;
use std::time::Duration;

use bgp_io::transport::{
    Accepted, BgpListener, CS6_TOS, ConnectOptions, ListenOptions, Md5Key, PassivePeer,
    TransportError, TtlConfigError, TtlSecurity, connect, min_ttl, traffic_class, ttl,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Bound for things that should happen.
const WAIT: Duration = Duration::from_secs(5);
/// Bound for a handshake that should not complete (an expected non-event).
const NO_HANDSHAKE: Duration = Duration::from_millis(1500);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn peer(addr: &str, md5: Option<&str>, ttl: TtlSecurity) -> PassivePeer {
    PassivePeer {
        addr: ip(addr),
        md5: md5.map(|k| Md5Key::new(k).unwrap()),
        ttl,
    }
}

fn listen(local: &str, peers: Vec<PassivePeer>) -> BgpListener {
    BgpListener::bind(ListenOptions::new(SocketAddr::new(ip(local), 0), peers)).unwrap()
}

fn opts(source: Option<&str>, md5: Option<&str>, ttl: TtlSecurity) -> ConnectOptions {
    ConnectOptions {
        source: source.map(ip),
        md5: md5.map(|k| Md5Key::new(k).unwrap()),
        ttl,
        connect_timeout: NO_HANDSHAKE,
    }
}

async fn accept(listener: &BgpListener) -> Accepted {
    timeout(WAIT, listener.accept()).await.unwrap().unwrap()
}

async fn accept_peer(listener: &BgpListener) -> (TcpStream, IpAddr, SocketAddr) {
    match accept(listener).await {
        Accepted::Peer {
            stream,
            peer,
            remote,
        } => (stream, peer, remote),
        other => panic!("expected a configured peer, got {other:?}"),
    }
}

/// Nothing waits in the accept queue (polls once, no waiting).
async fn assert_nothing_accepted(listener: &BgpListener) {
    if let Ok(got) = timeout(Duration::ZERO, listener.accept()).await {
        panic!("unexpected connection: {got:?}");
    }
}

async fn assert_bytes_flow(a: &mut TcpStream, b: &mut TcpStream) {
    let mut buf = [0u8; 5];
    timeout(WAIT, a.write_all(b"hello")).await.unwrap().unwrap();
    timeout(WAIT, b.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"hello");
    timeout(WAIT, b.write_all(b"world")).await.unwrap().unwrap();
    timeout(WAIT, a.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"world");
}

/// A `TcpExt` counter from /proc/net/netstat (per network namespace). Tests only assert
/// that it grew, which parallel tests cannot break; it shows *why* the kernel dropped.
fn tcp_ext(name: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap();
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (keys, values) = (lines.next().unwrap(), lines.next().unwrap());
    keys.split_whitespace()
        .zip(values.split_whitespace())
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or_else(|| panic!("no TcpExt counter {name}"))
}

fn hops(n: u8) -> TtlSecurity {
    TtlSecurity::Ttl(NonZeroU8::new(n).unwrap())
}

#[tokio::test]
async fn active_connect_carries_bytes_with_nodelay() {
    let listener = listen("127.0.0.1", vec![peer("127.0.0.1", None, hops(1))]);
    let mut client = connect(listener.local_addr(), &opts(None, None, hops(1)))
        .await
        .unwrap();
    let (mut server, matched, _) = accept_peer(&listener).await;
    assert_eq!(matched, ip("127.0.0.1"));
    assert!(client.nodelay().unwrap() && server.nodelay().unwrap());
    assert_bytes_flow(&mut client, &mut server).await;
}

#[tokio::test]
async fn source_address_is_bound_before_connect() {
    let listener = listen("127.0.0.1", vec![peer("127.0.0.2", None, hops(1))]);
    let mut client = connect(
        listener.local_addr(),
        &opts(Some("127.0.0.2"), None, hops(1)),
    )
    .await
    .unwrap();
    assert_eq!(client.local_addr().unwrap().ip(), ip("127.0.0.2"));
    let (mut server, matched, remote) = accept_peer(&listener).await;
    assert_eq!((matched, remote.ip()), (ip("127.0.0.2"), ip("127.0.0.2")));
    assert_bytes_flow(&mut client, &mut server).await;
}

#[tokio::test]
async fn source_address_of_the_wrong_family_is_rejected() {
    let err = connect(
        "127.0.0.1:179".parse().unwrap(),
        &opts(Some("::1"), None, hops(1)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, TransportError::FamilyMismatch { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn listener_refuses_and_reports_unconfigured_address() {
    let listener = listen("127.0.0.1", vec![peer("127.0.0.2", None, hops(1))]);
    let mut stranger = connect(
        listener.local_addr(),
        &opts(Some("127.0.0.3"), None, hops(1)),
    )
    .await
    .unwrap();
    match accept(&listener).await {
        Accepted::Refused { from } => assert_eq!(from.ip(), ip("127.0.0.3")),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // The stranger sees the connection closed (reset), not a BGP speaker.
    let mut buf = [0u8; 1];
    match timeout(WAIT, stranger.read(&mut buf)).await.unwrap() {
        Ok(0) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
        Ok(n) => panic!("read {n} bytes from a refused connection"),
    }
    // The configured peer is still welcome afterwards.
    connect(
        listener.local_addr(),
        &opts(Some("127.0.0.2"), None, hops(1)),
    )
    .await
    .unwrap();
    let (_, matched, _) = accept_peer(&listener).await;
    assert_eq!(matched, ip("127.0.0.2"));
}

#[tokio::test]
async fn connect_to_closed_port_is_reported_as_refused() {
    // Take a free port, then close it: nothing listens there.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = connect(addr, &opts(None, None, hops(1))).await.unwrap_err();
    assert!(matches!(err, TransportError::Refused { .. }), "{err}");
    assert_eq!(err.to_string(), format!("connection to {addr} refused"));
}

#[tokio::test]
async fn md5_matching_keys_connect_and_exchange_bytes_rfc2385() {
    let listener = listen(
        "127.0.0.1",
        vec![peer("127.0.0.2", Some("s3cret"), hops(1))],
    );
    let mut client = connect(
        listener.local_addr(),
        &opts(Some("127.0.0.2"), Some("s3cret"), hops(1)),
    )
    .await
    .unwrap();
    let (mut server, _, _) = accept_peer(&listener).await;
    assert_bytes_flow(&mut client, &mut server).await;
}

#[tokio::test]
async fn md5_mismatch_is_reported_as_check_the_password_rfc2385() {
    let listener = listen("127.0.0.1", vec![peer("127.0.0.2", Some("right"), hops(1))]);
    let addr = listener.local_addr();
    let failures = tcp_ext("TCPMD5Failure");
    let err = connect(addr, &opts(Some("127.0.0.2"), Some("wrong"), hops(1)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, TransportError::TimeoutWithMd5 { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("no response from {addr}; check the MD5 password")),
        "{err}"
    );
    assert_nothing_accepted(&listener).await;
    assert!(
        tcp_ext("TCPMD5Failure") > failures,
        "kernel saw no bad signature"
    );
}

#[tokio::test]
async fn md5_key_only_on_our_side_is_reported_as_check_the_password_rfc2385() {
    // The listener has no key for us, so the kernel drops our signed SYN.
    let listener = listen("127.0.0.1", vec![peer("127.0.0.2", None, hops(1))]);
    let err = connect(
        listener.local_addr(),
        &opts(Some("127.0.0.2"), Some("s3cret"), hops(1)),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("check the MD5 password"), "{err}");
    assert_nothing_accepted(&listener).await;
}

#[tokio::test]
async fn md5_required_by_listener_drops_unsigned_connect_rfc2385() {
    let listener = listen(
        "127.0.0.1",
        vec![peer("127.0.0.2", Some("s3cret"), hops(1))],
    );
    let err = connect(
        listener.local_addr(),
        &opts(Some("127.0.0.2"), None, hops(1)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, TransportError::Timeout { .. }), "{err}");
    assert_nothing_accepted(&listener).await;
}

#[tokio::test]
async fn md5_over_ipv6_matching_and_mismatched_rfc2385() {
    let listener = listen("::1", vec![peer("::1", Some("v6-key"), hops(1))]);
    let addr = listener.local_addr();
    let mut client = connect(addr, &opts(Some("::1"), Some("v6-key"), hops(1)))
        .await
        .unwrap();
    let (mut server, matched, _) = accept_peer(&listener).await;
    assert_eq!(matched, ip("::1"));
    assert_bytes_flow(&mut client, &mut server).await;

    let err = connect(addr, &opts(Some("::1"), Some("not-it"), hops(1)))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("no response from {addr}; check the MD5 password")),
        "{err}"
    );
    assert_nothing_accepted(&listener).await;
}

#[tokio::test]
async fn md5_for_ipv4_peer_on_dual_stack_listener_rfc2385() {
    // An IPv6 socket bound to a v4-mapped address serves IPv4; the key is stored v4-mapped.
    let listener = listen(
        "::ffff:127.0.0.1",
        vec![peer("127.0.0.2", Some("mapped"), hops(1))],
    );
    let addr = SocketAddr::new(ip("127.0.0.1"), listener.local_addr().port());
    let mut client = connect(addr, &opts(Some("127.0.0.2"), Some("mapped"), hops(1)))
        .await
        .unwrap();
    let (mut server, matched, remote) = accept_peer(&listener).await;
    assert_eq!((matched, remote.ip()), (ip("127.0.0.2"), ip("127.0.0.2")));
    assert_bytes_flow(&mut client, &mut server).await;

    let err = connect(addr, &opts(Some("127.0.0.2"), Some("other"), hops(1)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("check the MD5 password"), "{err}");
}

#[tokio::test]
async fn gtsm_reads_back_ttl_255_and_min_ttl_254_on_both_ends_rfc5082() {
    for (local, source) in [("127.0.0.1", "127.0.0.2"), ("::1", "::1")] {
        let listener = listen(local, vec![peer(source, None, TtlSecurity::Gtsm)]);
        assert_eq!(ttl(listener.listener()).unwrap(), 255, "{local}");
        assert_eq!(min_ttl(listener.listener()).unwrap(), 254, "{local}");
        let client = connect(
            listener.local_addr(),
            &opts(Some(source), None, TtlSecurity::Gtsm),
        )
        .await
        .unwrap();
        let (server, _, _) = accept_peer(&listener).await;
        for (end, stream) in [("client", &client), ("server", &server)] {
            assert_eq!(ttl(stream).unwrap(), 255, "{local} {end}");
            assert_eq!(min_ttl(stream).unwrap(), 254, "{local} {end}");
        }
    }
}

#[tokio::test]
async fn bgp_sockets_send_dscp_cs6_network_control_rfc4594() {
    for (local, source) in [("127.0.0.1", "127.0.0.2"), ("::1", "::1")] {
        let listener = listen(local, vec![peer(source, None, TtlSecurity::EBGP_DEFAULT)]);
        assert_eq!(
            traffic_class(listener.listener()).unwrap(),
            CS6_TOS,
            "{local}"
        );
        let client = connect(
            listener.local_addr(),
            &opts(Some(source), None, TtlSecurity::EBGP_DEFAULT),
        )
        .await
        .unwrap();
        let (server, _, _) = accept_peer(&listener).await;
        for (end, stream) in [("client", &client), ("server", &server)] {
            assert_eq!(traffic_class(stream).unwrap(), 0xC0, "{local} {end}");
        }
    }
}

#[tokio::test]
async fn gtsm_listener_drops_syn_with_ttl_below_254_rfc5082() {
    // Loopback does not decrement TTL, so TTL 1 arrives as 1: a "far" sender.
    for (local, source) in [("127.0.0.1", "127.0.0.2"), ("::1", "::1")] {
        let listener = listen(local, vec![peer(source, None, TtlSecurity::Gtsm)]);
        let drops = tcp_ext("TCPMinTTLDrop");
        let err = connect(listener.local_addr(), &opts(Some(source), None, hops(1)))
            .await
            .unwrap_err();
        assert!(matches!(err, TransportError::Timeout { .. }), "{err}");
        assert_nothing_accepted(&listener).await;
        assert!(tcp_ext("TCPMinTTLDrop") > drops, "{local}: no MINTTL drop");
    }
}

#[tokio::test]
async fn gtsm_speaker_drops_replies_from_peer_without_gtsm_rfc5082() {
    // The peer answers with TTL 64 < 254: our SYN arrives, its SYN-ACK is dropped.
    let listener = listen(
        "127.0.0.1",
        vec![peer("127.0.0.2", None, TtlSecurity::IBGP_DEFAULT)],
    );
    let addr = listener.local_addr();
    let drops = tcp_ext("TCPMinTTLDrop");
    let err = connect(addr, &opts(Some("127.0.0.2"), None, TtlSecurity::Gtsm))
        .await
        .unwrap_err();
    assert!(
        matches!(err, TransportError::TimeoutWithGtsm { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("no response from {addr}; check that GTSM")),
        "{err}"
    );
    assert!(tcp_ext("TCPMinTTLDrop") > drops, "no MINTTL drop");
}

#[tokio::test]
async fn multihop_ttl_is_read_back_and_accepts_any_incoming_ttl() {
    for (local, source) in [("127.0.0.1", "127.0.0.2"), ("::1", "::1")] {
        let listener = listen(local, vec![peer(source, None, hops(7))]);
        assert_eq!(min_ttl(listener.listener()).unwrap(), 0);
        let client = connect(listener.local_addr(), &opts(Some(source), None, hops(5)))
            .await
            .unwrap();
        let (server, _, _) = accept_peer(&listener).await;
        assert_eq!(
            (ttl(&client).unwrap(), min_ttl(&client).unwrap()),
            (5, 0),
            "{local}"
        );
        assert_eq!(
            (ttl(&server).unwrap(), min_ttl(&server).unwrap()),
            (7, 0),
            "{local}"
        );
    }
}

#[tokio::test]
async fn accepted_socket_gets_its_own_peers_ttl_policy_rfc5082() {
    // Mixed listener: no MINTTL on the listener, but the GTSM peer's socket enforces it.
    let listener = listen(
        "127.0.0.1",
        vec![
            peer("127.0.0.2", None, TtlSecurity::Gtsm),
            peer("127.0.0.3", None, TtlSecurity::EBGP_DEFAULT),
        ],
    );
    assert_eq!(
        (
            ttl(listener.listener()).unwrap(),
            min_ttl(listener.listener()).unwrap()
        ),
        (255, 0)
    );
    let addr = listener.local_addr();
    let _gtsm = connect(addr, &opts(Some("127.0.0.2"), None, TtlSecurity::Gtsm))
        .await
        .unwrap();
    let (server, _, _) = accept_peer(&listener).await;
    assert_eq!(
        (ttl(&server).unwrap(), min_ttl(&server).unwrap()),
        (255, 254)
    );
    let _plain = connect(addr, &opts(Some("127.0.0.3"), None, hops(1)))
        .await
        .unwrap();
    let (server, _, _) = accept_peer(&listener).await;
    assert_eq!((ttl(&server).unwrap(), min_ttl(&server).unwrap()), (1, 0));
}

#[tokio::test]
async fn gtsm_with_multihop_is_rejected_rfc5082() {
    let err = TtlSecurity::from_config(true, Some(2), false).unwrap_err();
    assert!(
        matches!(err, TtlConfigError::GtsmWithMultihop { ttl: 2 }),
        "{err}"
    );
}

#[tokio::test]
async fn reloaded_peers_replace_keys_and_filter() {
    let mut listener = listen("127.0.0.1", vec![peer("127.0.0.2", Some("old"), hops(1))]);
    listener
        .set_peers(vec![peer("127.0.0.3", Some("new"), hops(1))])
        .unwrap();
    let addr = listener.local_addr();
    connect(addr, &opts(Some("127.0.0.3"), Some("new"), hops(1)))
        .await
        .unwrap();
    let (_, matched, _) = accept_peer(&listener).await;
    assert_eq!(matched, ip("127.0.0.3"));
    // 127.0.0.2 lost its key and its place: unsigned, it gets through TCP and is refused.
    connect(addr, &opts(Some("127.0.0.2"), None, hops(1)))
        .await
        .unwrap();
    assert!(matches!(
        accept(&listener).await,
        Accepted::Refused { from } if from.ip() == ip("127.0.0.2")
    ));
}
