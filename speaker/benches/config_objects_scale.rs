//! Configuration objects at cluster scale: N speakers' watches (`--config-source
//! kubernetes`) against the in-process fake API server, and how long an edit takes to reach
//! them.
//!
//! Each simulated speaker runs the speaker's own code for it: its Node watch
//! (`daemon::kube::node::watch_node`, field selector on its name) and the objects task
//! (`daemon::kube::config_objects::spawn`: `BGPSpeakerConfig`s and `BGPPeer`s cluster-wide,
//! the MD5 Secret by name, the node's config worked out and its key file written). A speaker
//! has applied an edit when the config its task publishes runs the edited generation; the
//! core's own step after that (a reload diff) is microseconds and left out. Each speaker has
//! its own client and connection; its watches share it over HTTP/2 here, because a process
//! may hold 20,000 file descriptors on this machine and 5,000 speakers × 4 watches over
//! HTTP/1.1 would need that many on each side (the real speaker, kube-rs over HTTP/1.1,
//! opens one connection per watch). Requests are counted by the fake, the same either way.
//!
//! Then the one status writer (the allocator's leader, `config_status::run`) runs and 1,000
//! Nodes join: how many status writes, and watch events and bytes to the speakers, that costs
//! (issue 30 item 6: none).
//!
//! Run: `cargo bench -p podcidr-bgp --bench config_objects_scale -- [--speakers 5000]
//! [--edits 5] [--write-docs docs/benchmarks.md]`. Not part of `cargo test` (without
//! `--bench` it does nothing).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fake_kube::{FakeKube, Gvr, Verb};
use podcidr_bgp::daemon::ObjectSettings;
use podcidr_bgp::daemon::kube::{config_objects, node};
use podcidr_bgp::objects::{NodeConfig, ObjectKind};
use serde_json::json;
use tokio::sync::mpsc;
use tower_layer::Layer;

const BEGIN: &str = "<!-- config-objects:begin -->";
const END: &str = "<!-- config-objects:end -->";
const NS: &str = "podcidr-system";
/// Longest wait for every speaker to apply one change.
const LIMIT: Duration = Duration::from_secs(600);

struct Args {
    speakers: usize,
    edits: usize,
    docs: Option<PathBuf>,
}

fn parse_args() -> Option<Args> {
    let mut argv = std::env::args().skip(1);
    let mut a = Args {
        speakers: 5000,
        edits: 5,
        docs: None,
    };
    let mut bench = false;
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--bench" => bench = true,
            "--speakers" => a.speakers = argv.next()?.parse().ok()?,
            "--edits" => a.edits = argv.next()?.parse().ok()?,
            "--write-docs" => a.docs = Some(argv.next()?.into()),
            _ => {}
        }
    }
    bench.then_some(a)
}

fn bgp(plural: &str) -> Gvr {
    Gvr::new("bgp.podcidr.io/v1beta1", plural)
}

fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

/// A kube client of its own, on one HTTP/2 connection to the fake.
fn client(fake: &FakeKube) -> kube::Client {
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<kube::client::Body>();
    let base: http::Uri = fake.url().parse().expect("the fake's URL");
    let svc = kube::client::middleware::BaseUriLayer::new(base).layer(http);
    kube::Client::new(svc, "default")
}

