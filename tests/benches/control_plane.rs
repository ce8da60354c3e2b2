//! Control plane at cluster scale: what one idle speaker costs the API server in a cluster
//! of N nodes, and what `podcidr-bgp diff` costs over all of them.
//!
//! The fake API server (`fake-kube`, real HTTP on loopback) holds N dual-stack Nodes,
//! `NodePodCIDR`s, `NodeBGPStatus`es and speaker Leases. One speaker (the release binary, a
//! child process, with a BGP collector as its router) runs for an actual idle window; the
//! fake's counters say what it sent and received. `diff` (the same binary) then reads the
//! whole cluster: wall time and peak RSS (`wait4` rusage) per run.
//!
//! Run: `cargo bench -p integration-tests --bench control_plane -- [--speaker PATH]
//! [--window 600] [--sizes 100,5000] [--diff-runs 3] [--write-docs docs/benchmarks.md]`.
//! Not part of `cargo test` (without `--bench` it does nothing).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bgp_io::collector::{Collector, CollectorConfig};
use fake_kube::{FakeKube, Gvr, RequestRecord, Traffic, Verb};
use integration_tests::TempDir;
use serde_json::{Value, json};

const ME: usize = 42;
const NS: &str = "podcidr-system";
const WAIT: Duration = Duration::from_secs(60);
const BEGIN: &str = "<!-- control-plane:begin -->";
const END: &str = "<!-- control-plane:end -->";

struct Args {
    speaker: PathBuf,
    window: Duration,
    sizes: Vec<usize>,
    diff_runs: usize,
    docs: Option<PathBuf>,
}

fn parse_args() -> Option<Args> {
    let mut argv = std::env::args().skip(1);
    let mut a = Args {
        speaker: integration_tests::dist_binary(),
        window: Duration::from_secs(600),
        sizes: vec![100, 5000],
        diff_runs: 3,
        docs: None,
    };
    let mut bench = false;
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--bench" => bench = true,
            "--speaker" => a.speaker = argv.next()?.into(),
            "--window" => a.window = Duration::from_secs(argv.next()?.parse().ok()?),
            "--sizes" => {
                a.sizes = argv
                    .next()?
                    .split(',')
                    .map(|s| s.parse().ok())
                    .collect::<Option<_>>()?;
            }
            "--diff-runs" => a.diff_runs = argv.next()?.parse().ok()?,
            "--write-docs" => a.docs = Some(argv.next()?.into()),
            _ => {}
        }
    }
    bench.then_some(a)
}

fn name(i: usize) -> String {
    format!("node-{i:04}")
}

fn v4(i: usize) -> String {
    format!("10.{}.{}.0/24", 64 + (i >> 8), i & 0xff)
}

fn v6(i: usize) -> String {
    format!("fd00:10:{i:x}::/64")
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// RFC 3339 (UTC) of Unix seconds; `micro` adds the six fraction digits of a MicroTime.
fn rfc3339(unix: i64, micro: bool) -> String {
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let frac = if micro { ".000000" } else { "" };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{frac}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn npc() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs")
}

fn nbs() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodebgpstatuses")
}

/// What two Established ToR sessions of a dual-stack node report.
fn report(i: usize, now: i64) -> Value {
    let cidrs = [v4(i), v6(i)];
    let peer = |tor: &str, addr: &str| {
        json!({"name": tor, "address": addr, "asn": 65000, "state": "Established",
               "since": rfc3339(now - 86_400, false), "holdTime": 90, "keepaliveTime": 30,
               "families": ["ipv4-unicast", "ipv6-unicast"],
               "prefixesSent": {"ipv4-unicast": 1, "ipv6-unicast": 1},
               "routes": [{"prefix": v4(i), "nextHop": "198.18.0.10", "asPath": [64512]},
                          {"prefix": v6(i), "nextHop": "2001:db8::10", "asPath": [64512]}],
               "messagesSent": 2900, "messagesReceived": 2900, "flaps": 0})
    };
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": "",
               "lastTransitionTime": rfc3339(now - 86_400, false), "observedGeneration": 1})
    };
    json!({"source": "ipam-crd", "sourceReady": true, "allocated": cidrs, "announced": cidrs,
           "peers": [peer("tor1", "192.0.2.1"), peer("tor2", "192.0.2.2")],
           "conditions": [condition("Ready", "True", "SourceSynced"),
                          condition("Established", "True", "AllEstablished"),
                          condition("SourceMismatch", "False", "Agree"),
                          condition("Refused", "False", "NothingRefused")],
           "observedGeneration": 1,
           "updatedAt": rfc3339(now - 600, false), "speakerVersion": "0.1.0"})
}

