//! Running the `podcidr-bgp` binaries against the real control plane
//! (`integration_tests::control_plane`), each as its own shipped ServiceAccount.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use bgp_io::collector::{Collector, CollectorConfig};
use serde_json::json;

use serde_json::Value;

pub use integration_tests::control_plane::{
    ControlPlane, ControlPlaneOptions, Identity, KubeVersion,
};

use super::{Proc, TempDir, free_port, http_get};

/// Bound on every wait for the binaries' effects on the API.
pub const WAIT: Duration = Duration::from_secs(60);

/// The namespaces and ServiceAccounts deploy/ ships.
pub const SYSTEM_NS: &str = "podcidr-system";
pub const LEASE_NS: &str = "podcidr-node-lease";
pub const SPEAKER_SA: &str = "podcidr-bgp-speaker";
pub const ALLOCATOR_SA: &str = "podcidr-bgp-allocator";

/// A bare control plane of `version`; `None` when unavailable outside CI (the harness says
/// why).
pub fn control_plane_on(version: KubeVersion) -> Option<ControlPlane> {
    ControlPlane::start_with(ControlPlaneOptions {
        version,
        ..ControlPlaneOptions::default()
    })
}

/// A control plane (the newest version) with deploy/ installed; `None` when the real control
/// plane is unavailable outside CI (the harness says why).
pub fn installed_control_plane() -> Option<ControlPlane> {
    installed_control_plane_with(ControlPlaneOptions::default())
}

/// As [`installed_control_plane`], with `options` (e.g. extra kube-apiserver flags).
pub fn installed_control_plane_with(options: ControlPlaneOptions) -> Option<ControlPlane> {
    let cp = ControlPlane::start_with(options)?;
    cp.install_deploy();
    Some(cp)
}

/// The identity of the speaker on `node` (whose Node must exist): its ServiceAccount's token,
/// bound to a Pod of the DaemonSet's on that node as the kubelet's projected token is, so the
/// server knows the node (`authentication.kubernetes.io/node-name`) and the admission policy
/// lets it write that node's NodeBGPStatus and Lease only. No kubelet runs the Pod.
pub fn speaker_identity(cp: &ControlPlane, node: &str) -> Identity {
    cp.node_pod_identity(SYSTEM_NS, SPEAKER_SA, node)
}

/// The allocator's identity (its ServiceAccount's token).
pub fn allocator_identity(cp: &ControlPlane) -> Identity {
    cp.service_account(SYSTEM_NS, ALLOCATOR_SA)
}

/// `podcidr-bgp allocator` as the shipped Deployment runs it (its Lease in podcidr-system),
/// with an IPv4 pool 10.20.0.0/16 of /24s, `extra` flags, logging to `dir/<log>`.
pub fn spawn_allocator(
    dir: &TempDir,
    identity: &Identity,
    extra: &[&str],
    log: &str,
) -> (Proc, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let mut args = vec![
        "allocator",
        "--kubeconfig",
        identity.kubeconfig.to_str().unwrap(),
        "--cluster-pool-ipv4-cidr",
        "10.20.0.0/16",
        "--cluster-pool-ipv4-mask-size",
        "24",
        "--lease-namespace",
        SYSTEM_NS,
        "--admin-listen",
        &admin,
    ];
    args.extend_from_slice(extra);
    (Proc::spawn(&args, &dir.path(log)), admin)
}

/// `podcidr-bgp speaker --config <config>` as the shipped DaemonSet runs it (its Lease in
/// podcidr-node-lease, `NODE_NAME` set), logging to `dir/<log>`.
pub fn spawn_speaker(
    dir: &TempDir,
    identity: &Identity,
    node: &str,
    config: &str,
    log: &str,
) -> Proc {
    let cfg = dir.path(&format!("{node}.yaml"));
    std::fs::write(&cfg, config).unwrap();
    spawn_speaker_file(identity, node, &cfg, &dir.path(log))
}

pub fn spawn_speaker_file(identity: &Identity, node: &str, cfg: &Path, log: &Path) -> Proc {
    Proc::spawn_with_env(
        &[
            "speaker",
            "--config",
            cfg.to_str().unwrap(),
            "--kubeconfig",
            identity.kubeconfig.to_str().unwrap(),
            "--lease-namespace",
            LEASE_NS,
        ],
        &[
            ("NODE_NAME", node),
            ("POD_NAME", &format!("speaker-{node}")),
        ],
        log,
    )
}

