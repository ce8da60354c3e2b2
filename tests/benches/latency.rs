//! Change → wire latency: a pod-CIDR change at the source (a `NodePodCIDR` update through the
//! in-process fake API, or a file rewrite), or a Service endpoint becoming ready (an
//! EndpointSlice update, with as many Services as changes and a `BGPAdvertisement`), until
//! the UPDATE reaches a timestamping peer (the bgp-proto collector). The speaker runs as a
//! child process (release build).
//!
//! Run: `cargo bench -p integration-tests --bench latency -- --speaker PATH [--changes 1000]
//! [--file-poll-ms 10] [--mode api|file|service|both|service-scale]` (`both`: the first
//! three; `service-scale [--rate 50] [--window-s 120]`: one speaker among 5,000 nodes and
//! 10,000 Services under endpoint churn, see `latency/service_scale.rs`). Not part of
//! `cargo test`.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig};
use fake_kube::{FakeKube, Gvr};
use ipnet::{IpNet, Ipv4Net};
use serde_json::json;
use tokio::time::Instant;

const ID: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 21);
const WAIT: Duration = Duration::from_secs(10);

#[path = "latency/service_scale.rs"]
mod service_scale;

struct Args {
    speaker: PathBuf,
    changes: u32,
    file_poll_ms: u64,
    mode: String,
    gap: Duration,
    /// `service-scale`: EndpointSlice changes per second, and for how long.
    rate: u32,
    window_s: u64,
}

fn parse_args() -> Option<Args> {
    let mut argv = std::env::args().skip(1);
    let mut a = Args {
        speaker: integration_tests::dist_binary(),
        changes: 1000,
        file_poll_ms: 10,
        mode: "both".into(),
        gap: Duration::from_millis(5),
        rate: 50,
        window_s: 120,
    };
    let mut bench = false;
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--bench" => bench = true,
            "--speaker" => a.speaker = argv.next()?.into(),
            "--changes" => a.changes = argv.next()?.parse().ok()?,
            "--file-poll-ms" => a.file_poll_ms = argv.next()?.parse().ok()?,
            "--mode" => a.mode = argv.next()?,
            "--gap-ms" => a.gap = Duration::from_millis(argv.next()?.parse().ok()?),
            "--rate" => a.rate = argv.next()?.parse().ok()?,
            "--window-s" => a.window_s = argv.next()?.parse().ok()?,
            _ => {}
        }
    }
    // `cargo test --benches` runs this without --bench: do nothing then.
    bench.then_some(a)
}

fn prefix(i: u32) -> Ipv4Net {
    // The i-th /26 of 10.244.0.0/16: every change announces a prefix not seen before.
    Ipv4Net::new(Ipv4Addr::from(0x0af4_0000 + ((i % 1024) << 6)), 26).unwrap_or_default()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(19180)
}

fn config(source: &str, collector_port: u16) -> String {
    format!(
        "nodeName: node-a\nasn: 4200000001\nrouterId: {ID}\nsource: {source}\n\
         allowedPrefixes: [10.244.0.0/16]\nnextHop: {{ipv4: self}}\n\
         admin: {{listen: \"127.0.0.1:{admin}\"}}\nlog: {{level: warn}}\n\
         peers:\n  - name: tor\n    address: 127.0.0.1\n    port: {collector_port}\n    \
         asn: 65000\n    families: [ipv4-unicast]\n    gracefulRestart: {{enabled: false}}\n",
        admin = free_port()
    )
}

fn spawn(speaker: &Path, dir: &Path, extra: &[&str]) -> std::io::Result<Child> {
    let log = std::fs::File::create(dir.join("speaker.log"))?;
    Command::new(speaker)
        .arg("speaker")
        .arg("--config")
        .arg(dir.join("config.yaml"))
        .args(extra)
        .stdout(log.try_clone()?)
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
}

fn stop(child: &mut Child) {
    integration_tests::stop_child(child, Duration::from_secs(5));
}

/// Applies `change(i)` for every i and measures until `prefix(i)` arrives at the collector.
async fn measure<F: FnMut(u32)>(collector: &Collector, args: &Args, change: F) -> Vec<f64> {
    measure_to(collector, args, |i| IpNet::V4(prefix(i)), change).await
}

