//! A real Kubernetes control plane for tests: etcd 3.6 and kube-apiserver of the newest
//! Kubernetes the suite builds or of the oldest the README supports ([`KubeVersion`]), all
//! built from their Go modules by `scripts/build-go-tool.sh` (versions in
//! `scripts/kube-versions.env`), on free loopback ports, each test's own.
//!
//! The API server runs with RBAC, a token file for the admin identity, and service-account
//! signing keys, so every shipped ServiceAccount gets a real token through the TokenRequest
//! API (`kubectl create token`) and its own kubeconfig. No controller-manager, scheduler or
//! kubelet runs: no pods, no garbage collection, no namespace finalization. What needs those
//! stays with the in-process fake API (`fake-kube`).
//!
//! Processes are ours, stopped by PID on drop; every wait is bounded.
//!
//! Where the binaries come from: `target/test-tools/kube-<version>/kube-apiserver` and
//! `target/test-tools/etcd/{etcd,etcdctl}`, links `scripts/install-test-deps.sh` makes to the
//! cached builds. Without them [`ControlPlane::start`] returns `None` through
//! [`crate::skip::unavailable`] (a skip on a developer machine, a panic under CI).

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::kustomize;
use crate::process::{Daemon, WorkDir, run_bounded, tail};

/// The service-account issuer and audience of the tokens (what a real cluster uses).
const ISSUER: &str = "https://kubernetes.default.svc";
/// A range for Service ClusterIPs: the API server allocates from it, nothing is routed.
const SERVICE_RANGE: &str = "198.18.255.0/24";

/// `KEY=value` lines of scripts/kube-versions.env, the one place the versions are written.
const VERSIONS: &str = include_str!("../../scripts/kube-versions.env");

fn pinned(key: &str) -> &'static str {
    VERSIONS
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::trim)
        .unwrap_or_else(|| panic!("scripts/kube-versions.env has no {key}"))
}

/// Which kube-apiserver a control plane runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KubeVersion {
    /// The newest Kubernetes the module proxy serves that builds here: every real-API test.
    #[default]
    Newest,
    /// The oldest the README supports: the install, CRD and admission tests run here too.
    Oldest,
}

impl KubeVersion {
    /// Both, newest first.
    pub const ALL: [KubeVersion; 2] = [KubeVersion::Newest, KubeVersion::Oldest];

    /// `1.37.2`.
    pub fn version(self) -> &'static str {
        match self {
            KubeVersion::Newest => pinned("KUBE_NEWEST"),
            KubeVersion::Oldest => pinned("KUBE_OLDEST"),
        }
    }

    /// The minor version (`37`).
    pub fn minor(self) -> u32 {
        self.version()
            .split('.')
            .nth(1)
            .and_then(|m| m.parse().ok())
            .expect("a version MAJOR.MINOR.PATCH")
    }
}

/// The etcd version the control planes run.
pub fn etcd_version() -> &'static str {
    pinned("ETCD_VERSION")
}

fn loopback() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn missing(what: &str) -> Option<ControlPlane> {
    crate::skip::unavailable(format!(
        "a real control plane ({what}); `scripts/install-test-deps.sh` (as root) builds \
         kube-apiserver {} and {}, and etcd {}, from their Go modules once (cached)",
        KubeVersion::Newest.version(),
        KubeVersion::Oldest.version(),
        etcd_version()
    ))
}

fn test_tool(path: &str) -> Option<PathBuf> {
    let p = workspace_root().join("target/test-tools").join(path);
    p.exists().then_some(p)
}

/// An identity's kubeconfig and token.
#[derive(Debug, Clone)]
pub struct Identity {
    pub kubeconfig: PathBuf,
    pub token: String,
    /// `system:serviceaccount:<ns>:<name>`, or the admin's user name.
    pub username: String,
}

/// What a test may change about the control plane; `Default` is what [`ControlPlane::start`]
/// runs.
#[derive(Debug, Clone, Default)]
pub struct ControlPlaneOptions {
    /// Extra kube-apiserver flags, after the harness's own (so a repeated flag overrides it),
    /// kept across [`ControlPlane::restart_apiserver`]. E.g. `--watch-cache=false`: every
    /// watch then reads etcd directly, so one resumed from a compacted revision gets 410 Gone
    /// from etcd, not from the watch cache's own window.
    pub apiserver_args: Vec<String>,
    /// Which kube-apiserver: the newest unless a test runs on both.
    pub version: KubeVersion,
}

