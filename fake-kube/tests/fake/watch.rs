//! List/watch protocol against `kube::runtime::watcher` and raw watch streams.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{TIMEOUT, api_error, drive_until, next, node_json};
use fake_kube::{FakeKube, Gvr, Verb};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, VersionMatch, WatchEvent,
    WatchParams,
};
use kube::runtime::watcher::{self, Event, watcher};
use kube::runtime::{WatchStreamExt, reflector};
use serde_json::json;

fn name_of(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// Drains a watcher until `InitDone`, returning the names applied during the initial list.
async fn initial_names<S>(stream: &mut S) -> BTreeSet<String>
where
    S: futures::Stream<Item = Result<Event<Node>, watcher::Error>> + Unpin,
{
    let mut names = BTreeSet::new();
    // Bounded by the per-item timeout in `next` and the finite initial list.
    loop {
        match next(stream).await.expect("watcher error during init") {
            Event::Init => {}
            Event::InitApply(node) => {
                names.insert(name_of(&node));
            }
            Event::InitDone => return names,
            other => panic!("unexpected event during init: {other:?}"),
        }
    }
}

#[tokio::test]
async fn watcher_with_name_field_selector_sees_only_its_object() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), node_json("node-a", &[]))
        .unwrap();
    fake.insert(&Gvr::nodes(), node_json("node-b", &[]))
        .unwrap();
    let api: Api<Node> = Api::all(fake.client());
    let mut stream = watcher(
        api,
        watcher::Config::default().fields("metadata.name=node-a"),
    )
    .boxed();
    assert_eq!(
        initial_names(&mut stream).await,
        BTreeSet::from(["node-a".to_owned()])
    );

    fake.update(&Gvr::nodes(), None, "node-b", |n| {
        n["metadata"]["labels"]["x"] = json!("1")
    })
    .unwrap();
    fake.update(&Gvr::nodes(), None, "node-a", |n| {
        n["metadata"]["labels"]["x"] = json!("2")
    })
    .unwrap();
    fake.delete(&Gvr::nodes(), None, "node-b").unwrap();
    fake.delete(&Gvr::nodes(), None, "node-a").unwrap();
    match next(&mut stream).await.unwrap() {
        Event::Apply(node) => assert_eq!(
            (name_of(&node).as_str(), node.labels()["x"].as_str()),
            ("node-a", "2")
        ),
        other => panic!("expected node-a apply, got {other:?}"),
    }
    match next(&mut stream).await.unwrap() {
        Event::Delete(node) => assert_eq!(name_of(&node), "node-a"),
        other => panic!("expected node-a delete, got {other:?}"),
    }
    let query = ListParams::default().fields("metadata.name!=node-a");
    assert!(
        Api::<Node>::all(fake.client())
            .list(&query)
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn label_selectors_filter_lists_and_watches_including_leaving_the_selection() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), node_json("edge-1", &[("role", "edge")]))
        .unwrap();
    fake.insert(&Gvr::nodes(), node_json("core-1", &[("role", "core")]))
        .unwrap();
    fake.insert(
        &Gvr::nodes(),
        node_json("edge-2", &[("role", "edge"), ("drain", "true")]),
    )
    .unwrap();
    fake.insert(&Gvr::nodes(), node_json("plain", &[])).unwrap();
    let api: Api<Node> = Api::all(fake.client());
    let names = |sel: &'static str| {
        let api = api.clone();
        async move {
            let list = api.list(&ListParams::default().labels(sel)).await.unwrap();
            list.items.iter().map(name_of).collect::<Vec<_>>()
        }
    };
    assert_eq!(names("role=edge").await, ["edge-1", "edge-2"]);
    assert_eq!(names("role==edge,drain!=true").await, ["edge-1"]);
    assert_eq!(
        names("role in (edge,core),!drain").await,
        ["core-1", "edge-1"]
    );
    assert_eq!(names("role notin (edge)").await, ["core-1", "plain"]);
    assert_eq!(names("role").await, ["core-1", "edge-1", "edge-2"]);
    assert_eq!(
        api_error(
            api.list(&ListParams::default().labels("role in edge"))
                .await
        )
        .0,
        400
    );

    let mut stream = watcher(api, watcher::Config::default().labels("role=edge,!drain")).boxed();
    assert_eq!(
        initial_names(&mut stream).await,
        BTreeSet::from(["edge-1".to_owned()])
    );
    // Leaving the selection is a DELETED event, entering it an ADDED one.
    fake.update(&Gvr::nodes(), None, "edge-1", |n| {
        n["metadata"]["labels"]["drain"] = json!("true")
    })
    .unwrap();
    fake.update(&Gvr::nodes(), None, "plain", |n| {
        n["metadata"]["labels"] = json!({"role": "edge"})
    })
    .unwrap();
    assert!(
        matches!(next(&mut stream).await.unwrap(), Event::Delete(n) if name_of(&n) == "edge-1")
    );
    assert!(matches!(next(&mut stream).await.unwrap(), Event::Apply(n) if name_of(&n) == "plain"));
}