/// `podcidr-bgp allocator` as one replica of the shipped Deployment: `POD_NAME` set (the
/// Lease identity starts with it), its Lease in podcidr-system, the admin endpoint on a free
/// port. `pool`: the `--cluster-pool-ipv4-cidr` flag pool with /24 blocks, or `None` for
/// `PodCIDRPool` objects only.
pub struct AllocatorRun<'a> {
    pub pod: &'a str,
    pub pool: Option<&'a str>,
    pub extra: &'a [&'a str],
}

impl AllocatorRun<'_> {
    /// Starts it, logging to `dir/<pod>.<n>.log` (a fresh file per start); returns the
    /// process and the admin address.
    pub fn spawn(&self, dir: &TempDir, identity: &Identity) -> (Proc, String) {
        let admin = format!("127.0.0.1:{}", free_port());
        let mut args = vec![
            "allocator",
            "--kubeconfig",
            identity.kubeconfig.to_str().unwrap(),
            "--lease-namespace",
            SYSTEM_NS,
            "--admin-listen",
            &admin,
        ];
        if let Some(pool) = self.pool {
            args.extend(["--cluster-pool-ipv4-cidr", pool]);
            args.extend(["--cluster-pool-ipv4-mask-size", "24"]);
        }
        args.extend_from_slice(self.extra);
        let log = (0..)
            .map(|n| dir.path(&format!("{}.{n}.log", self.pod)))
            .find(|p| !p.exists())
            .unwrap();
        let proc = Proc::spawn_with_env(&args, &[("POD_NAME", self.pod)], &log);
        (proc, admin)
    }
}

/// Polls `check` every 100 ms until it returns `Some`; panics naming `what` after `timeout`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "not within {timeout:?}: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// GET `path` from a child's admin endpoint (plain HTTP on loopback): the body of a 200.
pub fn admin_get(addr: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    (head.split_whitespace().nth(1)? == "200").then(|| body.to_owned())
}

/// The sum of the samples of Prometheus metric `name` whose labels include every `labels`
/// pair (0 when there are none).
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
            .then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// Custom resources as the admin reads them, by plural and version (`nodepodcidrs`,
/// `v1alpha1`): the items of the list, in name order. The version is always named: a bare
/// plural reads discovery's preferred version, which a second served version changes.
pub fn list_cr(cp: &ControlPlane, plural: &str, version: &str) -> Vec<Value> {
    let out = cp.kubectl(&[
        "get",
        &format!("{plural}.{version}.podcidr.io"),
        "-o",
        "json",
    ]);
    let list: Value = serde_json::from_str(&out).expect("kubectl get -o json");
    list["items"].as_array().cloned().unwrap_or_default()
}

/// One answered request from the API server's audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub verb: String,
    /// `resource` or `resource/subresource`, with the API group when there is one
    /// (`nodepodcidrs.podcidr.io/status`); the request URI for a non-resource request.
    pub resource: String,
    /// The API group (`""` for the core group and non-resource requests).
    pub group: String,
    /// `resource` or `resource/subresource` as RBAC names it; empty for non-resource.
    pub rbac_resource: String,
    pub namespace: String,
    pub name: String,
    pub code: u16,
    /// RBAC's decision (`allow`, `forbid`).
    pub decision: String,
    pub message: String,
}

impl Call {
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// The requests `username` made, in the order answered, from audit event `since` on (an
/// index into [`ControlPlane::audit_events`]).
pub fn calls_by(cp: &ControlPlane, username: &str, since: usize) -> Vec<Call> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    cp.audit_events()
        .iter()
        .skip(since)
        .filter(|e| e["user"]["username"] == username)
        .map(|e| {
            let o = &e["objectRef"];
            let group = s(&o["apiGroup"]);
            let mut rbac_resource = s(&o["resource"]);
            if let Some(sub) = o["subresource"].as_str() {
                rbac_resource = format!("{rbac_resource}/{sub}");
            }
            let resource = if o.is_null() {
                s(&e["requestURI"])
            } else {
                let (r, sub) = rbac_resource
                    .split_once('/')
                    .map_or((rbac_resource.as_str(), None), |(r, s)| (r, Some(s)));
                let r = if group.is_empty() {
                    r.to_owned()
                } else {
                    format!("{r}.{group}")
                };
                sub.map_or(r.clone(), |sub| format!("{r}/{sub}"))
            };
            Call {
                verb: s(&e["verb"]),
                resource,
                group,
                rbac_resource,
                namespace: s(&o["namespace"]),
                name: s(&o["name"]),
                code: e["responseStatus"]["code"]
                    .as_u64()
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(0),
                decision: s(&e["annotations"]["authorization.k8s.io/decision"]),
                message: s(&e["responseStatus"]["message"]),
            }
        })
        .collect()
}

