//! The allocator and the speakers (`source: ipam-crd`) against the real kube-apiserver (the
//! newest the suite builds) and etcd through control-plane faults: an API server restart, and an etcd
//! compaction that answers the clients' resumed watches with 410 Gone. Neither withdraws a
//! route from the router (a collector whose every change is watched), neither hands one CIDR
//! to two nodes, and afterwards the clients' watches work again: a new Node is allocated and
//! announced.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bgp_io::collector::{Collector, CollectorConfig, CollectorRib};
use common::real_api::{self, ControlPlane, ControlPlaneOptions, Identity};
use common::{Proc, TempDir};
use ipnet::IpNet;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, block_in_place};

/// Nodes that exist from the start, and the one created after the fault.
const NODES: [&str; 2] = ["node-a", "node-b"];
const NEW_NODE: &str = "node-c";
/// Long enough to outlast a fault: the allocator keeps its term, so it is its own watches
/// that must recover (a lost term exits, and a fresh process would prove nothing).
const LEASE: &str = "60s";
const WAIT: Duration = Duration::from_secs(60);

fn router_id(node: &str) -> Ipv4Addr {
    let i = [NODES[0], NODES[1], NEW_NODE]
        .iter()
        .position(|n| *n == node)
        .expect("a known node");
    Ipv4Addr::new(192, 0, 2, 1 + u8::try_from(i).unwrap())
}

