//! A passive BGP route collector: accepts sessions on a loopback port and keeps what each
//! speaker announces. Used by the tests, by `podcidr-bgp demo` (as the ToR) and by the
//! latency benchmark. It imports; the speaker side of this crate never does.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use ipnet::IpNet;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::codec::Framed;

use crate::codec::BgpCodec;
use bgp_proto::message::capability::Capability;
use bgp_proto::message::update::Update;
use bgp_proto::message::{Message, WireOptions};
use bgp_proto::types::{Asn, Family, HoldTime, RouterId};

/// One route as the collector learned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectedRoute {
    pub next_hop: Option<IpAddr>,
    pub as_path: Vec<u32>,
    pub communities: Vec<u32>,
    /// ORIGIN (RFC 4271 5.1.1), when the UPDATE carried one.
    pub origin: Option<bgp_proto::message::attribute::Origin>,
    /// LOCAL_PREF (iBGP), when the UPDATE carried one.
    pub local_pref: Option<u32>,
    /// When the UPDATE carrying it arrived (for latency measurements).
    pub received_at: Instant,
}

/// What one speaker (keyed by its BGP Identifier) announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerTable {
    pub asn: Asn,
    pub remote: SocketAddr,
    pub established: bool,
    pub routes: BTreeMap<IpNet, CollectedRoute>,
    pub end_of_rib: BTreeSet<Family>,
    pub updates: u64,
    /// Prefixes withdrawn on this session so far: a withdrawal a watcher of the table missed
    /// (announced again before it looked) still counts here.
    pub withdrawn: u64,
}

/// The collector's table: BGP Identifier → routes.
pub type CollectorRib = BTreeMap<Ipv4Addr, PeerTable>;

/// How one speaker's session ended: with its NOTIFICATION (a Cease says the speaker left)
/// or without (a graceful-restart close, or a dropped connection), and what it announced
/// just before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEnd {
    pub id: Ipv4Addr,
    pub notification: Option<bgp_proto::message::notification::Notification>,
    pub routes: BTreeMap<IpNet, CollectedRoute>,
}

#[derive(Debug, Clone)]
pub struct CollectorConfig {
    pub listen: SocketAddr,
    pub asn: Asn,
    pub router_id: RouterId,
    pub hold_time: HoldTime,
}

impl CollectorConfig {
    /// AS 65000, router ID 192.0.2.254, hold 90 s, on `listen`.
    pub fn new(listen: SocketAddr) -> Self {
        CollectorConfig {
            listen,
            asn: Asn(65000),
            router_id: RouterId::from_nonzero(COLLECTOR_ID),
            hold_time: HoldTime::new(90).unwrap_or(HoldTime::DISABLED),
        }
    }
}

/// 192.0.2.254.
const COLLECTOR_ID: std::num::NonZeroU32 = match std::num::NonZeroU32::new(0xc000_02fe) {
    Some(v) => v,
    None => std::num::NonZeroU32::MIN,
};

