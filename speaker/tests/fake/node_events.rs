//! The speaker binary's Kubernetes Events, through the fake API server: a BGP session that
//! reaches Established and goes down again shows as Events on the Node (events.k8s.io/v1,
//! namespace `default`, the Node's UID so `kubectl describe node` lists them), and a
//! session that keeps flapping stays one Event per reason with a bounded number of writes.

use crate::common;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig};
use common::{Proc, TempDir, free_port, http_get, poll};
use fake_kube::{FakeKube, Gvr, Verb};
use serde_json::{Value, json};

const ID: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 31);
const WAIT: Duration = Duration::from_secs(30);
/// The speaker's per-Event write burst (`kube_events::BURST`).
const BURST: u64 = 5;

struct Setup {
    fake: FakeKube,
    speaker: Proc,
    admin: SocketAddr,
    peer: SocketAddr,
    node_uid: String,
    _dir: TempDir,
}

async fn setup() -> Setup {
    let fake = FakeKube::start().await.unwrap();
    let node = fake
        .insert(
            &Gvr::nodes(),
            json!({"metadata": {"name": "node-a"}, "spec": {"podCIDRs": ["10.244.1.0/24"]},
                   "status": {"addresses": [{"type": "InternalIP", "address": "198.18.0.10"}]}}),
        )
        .unwrap();
    let node_uid = node["metadata"]["uid"].as_str().unwrap().to_owned();
    fake.insert(
        &common::npc(),
        json!({"metadata": {"name": "node-a"}, "spec": {"podCIDRs": ["10.244.1.0/24"]}}),
    )
    .unwrap();
    let dir = TempDir::new("node-events");
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let peer: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = common::api_speaker_config(
        "ipam-crd",
        64512,
        ID,
        "10.244.0.0/16",
        "ipv4: node",
        peer.port(),
        admin,
    );
    let speaker = common::spawn_api_speaker(&dir, &config, &kubeconfig, "speaker.log");
    Setup {
        fake,
        speaker,
        admin,
        peer,
        node_uid,
        _dir: dir,
    }
}

/// A router on the peer address until dropped. The port of a dropped collector is
/// released when its aborted task is torn down, asynchronously: binding retries briefly.
async fn router(at: SocketAddr) -> Collector {
    for _ in 0..100 {
        if let Ok(c) = Collector::start(CollectorConfig::new(at)).await {
            return c;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("cannot bind {at}");
}

/// Waits until the router has the node's route: the speaker sends UPDATEs only once its
/// side of the session is Established too.
async fn wait_established(s: &Setup, router: &Collector) {
    let route = "10.244.1.0/24".parse().unwrap();
    let up = router
        .wait_for(WAIT, |r| {
            r.get(&ID)
                .is_some_and(|t| t.established && t.routes.contains_key(&route))
        })
        .await;
    assert!(up, "no session\n{}", s.speaker.log());
}

fn node_events(fake: &FakeKube, reason: &str) -> Vec<Value> {
    fake.list(&Gvr::events(), Some("default"))
        .into_iter()
        .filter(|e| e["reason"] == reason && e["regarding"]["kind"] == "Node")
        .collect()
}

async fn wait_event(s: &Setup, reason: &str) -> Value {
    let found = s
        .fake
        .wait_for(WAIT, |f| !node_events(f, reason).is_empty())
        .await;
    assert!(found.is_ok(), "no {reason} Event\n{}", s.speaker.log());
    node_events(&s.fake, reason).remove(0)
}

/// `podcidr_kube_events_total{result}` from the speaker's metrics.
async fn kube_events(s: &Setup, result: &str) -> Option<u64> {
    let (_, body) = http_get(s.admin, "/metrics").await?;
    let prefix = format!("podcidr_kube_events_total{{result=\"{result}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|n| n.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_established_then_down_are_events_on_the_node() {
    let s = setup().await;
    let tor = router(s.peer).await;
    wait_established(&s, &tor).await;
    let up = wait_event(&s, "BGPSessionEstablished").await;
    assert_eq!(up["type"], "Normal");
    assert_eq!(up["action"], "Peer tor1");
    assert_eq!(
        up["note"],
        "BGP session with tor1 (127.0.0.1, AS 65000) established"
    );
    assert_eq!(up["regarding"]["apiVersion"], "v1");
    assert_eq!(up["regarding"]["name"], "node-a");
    assert_eq!(up["regarding"]["uid"], s.node_uid.as_str());
    assert_eq!(up["metadata"]["namespace"], "default");
    assert_eq!(up["reportingController"], "podcidr-bgp-speaker");
    assert_eq!(up["reportingInstance"], "node-a");

    drop(tor);
    let down = wait_event(&s, "BGPSessionDown").await;
    assert_eq!(down["type"], "Warning");
    assert_eq!(down["action"], "Peer tor1");
    let note = down["note"].as_str().unwrap();
    let prefix = "BGP session with tor1 (127.0.0.1, AS 65000) left Established: ";
    assert!(
        note.starts_with(prefix) && note.len() > prefix.len(),
        "{note}"
    );
    assert!(
        s.fake.list(&Gvr::new("v1", "events"), None).is_empty(),
        "no core/v1 Events"
    );
}

/// A session that flaps again and again: one Event object per reason, its series counting
/// at most a burst of occurrences, and every occurrence accounted for in the metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flapping_session_stays_one_event_per_reason_with_bounded_writes() {
    const FLAPS: u64 = BURST + 3;
    let s = setup().await;
    for _ in 0..FLAPS {
        let tor = router(s.peer).await;
        wait_established(&s, &tor).await;
        drop(tor);
    }
    // Every up and down reached the publisher: written or throttled (none dropped).
    let accounted = poll(WAIT, || async {
        let published = kube_events(&s, "published").await?;
        let throttled = kube_events(&s, "throttled").await?;
        (published + throttled == 2 * FLAPS).then_some((published, throttled))
    })
    .await;
    let Some((published, throttled)) = accounted else {
        panic!(
            "published/throttled do not add up to {}\n{}",
            2 * FLAPS,
            s.speaker.log()
        )
    };
    assert_eq!(published, 2 * BURST);
    assert_eq!(throttled, 2 * (FLAPS - BURST));
    assert_eq!(kube_events(&s, "dropped").await, Some(0));
    assert_eq!(kube_events(&s, "failed").await, Some(0));
    for reason in ["BGPSessionEstablished", "BGPSessionDown"] {
        let stored = node_events(&s.fake, reason);
        assert_eq!(stored.len(), 1, "{reason}: {stored:#?}");
        assert_eq!(stored[0]["series"]["count"], BURST, "{reason}");
    }
    let writes = s.fake.requests(Verb::Create, "events") + s.fake.requests(Verb::Patch, "events");
    assert_eq!(writes, 2 * BURST, "creates + series patches");
}
