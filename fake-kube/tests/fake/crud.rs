//! Object semantics through the real kube client: CRUD, patches, apply, status, GC, finalizers.

use crate::common;

use common::{TIMEOUT, api_error, node};
use fake_kube::{EventType, FakeKube, Gvr};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, Preconditions,
};
use serde_json::{Value, json};

fn pod_cidr_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("podcidr.io", "v1alpha1", "NodePodCidr"),
        "nodepodcidrs",
    )
}

fn pool_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("podcidr.io", "v1alpha1", "PodCidrPool"),
        "podcidrpools",
    )
}

fn dynamic(ar: &ApiResource, value: Value) -> DynamicObject {
    let mut value = value;
    value["apiVersion"] = json!(ar.api_version);
    value["kind"] = json!(ar.kind);
    serde_json::from_value(value).expect("valid DynamicObject")
}

#[tokio::test]
async fn node_create_get_list_replace_delete_with_conflicts() {
    let fake = FakeKube::start().await.unwrap();
    let nodes: Api<Node> = Api::all(fake.client());

    let created = nodes
        .create(&PostParams::default(), &node("node-a", &[("zone", "a")]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, Some(1));
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let dup = nodes
        .create(&PostParams::default(), &node("node-a", &[]))
        .await;
    assert_eq!(api_error(dup), (409, "AlreadyExists".to_owned()));

    let fetched = nodes.get("node-a").await.unwrap();
    assert_eq!(fetched.metadata.uid, created.metadata.uid);
    let list = nodes.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.metadata.resource_version, Some(rv1.to_string()));

    let mut changed = fetched.clone();
    changed.metadata.labels = Some([("zone".to_owned(), "b".to_owned())].into());
    let replaced = nodes
        .replace("node-a", &PostParams::default(), &changed)
        .await
        .unwrap();
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1, "resourceVersion must increase");
    assert_eq!(replaced.metadata.uid, created.metadata.uid);

    // `fetched` still carries rv1: a stale write is a 409 Conflict.
    let stale = nodes
        .replace("node-a", &PostParams::default(), &fetched)
        .await;
    assert_eq!(api_error(stale), (409, "Conflict".to_owned()));

    let deleted = nodes
        .delete("node-a", &DeleteParams::default())
        .await
        .unwrap();
    assert!(deleted.is_left(), "delete answers with the object");
    assert_eq!(
        api_error(nodes.get("node-a").await),
        (404, "NotFound".to_owned())
    );
    assert_eq!(
        api_error(
            nodes
                .replace("node-a", &PostParams::default(), &changed)
                .await
        )
        .0,
        404
    );
}

#[tokio::test]
async fn list_pages_with_limit_and_continue() {
    let fake = FakeKube::start().await.unwrap();
    for i in 0..5 {
        fake.insert(&Gvr::nodes(), common::node_json(&format!("node-{i}"), &[]))
            .unwrap();
    }
    let nodes: Api<Node> = Api::all(fake.client());
    let first = nodes.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().expect("continue token");
    let second = nodes
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    let third = nodes
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(second.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert!(
        third
            .metadata
            .continue_
            .as_deref()
            .is_none_or(str::is_empty)
    );
    let names: Vec<_> = [first, second, third]
        .into_iter()
        .flat_map(|l| l.items)
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert_eq!(names, ["node-0", "node-1", "node-2", "node-3", "node-4"]);
}

#[tokio::test]
async fn merge_patch_changes_fields_and_honours_resource_version_precondition() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(
        &Gvr::nodes(),
        common::node_json("node-a", &[("a", "1"), ("b", "2")]),
    )
    .unwrap();
    let nodes: Api<Node> = Api::all(fake.client());

    let patch = json!({"metadata": {"labels": {"a": "9", "b": null}}});
    let patched = nodes
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(
        patched.metadata.labels,
        Some([("a".to_owned(), "9".to_owned())].into())
    );

    let stale = json!({"metadata": {"resourceVersion": "1", "labels": {"c": "3"}}});
    let err = nodes
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&stale))
        .await;
    assert_eq!(api_error(err), (409, "Conflict".to_owned()));

    let current = json!({"metadata": {"resourceVersion": patched.metadata.resource_version, "labels": {"c": "3"}}});
    nodes
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&current))
        .await
        .unwrap();
    let strategic = json!({"metadata": {"labels": {"d": "4"}}});
    let out = nodes
        .patch(
            "node-a",
            &PatchParams::default(),
            &Patch::Strategic(&strategic),
        )
        .await
        .unwrap();
    assert_eq!(out.metadata.labels.unwrap().len(), 3);
    let not_an_object = json!("oops");
    let err = nodes
        .patch(
            "node-a",
            &PatchParams::default(),
            &Patch::Merge(&not_an_object),
        )
        .await;
    assert_eq!(api_error(err).0, 400);
    nodes.get("node-a").await.unwrap();
    assert_eq!(
        api_error(
            nodes
                .patch("missing", &PatchParams::default(), &Patch::Merge(&patch))
                .await
        )
        .0,
        404
    );
}