/// A running collector. Dropping it stops the listener and every session.
#[derive(Debug)]
pub struct Collector {
    addr: SocketAddr,
    rib: watch::Receiver<CollectorRib>,
    ends: watch::Receiver<Vec<SessionEnd>>,
    task: JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Collector {
    pub async fn start(cfg: CollectorConfig) -> std::io::Result<Collector> {
        let listener = TcpListener::bind(cfg.listen).await?;
        let addr = listener.local_addr()?;
        let (tx, rib) = watch::channel(CollectorRib::new());
        let tx = Arc::new(tx);
        let (ends_tx, ends) = watch::channel(Vec::new());
        let ends_tx = Arc::new(ends_tx);
        let task = tokio::spawn(async move {
            let mut sessions = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    Ok((stream, remote)) = listener.accept() => {
                        let (rib, ends) = (Arc::clone(&tx), Arc::clone(&ends_tx));
                        sessions.spawn(serve(stream, remote, cfg.clone(), rib, ends));
                    }
                    Some(_) = sessions.join_next() => {}
                }
            }
        });
        Ok(Collector {
            addr,
            rib,
            ends,
            task,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn rib(&self) -> CollectorRib {
        self.rib.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<CollectorRib> {
        self.rib.clone()
    }

    /// Waits until a session of the speaker `id` has ended, at most `timeout`.
    pub async fn wait_for_end(&self, timeout: Duration, id: Ipv4Addr) -> Option<SessionEnd> {
        let mut rx = self.ends.clone();
        let ends = tokio::time::timeout(timeout, rx.wait_for(|e| e.iter().any(|e| e.id == id)))
            .await
            .ok()?
            .ok()?;
        ends.iter().find(|e| e.id == id).cloned()
    }

    /// Waits until `pred` holds for the table, at most `timeout`.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&CollectorRib) -> bool,
    ) -> bool {
        let mut rx = self.rib.clone();
        tokio::time::timeout(timeout, rx.wait_for(|r| pred(r)))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Every prefix any speaker announces, with the announcing speakers' identifiers.
    pub fn prefixes(&self) -> BTreeMap<IpNet, Vec<Ipv4Addr>> {
        let mut out: BTreeMap<IpNet, Vec<Ipv4Addr>> = BTreeMap::new();
        for (id, t) in self.rib.borrow().iter() {
            for p in t.routes.keys() {
                out.entry(*p).or_default().push(*id);
            }
        }
        out
    }
}

fn apply(table: &mut PeerTable, u: &Update, opts: &WireOptions) {
    table.updates += 1;
    for p in u.withdrawn_prefixes() {
        table.withdrawn += 1;
        table.routes.remove(&p);
    }
    if let Some(f) = u.end_of_rib_family() {
        table.end_of_rib.insert(f);
        return;
    }
    let announced = u.announced();
    if announced.is_empty() {
        return;
    }
    let next_hop = u
        .next_hop()
        .map(IpAddr::V4)
        .or_else(|| u.mp_reach().and_then(|m| m.next_hop.primary()));
    let as_path = u
        .effective_as_path(opts)
        .map(|p| p.sequence_asns())
        .unwrap_or_default();
    let communities = u
        .attributes
        .iter()
        .find_map(|a| match &a.value {
            bgp_proto::message::attribute::AttrValue::Communities(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let origin = u.attributes.iter().find_map(|a| match &a.value {
        bgp_proto::message::attribute::AttrValue::Origin(o) => Some(*o),
        _ => None,
    });
    let local_pref = u.attributes.iter().find_map(|a| match &a.value {
        bgp_proto::message::attribute::AttrValue::LocalPref(v) => Some(*v),
        _ => None,
    });
    let now = Instant::now();
    for p in announced {
        table.routes.insert(
            p,
            CollectedRoute {
                next_hop,
                as_path: as_path.clone(),
                communities: communities.clone(),
                origin,
                local_pref,
                received_at: now,
            },
        );
    }
}

async fn serve(
    stream: TcpStream,
    remote: SocketAddr,
    cfg: CollectorConfig,
    rib: Arc<watch::Sender<CollectorRib>>,
    ends: Arc<watch::Sender<Vec<SessionEnd>>>,
) {
    let _ = stream.set_nodelay(true);
    let mut framed = Framed::new(stream, BgpCodec::new(WireOptions::default()));
    // OPEN exchange: accept any AS, answer with both unicast families and 4-octet AS.
    let Some(Ok(first)) = framed.next().await else {
        return;
    };
    let Message::Open(peer_open) = first.message else {
        return;
    };
    let caps = vec![
        Capability::multiprotocol(Family::IPV4_UNICAST),
        Capability::multiprotocol(Family::IPV6_UNICAST),
        Capability::RouteRefresh,
    ];
    let open = bgp_proto::message::open::Open::new(cfg.asn, cfg.hold_time, cfg.router_id, caps);
    if framed.send(Message::Open(open)).await.is_err()
        || framed.send(Message::Keepalive).await.is_err()
    {
        return;
    }
    let four = peer_open
        .capabilities()
        .any(|c| matches!(c, Capability::FourOctetAs(_)));
    let opts = WireOptions {
        four_octet_as: four,
        extended_message: false,
    };
    framed.codec_mut().set_options(opts);
    let id = peer_open.router_id.addr();
    let hold = cfg.hold_time.negotiate(peer_open.hold_time);
    let keepalive = Duration::from_secs(u64::from(hold.seconds() / 3).max(1));
    rib.send_modify(|r| {
        r.insert(
            id,
            PeerTable {
                asn: peer_open.asn(),
                remote,
                established: false,
                routes: BTreeMap::new(),
                end_of_rib: BTreeSet::new(),
                updates: 0,
                withdrawn: 0,
            },
        );
    });
    let mut ticker = tokio::time::interval(keepalive);
    let mut notification = None;
    loop {
        tokio::select! {
            _ = ticker.tick(), if !hold.is_disabled() => {
                if framed.send(Message::Keepalive).await.is_err() {
                    break;
                }
            }
            msg = framed.next() => match msg {
                Some(Ok(d)) => match d.message {
                    Message::Keepalive => rib.send_modify(|r| {
                        if let Some(t) = r.get_mut(&id) {
                            t.established = true;
                        }
                    }),
                    Message::Update(u) => rib.send_modify(|r| {
                        if let Some(t) = r.get_mut(&id) {
                            apply(t, &u, &opts);
                        }
                    }),
                    Message::Notification(n) => {
                        notification = Some(n);
                        break;
                    }
                    _ => {}
                },
                _ => break,
            }
        }
    }
    // No graceful restart here: a closed session forgets its routes, like a router without GR.
    let mut routes = BTreeMap::new();
    rib.send_modify(|r| {
        if r.get(&id).is_some_and(|t| t.remote == remote) {
            routes = r.remove(&id).map(|t| t.routes).unwrap_or_default();
        }
    });
    ends.send_modify(|e| {
        e.push(SessionEnd {
            id,
            notification,
            routes,
        });
    });
}
