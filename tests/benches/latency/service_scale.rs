//! `--mode service-scale`: one speaker in a large cluster's Service churn (issue 33, "Scale").
//! The fake API holds 5,000 Nodes, 10,000 LoadBalancer Services (1,000 `Local`, each with a
//! not-yet-ready endpoint on the speaker's node and two ready ones elsewhere; 9,000 `Cluster`,
//! three ready endpoints elsewhere), one EndpointSlice each, and a `BGPAdvertisement` selecting
//! them all. After the speaker announces its 9,000 `Cluster` addresses, a churn of
//! `--rate` EndpointSlice changes per second runs for `--window-s`: most flip a ready
//! condition on another node (what a speaker must hear but rarely acts on), one in ten makes
//! a `Local` Service's endpoint on the speaker's node ready, and its latency to the UPDATE is
//! measured. What one speaker costs and holds is the same for each of a fleet's speakers:
//! they all watch the same cluster-wide kinds, so the API server sends N times the bytes.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig};
use fake_kube::{FakeKube, Gvr};
use ipnet::IpNet;
use serde_json::json;
use tokio::time::Instant;

use super::{Args, ID, config, insert_advertisement, prefix, report, spawn, stop, wait_first};

const NODES: u32 = 5_000;
const SERVICES: u32 = 10_000;
const LOCAL: u32 = 1_000;

fn vip(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(0xc612_0000 + i)
}

/// The remote nodes of Service `i` (never the speaker's node-a).
fn remote(i: u32, k: u32) -> String {
    format!("node-{}", (i * 7 + k * 1_301) % (NODES - 1) + 1)
}

/// Service `i`'s one slice: `ready[0]` is its endpoint on node-a (`Local` Services only),
/// the rest on other nodes.
fn slice(i: u32, ready: [bool; 4]) -> serde_json::Value {
    let mut endpoints = Vec::new();
    for (k, r) in ready.iter().enumerate() {
        let k = k as u32;
        let node = match k {
            0 if i <= LOCAL => "node-a".to_owned(),
            0 => continue,
            _ if i <= LOCAL && k == 3 => continue,
            _ => remote(i, k),
        };
        endpoints.push(
            json!({"addresses": [format!("10.{}.{}.{}", k + 1, i / 256 % 256, i % 256)],
            "nodeName": node, "conditions": {"ready": r, "serving": r, "terminating": false}}),
        );
    }
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc-{i}-1"), "namespace": "bench",
                     "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
        "addressType": "IPv4", "endpoints": endpoints, "ports": [{"port": 8080}]})
}

/// utime + stime of `pid`, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit(')').next().unwrap_or_default();
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
    (ticks(11) + ticks(12)) / 100.0
}

/// `VmRSS` and `VmHWM` of `pid`, MiB.
fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

/// Requests, objects and MiB the fake sent, over every kind.
fn traffic(fake: &FakeKube) -> (u64, u64, f64) {
    let t = fake.traffic_total();
    (t.requests, t.objects_out, t.bytes_out as f64 / 1_048_576.0)
}

/// A small deterministic generator (xorshift): the same churn every run.
struct Churn(u64);

impl Churn {
    fn next(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % u64::from(n)) as u32
    }
}