#[tokio::test]
async fn json_patch_applies_and_failed_test_op_is_422_without_change() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), common::node_json("node-a", &[("a", "1")]))
        .unwrap();
    let client = fake.client();
    let url = format!("{}/api/v1/nodes/node-a", fake.url());
    let send = |ops: Value| {
        let request = http::Request::patch(&url)
            .header("Content-Type", "application/json-patch+json")
            .body(serde_json::to_vec(&ops).unwrap())
            .unwrap();
        let client = client.clone();
        async move { client.request::<Node>(request).await }
    };

    let ok = send(json!([
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
    ]))
    .await
    .unwrap();
    assert_eq!(ok.metadata.labels.as_ref().unwrap()["b"], "2");
    let rv = ok.metadata.resource_version.clone();

    let failed = send(json!([
        {"op": "add", "path": "/metadata/labels/c", "value": "3"},
        {"op": "test", "path": "/metadata/labels/a", "value": "other"},
    ]))
    .await;
    assert_eq!(api_error(failed), (422, "Invalid".to_owned()));
    let after = fake.get(&Gvr::nodes(), None, "node-a").unwrap();
    assert_eq!(
        after["metadata"]["labels"].get("c"),
        None,
        "a failed patch changes nothing"
    );
    assert_eq!(after["metadata"]["resourceVersion"].as_str(), rv.as_deref());
}

#[tokio::test]
async fn server_side_apply_creates_then_sets_what_its_manager_applies() {
    let fake = FakeKube::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(fake.client(), "kube-system");
    let params = PatchParams::apply("podcidr-allocator").force();

    let first = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "allocator", "labels": {"app": "podcidr"}},
        "spec": {"holderIdentity": "pod-1", "leaseDurationSeconds": 15},
    });
    let created = leases
        .patch("allocator", &params, &Patch::Apply(&first))
        .await
        .unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(created.metadata.generation, Some(1));

    let second = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "allocator"},
        "spec": {"holderIdentity": "pod-2"},
    });
    let merged = leases
        .patch("allocator", &params, &Patch::Apply(&second))
        .await
        .unwrap();
    let spec = merged.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("pod-2"));
    // What the same manager applied before and leaves out now is removed (tests/apply.rs).
    assert_eq!(spec.lease_duration_seconds, None);
    assert_eq!(merged.metadata.labels, None);
    assert_eq!(merged.metadata.generation, Some(2));
    assert_eq!(fake.list(&Gvr::leases(), Some("kube-system")).len(), 1);
}

