//! The speaker binary against the fake Kubernetes API and a route collector (issue 23 item 4):
//! `/readyz` holds a rollout until the BGP session is Established (a peer that never answers
//! is excused after `--ready-peer-grace`), and a SIGTERM is a departure (RFC 8326 wait with
//! 65535:0, then a Cease) when the Node says the node is leaving, a graceful-restart close
//! (no NOTIFICATION) when it stays.

use crate::common;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig, SessionEnd};
use common::{Proc, TempDir, free_port, http_get, poll};
use fake_kube::{FakeKube, Gvr};
use serde_json::{Value, json};

const ID: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 41);
const WAIT: Duration = Duration::from_secs(30);
const GSHUT: u32 = 0xFFFF_0000;
const ROUTE: &str = "10.244.1.0/24";

struct Setup {
    fake: FakeKube,
    speaker: Proc,
    admin: SocketAddr,
    peer: SocketAddr,
    _dir: TempDir,
}

/// node-a with the `ipam-crd` source and one graceful-restart peer on `peer` (nothing
/// listens there until the test starts a router).
async fn setup(grace: &str) -> Setup {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(
        &Gvr::nodes(),
        json!({"metadata": {"name": "node-a"}, "spec": {"podCIDRs": [ROUTE]},
               "status": {"addresses": [{"type": "InternalIP", "address": "198.18.0.10"}]}}),
    )
    .unwrap();
    fake.insert(
        &common::npc(),
        json!({"metadata": {"name": "node-a"}, "spec": {"podCIDRs": [ROUTE]}}),
    )
    .unwrap();
    let dir = TempDir::new("rollout-gate");
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let peer: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let cfg = dir.path("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "nodeName: node-a\nasn: 64512\nrouterId: {ID}\nsource: {{kind: ipam-crd}}\n\
             allowedPrefixes: [10.244.0.0/16]\nnextHop: {{ipv4: node}}\n\
             gracefulShutdown: {{wait: 1s, departOnCordon: true}}\n\
             peers:\n  - {{name: tor1, address: 127.0.0.1, port: {}, asn: 65000, ebgpMultihop: 2, \
             connectRetry: {{base: 1, max: 1}}}}\n\
             admin: {{listen: \"{admin}\"}}\nstatus: {{publish: false}}\n",
            peer.port()
        ),
    )
    .unwrap();
    let speaker = Proc::spawn(
        &[
            "speaker",
            "--config",
            cfg.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--ready-peer-grace",
            grace,
        ],
        &dir.path("speaker.log"),
    );
    Setup {
        fake,
        speaker,
        admin,
        peer,
        _dir: dir,
    }
}

async fn router(at: SocketAddr) -> Collector {
    for _ in 0..100 {
        if let Ok(c) = Collector::start(CollectorConfig::new(at)).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("cannot bind {at}");
}

async fn readyz(s: &Setup) -> Option<(u16, String)> {
    http_get(s.admin, "/readyz").await
}

/// `/readyz` once the admin endpoint answers and the source has synced (the body then
/// names the sessions it waits for).
async fn waiting_for_bgp(s: &Setup) -> (u16, String) {
    poll(WAIT, || async {
        readyz(s)
            .await
            .filter(|(c, b)| *c == 200 || b.contains("waiting for BGP sessions"))
    })
    .await
    .unwrap_or_else(|| panic!("/readyz never got past the source\n{}", s.speaker.log()))
}

async fn wait_ready(s: &Setup) {
    let ok = poll(WAIT, || async {
        readyz(s).await.filter(|(c, _)| *c == 200)
    })
    .await;
    assert!(ok.is_some(), "never ready\n{}", s.speaker.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_until_the_session_is_established_then_200() {
    let s = setup("10m").await;
    let (code, body) = waiting_for_bgp(&s).await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("tor1 (not Established yet)"), "{body}");
    let tor = router(s.peer).await;
    let up = tor
        .wait_for(WAIT, |r| r.get(&ID).is_some_and(|t| t.established))
        .await;
    assert!(up, "no session\n{}", s.speaker.log());
    wait_ready(&s).await;
    // The gate has passed: losing the session later does not make the pod unready.
    drop(tor);
    let gone = poll(WAIT, || async {
        s.speaker
            .log()
            .contains("from=\"Established\" to=\"Idle\"")
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "{}", s.speaker.log());
    assert_eq!(readyz(&s).await.map(|r| r.0), Some(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_peer_is_excused_only_after_the_ready_peer_grace() {
    let s = setup("4s").await;
    let (code, body) = waiting_for_bgp(&s).await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("a silent peer is excused 4s after start"),
        "{body}"
    );
    wait_ready(&s).await;
    assert!(
        s.speaker.log().contains("not ready"),
        "it was unready first\n{}",
        s.speaker.log()
    );
}

/// Starts a router, waits for the route, changes the Node with `leave` (if any), waits until
/// the speaker has seen it, sends SIGTERM and returns how the session ended.
async fn stop_after(leave: Option<fn(&FakeKube)>) -> (SessionEnd, Setup) {
    let mut s = setup("10m").await;
    let tor = router(s.peer).await;
    let route = ROUTE.parse().unwrap();
    let up = tor
        .wait_for(WAIT, |r| {
            r.get(&ID).is_some_and(|t| t.routes.contains_key(&route))
        })
        .await;
    assert!(up, "no route\n{}", s.speaker.log());
    if let Some(leave) = leave {
        leave(&s.fake);
        let seen = poll(WAIT, || async {
            s.speaker
                .log()
                .contains("a stop now is a departure")
                .then_some(())
        })
        .await;
        assert!(seen.is_some(), "{}", s.speaker.log());
    }
    s.speaker.signal(libc::SIGTERM);
    let end = tor.wait_for_end(WAIT, ID).await;
    let end = end.unwrap_or_else(|| panic!("session never ended\n{}", s.speaker.log()));
    s.speaker.wait_exit(WAIT).expect("the speaker exits");
    (end, s)
}

/// A departure on the wire: every route re-announced with 65535:0, then Cease/Administrative
/// Shutdown (6/2) whose message says why.
fn assert_departure(end: &SessionEnd, why: &str, s: &Setup) {
    let n = end
        .notification
        .as_ref()
        .unwrap_or_else(|| panic!("no NOTIFICATION: a restart\n{}", s.speaker.log()));
    assert_eq!((u8::from(n.code), n.subcode), (6, 2), "{n:?}");
    let message = String::from_utf8_lossy(&n.data[1..]).into_owned();
    assert!(
        message.contains("node leaving") && message.contains(why),
        "{message}"
    );
    let route = &end.routes[&ROUTE.parse().unwrap()];
    assert!(route.communities.contains(&GSHUT), "{route:?}");
}

fn update_node(fake: &FakeKube, change: impl FnOnce(&mut Value)) {
    fake.update(&Gvr::nodes(), None, "node-a", change).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_restart_on_a_staying_node_closes_without_notification_for_graceful_restart() {
    let (end, s) = stop_after(None).await;
    assert_eq!(end.notification, None, "{}", s.speaker.log());
    let route = &end.routes[&ROUTE.parse().unwrap()];
    assert!(!route.communities.contains(&GSHUT), "{route:?}");
    assert!(s.speaker.log().contains("stopping sessions: restart"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_departs() {
    let (end, s) = stop_after(Some(|f| {
        f.delete(&Gvr::nodes(), None, "node-a").unwrap();
    }))
    .await;
    assert_departure(&end, "the Node was deleted", &s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_being_deleted_departs() {
    let (end, s) = stop_after(Some(|f| {
        // A finalizer holds the Node: the DELETE only sets its deletionTimestamp.
        update_node(f, |n| {
            n["metadata"]["finalizers"] = json!(["example.com/drain"]);
        });
        f.delete(&Gvr::nodes(), None, "node-a").unwrap();
        let node = f
            .get(&Gvr::nodes(), None, "node-a")
            .expect("held by its finalizer");
        assert!(!node["metadata"]["deletionTimestamp"].is_null());
    }))
    .await;
    assert_departure(&end, "the Node is being deleted", &s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_the_cluster_autoscaler_removes_departs() {
    let (end, s) = stop_after(Some(|f| {
        update_node(f, |n| {
            n["spec"]["taints"] = json!([{"key": "ToBeDeletedByClusterAutoscaler",
                                          "value": "1700000000", "effect": "NoSchedule"}]);
        });
    }))
    .await;
    assert_departure(&end, "ToBeDeletedByClusterAutoscaler", &s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_kubelet_shuts_down_departs() {
    let (end, s) = stop_after(Some(|f| {
        update_node(f, |n| {
            n["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
                "reason": "KubeletNotReady", "message": "node is shutting down"}]);
        });
    }))
    .await;
    assert_departure(&end, "shutting down", &s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordoned_node_departs() {
    let (end, s) = stop_after(Some(|f| {
        update_node(f, |n| {
            n["spec"]["unschedulable"] = json!(true);
        });
    }))
    .await;
    assert_departure(&end, "cordoned", &s);
}