pub async fn run(args: &Args, dir: &Path) -> std::io::Result<bool> {
    let fake = FakeKube::start().await?;
    let err = |e: fake_kube::ApiError| std::io::Error::other(format!("{e:?}"));
    let node = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
               "spec": {"podCIDRs": [prefix(0).to_string()]}})
    };
    fake.insert(&Gvr::nodes(), node("node-a")).map_err(err)?;
    for n in 1..NODES {
        fake.insert(&Gvr::nodes(), node(&format!("node-{n}")))
            .map_err(err)?;
    }
    insert_advertisement(&fake)?;
    let slices = Gvr::new("discovery.k8s.io/v1", "endpointslices");
    let mut ready: BTreeMap<u32, [bool; 4]> = BTreeMap::new();
    for i in 1..=SERVICES {
        let policy = if i <= LOCAL { "Local" } else { "Cluster" };
        fake.insert(
            &Gvr::new("v1", "services"),
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": format!("svc-{i}"), "namespace": "bench",
                                "labels": {"app": format!("svc-{i}")}},
                   "spec": {"type": "LoadBalancer", "externalTrafficPolicy": policy,
                            "clusterIP": format!("10.96.{}.{}", i / 256, i % 256),
                            "ports": [{"port": 80, "targetPort": 8080}]},
                   "status": {"loadBalancer": {"ingress": [{"ip": vip(i).to_string()}]}}}),
        )
        .map_err(err)?;
        let r = [false, true, true, true];
        ready.insert(i, r);
        fake.insert(&slices, slice(i, r)).map_err(err)?;
    }
    let collector = Collector::start(CollectorConfig::new(([127, 0, 0, 1], 0).into())).await?;
    let kubeconfig = dir.join("kubeconfig");
    fake.write_kubeconfig(&kubeconfig)?;
    std::fs::write(
        dir.join("config.yaml"),
        config("{kind: node-spec}", collector.local_addr().port()),
    )?;
    let kc = kubeconfig.to_string_lossy().into_owned();
    fake.reset_counters();
    let started = Instant::now();
    let mut child = spawn(&args.speaker, dir, &["--kubeconfig", &kc])?;
    let pid = child.id();
    let cluster_routes = (SERVICES - LOCAL) as usize;
    let up = wait_first(&collector, IpNet::V4(prefix(0))).await
        && collector
            .wait_for(Duration::from_secs(120), |rib| {
                rib.get(&ID)
                    .is_some_and(|t| t.routes.len() > cluster_routes)
            })
            .await;
    if !up {
        eprintln!(
            "service-scale: the speaker never announced the Cluster Services; see {}/speaker.log",
            dir.display()
        );
        stop(&mut child);
        return Ok(false);
    }
    let to_up = started.elapsed().as_secs_f64();
    let (start_requests, start_objects, start_mib) = traffic(&fake);
    let (rss_up, _) = rss_mib(pid);
    fake.reset_counters();
    let cpu0 = cpu_seconds(pid);
    let window = Duration::from_secs(args.window_s);
    let rate = args.rate.max(1);
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    let mut churn = Churn(0x9e37_79b9_7f4a_7c15);
    let mut measured: Vec<(u32, Instant)> = Vec::new();
    let mut changes = 0u64;
    let t0 = Instant::now();
    while t0.elapsed() < window {
        tick.tick().await;
        changes += 1;
        let (i, r) = if changes.is_multiple_of(10) && (measured.len() as u32) < LOCAL {
            // The next Local Service becomes ready here.
            let i = measured.len() as u32 + 1;
            let r = ready.get_mut(&i).map(|r| {
                r[0] = true;
                *r
            });
            measured.push((i, Instant::now()));
            (i, r)
        } else {
            let i = churn.next(SERVICES) + 1;
            let k = churn.next(2) as usize + 1;
            let r = ready.get_mut(&i).map(|r| {
                r[k] = !r[k];
                *r
            });
            (i, r)
        };
        if let Some(r) = r
            && fake.insert(&slices, slice(i, r)).is_err()
        {
            eprintln!("service-scale: slice {i}: update failed");
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid) - cpu0;
    let (churn_requests, churn_objects, churn_mib) = traffic(&fake);
    let requests: Vec<String> = fake
        .traffic()
        .into_iter()
        .map(|((verb, resource), t)| format!("{verb:?} {resource}: {}", t.requests))
        .collect();
    let (rss_end, hwm) = rss_mib(pid);
    // Every measured address, bounded: the last ones were sent just now.
    let targets: Vec<IpNet> = measured
        .iter()
        .map(|(i, _)| IpNet::from(std::net::IpAddr::V4(vip(*i))))
        .collect();
    collector
        .wait_for(Duration::from_secs(10), |rib| {
            rib.get(&ID)
                .is_some_and(|t| targets.iter().all(|p| t.routes.contains_key(p)))
        })
        .await;
    let mut ms = Vec::new();
    collector
        .wait_for(Duration::ZERO, |rib| {
            if let Some(t) = rib.get(&ID) {
                for ((i, at), p) in measured.iter().zip(&targets) {
                    match t.routes.get(p).map(|r| r.received_at).filter(|r| r >= at) {
                        Some(r) => ms.push((r - *at).as_secs_f64() * 1e3),
                        None => eprintln!("service-scale: svc-{i} not announced"),
                    }
                }
            }
            true
        })
        .await;
    stop(&mut child);
    let per_hour = |v: f64| v * 3600.0 / elapsed;
    println!(
        "\nservice-scale: {NODES} nodes, {SERVICES} Services ({LOCAL} Local), {changes} EndpointSlice changes in {elapsed:.0} s ({:.1}/s)",
        changes as f64 / elapsed
    );
    println!(
        "churn requests by verb and resource: {}",
        requests.join(", ")
    );
    println!(
        "| start-up: requests, objects, MiB received (s to all announced) | churn: requests/h | churn: objects/h | churn: MiB received/h | speaker CPU during churn | RSS after start-up MiB | RSS end (peak) MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {start_requests}, {start_objects}, {start_mib:.1} ({to_up:.1} s) | {:.0} | {:.0} | {:.1} | {:.1} % | {rss_up:.1} | {rss_end:.1} ({hwm:.1}) |",
        per_hour(churn_requests as f64),
        per_hour(churn_objects as f64),
        per_hour(churn_mib),
        cpu / elapsed * 100.0,
    );
    println!();
    println!("| source | changes received | min ms | p50 ms | p90 ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let wanted = measured.len() as u32;
    Ok(report(
        &format!(
            "Local endpoint ready on the node, amid {:.0} changes/s ({SERVICES} Services, {NODES} nodes)",
            changes as f64 / elapsed
        ),
        ms,
        wanted,
    ))
}
