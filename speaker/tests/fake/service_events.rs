//! Events on Services through the allocator binary (its leader, the one cluster-wide view):
//! `BGPAnnounced` once when a Service's announcement first starts, none when another node
//! joins, `BGPWithdrawn` once when no node announces it any more, and nothing for what the
//! allocator finds at start.

use crate::common;

use std::time::Duration;

use common::{Proc, TempDir, free_port, metric_line, poll};
use fake_kube::{FakeKube, Gvr};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn services() -> Gvr {
    Gvr::new("v1", "services")
}

fn slices() -> Gvr {
    Gvr::new("discovery.k8s.io/v1", "endpointslices")
}

fn bgp(plural: &str) -> Gvr {
    Gvr::new("bgp.podcidr.io/v1beta1", plural)
}

fn service(name: &str, ip: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"),
                     "labels": {"app": name}},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                 "externalTrafficPolicy": "Cluster", "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}
    })
}

/// `service`'s one slice: an endpoint per (node, ready).
fn slice(service: &str, endpoints: &[(&str, bool)]) -> Value {
    let eps: Vec<Value> = endpoints
        .iter()
        .map(|(node, ready)| {
            json!({"addresses": ["10.244.1.5"], "nodeName": node,
                   "conditions": {"ready": ready, "serving": ready, "terminating": false}})
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{service}-1"), "namespace": "shop",
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4", "endpoints": eps, "ports": [{"port": 8080}]
    })
}

fn set_endpoints(fake: &FakeKube, service: &str, endpoints: &[(&str, bool)]) {
    let new = slice(service, endpoints);
    fake.update(&slices(), Some("shop"), &format!("{service}-1"), |s| {
        s["endpoints"] = new["endpoints"].clone();
    })
    .unwrap();
}

/// The Events in `shop` about Service `name`: (reason, note, reportingController).
fn events_of(fake: &FakeKube, name: &str) -> Vec<(String, String, String)> {
    fake.list(&Gvr::events(), Some("shop"))
        .into_iter()
        .filter(|e| e["regarding"]["kind"] == "Service" && e["regarding"]["name"] == name)
        .map(|e| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (s(&e["reason"]), s(&e["note"]), s(&e["reportingController"]))
        })
        .collect()
}

async fn wait_event(fake: &FakeKube, name: &str, reason: &str, alloc: &Proc) {
    let seen = fake
        .wait_for(WAIT, |f| events_of(f, name).iter().any(|e| e.0 == reason))
        .await;
    assert!(
        seen.is_ok(),
        "no {reason} Event on Service {name}: {:?}\n{}",
        events_of(fake, name),
        alloc.log()
    );
}

/// `old` is announced when the allocator starts (no Event for it); `web` first gets a ready
/// endpoint (one `BGPAnnounced`), then a second node (nothing more); `old` loses its
/// endpoints (one `BGPWithdrawn`); the advertisement's deletion withdraws `kept` (one
/// `BGPWithdrawn`) while `web`'s waits for its minute. `fence` proves the allocator saw the second node before
/// the count is checked: its slice is changed after web's on the same watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_events_only_when_announcement_first_starts_or_fully_stops() {
    let fake = FakeKube::start().await.unwrap();
    for n in ["node-a", "node-b"] {
        fake.insert(
            &Gvr::nodes(),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}}),
        )
        .unwrap();
    }
    fake.insert(
        &bgp("bgppeers"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPPeer",
               "metadata": {"name": "tor", "generation": 1},
               "spec": {"address": "192.0.2.1", "asn": 65000}}),
    )
    .unwrap();
    fake.insert(
        &bgp("bgpadvertisements"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPAdvertisement",
               "metadata": {"name": "lb", "generation": 1},
               "spec": {"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                        "allowedPrefixes": ["198.51.100.0/24"]}}),
    )
    .unwrap();
    for (name, ip, ready) in [
        ("old", "198.51.100.6", true),
        ("kept", "198.51.100.5", true),
        ("web", "198.51.100.7", false),
        ("fence", "198.51.100.8", false),
    ] {
        fake.insert(&services(), service(name, ip)).unwrap();
        fake.insert(&slices(), slice(name, &[("node-a", ready)]))
            .unwrap();
    }
    let dir = TempDir::new("svc-events");
    let kubeconfig = dir.path("kubeconfig");
    fake.write_kubeconfig(&kubeconfig).unwrap();
    let admin: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let alloc = Proc::spawn(
        &[
            "allocator",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--lease-namespace",
            "podcidr-system",
            "--admin-listen",
            &admin.to_string(),
        ],
        &dir.path("allocator.log"),
    );
    let recorded = poll(WAIT, || async {
        alloc
            .log()
            .contains("Service announcement state recorded")
            .then_some(())
    })
    .await;
    assert!(recorded.is_some(), "{}", alloc.log());

    set_endpoints(&fake, "web", &[("node-a", true)]);
    wait_event(&fake, "web", "BGPAnnounced", &alloc).await;
    let web = events_of(&fake, "web");
    assert_eq!(web.len(), 1, "{web:?}");
    assert_eq!(web[0].1, "announced from 2 nodes: 198.51.100.7");
    assert_eq!(web[0].2, "podcidr-bgp-service-events");

    // A second ready node: the announcement did not first start, no Event.
    set_endpoints(&fake, "web", &[("node-a", true), ("node-b", true)]);
    set_endpoints(&fake, "fence", &[("node-a", true)]);
    wait_event(&fake, "fence", "BGPAnnounced", &alloc).await;
    assert_eq!(
        events_of(&fake, "web").len(),
        1,
        "{:?}",
        events_of(&fake, "web")
    );

    // Every endpoint of old gone: withdrawn from every node, said once, with why.
    fake.delete(&slices(), Some("shop"), "old-1").unwrap();
    wait_event(&fake, "old", "BGPWithdrawn", &alloc).await;
    let old = events_of(&fake, "old");
    assert_eq!(old.len(), 1, "no Event for old at start, one now: {old:?}");
    assert_eq!(
        old[0].1,
        "withdrawn from every node: no ready endpoint anywhere"
    );

    // The last BGPAdvertisement goes: kept, announced since the start and never said, is
    // withdrawn at once; web's withdrawal waits for the end of its minute (one Event per
    // Service per minute), so web still has its one Event.
    fake.delete(&bgp("bgpadvertisements"), None, "lb").unwrap();
    wait_event(&fake, "kept", "BGPWithdrawn", &alloc).await;
    let kept = events_of(&fake, "kept");
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        kept[0].1,
        "withdrawn from every node: no BGPAdvertisement selects it"
    );
    assert_eq!(
        events_of(&fake, "web").len(),
        1,
        "{:?}",
        events_of(&fake, "web")
    );

    let counted = poll(WAIT, || async {
        metric_line(
            admin,
            "podcidr_allocator_service_events_total{reason=\"BGPAnnounced\"}",
        )
        .await
        .filter(|l| l.ends_with(" 2"))
    })
    .await;
    assert!(counted.is_some(), "{}", alloc.log());
}
