//! What our components cost a real API server: the newest kube-apiserver the suite builds
//! with etcd 3.6 (the test suite's control plane, `integration_tests::control_plane`),
//! `deploy/` installed (the admission policy included), each binary as its own
//! ServiceAccount, each speaker's token bound to a Pod on its node.
//!
//! - Allocating: N new dual-stack Nodes (`10.0.0.0/8` in /24s, `fd00::/40` in /64s) and
//!   `podcidr-bgp allocator` (release build) at `--api-qps Q`; time from process start until
//!   its metrics count N successful record status writes (each node's `Allocated=True`), then
//!   checked with kubectl: every `NodePodCIDR` has `Allocated=True`.
//! - Idle speakers: K speakers (`node-spec` source, a peer that never answers) running for a window after they
//!   published their first status; per-hour figures are the window's counts × 3600 / window.
//!
//! Requests per component come from the API server's audit log (one line per request, by
//! ServiceAccount); "server total" is the delta of kube-apiserver's own
//! `apiserver_request_total` over the same span, which also counts the server's own loopback
//! clients (the API server is also a client of itself) and nothing from this bench: the bench
//! polls the components' admin endpoints, not the API. Memory is VmRSS of kube-apiserver and
//! etcd at the end of the span.
//!
//! Run: `cargo bench -p integration-tests --bench real_api_cost -- [--bin PATH]
//! [--nodes 1000,5000] [--qps 200] [--speakers 10] [--idle 300] [--write-docs FILE]`.
//! Not part of `cargo test` (without `--bench` it does nothing).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use integration_tests::TempDir;
use integration_tests::control_plane::{ControlPlane, Identity, KubeVersion, etcd_version};
use serde_json::{Value, json};

const BEGIN: &str = "<!-- real-api-cost:begin -->";
const END: &str = "<!-- real-api-cost:end -->";
const SYSTEM_NS: &str = "podcidr-system";
const LEASE_NS: &str = "podcidr-node-lease";
/// Longest an allocation or a speaker's start may take before the bench fails.
const LIMIT: Duration = Duration::from_secs(1800);

struct Args {
    bin: PathBuf,
    nodes: Vec<usize>,
    qps: f64,
    speakers: usize,
    idle: Duration,
    docs: Option<PathBuf>,
}

fn parse_args() -> Option<Args> {
    let mut argv = std::env::args().skip(1);
    let mut a = Args {
        // `cargo bench` runs in tests/: a relative target dir is the workspace's.
        bin: std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(integration_tests::dist_binary()),
        nodes: vec![1000, 5000],
        qps: 200.0,
        speakers: 10,
        idle: Duration::from_secs(300),
        docs: None,
    };
    let mut bench = false;
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--bench" => bench = true,
            "--bin" => a.bin = argv.next()?.into(),
            "--nodes" => {
                a.nodes = argv
                    .next()?
                    .split(',')
                    .map(|n| n.trim().parse().ok())
                    .collect::<Option<_>>()?;
            }
            "--qps" => a.qps = argv.next()?.parse().ok()?,
            "--speakers" => a.speakers = argv.next()?.parse().ok()?,
            "--idle" => a.idle = Duration::from_secs(argv.next()?.parse().ok()?),
            "--write-docs" => a.docs = Some(argv.next()?.into()),
            _ => {}
        }
    }
    bench.then_some(a)
}

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("its address")
}

/// `GET path` on a component's admin listener; `None` while it does not answer.
fn admin_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// Sum of every series of `name` (Prometheus text) whose labels contain all of `labels`.
fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                && labels.iter().all(|x| l.contains(x))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn server_requests(cp: &ControlPlane) -> f64 {
    metric_sum(&cp.metrics(), "apiserver_request_total", &[])
}