/// N dual-stack nodes, each with its allocation, its speaker's report and a fresh Lease.
fn populate(fake: &FakeKube, n: usize, skip: Option<usize>) {
    let now = unix_now();
    for i in 0..n {
        let cidrs = [v4(i), v6(i)];
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name(i)},
            "spec": {"podCIDR": v4(i), "podCIDRs": cidrs},
            "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "InternalIP", "address": "::1"}]}});
        let alloc = json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
            "metadata": {"name": name(i)}, "spec": {"podCIDRs": cidrs, "pool": "default"}});
        let ok = fake.insert(&Gvr::nodes(), node).is_ok() && fake.insert(&npc(), alloc).is_ok();
        assert!(ok, "populating the fake API");
        if Some(i) == skip {
            continue;
        }
        let status = json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodeBGPStatus",
            "metadata": {"name": name(i)}, "spec": {"nodeName": name(i)},
            "status": report(i, now)});
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name(i), "namespace": NS,
                         "labels": {"podcidr.io/speaker-lease": "true"}},
            "spec": {"holderIdentity": format!("{}/podcidr-bgp-speaker-x", name(i)),
                     "leaseDurationSeconds": 180, "acquireTime": rfc3339(now - 86_400, true),
                     "renewTime": rfc3339(now - 20, true)}});
        let ok = fake.insert(&nbs(), status).is_ok() && fake.insert(&Gvr::leases(), lease).is_ok();
        assert!(ok, "populating the fake API");
    }
}

fn stop(child: &mut Child) {
    integration_tests::stop_child(child, Duration::from_secs(10));
}

/// What one speaker asked for and received.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    requests: u64,
    reads: u64,
    status_writes: u64,
    lease_writes: u64,
    other_writes: u64,
    objects: u64,
    bytes_in: u64,
    bytes_out: u64,
}

fn tally(fake: &FakeKube) -> Tally {
    let mut t = Tally::default();
    for ((verb, resource), x) in fake.traffic() {
        let Traffic {
            requests,
            bytes_in,
            bytes_out,
            objects_out,
        } = x;
        t.requests += requests;
        t.objects += objects_out;
        t.bytes_in += bytes_in;
        t.bytes_out += bytes_out;
        match (verb.is_write(), resource.as_str()) {
            (false, _) => t.reads += requests,
            (true, "nodebgpstatuses" | "nodebgpstatuses/status") => t.status_writes += requests,
            (true, "leases") => t.lease_writes += requests,
            (true, _) => t.other_writes += requests,
        }
    }
    t
}

/// Every list and watch of the speaker carried `fieldSelector=metadata.name=<its node>`.
fn own_objects_only(log: &[RequestRecord]) -> bool {
    let want = format!("metadata.name={}", name(ME));
    log.iter()
        .filter(|r| matches!(r.verb, Verb::List | Verb::Watch))
        .all(|r| r.field_selector.as_deref() == Some(want.as_str()))
}

struct SpeakerResult {
    nodes: usize,
    startup: Tally,
    startup_secs: f64,
    idle: Tally,
    own_only: bool,
    lease_bytes: usize,
}

