//! `podcidr-bgp diff` as a user runs it: the binary with `--kubeconfig` against the in-process
//! fake API server. Exit status 0 (clean), 1 (drift), 2 (could not run), the JSON schema, and
//! one end-to-end run against the status a real speaker published.

use crate::common;

use common::{BIN, Run, TempDir, nbs, npc, run};

use std::path::{Path, PathBuf};
use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig};
use fake_kube::{FakeKube, Fault, Gvr, Verb};
use podcidr_api::{PeerReport, RouteReport, SpeakerReport};
use serde_json::{Value, json};

const P: &str = "10.5.113.0/24";
const Q: &str = "10.5.112.0/24";

async fn diff(kubeconfig: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["diff", "--kubeconfig", kubeconfig.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(&args).await
}

fn node(name: &str, pod_cidrs: &[&str]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "spec": {"podCIDRs": pod_cidrs},
        "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}
    })
}

fn allocation(name: &str, cidrs: &[&str]) -> Value {
    json!({
        "apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
        "metadata": {"name": name},
        "spec": {"podCIDRs": cidrs, "pool": "default"}
    })
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// A report of a speaker announcing `cidrs` to one Established peer.
fn report(cidrs: &[&str], updated_at: &str) -> SpeakerReport {
    SpeakerReport {
        source: "ipam-crd".into(),
        source_ready: true,
        allocated: cidrs.iter().map(|s| (*s).into()).collect(),
        announced: cidrs.iter().map(|s| (*s).into()).collect(),
        peers: vec![PeerReport {
            name: "tor1".into(),
            address: "192.0.2.1".into(),
            asn: 65000,
            state: "Established".into(),
            since: updated_at.into(),
            hold_time: Some(90),
            keepalive_time: Some(30),
            families: vec!["ipv4-unicast".into(), "ipv6-unicast".into()],
            prefixes_sent: [("ipv4-unicast".to_owned(), cidrs.len() as u64)].into(),
            routes: cidrs
                .iter()
                .map(|p| RouteReport {
                    prefix: (*p).into(),
                    next_hop: "192.0.2.10".into(),
                    as_path: vec![64512],
                    ..RouteReport::default()
                })
                .collect(),
            ..PeerReport::default()
        }],
        updated_at: updated_at.into(),
        speaker_version: "0.1.0".into(),
        ..SpeakerReport::default()
    }
}

/// The speaker Lease of node `name`, renewed `ago` seconds ago (180 s duration).
fn lease(name: &str, ago: i64) -> (Gvr, Value) {
    let renewed = k8s_openapi::jiff::Timestamp::from_second(
        k8s_openapi::jiff::Timestamp::now().as_second() - ago,
    )
    .unwrap();
    (
        Gvr::leases(),
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "podcidr-node-lease",
                         "labels": {"podcidr.io/speaker-lease": "true"}},
            "spec": {"holderIdentity": format!("{name}/speaker"), "leaseDurationSeconds": 180,
                     "renewTime": format!("{}", renewed.strftime("%Y-%m-%dT%H:%M:%S.%6fZ"))}
        }),
    )
}

fn status(name: &str, report: &SpeakerReport) -> Value {
    json!({
        "apiVersion": "podcidr.io/v1alpha1", "kind": "NodeBGPStatus",
        "metadata": {"name": name},
        "spec": {"nodeName": name},
        "status": serde_json::to_value(report).unwrap()
    })
}

struct Cluster {
    fake: FakeKube,
    kubeconfig: PathBuf,
    _dir: TempDir,
}

async fn cluster(objects: Vec<(Gvr, Value)>) -> Cluster {
    let fake = FakeKube::start().await.unwrap();
    for (gvr, obj) in objects {
        fake.insert(&gvr, obj).unwrap();
    }
    let dir = TempDir::new("diff-cli");
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    Cluster {
        fake,
        kubeconfig,
        _dir: dir,
    }
}