#[tokio::test]
async fn status_subresource_is_isolated_from_main_resource_writes() {
    let fake = FakeKube::start().await.unwrap();
    let ar = pod_cidr_resource();
    let api: Api<DynamicObject> = Api::all_with(fake.client(), &ar);
    let obj = dynamic(
        &ar,
        json!({
            "metadata": {"name": "node-a"},
            "spec": {"podCIDRs": ["10.0.0.0/24"]},
            "status": {"phase": "Ignored"},
        }),
    );
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    assert!(
        created.data.get("status").is_none(),
        "create drops status like a CRD with /status"
    );

    let status_patch =
        json!({"status": {"phase": "Announced"}, "spec": {"podCIDRs": ["10.9.9.0/24"]}});
    let patched = api
        .patch_status(
            "node-a",
            &PatchParams::default(),
            &Patch::Merge(&status_patch),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["phase"], "Announced");
    assert_eq!(
        patched.data["spec"]["podCIDRs"][0], "10.0.0.0/24",
        "/status must not change spec"
    );
    assert_eq!(
        patched.metadata.generation,
        Some(1),
        "status writes do not bump generation"
    );

    let mut main = patched.clone();
    main.data["spec"]["podCIDRs"] = json!(["10.0.1.0/24"]);
    main.data["status"]["phase"] = json!("Hijacked");
    let replaced = api
        .replace("node-a", &PostParams::default(), &main)
        .await
        .unwrap();
    assert_eq!(replaced.data["spec"]["podCIDRs"][0], "10.0.1.0/24");
    assert_eq!(
        replaced.data["status"]["phase"], "Announced",
        "main writes keep status"
    );
    assert_eq!(replaced.metadata.generation, Some(2));

    let mut status_put = replaced.clone();
    status_put.data["status"]["phase"] = json!("Withdrawn");
    let put = api
        .replace_status("node-a", &PostParams::default(), &status_put)
        .await
        .unwrap();
    assert_eq!(put.data["status"]["phase"], "Withdrawn");
    let stale = api
        .replace_status("node-a", &PostParams::default(), &status_put)
        .await;
    assert_eq!(api_error(stale).0, 409);
    assert_eq!(
        api.get_status("node-a").await.unwrap().data["status"]["phase"],
        "Withdrawn"
    );
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_dependents() {
    let fake = FakeKube::start().await.unwrap();
    let client = fake.client();
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &pool_resource());
    let cidrs: Api<DynamicObject> = Api::all_with(client, &pod_cidr_resource());
    let pp = PostParams::default();
    let owner = pools
        .create(
            &pp,
            &dynamic(&pool_resource(), json!({"metadata": {"name": "pool-a"}})),
        )
        .await
        .unwrap();
    let other = pools
        .create(
            &pp,
            &dynamic(&pool_resource(), json!({"metadata": {"name": "pool-b"}})),
        )
        .await
        .unwrap();
    let owner_ref = |o: &DynamicObject| json!({"apiVersion": "podcidr.io/v1alpha1", "kind": "PodCidrPool", "name": o.metadata.name, "uid": o.metadata.uid});
    let dep = |name: &str, refs: Vec<Value>| {
        dynamic(
            &pod_cidr_resource(),
            json!({"metadata": {"name": name, "ownerReferences": refs}}),
        )
    };
    cidrs
        .create(&pp, &dep("only-a", vec![owner_ref(&owner)]))
        .await
        .unwrap();
    cidrs
        .create(
            &pp,
            &dep("a-and-b", vec![owner_ref(&owner), owner_ref(&other)]),
        )
        .await
        .unwrap();
    cidrs.create(&pp, &dep("unowned", vec![])).await.unwrap();

    pools
        .delete("pool-a", &DeleteParams::background())
        .await
        .unwrap();
    assert_eq!(api_error(cidrs.get("only-a").await).0, 404);
    let shared = cidrs.get("a-and-b").await.unwrap();
    let refs = shared.metadata.owner_references.unwrap();
    assert_eq!(
        refs.len(),
        1,
        "the dangling reference is removed, the live one kept"
    );
    assert_eq!(refs[0].name, "pool-b");
    cidrs.get("unowned").await.unwrap();

    pools
        .delete("pool-b", &DeleteParams::orphan())
        .await
        .unwrap();
    let orphan = cidrs.get("a-and-b").await.unwrap();
    assert!(
        orphan
            .metadata
            .owner_references
            .is_none_or(|r| r.is_empty()),
        "orphan keeps the dependent"
    );
}