/// A TCP relay on loopback in front of the API server. Cut, it closes every connection and
/// every new one at once: the clients behind it lose the API while the admin, who talks to
/// the server directly, goes on changing the cluster.
struct Relay {
    url: String,
    open: watch::Sender<bool>,
    /// Connections being relayed.
    live: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Relay {
    async fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let (open, rx) = watch::channel(true);
        let live = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let live = Arc::clone(&live);
            async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    if !*rx.borrow() {
                        continue;
                    }
                    let mut cut = rx.clone();
                    let live = Arc::clone(&live);
                    live.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(async move {
                        if let Ok(mut server) = TcpStream::connect(upstream).await {
                            tokio::select! {
                                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                                // Also ends when the relay is dropped.
                                _ = cut.wait_for(|open| !open) => {}
                            }
                        }
                        live.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            }
        });
        Relay {
            url,
            open,
            live,
            task,
        }
    }

    /// Cuts the clients off; returns once no connection is relayed any more.
    async fn cut(&self) {
        self.open.send_replace(false);
        let closed = common::poll(Duration::from_secs(10), || async {
            (self.live.load(Ordering::SeqCst) == 0).then_some(())
        })
        .await;
        assert!(closed.is_some(), "relayed connections did not close");
    }

    fn reopen(&self) {
        self.open.send_replace(true);
    }

    /// `identity` with its kubeconfig pointing at the relay (the server's certificate names
    /// 127.0.0.1, whatever the port).
    fn identity(&self, cp: &ControlPlane, identity: &Identity, name: &str) -> Identity {
        let text = std::fs::read_to_string(&identity.kubeconfig).unwrap();
        assert!(text.contains(&cp.url()), "{text}");
        let kubeconfig = cp.file(&format!("{name}.relay.kubeconfig"));
        std::fs::write(&kubeconfig, text.replace(&cp.url(), &self.url)).unwrap();
        Identity {
            kubeconfig,
            ..identity.clone()
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A route the router lost: what a fault must never cause.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Loss {
    /// The session went away or was replaced (a router without graceful restart drops all
    /// its routes).
    Session(Ipv4Addr),
    /// Prefixes withdrawn in UPDATEs: how many, and which were seen gone.
    Withdrawn(Ipv4Addr, u64, BTreeSet<IpNet>),
}

#[derive(Default)]
struct Seen {
    tables: BTreeMap<Ipv4Addr, (SocketAddr, u64, BTreeSet<IpNet>)>,
    losses: Vec<Loss>,
}

impl Seen {
    /// Compares one state of the collector's table with the previous one. The withdrawal
    /// counter and the session's address catch what happened between two looks.
    fn observe(&mut self, rib: &CollectorRib) {
        for (id, (remote, withdrawn, routes)) in &self.tables {
            match rib.get(id) {
                None => self.losses.push(Loss::Session(*id)),
                Some(t) if t.remote != *remote => self.losses.push(Loss::Session(*id)),
                Some(t) => {
                    let gone: BTreeSet<IpNet> = routes
                        .iter()
                        .filter(|p| !t.routes.contains_key(p))
                        .copied()
                        .collect();
                    if t.withdrawn > *withdrawn || !gone.is_empty() {
                        self.losses
                            .push(Loss::Withdrawn(*id, t.withdrawn - withdrawn, gone));
                    }
                }
            }
        }
        self.tables = rib
            .iter()
            .map(|(id, t)| {
                (
                    *id,
                    (t.remote, t.withdrawn, t.routes.keys().copied().collect()),
                )
            })
            .collect();
    }
}

/// Every change of the collector's table, from now on, checked for lost routes.
struct RouteWatch {
    seen: Arc<Mutex<Seen>>,
    rx: watch::Receiver<CollectorRib>,
    task: JoinHandle<()>,
}

impl RouteWatch {
    fn start(collector: &Collector) -> RouteWatch {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut rx = collector.subscribe();
        seen.lock().unwrap().observe(&rx.borrow_and_update());
        let task = tokio::spawn({
            let seen = Arc::clone(&seen);
            let mut rx = rx.clone();
            async move {
                while rx.changed().await.is_ok() {
                    // Read under the lock, so looks (here and in `losses`) never go back in time.
                    let mut seen = seen.lock().unwrap();
                    seen.observe(&rx.borrow_and_update());
                }
            }
        });
        RouteWatch { seen, rx, task }
    }

    /// The losses so far, including the collector's current state.
    fn losses(&self) -> Vec<Loss> {
        let mut seen = self.seen.lock().unwrap();
        seen.observe(&self.rx.borrow());
        seen.losses.clone()
    }
}

impl Drop for RouteWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Cluster {
    cp: ControlPlane,
    dir: TempDir,
    collector: Collector,
    allocator: Proc,
    speakers: BTreeMap<&'static str, Proc>,
    relay: Option<Relay>,
}

fn speaker_config(node: &str, collector: u16) -> String {
    format!(
        "asn: 64512
routerId: {id}
source: {{kind: ipam-crd}}
allowedPrefixes: [10.20.0.0/16]
peers:
  - name: tor
    address: 127.0.0.1
    port: {collector}
    asn: 65000
    ebgpMultihop: 2
    gracefulRestart: {{enabled: false}}
    connectRetry: {{base: 1, max: 2}}
admin: {{listen: \"127.0.0.1:{admin}\"}}
status: {{publish: true, minInterval: 1}}
",
        id = router_id(node),
        admin = common::free_port(),
    )
}

/// The control plane with deploy/ and the Nodes `NODES`; the allocator and a speaker for
/// every node, each as its own ServiceAccount, directly or through a relay; returns once
/// every Node is allocated and announced. `NEW_NODE`'s speaker runs too, waiting for its Node
/// (a speaker starts its sessions once it has seen it): its watches live through the fault.
async fn start(options: ControlPlaneOptions, relayed: bool) -> Option<Cluster> {
    let cp = block_in_place(|| real_api::installed_control_plane_with(options))?;
    // Each speaker's token is bound to its own node's Pod (the admission policy reads the
    // node from it); NEW_NODE's Pod is there before its Node, as a DaemonSet's is not, so that
    // its watches live through the fault.
    let (speaker_ids, allocator_id) = block_in_place(|| {
        for (i, node) in NODES.iter().enumerate() {
            cp.create_node(node, &format!("127.0.0.{}", 11 + i), &[]);
        }
        let ids: Vec<Identity> = [NODES[0], NODES[1], NEW_NODE]
            .iter()
            .map(|node| real_api::speaker_identity(&cp, node))
            .collect();
        (ids, real_api::allocator_identity(&cp))
    });
    let relay = if relayed {
        let port = cp.url().rsplit(':').next().unwrap().parse().unwrap();
        Some(Relay::start(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await)
    } else {
        None
    };
    let (speaker_ids, allocator_id) = match &relay {
        Some(r) => (
            speaker_ids
                .iter()
                .enumerate()
                .map(|(i, id)| r.identity(&cp, id, &format!("speaker-{i}")))
                .collect(),
            r.identity(&cp, &allocator_id, "allocator"),
        ),
        None => (speaker_ids, allocator_id),
    };
    let collector = Collector::start(CollectorConfig::new("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let dir = TempDir::new("real-api-faults");
    let (allocator, _) = real_api::spawn_allocator(
        &dir,
        &allocator_id,
        &["--lease-duration", LEASE],
        "allocator.log",
    );
    let port = collector.local_addr().port();
    let speakers = [NODES[0], NODES[1], NEW_NODE]
        .into_iter()
        .zip(&speaker_ids)
        .map(|(node, id)| {
            let log = format!("speaker-{node}.log");
            let config = speaker_config(node, port);
            (node, real_api::spawn_speaker(&dir, id, node, &config, &log))
        })
        .collect();
    let c = Cluster {
        cp,
        dir,
        collector,
        allocator,
        speakers,
        relay,
    };
    let allocated = c.wait_allocated(&NODES).await;
    c.wait_announced(&allocated).await;
    Some(c)
}

impl Cluster {
    /// Every NodePodCIDR's `spec.podCIDRs`, by name (as the admin sees them).
    fn allocations(&self) -> BTreeMap<String, Vec<IpNet>> {
        let out = block_in_place(|| self.cp.kubectl(&["get", "nodepodcidrs", "-o", "json"]));
        let list: serde_json::Value = serde_json::from_str(&out).unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let cidrs = o["spec"]["podCIDRs"]
                    .as_array()
                    .map(|a| a.iter().map(|c| c.as_str().unwrap().parse().unwrap()))
                    .into_iter()
                    .flatten()
                    .collect();
                (o["metadata"]["name"].as_str().unwrap().to_owned(), cidrs)
            })
            .collect()
    }

    /// Polls (bounded) until every one of `nodes` has a CIDR; then checks no CIDR is in two
    /// NodePodCIDRs.
    async fn wait_allocated(&self, nodes: &[&str]) -> BTreeMap<String, Vec<IpNet>> {
        let deadline = Instant::now() + WAIT;
        loop {
            let all = self.allocations();
            if nodes
                .iter()
                .all(|n| all.get(*n).is_some_and(|c| !c.is_empty()))
            {
                if let Some(twice) = cidr_twice(&all) {
                    panic!("{twice}\n{}", self.logs());
                }
                return all;
            }
            assert!(
                Instant::now() < deadline,
                "{nodes:?} not all allocated: {all:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until every node in `allocated` is announced with exactly its CIDRs.
    async fn wait_announced(&self, allocated: &BTreeMap<String, Vec<IpNet>>) {
        let want: BTreeMap<Ipv4Addr, BTreeSet<IpNet>> = allocated
            .iter()
            .map(|(n, c)| (router_id(n), c.iter().copied().collect()))
            .collect();
        let ok = self
            .collector
            .wait_for(WAIT, |r| {
                want.iter().all(|(id, cidrs)| {
                    r.get(id).is_some_and(|t| {
                        t.routes.keys().copied().collect::<BTreeSet<_>>() == *cidrs
                    })
                })
            })
            .await;
        assert!(
            ok,
            "want {want:?}, collector has {:?}\n{}",
            self.collector.prefixes(),
            self.logs()
        );
    }

    /// The clients are all still running (none exited over the fault).
    fn assert_running(&mut self) {
        let logs = self.logs();
        let procs = std::iter::once(("allocator", &mut self.allocator))
            .chain(self.speakers.iter_mut().map(|(n, p)| (*n, p)));
        for (name, p) in procs {
            let status = p.child.try_wait().unwrap();
            assert!(status.is_none(), "{name} exited: {status:?}\n{logs}");
        }
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path(&format!("{name}.log"))).unwrap_or_default()
    }

    fn logs(&self) -> String {
        let mut out = format!("--- allocator\n{}", self.log("allocator"));
        for node in self.speakers.keys() {
            out.push_str(&format!(
                "--- speaker {node}\n{}",
                self.log(&format!("speaker-{node}"))
            ));
        }
        out + &format!("--- apiserver\n{}", self.cp.apiserver_log_tail(30))
    }
}

/// A CIDR that two NodePodCIDRs hold, described.
fn cidr_twice(all: &BTreeMap<String, Vec<IpNet>>) -> Option<String> {
    let mut holder: BTreeMap<IpNet, &str> = BTreeMap::new();
    for (node, cidrs) in all {
        for c in cidrs {
            if let Some(other) = holder.insert(*c, node.as_str()) {
                return Some(format!("{c} allocated to both {other} and {node}: {all:?}"));
            }
        }
    }
    None
}

/// A Node created now is allocated (a CIDR nobody holds) and announced by its speaker; the
/// other nodes hold `expected`. Returns the allocations.
async fn new_node_is_allocated_and_announced(
    c: &Cluster,
    expected: &BTreeMap<String, Vec<IpNet>>,
) -> BTreeMap<String, Vec<IpNet>> {
    block_in_place(|| c.cp.create_node(NEW_NODE, "127.0.0.13", &[]));
    let after = c.wait_allocated(&[NODES[0], NODES[1], NEW_NODE]).await;
    c.wait_announced(&after).await;
    for node in NODES {
        assert_eq!(after[node], expected[node], "{node}'s CIDR: {after:?}");
    }
    after
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_restart_withdraws_no_route_and_allocates_nothing_twice() {
    let mut c = integration_tests::needs!(start(ControlPlaneOptions::default(), false).await);
    let before = c.allocations();
    let routes = RouteWatch::start(&c.collector);

    // The restarted server's watch cache starts at the current revision, so most resumed
    // watches get 410 ("too old resource version") and relist here too.
    block_in_place(|| c.cp.restart_apiserver());
    // Watches recovered: a Node created now reaches the allocator, its record the new node's
    // speaker, and the route the router.
    new_node_is_allocated_and_announced(&c, &before).await;

    assert_eq!(routes.losses(), vec![], "\n{}", c.logs());
    c.assert_running();
}

/// The lowest /24 of the allocator's pool that no record holds: the one it hands out next.
fn lowest_free(all: &BTreeMap<String, Vec<IpNet>>) -> IpNet {
    let held: BTreeSet<&IpNet> = all.values().flatten().collect();
    let pool: IpNet = "10.20.0.0/16".parse().unwrap();
    pool.subnets(24)
        .unwrap()
        .find(|c| !held.contains(c))
        .unwrap()
}

/// What the etcd storage layer answers a watch resumed from a compacted revision
/// (`interpretWatchError`), as the clients log it (`watcher::Error` around `{message}:
/// {reason}`).
const COMPACTED: &str = "The resourceVersion for the provided watch is too old.: Expired";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_compaction_410_gone_relists_without_withdrawing_or_allocating_twice() {
    // Without the watch cache every watch is an etcd watch, so a resumed one gets 410 Gone
    // from the compaction itself (the cache would serve it from its own window and hide
    // the compaction). The clients are cut off behind a relay rather than the server
    // restarted, so that the cluster can change through the API while they are away.
    let options = ControlPlaneOptions {
        apiserver_args: vec!["--watch-cache=false".into()],
        ..ControlPlaneOptions::default()
    };
    let mut c = integration_tests::needs!(start(options, true).await);
    let before = c.allocations();
    let routes = RouteWatch::start(&c.collector);
    let relay = c.relay.as_ref().unwrap();

    relay.cut().await;
    // While the clients are away, node-b's record moves to the block the allocator would
    // hand out next: an allocator that missed it would give it to node-c too.
    let moved = lowest_free(&before);
    let compacted = block_in_place(|| {
        let cut_at = c.cp.etcd_revision();
        let patch = serde_json::json!({"spec": {"podCIDRs": [moved.to_string()]}}).to_string();
        c.cp.kubectl(&[
            "patch",
            "nodepodcidr",
            NODES[1],
            "--type=merge",
            "-p",
            &patch,
        ]);
        // A second write: a watch may resume at the compaction revision itself, so it must
        // lie past every client's next revision.
        c.cp.kubectl(&["create", "configmap", "after-the-move", "-n", "default"]);
        let compacted = c.cp.compact_etcd();
        assert!(compacted >= cut_at + 2, "{compacted} < {cut_at} + 2");
        compacted
    });
    relay.reopen();

    // The change is picked up: node-b's speaker announces the new block.
    let mut expected = before.clone();
    expected.insert(NODES[1].to_owned(), vec![moved]);
    c.wait_announced(&expected).await;
    // And a Node created now is allocated (not the moved block) and announced.
    new_node_is_allocated_and_announced(&c, &expected).await;

    // The resumed watches really were refused: every client saw 410 Gone and relisted.
    for name in [
        "allocator",
        "speaker-node-a",
        "speaker-node-b",
        "speaker-node-c",
    ] {
        assert!(
            c.log(name).contains(COMPACTED),
            "{name} never saw its watch refused after compaction at {compacted}\n{}",
            c.logs()
        );
    }
    // The one withdrawal is node-b's old block, replaced by the move.
    let old_b: BTreeSet<IpNet> = before[NODES[1]].iter().copied().collect();
    assert_eq!(
        routes.losses(),
        vec![Loss::Withdrawn(router_id(NODES[1]), 1, old_b)],
        "\n{}",
        c.logs()
    );
    c.assert_running();
}
