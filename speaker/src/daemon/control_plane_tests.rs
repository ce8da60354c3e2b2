//! The speaker's cost to the API server, measured on the real thing: an in-process speaker
//! (the same `Speaker` the binary runs) against the fake API server over HTTP, with a BGP
//! collector as its router. The cluster holds 5,000 Nodes and 5,000 `NodePodCIDR`s; the
//! speaker must see only its own.
//!
//! Start-up runs in real time. The idle hours run in paused time (`tokio::time::pause`), so
//! they take seconds: tokio then moves the clock to the next timer whenever the runtime
//! waits, also while a loopback request is in flight, so only counts are asserted there,
//! never how long something took.

use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig};
use fake_kube::{FakeKube, Gvr, Verb};
use podcidr_config::Config;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{RunOptions, Speaker};
use crate::cli::liveness::Liveness;
use crate::cli::{DiffOptions, diff, load};

const NODES: usize = 5000;
const ME: &str = "node-0042";
const NS: &str = "podcidr-system";
/// Bound on every wait for the speaker (real time).
const WAIT: Duration = Duration::from_secs(60);

fn npc() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodepodcidrs")
}

fn nbs() -> Gvr {
    Gvr::new("podcidr.io/v1alpha1", "nodebgpstatuses")
}

fn cidr(i: usize) -> String {
    format!("10.{}.{}.0/24", 64 + (i >> 8), i & 0xff)
}

fn cluster(fake: &FakeKube, nodes: usize) {
    for i in 0..nodes {
        let name = format!("node-{i:04}");
        fake.insert(
            &Gvr::nodes(),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                   "spec": {"podCIDRs": [cidr(i)]},
                   "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}}),
        )
        .unwrap();
        fake.insert(
            &npc(),
            json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
                   "metadata": {"name": name}, "spec": {"podCIDRs": [cidr(i)]}}),
        )
        .unwrap();
        fake.insert(
            &Gvr::cilium_nodes(),
            json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode",
                   "metadata": {"name": name}, "spec": {"ipam": {"podCIDRs": [cidr(i)]}}}),
        )
        .unwrap();
    }
}

struct Running {
    fake: FakeKube,
    _collector: Collector,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// A speaker for node `ME`, up: its route out to an Established router, its status
/// published and its Lease renewed with the Node as owner.
async fn start(min_interval: u64) -> Running {
    start_with("ipam-crd", NODES, min_interval).await
}

async fn start_with(source: &str, nodes: usize, min_interval: u64) -> Running {
    // Bookmarks every minute, like a real API server's watch cache.
    let fake = FakeKube::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .await
        .unwrap();
    cluster(&fake, nodes);
    let collector = Collector::start(CollectorConfig::new("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let config = Config::from_yaml_str(&format!(
        "nodeName: {ME}\nasn: 64512\ngracefulShutdown: {{wait: 0}}\nrouterId: 192.0.2.42\nsource: {{kind: {source}}}\n\
         allowedPrefixes: [10.0.0.0/8]\nnextHop: {{ipv4: node}}\n\
         admin: {{listen: \"127.0.0.1:0\"}}\nstatus: {{minInterval: {min_interval}}}\n\
         peers:\n  - name: tor1\n    address: 127.0.0.1\n    port: {}\n    asn: 65000\n    \
         families: [ipv4-unicast]\n    ebgpMultihop: 2\n    gracefulRestart: {{enabled: false}}\n",
        collector.local_addr().port(),
    ))
    .unwrap();
    let mut opts = RunOptions::in_process(true);
    opts.lease_namespace = NS.into();
    opts.pod_name = Some("speaker-test".into());
    let mut speaker = Speaker::start(config, ME.into(), Some(fake.client()), opts)
        .await
        .unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        speaker
            .run(async {
                let _ = stopped.await;
            })
            .await;
    });
    // Up: the status says the route is out to an Established router.
    let up = fake
        .wait_for_object(&nbs(), None, ME, WAIT, |o| {
            o.and_then(|o| o.pointer("/status/peers/0/state")) == Some(&json!("Established"))
                && o.and_then(|o| o.pointer("/status/peers/0/routes/0/prefix"))
                    == Some(&json!(cidr(42)))
        })
        .await;
    assert!(up.is_ok(), "the speaker never published its route");
    // Renewed at once when the Node's UID is known, owned by the Node from then on.
    let owned = fake
        .wait_for_object(&Gvr::leases(), Some(NS), ME, WAIT, |o| {
            o.is_some_and(|o| o["metadata"]["ownerReferences"].is_array())
        })
        .await;
    assert!(owned.is_ok(), "no Lease owned by the Node");
    Running {
        fake,
        _collector: collector,
        stop,
        task,
    }
}