/// Sends one request as `identity` through a kube client (as a binary would: a PATCH goes
/// out as it is, where kubectl would GET first). JSON bodies; a PATCH is a merge patch.
/// The body of a success, or the API server's code and message.
pub fn request_as(
    identity: &Identity,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<String, (u16, String)> {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .expect("a valid request");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(&identity.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        match tokio::time::timeout(Duration::from_secs(30), client.request_text(request)).await {
            Err(_) => Err((0, format!("{method} {path}: no answer within 30 s"))),
            Ok(Ok(text)) => Ok(text),
            Ok(Err(kube::Error::Api(s))) => Err((s.code, s.message)),
            Ok(Err(e)) => Err((0, format!("{method} {path}: {e}"))),
        }
    })
}
/// A speaker config for the real control plane: `node`'s speaker with `source`, AS 64512
/// (the router ID is the Node's InternalIP), one eBGP peer (AS 65000, no graceful restart)
/// on 127.0.0.1:`peer_port` that may or may not answer, the Node's InternalIP as next hop,
/// its status published at most every second.
pub fn speaker_config(
    node: &str,
    source: &str,
    allowed: &str,
    peer_port: u16,
    admin: SocketAddr,
) -> String {
    format!(
        "nodeName: {node}
asn: 64512
source: {{kind: {source}}}
allowedPrefixes: [{allowed}]
nextHop: {{ipv4: node}}
peers:
  - name: tor1
    address: 127.0.0.1
    port: {peer_port}
    asn: 65000
    ebgpMultihop: 2
    connectRetry: {{base: 1, max: 2}}
    gracefulRestart: {{enabled: false}}
admin: {{listen: \"{admin}\"}}
status: {{publish: true, minInterval: 1}}
"
    )
}

/// The value of one Prometheus series (`name{labels}` exactly as exposed) in `text`.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Polls `check` (blocking: kubectl, or a child's admin endpoint) every 250 ms until it
/// returns `Some`, at most `timeout`.
pub fn poll_blocking<T>(
    timeout: std::time::Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// `kubectl get <what> -o json` as the admin, parsed.
pub fn get_json(cp: &ControlPlane, what: &[&str]) -> serde_json::Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    let out = cp.kubectl(&args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Asserts that `result` (a kubectl run as some identity) was refused by RBAC: Forbidden,
/// naming `verb` on `resource`.
pub fn assert_forbidden(result: Result<String, String>, verb: &str, resource: &str) {
    match result {
        Ok(out) => panic!("{verb} {resource} was allowed: {out}"),
        Err(e) => assert!(
            e.contains("Forbidden")
                && e.contains(&format!("cannot {verb} resource \"{resource}\"")),
            "{verb} {resource}: not an RBAC refusal: {e}"
        ),
    }
}

/// A server-side apply of `body` (its `/subresource` when given) as `identity`: one PATCH,
/// no GET first, kubectl's own validation off so the answer is the server's.
pub fn apply_as(
    cp: &ControlPlane,
    identity: &Identity,
    manager: &str,
    body: &serde_json::Value,
    subresource: Option<&str>,
) -> Result<String, String> {
    let sub = subresource.map(|s| format!("--subresource={s}"));
    let mut args = vec![
        "apply",
        "--server-side",
        "--validate=false",
        "--field-manager",
        manager,
        "-f",
        "-",
    ];
    args.extend(sub.as_deref());
    cp.kubectl_with_input(identity, &args, Some(&body.to_string()))
}

/// `{apiVersion, kind, metadata: {name, namespace?, labels: {podcidr.io/test: "x"}}}`: the
/// smallest change to an object, for write attempts.
pub fn labelled(api_version: &str, kind: &str, name: &str, ns: Option<&str>) -> serde_json::Value {
    let mut body = serde_json::json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "labels": {"podcidr.io/test": "x"}}});
    if let Some(ns) = ns {
        body["metadata"]["namespace"] = ns.into();
    }
    body
}

/// One API request as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    pub verb: String,
    pub group: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub uri: String,
    pub code: u16,
}

impl Request {
    /// The server refused it. A 429 is not a refusal when a later request of the same verb and
    /// resource succeeded: it is API Priority and Fairness asking the client to come back (a
    /// loaded CI machine running several API servers saw one on a watch), and the client did.
    pub fn refused_in(&self, all: &[Request]) -> bool {
        if self.code < 400 {
            return false;
        }
        if self.code != 429 {
            return true;
        }
        let at = all.iter().position(|r| std::ptr::eq(r, self)).unwrap_or(0);
        !all.iter().skip(at + 1).any(|r| {
            r.verb == self.verb
                && r.group == self.group
                && r.resource == self.resource
                && r.code < 400
        })
    }
}

