//! The allocator at cluster scale: `podcidr-bgp allocator` (a child process, release build)
//! against the in-process fake API server with N new dual-stack Nodes of realistic size.
//!
//! Per case `N@QPS`: time from process start until every node's `NodePodCIDR` holds an IPv4
//! and an IPv6 CIDR with `Allocated=True`, the requests it made, what the token bucket alone
//! predicts for them (`(requests - burst) / qps`), the allocator's peak RSS (`VmHWM`) and CPU
//! seconds. Then, on the state of the largest case, a restart at the default limits: writes
//! made (target 0, the Lease aside) and time until the first reconcile pass has run (the
//! allocator has restored every allocation and would allocate a new node).
//!
//! Run: `cargo bench -p integration-tests --bench allocator_scale -- [--allocator PATH]
//! [--cases 5000@20,5000@200,50000@1000] [--burst 30] [--restart-qps 20]`. The default
//! cases take about 12 minutes: 10,000 writes at 20 requests/s alone take 8.
//! Not part of `cargo test` (which runs bench targets without `--bench`: a no-op here).
//! `ALLOCATOR_SCALE_LOG=info,kube_client=debug` sets the allocator's `RUST_LOG` and keeps its
//! logs (one per run, with every request timed) in the temporary directory it prints.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fake_kube::{EventType, FakeKube, Gvr, Verb};
use serde_json::{Value, json};

/// Longest a case may run before it is reported as failed.
const CASE_LIMIT: Duration = Duration::from_secs(1800);

struct Args {
    allocator: PathBuf,
    cases: Vec<(usize, f64)>,
    burst: u32,
    restart_qps: f64,
}

fn parse_cases(s: &str) -> Option<Vec<(usize, f64)>> {
    s.split(',')
        .map(|c| {
            let (n, q) = c.split_once('@')?;
            Some((n.trim().parse().ok()?, q.trim().parse().ok()?))
        })
        .collect()
}

fn parse_args() -> Option<Args> {
    let mut argv = std::env::args().skip(1);
    let mut a = Args {
        allocator: integration_tests::dist_binary(),
        cases: vec![(5000, 20.0), (5000, 200.0), (50_000, 1000.0)],
        burst: 30,
        restart_qps: 20.0,
    };
    let mut bench = false;
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--bench" => bench = true,
            "--allocator" => a.allocator = argv.next()?.into(),
            "--cases" => a.cases = parse_cases(&argv.next()?)?,
            "--burst" => a.burst = argv.next()?.parse().ok()?,
            "--restart-qps" => a.restart_qps = argv.next()?.parse().ok()?,
            _ => {}
        }
    }
    bench.then_some(a)
}

fn records() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs")
}

/// A Node about the size of a real one (~5 KB: labels, addresses, capacity, five
/// conditions, node info, 20 images): the allocator LISTs and watches whole Nodes.
fn node(i: usize) -> Value {
    let name = format!("node-{i:05}");
    let t = "2026-01-01T00:00:00Z";
    let cond = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason, "lastHeartbeatTime": t,
               "lastTransitionTime": t, "message": format!("kubelet reports {reason}")})
    };
    let images: Vec<Value> = (0..20)
        .map(|k| {
            json!({"names": [
                format!("registry.example.com/team-{k}/service-{k}@sha256:{:064x}", k * 7919 + i),
                format!("registry.example.com/team-{k}/service-{k}:v1.{k}.{}", i % 10),
            ], "sizeBytes": 10_000_000 + k * 1_000_003})
        })
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.2xlarge",
            "topology.kubernetes.io/zone": format!("zone-{}", i % 3),
            "topology.kubernetes.io/region": "region-1"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"providerID": format!("aws:///zone-{}/i-{i:017x}", i % 3)},
        "status": {
            "addresses": [{"type": "InternalIP", "address": format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255)},
                          {"type": "Hostname", "address": name}],
            "capacity": {"cpu": "8", "memory": "32475192Ki", "pods": "110", "ephemeral-storage": "101430960Ki"},
            "allocatable": {"cpu": "7910m", "memory": "31458360Ki", "pods": "110", "ephemeral-storage": "93478772582"},
            "conditions": [cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                           cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                           cond("PIDPressure", "False", "KubeletHasSufficientPID"),
                           cond("Ready", "True", "KubeletReady"),
                           cond("NetworkUnavailable", "False", "RouteCreated")],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "amd64", "bootID": format!("{:032x}", i),
                "containerRuntimeVersion": "containerd://1.7.22", "kernelVersion": "6.1.0-25-cloud-amd64",
                "kubeProxyVersion": "v1.33.0", "kubeletVersion": "v1.33.0",
                "machineID": format!("{:032x}", i * 31), "operatingSystem": "linux",
                "osImage": "Debian GNU/Linux 12 (bookworm)", "systemUUID": format!("{:032x}", i * 17)},
            "images": images,
        },
    })
}

