//! The peer manager on real loopback sockets: listeners kept across reloads, MD5 keys read
//! from their files when a connection is set up.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use bgp_io::transport::{ConnectOptions, TtlSecurity, connect};
use bgp_proto::session::StopReason;
use podcidr_config::Config;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::*;
use crate::daemon::core::{Core, Effect, Event, ListenerLayout, PeerSetup};

const T: Duration = Duration::from_secs(10);

fn free_port() -> u16 {
    integration_tests::net::free_port(std::net::Ipv4Addr::LOCALHOST.into())
}

fn plan(yaml: &str) -> (Vec<PeerSetup>, ListenerLayout) {
    let mut core = Core::with_lookup(
        Config::from_yaml_str(yaml).unwrap(),
        "node-a".into(),
        false,
        |_| None,
    );
    let mut setups = Vec::new();
    let mut layout = ListenerLayout::new();
    let mut effects = core.start();
    // The source's first set: graceful-restart sessions open once it is known.
    effects.extend(core.handle(Event::Desired(std::sync::Arc::new(
        ipam_watch::source::DesiredSet {
            ready: true,
            ..Default::default()
        },
    ))));
    for e in effects {
        match e {
            Effect::StartPeer(s) => setups.push(*s),
            Effect::SetListeners(l) => layout = l,
            _ => {}
        }
    }
    (setups, layout)
}

fn config(port: u16, peers: &[(&str, &str, Option<&PathBuf>)]) -> String {
    let mut s =
        "asn: 65010\nrouterId: 192.0.2.10\nsource: {kind: file, path: /x}\npeers:\n".to_owned();
    for (name, addr, key) in peers {
        s.push_str(&format!(
            "  - {{name: {name}, address: {addr}, port: {port}, asn: 65000, passive: true, localAddress: 127.0.0.1{}}}\n",
            key.map(|k| format!(", passwordFile: {}", k.display()))
                .unwrap_or_default()
        ));
    }
    s
}

/// Connects from `from` and waits for our OPEN: proof that the connection reached a session.
async fn reaches_a_session(from: IpAddr, to: SocketAddr, md5: Option<&[u8]>) -> bool {
    // A plain TTL: a GTSM client would drop the listener's single-hop SYN-ACK.
    let mut opts = ConnectOptions::new(TtlSecurity::Ttl(std::num::NonZeroU8::MAX));
    opts.source = Some(from);
    opts.md5 = md5.map(|k| bgp_io::transport::Md5Key::new(k.to_vec()).unwrap());
    opts.connect_timeout = Duration::from_secs(1);
    let mut stream: TcpStream = match connect(to, &opts).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("connect {from} -> {to}: {e}");
            return false;
        }
    };
    let mut header = [0u8; 19];
    matches!(
        tokio::time::timeout(T, stream.read_exact(&mut header)).await,
        Ok(Ok(_)) if header[18] == 1 // OPEN
    )
}

#[tokio::test]
async fn reload_adding_a_passive_peer_keeps_the_listener_bound_no_eaddrinuse() {
    let port = free_port();
    let (events, _rx) = mpsc::channel(64);
    let mut m = PeerManager::new(events);
    let (setups, layout) = plan(&config(port, &[("a", "127.0.0.2", None)]));
    for s in &setups {
        m.start(s);
    }
    assert!(m.set_listeners(&layout).is_empty());
    let local: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert!(reaches_a_session("127.0.0.2".parse().unwrap(), local, None).await);

    // Five reloads in a row, each adding a passive peer on the same socket.
    for i in 3..8u8 {
        let names: Vec<(String, String)> = (2..=i)
            .map(|j| (format!("p{j}"), format!("127.0.0.{j}")))
            .collect();
        let peers: Vec<(&str, &str, Option<&PathBuf>)> = names
            .iter()
            .map(|(n, a)| (n.as_str(), a.as_str(), None))
            .collect();
        let (setups, layout) = plan(&config(port, &peers));
        let running: Vec<String> = m.statuses().into_keys().collect();
        m.stop(
            running
                .into_iter()
                .map(|n| (n, StopReason::ConfigurationChange))
                .collect(),
        )
        .await;
        for s in &setups {
            m.start(s);
        }
        let errors = m.set_listeners(&layout);
        assert!(errors.is_empty(), "reload {i}: {errors:?}");
        assert_eq!(m.listener_addrs(), [local]);
        let newest: IpAddr = format!("127.0.0.{i}").parse().unwrap();
        assert!(
            reaches_a_session(newest, local, None).await,
            "reload {i}: the new passive peer cannot connect"
        );
    }
    m.shutdown(Vec::new()).await;
}

#[tokio::test]
async fn rotated_md5_key_reaches_the_listener_without_a_config_change() {
    let dir = integration_tests::TempDir::new("md5-listen");
    let key = dir.0.join("key");
    std::fs::write(&key, "old-key\n").unwrap();
    let port = free_port();
    let (events, _rx) = mpsc::channel(64);
    let mut m = PeerManager::new(events);
    let (setups, layout) = plan(&config(port, &[("a", "127.0.0.2", Some(&key))]));
    for s in &setups {
        m.start(s);
    }
    assert!(m.set_listeners(&layout).is_empty());
    let local: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let from: IpAddr = "127.0.0.2".parse().unwrap();
    assert!(reaches_a_session(from, local, Some(b"old-key")).await);

    // The Secret is rotated; the next tick re-reads the file.
    std::fs::write(&key, "new-key\n").unwrap();
    assert!(m.refresh_keys().is_empty());
    // Let the accept task apply the new peer list (bounded).
    let ok = tokio::time::timeout(T, async {
        loop {
            if reaches_a_session(from, local, Some(b"new-key")).await {
                return;
            }
        }
    })
    .await;
    assert!(ok.is_ok(), "the listener never took the new key");
    assert!(
        !reaches_a_session(from, local, Some(b"old-key")).await,
        "the old key still works"
    );
    m.shutdown(Vec::new()).await;
}