fn writes(fake: &FakeKube, resource: &str) -> u64 {
    fake.requests(Verb::Patch, resource)
}

/// Idle for three hours: the status is re-written once an hour (one request each, the
/// status only), the Lease renewed once a minute, nothing else written; every list and
/// watch is of this node's objects only, so what the speaker receives does not grow with
/// the cluster.
#[tokio::test]
async fn an_idle_speaker_writes_its_status_hourly_and_its_lease_every_minute() {
    let r = start(5).await;
    // Three idle hours in paused time, counted after two minutes of settling.
    tokio::time::pause();
    tokio::time::sleep(Duration::from_secs(120)).await;
    r.fake.reset_counters();
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;

    let status = writes(&r.fake, "nodebgpstatuses/status");
    let object = writes(&r.fake, "nodebgpstatuses");
    let lease = writes(&r.fake, "leases");
    let traffic = r.fake.traffic();
    println!("3 idle hours: {status} status writes, {object} object writes, {lease} Lease writes");
    for ((verb, resource), t) in &traffic {
        println!("  {verb:?} {resource}: {t:?}");
    }
    assert!(
        (2..=3).contains(&status),
        "status writes in 3 idle hours: {status}"
    );
    assert_eq!(
        object, 0,
        "the object is written once per process, not per refresh"
    );
    assert!(
        (178..=181).contains(&lease),
        "Lease renewals in 3 h: {lease}"
    );
    assert_eq!(r.fake.writes(), status + lease, "no other writes");

    // Only its own objects: every list and watch carries the field selector, but the one of
    // BGPAdvertisements (cluster-wide, a handful of objects; none here).
    let log = r.fake.request_log();
    let reads: Vec<_> = log
        .iter()
        .filter(|q| matches!(q.verb, Verb::List | Verb::Watch))
        .filter(|q| q.resource != "bgpadvertisements")
        .collect();
    assert!(!reads.is_empty(), "watches are renewed (timeoutSeconds)");
    for q in &reads {
        assert_eq!(
            q.field_selector.as_deref(),
            Some(format!("metadata.name={ME}").as_str()),
            "{q:?}"
        );
    }
    // Received: the answers to its writes plus at most a relisted object or two, of 5,000.
    let received: u64 = traffic.values().map(|t| t.objects_out).sum();
    assert!(
        received <= status + lease + 4,
        "objects received in 3 idle hours: {received}"
    );
    tokio::time::resume();
    let _ = r.stop.send(());
    tokio::time::timeout(WAIT, r.task).await.unwrap().unwrap();
}

/// A change of the node's allocation is one status request (a server-side apply of the
/// status subresource), whatever else the speaker does meanwhile.
#[tokio::test]
async fn a_change_is_one_status_request() {
    let r = start(1).await;
    r.fake.reset_counters();
    r.fake
        .update(&npc(), None, ME, |o| {
            o["spec"]["podCIDRs"] = json!([cidr(42), "10.250.0.0/24"]);
        })
        .unwrap();
    let seen = r
        .fake
        .wait_for_object(&nbs(), None, ME, WAIT, |o| {
            o.and_then(|o| o.pointer("/status/announced"))
                .and_then(Value::as_array)
                .is_some_and(|a| a.len() == 2)
        })
        .await;
    assert!(seen.is_ok(), "the change was never published");
    // No event marks "no second write": give the core (it renders every second here) three
    // more chances to write, in paused time (the runtime jumps the clock whenever it is
    // idle, so this costs nothing and cannot race). No refresh is due within the hour.
    tokio::time::pause();
    tokio::time::sleep(Duration::from_secs(3)).await;
    tokio::time::resume();
    assert_eq!(writes(&r.fake, "nodebgpstatuses/status"), 1);
    assert_eq!(writes(&r.fake, "nodebgpstatuses"), 0);
    let _ = r.stop.send(());
    tokio::time::timeout(WAIT, r.task).await.unwrap().unwrap();
}