async fn idle_speaker(args: &Args, n: usize) -> Result<SpeakerResult, String> {
    let fake = FakeKube::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .await
        .map_err(|e| e.to_string())?;
    populate(&fake, n, Some(ME));
    let collector = Collector::start(CollectorConfig::new(([127, 0, 0, 1], 0).into()))
        .await
        .map_err(|e| e.to_string())?;
    let dir = TempDir::new(&format!("control-plane-{n}"));
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig)
        .map_err(|e| e.to_string())?;
    let admin = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?;
    let config = format!(
        "nodeName: {}\nasn: 64512\nrouterId: 192.0.2.42\nsource: {{kind: ipam-crd}}\n\
         allowedPrefixes: [10.0.0.0/8, \"fd00::/8\"]\nnextHop: {{ipv4: node, ipv6: node}}\n\
         admin: {{listen: \"{admin}\"}}\nlog: {{level: warn}}\n\
         peers:\n  - name: tor1\n    address: 127.0.0.1\n    port: {}\n    asn: 65000\n    \
         ebgpMultihop: 2\n    gracefulRestart: {{enabled: false}}\n",
        name(ME),
        collector.local_addr().port()
    );
    std::fs::write(dir.path("config.yaml"), config).map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.path("speaker.log")).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let mut child = Command::new(&args.speaker)
        .arg("speaker")
        .arg("--config")
        .arg(dir.path("config.yaml"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--lease-namespace", NS])
        .env("POD_NAME", "podcidr-bgp-speaker-bench")
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", args.speaker.display()))?;
    let up = fake
        .wait_for(WAIT, |f| {
            let status = f.get(&nbs(), None, &name(ME));
            let established = status
                .as_ref()
                .and_then(|o| o.pointer("/status/peers/0/state"))
                == Some(&json!("Established"));
            let lease = f
                .get(&Gvr::leases(), Some(NS), &name(ME))
                .is_some_and(|l| l["metadata"]["ownerReferences"].is_array());
            established && lease
        })
        .await;
    let startup_secs = t0.elapsed().as_secs_f64();
    if up.is_err() {
        stop(&mut child);
        let log = std::fs::read_to_string(dir.path("speaker.log")).unwrap_or_default();
        return Err(format!("{n} nodes: the speaker did not come up\n{log}"));
    }
    let startup = tally(&fake);
    let lease_bytes = fake
        .get(&Gvr::leases(), Some(NS), &name(ME))
        .map(|l| l.to_string().len())
        .unwrap_or(0);
    // Start-up writes settle (the status with the session up), then the idle window.
    tokio::time::sleep(Duration::from_secs(10)).await;
    fake.reset_counters();
    tokio::time::sleep(args.window).await;
    let idle = tally(&fake);
    let own_only = own_objects_only(&fake.request_log());
    let alive = matches!(child.try_wait(), Ok(None));
    stop(&mut child);
    if !alive {
        return Err(format!("{n} nodes: the speaker exited during the window"));
    }
    Ok(SpeakerResult {
        nodes: n,
        startup,
        startup_secs,
        idle,
        own_only,
        lease_bytes,
    })
}

struct DiffRun {
    secs: f64,
    /// User + system CPU seconds of `diff` itself (the API server's work is not in them).
    cpu_secs: f64,
    max_rss_kib: i64,
    code: i32,
}

/// GNU time: it forks `diff` from its own small process, so the peak RSS it reports is
/// `diff`'s. (`wait4` on a child of this process would not do: a child spawned with vfork
/// starts with this process's large RSS as its high-water mark.)
const GNU_TIME: &str = "/usr/bin/time";

/// One `diff` run, stdout to `out`; wall time, and peak RSS from GNU time.
fn run_diff(
    speaker: &Path,
    kubeconfig: &Path,
    out: &Path,
    extra: &[&str],
) -> Result<DiffRun, String> {
    let file = std::fs::File::create(out).map_err(|e| e.to_string())?;
    let rss_file = out.with_extension("rss");
    let t0 = Instant::now();
    let status = Command::new(GNU_TIME)
        .arg("-f")
        .arg("%U %S %M")
        .arg("-o")
        .arg(&rss_file)
        .arg(speaker)
        .arg("diff")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(extra)
        .env("NO_COLOR", "1")
        .stdout(file)
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("{GNU_TIME}: {e} (Debian: apt-get install time)"))?;
    let secs = t0.elapsed().as_secs_f64();
    let report = std::fs::read_to_string(&rss_file).unwrap_or_default();
    // The last line; earlier ones would be "Command exited with non-zero status 1".
    let fields: Vec<&str> = report
        .lines()
        .next_back()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let (cpu_secs, max_rss_kib) = match fields[..] {
        [user, sys, rss] => (
            user.parse::<f64>().unwrap_or(0.0) + sys.parse::<f64>().unwrap_or(0.0),
            rss.parse().map_err(|_| format!("{GNU_TIME}: {report:?}"))?,
        ),
        _ => return Err(format!("{GNU_TIME} wrote no usage: {report:?}")),
    };
    Ok(DiffRun {
        secs,
        cpu_secs,
        max_rss_kib,
        code: status.code().unwrap_or(-1),
    })
}

