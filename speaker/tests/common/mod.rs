//! Shared helpers for tests that run the `podcidr-bgp` binary.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const BIN: &str = env!("CARGO_BIN_EXE_podcidr-bgp");

pub use integration_tests::TempDir;

/// A free port on 127.0.0.1, never the same twice in this process.
pub fn free_port() -> u16 {
    integration_tests::net::free_port(std::net::Ipv4Addr::LOCALHOST.into())
}

/// A child process stopped (SIGKILL) on drop unless already waited for.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(args: &[&str], log: &Path) -> Proc {
        Self::spawn_with_env(args, &[], log)
    }

    /// As [`Proc::spawn`], with extra environment variables.
    pub fn spawn_with_env(args: &[&str], env: &[(&str, &str)], log: &Path) -> Proc {
        let mut cmd = Command::new(BIN);
        cmd.args(args).envs(env.iter().copied());
        Self::spawn_command(cmd, log)
    }

    /// Starts `cmd` (the binary, or a wrapper such as `ip netns exec` or `setpriv` around
    /// it) with `RUST_LOG=info` and its output in `log`.
    pub fn spawn_command(mut cmd: Command, log: &Path) -> Proc {
        let out = std::fs::File::create(log).unwrap();
        let child = cmd
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap();
        Proc {
            child,
            log: log.to_owned(),
        }
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's PID.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    /// Waits (bounded) for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a finished `podcidr-bgp` run printed.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\nstderr: {}", self.stdout, self.stderr))
    }
}

/// Runs the binary to completion (killed if it outlives the bound).
pub async fn run(args: &[&str]) -> Run {
    let child = tokio::process::Command::new(BIN)
        .args(args)
        .env("NO_COLOR", "1")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), child)
        .await
        .expect("podcidr-bgp did not finish within 60 s")
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn nbs() -> fake_kube::Gvr {
    fake_kube::Gvr::new("podcidr.io/v1alpha1", "nodebgpstatuses")
}

pub fn npc() -> fake_kube::Gvr {
    fake_kube::Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs")
}

/// A plain HTTP/1.1 GET against a child's admin endpoint.
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

/// Polls `check` every 50 ms until it returns `Some`, at most `timeout`: for state only a
/// child process can tell us about (its admin endpoint).
pub async fn poll<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
pub mod kustomize;
pub mod link_local;
pub mod monitoring;
pub mod rbac;
pub mod real_api;
pub mod speaker;

/// `podcidr-bgp allocator` arguments against a fake API: an IPv4 pool 10.20.0.0/16 of /24s,
/// the Lease in `default`, the admin endpoint on `admin`.
pub fn allocator_args(kubeconfig: &Path, admin: &str) -> Vec<String> {
    [
        "allocator",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--cluster-pool-ipv4-cidr",
        "10.20.0.0/16",
        "--cluster-pool-ipv4-mask-size",
        "24",
        "--lease-namespace",
        "default",
        "--admin-listen",
        admin,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A speaker config in `dir`: node-a with the file source holding `cidrs`, one peer that never
/// answers, status publishing off, and `extra` top-level YAML.
pub fn lone_speaker_config(dir: &TempDir, cidrs: &[&str], extra: &str) -> PathBuf {
    std::fs::write(
        dir.path("cidrs.yaml"),
        format!("nodes:\n  node-a: [{}]\n", cidrs.join(", ")),
    )
    .unwrap();
    let cfg = dir.path("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "nodeName: node-a\nasn: 65001\nrouterId: 192.0.2.1\n\
             source: {{kind: file, path: {}}}\n\
             peers:\n  - {{name: tor, address: 127.0.0.1, port: {}, asn: 65000}}\n\
             admin: {{listen: \"127.0.0.1:{}\"}}\nstatus: {{publish: false}}\n{extra}\n",
            dir.path("cidrs.yaml").display(),
            free_port(),
            free_port()
        ),
    )
    .unwrap();
    cfg
}

/// A speaker config for the fake API: node-a with `source`, one eBGP peer (AS 65000,
/// multihop 2, no graceful restart) on 127.0.0.1:`peer_port`, status published every second.
pub fn api_speaker_config(
    source: &str,
    asn: u32,
    router_id: std::net::Ipv4Addr,
    allowed: &str,
    next_hop: &str,
    peer_port: u16,
    admin: SocketAddr,
) -> String {
    format!(
        "nodeName: node-a
asn: {asn}
routerId: {router_id}
source: {{kind: {source}}}
allowedPrefixes: [{allowed}]
nextHop: {{{next_hop}}}
peers:
  - name: tor1
    address: 127.0.0.1
    port: {peer_port}
    asn: 65000
    ebgpMultihop: 2
    gracefulRestart: {{enabled: false}}
admin: {{listen: \"{admin}\"}}
status: {{publish: true, minInterval: 1}}
"
    )
}

/// Writes `config` to `dir/config.yaml` and starts the speaker on it against the API in
/// `kubeconfig`, logging to `dir/<log>`.
pub fn spawn_api_speaker(dir: &TempDir, config: &str, kubeconfig: &Path, log: &str) -> Proc {
    let cfg = dir.path("config.yaml");
    std::fs::write(&cfg, config).unwrap();
    Proc::spawn(
        &[
            "speaker",
            "--config",
            cfg.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
        &dir.path(log),
    )
}

/// The prefixes the speaker with BGP Identifier `id` announced to `collector`.
pub fn collected(
    collector: &bgp_io::collector::Collector,
    id: std::net::Ipv4Addr,
) -> Vec<ipnet::IpNet> {
    collector
        .rib()
        .get(&id)
        .map(|t| t.routes.keys().copied().collect())
        .unwrap_or_default()
}

/// Waits (at most 20 s) until `id` announces exactly `want` to `collector`; fails with what
/// it has and `log` (the speaker's).
pub async fn wait_collected(
    collector: &bgp_io::collector::Collector,
    id: std::net::Ipv4Addr,
    want: &[&str],
    log: impl Fn() -> String,
) {
    let want: Vec<ipnet::IpNet> = want.iter().map(|p| p.parse().unwrap()).collect();
    let ok = collector
        .wait_for(Duration::from_secs(20), |r| {
            r.get(&id)
                .is_some_and(|t| t.routes.keys().copied().collect::<Vec<_>>() == want)
        })
        .await;
    assert!(
        ok,
        "collector has {:?}, want {want:?}\n{}",
        collected(collector, id),
        log()
    );
}

/// The first line of `admin`'s `/metrics` that starts with `line_prefix`.
pub async fn metric_line(admin: SocketAddr, line_prefix: &str) -> Option<String> {
    let (_, body) = http_get(admin, "/metrics").await?;
    body.lines()
        .find(|l| l.starts_with(line_prefix))
        .map(str::to_owned)
}

/// Serves `fake` inside namespace `ns` on 198.18.0.1 (where the netns tests' node routes
/// lead) and writes a kubeconfig for it at `kubeconfig`: how speakers in node namespaces reach
/// the in-process fake API. Call it inside the fake's runtime.
pub fn serve_fake_api_in(fake: &fake_kube::FakeKube, ns: &str, kubeconfig: &std::path::Path) {
    let addr = "198.18.0.1:0".parse().expect("address");
    let listener =
        integration_tests::netns::tcp_listener_in(ns, addr).expect("a listener in the namespace");
    let api = fake.serve_also(listener).expect("serve the fake API");
    fake.write_kubeconfig_at(kubeconfig, &format!("http://{api}"))
        .expect("write the kubeconfig");
}