/// Polls `check` every 200 ms until it answers, or panics after `LIMIT`.
fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(start.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Requests by `username` in the audit log, one per audit ID, received in `[from, to)`
/// (RFC 3339 microsecond timestamps compare as strings): (all, writes).
fn audited(cp: &ControlPlane, username: &str, from: &str, to: &str) -> (usize, usize) {
    let mut seen = std::collections::BTreeMap::new();
    for e in cp.audit_events() {
        let at = e["requestReceivedTimestamp"].as_str().unwrap_or_default();
        if e["user"]["username"] != username || at < from || at >= to {
            continue;
        }
        let verb = e["verb"].as_str().unwrap_or_default().to_owned();
        seen.insert(e["auditID"].as_str().unwrap_or_default().to_owned(), verb);
    }
    let writes = seen
        .values()
        .filter(|v| matches!(v.as_str(), "create" | "update" | "patch" | "delete"))
        .count();
    (seen.len(), writes)
}

/// A timestamp in the audit log's clock: the server's time of a marker request (a
/// ConfigMap created by the admin).
fn mark(cp: &ControlPlane, name: &str) -> String {
    cp.kubectl(&["create", "configmap", name, "-n", "default"]);
    let found = cp.audit_events().into_iter().rev().find(|e| {
        e["objectRef"]["name"] == name
            && e["verb"] == "create"
            && e["objectRef"]["resource"] == "configmaps"
    });
    found
        .and_then(|e| e["requestReceivedTimestamp"].as_str().map(str::to_owned))
        .expect("the marker's audit event")
}

fn create_nodes(cp: &ControlPlane, names: &[String]) {
    let items: Vec<Value> = names
        .iter()
        .map(|n| {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n,
                "labels": {"kubernetes.io/hostname": n, "kubernetes.io/os": "linux"}}})
        })
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    cp.kubectl_with_input(cp.admin(), &["create", "-f", "-"], Some(&list))
        .unwrap_or_else(|e| panic!("creating {} Nodes: {e}", names.len()));
}

fn kib_of(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn stop(child: &mut Child) {
    // SAFETY: kill(2) on the PID of a child this process started and has not reaped.
    unsafe {
        libc::kill(i32::try_from(child.id()).expect("pid"), libc::SIGTERM);
    }
    let start = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn spawn(bin: &Path, args: &[&str], env: &[(&str, &str)], log: &Path) -> Child {
    let out = std::fs::File::create(log).expect("log file");
    Command::new(bin)
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::from(out.try_clone().expect("log file")))
        .stderr(Stdio::from(out))
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()))
}

struct AllocRow {
    nodes: usize,
    seconds: f64,
    requests: usize,
    writes: usize,
    server_requests: f64,
    apiserver_mib: f64,
    etcd_mib: f64,
    allocator_peak_mib: f64,
}

fn allocate(args: &Args, n: usize) -> AllocRow {
    let cp = ControlPlane::start().expect("a real control plane (scripts/install-test-deps.sh)");
    cp.install_deploy();
    let names: Vec<String> = (0..n).map(|i| format!("node-{i:05}")).collect();
    create_nodes(&cp, &names);
    let sa: Identity = cp.service_account(SYSTEM_NS, "podcidr-bgp-allocator");
    let dir = TempDir::new("real-api-cost");
    let admin = free_addr();
    let (qps, admin_s) = (args.qps.to_string(), admin.to_string());
    let before = server_requests(&cp);
    let from = mark(&cp, "cost-alloc-start");
    let start = Instant::now();
    let mut child = spawn(
        &args.bin,
        &[
            "allocator",
            "--kubeconfig",
            sa.kubeconfig.to_str().expect("utf-8 path"),
            "--cluster-pool-ipv4-cidr",
            "10.0.0.0/8",
            "--cluster-pool-ipv4-mask-size",
            "24",
            "--cluster-pool-ipv6-cidr",
            "fd00::/40",
            "--cluster-pool-ipv6-mask-size",
            "64",
            "--api-qps",
            &qps,
            "--lease-namespace",
            SYSTEM_NS,
            "--admin-listen",
            &admin_s,
        ],
        &[],
        &dir.path("allocator.log"),
    );
    // A node is allocated when its record's status write (Allocated=True, after the create)
    // succeeded; the pool gauges count plans, not writes.
    let written = n as f64;
    wait_for(&format!("allocating {n} nodes"), || {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "the allocator exited ({status}); log in {}",
                dir.path("allocator.log").display()
            );
        }
        let m = admin_get(admin, "/metrics")?;
        let status_ok = metric_sum(
            &m,
            "podcidr_allocator_writes_total",
            &["kind=\"status\"", "result=\"ok\""],
        );
        (status_ok >= written).then_some(())
    });
    let seconds = start.elapsed().as_secs_f64();
    let allocator_peak_mib = kib_of(child.id(), "VmHWM:") as f64 / 1024.0;
    let (api_kib, etcd_kib) = cp.rss_kib();
    let server = server_requests(&cp) - before;
    let to = mark(&cp, "cost-alloc-end");
    stop(&mut child);
    let (requests, writes) = audited(&cp, &sa.username, &from, &to);
    let records: Value =
        serde_json::from_str(&cp.kubectl(&["get", "nodepodcidrs.podcidr.io", "-o", "json"]))
            .expect("NodePodCIDR list");
    let done = records["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| {
            r["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Allocated" && c["status"] == "True")
        })
        .count();
    assert_eq!(
        done, n,
        "every NodePodCIDR Allocated=True on the real server"
    );
    AllocRow {
        nodes: n,
        seconds,
        requests,
        writes,
        server_requests: server,
        apiserver_mib: api_kib as f64 / 1024.0,
        etcd_mib: etcd_kib as f64 / 1024.0,
        allocator_peak_mib,
    }
}