/// Two healthy nodes: Node, NodePodCIDR and status agree.
fn clean() -> Vec<(Gvr, Value)> {
    let t = now();
    vec![
        (Gvr::nodes(), node("node-a", &[P])),
        (Gvr::nodes(), node("node-b", &["10.5.114.0/24"])),
        (npc(), allocation("node-a", &[P])),
        (npc(), allocation("node-b", &["10.5.114.0/24"])),
        (nbs(), status("node-a", &report(&[P], &t))),
        (nbs(), status("node-b", &report(&["10.5.114.0/24"], &t))),
        lease("node-a", 10),
        lease("node-b", 10),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_cluster_exits_0() {
    let c = cluster(clean()).await;
    let r = diff(&c.kubeconfig, &[]).await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines[0].starts_with("NODE     PREFIX          VERDICT   DETAIL"),
        "{}",
        r.stdout
    );
    assert!(lines[1].starts_with("node-a   10.5.113.0/24   ok        announced to tor1"));
    assert!(
        r.stdout
            .contains("2 nodes, 2 rows: all ok (source ipam-crd)")
    );
    assert!(
        !r.stdout.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );

    let r = diff(&c.kubeconfig, &["--only-problems"]).await;
    assert_eq!(r.code, 0);
    assert!(!r.stdout.contains("node-a"), "{}", r.stdout);
    assert!(r.stdout.contains("all ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_mismatch_exits_1_and_shows_both_values() {
    let t = now();
    let c = cluster(vec![
        (Gvr::nodes(), node("master1", &[Q])),
        (npc(), allocation("master1", &[P])),
        (nbs(), status("master1", &report(&[P], &t))),
        (Gvr::nodes(), node("node-b", &["10.5.114.0/24"])),
        (npc(), allocation("node-b", &["10.5.114.0/24"])),
        (nbs(), status("node-b", &report(&["10.5.114.0/24"], &t))),
        lease("master1", 10),
        lease("node-b", 10),
    ])
    .await;
    let r = diff(&c.kubeconfig, &[]).await;
    println!("{}", r.stdout);
    assert_eq!(r.code, 1, "stderr: {}", r.stderr);
    assert!(r.stdout.contains(
        "master1   10.5.113.0/24   source-mismatch   Node.spec.podCIDRs says 10.5.112.0/24, \
         IPAM says 10.5.113.0/24; announced to tor1"
    ));
    assert!(
        r.stdout
            .contains("master1   10.5.112.0/24   source-mismatch")
    );
    assert!(r.stdout.contains("node-b    10.5.114.0/24   ok"));
    assert!(
        r.stdout
            .contains("2 nodes, 3 rows: 1 ok, 2 source-mismatch (source ipam-crd)")
    );

    let r = diff(&c.kubeconfig, &["-o", "wide", "--only-problems"]).await;
    println!("{}", r.stdout);
    assert_eq!(r.code, 1);
    let header = r.stdout.lines().next().unwrap();
    for col in [
        "IPAM",
        "NODE.SPEC",
        "PEERS",
        "NEXT-HOP",
        "AGE",
        "SPEAKER",
        "DETAIL",
    ] {
        assert!(header.contains(col), "{header}");
    }
    assert!(r.stdout.contains("tor1=Established(sent)"));
    assert!(!r.stdout.contains("node-b    10.5.114.0/24"));

    // --node narrows rows and the exit status.
    assert_eq!(diff(&c.kubeconfig, &["--node", "node-b"]).await.code, 0);
    assert_eq!(diff(&c.kubeconfig, &["--node", "master1"]).await.code, 1);
    let r = diff(&c.kubeconfig, &["--node", "nope"]).await;
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("node \"nope\" not found"), "{}", r.stderr);

    // The same cluster judged by the Nodes' own spec: the speaker announces the "wrong" value.
    let r = diff(
        &c.kubeconfig,
        &["--source", "node-spec", "--node", "master1"],
    )
    .await;
    println!("{}", r.stdout);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("master1   10.5.112.0/24   not-announced"));
    assert!(
        r.stdout
            .contains("master1   10.5.113.0/24   announced-not-allocated")
    );
}

fn assert_type(v: &Value, key: &str, check: fn(&Value) -> bool, what: &str) {
    assert!(
        v.get(key).is_some_and(check),
        "{key} should be {what} in {v:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_schema() {
    let t = now();
    let mut objects = clean();
    objects.push((Gvr::nodes(), node("node-c", &["10.5.115.0/24"])));
    objects.push((npc(), allocation("node-c", &["10.5.115.0/24"])));
    objects.push((nbs(), status("node-b", &report(&[], &t))));
    let c = cluster(objects).await;
    let r = diff(&c.kubeconfig, &["-o", "json"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    let keys: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "source",
            "generatedAt",
            "staleAfterSeconds",
            "rows",
            "summary"
        ]
    );
    assert_eq!(doc["source"], "ipam-crd");
    assert_eq!(doc["staleAfterSeconds"], 7200);
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        let keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "node",
                "prefix",
                "verdict",
                "also",
                "detail",
                "allocated",
                "nodeSpec",
                "announcedTo",
                "peers",
                "statusAgeSeconds",
                "liveness",
                "leaseAgeSeconds",
                "conflictsWith",
                "localAsn",
                "localAsnSource",
                "wouldHold"
            ]
        );
        for k in ["node", "prefix", "verdict", "detail"] {
            assert_type(row, k, Value::is_string, "a string");
        }
        for k in [
            "also",
            "allocated",
            "nodeSpec",
            "announcedTo",
            "peers",
            "conflictsWith",
        ] {
            assert_type(row, k, Value::is_array, "an array");
        }
        for k in ["statusAgeSeconds", "leaseAgeSeconds"] {
            assert_type(row, k, |v| v.is_u64() || v.is_null(), "a number or null");
        }
        assert_type(row, "liveness", Value::is_string, "a string");
        for p in row["peers"].as_array().unwrap() {
            let keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                [
                    "name",
                    "address",
                    "state",
                    "announced",
                    "nextHop",
                    "refused"
                ]
            );
            assert_type(p, "announced", Value::is_boolean, "a boolean");
        }
    }
    let verdicts: Vec<&str> = rows
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["ok", "not-announced", "no-speaker"]);
    assert_eq!(rows[0]["announcedTo"], json!(["tor1"]));
    assert_eq!(rows[0]["peers"][0]["nextHop"], "192.0.2.10");
    assert_eq!(rows[2]["statusAgeSeconds"], Value::Null);
    assert_eq!(
        rows.iter()
            .map(|r| r["liveness"].clone())
            .collect::<Vec<_>>(),
        [json!("live"), json!("live"), json!("none")]
    );
    assert_eq!(rows[2]["leaseAgeSeconds"], Value::Null);
    assert!(rows[0]["leaseAgeSeconds"].as_u64().is_some_and(|a| a >= 10));

    let summary = &doc["summary"];
    let keys: Vec<&str> = summary
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["rows", "nodes", "problems", "nodesWithProblems", "verdicts"]
    );
    assert_eq!(summary["rows"], 3);
    assert_eq!(summary["nodes"], 3);
    assert_eq!(summary["problems"], 2);
    assert_eq!(summary["nodesWithProblems"], 2);
    assert_eq!(
        summary["verdicts"],
        json!({"ok": 1, "not-announced": 1, "announced-not-allocated": 0,
               "source-mismatch": 0, "conflict": 0, "stale-status": 0, "no-speaker": 1,
               "speaker-dead": 0})
    );
    println!("{}", r.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_status_and_conflicts_exit_1() {
    let old = "2020-01-01T00:00:00Z";
    let t = now();
    let c = cluster(vec![
        (Gvr::nodes(), node("node-a", &[])),
        (Gvr::nodes(), node("node-b", &[])),
        (npc(), allocation("node-a", &["10.5.0.0/23"])),
        (npc(), allocation("node-b", &["10.5.1.0/24"])),
        (nbs(), status("node-a", &report(&["10.5.0.0/23"], old))),
        (nbs(), status("node-b", &report(&["10.5.1.0/24"], &t))),
        lease("node-a", 10),
        lease("node-b", 10),
    ])
    .await;
    let r = diff(&c.kubeconfig, &["-o", "json"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    let got: Vec<(&str, &str, Value)> = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["node"].as_str().unwrap(),
                r["verdict"].as_str().unwrap(),
                r["also"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("node-a", "conflict", json!(["stale-status"])),
            ("node-b", "conflict", json!([])),
        ]
    );
    let r = diff(&c.kubeconfig, &[]).await;
    println!("{}", r.stdout);
    assert!(r.stdout.contains("conflict (+stale-status)"));
}

/// A Lease with the speaker label in another namespace (any controller allowed to write
/// Leases there could create it) says nothing about a node: node-a's own Lease, in the
/// speakers' namespace, expired, so its speaker is dead whatever the forged one says. With
/// `--lease-namespace` naming the other namespace, that one is read instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_outside_the_speaker_lease_namespace_is_not_believed() {
    let mut objects: Vec<(Gvr, Value)> = clean()
        .into_iter()
        .filter(|(_, o)| !(o["kind"] == "Lease" && o["metadata"]["name"] == "node-a"))
        .collect();
    objects.push(lease("node-a", 100_000));
    let (gvr, mut forged) = lease("node-a", 5);
    forged["metadata"]["namespace"] = json!("kube-system");
    objects.push((gvr, forged));
    let c = cluster(objects).await;
    let verdict = |r: &Run| -> String {
        let doc: Value = serde_json::from_str(&r.stdout).unwrap();
        doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["node"] == "node-a")
            .map(|row| row["verdict"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let r = diff(&c.kubeconfig, &["-o", "json"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(verdict(&r), "speaker-dead", "{}", r.stdout);
    let r = diff(
        &c.kubeconfig,
        &["-o", "json", "--lease-namespace", "kube-system"],
    )
    .await;
    assert_eq!(verdict(&r), "ok", "{}", r.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_crd_exits_2_with_the_install_hint() {
    let c = cluster(clean()).await;
    c.fake.inject(
        Fault::fail(404)
            .verb(Verb::List)
            .resource("nodepodcidrs")
            .times(100),
    );
    let r = diff(&c.kubeconfig, &[]).await;
    assert_eq!(r.code, 2, "stdout: {}", r.stdout);
    assert!(r.stdout.is_empty());
    assert_eq!(
        r.stderr.trim(),
        "podcidr-bgp diff: NodePodCIDR CRD not installed (kubectl apply -k deploy/crds)"
    );
    c.fake.clear_faults();
    c.fake.inject(
        Fault::fail(404)
            .verb(Verb::List)
            .resource("nodebgpstatuses")
            .times(100),
    );
    let r = diff(&c.kubeconfig, &[]).await;
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("NodeBGPStatus CRD not installed"),
        "{}",
        r.stderr
    );

    // --source cilium-node without Cilium.
    c.fake.clear_faults();
    c.fake.inject(
        Fault::fail(404)
            .verb(Verb::List)
            .resource("ciliumnodes")
            .times(100),
    );
    let r = diff(&c.kubeconfig, &["--source", "cilium-node"]).await;
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("CiliumNode (cilium.io/v2) CRD not installed"),
        "{}",
        r.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_exits_2() {
    let c = cluster(clean()).await;
    c.fake.inject(
        Fault::fail(403)
            .verb(Verb::List)
            .resource("nodes")
            .times(100),
    );
    let r = diff(&c.kubeconfig, &[]).await;
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("listing nodes: forbidden"),
        "{}",
        r.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_api_exits_2() {
    let dir = TempDir::new("diff-cli");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port(); // released at once: nothing listens there
    let kubeconfig = dir.path("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: dead\n\
             clusters: [{{name: dead, cluster: {{server: \"http://127.0.0.1:{port}\"}}}}]\n\
             users: [{{name: dead, user: {{}}}}]\n\
             contexts: [{{name: dead, context: {{cluster: dead, user: dead}}}}]\n"
        ),
    )
    .unwrap();
    let r = diff(&kubeconfig, &["--request-timeout", "10"]).await;
    assert_eq!(r.code, 2, "stdout: {}", r.stdout);
    let want = format!(
        "podcidr-bgp diff: cannot reach the Kubernetes API at http://127.0.0.1:{port} \
         (listing nodes): "
    );
    assert!(r.stderr.starts_with(&want), "{}", r.stderr);
    assert!(r.stderr.contains("Connection refused"), "{}", r.stderr);
    assert!(r.stdout.is_empty());

    let r = diff(&dir.path("missing"), &[]).await;
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("missing"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_flag_and_cilium_source() {
    let mut objects = clean();
    for (name, cidr) in [("node-a", P), ("node-b", "10.5.114.0/24")] {
        objects.push((
            Gvr::new("cilium.io/v2", "ciliumnodes"),
            json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": name},
                   "spec": {"ipam": {"podCIDRs": [cidr]}}}),
        ));
    }
    let c = cluster(objects).await;
    let r = diff(
        &c.kubeconfig,
        &["--context", "fake-kube", "--source", "cilium-node"],
    )
    .await;
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("(source cilium-node)"));
    let r = diff(&c.kubeconfig, &["--context", "nope"]).await;
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("nope"), "{}", r.stderr);
}

/// A real speaker publishes its status to the fake API; `diff` agrees with it, then catches
/// the Node spec drifting away from IPAM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_to_end_with_a_publishing_speaker() {
    let c = cluster(vec![
        (Gvr::nodes(), node("node-a", &[P])),
        (npc(), allocation("node-a", &[P])),
    ])
    .await;
    let collector = Collector::start(CollectorConfig::new("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let dir = TempDir::new("diff-e2e");
    let admin_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!(
        "nodeName: node-a
asn: 64512
routerId: 192.0.2.10
source: {{kind: ipam-crd}}
allowedPrefixes: [10.5.0.0/16]
nextHop: {{ipv4: node}}
peers:
  - name: tor1
    address: 127.0.0.1
    port: {port}
    asn: 65000
    families: [ipv4-unicast]
    ebgpMultihop: 2
    gracefulRestart: {{enabled: false}}
admin: {{listen: \"127.0.0.1:{admin_port}\"}}
status: {{publish: true, minInterval: 1}}
",
        port = collector.local_addr().port()
    );
    std::fs::write(dir.path("config.yaml"), config).unwrap();
    let log = std::fs::File::create(dir.path("speaker.log")).unwrap();
    let mut speaker = tokio::process::Command::new(BIN)
        .args(["speaker", "--config"])
        .arg(dir.path("config.yaml"))
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let published = c
        .fake
        .wait_for_object(&nbs(), None, "node-a", Duration::from_secs(30), |o| {
            o.and_then(|o| o.pointer("/status/peers/0/routes/0/prefix")) == Some(&json!(P))
        })
        .await;
    let log = || std::fs::read_to_string(dir.path("speaker.log")).unwrap_or_default();
    assert!(published.is_ok(), "no status with the route\n{}", log());

    let r = diff(&c.kubeconfig, &["-o", "wide"]).await;
    println!("{}", r.stdout);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("tor1=Established(sent)"));
    assert!(
        r.stdout.contains("127.0.0.1"),
        "next hop is the Node's InternalIP"
    );

    c.fake
        .update(&Gvr::nodes(), None, "node-a", |n| {
            n["spec"]["podCIDRs"] = json!([Q]);
        })
        .unwrap();
    let r = diff(&c.kubeconfig, &[]).await;
    println!("{}", r.stdout);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout
            .contains("node-a   10.5.112.0/24   source-mismatch")
    );

    speaker.start_kill().unwrap();
    tokio::time::timeout(Duration::from_secs(10), speaker.wait())
        .await
        .expect("speaker did not exit after SIGKILL")
        .unwrap();
}

/// Every verdict in one cluster (the examples in docs/operator-guide.md come from here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verdict_in_one_cluster() {
    let t = now();
    let three_hours_ago = k8s_openapi::jiff::Timestamp::from_second(
        k8s_openapi::jiff::Timestamp::now().as_second() - 3 * 3600,
    )
    .unwrap()
    .to_string();
    let mut down = report(&["10.5.2.0/24"], &t);
    down.peers[0].state = "Active".into();
    down.peers[0].routes.clear();
    down.peers[0].last_error = Some("connection to 192.0.2.1:179 refused".into());
    let mut objects = Vec::new();
    // Every speaker that reports renewed its Lease 10 s ago, except node-9's (10 min ago).
    let mut add = |name: &str, spec: &[&str], alloc: &[&str], r: Option<SpeakerReport>| {
        objects.push((Gvr::nodes(), node(name, spec)));
        objects.push((npc(), allocation(name, alloc)));
        if let Some(r) = r {
            objects.push((nbs(), status(name, &r)));
            objects.push(lease(name, if name == "node-9" { 600 } else { 10 }));
        }
    };
    add(
        "node-1",
        &[],
        &["10.5.1.0/24"],
        Some(report(&["10.5.1.0/24"], &t)),
    );
    add("node-2", &[], &["10.5.2.0/24"], Some(down));
    add(
        "node-3",
        &[],
        &["10.5.3.0/24"],
        Some(report(&["10.5.3.0/24", "10.5.9.0/24"], &t)),
    );
    add(
        "node-4",
        &["10.5.40.0/24"],
        &["10.5.4.0/24"],
        Some(report(&["10.5.4.0/24"], &t)),
    );
    add(
        "node-5",
        &[],
        &["10.5.5.0/24"],
        Some(report(&["10.5.5.0/24"], &t)),
    );
    add(
        "node-6",
        &[],
        &["10.5.5.0/24"],
        Some(report(&["10.5.5.0/24"], &t)),
    );
    add(
        "node-7",
        &[],
        &["10.5.7.0/24"],
        Some(report(&["10.5.7.0/24"], &three_hours_ago)),
    );
    add("node-8", &[], &["10.5.8.0/24"], None);
    add(
        "node-9",
        &[],
        &["10.5.10.0/24"],
        Some(report(&["10.5.10.0/24"], &t)),
    );
    let c = cluster(objects).await;

    let r = diff(&c.kubeconfig, &[]).await;
    println!("{}", r.stdout);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let verdict_of = |node: &str, prefix: &str| -> String {
        r.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{node}   {prefix} ")))
            .and_then(|l| l.split_whitespace().nth(2))
            .unwrap_or_default()
            .to_owned()
    };
    for (node, prefix, verdict) in [
        ("node-1", "10.5.1.0/24", "ok"),
        ("node-2", "10.5.2.0/24", "not-announced"),
        ("node-3", "10.5.3.0/24", "ok"),
        ("node-3", "10.5.9.0/24", "announced-not-allocated"),
        ("node-4", "10.5.4.0/24", "source-mismatch"),
        ("node-4", "10.5.40.0/24", "source-mismatch"),
        ("node-5", "10.5.5.0/24", "conflict"),
        ("node-6", "10.5.5.0/24", "conflict"),
        ("node-7", "10.5.7.0/24", "stale-status"),
        ("node-8", "10.5.8.0/24", "no-speaker"),
        ("node-9", "10.5.10.0/24", "speaker-dead"),
    ] {
        assert_eq!(verdict_of(node, prefix), verdict, "{node} {prefix}");
    }
    assert!(r.stdout.contains(
        "9 nodes, 11 rows: 2 ok, 1 not-announced, 1 announced-not-allocated, \
         2 source-mismatch, 2 conflict, 1 stale-status, 1 no-speaker, 1 speaker-dead \
         (source ipam-crd)"
    ));
    assert!(
        r.stdout
            .contains("no Established session: tor1 Active (connection to 192.0.2.1:179 refused)")
    );
    assert!(
        r.stdout
            .contains("but its status is 3h0m old (--stale-after 7200s)")
    );
    // Seconds may tick between writing the Lease and reading it.
    assert!(r.stdout.contains(
        "speaker dead: Lease podcidr-node-lease/node-9 (held by node-9/speaker) expired 7m"
    ));

    let r = diff(&c.kubeconfig, &["-o", "wide", "--only-problems"]).await;
    println!("{}", r.stdout);
    assert_eq!(r.code, 1);
    assert!(!r.stdout.contains("node-1 "));
    // A longer threshold makes node-7 current again.
    let r = diff(&c.kubeconfig, &["--stale-after", "4h", "--node", "node-7"]).await;
    assert_eq!(r.code, 0, "{}", r.stdout);
}
