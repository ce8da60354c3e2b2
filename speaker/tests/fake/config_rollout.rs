//! Progressive rollout of session-resetting edits (issue 30 item 3), on the fake API: the
//! speakers' own objects task on every node decides which generation it runs, the status
//! controller (`config_status::run`, the allocator leader's) admits the waves, and each
//! node's session and NodeBGPStatus are simulated (`support/fleet.rs`): down while the core
//! resets it, back after a reconnect, never on a broken node. The fake tier proves the
//! decisions and their order across a fleet; what the API server itself decides about the
//! new fields (schema, status subresource) is in the real API suites.

#[path = "../support/fleet.rs"]
mod fleet;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_kube::{FakeKube, Gvr};
use ipam_watch::allocator::{AllocatorMetrics, LeaderState, RolloutLabels};
use podcidr_bgp::config_status::{self, StatusSettings};
use podcidr_bgp::objects::ObjectKind;
use podcidr_bgp::objects::rollout::rollout_hash;
use serde_json::{Value, json};

/// Bound on every wait.
const WAIT: Duration = Duration::from_secs(90);
/// How long a simulated session takes to come back after a reset.
const RECONNECT: Duration = Duration::from_millis(300);

fn peers() -> Gvr {
    Gvr::new("bgp.podcidr.io/v1beta1", "bgppeers")
}

fn node_name(i: usize) -> String {
    format!("node-{i:03}")
}

struct Cluster {
    fake: Arc<FakeKube>,
    nodes: Vec<String>,
    _dir: integration_tests::TempDir,
}

async fn cluster(n: usize, peer_spec: Value) -> Cluster {
    let fake = Arc::new(FakeKube::start().await.unwrap());
    let nodes: Vec<String> = (0..n).map(node_name).collect();
    for name in &nodes {
        fake.insert(&Gvr::nodes(), json!({"metadata": {"name": name}}))
            .unwrap();
    }
    fake.insert(
        &Gvr::new("bgp.podcidr.io/v1beta1", "bgpspeakerconfigs"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPSpeakerConfig",
               "metadata": {"name": "default"},
               "spec": {"asn": 64512, "source": {"kind": "ipam-crd"},
                        "allowedPrefixes": ["10.0.0.0/8"]}}),
    )
    .unwrap();
    fake.insert(
        &peers(),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
               "metadata": {"name": fleet::PEER}, "spec": peer_spec}),
    )
    .unwrap();
    Cluster {
        fake,
        nodes,
        _dir: integration_tests::TempDir::new("config-rollout"),
    }
}

impl Cluster {
    fn fleet(&self, broken: &BTreeSet<String>) -> fleet::Fleet {
        let fake = self.fake.clone();
        fleet::start(
            &self.fake,
            &self.nodes,
            &|_| fake.client(),
            broken,
            RECONNECT,
            self._dir.path("fleet").as_path(),
        )
    }

    fn peer(&self) -> Value {
        self.fake.get(&peers(), None, fleet::PEER).unwrap()
    }

    /// Edits the peer's spec; its new generation.
    fn edit(&self, change: impl FnOnce(&mut Value)) -> i64 {
        let o = self
            .fake
            .update(&peers(), None, fleet::PEER, |o| change(&mut o["spec"]))
            .unwrap();
        o["metadata"]["generation"].as_i64().unwrap()
    }

    /// The peer's `status.rollout` once `pred` holds (awaiting the fake's changes).
    async fn rollout_when(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let rollout = |o: Option<&Value>| o.map_or(Value::Null, |o| o["status"]["rollout"].clone());
        let found = self
            .fake
            .wait_for_object(&peers(), None, fleet::PEER, WAIT, |o| pred(&rollout(o)))
            .await;
        match found {
            Ok(o) => rollout(o.as_ref()),
            Err(_) => panic!("{what}; rollout: {}", rollout(Some(&self.peer()))),
        }
    }

    /// How often an Event was published: kube's recorder folds repeats of one reason on one
    /// object into the Event's `series`.
    fn published(&self, reason: &str) -> u64 {
        self.events(reason)
            .iter()
            .map(|e| e["series"]["count"].as_u64().unwrap_or(1))
            .sum()
    }

    /// Waits for `n` publications of `reason` (an Event follows its status write).
    async fn published_when(&self, reason: &str, n: u64) {
        let published = self
            .fake
            .wait_for(WAIT, |_| self.published(reason) >= n)
            .await;
        assert!(published.is_ok(), "{reason}: {}", self.published(reason));
        assert_eq!(self.published(reason), n, "{reason}");
    }

    fn events(&self, reason: &str) -> Vec<Value> {
        self.fake
            .list(&Gvr::events(), Some("default"))
            .into_iter()
            .filter(|e| e["reason"] == reason && e["regarding"]["name"] == fleet::PEER)
            .collect()
    }
}

/// The controller of the cluster, leading.
fn controller(c: &Cluster) -> (tokio::task::JoinHandle<()>, Arc<AllocatorMetrics>) {
    let (lead, leadership) = tokio::sync::watch::channel(LeaderState::Leader {
        valid_until: std::time::Instant::now() + Duration::from_secs(3600),
    });
    let metrics = Arc::new(AllocatorMetrics::new());
    let task = tokio::spawn({
        let metrics = metrics.clone();
        let client = c.fake.client();
        async move {
            let _lead = lead;
            config_status::run(
                client,
                StatusSettings {
                    secret_namespace: "podcidr-system".into(),
                },
                leadership,
                metrics,
            )
            .await;
        }
    });
    (task, metrics)
}