fn is_allocated(o: &Value) -> bool {
    o["spec"]["podCIDRs"]
        .as_array()
        .is_some_and(|a| a.len() == 2)
        && o["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Allocated" && c["status"] == "True")
        })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(19181)
}

fn spawn(args: &Args, dir: &Path, qps: f64, admin: u16, log: &str) -> std::io::Result<Child> {
    let out = std::fs::File::create(dir.join(log))?;
    Command::new(&args.allocator)
        .arg("allocator")
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .args(["--cluster-pool-ipv4-cidr", "10.0.0.0/8"])
        .args(["--cluster-pool-ipv4-mask-size", "24"])
        .args(["--cluster-pool-ipv6-cidr", "fd00::/40"])
        .args(["--cluster-pool-ipv6-mask-size", "64"])
        .args(["--lease-namespace", "default"])
        .args(["--api-qps", &qps.to_string()])
        .args(["--api-burst", &args.burst.to_string()])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .env(
            "RUST_LOG",
            std::env::var("ALLOCATOR_SCALE_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(out.try_clone()?)
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
}

fn stop(child: &mut Child) {
    integration_tests::stop_child(child, Duration::from_secs(10));
}

/// `(VmHWM MiB, CPU seconds)` of a running process.
fn footprint(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime is 14th, stime 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / ticks;
    (hwm_kib / 1024.0, cpu)
}

/// Requests by the allocator that pass its main bucket (the Lease has its own).
fn bucket_requests(fake: &FakeKube) -> u64 {
    fake.request_counts()
        .iter()
        .filter(|((_, r), _)| r != "leases")
        .map(|(_, n)| n)
        .sum()
}

fn lease_writes(fake: &FakeKube) -> u64 {
    fake.writes_to("leases")
}

/// Waits until `n` records are allocated, counting from the store's event stream.
async fn wait_all_allocated(fake: &FakeKube, n: usize, child: &mut Child) -> Result<(), String> {
    let mut events = fake.subscribe();
    let mut done: HashSet<String> = fake
        .list(&records(), None)
        .iter()
        .filter(|o| is_allocated(o))
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let deadline = tokio::time::Instant::now() + CASE_LIMIT;
    while done.len() < n {
        let ev = tokio::time::timeout_at(deadline, events.next())
            .await
            .map_err(|_| format!("{} of {n} allocated after {CASE_LIMIT:?}", done.len()))?
            .map_err(|e| format!("event stream: {e}"))?;
        if ev.gvr == records()
            && ev.event_type != EventType::Deleted
            && is_allocated(&ev.object)
            && let Some(name) = ev.object["metadata"]["name"].as_str()
        {
            done.insert(name.to_owned());
        }
        if done.len().is_multiple_of(1000)
            && let Ok(Some(st)) = child.try_wait()
        {
            return Err(format!("the allocator exited: {st}"));
        }
    }
    Ok(())
}

async fn metric(admin: u16, name: &str) -> Option<f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", admin))
        .await
        .ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).await.ok()?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

struct Row {
    n: usize,
    creates: u64,
    status: u64,
    requests: u64,
    secs: f64,
    rss: f64,
    cpu: f64,
}

async fn allocate(
    args: &Args,
    dir: &Path,
    fake: &FakeKube,
    n: usize,
    qps: f64,
) -> Result<Row, String> {
    fake.reset_counters();
    let admin = free_port();
    let t0 = Instant::now();
    let mut child = spawn(args, dir, qps, admin, &format!("allocator-{n}-{qps}.log"))
        .map_err(|e| format!("spawn {}: {e}", args.allocator.display()))?;
    let res = wait_all_allocated(fake, n, &mut child).await;
    let secs = t0.elapsed().as_secs_f64();
    let (rss, cpu) = footprint(child.id());
    stop(&mut child);
    res?;
    Ok(Row {
        n,
        creates: fake.requests(Verb::Create, "nodepodcidrs"),
        status: fake.requests(Verb::Patch, "nodepodcidrs/status"),
        requests: bucket_requests(fake),
        secs,
        rss,
        cpu,
    })
}

struct Restart {
    writes: u64,
    lease_writes: u64,
    requests: u64,
    ready: f64,
    rss: f64,
    cpu: f64,
}

async fn restart(args: &Args, dir: &Path, fake: &FakeKube, n: usize) -> Result<Restart, String> {
    fake.reset_counters();
    let admin = free_port();
    let t0 = Instant::now();
    let mut child = spawn(
        args,
        dir,
        args.restart_qps,
        admin,
        &format!("restart-{n}.log"),
    )
    .map_err(|e| format!("spawn: {e}"))?;
    let mut ready = None;
    while t0.elapsed() < Duration::from_secs(120) {
        if metric(admin, "podcidr_allocator_passes_total").await >= Some(1.0) {
            ready = Some(t0.elapsed().as_secs_f64());
            break;
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("the allocator exited: {st}"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Give a write that would follow the first pass (statuses, pools) time to show.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (rss, cpu) = footprint(child.id());
    stop(&mut child);
    Ok(Restart {
        writes: fake.writes() - lease_writes(fake),
        lease_writes: lease_writes(fake),
        requests: bucket_requests(fake),
        ready: ready.ok_or("no reconcile pass within 120 s")?,
        rss,
        cpu,
    })
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

async fn run(args: &Args, dir: &Path) -> Result<(), String> {
    println!(
        "| new dual-stack nodes | --api-qps / --api-burst | writes (create + status) | requests (bucket) | time to allocate all s | (requests − burst) ÷ qps s | measured ÷ predicted | peak RSS MiB | CPU s |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut last: Option<(FakeKube, usize)> = None;
    for &(n, qps) in &args.cases {
        let fake = FakeKube::builder()
            .history_limit(4 * n + 10_000)
            .start()
            .await
            .map_err(|e| e.to_string())?;
        fake.write_kubeconfig(&dir.join("kubeconfig"))
            .map_err(|e| e.to_string())?;
        for i in 0..n {
            fake.insert(&Gvr::nodes(), node(i))
                .map_err(|e| format!("insert: {e}"))?;
        }
        let r = allocate(args, dir, &fake, n, qps).await?;
        let predicted = r.requests.saturating_sub(u64::from(args.burst)) as f64 / qps;
        println!(
            "| {} | {qps} / {} | {} ({} + {}) | {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} |",
            thousands(r.n as u64),
            args.burst,
            thousands(r.creates + r.status),
            thousands(r.creates),
            thousands(r.status),
            thousands(r.requests),
            r.secs,
            predicted,
            r.secs / predicted,
            r.rss,
            r.cpu,
        );
        if last.as_ref().is_none_or(|(_, m)| n >= *m) {
            last = Some((fake, n));
        }
    }
    let Some((fake, n)) = last else {
        return Ok(());
    };
    fake.write_kubeconfig(&dir.join("kubeconfig"))
        .map_err(|e| e.to_string())?;
    let r = restart(args, dir, &fake, n).await?;
    println!();
    println!(
        "| restart with allocations | --api-qps / --api-burst | writes (Lease aside) | Lease writes | requests (bucket) | ready (first pass done) s | peak RSS MiB | CPU s |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {} / {} | {} | {} | {} | {:.2} | {:.1} | {:.1} |",
        thousands(n as u64),
        args.restart_qps,
        args.burst,
        r.writes,
        r.lease_writes,
        thousands(r.requests),
        r.ready,
        r.rss,
        r.cpu
    );
    Ok(())
}

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
    let dir = std::env::temp_dir().join(format!("podcidr-alloc-scale-{}", std::process::id()));
    let res = std::fs::create_dir_all(&dir)
        .map_err(|e| e.to_string())
        .and_then(|()| rt.block_on(run(&args, &dir)));
    match res {
        Ok(()) => {
            if std::env::var_os("ALLOCATOR_SCALE_LOG").is_some() {
                eprintln!("logs in {}", dir.display());
            } else {
                let _ = std::fs::remove_dir_all(&dir);
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("allocator_scale: {e} (logs in {})", dir.display());
            std::process::ExitCode::FAILURE
        }
    }
}
