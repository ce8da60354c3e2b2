//! End to end against the in-process fake API server (`fake-kube`), with the real `kube`
//! client and watcher: a per-node source sees only its own objects, and a dropped or expired
//! watch, or an API outage, never withdraws its set.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_kube::{FakeKube, Gvr};
use futures::StreamExt;
use ipam_watch::source::{DesiredSet, IpamCrdSource, PodCidrSource, node_scope};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use podcidr_api::NodePodCIDR;
use serde_json::json;
use tokio::sync::watch;
use tokio::time::timeout;

use crate::common;
use common::{nets, node, npc, until};

const WAIT: Duration = Duration::from_secs(20);

async fn cluster() -> FakeKube {
    let fake = FakeKube::start()
        .await
        .expect("fake API server on 127.0.0.1");
    for (name, allocated, node_spec) in [
        ("node-a", "10.5.113.0/24", "10.5.112.0/24"),
        ("node-b", "10.5.114.0/24", "10.5.114.0/24"),
        ("node-c", "10.5.115.0/24", "10.5.115.0/24"),
    ] {
        fake.insert_resource(&node(name, &[node_spec])).unwrap();
        let mut object = npc(name, &[allocated]);
        object.spec.pool = Some("default".into());
        fake.insert_resource(&object).unwrap();
    }
    fake
}

fn set_allocation(fake: &FakeKube, name: &str, cidr: &str) {
    fake.update(&Gvr::of::<NodePodCIDR>(), None, name, |o| {
        o["spec"]["podCIDRs"] = json!([cidr]);
    })
    .unwrap();
}

/// Record every published value, to check no withdrawal was ever visible.
fn record(mut rx: watch::Receiver<Arc<DesiredSet>>) -> Arc<Mutex<Vec<Arc<DesiredSet>>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = seen.clone();
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let value = rx.borrow_and_update().clone();
            out.lock().unwrap().push(value);
        }
    });
    seen
}

#[tokio::test]
async fn per_node_watch_lists_only_its_own_object() {
    let fake = cluster().await;
    let api = Api::<NodePodCIDR>::all(fake.client());
    let mut events = watcher::watcher(api, node_scope(Some("node-a"))).boxed();
    let mut names = Vec::new();
    loop {
        match timeout(WAIT, events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Event::InitApply(o) => names.push(o.metadata.name.unwrap()),
            Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(names, ["node-a"], "the server filtered by metadata.name");
}

#[tokio::test]
async fn per_node_source_sees_only_its_own_object_and_survives_dropped_watches() {
    let fake = cluster().await;
    let (mut rx, driver) = IpamCrdSource::new(fake.client()).watch_node("node-a");
    let driver = tokio::spawn(driver);
    let history = record(rx.clone());

    let set = until(&mut rx, WAIT, "initial list", |s| {
        s.ready && s.mismatch.is_some()
    })
    .await;
    assert_eq!(
        set.cidrs,
        nets(&["10.5.113.0/24"]),
        "the allocator's CIDR, not the Node's"
    );
    let mismatch = set.mismatch.clone().unwrap();
    assert_eq!(mismatch.node_spec, nets(&["10.5.112.0/24"]));
    fake.wait_for_open_watches(2, WAIT).await.unwrap();

    // Another node's change is not ours.
    set_allocation(&fake, "node-b", "10.5.199.0/24");
    // A clean end of every watch (server-side timeout): the watcher resumes.
    fake.drop_watches();
    fake.wait_for_open_watches(2, WAIT).await.unwrap();
    set_allocation(&fake, "node-a", "10.5.120.0/24");
    let set = until(&mut rx, WAIT, "update after resume", |s| {
        s.cidrs == nets(&["10.5.120.0/24"])
    })
    .await;
    assert!(set.ready);

    // 410 Gone: the watcher relists; the set is swapped, never emptied. The update may race
    // the expiry, so wait for the state after both: new CIDRs and the relist done.
    fake.expire_watches();
    set_allocation(&fake, "node-a", "10.5.112.0/24");
    until(&mut rx, WAIT, "update after relist", |s| {
        s.cidrs == nets(&["10.5.112.0/24"]) && s.mismatch.is_none() && s.last_error.is_none()
    })
    .await;

    driver.abort();
    let history = history.lock().unwrap();
    assert!(
        history.iter().all(|s| !s.ready || !s.cidrs.is_empty()),
        "a withdrawal was published: {history:#?}"
    );
    let seen: Vec<_> = history.iter().map(|s| s.cidrs.clone()).collect();
    assert!(
        !seen.iter().any(|c| c == &nets(&["10.5.199.0/24"])),
        "node-b's allocation leaked in: {seen:?}"
    );
}

#[tokio::test]
async fn api_outage_keeps_the_last_set_and_reports_it() {
    let fake = cluster().await;
    let (mut rx, driver) = IpamCrdSource::new(fake.client_without_retry()).watch_node("node-a");
    let driver = tokio::spawn(driver);
    until(&mut rx, WAIT, "initial list", |s| s.ready).await;

    fake.set_outage(true);
    let set = until(&mut rx, WAIT, "error", |s| s.last_error.is_some()).await;
    assert_eq!(
        set.cidrs,
        nets(&["10.5.113.0/24"]),
        "kept through the outage"
    );

    // A resumed watch says nothing until something changes; the next delivered event (or a
    // relist) is what clears the error.
    fake.set_outage(false);
    set_allocation(&fake, "node-a", "10.5.116.0/24");
    fake.update(&Gvr::nodes(), None, "node-a", |o| {
        o["metadata"]["labels"] = json!({"touched": "yes"});
    })
    .unwrap();
    let set = until(&mut rx, WAIT, "recovery", |s| s.last_error.is_none()).await;
    assert_eq!(set.cidrs, nets(&["10.5.116.0/24"]));
    driver.abort();
}
