//! A LoadBalancer IP on the wire (issue 33, "Tested for real"): a BIRD ToR with `merge paths
//! on` installing ECMP kernel routes, a client behind it, and two nodes, each running
//! `podcidr-bgp speaker` in its namespace against the in-process fake API (served inside the
//! ToR namespace, as in `netns_cni.rs`). Every node holds the Service's address (on `lo`, as
//! kube-proxy's IPVS mode holds it on a dummy interface), so which node gets a flow is the
//! ToR's choice alone. The client opens TCP connections to the address from many source ports
//! (the ToR hashes on ports); each node's listener answers with its number, so the test sees
//! which nodes received flows.
//!
//! ```text
//!  client ──to-cl── tor (BIRD, fake API on 198.18.0.1) ──to-n1── node-1 (speaker, VIP on lo)
//!                                                       ──to-n2── node-2 (speaker, VIP on lo)
//! ```
//!
//! A second `Local` Service, the marker, is a barrier: its EndpointSlice changes after the
//! Service's, in the same watch, so once the ToR sees a node's marker route change, that node's
//! speaker has seen everything before it. That is how "adds no route" and "keeps the route"
//! are asserted without sleeping: after the barrier a wrong route is already at the ToR and
//! stays, so waiting for the right one cannot pass by outlasting it.
//!
//! Addresses: links and nodes 198.18.0.0/15, pod CIDRs 198.19.<i>.0/24, Service IPs
//! 198.19.100.0/24.

use crate::common;
use integration_tests::skip::Need;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Proc, TempDir};
use fake_kube::{FakeKube, Gvr};
use integration_tests::bird_parse::parse_routes;
use integration_tests::netns::{
    Netns, in_netns, ip, link, node_behind, route_gateways, sysctl, tcp_listener_in,
};
use integration_tests::{
    Bird, BirdConfig, BirdNeighbor, BirdRoute, Export, KernelConfig, ProtocolInfo,
};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const NODES: u8 = 2;
const VIP: Ipv4Addr = Ipv4Addr::new(198, 19, 100, 7);
const MARKER_VIP: Ipv4Addr = Ipv4Addr::new(198, 19, 100, 8);
const PORT: u16 = 8080;
/// Connections per look: with two legs, all on one by chance is 2^-31.
const FLOWS: usize = 32;
/// The speakers' `gracefulShutdown.wait` (s): the drain's period before the withdrawal, long
/// enough for the test to see the period on a loaded machine.
const DRAIN_WAIT: u64 = 2;
/// An upper bound for a loaded 2-core CI machine, not a claim about speed.
const WAIT: Duration = Duration::from_secs(30);

fn services() -> Gvr {
    Gvr::new("v1", "services")
}

fn slices() -> Gvr {
    Gvr::new("discovery.k8s.io/v1", "endpointslices")
}

fn node_name(i: u8) -> String {
    format!("node-{i}")
}

fn pod_cidr(i: u8) -> String {
    format!("198.19.{i}.0/24")
}

fn host(a: Ipv4Addr) -> String {
    format!("{a}/32")
}

fn service(name: &str, ip: Ipv4Addr) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": name}},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                 "ports": [{"port": PORT}]},
        "status": {"loadBalancer": {"ingress": [{"ip": ip.to_string()}]}}
    })
}

/// An endpoint's state as the EndpointSlice controller writes it.
#[derive(Debug, Clone, Copy)]
enum Pod {
    /// Created, readiness probe not passed yet.
    Starting,
    Ready,
    /// Being deleted, still serving (KEP-1669).
    Terminating,
}

/// The EndpointSlice of `service`: one endpoint per `(node, pod)`.
fn slice(service: &str, pods: &[(u8, Pod)]) -> Value {
    let endpoints: Vec<Value> = pods
        .iter()
        .map(|&(i, pod)| {
            let (ready, serving, terminating) = match pod {
                Pod::Starting => (false, false, false),
                Pod::Ready => (true, true, false),
                Pod::Terminating => (false, true, true),
            };
            json!({"addresses": [format!("198.19.{i}.5")], "nodeName": node_name(i),
                   "conditions": {"ready": ready, "serving": serving, "terminating": terminating}})
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{service}-1"), "namespace": "shop",
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"port": PORT}]
    })
}

