//! `podcidr-bgp peers` and `routes`: from the published `NodeBGPStatus` objects (fake API
//! server) and from a running speaker's admin endpoint (`--admin URL`).

use crate::common;

use common::{BIN, TempDir, free_port, nbs, run};

use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig};
use fake_kube::FakeKube;
use podcidr_api::{PeerReport, RouteReport, SpeakerReport};
use serde_json::{Value, json};

fn status(node: &str, peers: Vec<PeerReport>) -> Value {
    let report = SpeakerReport {
        source: "ipam-crd".into(),
        source_ready: true,
        peers,
        updated_at: k8s_openapi::jiff::Timestamp::now().to_string(),
        ..SpeakerReport::default()
    };
    json!({
        "apiVersion": "podcidr.io/v1alpha1", "kind": "NodeBGPStatus",
        "metadata": {"name": node}, "spec": {"nodeName": node},
        "status": serde_json::to_value(report).unwrap()
    })
}

fn established(name: &str, prefix: &str) -> PeerReport {
    PeerReport {
        name: name.into(),
        address: "192.0.2.1".into(),
        asn: 65000,
        state: "Established".into(),
        since: "2026-01-01T00:00:00Z".into(),
        hold_time: Some(90),
        keepalive_time: Some(30),
        families: vec!["ipv4-unicast".into()],
        prefixes_sent: [("ipv4-unicast".to_owned(), 1)].into(),
        routes: vec![RouteReport {
            prefix: prefix.into(),
            next_hop: "198.18.0.10".into(),
            as_path: vec![64512, 64512],
            med: Some(10),
            communities: vec!["64512:100".into()],
            ..RouteReport::default()
        }],
        ..PeerReport::default()
    }
}