/// `diff` takes liveness from the Lease the speaker renews: live while it runs, dead once
/// `renewTime + leaseDurationSeconds` has passed, with the status still explaining routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_calls_a_speaker_whose_lease_expired_dead() {
    let r = start(1).await;
    let lease = r.fake.get(&Gvr::leases(), Some(NS), ME).unwrap();
    assert_eq!(
        lease["spec"]["holderIdentity"],
        format!("{ME}/speaker-test")
    );
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 180);
    assert_eq!(
        lease["metadata"]["ownerReferences"][0]["kind"], "Node",
        "deleting the Node deletes its Lease"
    );
    assert!(
        serde_json::to_vec(&lease).unwrap().len() < 1024,
        "at most 1 KiB as stored: {lease}"
    );
    let _ = r.stop.send(());
    tokio::time::timeout(WAIT, r.task).await.unwrap().unwrap();

    let renewed: k8s_openapi::jiff::Timestamp = lease["spec"]["renewTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let renewed = renewed.as_second();
    let options = DiffOptions {
        lease_namespace: NS.into(),
        ..DiffOptions::default()
    };
    let verdict_at = |now: i64| {
        let client = r.fake.client();
        let options = options.clone();
        async move {
            let input = load::load_input(&client, &options, now).await.unwrap();
            let rows = diff::diff(&input);
            let row = rows
                .into_iter()
                .find(|row| row.node == ME)
                .expect("a row for the node");
            (row.verdict, row.liveness, row.detail)
        }
    };
    let (verdict, liveness, _) = verdict_at(renewed + 30).await;
    assert_eq!((verdict, liveness), (diff::Verdict::Ok, Liveness::Live));
    let (verdict, liveness, detail) = verdict_at(renewed + 181).await;
    assert_eq!(
        (verdict, liveness),
        (diff::Verdict::SpeakerDead, Liveness::Dead),
        "{detail}"
    );
    assert!(
        detail.contains(&format!(
            "Lease {NS}/{ME} (held by {ME}/speaker-test) expired 1s ago"
        )),
        "{detail}"
    );
    // The other 4,999 nodes never ran a speaker.
    let input = load::load_input(&r.fake.client(), &options, renewed + 30)
        .await
        .unwrap();
    let rows = diff::diff(&input);
    assert_eq!(rows.len(), NODES);
    assert_eq!(
        rows.iter()
            .filter(|row| row.verdict == diff::Verdict::NoSpeaker)
            .count(),
        NODES - 1
    );
}

/// Whatever the source, the speaker lists and watches its own Node and its own IPAM object
/// only (`fieldSelector=metadata.name=<node>`), never a kind cluster-wide but
/// BGPAdvertisements: no Service, EndpointSlice or BGPPeer while no BGPAdvertisement exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_source_lists_and_watches_only_its_own_objects() {
    for source in ["node-spec", "ipam-crd", "cilium-node"] {
        let r = start_with(source, 200, 1).await;
        let log = r.fake.request_log();
        let reads: Vec<_> = log
            .iter()
            .filter(|q| matches!(q.verb, Verb::List | Verb::Watch))
            .collect();
        let kinds: std::collections::BTreeSet<&str> =
            reads.iter().map(|q| q.resource.as_str()).collect();
        let want: &[&str] = match source {
            "ipam-crd" => &["bgpadvertisements", "nodepodcidrs", "nodes"],
            "cilium-node" => &["bgpadvertisements", "ciliumnodes", "nodes"],
            _ => &["bgpadvertisements", "nodes"],
        };
        assert_eq!(kinds.into_iter().collect::<Vec<_>>(), want, "{source}");
        for q in reads.iter().filter(|q| q.resource != "bgpadvertisements") {
            assert_eq!(
                q.field_selector.as_deref(),
                Some(format!("metadata.name={ME}").as_str()),
                "{source}: {q:?}"
            );
        }
        let received: u64 = r
            .fake
            .traffic()
            .iter()
            .filter(|((verb, _), _)| matches!(verb, Verb::List | Verb::Watch))
            .map(|(_, t)| t.objects_out)
            .sum();
        assert!(
            received <= 6,
            "{source}: {received} objects listed or watched, of 200 each"
        );
        let _ = r.stop.send(());
        tokio::time::timeout(WAIT, r.task).await.unwrap().unwrap();
    }
}