fn speaker_config(dir: &TempDir, i: u8) -> std::path::PathBuf {
    let path = dir.path(&format!("speaker{i}.yaml"));
    std::fs::write(
        &path,
        format!(
            "nodeName: {node}\nasn: 64512\nrouterId: 198.18.{i}.2\nsource: {{kind: node-spec}}\n\
             allowedPrefixes: [198.19.0.0/16]\nnextHop: {{ipv4: self}}\n\
             gracefulShutdown: {{wait: {DRAIN_WAIT}}}\n\
             peers:\n  - {{name: tor, address: 198.18.{i}.1, asn: 65000, holdTime: 9, \
             families: [ipv4-unicast], connectRetry: {{base: 1, max: 2}}, \
             gracefulRestart: {{enabled: false}}}}\n\
             status: {{publish: false}}\n",
            node = node_name(i),
        ),
    )
    .unwrap();
    path
}

/// The namespaces, their links and addresses; the ToR hashes ECMP on ports.
fn topology(ns: &mut Netns, tor: &str, client: &str, nodes: &[String]) {
    ns.add(tor);
    ns.add(client);
    // The API server's address for the nodes.
    ip(&["-n", tor, "addr", "add", "198.18.0.1/32", "dev", "lo"]);
    sysctl(tor, "net.ipv4.ip_forward=1");
    sysctl(tor, "net.ipv4.fib_multipath_hash_policy=1");
    link(tor, "to-cl", client, "eth0", "198.18.100");
    ip(&[
        "-n",
        client,
        "route",
        "add",
        "default",
        "via",
        "198.18.100.1",
    ]);
    for (k, n) in nodes.iter().enumerate() {
        let i = k + 1;
        node_behind(ns, tor, n, i);
        // The Service's address, held by every node as kube-proxy's IPVS mode holds it on a
        // dummy interface (here on `lo`: a container's kernel may lack the dummy module, and
        // the node answers for a local address either way), so which node gets a flow is the
        // ToR's choice alone. Then a pod of the node's pod CIDR.
        for a in [host(VIP), format!("198.19.{i}.1/32")] {
            ip(&["-n", n, "addr", "add", &a, "dev", "lo"]);
        }
    }
}

/// The node-facing import filter of docs/tor.md ("Service routes"): RFC 8326 §4 (a route with
/// GRACEFUL_SHUTDOWN loses to any other), pod CIDRs and LoadBalancer IPs only.
const FROM_NODES: &str = "filter {\n    \
    if (65535, 0) ~ bgp_community then bgp_local_pref = 0;\n    \
    if net ~ [ 198.19.100.0/24{32,32} ] then accept;\n    \
    if net ~ [ 198.19.0.0/16{24,24} ] then accept;\n    \
    reject;\n  }";

/// The ToR: one eBGP session per node, ECMP kernel routes.
fn start_tor(tor: &str) -> Bird {
    let mut c = BirdConfig::new(Ipv4Addr::new(198, 18, 0, 1), 65000)
        .netns(tor)
        .kernel(KernelConfig {
            ipv4: true,
            merge_paths: true,
            ..KernelConfig::default()
        });
    for i in 1..=NODES {
        c = c.neighbor(
            BirdNeighbor::new(&format!("node{i}"), Ipv4Addr::new(198, 18, i, 2), 64512)
                .local(Ipv4Addr::new(198, 18, i, 1), 179)
                .import(FROM_NODES)
                .multihop(false)
                .hold_time(9)
                .families(true, false)
                .export(Export::None),
        );
    }
    Bird::start(c)
}

/// A listener on every address of node `i` that answers each connection with `i`.
fn serve_node(rt: &tokio::runtime::Runtime, ns: &str, i: u8) {
    let std = tcp_listener_in(ns, SocketAddr::from((Ipv4Addr::UNSPECIFIED, PORT))).unwrap();
    std.set_nonblocking(true).unwrap();
    let _in_rt = rt.enter();
    let listener = tokio::net::TcpListener::from_std(std).unwrap();
    rt.spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let _ = conn.write_all(&[i]).await;
        }
    });
}

