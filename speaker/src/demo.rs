//! `podcidr-bgp demo`: the whole flow in one process, no cluster, no root, no packages.
//! A fake Kubernetes API seeded with nodes, the cluster-pool allocator, one speaker per node,
//! and a route collector acting as the ToR; then the classic incident, a LoadBalancer Service
//! announced from the nodes that run its pods, and a node removal.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_io::collector::{Collector, CollectorConfig, CollectorRib};
use fake_kube::{FakeKube, Gvr};
use ipam_watch::allocator::{
    self, AllocatorMetrics, AllocatorOptions, Family, LeaseConfig, PodCidrPool,
};
use ipnet::IpNet;
use podcidr_config::Config;
use serde_json::json;
use tokio::sync::oneshot;

use crate::cli::{self, DiffOptions, TableStyle};
use crate::daemon::{RunOptions, Speaker};
use crate::text::count;

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Number of nodes (1..=50).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=50))]
    pub nodes: u8,
    /// Keep the final state running this long before exiting (e.g. 30s, 2m).
    #[arg(long, default_value = "0s", value_parser = crate::flags::parse_duration)]
    pub duration: u64,
    /// After the scenario, keep serving the fake API (kubeconfig path printed) until Ctrl-C,
    /// so `diff`, `peers` and `routes` can be tried by hand.
    #[arg(long)]
    pub keep_running: bool,
}

const STEP_TIMEOUT: Duration = Duration::from_secs(30);
const POOL_V4: &str = "10.244.0.0/16";
const POOL_V6: &str = "fd00:244::/56";

fn npc() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs")
}

fn nbs() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodebgpstatuses")
}

fn node_name(i: u8) -> String {
    format!("node-{i}")
}

fn router_id(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, i)
}

struct RunningSpeaker {
    admin: std::net::SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

fn step(n: u32, text: &str) {
    println!("\n[{n}] {text}");
}

fn allocated(fake: &FakeKube, node: &str) -> Vec<String> {
    fake.get(&npc(), None, node)
        .and_then(|o| o["spec"]["podCIDRs"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn print_table(rib: &CollectorRib) {
    let names: BTreeMap<Ipv4Addr, String> =
        (1..=50).map(|i| (router_id(i), node_name(i))).collect();
    let mut rows: Vec<(IpNet, String, String)> = Vec::new();
    for (id, t) in rib {
        for (p, r) in &t.routes {
            let from = names.get(id).cloned().unwrap_or_else(|| id.to_string());
            let nh = r.next_hop.map(|n| n.to_string()).unwrap_or_default();
            rows.push((*p, nh, from));
        }
    }
    rows.sort();
    println!("    {:<22} {:<16} FROM", "PREFIX", "NEXT HOP");
    for (p, nh, from) in rows {
        println!("    {:<22} {:<16} {}", p.to_string(), nh, from);
    }
}

/// The nodes' CNI config dirs (a temp dir, removed at the end): the demo has no root.
struct CniDirs(std::path::PathBuf);

impl CniDirs {
    fn new() -> Result<Self, String> {
        let root = std::env::temp_dir().join(format!("podcidr-demo-cni-{}", std::process::id()));
        std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
        Ok(CniDirs(root))
    }

    fn node(&self, i: u8) -> std::path::PathBuf {
        self.0.join(node_name(i))
    }
}

impl Drop for CniDirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The host-local subnets of a conflist, in order.
fn conflist_subnets(text: &str) -> Vec<String> {
    let doc: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    doc["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["ipam"]["ranges"].as_array())
        .flatten()
        .filter_map(|set| set.as_array())
        .flatten()
        .filter_map(|r| r["subnet"].as_str().map(str::to_owned))
        .collect()
}

fn speaker_config(i: u8, tor_port: u16, cni_dir: &std::path::Path) -> String {
    format!(
        "nodeName: {node}\nasn: 64512\ngracefulShutdown: {{wait: 0}}\nrouterId: {rid}\nsource: {{kind: ipam-crd}}\n\
         allowedPrefixes: [{POOL_V4}, {POOL_V6}]\nnextHop: {{ipv4: node, ipv6: node}}\n\
         peers:\n  - name: tor\n    address: 127.0.0.1\n    port: {tor_port}\n    asn: 65000\n    \
         holdTime: 9\n    connectRetry: {{base: 1, max: 2}}\n    gracefulRestart: {{enabled: false}}\n\
         admin: {{listen: \"127.0.0.1:0\"}}\nstatus: {{publish: true, minInterval: 1}}\n\
         cni: {{enabled: true, confDir: {dir}, dataDir: {dir}/leases}}\n",
        node = node_name(i),
        rid = router_id(i),
        dir = cni_dir.display(),
    )
}

async fn start_speaker(
    fake: &FakeKube,
    i: u8,
    tor_port: u16,
    cni_dir: &std::path::Path,
) -> Result<RunningSpeaker, String> {
    std::fs::create_dir_all(cni_dir).map_err(|e| format!("{}: {e}", cni_dir.display()))?;
    let config =
        Config::from_yaml_str(&speaker_config(i, tor_port, cni_dir)).map_err(|e| e.to_string())?;
    let opts = RunOptions::in_process(true);
    let mut speaker = Speaker::start(config, node_name(i), Some(fake.client()), opts)
        .await
        .map_err(|e| e.to_string())?;
    let admin = speaker.admin_addr();
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(async move {
        speaker
            .run(async {
                let _ = stopped.await;
            })
            .await;
    });
    Ok(RunningSpeaker { admin, stop, task })
}

/// Waits for the collector, printing progress every second.
async fn wait_rib(
    collector: &Collector,
    what: &str,
    mut done: impl FnMut(&CollectorRib) -> (usize, usize),
) -> Result<(), String> {
    let started = Instant::now();
    let mut rx = collector.subscribe();
    let mut last_print = Instant::now();
    loop {
        let (have, want) = done(&rx.borrow_and_update());
        if have >= want {
            return Ok(());
        }
        if last_print.elapsed() >= Duration::from_secs(1) {
            println!("    … {what}: {have}/{want}");
            last_print = Instant::now();
        }
        if started.elapsed() > STEP_TIMEOUT {
            return Err(format!("timed out waiting for {what} ({have}/{want})"));
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), rx.changed()).await;
    }
}

pub async fn run(args: DemoArgs) -> ExitCode {
    match scenario(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("podcidr-bgp demo: {e}");
            ExitCode::from(1)
        }
    }
}

async fn scenario(args: &DemoArgs) -> Result<(), String> {
    let n = args.nodes;
    let started = Instant::now();
    println!(
        "podcidr-bgp demo: {}, cluster-pool IPAM ({POOL_V4} /24s, {POOL_V6} /64s), one ToR.",
        count(usize::from(n), "node")
    );

    step(1, "Kubernetes API (in-process fake) with the nodes");
    let fake = FakeKube::start()
        .await
        .map_err(|e| format!("fake API: {e}"))?;
    for i in 1..=n {
        fake.insert(
            &Gvr::nodes(),
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node_name(i), "labels": {"kubernetes.io/hostname": node_name(i)}},
                "spec": {},
                "status": {"addresses": [
                    {"type": "InternalIP", "address": router_id(i).to_string()},
                    {"type": "InternalIP", "address": format!("fd00:18::{i}")}
                ]}
            }),
        )
        .map_err(|e| format!("seeding {}: {e}", node_name(i)))?;
    }
    println!("    API at {}; nodes node-1..node-{n}", fake.url());

