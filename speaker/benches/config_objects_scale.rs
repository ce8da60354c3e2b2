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
//! Then the one status writer (the allocator's leader, `config_status::run`) runs and a
//! session-resetting edit rolls out in waves (issue 30 item 3): how long until every node
//! runs it, the most sessions down at any moment, and the API requests, beside the same edit
//! with `rollout.waves: ["100%"]` (every node at once, as without the writer). Sessions and
//! NodeBGPStatus reports are simulated (`tests/support/fleet.rs`: a session is down from the
//! reset until a reconnect time later; the reports are written in-process, two per node and
//! edit, and not among the counted requests). Then 1,000 Nodes join: how many status writes,
//! and watch events and bytes to the speakers, that costs (issue 30 item 6: none).
//!
//! Run: `cargo bench -p podcidr-bgp --bench config_objects_scale -- [--speakers 5000]
//! [--edits 5] [--write-docs docs/benchmarks.md]`. Not part of `cargo test` (without
//! `--bench` it does nothing).

#[path = "../tests/support/fleet.rs"]
mod fleet;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_kube::{FakeKube, Gvr, Verb};
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

/// How long a simulated session takes to come back after a reset (a graceful-restart
/// close, then the reconnect).
const RECONNECT: Duration = Duration::from_secs(2);

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
    let fake = Arc::new(
        FakeKube::builder()
            .history_limit(100_000)
            .start()
            .await
            .map_err(|e| e.to_string())?,
    );
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
    fake.reset_counters();
    let rss_before = rss_mib();
    let t0 = Instant::now();
    let nodes: Vec<String> = (0..n).map(node_name).collect();
    let mut fleet = fleet::start(
        &fake,
        &nodes,
        &|_| client(&fake),
        &BTreeSet::new(),
        RECONNECT,
        dir.path("fleet").as_path(),
    );
    let rx = &mut fleet.applied;
    let start = arrivals(rx, n, 1, t0).await?;
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
        let times = arrivals(rx, n, generation, t0).await?;
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
    let rollout = rollout(&fake, n, &mut fleet).await?;
    let scale_up = scale_up(&fake, n).await?;
    drop(fleet);
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
    out.push_str(&rollout);
    out.push_str(&scale_up);
    drop(dir);
    Ok(out)
}

/// The status writer, leading, until the returned sender is dropped.
fn status_writer(
    fake: &FakeKube,
) -> (
    tokio::sync::watch::Sender<ipam_watch::allocator::LeaderState>,
    tokio::task::JoinHandle<()>,
) {
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
    (lead, writer)
}

/// Awaits the peer's `status.rollout` satisfying `pred` (bounded by [`LIMIT`]).
async fn rollout_when(
    fake: &FakeKube,
    what: &str,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> Result<(), String> {
    let rollout = |o: Option<&serde_json::Value>| {
        o.map_or(serde_json::Value::Null, |o| o["status"]["rollout"].clone())
    };
    fake.wait_for_object(&bgp("bgppeers"), None, "tor", LIMIT, |o| pred(&rollout(o)))
        .await
        .map(|_| ())
        .map_err(|_| {
            let now = rollout(fake.get(&bgp("bgppeers"), None, "tor").as_ref());
            format!("{what}: rollout {now}")
        })
}

/// A session-resetting edit (the peer's hold time) with the default waves, then the same
/// kind of edit with `rollout.waves: ["100%"]` (every node at once).
async fn rollout(fake: &FakeKube, n: usize, fleet: &mut fleet::Fleet) -> Result<String, String> {
    let (lead, writer) = status_writer(fake);
    rollout_when(fake, "the writer's first status", |r| {
        r["state"] == "Complete"
    })
    .await?;
    let io = |e: fake_kube::ApiError| e.to_string();
    let mut rows = Vec::new();
    for (what, waves) in [
        ("default waves (1, 5, 10, 25, 50, 75, 100%)", None),
        ("`waves: [\"100%\"]` (at once)", Some(json!(["100%"]))),
    ] {
        // What came before is delivered and its sessions are back.
        tokio::time::sleep(RECONNECT + Duration::from_secs(3)).await;
        while fleet.applied.try_recv().is_ok() {}
        fleet.down.reset_max();
        fake.reset_counters();
        let t0 = Instant::now();
        let edited = fake
            .update(&bgp("bgppeers"), None, "tor", |o| {
                let hold = o["spec"]["holdTime"].as_u64().unwrap_or(90);
                o["spec"]["holdTime"] = json!(hold + 1);
                if let Some(w) = &waves {
                    o["spec"]["rollout"] = json!({"waves": w});
                }
            })
            .map_err(io)?;
        let generation = edited["metadata"]["generation"].as_i64().unwrap_or(0);
        let times = arrivals(&mut fleet.applied, n, generation, t0).await?;
        let reached = *times.last().unwrap_or(&Duration::ZERO);
        rollout_when(fake, "the rollout completes", |r| {
            r["generation"] == generation && r["state"] == "Complete"
        })
        .await?;
        let complete = t0.elapsed();
        let counts = fake.request_counts();
        rows.push(format!(
            "| {what} | {n} | {:.1} | {:.1} | {} | {} ({}) |",
            reached.as_secs_f64(),
            complete.as_secs_f64(),
            fleet.down.max(),
            total(&counts),
            by_verb(&counts),
        ));
    }
    drop(lead);
    writer.abort();
    let mut out = format!(
        "\nRollout of a session-resetting edit (the `BGPPeer`'s `holdTime`) with the status writer running: simulated sessions come back {} s after their reset. Time to every node: until the last speaker runs the generation; to complete: until `status.rollout.state` is `Complete`.\n\n",
        RECONNECT.as_secs()
    );
    out.push_str("| rollout | nodes | s to every node | s to Complete | most sessions down at once | API requests caused |\n");
    out.push_str("|---|---:|---:|---:|---:|---|\n");
    for r in rows {
        out.push_str(&r);
        out.push('\n');
    }
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
    let (lead, writer) = status_writer(fake);
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