/// The generation of `peer` in what a speaker runs, if it runs it.
fn peer_generation(c: &NodeConfig, peer: &str) -> Option<i64> {
    c.peers
        .iter()
        .find(|r| r.kind == ObjectKind::Peer && r.name == peer)
        .and_then(|r| r.generation)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

fn total(counts: &BTreeMap<(Verb, String), u64>) -> u64 {
    counts.values().sum()
}

fn by_verb(counts: &BTreeMap<(Verb, String), u64>) -> String {
    let mut v: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|((verb, res), n)| format!("{n} {verb:?} {res}").to_lowercase())
        .collect();
    v.sort();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Waits until `want` speakers reported `generation` of the peer; each speaker's first
/// report at (or past) it counts, measured from `t0`.
async fn arrivals(
    rx: &mut mpsc::UnboundedReceiver<(usize, i64, Instant)>,
    want: usize,
    generation: i64,
    t0: Instant,
) -> Result<Vec<Duration>, String> {
    let mut seen = vec![false; want];
    let mut out = Vec::with_capacity(want);
    let deadline = tokio::time::Instant::now() + LIMIT;
    while out.len() < want {
        let next = tokio::time::timeout_at(deadline, rx.recv()).await;
        let Ok(Some((i, g, at))) = next else {
            return Err(format!(
                "{} of {want} speakers applied generation {generation} within {LIMIT:?}",
                out.len()
            ));
        };
        if g >= generation && !std::mem::replace(&mut seen[i], true) {
            out.push(at.saturating_duration_since(t0));
        }
    }
    out.sort();
    Ok(out)
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

async fn run(args: &Args) -> Result<String, String> {
    let n = args.speakers;
    let fake = FakeKube::builder()
        .history_limit(100_000)
        .start()
        .await
        .map_err(|e| e.to_string())?;
    let io = |e: fake_kube::ApiError| e.to_string();
    for i in 0..n {
        fake.insert(
            &Gvr::nodes(),
            json!({"metadata": {"name": node_name(i), "labels": {"rack": format!("r{}", i % 50)}}}),
        )
        .map_err(io)?;
    }
    fake.insert(
        &bgp("bgpspeakerconfigs"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPSpeakerConfig",
               "metadata": {"name": "default"},
               "spec": {"asn": 64512, "source": {"kind": "ipam-crd"},
                        "allowedPrefixes": ["10.0.0.0/8"]}}),
    )
    .map_err(io)?;
    fake.insert(
        &bgp("bgppeers"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
               "metadata": {"name": "tor"},
               "spec": {"address": "default-gateway", "asn": 65000, "holdTime": 90,
                        "passwordSecretRef": {"name": "podcidr-bgp-md5", "key": "tor"}}}),
    )
    .map_err(io)?;
    let key = serde_json::to_value(k8s_openapi::ByteString(b"s3cret".to_vec()))
        .map_err(|e| e.to_string())?;
    fake.insert(
        &Gvr::new("v1", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "podcidr-bgp-md5", "namespace": NS}, "data": {"tor": key}}),
    )
    .map_err(io)?;

    let dir = integration_tests::TempDir::new("config-objects-scale");
    let (tx, mut rx) = mpsc::unbounded_channel();
    fake.reset_counters();
    let rss_before = rss_mib();
    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(3 * n);
    for i in 0..n {
        let client = client(&fake);
        let (node, node_task) = node::watch_node(client.clone(), &node_name(i));
        let settings = ObjectSettings {
            secret_namespace: NS.into(),
            key_dir: dir.path(&format!("keys-{i}")),
            // As shipped: each speaker keeps its last good objects on its disk.
            state_dir: Some(dir.path(&format!("state-{i}"))),
        };
        let (mut configs, task) = config_objects::spawn(client, settings, &node_name(i), node);
        let tx = tx.clone();
        let report = tokio::spawn(async move {
            while configs.changed().await.is_ok() {
                let now = Instant::now();
                let g = configs
                    .borrow_and_update()
                    .as_deref()
                    .and_then(|c| peer_generation(c, "tor"));
                if let Some(g) = g
                    && tx.send((i, g, now)).is_err()
                {
                    return;
                }
            }
        });
        tasks.extend([node_task, task, report]);
    }
    let start = arrivals(&mut rx, n, 1, t0).await?;
    let startup = *start.last().unwrap_or(&Duration::ZERO);
    let start_requests = fake.request_counts();
    let watches = fake.open_watches();
    let rss_speakers = rss_mib() - rss_before;

    let mut rows = Vec::new();
    let mut all = Vec::new();
    for e in 1..=args.edits {
        // Let the last change settle, then count only what the edit causes.
        tokio::time::sleep(Duration::from_secs(2)).await;
        fake.reset_counters();
        let t0 = Instant::now();
        let edited = fake
            .update(&bgp("bgppeers"), None, "tor", |o| {
                o["spec"]["holdTime"] = json!(90 + e);
            })
            .map_err(io)?;
        let generation = edited["metadata"]["generation"].as_i64().unwrap_or(0);
        let times = arrivals(&mut rx, n, generation, t0).await?;
        let counts = fake.request_counts();
        rows.push(format!(
            "| {e} | {generation} | {} | {} | {} | {} | {} |",
            times.len(),
            ms(percentile(&times, 0.5)),
            ms(percentile(&times, 0.99)),
            ms(*times.last().unwrap_or(&Duration::ZERO)),
            total(&counts),
        ));
        all.extend(times);
    }
    all.sort();
    let scale_up = scale_up(&fake, n).await?;
    for t in &tasks {
        t.abort();
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut out = String::new();
    out.push_str(&format!(
        "{n} simulated speakers (the speaker's own watch code, one client each) against the fake API server holding {n} Nodes, one `BGPSpeakerConfig` and one `BGPPeer` selecting every node, and the MD5 Secret it names. Edit: the `BGPPeer`'s `holdTime` changed (`metadata.generation` + 1); applied: the speaker's objects task publishes a config running that generation (key file written). Load average at the end: {}.\n\n",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    ));
    out.push_str(&format!(
        "Start-up: every speaker running generation 1 after {:.1} s (p50 {} ms); {} requests ({}), {watches} watches open, {:.0} MiB of RSS for the {n} speakers' tasks and watches.\n\n",
        startup.as_secs_f64(),
        ms(percentile(&start, 0.5)),
        total(&start_requests),
        by_verb(&start_requests),
        rss_speakers,
    ));
    out.push_str("| edit | generation | speakers applied | p50 ms | p99 ms | max ms | API requests caused |\n");
    out.push_str("|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in &rows {
        out.push_str(r);
        out.push('\n');
    }
    out.push_str(&format!(
        "| all | | {} | {} | {} | {} | |\n",
        all.len(),
        ms(percentile(&all, 0.5)),
        ms(percentile(&all, 0.99)),
        ms(*all.last().unwrap_or(&Duration::ZERO)),
    ));
    out.push_str(&scale_up);
    drop(dir);
    Ok(out)
}

