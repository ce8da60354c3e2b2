//! A per-node local AS end to end: the speaker reads its AS from its own Node's label (fake
//! API server), BIRD on loopback accepts only that AS (`neighbor … as N`), a bad label value
//! stops the session with a NodeBGPStatus condition naming label and value, and a new label
//! value resets the session with the new AS. Also through the Node: a cordoned node's routes
//! carry GRACEFUL_SHUTDOWN (RFC 8326) until it is uncordoned.

use crate::common;
use integration_tests::skip::Need;

use std::net::Ipv4Addr;
use std::time::Duration;

use common::{TempDir, free_port, nbs, poll};
use fake_kube::{FakeKube, Gvr};
use integration_tests::{Bird, BirdConfig, BirdNeighbor, net};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);
const LABEL: &str = "example.com/asn";
const PREFIX: &str = "198.19.7.0/24";

fn bird_config(listen: Ipv4Addr, ours: Ipv4Addr, node_asn: u32) -> BirdConfig {
    let mut cfg = BirdConfig::new(listen, 65001);
    cfg = cfg.neighbor(BirdNeighbor::new("spk", ours, node_asn).passive(true));
    cfg
}

fn as_path(bird: &Bird) -> Option<Vec<u32>> {
    bird.routes_from("spk")
        .into_iter()
        .find(|r| r.prefix.to_string() == PREFIX)
        .map(|r| r.as_path)
}

async fn set_label(fake: &FakeKube, value: &str) {
    fake.update(&Gvr::nodes(), None, "node-a", |o| {
        o["metadata"]["labels"][LABEL] = json!(value);
    })
    .unwrap();
}

/// The NodeBGPStatus `status` once `pred` holds (bounded polling).
async fn status_when(fake: &FakeKube, pred: impl Fn(&Value) -> bool) -> Option<Value> {
    poll(T, || async {
        let s = fake.get(&nbs(), None, "node-a")?["status"].clone();
        pred(&s).then_some(s)
    })
    .await
}

fn asn_condition(s: &Value) -> Option<&Value> {
    s["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "LocalASN")
}

struct Setup {
    bird: Bird,
    fake: FakeKube,
    speaker: common::Proc,
    listen: Ipv4Addr,
    ours: Ipv4Addr,
    _dir: TempDir,
}

/// BIRD expecting AS 65020 from the node, whose Node carries that label, and the speaker
/// reading its AS from it.
async fn setup() -> Setup {
    let (listen, ours) = (net::alloc_v4(), net::alloc_v4());
    let bird = Bird::start(bird_config(listen, ours, 65020));
    let peer = bird.peer_addr("spk");

    let fake = FakeKube::start().await.unwrap();
    fake.insert(
        &Gvr::nodes(),
        json!({"metadata": {"name": "node-a", "labels": {LABEL: "65020"}},
               "status": {"addresses": [{"type": "InternalIP", "address": "198.18.0.10"}]}}),
    )
    .unwrap();
    fake.insert(
        &common::npc(),
        json!({"metadata": {"name": "node-a"}, "spec": {"podCIDRs": [PREFIX]}}),
    )
    .unwrap();
    let dir = TempDir::new("node-asn");
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    let config = format!(
        "nodeName: node-a
asn: {{fromNodeLabel: {LABEL}}}
routerId: 192.0.2.31
source: {{kind: ipam-crd}}
allowedPrefixes: [198.19.0.0/16]
peers:
  - name: bird
    address: {addr}
    port: {port}
    asn: {peer_asn}
    localAddress: {ours}
    connectRetry: {{base: 1, max: 2}}
admin: {{listen: \"127.0.0.1:{admin}\"}}
status: {{publish: true, minInterval: 1}}
",
        addr = peer.addr,
        port = peer.port,
        peer_asn = peer.asn,
        admin = free_port(),
    );
    let speaker = common::spawn_api_speaker(&dir, &config, &kubeconfig, "speaker.log");

    Setup {
        bird,
        fake,
        speaker,
        listen,
        ours,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_label_asn_reaches_bird_bad_value_stops_and_new_value_resets_the_session() {
    integration_tests::require!(Need::Bird);
    let Setup {
        mut bird,
        fake,
        speaker,
        listen,
        ours,
        _dir,
    } = setup().await;
    assert!(
        bird.wait_until(T, |b| as_path(b) == Some(vec![65020])),
        "BIRD (neighbor as 65020) never got our route\n{}\n{}",
        bird.diagnostics(),
        speaker.log()
    );
    let s = status_when(&fake, |s| s["localAsn"] == 65020).await;
    let s = s.unwrap_or_else(|| panic!("no localAsn in the status\n{}", speaker.log()));
    assert_eq!(s["localAsnSource"], format!("label {LABEL}"));
    assert_eq!(asn_condition(&s).unwrap()["status"], "True");

    // A bad value: no session with a wrong AS, a condition naming label and value.
    set_label(&fake, "65x").await;
    assert!(
        bird.wait_until(T, |b| !b.protocol("spk").is_established()
            && as_path(b).is_none()),
        "the session stayed up with a bad label\n{}",
        bird.diagnostics()
    );
    let s = status_when(&fake, |s| {
        asn_condition(s).is_some_and(|c| c["reason"] == "LocalASNInvalid")
    })
    .await
    .unwrap_or_else(|| panic!("no LocalASNInvalid condition\n{}", speaker.log()));
    let message = asn_condition(&s).unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains(LABEL) && message.contains("\"65x\""),
        "{message}"
    );
    assert!(s["localAsn"].is_null(), "{s}");

    // A new AS: BIRD must be told too (neighbor as 65021), and the session comes back with it.
    bird.reconfigure(bird_config(listen, ours, 65021));
    set_label(&fake, "65021").await;
    assert!(
        bird.wait_until(T, |b| as_path(b) == Some(vec![65021])),
        "never re-established with AS 65021\n{}\n{}",
        bird.diagnostics(),
        speaker.log()
    );
    assert!(
        bird.protocol("spk").neighbor_as == Some(65021),
        "{}",
        bird.diagnostics()
    );
}

/// Communities of our route as BIRD holds it.
fn communities(bird: &Bird) -> Option<Vec<(u16, u16)>> {
    bird.routes_from("spk")
        .into_iter()
        .find(|r| r.prefix.to_string() == PREFIX)
        .map(|r| r.communities)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordoned_node_routes_carry_graceful_shutdown_until_uncordoned_rfc8326() {
    integration_tests::require!(Need::Bird);
    let Setup {
        bird,
        fake,
        speaker,
        _dir,
        ..
    } = setup().await;
    assert!(
        bird.wait_until(T, |b| communities(b) == Some(Vec::new())),
        "no plain route\n{}\n{}",
        bird.diagnostics(),
        speaker.log()
    );
    let cordon = |on: bool| {
        fake.update(&Gvr::nodes(), None, "node-a", |o| {
            o["spec"]["unschedulable"] = json!(on);
        })
        .unwrap();
    };
    cordon(true);
    assert!(
        bird.wait_until(T, |b| communities(b) == Some(vec![(65535, 0)])),
        "a cordoned node's route lacks 65535:0: {:?}\n{}",
        communities(&bird),
        speaker.log()
    );
    cordon(false);
    assert!(
        bird.wait_until(T, |b| communities(b) == Some(Vec::new())),
        "uncordoned, 65535:0 stays: {:?}",
        communities(&bird)
    );
}