fn down(name: &str) -> PeerReport {
    PeerReport {
        name: name.into(),
        address: "192.0.2.2".into(),
        asn: 65000,
        state: "Active".into(),
        since: "2026-01-01T00:00:00Z".into(),
        last_error: Some("connect: Connection refused".into()),
        flaps: 2,
        ..PeerReport::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_and_routes_from_the_published_status() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(
        &nbs(),
        status(
            "node-a",
            vec![established("tor1", "10.5.113.0/24"), down("tor2")],
        ),
    )
    .unwrap();
    fake.insert(
        &nbs(),
        status("node-b", vec![established("tor1", "10.5.114.0/24")]),
    )
    .unwrap();
    let dir = TempDir::new("peers-cli");
    let kc = dir.path("kubeconfig");
    fake.write_kubeconfig(&kc).unwrap();
    let kc = kc.to_str().unwrap();

    let r = run(&["peers", "--kubeconfig", kc, "-o", "json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    let peers = doc["peers"].as_array().unwrap();
    let got: Vec<(&str, &str, &str)> = peers
        .iter()
        .map(|p| {
            (
                p["node"].as_str().unwrap(),
                p["name"].as_str().unwrap(),
                p["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("node-a", "tor1", "Established"),
            ("node-a", "tor2", "Active"),
            ("node-b", "tor1", "Established"),
        ]
    );
    let tor1 = &peers[0];
    assert!(tor1["uptimeSeconds"].as_u64().unwrap() > 0);
    assert_eq!(tor1["holdTime"], 90);
    assert_eq!(tor1["families"], json!(["ipv4-unicast"]));
    assert_eq!(tor1["prefixesSent"], json!({"ipv4-unicast": 1}));
    assert!(tor1.get("routes").is_none());
    assert_eq!(peers[1]["lastError"], "connect: Connection refused");

    let r = run(&["peers", "--kubeconfig", kc, "--node", "node-a"]).await;
    println!("{}", r.stdout);
    assert_eq!(r.code, 0);
    let header = r.stdout.lines().next().unwrap();
    assert!(
        header.starts_with("NODE     LOCAL-ASN   PEER   ADDRESS     ASN     STATE"),
        "{header}"
    );
    assert!(r.stdout.contains("ipv4:1"));
    assert!(r.stdout.contains("connect: Connection refused"));
    assert!(!r.stdout.contains("node-b"));

    let r = run(&["routes", "--kubeconfig", kc, "-o", "json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json()["routes"],
        json!([
            {"node": "node-a", "peer": "tor1", "peerAddress": "192.0.2.1",
             "peerState": "Established", "prefix": "10.5.113.0/24", "nextHop": "198.18.0.10",
             "asPath": [64512, 64512], "med": 10, "communities": ["64512:100"]},
            {"node": "node-b", "peer": "tor1", "peerAddress": "192.0.2.1",
             "peerState": "Established", "prefix": "10.5.114.0/24", "nextHop": "198.18.0.10",
             "asPath": [64512, 64512], "med": 10, "communities": ["64512:100"]}
        ])
    );
    let r = run(&["routes", "--kubeconfig", kc, "--node", "node-a"]).await;
    println!("{}", r.stdout);
    assert!(
        r.stdout
            .contains("node-a   tor1   10.5.113.0/24   198.18.0.10   64512 64512   10")
    );
    assert!(
        r.stdout
            .contains("no routes advertised to: node-a/tor2 (Active)")
    );

    let r = run(&["routes", "--kubeconfig", kc, "--node", "nope"]).await;
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("no speaker status for node \"nope\""),
        "{}",
        r.stderr
    );

    fake.inject(
        fake_kube::Fault::fail(404)
            .verb(fake_kube::Verb::List)
            .resource("nodebgpstatuses")
            .times(10),
    );
    let r = run(&["peers", "--kubeconfig", kc]).await;
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr.trim(),
        "podcidr-bgp peers: NodeBGPStatus CRD not installed (kubectl apply -k deploy/crds)"
    );
}

async fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    common::http_get(addr.parse().ok()?, path).await
}

/// Polls a child's admin endpoint (only it can tell us) every 50 ms, at most `limit`.
async fn poll_until(
    addr: &str,
    path: &str,
    limit: Duration,
    ok: impl Fn(u16, &str) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some((code, body)) = get(addr, path).await
            && ok(code, &body)
        {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_and_routes_from_a_speakers_admin_endpoint() {
    let collector = Collector::start(CollectorConfig::new("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let dir = TempDir::new("peers-admin");
    std::fs::write(
        dir.path("cidrs.yaml"),
        "nodes:\n  node-a: [10.5.113.0/24]\n  node-b: [10.5.114.0/24]\n",
    )
    .unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let config = format!(
        "nodeName: node-a
asn: 64512
routerId: 192.0.2.10
source: {{kind: file, path: \"{cidrs}\"}}
peers:
  - name: tor1
    address: 127.0.0.1
    port: {collector}
    asn: 65000
    families: [ipv4-unicast]
    ebgpMultihop: 2
    gracefulRestart: {{enabled: false}}
  - name: tor2
    address: 127.0.0.1
    port: {closed}
    asn: 65000
    families: [ipv4-unicast]
    connectRetry: {{base: 1, max: 1}}
admin: {{listen: \"{admin}\"}}
status: {{publish: false}}
",
        cidrs = dir.path("cidrs.yaml").display(),
        collector = collector.local_addr().port(),
        closed = free_port(),
    );
    std::fs::write(dir.path("config.yaml"), config).unwrap();
    let log = std::fs::File::create(dir.path("speaker.log")).unwrap();
    let mut speaker = tokio::process::Command::new(BIN)
        // `closed` never answers: no grace, so /readyz says only that the source synced.
        .args(["speaker", "--ready-peer-grace", "0", "--config"])
        .arg(dir.path("config.yaml"))
        .env("KUBECONFIG", dir.path("no-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let log = || std::fs::read_to_string(dir.path("speaker.log")).unwrap_or_default();
    let ready = poll_until(&admin, "/readyz", Duration::from_secs(20), |c, _| c == 200).await;
    assert!(ready, "speaker never ready\n{}", log());
    let got_route = collector
        .wait_for(Duration::from_secs(20), |rib| {
            rib.values().any(|t| !t.routes.is_empty())
        })
        .await;
    assert!(got_route, "collector learnt nothing\n{}", log());
    // The report is refreshed once a second and counts a prefix once its UPDATE went out.
    let sent = |body: &str| {
        serde_json::from_str::<Value>(body)
            .is_ok_and(|v| v["peers"][0]["prefixesSent"]["ipv4-unicast"] == 1)
    };
    let reported = poll_until(
        &admin,
        "/debug/peers",
        Duration::from_secs(10),
        |c, body| c == 200 && sent(body),
    )
    .await;
    assert!(reported, "tor1 never counted the prefix as sent\n{}", log());

    let url = format!("http://{admin}");
    let r = run(&["peers", "--admin", &url, "-o", "json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    let peers = doc["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 2, "{doc:#}");
    assert_eq!(
        (&peers[0]["node"], &peers[0]["name"], &peers[0]["state"]),
        (&json!("node-a"), &json!("tor1"), &json!("Established"))
    );
    assert_eq!(peers[0]["families"], json!(["ipv4-unicast"]));
    assert_eq!(peers[0]["holdTime"], 90);
    assert!(peers[0]["uptimeSeconds"].is_u64());
    assert_eq!(peers[0]["prefixesSent"]["ipv4-unicast"], 1);
    assert_eq!(peers[1]["name"], "tor2");
    assert_ne!(peers[1]["state"], "Established");

    let r = run(&["routes", "--admin", &admin, "-o", "json"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let routes = r.json()["routes"].clone();
    assert_eq!(
        routes,
        json!([{"node": "node-a", "peer": "tor1", "peerAddress": "127.0.0.1",
                "peerState": "Established", "prefix": "10.5.113.0/24",
                "nextHop": "127.0.0.1", "asPath": [64512]}])
    );

    let r = run(&["peers", "--admin", &url]).await;
    println!("{}", r.stdout);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout
            .contains("node-a   64512       tor1   127.0.0.1   65000   Established"),
        "the node's local AS from the admin endpoint"
    );
    let r = run(&["routes", "--admin", &url]).await;
    println!("{}", r.stdout);
    assert!(
        r.stdout
            .contains("node-a   tor1   10.5.113.0/24   127.0.0.1   64512")
    );
    assert!(r.stdout.contains("no routes advertised to: node-a/tor2"));

    speaker.start_kill().unwrap();
    tokio::time::timeout(Duration::from_secs(10), speaker.wait())
        .await
        .expect("speaker did not exit after SIGKILL")
        .unwrap();

    // Nobody listens there any more: exit 2 with the reason.
    let r = run(&["peers", "--admin", &url]).await;
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with(&format!("podcidr-bgp peers: {url}/debug/peers: ")),
        "{}",
        r.stderr
    );
    let r = run(&["routes", "--admin", "https://127.0.0.1:9180"]).await;
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("plain HTTP"), "{}", r.stderr);
}