struct IdleRow {
    speakers: usize,
    window_s: f64,
    requests: usize,
    writes: usize,
    server_requests: f64,
    apiserver_mib: f64,
    etcd_mib: f64,
}

fn idle_speakers(args: &Args) -> IdleRow {
    let cp = ControlPlane::start().expect("a real control plane (scripts/install-test-deps.sh)");
    cp.install_deploy();
    let names: Vec<String> = (0..args.speakers).map(|i| format!("idle-{i:03}")).collect();
    create_nodes(&cp, &names);
    let dir = TempDir::new("real-api-idle");
    // A peer nobody answers: the sessions retry (no API traffic), the API cost is the idle one.
    let closed_port = free_addr();
    let mut running = Vec::new();
    for (i, node) in names.iter().enumerate() {
        // Each speaker's token is bound to its node's Pod, as the DaemonSet's is: the
        // admission policy lets it write that node's NodeBGPStatus and Lease only.
        let sa = cp.node_pod_identity(SYSTEM_NS, "podcidr-bgp-speaker", node);
        let admin = free_addr();
        let cfg = dir.path(&format!("{node}.yaml"));
        std::fs::write(
            &cfg,
            format!(
                "nodeName: {node}\nasn: 64512\nrouterId: 198.18.0.{}\nsource: {{kind: node-spec}}\n\
                 allowedPrefixes: [10.0.0.0/8]\n\
                 peers:\n  - name: tor\n    address: 127.0.0.1\n    port: {}\n    asn: 65000\n    \
                 ebgpMultihop: 2\n    connectRetry: {{base: 30, max: 60}}\n\
                 admin: {{listen: \"{admin}\"}}\nstatus: {{publish: true}}\n",
                i + 1,
                closed_port.port()
            ),
        )
        .expect("speaker config");
        let child = spawn(
            &args.bin,
            &[
                "speaker",
                "--config",
                cfg.to_str().expect("utf-8 path"),
                "--kubeconfig",
                sa.kubeconfig.to_str().expect("utf-8 path"),
                "--lease-namespace",
                LEASE_NS,
            ],
            &[("NODE_NAME", node)],
            &dir.path(&format!("{node}.log")),
        );
        running.push((child, admin));
    }
    // Up: every speaker has published its first status (its NodeBGPStatus exists).
    wait_for("every speaker's first NodeBGPStatus", || {
        for (child, _) in &mut running {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "a speaker exited ({status}); logs in {}",
                    dir.path("").display()
                );
            }
        }
        let out = cp
            .kubectl_as(
                cp.admin(),
                &["get", "nodebgpstatuses.podcidr.io", "-o", "name"],
            )
            .ok()?;
        (out.lines().count() >= args.speakers).then_some(())
    });
    // Settle past start-up (first Lease, first watches) before the window opens.
    std::thread::sleep(Duration::from_secs(10));
    let before = server_requests(&cp);
    let from = mark(&cp, "cost-idle-start");
    let start = Instant::now();
    std::thread::sleep(args.idle);
    let window_s = start.elapsed().as_secs_f64();
    let server = server_requests(&cp) - before;
    let to = mark(&cp, "cost-idle-end");
    let (api_kib, etcd_kib) = cp.rss_kib();
    // Stopping ends the watches, which the server audits when they end: only those received in the
    // window count.
    for (child, _) in &mut running {
        stop(child);
    }
    // Every speaker authenticates as the same ServiceAccount.
    let username = format!("system:serviceaccount:{SYSTEM_NS}:podcidr-bgp-speaker");
    let (requests, writes) = audited(&cp, &username, &from, &to);
    IdleRow {
        speakers: args.speakers,
        window_s,
        requests,
        writes,
        server_requests: server,
        apiserver_mib: api_kib as f64 / 1024.0,
        etcd_mib: etcd_kib as f64 / 1024.0,
    }
}