struct DiffResult {
    nodes: usize,
    summary: String,
    table: Vec<DiffRun>,
    json: Vec<DiffRun>,
}

async fn diff_at(args: &Args, n: usize) -> Result<DiffResult, String> {
    let fake = FakeKube::start().await.map_err(|e| e.to_string())?;
    populate(&fake, n, None);
    let dir = TempDir::new(&format!("control-plane-diff-{n}"));
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig)
        .map_err(|e| e.to_string())?;
    let (speaker, out) = (args.speaker.clone(), dir.path("diff.out"));
    let runs = args.diff_runs;
    let (table, json) = tokio::task::spawn_blocking(move || {
        let mut table = Vec::new();
        let mut json = Vec::new();
        for _ in 0..runs {
            table.push(run_diff(&speaker, &kubeconfig, &out, &[])?);
            json.push(run_diff(
                &speaker,
                &kubeconfig,
                &out.with_extension("json"),
                &["-o", "json"],
            )?);
        }
        Ok::<_, String>((table, json))
    })
    .await
    .map_err(|e| e.to_string())??;
    let text = std::fs::read_to_string(dir.path("diff.out")).unwrap_or_default();
    let summary = text.lines().last().unwrap_or_default().to_owned();
    Ok(DiffResult {
        nodes: n,
        summary,
        table,
        json,
    })
}

fn per_hour(x: u64, window: Duration) -> f64 {
    x as f64 * 3600.0 / window.as_secs_f64()
}

fn median_min_max(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (s[s.len() / 2], s[0], s[s.len() - 1])
}

fn render(args: &Args, speakers: &[SpeakerResult], diffs: &[DiffResult]) -> String {
    let w = args.window;
    let mut out = String::new();
    out.push_str(&format!(
        "One idle speaker (release binary, one Established eBGP session, `ipam-crd` source) \
         against the fake API server holding N dual-stack Nodes, `NodePodCIDR`s, \
         `NodeBGPStatus`es and speaker Leases; the fake sends a watch BOOKMARK every minute. \
         Idle window {} s of real time, counted from 10 s after the speaker was up; per-hour \
         figures are the window's counts × 3600 / {}. Bytes are HTTP response (received) and \
         request (sent) bodies, JSON, no compression.\n\n",
        w.as_secs(),
        w.as_secs()
    ));
    out.push_str(
        "| nodes in the cluster | lists/watches only its own objects | start-up: requests, objects, KiB received (s to up) | idle: requests/h (reads) | idle: writes/h (status + Lease) | idle: objects received/h | idle: KiB received/h | idle: KiB sent/h |\n\
         |---:|---|---|---:|---:|---:|---:|---:|\n",
    );
    for s in speakers {
        let i = s.idle;
        out.push_str(&format!(
            "| {} | {} | {}, {}, {:.1} ({:.1} s) | {:.0} ({:.0}) | {:.1} ({:.1} + {:.1}) | {:.0} | {:.1} | {:.1} |\n",
            s.nodes,
            if s.own_only { "yes (fieldSelector metadata.name=<node>)" } else { "**no**" },
            s.startup.requests,
            s.startup.objects,
            s.startup.bytes_out as f64 / 1024.0,
            s.startup_secs,
            per_hour(i.requests, w),
            per_hour(i.reads, w),
            per_hour(i.status_writes + i.lease_writes + i.other_writes, w),
            per_hour(i.status_writes, w),
            per_hour(i.lease_writes, w),
            per_hour(i.objects, w),
            per_hour(i.bytes_out, w) / 1024.0,
            per_hour(i.bytes_in, w) / 1024.0,
        ));
    }
    if let Some(s) = speakers.last() {
        let lease_per_hour = per_hour(s.idle.lease_writes, w);
        out.push_str(&format!(
            "\nThe status refresh (one write per node per hour with nothing changed) falls \
             outside a window shorter than an hour: add 1 status write/h. The stored Lease is \
             {} bytes here (a real API server adds managedFields, ~300 bytes more). At 5,000 \
             nodes the speakers write {:.0} Leases/s + {:.1} status refreshes/s = {:.0} \
             writes/s into etcd (before: 2 writes per node per minute, 167/s, and more with \
             keepalive-driven rewrites).\n",
            s.lease_bytes,
            (lease_per_hour * 5000.0) / 3600.0,
            5000.0 / 3600.0,
            (lease_per_hour + 1.0) * 5000.0 / 3600.0
        ));
    }
    out.push_str(&format!(
        "\n`podcidr-bgp diff` (release) over the whole cluster: N dual-stack nodes, every one with \
         a report of 2 Established peers and a fresh Lease, so 2 × N `ok` rows; lists paged \
         500 at a time. Wall time from spawn to exit (process start and the fake API server's \
         serving included); `diff` CPU is its own user + system time, the rest of the wall time is \
         the API server's (here the fake, serving JSON from this process) and the network; peak \
         RSS as GNU time reports it (`%M`). Median of {} runs, min–max \
         in brackets.\n\n\
         | nodes | rows | table: wall s | table: diff CPU s | table: peak RSS MiB | `-o json`: wall s | `-o json`: peak RSS MiB | summary line |\n\
         |---:|---:|---:|---:|---:|---:|---:|---|\n",
        args.diff_runs
    ));
    for d in diffs {
        let secs = |v: &[DiffRun]| median_min_max(&v.iter().map(|r| r.secs).collect::<Vec<_>>());
        let rss = |v: &[DiffRun]| {
            median_min_max(
                &v.iter()
                    .map(|r| r.max_rss_kib as f64 / 1024.0)
                    .collect::<Vec<_>>(),
            )
        };
        let (ts, ts0, ts1) = secs(&d.table);
        let (tc, tc0, tc1) =
            median_min_max(&d.table.iter().map(|r| r.cpu_secs).collect::<Vec<_>>());
        let (tr, tr0, tr1) = rss(&d.table);
        let (js, js0, js1) = secs(&d.json);
        let (jr, jr0, jr1) = rss(&d.json);
        let codes: Vec<i32> = d.table.iter().chain(&d.json).map(|r| r.code).collect();
        out.push_str(&format!(
            "| {} | {} | {ts:.2} ({ts0:.2}–{ts1:.2}) | {tc:.2} ({tc0:.2}–{tc1:.2}) | {tr:.1} ({tr0:.1}–{tr1:.1}) | {js:.2} ({js0:.2}–{js1:.2}) | {jr:.1} ({jr0:.1}–{jr1:.1}) | `{}`{} |\n",
            d.nodes,
            2 * d.nodes,
            d.summary,
            if codes.iter().all(|c| *c == 0) { "" } else { " (**exit status not 0**)" },
        ));
    }
    out
}