#[tokio::test]
async fn active_session_reads_the_key_file_at_each_connect() {
    use bgp_io::driver::Connector;
    use bgp_io::transport::{BgpListener, ListenOptions, Md5Key, PassivePeer};
    let dir = integration_tests::TempDir::new("md5-connect");
    let key = dir.0.join("key");
    std::fs::write(&key, "old-key\n").unwrap();
    // The router side: expects the new key only.
    let router = BgpListener::bind(ListenOptions::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![PassivePeer {
            addr: "127.0.0.2".parse().unwrap(),
            md5: Some(Md5Key::new(b"new-key".to_vec()).unwrap()),
            ttl: TtlSecurity::Gtsm,
        }],
    ))
    .unwrap();
    let mut options = ConnectOptions::new(TtlSecurity::Gtsm);
    options.source = Some("127.0.0.2".parse().unwrap());
    options.connect_timeout = Duration::from_secs(1);
    let mut c = KeyFileConnector {
        peer: "tor".into(),
        key_file: Some(key.clone()),
        interface: None,
        tcp: bgp_io::driver::TcpConnector {
            peer: router.local_addr(),
            options,
        },
    };
    assert!(c.connect().await.is_err(), "old key: no handshake");
    std::fs::write(&key, "new-key\n").unwrap();
    let accept = tokio::spawn(async move { router.accept().await.is_ok() });
    assert!(
        c.connect().await.is_ok(),
        "the rotated key is used on the next attempt"
    );
    assert!(tokio::time::timeout(T, accept).await.unwrap().unwrap());
}

#[test]
fn an_oversized_key_file_is_a_clear_error_naming_the_peer() {
    let dir = integration_tests::TempDir::new("md5-big");
    let key = dir.0.join("key");
    std::fs::File::create(&key)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let e = read_key("tor1", &key).unwrap_err().to_string();
    assert!(e.starts_with("peers[tor1].passwordFile:"), "{e}");
}

/// Hands out one pipe too small for an OPEN, whose far end never reads: the session's
/// writes, and so its stop, hang until send-hold expiry (minutes).
struct StuckPipe(Option<tokio::io::DuplexStream>);

impl bgp_io::driver::Connector for StuckPipe {
    type Stream = tokio::io::DuplexStream;
    fn connect(
        &mut self,
    ) -> std::pin::Pin<Box<dyn Future<Output = std::io::Result<Self::Stream>> + Send>> {
        let next = self.0.take();
        Box::pin(async move {
            match next {
                Some(s) => Ok(s),
                None => std::future::pending().await,
            }
        })
    }
}

/// Old shutdown waited 10 s per peer in turn: three stuck peers took 30 s, the whole
/// termination grace period, so the kubelet's SIGKILL came before the process could exit.
#[tokio::test(start_paused = true)]
async fn three_stuck_peers_are_stopped_together_within_one_bound() {
    use bgp_io::driver;
    use bgp_proto::session::{Session, SessionConfig, State};
    use bgp_proto::{Asn, RouterId};

    let (events, _events_rx) = mpsc::channel(16);
    let mut peers = PeerManager::new(events);
    let mut far_ends = Vec::new();
    let mut names = Vec::new();
    for i in 0..3u8 {
        let (ours, theirs) = tokio::io::duplex(8);
        far_ends.push(theirs);
        let config = SessionConfig::new(
            Asn(65001),
            RouterId::new(std::net::Ipv4Addr::new(192, 0, 2, 1)).expect("router id"),
            Asn(65000),
        );
        let (routes, routes_rx) = tokio::sync::watch::channel(None);
        let task = driver::spawn(Session::new(config), StuckPipe(Some(ours)), None, routes_rx);
        // Connected, its OPEN blocked in the pipe.
        let mut status = task.status.clone();
        tokio::time::timeout(T, status.wait_for(|s| s.state == State::OpenSent))
            .await
            .expect("reaches OpenSent")
            .expect("task alive");
        let name = format!("stuck-{i}");
        peers.insert_session(&name, task, routes);
        names.push(name);
    }
    let t0 = tokio::time::Instant::now();
    let stops = names
        .iter()
        .map(|n| (n.clone(), StopReason::Shutdown("maintenance".into())))
        .collect();
    peers.stop(stops).await;
    let took = t0.elapsed();
    assert!(
        took >= STOP_WAIT && took < STOP_WAIT + Duration::from_secs(1),
        "one bound for all three peers, not one each: took {took:?}"
    );
    assert!(peers.statuses().is_empty(), "every stopped peer is removed");
}

fn interface_connector(interface: &str) -> KeyFileConnector {
    KeyFileConnector {
        peer: "tor".into(),
        key_file: None,
        interface: Some(interface.into()),
        tcp: bgp_io::driver::TcpConnector {
            peer: "[fe80::1]:179".parse().unwrap(),
            options: ConnectOptions::new(TtlSecurity::Gtsm),
        },
    }
}

#[tokio::test]
async fn interface_peer_on_a_missing_interface_fails_naming_it_rfc4007() {
    use bgp_io::driver::Connector;
    let err = interface_connector("podcidr-none0")
        .connect()
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("interface podcidr-none0: "),
        "{err}"
    );
}
