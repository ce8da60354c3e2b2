//! The router side of driver tests: a connector handing out `tokio::io::duplex` pairs and a
//! real codec on the far end. Waits are bounded (paused time makes them instant).
#![allow(dead_code)]

use std::io;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bgp_io::BgpCodec;
use bgp_io::driver::{self, Connector, SessionTask};
use bgp_proto::message::capability::Capability;
use bgp_proto::message::{Message, WireOptions};
use bgp_proto::session::{RouteAttributes, RouteSet, Session, SessionConfig, SessionStatus, State};
use bgp_proto::{Asn, Family, HoldTime, Open, RouterId};
use futures::{SinkExt, StreamExt};
use ipnet::IpNet;
use tokio::io::DuplexStream;
use tokio::sync::{mpsc, watch};
use tokio_util::codec::Framed;

pub type Peer = Framed<DuplexStream, BgpCodec>;

/// Each connect creates a duplex pair and hands the far end to the test.
pub struct DuplexConnector {
    pub peers: mpsc::UnboundedSender<DuplexStream>,
    pub capacity: usize,
}

impl Connector for DuplexConnector {
    type Stream = DuplexStream;
    fn connect(&mut self) -> Pin<Box<dyn Future<Output = io::Result<DuplexStream>> + Send>> {
        let (ours, theirs) = tokio::io::duplex(self.capacity);
        let _ = self.peers.send(theirs);
        Box::pin(async move { Ok(ours) })
    }
}

pub fn cfg() -> SessionConfig {
    SessionConfig::new(
        Asn(4_200_000_001),
        RouterId::new(Ipv4Addr::new(192, 0, 2, 10)).unwrap(),
        Asn(65000),
    )
}

pub fn routes(prefixes: &[&str]) -> Arc<RouteSet> {
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

pub struct Harness {
    pub task: SessionTask,
    pub peers: mpsc::UnboundedReceiver<DuplexStream>,
    pub routes: watch::Sender<Option<Arc<RouteSet>>>,
}

pub fn start(cfg: SessionConfig, initial: Arc<RouteSet>, capacity: usize) -> Harness {
    start_with(cfg, Some(initial), capacity)
}

/// `initial: None`: the route source is not ready yet.
pub fn start_with(cfg: SessionConfig, initial: Option<Arc<RouteSet>>, capacity: usize) -> Harness {
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

pub async fn next_peer(h: &mut Harness) -> Peer {
    let s = tokio::time::timeout(Duration::from_secs(600), h.peers.recv())
        .await
        .unwrap()
        .unwrap();
    Framed::new(s, BgpCodec::new(WireOptions::four_octet()))
}

pub async fn recv(peer: &mut Peer) -> Message {
    tokio::time::timeout(Duration::from_secs(600), peer.next())
        .await
        .expect("a message")
        .expect("open")
        .unwrap()
        .message
}

pub fn router_open(hold: u16) -> Message {
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
pub async fn establish(peer: &mut Peer, hold: u16) {
    assert!(matches!(recv(peer).await, Message::Open(_)));
    peer.send(router_open(hold)).await.unwrap();
    peer.send(Message::Keepalive).await.unwrap();
    assert_eq!(recv(peer).await, Message::Keepalive);
}

pub async fn wait_state(task: &SessionTask, state: State) {
    let mut rx = task.status.clone();
    tokio::time::timeout(Duration::from_secs(600), rx.wait_for(|s| s.state == state))
        .await
        .unwrap()
        .unwrap();
}

/// `n` IPv4 /24s under `first.0.0.0/8`: about 4 bytes each on the wire.
pub fn v4_routes(first: u8, n: usize) -> Arc<RouteSet> {
    let prefixes: Vec<String> = (0..n)
        .map(|i| format!("{first}.{}.{}.0/24", i / 256 % 256, i % 256))
        .collect();
    routes(&prefixes.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Waits (bounded) until the published status satisfies `f`; returns that status.
pub async fn wait_status(
    task: &SessionTask,
    f: impl FnMut(&SessionStatus) -> bool,
) -> SessionStatus {
    let mut rx = task.status.clone();
    let st = tokio::time::timeout(Duration::from_secs(3600), rx.wait_for(f))
        .await
        .unwrap_or_else(|_| panic!("status never matched: {:?}", task.status.borrow()))
        .unwrap();
    st.clone()
}