/// `FLOWS` new TCP connections from the client to `to`, each from a new source port: per
/// node, how many it answered; key 0 counts connections nobody answered.
fn flows(client: &str, to: Ipv4Addr) -> BTreeMap<u8, usize> {
    let answers = in_netns(client, move || {
        (0..FLOWS)
            .map(|_| {
                let timeout = Duration::from_millis(500);
                let mut s =
                    TcpStream::connect_timeout(&SocketAddr::from((to, PORT)), timeout).ok()?;
                s.set_read_timeout(Some(timeout)).ok()?;
                let mut b = [0u8];
                s.read_exact(&mut b).ok()?;
                Some(b[0])
            })
            .collect::<Vec<_>>()
    })
    .unwrap();
    let mut out = BTreeMap::new();
    for a in answers {
        *out.entry(a.unwrap_or(0)).or_default() += 1;
    }
    out
}

struct Rig {
    tor: String,
    client: String,
    bird: Bird,
    fake: FakeKube,
    speakers: Vec<Proc>,
    /// The nodes with a ready marker endpoint.
    marker: BTreeSet<u8>,
}

impl Rig {
    /// The nodes the ToR's BIRD has `prefix` from.
    fn bird_via(&self, prefix: &str) -> BTreeSet<u8> {
        // "Network not found" is an error reply: no route.
        let text = self.bird.cmd(&format!("show route {prefix}"));
        parse_routes(&text.unwrap_or_default())
            .iter()
            .filter_map(|r| r.from_protocol.strip_prefix("node")?.parse().ok())
            .collect()
    }

    /// The nodes the ToR's kernel forwards `prefix` to (its ECMP legs).
    fn kernel_via(&self, prefix: &str) -> BTreeSet<u8> {
        route_gateways(&self.tor, prefix)
            .into_iter()
            .filter_map(|g| match g {
                IpAddr::V4(a) if a.octets()[..2] == [198, 18] && a.octets()[3] == 2 => {
                    Some(a.octets()[2])
                }
                _ => None,
            })
            .collect()
    }