/// Which cargo profile built `bin` (its directory under the target dir).
fn binary_profile(bin: &Path) -> String {
    match bin
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
    {
        Some("dist") => "profile.dist (the shipped profile)".to_owned(),
        Some("release") => "release (the demo's quick build, not what ships)".to_owned(),
        Some(other) => format!("profile {other}"),
        None => "the given".to_owned(),
    }
}

fn report(args: &Args, alloc: &[AllocRow], idle: &IdleRow) -> String {
    let mut out = format!(
        "kube-apiserver {} and etcd {} (built from their Go modules by scripts/build-go-tool.sh) on loopback, `deploy/` installed, each component as its own ServiceAccount; {} binary. Requests per component from the audit log; \"server total\" is the delta of `apiserver_request_total` over the same span (the component's requests plus the API server's own loopback clients; a watch counts when it ends, so open watches are missing from it). Memory: VmRSS of kube-apiserver and etcd at the end.\n\n\
         **Allocating** N new dual-stack Nodes (`--api-qps {}`, burst 30), from process start until every node is allocated (then checked: every `NodePodCIDR` `Allocated=True`).\n\n\
         | new nodes | time s | allocator requests (writes) | server total | kube-apiserver MiB | etcd MiB | allocator peak RSS MiB |\n|---:|---:|---:|---:|---:|---:|---:|\n",
        KubeVersion::Newest.version(),
        etcd_version(),
        binary_profile(&args.bin),
        args.qps
    );
    for r in alloc {
        out.push_str(&format!(
            "| {} | {:.1} | {} ({}) | {:.0} | {:.0} | {:.0} | {:.1} |\n",
            r.nodes,
            r.seconds,
            r.requests,
            r.writes,
            r.server_requests,
            r.apiserver_mib,
            r.etcd_mib,
            r.allocator_peak_mib
        ));
    }
    let per_hour = |x: f64| x * 3600.0 / idle.window_s / idle.speakers as f64;
    out.push_str(&format!(
        "\n**Idle speakers**: {} speakers (`node-spec` source, a peer that never answers), a {:.0} s window from 10 s after every one had published its first status; per speaker and hour = window count × 3600 / window / speakers.\n\n\
         | speakers | requests/h per speaker | writes/h per speaker | server total/h per speaker | kube-apiserver MiB | etcd MiB |\n|---:|---:|---:|---:|---:|---:|\n\
         | {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} |\n",
        idle.speakers,
        idle.window_s,
        idle.speakers,
        per_hour(idle.requests as f64),
        per_hour(idle.writes as f64),
        per_hour(idle.server_requests),
        idle.apiserver_mib,
        idle.etcd_mib
    ));
    out
}

fn main() {
    let Some(args) = parse_args() else {
        return;
    };
    assert!(
        args.bin.exists(),
        "{} missing: cargo build --release -p podcidr-bgp",
        args.bin.display()
    );
    let mut alloc = Vec::new();
    for &n in &args.nodes {
        eprintln!("real-api-cost: allocating {n} nodes");
        let row = allocate(&args, n);
        eprintln!("real-api-cost: {n} nodes in {:.1} s", row.seconds);
        alloc.push(row);
    }
    eprintln!(
        "real-api-cost: {} idle speakers for {:?}",
        args.speakers, args.idle
    );
    let idle = idle_speakers(&args);
    let table = report(&args, &alloc, &idle);
    print!("{table}");
    if let Some(docs) = &args.docs {
        integration_tests::write_docs_section(docs, BEGIN, END, &table)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
