//! Fault injection, the outage switch and request counters.

use crate::common;

use common::{TIMEOUT, api_error, drive_until, next, node, node_json};
use fake_kube::{FakeKube, Fault, Gvr, Verb};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, watcher};
use serde_json::json;

fn lease(name: &str) -> Lease {
    let mut lease = Lease::default();
    lease.metadata.name = Some(name.to_owned());
    lease
}

#[tokio::test]
async fn fail_next_n_matching_requests_then_succeed() {
    let fake = FakeKube::start().await.unwrap();
    let nodes: Api<Node> = Api::all(fake.client());
    fake.inject(
        Fault::fail(500)
            .verb(Verb::Create)
            .resource("nodes")
            .times(2),
    );
    fake.inject(
        Fault::fail(403)
            .verb(Verb::Get)
            .resource("nodes")
            .name("secret"),
    );
    assert_eq!(fake.pending_faults(), 3);

    for _ in 0..2 {
        let err = nodes
            .create(&PostParams::default(), &node("node-a", &[]))
            .await;
        assert_eq!(api_error(err), (500, "InternalError".to_owned()));
    }
    assert!(
        fake.get(&Gvr::nodes(), None, "node-a").is_none(),
        "failed requests are not applied"
    );
    nodes
        .create(&PostParams::default(), &node("node-a", &[]))
        .await
        .unwrap();

    nodes.get("node-a").await.unwrap();
    assert_eq!(
        api_error(nodes.get("secret").await),
        (403, "Forbidden".to_owned())
    );
    assert_eq!(
        api_error(nodes.get("secret").await).0,
        404,
        "the fault was used up"
    );
    assert_eq!(fake.pending_faults(), 0);

    fake.inject(Fault::fail(429).verb(Verb::List).times(100));
    fake.clear_faults();
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn apply_then_timeout_leaves_the_outcome_unknown_to_the_client() {
    let fake = FakeKube::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(fake.client_without_retry(), "kube-system");

    fake.inject(
        Fault::apply_then_timeout()
            .verb(Verb::Create)
            .resource("leases"),
    );
    let err = leases
        .create(&PostParams::default(), &lease("applied"))
        .await;
    assert_eq!(api_error(err), (504, "Timeout".to_owned()));
    assert!(
        fake.get(&Gvr::leases(), Some("kube-system"), "applied")
            .is_some(),
        "the write happened"
    );

    fake.inject(Fault::timeout().verb(Verb::Create).resource("leases"));
    let err = leases
        .create(&PostParams::default(), &lease("dropped"))
        .await;
    assert_eq!(api_error(err), (504, "Timeout".to_owned()));
    assert!(
        fake.get(&Gvr::leases(), Some("kube-system"), "dropped")
            .is_none(),
        "the write did not happen"
    );

    fake.inject(
        Fault::apply_then_timeout()
            .verb(Verb::Patch)
            .resource("leases/status"),
    );
    let status = json!({"status": {"x": 1}});
    let err = leases
        .patch_status("applied", &PatchParams::default(), &Patch::Merge(&status))
        .await;
    assert_eq!(api_error(err).0, 504);
    assert_eq!(
        fake.get(&Gvr::leases(), Some("kube-system"), "applied")
            .unwrap()["status"]["x"],
        1
    );
}

#[tokio::test]
async fn shedding_answers_carry_retry_after_and_apply_nothing() {
    let fake = FakeKube::start().await.unwrap();
    fake.inject(
        Fault::too_many_requests(3)
            .verb(Verb::Create)
            .resource("leases")
            .times(2),
    );
    fake.inject(Fault::fail_retry_after(503, 7).verb(Verb::Get));
    let client = fake.client_without_retry();
    let create = || {
        let body = serde_json::to_vec(&json!({"metadata": {"name": "l"}})).unwrap();
        http::Request::post("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases")
            .header("content-type", "application/json")
            .body(kube::client::Body::from(body))
            .unwrap()
    };
    for _ in 0..2 {
        let resp = client.send(create()).await.unwrap();
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()["retry-after"], "3");
        let body = resp.into_body().collect_bytes().await.unwrap();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["details"]["retryAfterSeconds"], 3);
    }
    assert!(
        fake.get(&Gvr::leases(), Some("kube-system"), "l").is_none(),
        "a shed request is not applied"
    );
    assert_eq!(client.send(create()).await.unwrap().status(), 201);
    let get = http::Request::get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l")
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(get).await.unwrap();
    assert_eq!(
        (resp.status().as_u16(), &resp.headers()["retry-after"]),
        (503, &http::HeaderValue::from_static("7"))
    );
    // Typed clients see the Status as an API error.
    fake.inject(Fault::too_many_requests(1).verb(Verb::Get));
    let leases: Api<Lease> = Api::namespaced(client, "kube-system");
    assert_eq!(
        api_error(leases.get("l").await),
        (429, "TooManyRequests".to_owned())
    );
    assert_eq!(fake.requests(Verb::Create, "leases"), 3);
}