#[tokio::test]
async fn finalizers_defer_deletion_until_removed() {
    let fake = FakeKube::start().await.unwrap();
    let nodes: Api<Node> = Api::all(fake.client());
    let mut with_finalizer = node("node-a", &[]);
    with_finalizer.metadata.finalizers = Some(vec!["podcidr.io/release".to_owned()]);
    nodes
        .create(&PostParams::default(), &with_finalizer)
        .await
        .unwrap();
    let mut events = fake.subscribe();

    let answer = nodes
        .delete("node-a", &DeleteParams::default())
        .await
        .unwrap();
    let pending = answer
        .left()
        .expect("object returned while finalizers remain");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(
        nodes
            .get("node-a")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    let add = json!({"metadata": {"finalizers": ["podcidr.io/release", "late/finalizer"]}});
    let refused = nodes
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&add))
        .await;
    assert_eq!(api_error(refused).0, 422, "no new finalizers once deleting");

    let remove = json!({"metadata": {"finalizers": null}});
    nodes
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&remove))
        .await
        .unwrap();
    assert_eq!(api_error(nodes.get("node-a").await).0, 404);

    let kinds: Vec<EventType> = {
        let mut kinds = Vec::new();
        for _ in 0..2 {
            let ev = tokio::time::timeout(TIMEOUT, events.next())
                .await
                .unwrap()
                .unwrap();
            kinds.push(ev.event_type);
        }
        kinds
    };
    assert_eq!(kinds, [EventType::Modified, EventType::Deleted]);
}

#[tokio::test]
async fn lease_update_race_gives_conflict_to_the_loser() {
    let fake = FakeKube::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(fake.client(), "kube-system");
    let mut lease = Lease::default();
    lease.metadata.name = Some("podcidr-allocator".to_owned());
    lease.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
        holder_identity: Some("a".to_owned()),
        ..Default::default()
    });
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();

    let mut by_b = created.clone();
    by_b.spec.as_mut().unwrap().holder_identity = Some("b".to_owned());
    leases
        .replace("podcidr-allocator", &PostParams::default(), &by_b)
        .await
        .unwrap();
    let mut by_c = created;
    by_c.spec.as_mut().unwrap().holder_identity = Some("c".to_owned());
    assert_eq!(
        api_error(
            leases
                .replace("podcidr-allocator", &PostParams::default(), &by_c)
                .await
        )
        .0,
        409
    );
    let stored = fake
        .get(&Gvr::leases(), Some("kube-system"), "podcidr-allocator")
        .unwrap();
    assert_eq!(stored["spec"]["holderIdentity"], "b");
    assert_eq!(stored["kind"], "Lease");
}

