//! The allocator end to end against the in-process fake API server (`fake-kube`) with the
//! real `kube` client, watcher and runtime: allocation at scale, restart without writes,
//! deletion + quarantine, leader election, exhaustion, unknown write outcomes.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use fake_kube::{FakeKube, Fault, Gvr, Verb};
use ipam_watch::allocator::kube_store::ALLOCATED_BY;
use ipam_watch::allocator::lease::DEFAULT_LEASE_NAME;
use ipam_watch::allocator::{
    AllocatorMetrics, AllocatorOptions, ApiLimits, Clock, EVENT_NAMESPACE, LeaseConfig, PodCidr,
    PodCidrPool, RunError, run,
};
use podcidr_api::{NodePodCIDR, PodCIDRPool};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(30);
const NS: &str = "kube-system";

fn records() -> Gvr {
    Gvr::of::<NodePodCIDR>()
}

fn pools() -> Gvr {
    Gvr::of::<PodCIDRPool>()
}

/// events.k8s.io/v1, as `kube::runtime::events::Recorder` writes them.
fn events() -> Gvr {
    Gvr::events()
}

fn options(identity: &str, lease_secs: u64) -> AllocatorOptions {
    let mut o = AllocatorOptions::new(LeaseConfig {
        namespace: NS.into(),
        name: DEFAULT_LEASE_NAME.into(),
        identity: identity.into(),
        duration: Duration::from_secs(lease_secs),
    });
    o.debounce = Duration::from_millis(20);
    // Not what these tests are about (allocator_throttle.rs is): 1,000 nodes at the default
    // 20 requests/s would take 100 s.
    o.api = ApiLimits::new(10_000.0, 10_000).unwrap();
    o
}

fn flag_pool(cidr: &str, mask: u8) -> Option<PodCidrPool> {
    Some(PodCidrPool::default_from_flags(
        &[cidr.into()],
        mask,
        &[],
        64,
    ))
}

struct Instance {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), RunError>>,
    metrics: Arc<AllocatorMetrics>,
}

impl Instance {
    fn start(client: kube::Client, opts: AllocatorOptions) -> Self {
        let (tx, rx) = oneshot::channel::<()>();
        let metrics = Arc::new(AllocatorMetrics::new());
        let m = metrics.clone();
        let task = tokio::spawn(async move {
            run(client, opts, m, async {
                let _ = rx.await;
            })
            .await
        });
        Instance {
            stop: Some(tx),
            task,
            metrics,
        }
    }

    async fn stop(mut self) -> Result<(), RunError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(WAIT, &mut self.task)
            .await
            .expect("allocator stops in time")
            .expect("allocator task does not panic")
    }
}

fn add_node(fake: &FakeKube, name: &str) -> String {
    let v = fake
        .insert(&Gvr::nodes(), json!({"metadata": {"name": name}}))
        .unwrap();
    v["metadata"]["uid"].as_str().unwrap().to_string()
}

fn add_pool(fake: &FakeKube, name: &str, cidr: &str, mask: u8) {
    fake.insert(
        &pools(),
        json!({
            "apiVersion": "podcidr.io/v1alpha1", "kind": "PodCIDRPool",
            "metadata": {"name": name},
            "spec": {"ipv4": {"cidrs": [cidr], "maskSize": mask}},
        }),
    )
    .unwrap();
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn allocated(obj: &Value) -> Option<(String, String)> {
    let c = condition(obj, "Allocated")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
    ))
}