#[tokio::test]
async fn dropped_watch_is_resumed_from_its_resource_version_without_relist() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), node_json("node-a", &[]))
        .unwrap();
    let mut stream = watcher(Api::<Node>::all(fake.client()), watcher::Config::default()).boxed();
    initial_names(&mut stream).await;
    let early = drive_until(&mut stream, fake.wait_for_open_watches(1, TIMEOUT)).await;
    assert!(early.is_empty());

    fake.drop_watches();
    fake.wait_for_open_watches(0, TIMEOUT)
        .await
        .unwrap_or_else(|_| panic!("watch not dropped"));
    // Written while no watch is open: the resumed watch must replay it from history.
    fake.insert(&Gvr::nodes(), node_json("node-b", &[]))
        .unwrap();
    match next(&mut stream).await.unwrap() {
        Event::Apply(node) => assert_eq!(name_of(&node), "node-b"),
        other => panic!("expected apply of node-b, got {other:?}"),
    }
    assert_eq!(fake.requests(Verb::List, "nodes"), 1, "no relist");
    assert_eq!(fake.requests(Verb::Watch, "nodes"), 2);
}

#[tokio::test]
async fn gone_watch_makes_the_reflector_relist_and_end_correct() {
    let fake = FakeKube::start().await.unwrap();
    for name in ["node-a", "node-b"] {
        fake.insert(&Gvr::nodes(), node_json(name, &[])).unwrap();
    }
    let (reader, writer) = reflector::store::<Node>();
    let watch = watcher(Api::<Node>::all(fake.client()), watcher::Config::default());
    let mut stream = reflector(writer, watch).boxed();
    initial_names(&mut stream).await;
    drive_until(&mut stream, fake.wait_for_open_watches(1, TIMEOUT)).await;

    fake.drop_watches();
    fake.wait_for_open_watches(0, TIMEOUT)
        .await
        .unwrap_or_else(|_| panic!("watch not dropped"));
    fake.delete(&Gvr::nodes(), None, "node-b").unwrap();
    fake.insert(&Gvr::nodes(), node_json("node-c", &[]))
        .unwrap();
    fake.compact();

    match next(&mut stream).await {
        Err(watcher::Error::WatchError(status)) => assert_eq!(status.code, 410),
        other => panic!("expected a 410 watch error, got {other:?}"),
    }
    assert_eq!(
        initial_names(&mut stream).await,
        BTreeSet::from(["node-a".to_owned(), "node-c".to_owned()])
    );
    let cached: BTreeSet<String> = reader.state().iter().map(|n| name_of(n)).collect();
    assert_eq!(
        cached,
        BTreeSet::from(["node-a".to_owned(), "node-c".to_owned()])
    );
    assert_eq!(fake.requests(Verb::List, "nodes"), 2, "410 forces a relist");
}