    step(2, "ToR: a BGP route collector (AS 65000) on loopback");
    let collector = Collector::start(CollectorConfig::new(
        "127.0.0.1:0".parse().map_err(|_| "addr")?,
    ))
    .await
    .map_err(|e| format!("collector: {e}"))?;
    println!("    listening on {}", collector.local_addr());

    step(
        3,
        "allocator: restore, then allocate one /24 and one /64 per node",
    );
    let pool =
        PodCidrPool::default_from_flags(&[POOL_V4.to_owned()], 24, &[POOL_V6.to_owned()], 64);
    let lease = LeaseConfig {
        namespace: "podcidr-system".into(),
        name: "podcidr-bgp-allocator".into(),
        identity: "demo".into(),
        duration: Duration::from_secs(15),
    };
    let mut opts = AllocatorOptions::new(lease);
    opts.flag_pool = Some(pool);
    opts.families = vec![Family::V4, Family::V6];
    let (alloc_stop, alloc_stopped) = oneshot::channel::<()>();
    let alloc_client = fake.client();
    let allocator_task = tokio::spawn(async move {
        let metrics = Arc::new(AllocatorMetrics::new());
        allocator::run(alloc_client, opts, metrics, async {
            let _ = alloc_stopped.await;
        })
        .await
    });
    let mut shown = std::collections::BTreeSet::new();
    let t0 = Instant::now();
    while shown.len() < usize::from(n) {
        let _ = fake
            .wait_for(Duration::from_secs(1), |f| {
                (1..=n)
                    .filter(|i| !allocated(f, &node_name(*i)).is_empty())
                    .count()
                    > shown.len()
            })
            .await;
        for i in 1..=n {
            let a = allocated(&fake, &node_name(i));
            if !a.is_empty() && shown.insert(i) {
                println!("    {} → {}", node_name(i), a.join(", "));
            }
        }
        if t0.elapsed() > STEP_TIMEOUT {
            return Err(format!(
                "allocations: only {}/{n} after {STEP_TIMEOUT:?}",
                shown.len()
            ));
        }
    }