#[tokio::test]
async fn default_client_retries_a_timed_out_create_and_then_sees_already_exists() {
    let fake = FakeKube::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(fake.client(), "kube-system");
    fake.inject(
        Fault::apply_then_timeout()
            .verb(Verb::Create)
            .resource("leases"),
    );
    let err = leases
        .create(&PostParams::default(), &lease("applied"))
        .await;
    assert_eq!(api_error(err), (409, "AlreadyExists".to_owned()));
    assert_eq!(
        fake.requests(Verb::Create, "leases"),
        2,
        "kube's retry layer re-sent the create"
    );
}

#[tokio::test]
async fn outage_answers_503_and_drops_watches_until_cleared() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), node_json("node-a", &[]))
        .unwrap();
    let mut stream = watcher(Api::<Node>::all(fake.client()), watcher::Config::default()).boxed();
    assert!(matches!(next(&mut stream).await, Ok(watcher::Event::Init)));
    drive_until(&mut stream, fake.wait_for_open_watches(1, TIMEOUT)).await;

    fake.set_outage(true);
    fake.wait_for_open_watches(0, TIMEOUT).await.unwrap();
    let nodes: Api<Node> = Api::all(fake.client_without_retry());
    assert_eq!(
        api_error(nodes.get("node-a").await),
        (503, "ServiceUnavailable".to_owned())
    );
    assert_eq!(api_error(nodes.list(&ListParams::default()).await).0, 503);
    assert!(
        fake.requests(Verb::Get, "nodes") >= 1,
        "outage requests are counted"
    );

    fake.set_outage(false);
    assert_eq!(
        nodes.get("node-a").await.unwrap().metadata.name.as_deref(),
        Some("node-a")
    );
}

#[tokio::test]
async fn counters_track_verbs_per_resource_and_writes() {
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), node_json("node-a", &[]))
        .unwrap();
    assert_eq!(fake.writes(), 0, "direct inserts are not requests");

    // A read-only watcher (like a restarted speaker) performs zero writes.
    let mut stream = watcher(Api::<Node>::all(fake.client()), watcher::Config::default()).boxed();
    drive_until(&mut stream, fake.wait_for_open_watches(1, TIMEOUT)).await;
    assert_eq!(fake.writes(), 0);
    assert_eq!(fake.requests(Verb::List, "nodes"), 1);
    assert_eq!(fake.requests(Verb::Watch, "nodes"), 1);

    let nodes: Api<Node> = Api::all(fake.client());
    nodes.get("node-a").await.unwrap();
    let patch = json!({"metadata": {"labels": {"a": "b"}}});
    nodes
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let status = json!({"status": {"phase": "Running"}});
    nodes
        .patch_status("node-a", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    nodes
        .create(&PostParams::default(), &node("node-b", &[]))
        .await
        .unwrap();
    nodes.delete("node-b", &Default::default()).await.unwrap();

    assert_eq!(fake.requests(Verb::Get, "nodes"), 1);
    assert_eq!(fake.requests(Verb::Patch, "nodes"), 1);
    assert_eq!(fake.requests(Verb::Patch, "nodes/status"), 1);
    assert_eq!(fake.writes(), 4);
    assert_eq!(fake.writes_to("nodes"), 3);
    assert_eq!(fake.writes_to("nodes/status"), 1);
    assert_eq!(fake.request_counts().len(), 7);
    fake.reset_counters();
    assert_eq!(fake.writes(), 0);
}

#[tokio::test]
async fn delay_holds_a_request_then_applies_it() {
    let fake = FakeKube::start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(fake.client_without_retry(), "kube-system");
    let delay = std::time::Duration::from_millis(300);
    fake.inject(Fault::delay(delay).verb(Verb::Create).resource("leases"));
    let started = std::time::Instant::now();
    leases
        .create(&PostParams::default(), &lease("slow"))
        .await
        .unwrap();
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
    assert!(
        fake.get(&Gvr::leases(), Some("kube-system"), "slow")
            .is_some()
    );
    // Used up: the next request is answered at once.
    assert_eq!(fake.pending_faults(), 0);
}
