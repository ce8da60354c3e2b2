//! `podcidr-bgp allocator` as an operator runs it: bad flags exit 2 naming the flag (before
//! any API call), and a run against the fake API server allocates, serves /metrics and stops
//! cleanly on SIGTERM.

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::Duration;

use fake_kube::{FakeKube, Gvr};
use podcidr_api::NodePodCIDR;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::common;
use common::{BIN, TempDir, allocator_args, free_port};

const WAIT: Duration = Duration::from_secs(30);

async fn run_to_end(args: &[&str]) -> (i32, String) {
    let out = tokio::time::timeout(
        WAIT,
        Command::new(BIN)
            .arg("allocator")
            .args(args)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("exits in time")
    .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_flag_values_exit_2_naming_the_flag_before_any_write() {
    let fake = FakeKube::start().await.unwrap();
    let dir = TempDir::new("bad");
    let kc = dir.0.join("kubeconfig");
    fake.write_kubeconfig(&kc).unwrap();
    let kc = kc.to_str().unwrap();
    for (args, flag, value) in [
        (
            vec!["--cluster-pool-ipv4-cidr", "10.0.0.1/16"],
            "--cluster-pool-ipv4-cidr",
            "10.0.0.1/16",
        ),
        (
            vec!["--cluster-pool-ipv4-cidr", "10.0.0.0/16,fd00::/48"],
            "--cluster-pool-ipv4-cidr",
            "fd00::/48",
        ),
        (
            vec![
                "--cluster-pool-ipv4-cidr",
                "10.0.0.0/16",
                "--cluster-pool-ipv4-mask-size",
                "40",
            ],
            "--cluster-pool-ipv4-mask-size",
            "40",
        ),
        (
            vec![
                "--cluster-pool-ipv6-cidr",
                "fd00::/48",
                "--cluster-pool-ipv6-mask-size",
                "32",
            ],
            "--cluster-pool-ipv6-mask-size",
            "32",
        ),
        (vec!["--lease-duration", "1"], "--lease-duration", "1"),
        (vec!["--quarantine", "soon"], "--quarantine", "soon"),
        (vec!["--api-qps", "0"], "--api-qps", "0"),
        (vec!["--api-qps=-5"], "--api-qps", "-5"),
        (vec!["--api-burst", "0"], "--api-burst", "0"),
        (vec!["--api-burst", "lots"], "--api-burst", "lots"),
    ] {
        let mut all = vec!["--kubeconfig", kc];
        all.extend(args.iter().copied());
        let (code, stderr) = run_to_end(&all).await;
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(value),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(fake.writes(), 0, "{:?}", fake.request_counts());
}

/// `podcidr-bgp allocator` against `kc` with the admin listener on `admin` and `extra` flags,
/// its stderr piped.
fn spawn(kc: &std::path::Path, admin: &str, extra: &[&str]) -> tokio::process::Child {
    Command::new(BIN)
        .args(allocator_args(kc, admin))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocates_for_three_nodes_and_stops_on_sigterm() {
    let fake = FakeKube::start().await.unwrap();
    for n in ["node-a", "node-b", "node-c"] {
        fake.insert(&Gvr::nodes(), json!({"metadata": {"name": n}}))
            .unwrap();
    }
    let dir = TempDir::new("run");
    let kc = dir.0.join("kubeconfig");
    fake.write_kubeconfig(&kc).unwrap();
    let port = free_port();
    let admin = format!("127.0.0.1:{port}");
    let mut child = spawn(&kc, &admin, &[]);
    let records = Gvr::of::<NodePodCIDR>();
    let done = |f: &FakeKube| {
        let list = f.list(&records, None);
        list.len() == 3
            && list.iter().all(|r: &Value| {
                r["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Allocated" && c["status"] == "True")
                })
            })
    };
    fake.wait_for(WAIT, done)
        .await
        .expect("three nodes allocated");
    let mut got: Vec<String> = fake
        .list(&records, None)
        .iter()
        .map(|r| r["spec"]["podCIDRs"][0].as_str().unwrap().to_string())
        .collect();
    got.sort();
    assert_eq!(got, ["10.20.0.0/24", "10.20.1.0/24", "10.20.2.0/24"]);
    let metrics = tokio::task::spawn_blocking(move || http_get(port, "/metrics"))
        .await
        .unwrap();
    assert!(metrics.contains("podcidr_allocator_leader 1"), "{metrics}");
    assert!(
        metrics.contains(r#"podcidr_allocator_pool_allocated{pool="default",family="ipv4"} 3"#),
        "{metrics}"
    );
    let ready = tokio::task::spawn_blocking(move || http_get(port, "/readyz"))
        .await
        .unwrap();
    assert!(
        ready.starts_with("HTTP/1.0 200") || ready.starts_with("HTTP/1.1 200"),
        "{ready}"
    );

    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // SAFETY: plain kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("stops after SIGTERM")
        .unwrap();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        e.read_to_string(&mut stderr).await.unwrap();
    }
    assert_eq!(status.code(), Some(0), "{stderr}");
    let lease = fake
        .get(&Gvr::leases(), Some("default"), "podcidr-bgp-allocator")
        .expect("lease");
    assert!(
        lease["spec"]["holderIdentity"].is_null(),
        "released: {lease}"
    );
}

/// The shipped Deployment names no pool: until the operator writes a PodCIDRPool (or sets
/// the pool flags) the allocator allocates nothing, writes no record and no Event, and says
/// what to create. Then a pool appears and the nodes get CIDRs from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_pool_nothing_is_written_until_the_operator_creates_one() {
    let fake = FakeKube::start().await.unwrap();
    for n in ["node-a", "node-b"] {
        fake.insert(&Gvr::nodes(), json!({"metadata": {"name": n}}))
            .unwrap();
    }
    let dir = TempDir::new("no-pool");
    let kc = dir.0.join("kubeconfig");
    fake.write_kubeconfig(&kc).unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let log = dir.0.join("allocator.log");
    let mut child = Command::new(BIN)
        .args([
            "allocator",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--lease-namespace",
            "default",
            "--admin-listen",
            &admin,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The message is logged by the leader's first pass, after every initial list.
    let said = tokio::time::timeout(WAIT, async {
        loop {
            if std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains(ipam_watch::allocator::NO_POOL)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(said.is_ok(), "{text}");
    assert!(text.contains("PodCIDRPool") && text.contains("--cluster-pool-ipv4-cidr"));
    let records = Gvr::of::<NodePodCIDR>();
    assert!(fake.list(&records, None).is_empty());
    assert_eq!(fake.writes_to("nodepodcidrs"), 0);
    assert_eq!(fake.writes_to("events"), 0);

    fake.insert(
        &Gvr::new("podcidr.io/v1alpha1", "podcidrpools"),
        json!({"metadata": {"name": "main"},
               "spec": {"ipv4": {"cidrs": ["10.30.0.0/16"], "maskSize": 24}}}),
    )
    .unwrap();
    fake.wait_for(WAIT, |f| f.list(&records, None).len() == 2)
        .await
        .expect("both nodes allocated from the operator's pool");
    let _ = child.kill().await;
}

/// An upgrade by re-applying `deploy/` prunes nothing: the speakers' Role and RoleBinding of
/// an earlier release stay in podcidr-system, where they may write the allocator's election
/// Lease. The allocator says so, with the command that removes each, and counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_releases_speaker_role_is_reported_with_the_command_that_removes_it() {
    let fake = FakeKube::start().await.unwrap();
    for (plural, kind) in [("roles", "Role"), ("rolebindings", "RoleBinding")] {
        fake.insert(
            &Gvr::new("rbac.authorization.k8s.io/v1", plural),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
                   "metadata": {"name": "podcidr-bgp-speaker", "namespace": "default"}}),
        )
        .unwrap();
    }
    let dir = TempDir::new("leftovers");
    let kc = dir.0.join("kubeconfig");
    fake.write_kubeconfig(&kc).unwrap();
    let port = free_port();
    let admin = format!("127.0.0.1:{port}");
    // The allocator's namespace here is its Lease's, `default`.
    let child = spawn(&kc, &admin, &[]);
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let metrics = tokio::task::spawn_blocking(move || {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                http_get(port, "/metrics")
            } else {
                String::new()
            }
        })
        .await
        .unwrap();
        if metrics.contains("podcidr_allocator_leftover_objects 2") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // SAFETY: plain kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("stops after SIGTERM")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for fix in [
        "kubectl -n default delete role podcidr-bgp-speaker",
        "kubectl -n default delete rolebinding podcidr-bgp-speaker",
    ] {
        assert!(stderr.contains(fix), "{fix}: {stderr}");
    }
    // Only read: nothing an earlier release left is changed by the allocator.
    assert!(
        fake.get(
            &Gvr::new("rbac.authorization.k8s.io/v1", "roles"),
            Some("default"),
            "podcidr-bgp-speaker"
        )
        .is_some()
    );
}

/// Issue 31 item 1: the metrics port is on the node's address, where every pod can reach it;
/// a pod that opens more connections than its cap and sends nothing holds every slot. The
/// probes are on their own loopback listener, so the kubelet's /livez and /readyz still
/// answer while the metrics port is flooded, and the metrics port serves nothing but
/// /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooded_metrics_port_holds_no_probe_back() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), json!({"metadata": {"name": "node-a"}}))
        .unwrap();
    let dir = TempDir::new("probe-flood");
    let kc = dir.0.join("kubeconfig");
    fake.write_kubeconfig(&kc).unwrap();
    let (probe_port, metrics_port) = (free_port(), free_port());
    let admin = format!("127.0.0.1:{probe_port}");
    let metrics = format!("127.0.0.1:{metrics_port}");
    let _child = spawn(&kc, &admin, &["--metrics-listen", &metrics]);
    let get = |port: u16, path: &'static str| {
        tokio::task::spawn_blocking(move || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .is_ok()
                .then(|| http_get(port, path))
        })
    };
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let ready = get(probe_port, "/readyz")
            .await
            .unwrap()
            .unwrap_or_default();
        if ready.starts_with("HTTP/1.1 200") || ready.starts_with("HTTP/1.0 200") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{ready}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let only = get(metrics_port, "/livez").await.unwrap().unwrap();
    assert!(
        only.contains(" 404 "),
        "the metrics port serves no probe: {only}"
    );
    // More idle connections than the server's cap (256): every slot held, the rest queued.
    let flood = |port: u16| -> Vec<std::net::TcpStream> {
        (0..300)
            .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect()
    };
    let flooded = flood(metrics_port);
    for path in ["/livez", "/readyz"] {
        let answer = tokio::task::spawn_blocking(move || kubelet_probe(probe_port, path))
            .await
            .unwrap();
        assert_eq!(
            answer.as_deref(),
            Ok("200"),
            "{path} while /metrics is flooded"
        );
    }
    drop(flooded);
    // The same flood on the probes' own port fails them within the kubelet's 1 s: what a
    // shared port did (the flood is real).
    let flooded = flood(probe_port);
    let answer = tokio::task::spawn_blocking(move || kubelet_probe(probe_port, "/livez"))
        .await
        .unwrap();
    assert!(answer.is_err(), "{answer:?}");
    drop(flooded);
}

/// An HTTP GET as the kubelet's probe sends it, with its default `timeoutSeconds: 1`: the
/// status code, or why there was none in time.
fn kubelet_probe(port: u16, path: &str) -> Result<String, String> {
    let limit = Duration::from_secs(1);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, limit).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(limit)).map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut head = [0_u8; 12];
    s.read_exact(&mut head).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&head);
    text.get(9..12)
        .map(str::to_owned)
        .ok_or_else(|| format!("not HTTP: {text}"))
}