/// Nodes added while the speakers run: what the one status writer's answer costs the
/// speakers (issue 30 item 6: status without fan-out).
const SCALE_UP_NODES: usize = 1000;

/// The status writer (the allocator's, leading) runs; once it has written both objects'
/// status, 1,000 Nodes join in batches of 100 a second (a cluster-autoscaler scale-up),
/// then the writer's settle period passes. Counts the status writes and the watch bytes the
/// fake sends on the two kinds' watches: `n` speakers' and the writer's own one.
async fn scale_up(fake: &FakeKube, n: usize) -> Result<String, String> {
    use ipam_watch::allocator::{AllocatorMetrics, LeaderState};
    use podcidr_bgp::config_status::{self, StatusSettings};
    let (lead, leadership) = tokio::sync::watch::channel(LeaderState::Leader {
        valid_until: std::time::Instant::now() + Duration::from_secs(3600),
    });
    let writer = tokio::spawn(config_status::run(
        client(fake),
        StatusSettings {
            secret_namespace: NS.into(),
        },
        leadership,
        std::sync::Arc::new(AllocatorMetrics::new()),
    ));
    let written = |plural: &str, name: &str| {
        fake.get(&bgp(plural), None, name)
            .is_some_and(|o| o["status"]["conditions"].is_array())
    };
    let t0 = Instant::now();
    while !(written("bgppeers", "tor") && written("bgpspeakerconfigs", "default")) {
        if t0.elapsed() > LIMIT {
            return Err("the status writer wrote nothing".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Its first writes' own watch events drain, then only what the scale-up causes counts.
    tokio::time::sleep(Duration::from_secs(5)).await;
    fake.reset_counters();
    let io = |e: fake_kube::ApiError| e.to_string();
    for batch in 0..SCALE_UP_NODES / 100 {
        for i in 0..100 {
            let j = n + batch * 100 + i;
            fake.insert(
                &Gvr::nodes(),
                json!({"metadata": {"name": node_name(j), "labels": {"rack": format!("r{}", j % 50)}}}),
            )
            .map_err(io)?;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Two settle periods of the writer, and its writes delivered.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let traffic = fake.traffic();
    let of = |verb: Verb, resource: &str| {
        traffic
            .get(&(verb, resource.to_owned()))
            .cloned()
            .unwrap_or_default()
    };
    let status_writes = ["bgppeers/status", "bgpspeakerconfigs/status"]
        .iter()
        .map(|r| of(Verb::Patch, r).requests + of(Verb::Update, r).requests)
        .sum::<u64>();
    let watch_bytes =
        of(Verb::Watch, "bgppeers").bytes_out + of(Verb::Watch, "bgpspeakerconfigs").bytes_out;
    let watch_events =
        of(Verb::Watch, "bgppeers").objects_out + of(Verb::Watch, "bgpspeakerconfigs").objects_out;
    drop(lead);
    writer.abort();
    Ok(format!(
        "\nScale-up with the status writer running (the allocator's leader, `config_status::run`): {SCALE_UP_NODES} Nodes join in batches of 100 a second while the {n} speakers watch. Status writes: {status_writes}; watch events sent on the two kinds' watches ({n} speakers' and the writer's own): {watch_events}, {:.1} MiB.\n",
        watch_bytes as f64 / (1024.0 * 1024.0)
    ))
}

fn main() {
    let Some(args) = parse_args() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match rt.block_on(run(&args)) {
        Ok(table) => {
            println!("{table}");
            if let Some(docs) = &args.docs
                && let Err(e) = integration_tests::write_docs_section(docs, BEGIN, END, &table)
            {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("config_objects_scale: {e}");
            std::process::exit(1);
        }
    }
}