/// Every node's first application of `generation` (or later), in order.
async fn applied(fleet: &mut fleet::Fleet, n: usize, generation: i64) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while seen.len() < n {
        let Ok(Some((i, g, _))) = tokio::time::timeout_at(deadline, fleet.applied.recv()).await
        else {
            panic!("{} of {n} nodes ran generation {generation}", seen.len());
        };
        if g >= generation && seen.insert(i) {
            order.push(i);
        }
    }
    order
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resetting_edit_reaches_the_fleet_in_waves_each_after_the_last_came_back() {
    let n = 40;
    let c = cluster(
        n,
        json!({"address": "192.0.2.1", "asn": 65000, "holdTime": 90,
               "rollout": {"waves": ["10%", "50%"]}}),
    )
    .await;
    let mut fleet = c.fleet(&BTreeSet::new());
    applied(&mut fleet, n, 1).await;
    let (writer, _) = controller(&c);
    c.rollout_when("generation 1 first seen as complete", |r| {
        r["generation"] == 1 && r["state"] == "Complete"
    })
    .await;

    let g = c.edit(|s| s["holdTime"] = json!(91));
    let order = applied(&mut fleet, n, g).await;
    let done = c
        .rollout_when("the rollout completes", |r| {
            r["generation"] == g && r["state"] == "Complete"
        })
        .await;
    // 10% (4 nodes), then 50% (20), then all: never more sessions down than the widest
    // wave's new nodes, never the fleet.
    assert!(fleet.down.max() <= 20, "{} down at once", fleet.down.max());
    assert!(fleet.down.max() >= 1);
    // The first wave is the 4 nodes of lowest rollout hash, and they went first.
    let mut by_hash: Vec<usize> = (0..n).collect();
    by_hash.sort_by_key(|i| rollout_hash(ObjectKind::Peer, fleet::PEER, &node_name(*i)));
    let first: BTreeSet<usize> = order[..4].iter().copied().collect();
    assert_eq!(
        first,
        by_hash[..4].iter().copied().collect(),
        "order {order:?}"
    );
    c.published_when("RolloutComplete", 1).await;
    assert_eq!(c.published("RolloutStarted"), 1);
    assert_eq!(c.published("RolloutWave"), 2, "{done}");
    let ready = c.peer()["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap();
    assert_eq!(ready["status"], "True", "{ready}");

    // Without the controller, an edit that resets nothing still reaches every node at once:
    // no wave holds it.
    writer.abort();
    fleet.down.reset_max();
    let g = c.edit(|s| s["med"] = json!(10));
    applied(&mut fleet, n, g).await;
    assert_eq!(fleet.down.max(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wave_that_does_not_come_back_stops_the_rollout_and_the_rest_stay_on_their_version() {
    let n = 20;
    let c = cluster(
        n,
        json!({"address": "192.0.2.1", "asn": 65000, "holdTime": 90,
               "rollout": {"waves": ["10%", "50%"], "waveTimeout": "3s"}}),
    )
    .await;
    // The first wave (10% of 20: the 2 nodes of lowest hash) holds a node whose router
    // rejects the new hold time.
    let mut by_hash = c.nodes.clone();
    by_hash.sort_by_key(|name| rollout_hash(ObjectKind::Peer, fleet::PEER, name));
    let broken: BTreeSet<String> = [by_hash[0].clone()].into();
    let mut fleet = c.fleet(&broken);
    applied(&mut fleet, n, 1).await;
    let (_writer, metrics) = controller(&c);
    c.rollout_when("generation 1 first seen as complete", |r| {
        r["state"] == "Complete"
    })
    .await;

    let g = c.edit(|s| s["holdTime"] = json!(91));
    let stalled = c
        .rollout_when("the rollout stalls", |r| {
            r["generation"] == g && r["state"] == "Stalled"
        })
        .await;
    let message = stalled["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{}: not Established again", by_hash[0])),
        "{message}"
    );
    assert_eq!(stalled["wave"], 0, "no wave after the failing one");
    // Only the first wave took the edit; the others still run generation 1.
    let mut took = BTreeSet::new();
    while let Ok((i, generation, _)) = fleet.applied.try_recv() {
        if generation == g {
            took.insert(node_name(i));
        }
    }
    assert_eq!(took, by_hash[..2].iter().cloned().collect(), "{stalled}");
    for name in &by_hash[2..] {
        let r = c.fake.get(&fleet::nbs(), None, name).unwrap();
        assert_eq!(r["status"]["config"]["peers"][0]["generation"], 1, "{name}");
    }
    // Said on the object, in an Event and in the gauge the alert reads.
    let ready = c.peer()["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("RolloutStalled"))
    );
    c.published_when("RolloutStalled", 1).await;
    let events = c.events("RolloutStalled");
    assert_eq!(events[0]["type"], "Warning");
    // The gauge is set once the pass that wrote the status ends.
    let gauge = metrics.config_rollouts.get_or_create(&RolloutLabels {
        kind: "BGPPeer".into(),
        state: "Stalled".into(),
    });
    let deadline = Instant::now() + WAIT;
    while gauge.get() != 1 {
        assert!(
            Instant::now() < deadline,
            "stalled rollouts: {}",
            gauge.get()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The deliberate way on: every node at once.
    let g = c.edit(|s| s["rollout"]["waves"] = json!(["100%"]));
    applied(&mut fleet, n, g).await;
}