/// etcd + kube-apiserver, stopped on drop.
#[derive(Debug)]
pub struct ControlPlane {
    dir: WorkDir,
    etcd: Daemon,
    apiserver: Option<Daemon>,
    kube_apiserver: PathBuf,
    etcdctl: PathBuf,
    etcd_port: u16,
    api_port: u16,
    admin: Identity,
    starts: u32,
    options: ControlPlaneOptions,
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver and waits (bounded) until the API server is ready.
    /// `None` (after saying why) when the binaries are missing outside CI.
    pub fn start() -> Option<ControlPlane> {
        Self::start_with(ControlPlaneOptions::default())
    }

    /// As [`ControlPlane::start`], with `options`.
    pub fn start_with(options: ControlPlaneOptions) -> Option<ControlPlane> {
        let version = options.version.version();
        let Some(kube_apiserver) = test_tool(&format!("kube-{version}/kube-apiserver")) else {
            return missing(&format!("no kube-apiserver {version} build found"));
        };
        let (Some(etcd), Some(etcdctl)) = (test_tool("etcd/etcd"), test_tool("etcd/etcdctl"))
        else {
            return missing(&format!("no etcd {} build found", etcd_version()));
        };
        for tool in ["openssl", "kubectl"] {
            if crate::find_bin(tool).is_none() {
                return missing(&format!("{tool} not found"));
            }
        }
        let dir = WorkDir::new("cp");
        Self::make_credentials(&dir);
        let etcd_port = crate::net::free_port(loopback());
        let etcd = Self::spawn_etcd(&etcd, &dir, etcd_port);
        let api_port = crate::net::free_port(loopback());
        let admin_token = "podcidr-test-admin-token".to_owned();
        fs::write(
            dir.file("tokens.csv"),
            format!("{admin_token},kubernetes-admin,admin-uid,\"system:masters\"\n"),
        )
        .expect("write token file");
        fs::write(
            dir.file("audit-policy.yaml"),
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n\
             rules:\n- level: Metadata\n",
        )
        .expect("write audit policy");
        let admin_kubeconfig = dir.file("admin.kubeconfig");
        let mut cp = ControlPlane {
            admin: Identity {
                kubeconfig: admin_kubeconfig.clone(),
                token: admin_token.clone(),
                username: "kubernetes-admin".into(),
            },
            dir,
            etcd,
            apiserver: None,
            kube_apiserver,
            etcdctl,
            etcd_port,
            api_port,
            starts: 0,
            options,
        };
        cp.write_kubeconfig(&admin_kubeconfig, "kubernetes-admin", &admin_token);
        cp.start_apiserver();
        Some(cp)
    }

