//! Service routes through the speaker binary: Services, EndpointSlices and a `BGPAdvertisement`
//! in the fake API (the 1.20 server predates `discovery.k8s.io/v1`), routes at a collector. A
//! LoadBalancer address is announced once its endpoint is ready, only from the node with a
//! local endpoint (`Local`), with the advertisement's attributes; a drain withdraws it after
//! the graceful-shutdown period while the session and the pod CIDR stay.

use crate::common;

use std::net::Ipv4Addr;
use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig};
use bgp_proto::message::attribute::Origin;
use common::{Proc, TempDir, free_port, nbs, poll, run};
use fake_kube::{FakeKube, Gvr};
use ipnet::IpNet;
use serde_json::{Value, json};

const ID: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 33);
const POD_CIDR: &str = "10.244.1.0/24";
const VIP: &str = "198.51.100.7/32";

fn services() -> Gvr {
    Gvr::new("v1", "services")
}

fn slices() -> Gvr {
    Gvr::new("discovery.k8s.io/v1", "endpointslices")
}

fn advertisements() -> Gvr {
    Gvr::new("bgp.podcidr.io/v1beta1", "bgpadvertisements")
}

fn node() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-a", "labels": {"rack": "r1"}},
        "spec": {"podCIDRs": [POD_CIDR], "podCIDR": POD_CIDR},
        "status": {"addresses": [{"type": "InternalIP", "address": "198.18.0.10"}]}
    })
}

fn service(name: &str, policy: &str, ip: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": name}},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                 "externalTrafficPolicy": policy, "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}
    })
}

/// One endpoint of `service` on `node`.
fn slice(service: &str, node: &str, ready: bool) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{service}-1"), "namespace": "shop",
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.1.5"], "nodeName": node,
                       "conditions": {"ready": ready, "serving": ready, "terminating": false}}],
        "ports": [{"port": 8080}]
    })
}

struct Setup {
    fake: FakeKube,
    collector: Collector,
    speaker: Proc,
    admin: std::net::SocketAddr,
    dir: TempDir,
}

async fn setup() -> Setup {
    setup_with(node(), json!({})).await
}