#[tokio::test]
async fn cilium_node_dynamic_object_and_core_events_round_trip() {
    let fake = FakeKube::start().await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cilium.io", "v2", "CiliumNode"),
        "ciliumnodes",
    );
    let api: Api<DynamicObject> = Api::all_with(fake.client(), &ar);
    let obj = dynamic(
        &ar,
        json!({"metadata": {"name": "node-a"}, "spec": {"ipam": {"podCIDRs": ["10.5.113.0/24"]}}}),
    );
    api.create(&PostParams::default(), &obj).await.unwrap();
    let got = api.get("node-a").await.unwrap();
    assert_eq!(got.data["spec"]["ipam"]["podCIDRs"][0], "10.5.113.0/24");
    assert_eq!(
        got.types.as_ref().map(|t| t.kind.as_str()),
        Some("CiliumNode")
    );
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert!(fake.get(&Gvr::cilium_nodes(), None, "node-a").is_some());

    let events: Api<Event> = Api::namespaced(fake.client(), "default");
    let mut event = Event::default();
    event.metadata.generate_name = Some("podcidr-".to_owned());
    event.reason = Some("Announced".to_owned());
    let created = events.create(&PostParams::default(), &event).await.unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("podcidr-") && name.len() == "podcidr-".len() + 5);
    assert_eq!(
        fake.list(&Gvr::new("v1", "events"), Some("default")).len(),
        1
    );
    assert!(
        Api::<Event>::namespaced(fake.client(), "other")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn wait_for_object_wakes_on_store_changes() {
    let fake = FakeKube::start().await.unwrap();
    let nodes: Api<Node> = Api::all(fake.client());
    let writer = tokio::spawn(async move {
        nodes
            .create(&PostParams::default(), &node("late", &[]))
            .await
    });
    let found = fake
        .wait_for_object(&Gvr::nodes(), None, "late", TIMEOUT, |o| o.is_some())
        .await
        .unwrap();
    assert_eq!(found.unwrap()["metadata"]["name"], "late");
    writer.await.unwrap().unwrap();
    let never = fake
        .wait_for(std::time::Duration::from_millis(50), |f| {
            f.list(&Gvr::nodes(), None).len() > 1
        })
        .await;
    assert!(never.is_err());
}

#[tokio::test]
async fn delete_honours_preconditions_and_delete_collection_uses_selectors() {
    let fake = FakeKube::start().await.unwrap();
    for (name, zone) in [("a-1", "a"), ("a-2", "a"), ("b-1", "b")] {
        fake.insert(&Gvr::nodes(), common::node_json(name, &[("zone", zone)]))
            .unwrap();
    }
    let nodes: Api<Node> = Api::all(fake.client());
    let stale = DeleteParams::default().preconditions(Preconditions {
        resource_version: Some("1".to_owned()),
        uid: None,
    });
    assert_eq!(
        api_error(nodes.delete("a-1", &stale).await),
        (409, "Conflict".to_owned())
    );
    let wrong_uid = DeleteParams::default().preconditions(Preconditions {
        resource_version: None,
        uid: Some("x".to_owned()),
    });
    assert_eq!(api_error(nodes.delete("a-1", &wrong_uid).await).0, 409);
    assert!(fake.get(&Gvr::nodes(), None, "a-1").is_some());

    let deleted = nodes
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("zone=a"),
        )
        .await
        .unwrap();
    let names: Vec<String> = deleted
        .left()
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert_eq!(names, ["a-1", "a-2"]);
    let left: Vec<Value> = fake.list(&Gvr::nodes(), None);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["metadata"]["name"], "b-1");
}

#[tokio::test]
async fn a_dependent_created_after_its_owner_is_gone_is_garbage_collected() {
    let fake = FakeKube::start().await.unwrap();
    let client = fake.client();
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &pool_resource());
    let cidrs: Api<DynamicObject> = Api::all_with(client, &pod_cidr_resource());
    let pp = PostParams::default();
    let owner = pools
        .create(
            &pp,
            &dynamic(&pool_resource(), json!({"metadata": {"name": "gone"}})),
        )
        .await
        .unwrap();
    pools
        .delete("gone", &DeleteParams::background())
        .await
        .unwrap();
    // A write that was in flight when the owner went (a slow API server) lands late.
    let late = json!({"metadata": {"name": "late", "ownerReferences": [
        {"apiVersion": "podcidr.io/v1alpha1", "kind": "PodCidrPool", "name": "gone", "uid": owner.metadata.uid}
    ]}});
    cidrs
        .create(&pp, &dynamic(&pod_cidr_resource(), late))
        .await
        .unwrap();
    assert_eq!(api_error(cidrs.get("late").await).0, 404);
}