fn main() -> std::process::ExitCode {
    let Some(args) = parse_args() else {
        return std::process::ExitCode::SUCCESS;
    };
    let args = std::sync::Arc::new(args);
    if !args.speaker.exists() {
        eprintln!(
            "{}: build it first (cargo build --release -p podcidr-bgp) or pass --speaker",
            args.speaker.display()
        );
        return std::process::ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let result = rt.block_on(async {
        eprintln!(
            "idle speakers at {:?} nodes for {} s ...",
            args.sizes,
            args.window.as_secs()
        );
        // Every size's idle window at once: idle speakers do not compete for the CPU.
        let tasks: Vec<_> = args
            .sizes
            .iter()
            .map(|n| {
                let (args, n) = (std::sync::Arc::clone(&args), *n);
                tokio::spawn(async move { idle_speaker(&args, n).await })
            })
            .collect();
        let mut speakers = Vec::new();
        for t in tasks {
            speakers.push(t.await.map_err(|e| e.to_string())??);
        }
        let mut diffs = Vec::new();
        for n in &args.sizes {
            eprintln!("diff at {n} nodes × 2 families ...");
            diffs.push(diff_at(&args, *n).await?);
        }
        Ok::<_, String>(render(&args, &speakers, &diffs))
    });
    match result {
        Ok(body) => {
            print!("{body}");
            if let Some(path) = &args.docs {
                if let Err(e) = integration_tests::write_docs_section(path, BEGIN, END, &body) {
                    eprintln!("{e}");
                    return std::process::ExitCode::from(2);
                }
                eprintln!(
                    "wrote {}",
                    integration_tests::workspace_path(path).display()
                );
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::from(1)
        }
    }
}