/// A speaker for `node`, with the advertisement `lb` plus `extra` spec fields.
async fn setup_with(node: Value, extra: Value) -> Setup {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), node).unwrap();
    let mut ad = json!({
        "apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPAdvertisement",
        "metadata": {"name": "lb"},
        "spec": {"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                 "allowedPrefixes": ["198.51.100.0/24"], "communities": ["65000:7"],
                 "origin": "Incomplete"}
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        ad["spec"][k] = v.clone();
    }
    fake.insert(&advertisements(), ad).unwrap();
    let collector = Collector::start(CollectorConfig::new("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let dir = TempDir::new("service-routes");
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    let admin: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut config = common::api_speaker_config(
        "node-spec",
        4_200_000_001,
        ID,
        "10.244.0.0/16",
        "ipv4: node, ipv6: node",
        collector.local_addr().port(),
        admin,
    );
    config.push_str("gracefulShutdown: {wait: 2}\n");
    let speaker = common::spawn_api_speaker(&dir, &config, &kubeconfig, "speaker.log");
    Setup {
        fake,
        collector,
        speaker,
        admin,
        dir,
    }
}

fn prefixes(s: &Setup) -> Vec<IpNet> {
    common::collected(&s.collector, ID)
}

async fn wait_prefixes(s: &Setup, want: &[&str]) {
    common::wait_collected(&s.collector, ID, want, || s.speaker.log()).await;
}

async fn metric(s: &Setup, line_prefix: &str) -> Option<String> {
    common::metric_line(s.admin, line_prefix).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_load_balancer_ip_is_announced_once_its_endpoint_here_is_ready() {
    let s = setup().await;
    s.fake
        .insert(&services(), service("web", "Local", "198.51.100.7"))
        .unwrap();
    s.fake
        .insert(&slices(), slice("web", "node-a", false))
        .unwrap();
    wait_prefixes(&s, &[POD_CIDR]).await;
    // A new pod that is not ready adds no route, and the speaker says it holds one back.
    let held = poll(Duration::from_secs(20), || async {
        metric(&s, "podcidr_service_addresses_held{reason=\"notReady\"} 1").await
    })
    .await;
    assert!(held.is_some(), "{}", s.speaker.log());
    assert_eq!(prefixes(&s), [POD_CIDR.parse::<IpNet>().unwrap()]);

    s.fake
        .update(&slices(), Some("shop"), "web-1", |o| {
            o["endpoints"][0]["conditions"] = json!({"ready": true, "serving": true})
        })
        .unwrap();
    wait_prefixes(&s, &[POD_CIDR, VIP]).await;
    let rib = s.collector.rib();
    let route = &rib[&ID].routes[&VIP.parse::<IpNet>().unwrap()];
    assert_eq!(
        route.origin,
        Some(Origin::Incomplete),
        "the advertisement's ORIGIN"
    );
    assert!(
        route.communities.contains(&((65000 << 16) | 7)),
        "{route:?}"
    );
    assert_eq!(route.next_hop, Some("198.18.0.10".parse().unwrap()));
    let pod = &rib[&ID].routes[&POD_CIDR.parse::<IpNet>().unwrap()];
    assert_eq!(pod.origin, Some(Origin::Igp), "pod CIDRs keep theirs");
    assert!(!pod.communities.contains(&((65000 << 16) | 7)));

    // The pod moves to another node: Local means this node withdraws.
    s.fake
        .update(&slices(), Some("shop"), "web-1", |o| {
            o["endpoints"][0]["nodeName"] = json!("node-b")
        })
        .unwrap();
    wait_prefixes(&s, &[POD_CIDR]).await;
    let table = &s.collector.rib()[&ID];
    assert!(table.established, "no session reset for a Service change");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_service_is_announced_while_served_anywhere_and_drain_withdraws_it_rfc8326() {
    let s = setup().await;
    s.fake
        .insert(&services(), service("api", "Cluster", "198.51.100.9"))
        .unwrap();
    s.fake
        .insert(&slices(), slice("api", "node-b", true))
        .unwrap();
    wait_prefixes(&s, &[POD_CIDR, "198.51.100.9/32"]).await;
    let updates_before = s.collector.rib()[&ID].updates;

    // An explicit drain: first GRACEFUL_SHUTDOWN on the Service route, then no route; the
    // session and the pod CIDR stay.
    s.fake
        .update(&Gvr::nodes(), None, "node-a", |n| {
            n["metadata"]["annotations"] = json!({"podcidr.io/drain-services": "true"})
        })
        .unwrap();
    let gshut = 0xFFFF_0000_u32;
    let marked = s
        .collector
        .wait_for(Duration::from_secs(20), |r| {
            r.get(&ID).is_some_and(|t| {
                t.routes
                    .get(&"198.51.100.9/32".parse().unwrap())
                    .is_some_and(|r| r.communities.contains(&gshut))
            })
        })
        .await;
    assert!(marked, "GRACEFUL_SHUTDOWN first\n{}", s.speaker.log());
    let pod = &s.collector.rib()[&ID].routes[&POD_CIDR.parse::<IpNet>().unwrap()];
    assert!(
        !pod.communities.contains(&gshut),
        "the pod CIDR is not drained"
    );
    wait_prefixes(&s, &[POD_CIDR]).await;
    let table = &s.collector.rib()[&ID];
    assert!(table.established);
    assert!(table.updates > updates_before);

    // The annotation removed: the route comes back.
    s.fake
        .update(&Gvr::nodes(), None, "node-a", |n| {
            n["metadata"]["annotations"] = json!({})
        })
        .unwrap();
    wait_prefixes(&s, &[POD_CIDR, "198.51.100.9/32"]).await;
    // The Service's last endpoint goes: withdrawn everywhere.
    s.fake.delete(&slices(), Some("shop"), "api-1").unwrap();
    wait_prefixes(&s, &[POD_CIDR]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_outside_the_allow_list_is_never_announced_and_is_counted_as_held() {
    let s = setup().await;
    s.fake
        .insert(&services(), service("rogue", "Cluster", "203.0.113.9"))
        .unwrap();
    s.fake
        .insert(&slices(), slice("rogue", "node-a", true))
        .unwrap();
    s.fake
        .insert(&services(), service("web", "Cluster", "198.51.100.7"))
        .unwrap();
    s.fake
        .insert(&slices(), {
            let mut v = slice("web", "node-a", true);
            v["metadata"]["name"] = json!("web-1");
            v
        })
        .unwrap();
    wait_prefixes(&s, &[POD_CIDR, VIP]).await;
    let held = poll(Duration::from_secs(20), || async {
        metric(
            &s,
            "podcidr_service_addresses_held{reason=\"outsideAllowList\"} 1",
        )
        .await
    })
    .await;
    assert!(held.is_some(), "{}", s.speaker.log());
}

/// `podcidr-bgp diff --services --kubeconfig … extra…`.
async fn diff_services(kubeconfig: &std::path::Path, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "diff",
        "--services",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_services_says_per_node_what_is_announced_to_which_peer_and_why_not() {
    let s = setup().await;
    // node-b runs no speaker: its rows cannot be checked.
    let mut b = node();
    b["metadata"]["name"] = json!("node-b");
    s.fake.insert(&Gvr::nodes(), b).unwrap();
    s.fake
        .insert(&services(), service("web", "Local", "198.51.100.7"))
        .unwrap();
    s.fake
        .insert(&slices(), slice("web", "node-a", true))
        .unwrap();
    wait_prefixes(&s, &[POD_CIDR, VIP]).await;
    // The speaker's report lists the route it sends.
    let reported = poll(Duration::from_secs(20), || async {
        let st = s.fake.get(&nbs(), None, "node-a")?;
        let routes = st["status"]["peers"][0]["routes"].as_array()?.clone();
        let counted = st["status"]["services"] == json!({"announced": 1, "held": 0});
        (counted && routes.iter().any(|r| r["prefix"] == VIP)).then_some(())
    })
    .await;
    assert!(
        reported.is_some(),
        "{}\n{}",
        s.fake.get(&nbs(), None, "node-a").unwrap_or_default(),
        s.speaker.log()
    );

    let kubeconfig = s.dir.path("kubeconfig");
    let out = diff_services(&kubeconfig, &["-o", "json"]).await;
    assert_eq!(
        out.code, 1,
        "node-b is unknown: drift\n{}{}",
        out.stdout, out.stderr
    );
    let doc = out.json();
    let rows = doc["rows"].as_array().unwrap();
    let row = |node: &str| {
        rows.iter()
            .find(|r| r["node"] == node)
            .unwrap_or_else(|| panic!("no row for {node}: {doc}"))
    };
    let a = row("node-a");
    assert_eq!(a["service"], "shop/web");
    assert_eq!(a["address"], "198.51.100.7");
    assert_eq!(a["kind"], "LoadBalancerIP");
    assert_eq!(a["advertisement"], "lb");
    assert_eq!(a["shouldAnnounce"], json!([VIP]));
    assert_eq!(a["announcedTo"], json!(["tor1"]));
    assert_eq!(a["verdict"], "ok");
    let b = row("node-b");
    assert_eq!(b["shouldAnnounce"], json!([]));
    assert_eq!(b["reasonCode"], "noLocalEndpoint");
    assert_eq!(b["verdict"], "unknown");

    // The table, one node: clean.
    let out = diff_services(&kubeconfig, &["--node", "node-a"]).await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("shop/web") && out.stdout.contains("tor1"),
        "{}",
        out.stdout
    );

    // A BGPAdvertisement that cannot be read is drift, named with its field.
    s.fake
        .insert(
            &advertisements(),
            json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPAdvertisement",
                   "metadata": {"name": "broken"},
                   "spec": {"serviceSelector": {}, "addresses": ["ClusterIP"],
                            "allowedPrefixes": ["10.96.0.1/16"]}}),
        )
        .unwrap();
    let out = diff_services(&kubeconfig, &["--node", "node-a"]).await;
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("BGPAdvertisement broken is not applied: spec.allowedPrefixes[0]"),
        "{}",
        out.stdout
    );
}

/// A service proxy's health server as kube-proxy answers on a `healthCheckNodePort`: 200 with
/// the local endpoint count while there is one, 503 with 0 otherwise.
struct Proxy {
    port: u16,
    local: std::sync::Arc<std::sync::atomic::AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start() -> Proxy {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let local = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let n = local.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf).await;
                let count = n.load(Ordering::SeqCst);
                let body = format!(
                    "{{\"service\":{{\"namespace\":\"shop\",\"name\":\"web\"}},\"localEndpoints\":{count}}}"
                );
                let status = if count > 0 {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            }
        });
        Proxy { port, local, task }
    }

    fn set(&self, n: u32) {
        self.local.store(n, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_datapath_gate_announces_only_once_the_proxy_serves_the_service_on_its_health_check_node_port()
 {
    let proxy = Proxy::start().await;
    // The node's InternalIP is where the proxy's health servers answer: loopback here.
    let mut n = node();
    n["status"]["addresses"] = json!([{"type": "InternalIP", "address": "127.0.0.1"}]);
    let s = setup_with(n, json!({"healthCheckGate": {"holdDown": 1}})).await;
    let mut svc = service("web", "Local", "198.51.100.7");
    svc["spec"]["healthCheckNodePort"] = json!(proxy.port);
    s.fake.insert(&services(), svc).unwrap();
    s.fake
        .insert(&slices(), slice("web", "node-a", true))
        .unwrap();
    // The EndpointSlice says ready; the proxy says no local endpoint yet: held back.
    wait_prefixes(&s, &[POD_CIDR]).await;
    let held = poll(Duration::from_secs(20), || async {
        let st = s.fake.get(&nbs(), None, "node-a")?;
        (st["status"]["services"]["heldByReason"]["datapathNotReady"] == 1).then_some(())
    })
    .await;
    assert!(held.is_some(), "{}", s.speaker.log());
    assert_eq!(prefixes(&s), [POD_CIDR.parse::<IpNet>().unwrap()]);
    // The condition and the metric say so too.
    let st = s.fake.get(&nbs(), None, "node-a").unwrap();
    let condition = st["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "ServiceDatapathHeld"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(condition["status"], "True", "{condition}");
    assert_eq!(condition["reason"], "ProxyNotServing", "{condition}");
    let line = "podcidr_service_addresses_held{reason=\"datapathNotReady\"}";
    assert_eq!(
        common::metric_line(s.admin, line).await.as_deref(),
        Some(format!("{line} 1").as_str())
    );

    // The proxy programs the Service: announced (after the hold-down, which the core's
    // simulated-time test `datapath_gate_announces_after_the_hold_down_...` proves exactly).
    proxy.set(1);
    wait_prefixes(&s, &[POD_CIDR, VIP]).await;
    let cleared = poll(Duration::from_secs(20), || async {
        let st = s.fake.get(&nbs(), None, "node-a")?;
        let c = st["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "ServiceDatapathHeld")?
            .clone();
        (c["status"] == "False" && c["reason"] == "NothingHeld").then_some(())
    })
    .await;
    assert!(
        cleared.is_some(),
        "ServiceDatapathHeld cleared once announced"
    );

    // The proxy loses it (the pod died before the EndpointSlice says so): withdrawn.
    proxy.set(0);
    wait_prefixes(&s, &[POD_CIDR]).await;
    assert!(s.collector.rib()[&ID].established);
}