    /// A CA, the API server's serving certificate for 127.0.0.1, and the service-account
    /// signing key pair, with openssl.
    fn make_credentials(dir: &WorkDir) {
        let openssl = |args: &[&str]| {
            let mut cmd = Command::new("openssl");
            cmd.args(args).current_dir(dir.path());
            let out = run_bounded(cmd, Duration::from_secs(60)).expect("openssl runs");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "7",
            "-subj",
            "/CN=podcidr-test-ca",
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=kube-apiserver",
        ]);
        fs::write(
            dir.file("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write server.ext");
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "7",
            "-extfile",
            "server.ext",
        ]);
        openssl(&["genrsa", "-out", "sa.key", "2048"]);
        openssl(&["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"]);
    }

    fn spawn_etcd(etcd: &Path, dir: &WorkDir, port: u16) -> Daemon {
        let peer = crate::net::free_port(loopback());
        // On tmpfs when there is one: etcd fsyncs every write, and a test needs no durability
        // beyond the process (an API server restart keeps etcd running).
        let shm = Path::new("/dev/shm");
        let data = if shm.is_dir() {
            shm.join(format!(
                "podcidr-etcd-{}-{}",
                std::process::id(),
                dir.path().file_name().unwrap_or_default().to_string_lossy()
            ))
        } else {
            dir.file("etcd")
        };
        let _ = fs::remove_dir_all(&data);
        fs::write(dir.file("etcd-data-dir"), data.to_string_lossy().as_bytes())
            .expect("record etcd data dir");
        let mut cmd = Command::new(etcd);
        cmd.args([
            "--name=podcidr-test",
            &format!("--data-dir={}", data.display()),
            &format!("--listen-client-urls=http://127.0.0.1:{port}"),
            &format!("--advertise-client-urls=http://127.0.0.1:{port}"),
            &format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
            &format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
            &format!("--initial-cluster=podcidr-test=http://127.0.0.1:{peer}"),
            "--log-level=warn",
        ]);
        Daemon::spawn("etcd", cmd, &dir.file("etcd.log"))
    }

    fn write_kubeconfig(&self, path: &Path, user: &str, token: &str) {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    \
             certificate-authority: {}\nusers:\n- name: {user}\n  user:\n    token: {token}\n\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: {user}\n    \
             namespace: default\ncurrent-context: test\n",
            self.url(),
            self.dir.file("ca.crt").display()
        );
        fs::write(path, text).expect("write kubeconfig");
    }

    /// The Kubernetes version this control plane runs.
    pub fn version(&self) -> KubeVersion {
        self.options.version
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// The etcd client URL (for `etcdctl`).
    pub fn etcd_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd_port)
    }

    /// The CA that signed the API server's certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.file("ca.crt")
    }

    /// The cluster admin (group `system:masters`).
    pub fn admin(&self) -> &Identity {
        &self.admin
    }

    /// A file in the control plane's own directory (logs: `apiserver.log`, `etcd.log`).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.file(name)
    }

    fn start_apiserver(&mut self) {
        let d = |f: &str| self.dir.file(f).display().to_string();
        let mut cmd = Command::new(&self.kube_apiserver);
        cmd.args([
            format!("--etcd-servers={}", self.etcd_url()),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", self.api_port),
            "--advertise-address=127.0.0.1".into(),
            format!("--tls-cert-file={}", d("server.crt")),
            format!("--tls-private-key-file={}", d("server.key")),
            format!("--token-auth-file={}", d("tokens.csv")),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-key-file={}", d("sa.pub")),
            format!("--service-account-signing-key-file={}", d("sa.key")),
            format!("--service-account-issuer={ISSUER}"),
            format!("--api-audiences={ISSUER}"),
            format!("--service-cluster-ip-range={SERVICE_RANGE}"),
            // The `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints refuse.
            "--endpoint-reconciler-type=none".into(),
            // Every request's user, verb, object and answer: what tests read to tell which
            // calls a component made and what the authorizer decided (`audit_events()`).
            format!("--audit-policy-file={}", d("audit-policy.yaml")),
            format!("--audit-log-path={}", d("audit.log")),
            "--audit-log-format=json".into(),
            "--profiling=false".into(),
            "--v=1".into(),
        ]);
        cmd.args(&self.options.apiserver_args);
        self.starts += 1;
        let log = self.dir.file("apiserver.log");
        let _ = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| {
                use std::io::Write;
                writeln!(f, "=== start #{} ===", self.starts)
            });
        self.apiserver = Some(Daemon::spawn("kube-apiserver", cmd, &log));
        self.wait_ready(Duration::from_secs(90));
    }

    /// Polls `/readyz` (bounded) until the API server answers `ok`.
    fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Some(a) = self.apiserver.as_mut()
                && !a.is_running()
            {
                panic!(
                    "kube-apiserver exited while starting:\n{}",
                    tail(&self.dir.file("apiserver.log"), 40)
                );
            }
            match self.kubectl_as(&self.admin, &["get", "--raw=/readyz"]) {
                Ok(out) if out.trim() == "ok" => return,
                Ok(out) => last = out,
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "kube-apiserver not ready within {timeout:?} (last: {last}):\n{}",
            tail(&self.dir.file("apiserver.log"), 40)
        );
    }

    /// Stops the API server (SIGTERM, bounded) and starts it again on the same port and etcd;
    /// returns once it is ready. Clients see their connections and watches drop.
    pub fn restart_apiserver(&mut self) {
        if let Some(mut a) = self.apiserver.take() {
            a.stop();
        }
        self.start_apiserver();
    }

    /// Compacts etcd at its current revision, so every watch the API server resumes from an
    /// older resourceVersion gets 410 Gone. Returns the revision compacted at.
    pub fn compact_etcd(&self) -> i64 {
        let rev = self.etcd_revision();
        self.etcdctl(&["compaction", "--physical", &rev.to_string()]);
        rev
    }

    /// etcd's current revision: every resourceVersion the API server hands out is one.
    pub fn etcd_revision(&self) -> i64 {
        let status = self.etcdctl(&["endpoint", "status", "--write-out=json"]);
        let v: Value = serde_json::from_str(&status).expect("etcdctl endpoint status JSON");
        v[0]["Status"]["header"]["revision"]
            .as_i64()
            .unwrap_or_else(|| panic!("no revision in {status}"))
    }

    /// Runs etcdctl (v3 API) against this etcd; panics on failure.
    pub fn etcdctl(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(&self.etcdctl);
        cmd.env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.etcd_url()))
            .args(args);
        let out = run_bounded(cmd, Duration::from_secs(60)).expect("etcdctl runs");
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl with `identity`'s kubeconfig (bounded); stdout, or stderr as the error.
    pub fn kubectl_as(&self, identity: &Identity, args: &[&str]) -> Result<String, String> {
        self.kubectl_with_input(identity, args, None)
    }

    /// As [`Self::kubectl_as`], with `input` as the file `-` names (for `-f -`).
    pub fn kubectl_with_input(
        &self,
        identity: &Identity,
        args: &[&str],
        input: Option<&str>,
    ) -> Result<String, String> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        if let Some(text) = input {
            let file = self.dir.file(&format!(
                "input-{}.yaml",
                SEQ.fetch_add(1, Ordering::Relaxed)
            ));
            fs::write(&file, text).map_err(|e| format!("write {}: {e}", file.display()))?;
            for a in args.iter_mut().filter(|a| *a == "-") {
                *a = file.display().to_string();
            }
        }
        let mut cmd = Command::new("kubectl");
        // Discovery cached per control plane: kubectl's shared cache is keyed by address,
        // and a port reused by a later control plane would get stale API versions.
        cmd.env("KUBECONFIG", &identity.kubeconfig)
            .arg(format!(
                "--cache-dir={}",
                self.dir.file("kubectl-cache").display()
            ))
            .arg("--request-timeout=30s")
            .args(&args);
        let out = run_bounded(cmd, Duration::from_secs(60))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// kubectl as the admin; panics on failure.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_as(&self.admin, args)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"))
    }

    /// `kubectl apply -f -` of `yaml` as the admin; panics on failure.
    pub fn apply(&self, yaml: &str) -> String {
        self.kubectl_with_input(&self.admin, &["apply", "-f", "-"], Some(yaml))
            .unwrap_or_else(|e| panic!("kubectl apply: {e}\n{yaml}"))
    }

    /// A kubeconfig and token for ServiceAccount `ns/name` (which must exist), issued by the
    /// TokenRequest API as a pod's projected token would be.
    pub fn service_account(&self, ns: &str, name: &str) -> Identity {
        self.issue_token(ns, name, &[], &format!("{ns}.{name}"))
    }

    /// A token for ServiceAccount `ns/name` from the TokenRequest API (`extra` flags of
    /// `kubectl create token`), and a kubeconfig `<file>.kubeconfig` with it.
    fn issue_token(&self, ns: &str, name: &str, extra: &[&str], file: &str) -> Identity {
        let mut args = vec!["create", "token", name, "-n", ns, "--duration=24h"];
        args.extend(extra);
        let token = self.kubectl(&args).trim().to_owned();
        let kubeconfig = self.dir.file(&format!("{file}.kubeconfig"));
        let username = format!("system:serviceaccount:{ns}:{name}");
        self.write_kubeconfig(&kubeconfig, &username, &token);
        Identity {
            kubeconfig,
            token,
            username,
        }
    }

    /// As [`Self::service_account`], with the token bound to Pod `ns/pod` as the kubelet's
    /// projected token is: the API server puts the Pod's node into the token
    /// (`authentication.kubernetes.io/node-name` in the user's extra; Kubernetes 1.30+), which
    /// is what the speaker admission policy checks.
    pub fn pod_service_account(&self, ns: &str, name: &str, pod: &str) -> Identity {
        let bound = format!("--bound-object-name={pod}");
        self.issue_token(
            ns,
            name,
            &["--bound-object-kind=Pod", &bound],
            &format!("{ns}.{name}.{pod}"),
        )
    }

    /// The identity of a DaemonSet Pod of ServiceAccount `ns/sa` on `node`: the Pod
    /// `<sa>-<node>` is created (no kubelet runs it) and a token bound to it issued, so the
    /// server knows the node, as for the kubelet's projected token ([`Self::pod_service_account`]).
    pub fn node_pod_identity(&self, ns: &str, sa: &str, node: &str) -> Identity {
        let pod = format!("{sa}-{node}");
        let body = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": ns},
            "spec": {"nodeName": node, "serviceAccountName": sa,
                     "containers": [{"name": "main", "image": "podcidr-bgp:test"}]}});
        self.kubectl_with_input(&self.admin, &["apply", "-f", "-"], Some(&body.to_string()))
            .unwrap_or_else(|e| panic!("create Pod {ns}/{pod}: {e}"));
        self.pod_service_account(ns, sa, &pod)
    }

    /// Creates a Node object (no kubelet behind it) with an InternalIP, labels and, when
    /// given, `spec.podCIDRs`.
    pub fn create_node(&self, name: &str, internal_ip: &str, pod_cidrs: &[&str]) -> String {
        let mut node = serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/os": "linux", "kubernetes.io/hostname": name}},
            "spec": {},
        });
        if !pod_cidrs.is_empty() {
            node["spec"]["podCIDR"] = pod_cidrs[0].into();
            node["spec"]["podCIDRs"] = pod_cidrs.into();
        }
        self.kubectl_with_input(&self.admin, &["create", "-f", "-"], Some(&node.to_string()))
            .unwrap_or_else(|e| panic!("create Node {name}: {e}"));
        // A Node's addresses live in its status (a kubelet would write them).
        let status = serde_json::json!({
            "status": {"addresses": [{"type": "InternalIP", "address": internal_ip},
                                     {"type": "Hostname", "address": name}]}
        });
        self.kubectl(&[
            "patch",
            "node",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]);
        self.kubectl(&["get", "node", name, "-o", "jsonpath={.metadata.uid}"])
    }

    /// Installs as the operator guide says, as the admin: deploy/crds/ first (waiting until
    /// the CRDs are Established), then deploy/ (the workloads, the admission policy and its
    /// binding included). Returns what was applied, CRDs first.
    pub fn install_deploy(&self) -> Vec<Value> {
        let mut docs = self.install_crds();
        let rest = kustomize::render(&kustomize::deploy());
        self.apply(&list_of(&rest));
        docs.extend(rest);
        docs
    }

    /// Applies deploy/crds/ (as [`Self::install_deploy`] does), with kubectl's schema
    /// validation and the server's strict field validation, and waits until every CRD is
    /// Established. Returns the CRDs.
    pub fn install_crds(&self) -> Vec<Value> {
        let crds = kustomize::render(&kustomize::crds());
        self.kubectl_with_input(
            &self.admin,
            &["apply", "--validate=strict", "-f", "-"],
            Some(&list_of(&crds)),
        )
        .unwrap_or_else(|e| panic!("applying the CRDs: {e}"));
        self.wait_crds_established();
        crds
    }

    /// Waits (bounded, 60 s) until every CRD is Established.
    pub fn wait_crds_established(&self) {
        self.kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=60s",
        ]);
    }

    /// The API server's own metrics (Prometheus text), as the admin.
    pub fn metrics(&self) -> String {
        self.kubectl(&["get", "--raw=/metrics"])
    }

    /// Resident memory (KiB) of the API server and of etcd, from /proc.
    pub fn rss_kib(&self) -> (u64, u64) {
        let of = |pid: u32| {
            fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmRSS:"))
                        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
                })
                .unwrap_or(0)
        };
        (
            self.apiserver.as_ref().map_or(0, |a| of(a.pid())),
            of(self.etcd.pid()),
        )
    }

    /// The API server's audit events so far (`audit.k8s.io/v1` Event, level Metadata, one
    /// per request and stage: `ResponseStarted` for watches, `ResponseComplete` for all):
    /// `user.username`, `verb`, `objectRef` {resource, subresource, namespace, name},
    /// `responseStatus.code`. Requests the authorizer refuses are in it too (403). Oldest
    /// first.
    pub fn audit_events(&self) -> Vec<Value> {
        fs::read_to_string(self.dir.file("audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The last lines of the API server's log, for failure messages.
    pub fn apiserver_log_tail(&self, lines: usize) -> String {
        tail(&self.dir.file("apiserver.log"), lines)
    }
}

/// A `v1` List of `docs`, for one `kubectl apply -f -`.
fn list_of(docs: &[Value]) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string()
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(mut a) = self.apiserver.take() {
            a.stop();
        }
        self.etcd.stop();
        if let Ok(data) = fs::read_to_string(self.dir.file("etcd-data-dir"))
            && std::env::var_os("PODCIDR_KEEP_TEST_DIRS").is_none_or(|v| v != "1")
        {
            let _ = fs::remove_dir_all(data.trim());
        }
    }
}
