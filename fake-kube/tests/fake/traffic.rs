//! Traffic counters and the request log: what a client asked for (selectors, paging) and what
//! it received (bytes, objects), and the verbs a real API server would authorize.

use crate::common;

use common::{TIMEOUT, next, node_json};
use fake_kube::{FakeKube, Gvr, Verb};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::json;

#[tokio::test]
async fn paged_lists_count_pages_objects_and_bytes() {
    let fake = FakeKube::start().await.unwrap();
    for i in 0..25 {
        fake.insert(&Gvr::nodes(), node_json(&format!("node-{i:02}"), &[]))
            .unwrap();
    }
    let nodes: Api<Node> = Api::all(fake.client());
    let mut params = ListParams::default().limit(10);
    let mut seen = 0;
    loop {
        let page = nodes.list(&params).await.unwrap();
        seen += page.items.len();
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => params = params.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(seen, 25);
    let t = fake.traffic()[&(Verb::List, "nodes".to_owned())];
    assert_eq!((t.requests, t.objects_out), (3, 25));
    assert!(t.bytes_out > 25 * 50, "{t:?}");
    let log = fake.request_log();
    assert_eq!(log.len(), 3);
    assert!(log.iter().all(|r| r.limit == Some(10)));
    assert_eq!(
        log.iter().map(|r| r.continued).collect::<Vec<_>>(),
        [false, true, true]
    );

    // A field selector is logged as sent and only the matching object is counted.
    let one = nodes
        .list(&ListParams::default().fields("metadata.name=node-07"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    let last = fake.request_log().pop().unwrap();
    assert_eq!(
        last.field_selector.as_deref(),
        Some("metadata.name=node-07")
    );
    assert_eq!(
        fake.traffic()[&(Verb::List, "nodes".to_owned())].objects_out,
        26
    );

    fake.reset_counters();
    assert!(fake.request_log().is_empty());
    assert_eq!(fake.traffic_total(), fake_kube::Traffic::default());
}

#[tokio::test]
async fn watch_events_are_counted_as_they_stream_bookmarks_are_not_objects() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), node_json("node-a", &[]))
        .unwrap();
    fake.insert(&Gvr::nodes(), node_json("node-b", &[]))
        .unwrap();
    let nodes: Api<Node> = Api::all(fake.client());
    let rv = fake.resource_version().to_string();
    // Bookmarks are on by default.
    let params = WatchParams::default().fields("metadata.name=node-a");
    let mut stream = nodes.watch(&params, &rv).await.unwrap().boxed();
    fake.update(&Gvr::nodes(), None, "node-b", |n| {
        n["metadata"]["labels"] = json!({"x": "1"});
    })
    .unwrap();
    fake.update(&Gvr::nodes(), None, "node-a", |n| {
        n["metadata"]["labels"] = json!({"x": "1"});
    })
    .unwrap();
    assert!(matches!(
        next(&mut stream).await.unwrap(),
        WatchEvent::Modified(_)
    ));
    fake.send_bookmarks();
    assert!(matches!(
        next(&mut stream).await.unwrap(),
        WatchEvent::Bookmark(_)
    ));
    let t = fake.traffic()[&(Verb::Watch, "nodes".to_owned())];
    assert_eq!(t.requests, 1);
    assert_eq!(
        t.objects_out, 1,
        "node-b's change is not this watch's, the bookmark is no object"
    );
    assert!(t.bytes_out > 0);
    drop(stream);
    fake.wait_for_open_watches(0, TIMEOUT).await.unwrap();
}

#[tokio::test]
async fn an_apply_that_creates_is_authorized_as_create_too() {
    let fake = FakeKube::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(fake.client(), "podcidr-system");
    let params = PatchParams::apply("test").force();
    let body = |holder: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "node-a"}, "spec": {"holderIdentity": holder}})
    };
    leases
        .patch("node-a", &params, &Patch::Apply(body("a")))
        .await
        .unwrap();
    let verbs = fake.authorized_verbs();
    assert!(
        verbs.contains(&(Verb::Create, "leases".to_owned())),
        "{verbs:?}"
    );
    assert!(verbs.contains(&(Verb::Patch, "leases".to_owned())));
    // Requests themselves are still one PATCH.
    assert_eq!(fake.requests(Verb::Patch, "leases"), 1);
    assert_eq!(fake.requests(Verb::Create, "leases"), 0);
    let t = fake.traffic()[&(Verb::Patch, "leases".to_owned())];
    assert_eq!(t.objects_out, 1);
    assert!(t.bytes_in > 0 && t.bytes_out > 0, "{t:?}");

    fake.reset_counters();
    leases
        .patch("node-a", &params, &Patch::Apply(body("b")))
        .await
        .unwrap();
    assert_eq!(
        fake.authorized_verbs().into_iter().collect::<Vec<_>>(),
        [(Verb::Patch, "leases".to_owned())],
        "an apply to an existing object is a patch only"
    );
}