/// Every resource request `username` made so far (discovery and other non-resource requests
/// left out), in order. A watch is audited when it ends: stop the client first.
pub fn requests_by(cp: &ControlPlane, username: &str) -> Vec<Request> {
    let mut by_id: Vec<(String, Request)> = Vec::new();
    for e in cp.audit_events() {
        let r = &e["objectRef"];
        if e["user"]["username"] != username || r.is_null() {
            continue;
        }
        let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
        let mut resource = s(&r["resource"]);
        if let Some(sub) = r["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        let req = Request {
            verb: s(&e["verb"]),
            group: s(&r["apiGroup"]),
            resource,
            namespace: s(&r["namespace"]),
            name: s(&r["name"]),
            uri: s(&e["requestURI"]),
            code: u16::try_from(e["responseStatus"]["code"].as_u64().unwrap_or(0)).unwrap_or(0),
        };
        let id = s(&e["auditID"]);
        match by_id.iter_mut().find(|(i, _)| *i == id) {
            Some(slot) => slot.1 = req,
            None => by_id.push((id, req)),
        }
    }
    by_id.into_iter().map(|(_, r)| r).collect()
}

/// A speaker run by [`start_speaker`]: its process and admin endpoint.
pub struct Speaker {
    pub proc: Proc,
    pub admin: SocketAddr,
}

/// The test's own runtime (the collector and HTTP reads of the speakers' admin endpoints);
/// kubectl and the control plane are driven from the test thread.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A BGP route collector (the ToR) on a free loopback port.
pub fn collector(rt: &tokio::runtime::Runtime) -> Collector {
    rt.block_on(Collector::start(CollectorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
    )))
    .unwrap()
}

/// `node`'s speaker as the shipped DaemonSet runs it, as `id` ([`speaker_config`]).
pub fn start_speaker(
    dir: &TempDir,
    id: &Identity,
    node: &str,
    source: &str,
    allowed: &str,
    peer_port: u16,
) -> Speaker {
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = speaker_config(node, source, allowed, peer_port, admin);
    let proc = spawn_speaker(dir, id, node, &config, &format!("{node}.log"));
    Speaker { proc, admin }
}

/// The speaker's `/metrics` (empty when it does not answer).
pub fn metrics(rt: &tokio::runtime::Runtime, s: &Speaker) -> String {
    rt.block_on(http_get(s.admin, "/metrics"))
        .map(|(_, body)| body)
        .unwrap_or_default()
}

/// `podcidr_kube_events_total{result}` of the speaker.
pub fn kube_events(rt: &tokio::runtime::Runtime, s: &Speaker, result: &str) -> Option<f64> {
    metric(
        &metrics(rt, s),
        &format!("podcidr_kube_events_total{{result=\"{result}\"}}"),
    )
}

/// Waits until `node`'s NodeBGPStatus exists and `pred` holds for it.
pub fn wait_status(
    cp: &ControlPlane,
    s: &Speaker,
    node: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    poll_blocking(WAIT, || {
        let out = cp
            .kubectl_as(cp.admin(), &["get", "nbs", node, "-o", "json"])
            .ok()?;
        let v: Value = serde_json::from_str(&out).ok()?;
        pred(&v).then_some(v)
    })
    .unwrap_or_else(|| panic!("{node}: status never matched\n{}", s.proc.log()))
}

/// The condition `kind` of a NodeBGPStatus (`null` when absent).
pub fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// Its sessions are Established and it announces exactly `cidr`, routes included.
pub fn established_with(status: &Value, cidr: &str) -> bool {
    condition(status, "Established")["status"] == "True"
        && status["status"]["announced"] == json!([cidr])
        && status["status"]["peers"][0]["routes"][0]["prefix"] == cidr
}

/// A kubectl table split at the header's column starts (a cell may be blank).
pub fn table(out: &str) -> Vec<Vec<String>> {
    let mut lines = out.lines();
    let header = lines.next().unwrap_or_default();
    let mut starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    starts.push(usize::MAX);
    std::iter::once(header)
        .chain(lines)
        .map(|l| {
            starts
                .windows(2)
                .map(|w| {
                    l.get(w[0]..w[1].min(l.len()))
                        .unwrap_or("")
                        .trim()
                        .to_owned()
                })
                .collect()
        })
        .collect()
}