#[tokio::test]
async fn expired_watch_gets_410_error_event_and_too_old_exact_list_gets_http_410() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), node_json("node-a", &[]))
        .unwrap();
    let api: Api<Node> = Api::all(fake.client());
    let rv = fake.resource_version().to_string();
    let mut raw = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    fake.wait_for_open_watches(1, TIMEOUT).await.unwrap();
    fake.expire_watches();
    match next(&mut raw).await.unwrap() {
        WatchEvent::Error(status) => {
            // kube-apiserver's watch answers NewResourceExpired (reason Expired), from its
            // watch cache and from etcd alike (speaker/tests/apiserver/real_api_faults.rs sees both).
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected ERROR 410, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(TIMEOUT, raw.next())
            .await
            .unwrap()
            .is_none(),
        "stream ends after ERROR"
    );

    fake.insert(&Gvr::nodes(), node_json("node-b", &[]))
        .unwrap();
    fake.compact();
    let mut stale = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    assert!(matches!(next(&mut stale).await.unwrap(),
        WatchEvent::Error(s) if (s.code, s.reason.as_str()) == (410, "Expired")));

    let exact = ListParams::default().at(&rv).matching(VersionMatch::Exact);
    assert_eq!(api_error(api.list(&exact).await), (410, "Gone".to_owned()));
    let not_older = ListParams::default()
        .at(&rv)
        .matching(VersionMatch::NotOlderThan);
    assert_eq!(api.list(&not_older).await.unwrap().items.len(), 2);
}

#[tokio::test]
async fn bookmark_on_demand_carries_current_resource_version_and_respects_opt_out() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), node_json("node-a", &[]))
        .unwrap();
    let api: Api<Node> = Api::all(fake.client());
    let mut raw = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert!(
        matches!(next(&mut raw).await.unwrap(), WatchEvent::Added(n) if name_of(&n) == "node-a")
    );
    // Another type's write moves the global resourceVersion; the bookmark reflects it.
    fake.insert(
        &Gvr::leases(),
        json!({"metadata": {"name": "l", "namespace": "ns"}}),
    )
    .unwrap();
    fake.send_bookmarks();
    match next(&mut raw).await.unwrap() {
        WatchEvent::Bookmark(bm) => {
            assert_eq!(
                bm.metadata.resource_version,
                fake.resource_version().to_string()
            );
            assert_eq!(bm.types.kind, "Node");
            assert!(bm.metadata.annotations.is_empty());
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }

    let no_bookmarks = WatchParams::default().disable_bookmarks();
    let mut quiet = api
        .watch(&no_bookmarks, &fake.resource_version().to_string())
        .await
        .unwrap()
        .boxed();
    fake.wait_for_open_watches(2, TIMEOUT).await.unwrap();
    fake.send_bookmarks();
    fake.insert(&Gvr::nodes(), node_json("node-b", &[]))
        .unwrap();
    assert!(
        matches!(next(&mut quiet).await.unwrap(), WatchEvent::Added(n) if name_of(&n) == "node-b")
    );
}

#[tokio::test]
async fn bookmark_interval_sends_bookmarks_unprompted() {
    let fake = FakeKube::builder()
        .bookmark_interval(Duration::from_millis(50))
        .start()
        .await
        .unwrap();
    let api: Api<Node> = Api::all(fake.client());
    let mut raw = api
        .watch(
            &WatchParams::default(),
            &fake.resource_version().to_string(),
        )
        .await
        .unwrap()
        .boxed();
    for _ in 0..2 {
        assert!(matches!(
            next(&mut raw).await.unwrap(),
            WatchEvent::Bookmark(_)
        ));
    }
}

#[tokio::test]
async fn streaming_list_sends_initial_events_then_initial_end_bookmark() {
    let fake = FakeKube::start().await.unwrap();
    for name in ["node-a", "node-b"] {
        fake.insert(&Gvr::nodes(), node_json(name, &[])).unwrap();
    }
    let api: Api<Node> = Api::all(fake.client());
    let mut stream = watcher(api, watcher::Config::default().streaming_lists()).boxed();
    assert_eq!(initial_names(&mut stream).await.len(), 2);
    fake.insert(&Gvr::nodes(), node_json("node-c", &[]))
        .unwrap();
    assert!(matches!(next(&mut stream).await.unwrap(), Event::Apply(n) if name_of(&n) == "node-c"));
    assert_eq!(fake.requests(Verb::List, "nodes"), 0);
    assert_eq!(fake.requests(Verb::Watch, "nodes"), 1);
}