fn cidrs(obj: &Value) -> Vec<String> {
    obj["spec"]["podCIDRs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn is_allocated(obj: Option<&Value>) -> bool {
    obj.and_then(allocated)
        .is_some_and(|(s, r)| s == "True" && r == "Allocated")
}

async fn wait_allocated(fake: &FakeKube, name: &str) -> Value {
    fake.wait_for_object(&records(), None, name, WAIT, is_allocated)
        .await
        .unwrap_or_else(|_| panic!("{name} allocated: {:?}", fake.get(&records(), None, name)))
        .unwrap()
}

async fn wait_holder(fake: &FakeKube, identity: &str) {
    let holder = |o: Option<&Value>| o.is_some_and(|l| l["spec"]["holderIdentity"] == identity);
    fake.wait_for_object(&Gvr::leases(), Some(NS), DEFAULT_LEASE_NAME, WAIT, holder)
        .await
        .unwrap_or_else(|_| panic!("{identity} holds the lease"));
}

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

fn non_lease_writes(fake: &FakeKube) -> u64 {
    fake.writes() - fake.writes_to("leases")
}

fn all_cidrs_unique(fake: &FakeKube) -> Vec<PodCidr> {
    let all: Vec<PodCidr> = fake
        .list(&records(), None)
        .iter()
        .flat_map(cidrs)
        .map(|s| PodCidr::parse(&s).unwrap())
        .collect();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert!(!a.overlaps(b), "{a} overlaps {b}");
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousand_nodes_then_restart_without_writes() {
    let fake = FakeKube::start().await.unwrap();
    add_pool(&fake, "main", "10.0.0.0/16", 26);
    let mut uids = std::collections::HashMap::new();
    for i in 0..1000 {
        let name = format!("node-{i:04}");
        uids.insert(name.clone(), add_node(&fake, &name));
    }
    let started = Instant::now();
    let a = Instance::start(fake.client(), options("first", 15));
    fake.wait_for(WAIT, |f| f.writes_to("nodepodcidrs/status") >= 1000)
        .await
        .expect("1000 status writes");
    let pool_done = |o: Option<&Value>| o.is_some_and(|p| p["status"]["ipv4"]["allocated"] == 1000);
    let pool = fake
        .wait_for_object(&pools(), None, "main", WAIT, pool_done)
        .await
        .expect("pool status written")
        .unwrap();
    let elapsed = started.elapsed();
    let list = fake.list(&records(), None);
    assert_eq!(list.len(), 1000);
    let net = PodCidr::parse("10.0.0.0/16").unwrap();
    let mut seen = HashSet::new();
    for r in &list {
        let name = r["metadata"]["name"].as_str().unwrap();
        assert_eq!(
            allocated(r).unwrap(),
            ("True".into(), "Allocated".into()),
            "{name}"
        );
        let c = PodCidr::parse(&cidrs(r)[0]).unwrap();
        assert!(net.contains(&c) && c.prefix_len() == 26, "{name}: {c}");
        assert!(seen.insert(c), "{c} handed out twice");
        let owner = &r["metadata"]["ownerReferences"][0];
        assert_eq!(
            (owner["kind"].as_str(), owner["uid"].as_str()),
            (Some("Node"), Some(uids[name].as_str()))
        );
        assert_eq!(r["metadata"]["annotations"][ALLOCATED_BY], "first");
    }
    let s = &pool["status"]["ipv4"];
    assert_eq!(
        (
            s["capacity"].as_u64(),
            s["allocated"].as_u64(),
            s["free"].as_u64(),
            s["quarantined"].as_u64()
        ),
        (Some(1024), Some(1000), Some(24), Some(0))
    );
    assert_eq!(condition(&pool, "Ready").unwrap()["status"], "True");
    assert_eq!(condition(&pool, "Exhausted").unwrap()["status"], "False");
    let text = a.metrics.encode();
    assert!(
        text.contains(r#"podcidr_allocator_pool_allocated{pool="main",family="ipv4"} 1000"#),
        "{text}"
    );
    assert!(text.contains("podcidr_allocator_leader 1"), "{text}");
    eprintln!("1000 nodes allocated in {elapsed:?}");
    within("first stops", a.stop()).await.unwrap();

    // Restart: a new instance restores everything and writes nothing but its Lease.
    let before = non_lease_writes(&fake);
    let b = Instance::start(fake.client(), options("second", 15));
    wait_holder(&fake, "second").await;
    assert!(b.metrics.wait_for_passes(1, WAIT).await, "first pass");
    // A change that is not ours triggers a second full pass; still nothing to write.
    fake.update(&Gvr::nodes(), None, "node-0000", |n| {
        n["metadata"]["labels"] = json!({"x": "y"})
    })
    .unwrap();
    assert!(b.metrics.wait_for_passes(2, WAIT).await, "second pass");
    assert_eq!(
        non_lease_writes(&fake),
        before,
        "restart wrote: {:?}",
        fake.request_counts()
    );
    assert_eq!(b.metrics.total_writes(), 0);
    within("second stops", b.stop()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_node_is_released_only_when_gone_then_quarantined_then_reused() {
    let fake = FakeKube::start().await.unwrap();
    add_pool(&fake, "tiny", "10.0.0.0/30", 31);
    add_node(&fake, "a");
    add_node(&fake, "b");
    let mut opts = options("solo", 15);
    opts.quarantine_secs = 2;
    let inst = Instance::start(fake.client(), opts);
    wait_allocated(&fake, "a").await;
    let b = wait_allocated(&fake, "b").await;
    let b_cidr = cidrs(&b);
    assert_eq!(b_cidr, ["10.0.0.2/31"]);

    // A finalizer holds the Node: deletionTimestamp set, the node keeps its CIDR.
    fake.update(&Gvr::nodes(), None, "b", |n| {
        n["metadata"]["finalizers"] = json!(["test/hold"])
    })
    .unwrap();
    fake.delete(&Gvr::nodes(), None, "b").unwrap();
    add_node(&fake, "c");
    let exhausted = |o: Option<&Value>| {
        o.and_then(allocated)
            .is_some_and(|(_, r)| r == "PoolExhausted")
    };
    fake.wait_for_object(&records(), None, "c", WAIT, exhausted)
        .await
        .expect("c waits");
    assert_eq!(
        cidrs(&fake.get(&records(), None, "b").unwrap()),
        b_cidr,
        "not released while deleting"
    );

    // The Node goes: GC removes its record, the CIDR is quarantined, then reused.
    fake.update(&Gvr::nodes(), None, "b", |n| {
        n["metadata"]["finalizers"] = json!([])
    })
    .unwrap();
    let released = Instant::now();
    assert!(fake.get(&records(), None, "b").is_none(), "owner GC");
    let quarantined =
        |o: Option<&Value>| o.is_some_and(|p| p["status"]["ipv4"]["quarantined"] == 1);
    fake.wait_for_object(&pools(), None, "tiny", WAIT, quarantined)
        .await
        .expect("pool shows the quarantined block");
    let c = wait_allocated(&fake, "c").await;
    assert_eq!(cidrs(&c), b_cidr, "reused after quarantine");
    assert!(
        released.elapsed() >= Duration::from_secs(1),
        "reused too early: {:?}",
        released.elapsed()
    );
    within("stop", inst.stop()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhaustion_shows_on_node_record_pool_and_events() {
    let fake = FakeKube::start().await.unwrap();
    add_pool(&fake, "tiny", "10.0.0.0/30", 31);
    for n in ["n1", "n2", "n3"] {
        add_node(&fake, n);
    }
    let inst = Instance::start(fake.client(), options("solo", 15));
    wait_allocated(&fake, "n1").await;
    wait_allocated(&fake, "n2").await;
    let exhausted = |o: Option<&Value>| {
        o.and_then(allocated)
            .is_some_and(|(s, r)| s == "False" && r == "PoolExhausted")
    };
    let n3 = fake
        .wait_for_object(&records(), None, "n3", WAIT, exhausted)
        .await
        .expect("n3 PoolExhausted")
        .unwrap();
    assert!(cidrs(&n3).is_empty());
    let pool_exhausted = |o: Option<&Value>| {
        o.and_then(|p| condition(p, "Exhausted"))
            .is_some_and(|c| c["status"] == "True")
    };
    fake.wait_for_object(&pools(), None, "tiny", WAIT, pool_exhausted)
        .await
        .expect("pool Exhausted=True");
    let has_event = |f: &FakeKube, kind: &str, name: &str, reason: &str| {
        f.list(&events(), Some(EVENT_NAMESPACE)).iter().any(|e| {
            e["regarding"]["kind"] == kind
                && e["regarding"]["name"] == name
                && e["reason"] == reason
                && e["type"] == "Warning"
                && e["reportingController"] == "podcidr-bgp-allocator"
                && e["reportingInstance"] == "solo"
        })
    };
    fake.wait_for(WAIT, |f| {
        has_event(f, "NodePodCIDR", "n3", "PodCIDRAllocationFailed")
            && has_event(f, "PodCIDRPool", "tiny", "PoolExhausted")
    })
    .await
    .expect("events for the node record and the pool");
    assert!(
        fake.list(&Gvr::new("v1", "events"), None).is_empty(),
        "no hand-built core/v1 Events"
    );
    // Transitions only: another pass adds no event.
    let n_events = fake.list(&events(), Some(EVENT_NAMESPACE)).len();
    let passes = inst.metrics.passes.get();
    fake.update(&Gvr::nodes(), None, "n1", |n| {
        n["metadata"]["labels"] = json!({"x": "y"})
    })
    .unwrap();
    assert!(inst.metrics.wait_for_passes(passes + 1, WAIT).await);
    assert_eq!(fake.list(&events(), Some(EVENT_NAMESPACE)).len(), n_events);
    let text = inst.metrics.encode();
    assert!(
        text.contains(r#"podcidr_allocator_pool_free{pool="tiny",family="ipv4"} 0"#),
        "{text}"
    );
    assert!(text.contains("podcidr_allocator_pending_nodes 1"), "{text}");
    within("stop", inst.stop()).await.unwrap();
}

/// Events go through kube-runtime's Recorder: a pool exhausted a second time (within the
/// Recorder's cache window) patches the first Event's series; no second object appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_exhaustion_patches_the_series_of_one_event_not_a_new_object() {
    let fake = FakeKube::start().await.unwrap();
    add_pool(&fake, "tiny", "10.0.0.0/31", 31);
    add_node(&fake, "n1");
    let inst = Instance::start(fake.client(), options("solo", 15));
    wait_allocated(&fake, "n1").await;
    let pool_events = |f: &FakeKube| -> Vec<Value> {
        f.list(&events(), Some(EVENT_NAMESPACE))
            .into_iter()
            .filter(|e| e["reason"] == "PoolExhausted" && e["regarding"]["name"] == "tiny")
            .collect()
    };
    fake.wait_for(WAIT, |f| pool_events(f).len() == 1)
        .await
        .expect("first PoolExhausted Event");
    let exhausted = |status: &'static str| {
        move |o: Option<&Value>| {
            o.and_then(|p| condition(p, "Exhausted"))
                .is_some_and(|c| c["status"] == status)
        }
    };
    // Room for one more block, then a second node takes it.
    fake.update(&pools(), None, "tiny", |p| {
        p["spec"]["ipv4"]["cidrs"] = json!(["10.0.0.0/31", "10.0.0.2/31"]);
    })
    .unwrap();
    fake.wait_for_object(&pools(), None, "tiny", WAIT, exhausted("False"))
        .await
        .expect("room again");
    add_node(&fake, "n2");
    wait_allocated(&fake, "n2").await;
    fake.wait_for(WAIT, |f| {
        pool_events(f)
            .first()
            .is_some_and(|e| e["series"]["count"] == 2)
    })
    .await
    .expect("the series counts the second exhaustion");
    let stored = pool_events(&fake);
    assert_eq!(stored.len(), 1, "{stored:#?}");
    assert_eq!(stored[0]["type"], "Warning");
    assert!(
        stored[0]["note"]
            .as_str()
            .is_some_and(|n| n.starts_with("no free /31")),
        "{}",
        stored[0]["note"]
    );
    within("stop", inst.stop()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_only_the_leader_writes_and_the_other_takes_over() {
    let fake = FakeKube::start().await.unwrap();
    add_pool(&fake, "main", "10.1.0.0/16", 24);
    let a = Instance::start(fake.client(), options("replica-a", 3));
    wait_holder(&fake, "replica-a").await;
    let b = Instance::start(fake.client(), options("replica-b", 3));
    for i in 0..20 {
        add_node(&fake, &format!("n{i:02}"));
    }
    for i in 0..20 {
        wait_allocated(&fake, &format!("n{i:02}")).await;
    }
    // The pool status is written at the end of the pass that wrote the records.
    let pool_done = |o: Option<&Value>| o.is_some_and(|p| p["status"]["ipv4"]["allocated"] == 20);
    fake.wait_for_object(&pools(), None, "main", WAIT, pool_done)
        .await
        .expect("pool status");
    assert_eq!(b.metrics.total_writes(), 0, "the follower wrote");
    assert!(a.metrics.total_writes() >= 40, "{}", a.metrics.encode());
    for r in fake.list(&records(), None) {
        assert_eq!(r["metadata"]["annotations"][ALLOCATED_BY], "replica-a");
    }
    assert!(b.metrics.encode().contains("podcidr_allocator_leader 0"));

    // Someone else holds the lease now (and never renews it, so the follower takes it one
    // lease duration later): the leader must stop, not re-acquire.
    fake.update(&Gvr::leases(), Some(NS), DEFAULT_LEASE_NAME, |l| {
        l["spec"]["holderIdentity"] = json!("thief");
        l["spec"]["renewTime"] = json!("2000-01-01T00:00:00.000000Z");
    })
    .unwrap();
    let Instance {
        task,
        metrics: a_metrics,
        stop: _keep,
        ..
    } = a;
    let ended = within("the old leader stops", task).await.unwrap();
    assert!(matches!(ended, Err(RunError::LeaseLost(_))), "{ended:?}");
    let a_writes = a_metrics.total_writes();
    assert!(a_metrics.encode().contains("podcidr_allocator_leader 0"));
    wait_holder(&fake, "replica-b").await;
    for i in 20..25 {
        add_node(&fake, &format!("n{i:02}"));
    }
    for i in 20..25 {
        let r = wait_allocated(&fake, &format!("n{i:02}")).await;
        assert_eq!(r["metadata"]["annotations"][ALLOCATED_BY], "replica-b");
    }
    assert_eq!(all_cidrs_unique(&fake).len(), 25);
    let old = fake
        .list(&records(), None)
        .iter()
        .filter(|r| r["metadata"]["annotations"][ALLOCATED_BY] == "replica-a")
        .count();
    assert_eq!(old, 20, "the new leader rewrote nothing of the old one's");
    assert_eq!(
        a_metrics.total_writes(),
        a_writes,
        "the old leader wrote after losing"
    );
    within("b stops", b.stop()).await.unwrap();
    let lease = fake
        .get(&Gvr::leases(), Some(NS), DEFAULT_LEASE_NAME)
        .unwrap();
    assert!(
        lease["spec"]["holderIdentity"].is_null(),
        "released on shutdown: {lease}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_write_outcome_keeps_the_same_cidr() {
    let fake = FakeKube::start().await.unwrap();
    add_pool(&fake, "main", "10.0.0.0/24", 28);
    let empty_record = |fake: &FakeKube, name: &str, uid: &str| {
        fake.insert(
            &records(),
            json!({
                "apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
                "metadata": {"name": name, "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]},
                "spec": {"podCIDRs": []},
            }),
        )
        .unwrap();
    };
    // Applied, but the client sees 504: the next pass finds the CIDR in place.
    let ua = add_node(&fake, "a");
    empty_record(&fake, "a", &ua);
    add_node(&fake, "b");
    fake.inject(
        Fault::apply_then_timeout()
            .verb(Verb::Patch)
            .resource("nodepodcidrs")
            .name("a"),
    );
    let inst = Instance::start(fake.client_without_retry(), options("solo", 15));
    assert_eq!(cidrs(&wait_allocated(&fake, "a").await), ["10.0.0.0/28"]);
    assert_eq!(cidrs(&wait_allocated(&fake, "b").await), ["10.0.0.16/28"]);
    assert_eq!(fake.pending_faults(), 0);
    assert_eq!(
        fake.requests(Verb::Patch, "nodepodcidrs"),
        1,
        "no second spec write needed: {:?} {}",
        fake.request_counts(),
        inst.metrics.encode()
    );

    let metrics = inst.metrics.clone();
    within("stop", inst.stop()).await.unwrap();
    let text = metrics.encode();
    assert_eq!(
        metrics.total_writes(),
        5,
        "patch (timeout) + create + two status writes + pool status: {text}"
    );

    // Not applied, 504: the retry writes the same CIDR; a node planned meanwhile gets another.
    let uc = add_node(&fake, "c");
    empty_record(&fake, "c", &uc);
    add_node(&fake, "d");
    fake.inject(
        Fault::timeout()
            .verb(Verb::Patch)
            .resource("nodepodcidrs")
            .name("c"),
    );
    let inst = Instance::start(fake.client_without_retry(), options("solo-2", 15));
    assert_eq!(cidrs(&wait_allocated(&fake, "c").await), ["10.0.0.32/28"]);
    assert_eq!(cidrs(&wait_allocated(&fake, "d").await), ["10.0.0.48/28"]);
    assert_eq!(
        fake.requests(Verb::Patch, "nodepodcidrs"),
        3,
        "one timed out, one retry"
    );
    let metrics = inst.metrics.clone();
    within("stop", inst.stop()).await.unwrap();
    let text = metrics.encode();
    assert!(
        text.contains(r#"podcidr_allocator_writes_total{kind="patch_spec",result="timeout"} 1"#),
        "{text}"
    );
    all_cidrs_unique(&fake);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flag_pool_and_crd_pools_together() {
    let fake = FakeKube::start().await.unwrap();
    // Shadowed by the flags: ignored, its status never written.
    add_pool(&fake, "default", "10.70.0.0/16", 24);
    fake.insert(
        &pools(),
        json!({
            "apiVersion": "podcidr.io/v1alpha1", "kind": "PodCIDRPool",
            "metadata": {"name": "special"},
            "spec": {
                "ipv4": {"cidrs": ["10.60.0.0/16"], "maskSize": 24},
                "nodeSelector": {"matchLabels": {"pool": "special"}},
            },
        }),
    )
    .unwrap();
    add_node(&fake, "plain");
    fake.insert(
        &Gvr::nodes(),
        json!({"metadata": {"name": "picky", "labels": {"pool": "special"}}}),
    )
    .unwrap();
    let mut opts = options("solo", 15);
    opts.flag_pool = flag_pool("10.50.0.0/16", 24);
    let inst = Instance::start(fake.client(), opts);
    assert_eq!(
        cidrs(&wait_allocated(&fake, "plain").await),
        ["10.50.0.0/24"]
    );
    assert_eq!(
        cidrs(&wait_allocated(&fake, "picky").await),
        ["10.60.0.0/24"]
    );
    let special = |o: Option<&Value>| o.is_some_and(|p| p["status"]["ipv4"]["allocated"] == 1);
    fake.wait_for_object(&pools(), None, "special", WAIT, special)
        .await
        .expect("special pool status");
    let metrics = inst.metrics.clone();
    within("stop", inst.stop()).await.unwrap();
    assert!(fake.get(&pools(), None, "default").unwrap()["status"].is_null());
    let text = metrics.encode();
    assert!(
        text.contains(r#"podcidr_allocator_pool_allocated{pool="default",family="ipv4"} 1"#),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_lease_stops_the_leader() {
    let fake = FakeKube::start().await.unwrap();
    add_pool(&fake, "main", "10.0.0.0/24", 28);
    add_node(&fake, "a");
    let inst = Instance::start(fake.client(), options("solo", 3));
    wait_allocated(&fake, "a").await;
    fake.delete(&Gvr::leases(), Some(NS), DEFAULT_LEASE_NAME)
        .unwrap();
    // Allocating b may race with noticing the loss; either way the task must end.
    add_node(&fake, "b");
    let Instance {
        task, stop: _keep, ..
    } = inst;
    let ended = within("the leader stops", task).await.unwrap();
    assert!(
        matches!(&ended, Err(RunError::LeaseLost(why)) if why.contains("deleted")),
        "{ended:?}"
    );
}

/// A wall clock running `ahead` of the real one.
#[derive(Debug)]
struct Ahead(Duration);

impl Clock for Ahead {
    fn now(&self) -> SystemTime {
        SystemTime::now() + self.0
    }
}

/// The bug: the standby judged expiry by the leader's `renewTime` against its own wall
/// clock; 3 s ahead, it took the Lease from a leader that was still renewing and writing,
/// and two leaders could hand one CIDR to two nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lease_clock_skew_standby_ahead_never_takes_over_a_live_leader() {
    let fake = FakeKube::start().await.unwrap();
    add_pool(&fake, "main", "10.2.0.0/16", 24);
    let a = Instance::start(fake.client(), options("replica-a", 3));
    wait_holder(&fake, "replica-a").await;
    let mut skewed = options("replica-b", 3);
    skewed.clock = Arc::new(Ahead(Duration::from_secs(3)));
    let b = Instance::start(fake.client(), skewed);
    for i in 0..20 {
        add_node(&fake, &format!("n{i:02}"));
    }
    for i in 0..20 {
        wait_allocated(&fake, &format!("n{i:02}")).await;
    }
    // Two lease durations of renewals by the leader (one per second).
    let renewed = fake.writes_to("leases");
    fake.wait_for(WAIT, |f| f.writes_to("leases") >= renewed + 6)
        .await
        .expect("the leader renews");
    let lease = fake
        .get(&Gvr::leases(), Some(NS), DEFAULT_LEASE_NAME)
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "replica-a", "{lease}");
    assert_eq!(lease["spec"]["leaseTransitions"], 0, "{lease}");
    assert_eq!(b.metrics.total_writes(), 0, "the standby wrote");
    assert!(b.metrics.encode().contains("podcidr_allocator_leader 0"));
    assert!(!a.task.is_finished(), "the leader lost its lease");

    // The leader crashes (no release): the standby takes over one lease duration later.
    a.task.abort();
    let crashed = Instant::now();
    wait_holder(&fake, "replica-b").await;
    // Its last renew was at most one renew period (1 s) before the crash.
    assert!(
        crashed.elapsed() >= Duration::from_millis(1500),
        "taken over {:?} after the crash",
        crashed.elapsed()
    );
    for i in 20..25 {
        add_node(&fake, &format!("n{i:02}"));
    }
    for i in 20..25 {
        let r = wait_allocated(&fake, &format!("n{i:02}")).await;
        assert_eq!(r["metadata"]["annotations"][ALLOCATED_BY], "replica-b");
    }
    assert_eq!(all_cidrs_unique(&fake).len(), 25, "a CIDR in two records");
    within("b stops", b.stop()).await.unwrap();
}

/// A 410 Gone on the record watch means the cache missed events: nothing is planned from it
/// until the relist is in. Here a record moves, while the record LIST fails, to the block
/// the allocator hands out next; a new node planned from the stale cache got it too (found
/// against the real kube-apiserver after an etcd compaction: speaker/tests/apiserver/real_api_faults.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_allocated_from_a_record_cache_that_got_410_until_it_relisted() {
    let fake = FakeKube::start().await.unwrap();
    add_pool(&fake, "main", "10.0.0.0/24", 28);
    add_node(&fake, "a");
    add_node(&fake, "b");
    let inst = Instance::start(fake.client(), options("solo", 15));
    assert_eq!(cidrs(&wait_allocated(&fake, "a").await), ["10.0.0.0/28"]);
    assert_eq!(cidrs(&wait_allocated(&fake, "b").await), ["10.0.0.16/28"]);
    within("three watches", fake.wait_for_open_watches(3, WAIT))
        .await
        .unwrap();

    let lists = fake.requests(Verb::List, "nodepodcidrs");
    fake.inject(
        Fault::fail(500)
            .verb(Verb::List)
            .resource("nodepodcidrs")
            .times(1000),
    );
    fake.expire_watches();
    within("watches ended", fake.wait_for_open_watches(0, WAIT))
        .await
        .unwrap();
    fake.update(&records(), None, "b", |r| {
        r["spec"]["podCIDRs"] = json!(["10.0.0.32/28"]);
    })
    .unwrap();
    add_node(&fake, "c");
    // Nodes and pools relisted (c included) and watch again; the records cannot relist.
    within("relists", fake.wait_for_open_watches(2, WAIT))
        .await
        .unwrap();
    fake.wait_for(WAIT, |f| {
        f.requests(Verb::List, "nodepodcidrs") >= lists + 2
    })
    .await
    .unwrap_or_else(|_| panic!("the record relist never failed twice"));
    fake.clear_faults();

    let c = cidrs(&wait_allocated(&fake, "c").await);
    assert_ne!(c, ["10.0.0.32/28"], "b's block handed to c too");
    assert_eq!(
        cidrs(&fake.get(&records(), None, "b").unwrap()),
        ["10.0.0.32/28"]
    );
    all_cidrs_unique(&fake);
    within("stop", inst.stop()).await.unwrap();
}