/// Applies `change(i)` for every i and measures until `target(i)` arrives at the collector.
async fn measure_to<F: FnMut(u32)>(
    collector: &Collector,
    args: &Args,
    target: impl Fn(u32) -> IpNet,
    mut change: F,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(args.changes as usize);
    for i in 1..=args.changes {
        let p = target(i);
        let t0 = Instant::now();
        change(i);
        let mut seen = None;
        let ok = collector
            .wait_for(WAIT, |rib| {
                seen = rib
                    .get(&ID)
                    .and_then(|t| t.routes.get(&p))
                    .map(|r| r.received_at)
                    .filter(|at| *at >= t0);
                seen.is_some()
            })
            .await;
        match seen {
            Some(at) if ok => out.push((at - t0).as_secs_f64() * 1e3),
            _ => eprintln!("change {i}: {p} not received within {WAIT:?}"),
        }
        tokio::time::sleep(args.gap).await;
    }
    out
}

/// Prints the row; false unless every change arrived.
fn report(mode: &str, mut ms: Vec<f64>, wanted: u32) -> bool {
    ms.sort_by(f64::total_cmp);
    let q = |f: f64| {
        let idx = ((ms.len() as f64 - 1.0) * f).round() as usize;
        ms.get(idx).copied().unwrap_or(f64::NAN)
    };
    println!(
        "| {mode} | {}/{wanted} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
        ms.len(),
        q(0.0),
        q(0.5),
        q(0.9),
        q(0.99),
        q(1.0)
    );
    ms.len() == wanted as usize
}

async fn wait_first(collector: &Collector, p: IpNet) -> bool {
    collector
        .wait_for(Duration::from_secs(30), |rib| {
            rib.get(&ID).is_some_and(|t| t.routes.contains_key(&p))
        })
        .await
}

fn write_file(path: &Path, cidr: Ipv4Net) {
    let tmp = path.with_extension("tmp");
    let body = format!("nodes:\n  node-a: [{cidr}]\n");
    if std::fs::write(&tmp, body)
        .and_then(|()| std::fs::rename(&tmp, path))
        .is_err()
    {
        eprintln!("cannot write {}", path.display());
    }
}

/// Ok(true) when every change arrived.
async fn run_api(args: &Args, dir: &Path) -> std::io::Result<bool> {
    let npc = Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs");
    let fake = FakeKube::start().await?;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
        "spec": {"podCIDRs": []}});
    let first =
        json!({"metadata": {"name": "node-a"}, "spec": {"podCIDRs": [prefix(0).to_string()]}});
    let inserted = fake
        .insert(&Gvr::nodes(), node)
        .and_then(|_| fake.insert(&npc, first));
    if let Err(e) = inserted {
        return Err(std::io::Error::other(format!("{e:?}")));
    }
    let collector = Collector::start(CollectorConfig::new(
        "127.0.0.1:0"
            .parse()
            .unwrap_or_else(|_| ([127, 0, 0, 1], 0).into()),
    ))
    .await?;
    let kubeconfig = dir.join("kubeconfig");
    fake.write_kubeconfig(&kubeconfig)?;
    let cfg = config("{kind: ipam-crd}", collector.local_addr().port());
    std::fs::write(dir.join("config.yaml"), cfg)?;
    let kc = kubeconfig.to_string_lossy().into_owned();
    let mut child = spawn(&args.speaker, dir, &["--kubeconfig", &kc])?;
    let all = if wait_first(&collector, IpNet::V4(prefix(0))).await {
        let ms = measure(&collector, args, |i| {
            let set = json!([prefix(i).to_string()]);
            if fake
                .update(&npc, None, "node-a", |o| o["spec"]["podCIDRs"] = set)
                .is_err()
            {
                eprintln!("update {i} failed");
            }
        })
        .await;
        report("API (`NodePodCIDR` update)", ms, args.changes)
    } else {
        eprintln!(
            "api: the speaker never announced; see {}/speaker.log",
            dir.display()
        );
        false
    };
    stop(&mut child);
    Ok(all)
}

/// Ok(true) when every change arrived.
async fn run_file(args: &Args, dir: &Path) -> std::io::Result<bool> {
    let collector = Collector::start(CollectorConfig::new(([127, 0, 0, 1], 0).into())).await?;
    let file = dir.join("cidrs.yaml");
    write_file(&file, prefix(0));
    let source = format!("{{kind: file, path: {}}}", file.display());
    std::fs::write(
        dir.join("config.yaml"),
        config(&source, collector.local_addr().port()),
    )?;
    let poll = args.file_poll_ms.to_string();
    let mut child = spawn(&args.speaker, dir, &["--file-poll-ms", &poll])?;
    let all = if wait_first(&collector, IpNet::V4(prefix(0))).await {
        let ms = measure(&collector, args, |i| write_file(&file, prefix(i))).await;
        report(
            &format!("file rewrite (inotify; poll {poll} ms)"),
            ms,
            args.changes,
        )
    } else {
        eprintln!(
            "file: the speaker never announced; see {}/speaker.log",
            dir.display()
        );
        false
    };
    stop(&mut child);
    Ok(all)
}

