//! The speaker binary against the in-process fake Kubernetes API and a route collector:
//! it announces exactly what the chosen source says, reports a Node/IPAM mismatch without
//! announcing it, and withdraws nothing during an API outage.

use crate::common;

use std::net::Ipv4Addr;
use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig};
use common::{Proc, TempDir, free_port, http_get, poll};
use fake_kube::{FakeKube, Gvr};
use ipnet::IpNet;
use serde_json::json;

fn npc() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs")
}

fn nbs() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodebgpstatuses")
}

fn node(name: &str, pod_cidrs: &[&str]) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"rack": "r1"}},
        "spec": {"podCIDRs": pod_cidrs, "podCIDR": pod_cidrs.first()},
        "status": {"addresses": [
            {"type": "InternalIP", "address": "198.18.0.10"},
            {"type": "InternalIP", "address": "2001:db8::10"}
        ]}
    })
}

struct Setup {
    fake: FakeKube,
    collector: Collector,
    speaker: Proc,
    admin: std::net::SocketAddr,
    _dir: TempDir,
}

const ID: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 21);

async fn setup(source: &str, objects: Vec<(Gvr, serde_json::Value)>) -> Setup {
    let fake = FakeKube::start().await.unwrap();
    for (gvr, obj) in objects {
        fake.insert(&gvr, obj).unwrap();
    }
    let collector = Collector::start(CollectorConfig::new("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let dir = TempDir::new("speaker-api");
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    let admin: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = common::api_speaker_config(
        source,
        4_200_000_001,
        ID,
        "10.244.0.0/16, fd00::/8",
        "ipv4: node, ipv6: node",
        collector.local_addr().port(),
        admin,
    );
    let speaker = common::spawn_api_speaker(&dir, &config, &kubeconfig, "speaker.log");
    Setup {
        fake,
        collector,
        speaker,
        admin,
        _dir: dir,
    }
}

fn prefixes(s: &Setup) -> Vec<IpNet> {
    common::collected(&s.collector, ID)
}

async fn wait_prefixes(s: &Setup, want: &[&str]) {
    common::wait_collected(&s.collector, ID, want, || s.speaker.log()).await;
}

async fn metric(s: &Setup, line_prefix: &str) -> Option<String> {
    common::metric_line(s.admin, line_prefix).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipam_crd_source_announces_the_crd_not_the_node_and_reports_the_mismatch() {
    let s = setup(
        "ipam-crd",
        vec![
            (Gvr::nodes(), node("node-a", &[])),
            (npc(), json!({"metadata": {"name": "node-a"}, "spec": {"podCIDRs": ["10.244.1.0/24", "fd00:244:1::/64"]}})),
        ],
    )
    .await;
    wait_prefixes(&s, &["10.244.1.0/24", "fd00:244:1::/64"]).await;
    let rib = s.collector.rib();
    let v4 = &rib[&ID].routes[&"10.244.1.0/24".parse::<IpNet>().unwrap()];
    assert_eq!(
        v4.next_hop,
        Some("198.18.0.10".parse().unwrap()),
        "nextHop: node uses the InternalIP"
    );

    // The classic incident: kube-controller-manager fills Node.spec.podCIDRs differently.
    s.fake
        .update(&Gvr::nodes(), None, "node-a", |n| {
            n["spec"]["podCIDRs"] = json!(["10.244.9.0/24"])
        })
        .unwrap();
    let seen = poll(Duration::from_secs(20), || async {
        metric(&s, "podcidr_source_mismatch 1").await
    })
    .await;
    assert!(seen.is_some(), "mismatch metric\n{}", s.speaker.log());
    let status = s
        .fake
        .wait_for_object(&nbs(), None, "node-a", Duration::from_secs(20), |o| {
            o.is_some_and(|o| {
                o["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "SourceMismatch" && c["status"] == "True")
                })
            })
        })
        .await;
    assert!(
        status.is_ok(),
        "NodeBGPStatus shows SourceMismatch\n{}",
        s.speaker.log()
    );
    // API conventions: every condition names the generation it describes, and the session
    // state is a condition `kubectl wait --for=condition=Established` can use.
    let obj = s.fake.get(&nbs(), None, "node-a").unwrap();
    let generation = &obj["metadata"]["generation"];
    assert!(generation.as_i64().is_some(), "{obj}");
    assert_eq!(&obj["status"]["observedGeneration"], generation, "{obj}");
    let conditions = obj["status"]["conditions"].as_array().unwrap();
    for c in conditions {
        assert_eq!(&c["observedGeneration"], generation, "{c}");
    }
    assert!(
        conditions
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True"),
        "{conditions:?}"
    );
    assert!(s.speaker.log().contains("disagree"), "a warning is logged");
    // And a Warning Event on the Node (`kubectl events -n default --for node/node-a`).
    let event = s
        .fake
        .wait_for(Duration::from_secs(20), |f| {
            f.list(&Gvr::events(), Some("default")).iter().any(|e| {
                e["reason"] == "PodCIDRSourceMismatch"
                    && e["type"] == "Warning"
                    && e["regarding"]["name"] == "node-a"
                    && e["note"]
                        .as_str()
                        .is_some_and(|n| n.contains("10.244.9.0/24"))
            })
        })
        .await;
    assert!(event.is_ok(), "mismatch Event\n{}", s.speaker.log());
    assert_eq!(
        prefixes(&s),
        vec![
            "10.244.1.0/24".parse::<IpNet>().unwrap(),
            "fd00:244:1::/64".parse().unwrap()
        ],
        "the Node's value is never announced"
    );

    // An API outage withdraws nothing: wait until the speaker's watches have failed
    // against the outage several times, then look at the router.
    let total = |f: &FakeKube| f.request_counts().values().sum::<u64>();
    let before = total(&s.fake);
    s.fake.set_outage(true);
    // Request counters have no change notification; poll them (bounded).
    let retried = poll(Duration::from_secs(60), || async {
        (total(&s.fake) >= before + 4).then_some(())
    })
    .await;
    assert!(
        retried.is_some(),
        "the speaker retried against the outage\n{}",
        s.speaker.log()
    );
    assert_eq!(
        prefixes(&s).len(),
        2,
        "routes stay announced during the outage"
    );

    // After the outage, a new allocation replaces the old one: withdraw + announce.
    s.fake.set_outage(false);
    s.fake
        .update(&npc(), None, "node-a", |o| {
            o["spec"]["podCIDRs"] = json!(["10.244.2.0/24"])
        })
        .unwrap();
    wait_prefixes(&s, &["10.244.2.0/24"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_spec_source_announces_node_pod_cidrs_and_readyz_follows_the_source() {
    let s = setup(
        "node-spec",
        vec![(
            Gvr::nodes(),
            node("node-a", &["10.244.5.0/24", "fd00:5::/64"]),
        )],
    )
    .await;
    wait_prefixes(&s, &["10.244.5.0/24", "fd00:5::/64"]).await;
    let v6 = &s.collector.rib()[&ID].routes[&"fd00:5::/64".parse::<IpNet>().unwrap()];
    assert_eq!(
        v6.next_hop,
        Some("2001:db8::10".parse().unwrap()),
        "IPv6 next hop is a real IPv6 address"
    );
    // Ready once the session that carried those routes is seen Established (next tick).
    let ready = poll(Duration::from_secs(10), || async {
        http_get(s.admin, "/readyz")
            .await
            .filter(|(c, _)| *c == 200)
    })
    .await;
    assert!(ready.is_some(), "{}", s.speaker.log());
    let (code, _) = http_get(s.admin, "/livez").await.unwrap();
    assert_eq!(code, 200);
    let up = poll(Duration::from_secs(10), || async {
        metric(&s, "podcidr_bgp_session_up{peer=\"tor1\"} 1").await
    })
    .await;
    assert!(up.is_some());
    // A prefix outside allowedPrefixes is refused: counted, reported, not announced.
    s.fake
        .update(&Gvr::nodes(), None, "node-a", |n| {
            n["spec"]["podCIDRs"] = json!(["10.244.5.0/24", "192.168.7.0/24"])
        })
        .unwrap();
    let refused = poll(Duration::from_secs(20), || async {
        metric(
            &s,
            "podcidr_guard_refused_total{reason=\"outside-allowed-prefixes\"}",
        )
        .await
    })
    .await;
    assert!(refused.is_some(), "{}", s.speaker.log());
    wait_prefixes(&s, &["10.244.5.0/24"]).await;
}