    step(
        4,
        "speakers: one per node, source ipam-crd, peering with the ToR",
    );
    let cni = CniDirs::new()?;
    let mut speakers = BTreeMap::new();
    for i in 1..=n {
        let s = start_speaker(&fake, i, collector.local_addr().port(), &cni.node(i)).await?;
        println!(
            "    {}: speaker admin endpoint http://{}",
            node_name(i),
            s.admin
        );
        speakers.insert(i, s);
    }
    let want = usize::from(n);
    wait_rib(&collector, "sessions Established", |r| {
        (r.values().filter(|t| t.established).count(), want)
    })
    .await?;
    println!("    {} Established", count(want, "session"));
    wait_rib(&collector, "routes at the ToR", |r| {
        (r.values().map(|t| t.routes.len()).sum(), 2 * want)
    })
    .await?;
    println!("    ToR routing table:");
    print_table(&collector.rib());

    step(
        5,
        "CNI: each speaker writes its node's conflist (bridge + host-local) from what it announces",
    );
    for i in 1..=n {
        let written = fake
            .wait_for_object(&nbs(), None, &node_name(i), STEP_TIMEOUT, |o| {
                o.is_some_and(|o| {
                    o["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "CNIConfigured" && c["status"] == "True")
                    })
                })
            })
            .await;
        if written.is_err() {
            return Err(format!("{}: no CNI config written", node_name(i)));
        }
        let path = cni.node(i).join(podcidr_config::DEFAULT_CNI_FILE_NAME);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        println!(
            "    {} pods get addresses from {} ({})",
            node_name(i),
            conflist_subnets(&text).join(", "),
            path.display()
        );
        if i == 1 {
            for line in text.lines() {
                println!("      {line}");
            }
        }
    }
    println!(
        "    (a container runtime runs the standard plugins with this file; the demo has no root, so no pod is created)"
    );

    step(
        6,
        "the classic incident: kube-controller-manager writes a different Node.spec.podCIDRs",
    );
    let victim = node_name(if n >= 2 { 2 } else { 1 });
    let other = format!("10.244.{}.0/24", 200);
    fake.update(&Gvr::nodes(), None, &victim, |node| {
        node["spec"]["podCIDRs"] = json!([other])
    })
    .map_err(|e| format!("{victim}: {e}"))?;
    println!(
        "    {victim}: Node.spec.podCIDRs = [{other}], NodePodCIDR says {}",
        allocated(&fake, &victim).join(", ")
    );
    let flagged = fake
        .wait_for_object(&nbs(), None, &victim, STEP_TIMEOUT, |o| {
            o.is_some_and(|o| {
                o["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "SourceMismatch" && c["status"] == "True")
                })
            })
        })
        .await;
    if flagged.is_err() {
        return Err(format!("{victim}'s speaker did not report the mismatch"));
    }
    println!("    the speaker keeps announcing what IPAM allocated, and reports the mismatch.");
    println!("    $ podcidr-bgp diff");
    let report = cli::diff_cluster(&fake.client(), &DiffOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    for line in cli::render::render_table(&report, TableStyle::default()).lines() {
        println!("    {line}");
    }

    service_step(&fake, &collector, n).await?;

    step(
        8,
        format!("node-{n} leaves the cluster: only its routes are withdrawn").as_str(),
    );
    let before = collector.prefixes();
    let gone = node_name(n);
    let _ = fake.delete(&Gvr::nodes(), None, &gone);
    if let Some(s) = speakers.remove(&n) {
        let _ = s.stop.send(());
        let _ = tokio::time::timeout(STEP_TIMEOUT, s.task).await;
    }
    let gone_id = router_id(n);
    wait_rib(&collector, "withdrawal", |r| {
        (usize::from(!r.contains_key(&gone_id)), 1)
    })
    .await?;
    let after = collector.prefixes();
    for p in before.keys().filter(|p| !after.contains_key(p)) {
        println!("    withdrawn: {p}");
    }
    println!("    {} remain:", count(after.len(), "route"));
    print_table(&collector.rib());

    if args.duration > 0 {
        println!("\nkeeping everything running for {}s …", args.duration);
        tokio::time::sleep(Duration::from_secs(args.duration)).await;
    }
    if args.keep_running {
        let path =
            std::env::temp_dir().join(format!("podcidr-demo-{}.kubeconfig", std::process::id()));
        fake.write_kubeconfig(&path).map_err(|e| e.to_string())?;
        println!("\nfake API: {}  (Ctrl-C to stop)", fake.url());
        println!("try:  podcidr-bgp diff --kubeconfig {}", path.display());
        println!("      podcidr-bgp peers --kubeconfig {}", path.display());
        println!("      podcidr-bgp routes --kubeconfig {}", path.display());
        if let Some(s) = speakers.values().next() {
            println!("      podcidr-bgp peers --admin http://{}", s.admin);
        }
        let _ = tokio::signal::ctrl_c().await;
        let _ = std::fs::remove_file(&path);
    }

    for (_, s) in speakers {
        let _ = s.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), s.task).await;
    }
    let _ = alloc_stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), allocator_task).await;
    println!("\ndone in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The demo's LoadBalancer address (documentation range).
const VIP: &str = "198.51.100.10";

/// Step 7: a `Local` LoadBalancer Service whose pods run on node-1 and node-2 (or node-1 alone
/// with one node) is announced from those nodes only; its pod on node-2 stops being ready and
/// node-2 withdraws it; `diff --services` says why per node.
async fn service_step(fake: &FakeKube, collector: &Collector, n: u8) -> Result<(), String> {
    let serving: Vec<u8> = (1..=n.min(2)).collect();
    step(
        7,
        &format!(
            "a LoadBalancer Service (externalTrafficPolicy: Local) with pods on {}",
            serving
                .iter()
                .map(|i| node_name(*i))
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    );
    let err = |e: fake_kube::ApiError| e.to_string();
    fake.insert(
        &Gvr::new("bgp.podcidr.io/v1beta1", "bgpadvertisements"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPAdvertisement",
               "metadata": {"name": "load-balancers"},
               "spec": {"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                        "allowedPrefixes": ["198.51.100.0/24"]}}),
    )
    .map_err(err)?;
    fake.insert(
        &Gvr::new("v1", "services"),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "shop"},
               "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                        "ports": [{"port": 80}]},
               "status": {"loadBalancer": {"ingress": [{"ip": VIP}]}}}),
    )
    .map_err(err)?;
    let endpoints: Vec<serde_json::Value> = serving
        .iter()
        .map(|i| {
            json!({"addresses": [format!("10.244.{}.5", i - 1)], "nodeName": node_name(*i),
                   "conditions": {"ready": true, "serving": true, "terminating": false}})
        })
        .collect();
    let slices = Gvr::new("discovery.k8s.io/v1", "endpointslices");
    fake.insert(
        &slices,
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "web-1", "namespace": "shop",
                            "labels": {"kubernetes.io/service-name": "web"}},
               "addressType": "IPv4", "endpoints": endpoints, "ports": [{"port": 8080}]}),
    )
    .map_err(err)?;
    println!(
        "    BGPAdvertisement load-balancers; Service shop/web at {VIP}; {}",
        count(serving.len(), "ready pod")
    );
    let vip: IpNet = format!("{VIP}/32").parse().map_err(|_| "VIP")?;
    let from = |r: &CollectorRib| r.values().filter(|t| t.routes.contains_key(&vip)).count();
    wait_rib(collector, "the Service route", |r| (from(r), serving.len())).await?;
    let announcing: Vec<String> = collector
        .prefixes()
        .get(&vip)
        .into_iter()
        .flatten()
        .filter_map(|id| (1..=n).find(|i| router_id(*i) == *id).map(node_name))
        .collect();
    println!("    {VIP}/32 announced from {}", announcing.join(", "));
    if let Some(&last) = serving.last().filter(|_| serving.len() > 1) {
        fake.update(&slices, Some("shop"), "web-1", |o| {
            o["endpoints"][1]["conditions"] =
                json!({"ready": false, "serving": false, "terminating": true})
        })
        .map_err(err)?;
        wait_rib(collector, "the withdrawal", |r| (from(r), 1)).await?;
        println!(
            "    {}'s pod stops being ready: {} withdraws the route, {} keeps it",
            node_name(last),
            node_name(last),
            node_name(1)
        );
    }
    // `diff` reads what each speaker reports it sends: wait until the reports say what the
    // ToR has (node-1 sends it, the others not).
    for i in 1..=n {
        let reported = fake
            .wait_for_object(&nbs(), None, &node_name(i), STEP_TIMEOUT, |o| {
                o.is_some_and(|o| {
                    let sends = o["status"]["peers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .flat_map(|p| p["routes"].as_array().into_iter().flatten())
                        .any(|r| r["prefix"] == format!("{VIP}/32"));
                    sends == (i == 1)
                })
            })
            .await;
        if reported.is_err() {
            return Err(format!(
                "{}: its report disagrees with the ToR",
                node_name(i)
            ));
        }
    }
    println!("    $ podcidr-bgp diff --services");
    let input = cli::load::load_services(&fake.client())
        .await
        .map_err(|e| e.to_string())?;
    let report = cli::services::services_diff(&input);
    for line in cli::services::render_table(&report, false).lines() {
        println!("    {line}");
    }
    Ok(())
}