#[tokio::test]
async fn watch_timeout_seconds_ends_the_response() {
    let fake = FakeKube::start().await.unwrap();
    let api: Api<Node> = Api::all(fake.client());
    let params = WatchParams::default().timeout(1);
    let mut raw = api
        .watch(&params, &fake.resource_version().to_string())
        .await
        .unwrap()
        .boxed();
    assert!(
        tokio::time::timeout(TIMEOUT, raw.next())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(fake.open_watches(), 0);
}

#[tokio::test]
async fn dynamic_cilium_node_watcher_sees_only_the_selected_object() {
    let fake = FakeKube::start().await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cilium.io", "v2", "CiliumNode"),
        "ciliumnodes",
    );
    let api: Api<DynamicObject> = Api::all_with(fake.client(), &ar);
    let mut stream = watcher(
        api,
        watcher::Config::default().fields("metadata.name=node-a"),
    )
    .applied_objects()
    .boxed();
    let obj = json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {"name": "node-a"}, "spec": {"ipam": {"podCIDRs": ["10.5.112.0/24"]}},
    });
    fake.insert(&Gvr::cilium_nodes(), obj).unwrap();
    fake.insert(
        &Gvr::cilium_nodes(),
        json!({"metadata": {"name": "node-b"}}),
    )
    .unwrap();
    let first = next(&mut stream).await.unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("node-a"));
    assert_eq!(first.data["spec"]["ipam"]["podCIDRs"][0], "10.5.112.0/24");
}

#[tokio::test]
async fn namespaced_watch_only_sees_its_namespace() {
    let fake = FakeKube::start().await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"),
        "leases",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(fake.client(), "kube-system", &ar);
    let mut raw = api
        .watch(
            &WatchParams::default(),
            &fake.resource_version().to_string(),
        )
        .await
        .unwrap()
        .boxed();
    fake.insert(
        &Gvr::leases(),
        json!({"metadata": {"name": "other", "namespace": "default"}}),
    )
    .unwrap();
    fake.insert(
        &Gvr::leases(),
        json!({"metadata": {"name": "mine", "namespace": "kube-system"}}),
    )
    .unwrap();
    match next(&mut raw).await.unwrap() {
        WatchEvent::Added(obj) => assert_eq!(obj.metadata.name.as_deref(), Some("mine")),
        other => panic!("expected ADDED mine, got {other:?}"),
    }
    let all: Api<DynamicObject> = Api::all_with(fake.client(), &ar);
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
}

#[tokio::test]
async fn metadata_only_lists_gets_and_watches_carry_no_spec_or_status() {
    use kube::core::PartialObjectMeta;
    let fake = FakeKube::start().await.unwrap();
    let mut big = node_json("node-a", &[("zone", "a")]);
    big["status"] = json!({"images": [{"names": ["x"], "sizeBytes": 1}]});
    fake.insert(&Gvr::nodes(), big).unwrap();
    let meta: Api<PartialObjectMeta<Node>> = Api::all(fake.client());
    let list = meta.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].labels()["zone"], "a");
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    let one = meta.get("node-a").await.unwrap();
    assert_eq!(one.name_any(), "node-a");

    let mut stream = watcher(meta, watcher::Config::default()).boxed();
    let mut initial = Vec::new();
    loop {
        match next(&mut stream).await.unwrap() {
            Event::InitApply(o) => initial.push(o.name_any()),
            Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, ["node-a"]);
    drive_until(&mut stream, fake.wait_for_open_watches(1, TIMEOUT)).await;
    fake.insert(&Gvr::nodes(), node_json("node-b", &[]))
        .unwrap();
    let Event::Apply(o) = next(&mut stream).await.unwrap() else {
        panic!("expected an Apply")
    };
    assert_eq!(o.name_any(), "node-b");
    // The raw watch line is a PartialObjectMetadata without the Node's status.
    let req = http::Request::get("/api/v1/nodes?watch=true&resourceVersion=1")
        .header(
            "accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = fake.client().send(req).await.unwrap();
    let mut body = resp.into_body();
    let first = tokio::time::timeout(TIMEOUT, http_body_util::BodyExt::frame(&mut body))
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .into_data()
        .unwrap();
    let line: serde_json::Value =
        serde_json::from_slice(first.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(line["object"]["kind"], "PartialObjectMetadata");
    assert!(line["object"].get("status").is_none(), "{line}");
}