    /// Polls `done` (bounded); fails with `what`, what it last saw and the diagnostics.
    fn wait_until(&self, what: &str, mut done: impl FnMut(&Rig) -> Result<(), String>) {
        let deadline = Instant::now() + WAIT;
        loop {
            let last = match done(self) {
                Ok(()) => return,
                Err(last) => last,
            };
            if Instant::now() >= deadline {
                panic!("{what}: {last}\n{}", self.diagnostics());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until BIRD and the kernel both route `prefix` via exactly `nodes`.
    fn wait_via(&self, prefix: &str, nodes: &[u8], what: &str) {
        let want: BTreeSet<u8> = nodes.iter().copied().collect();
        self.wait_until(what, |r| {
            let (bird, kernel) = (r.bird_via(prefix), r.kernel_via(prefix));
            if bird == want && kernel == want {
                Ok(())
            } else {
                Err(format!(
                    "want {prefix} via nodes {want:?}; BIRD has {bird:?}, the kernel {kernel:?}"
                ))
            }
        });
    }

    /// The ToR's route to `prefix` from node `i`: its communities and LOCAL_PREF.
    fn route_from(&self, prefix: &str, i: u8) -> Option<BirdRoute> {
        let text = self.bird.cmd(&format!("show route {prefix} all")).ok()?;
        parse_routes(&text)
            .into_iter()
            .find(|r| r.from_protocol == format!("node{i}"))
    }

    /// Flips node `i`'s marker endpoint and waits for the ToR to see it: node `i`'s speaker
    /// has then acted on every EndpointSlice change made before.
    fn barrier(&mut self, i: u8) {
        if !self.marker.remove(&i) {
            self.marker.insert(i);
        }
        let pods: Vec<(u8, Pod)> = self.marker.iter().map(|&n| (n, Pod::Ready)).collect();
        self.set_slice("marker", &pods);
        let nodes: Vec<u8> = self.marker.iter().copied().collect();
        self.wait_via(&host(MARKER_VIP), &nodes, &format!("barrier on node-{i}"));
    }

    fn set_slice(&self, service: &str, pods: &[(u8, Pod)]) {
        let new = slice(service, pods);
        self.fake
            .update(&slices(), Some("shop"), &format!("{service}-1"), |o| {
                o["endpoints"] = new["endpoints"].clone()
            })
            .unwrap();
    }

    /// Asserts that new flows to `to` reach exactly `nodes`, every one answered.
    fn assert_flows(&self, to: Ipv4Addr, nodes: &[u8], what: &str) {
        let got = flows(&self.client, to);
        let reached: BTreeSet<u8> = got.keys().copied().collect();
        let want: BTreeSet<u8> = nodes.iter().copied().collect();
        assert_eq!(
            reached,
            want,
            "{what}: flows to {to} per node (0: unanswered): {got:?}\n{}",
            self.diagnostics()
        );
    }

    fn session(&self, i: u8) -> ProtocolInfo {
        self.bird.protocol(&format!("node{i}"))
    }

    fn diagnostics(&self) -> String {
        let mut s = self.bird.diagnostics();
        s += &format!(
            "\n--- ToR routes ---\n{}\n--- ToR kernel ---\n{}",
            self.bird.cmd("show route all").unwrap_or_else(|e| e),
            String::from_utf8_lossy(
                &integration_tests::netns::in_ns(&self.tor, &["ip", "route"]).stdout
            )
        );
        for (k, p) in self.speakers.iter().enumerate() {
            s += &format!("\n--- speaker node-{} ---\n{}", k + 1, p.log());
        }
        s
    }
}

#[test]
fn a_local_service_ip_reaches_only_nodes_with_a_ready_endpoint_and_a_drained_node_keeps_its_pod_cidr()
 {
    let tag = format!("pcv{}", std::process::id() % 100_000);
    integration_tests::require!(Need::Netns, Need::Bird);
    let started = Instant::now();
    let dir = TempDir::new("netns-service-vip");
    let (tor, client) = (format!("{tag}-tor"), format!("{tag}-cl"));
    let nodes: Vec<String> = (1..=NODES).map(|i| format!("{tag}-n{i}")).collect();
    // Declared first: dropped last, after every process and socket inside.
    let mut ns = Netns::default();
    topology(&mut ns, &tor, &client, &nodes);

    // The API server on a runtime of its own (the test thread blocks), reachable from the
    // nodes at 198.18.0.1 through a socket made inside the ToR namespace.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fake = rt.block_on(async { FakeKube::start().await.unwrap() });
    let kubeconfig = dir.path("kubeconfig");
    {
        let _in_rt = rt.enter();
        common::serve_fake_api_in(&fake, &tor, &kubeconfig);
    }
    for i in 1..=NODES {
        fake.insert(
            &Gvr::nodes(),
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node_name(i)},
                "spec": {"podCIDR": pod_cidr(i), "podCIDRs": [pod_cidr(i)]},
                "status": {"addresses": [{"type": "InternalIP", "address": format!("198.18.{i}.2")}]}
            }),
        )
        .unwrap();
        serve_node(&rt, &nodes[usize::from(i - 1)], i);
    }
    fake.insert(
        &Gvr::new("bgp.podcidr.io/v1beta1", "bgpadvertisements"),
        json!({
            "apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPAdvertisement",
            "metadata": {"name": "lb"},
            "spec": {"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                     "allowedPrefixes": ["198.19.100.0/24"]}
        }),
    )
    .unwrap();
    fake.insert(&services(), service("web", VIP)).unwrap();
    fake.insert(&services(), service("marker", MARKER_VIP))
        .unwrap();
    // 1. The Service's one ready pod runs on node-1.
    fake.insert(&slices(), slice("web", &[(1, Pod::Ready)]))
        .unwrap();
    fake.insert(&slices(), slice("marker", &[])).unwrap();

    let bird = start_tor(&tor);
    let speakers: Vec<Proc> = (1..=NODES)
        .map(|i| {
            let mut cmd = Command::new("ip");
            cmd.args([
                "netns",
                "exec",
                &nodes[usize::from(i - 1)],
                common::BIN,
                "speaker",
                "--final",
                "--config",
            ])
            .arg(speaker_config(&dir, i))
            .arg("--kubeconfig")
            .arg(&kubeconfig);
            Proc::spawn_command(cmd, &dir.path(&format!("speaker{i}.log")))
        })
        .collect();
    let mut rig = Rig {
        tor,
        client,
        bird,
        fake,
        speakers,
        marker: BTreeSet::new(),
    };
    for i in 1..=NODES {
        rig.wait_via(&pod_cidr(i), &[i], "the pod CIDRs");
    }

    // 1. Local, ready on node-1 only: the ToR routes the address via node-1 alone, and only
    //    node-1 gets flows although node-2 holds the address too.
    rig.barrier(2);
    rig.wait_via(&host(VIP), &[1], "ready on node-1 only");
    rig.assert_flows(VIP, &[1], "ready on node-1 only");

    // 2. A new pod on node-2, not ready yet: no route via node-2.
    rig.set_slice("web", &[(1, Pod::Ready), (2, Pod::Starting)]);
    rig.barrier(2);
    rig.wait_via(&host(VIP), &[1], "a pod that is not ready adds no route");
    rig.assert_flows(VIP, &[1], "a pod that is not ready adds no route");
    //    Ready: ECMP over both nodes, and flows reach both.
    rig.set_slice("web", &[(1, Pod::Ready), (2, Pod::Ready)]);
    rig.wait_via(&host(VIP), &[1, 2], "ready on both nodes");
    rig.assert_flows(VIP, &[1, 2], "ready on both nodes");

    // 3. node-2's pod is gone and node-1's, the last, is terminating but still serving: node-2
    //    withdraws, node-1 keeps the route (KEP-1669: no ready endpoint anywhere).
    rig.set_slice("web", &[(1, Pod::Terminating)]);
    rig.wait_via(&host(VIP), &[1], "node-2's pod gone");
    rig.barrier(1);
    rig.wait_via(
        &host(VIP),
        &[1],
        "a terminating last pod keeps its node's route",
    );
    rig.assert_flows(VIP, &[1], "a terminating last pod keeps its node's route");
    //    A new pod is ready on node-2: the route moves there.
    rig.set_slice("web", &[(1, Pod::Terminating), (2, Pod::Ready)]);
    rig.wait_via(&host(VIP), &[2], "another node is ready");
    rig.assert_flows(VIP, &[2], "another node is ready");

    // 4. A new pod on node-1 is ready too (ECMP again), then node-2 drains. For the
    //    graceful-shutdown period its route carries 65535:0, which the ToR's import filter
    //    turns into LOCAL_PREF 0: the route is still there but the ToR forwards new flows to
    //    node-1 only. Then it is withdrawn; node-2's session and pod CIDR stay.
    rig.set_slice("web", &[(1, Pod::Ready), (2, Pod::Ready)]);
    rig.wait_via(&host(VIP), &[1, 2], "ready on both nodes again");
    let drained = Instant::now();
    rig.fake
        .update(&Gvr::nodes(), None, &node_name(2), |n| {
            n["metadata"]["annotations"] = json!({"podcidr.io/drain-services": "true"})
        })
        .unwrap();
    rig.wait_until("node-2 drains: RFC 8326 first", |r| {
        let route = r.route_from(&host(VIP), 2);
        let marked = route
            .as_ref()
            .is_some_and(|r| r.communities.contains(&(65535, 0)) && r.local_pref == Some(0));
        let kernel = r.kernel_via(&host(VIP));
        if marked && kernel == BTreeSet::from([1]) {
            Ok(())
        } else {
            Err(format!(
                "want node-2's route with 65535:0 at local pref 0 and the kernel via node-1 \
                 only; node-2's route: {route:?}, the kernel via {kernel:?}"
            ))
        }
    });
    rig.assert_flows(VIP, &[1], "node-2 drains: 65535:0");
    rig.wait_via(&host(VIP), &[1], "node-2 drained");
    assert!(
        drained.elapsed() >= Duration::from_secs(DRAIN_WAIT),
        "withdrawn after the graceful-shutdown period ({DRAIN_WAIT} s), not {:?}",
        drained.elapsed()
    );
    rig.assert_flows(VIP, &[1], "node-2 drained");
    rig.wait_via(&pod_cidr(2), &[2], "a drain keeps the pod CIDR");
    rig.assert_flows(
        Ipv4Addr::new(198, 19, 2, 1),
        &[2],
        "node-2's pods stay reachable",
    );

    // No session was reset along the way: every change was an UPDATE. BIRD's log says each
    // protocol came up once; its "since" column is no witness (it moved by a millisecond
    // with no reset in one CI run).
    let log = rig.bird.log();
    for i in 1..=NODES {
        let s = rig.session(i);
        assert!(s.is_established(), "node{i}: {s:?}");
        let ups = log
            .matches(&format!("node{i}: State changed to up"))
            .count();
        assert_eq!(ups, 1, "node{i}'s session was reset\n{}", rig.diagnostics());
    }
    eprintln!("service VIP scenario: {:?}", started.elapsed());
    // Speakers (SIGKILL by PID), BIRD (by PID), then the runtime's listeners and API
    // server, then the namespaces.
    drop(rig);
    drop(rt);
}