/// One `BGPAdvertisement` for every Service's LoadBalancer address in 198.18.0.0/15.
fn insert_advertisement(fake: &FakeKube) -> std::io::Result<()> {
    fake.insert(
        &Gvr::new("bgp.podcidr.io/v1beta1", "bgpadvertisements"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPAdvertisement",
               "metadata": {"name": "lb"},
               "spec": {"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                        "allowedPrefixes": ["198.18.0.0/15"]}}),
    )
    .map(|_| ())
    .map_err(|e| std::io::Error::other(format!("{e:?}")))
}

/// The i-th Service's LoadBalancer address (198.18.0.0/15, the benchmarking range).
fn service_ip(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(0xc612_0000 + i)
}

/// Service `i`'s one EndpointSlice: one endpoint on node-a, ready or not.
fn service_slice(i: u32, ready: bool) -> serde_json::Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc-{i}-1"), "namespace": "bench",
                     "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.244.0.5"], "nodeName": "node-a",
                       "conditions": {"ready": ready, "serving": ready, "terminating": false}}]})
}

/// Ok(true) when every change arrived: endpoint ready → the Service's /32 on the wire, with
/// `changes` LoadBalancer Services (`externalTrafficPolicy: Local`) known to the speaker.
async fn run_service(args: &Args, dir: &Path) -> std::io::Result<bool> {
    let fake = FakeKube::start().await?;
    let err = |e: fake_kube::ApiError| std::io::Error::other(format!("{e:?}"));
    fake.insert(
        &Gvr::nodes(),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
               "spec": {"podCIDRs": [prefix(0).to_string()]}}),
    )
    .map_err(err)?;
    insert_advertisement(&fake)?;
    let slices = Gvr::new("discovery.k8s.io/v1", "endpointslices");
    for i in 1..=args.changes {
        fake.insert(
            &Gvr::new("v1", "services"),
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": format!("svc-{i}"), "namespace": "bench"},
                   "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                            "ports": [{"port": 80}]},
                   "status": {"loadBalancer": {"ingress": [{"ip": service_ip(i).to_string()}]}}}),
        )
        .map_err(err)?;
        fake.insert(&slices, service_slice(i, false)).map_err(err)?;
    }
    let collector = Collector::start(CollectorConfig::new(([127, 0, 0, 1], 0).into())).await?;
    let kubeconfig = dir.join("kubeconfig");
    fake.write_kubeconfig(&kubeconfig)?;
    let cfg = config("{kind: node-spec}", collector.local_addr().port());
    std::fs::write(dir.join("config.yaml"), cfg)?;
    let kc = kubeconfig.to_string_lossy().into_owned();
    let mut child = spawn(&args.speaker, dir, &["--kubeconfig", &kc])?;
    let all = if wait_first(&collector, IpNet::V4(prefix(0))).await {
        let target = |i| IpNet::from(std::net::IpAddr::V4(service_ip(i)));
        let ms = measure_to(&collector, args, target, |i| {
            if fake.insert(&slices, service_slice(i, true)).is_err() {
                eprintln!("endpoint {i}: update failed");
            }
        })
        .await;
        report(
            &format!(
                "Service endpoint ready (EndpointSlice update, {} Services)",
                args.changes
            ),
            ms,
            args.changes,
        )
    } else {
        eprintln!(
            "service: the speaker never announced; see {}/speaker.log",
            dir.display()
        );
        false
    };
    stop(&mut child);
    Ok(all)
}

/// Exits 1 unless every change of every measured source arrived (bench/run.sh relies on it).
fn main() -> std::process::ExitCode {
    let Some(args) = parse_args() else {
        return std::process::ExitCode::SUCCESS;
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    let base = std::env::temp_dir().join(format!("podcidr-latency-{}", std::process::id()));
    println!("| source | changes received | min ms | p50 ms | p90 ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let modes = [
        ("api", "api"),
        ("file", "file"),
        ("service", "service"),
        ("service-scale", "service-scale"),
    ];
    for (mode, sub) in modes {
        // `both` is the three sources; the fleet-scale run only when asked for.
        let wanted = args.mode == mode || (args.mode == "both" && mode != "service-scale");
        if !wanted {
            continue;
        }
        let dir = base.join(sub);
        let made = std::fs::create_dir_all(&dir);
        let res = made.and_then(|()| {
            rt.block_on(async {
                match mode {
                    "api" => run_api(&args, &dir).await,
                    "service" => run_service(&args, &dir).await,
                    "service-scale" => service_scale::run(&args, &dir).await,
                    _ => run_file(&args, &dir).await,
                }
            })
        });
        match res {
            Ok(all) => ok &= all,
            Err(e) => {
                eprintln!("{mode}: {e}");
                ok = false;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
