//! What the Kubernetes-backed sources ask the apiserver, checked against a `tower_test` mock:
//! per-node watches carry `fieldSelector=metadata.name=<node>` on LIST and WATCH, so a speaker
//! in a 5,000-node cluster receives O(1) objects; cluster-wide watches carry no selector.

use std::collections::BTreeMap;
use std::time::Duration;

use http::{Request, Response};
use ipam_watch::source::{CiliumNodeSource, IpamCrdSource, NodeSpecSource, PodCidrSource};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tokio::time::timeout;
use tower_test::mock::{self, Handle, SendResponse};

type MockHandle = Handle<Request<Body>, Response<Body>>;

const WAIT: Duration = Duration::from_secs(10);

fn mock_client() -> (Client, MockHandle) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), handle)
}

async fn next_request(handle: &mut MockHandle) -> (Request<Body>, SendResponse<Response<Body>>) {
    timeout(WAIT, handle.next_request())
        .await
        .expect("a request within the deadline")
        .expect("the client is still alive")
}

fn respond(send: SendResponse<Response<Body>>, body: &Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    send.send_response(Response::builder().body(Body::from(bytes)).unwrap());
}

fn list(kind: &str, api_version: &str, items: Vec<Value>) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": { "resourceVersion": "10" },
        "items": items,
    })
}

fn node(name: &str, cidrs: &[&str]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": name, "resourceVersion": "9" },
        "spec": { "podCIDRs": cidrs },
    })
}

fn query(request: &Request<Body>) -> BTreeMap<String, String> {
    let query = request.uri().query().unwrap_or_default();
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Queries of the LISTs seen, by path, plus the WATCHes left hanging (kept open).
type Seen = (
    BTreeMap<String, BTreeMap<String, String>>,
    Vec<SendResponse<Response<Body>>>,
);

/// Answer the first LIST on each expected path; WATCH requests that arrive meanwhile are held
/// open without an answer.
async fn answer_lists(handle: &mut MockHandle, lists: &[(&str, Value)]) -> Seen {
    let mut seen = BTreeMap::new();
    let mut held = Vec::new();
    while seen.len() < lists.len() {
        let (request, send) = next_request(handle).await;
        let path = request.uri().path().to_owned();
        let q = query(&request);
        assert_eq!(request.method(), http::Method::GET);
        if q.contains_key("watch") {
            assert!(
                seen.contains_key(&path),
                "WATCH before LIST: {}",
                request.uri()
            );
            held.push(send);
            continue;
        }
        let (_, body) = lists
            .iter()
            .find(|(p, _)| *p == path)
            .unwrap_or_else(|| panic!("unexpected request {}", request.uri()));
        respond(send, body);
        seen.insert(path, q);
    }
    (seen, held)
}

#[tokio::test]
async fn per_node_list_and_watch_select_only_the_own_node() {
    let (client, mut handle) = mock_client();
    let (mut rx, driver) = NodeSpecSource::new(client).watch_node("node-a");
    let driver = tokio::spawn(driver);

    let (request, send) = next_request(&mut handle).await;
    assert_eq!(request.uri().path(), "/api/v1/nodes");
    assert_eq!(
        query(&request).get("fieldSelector").map(String::as_str),
        Some("metadata.name%3Dnode-a"),
        "LIST {}",
        request.uri()
    );
    respond(
        send,
        &list("NodeList", "v1", vec![node("node-a", &["10.5.112.0/24"])]),
    );

    let (request, send) = next_request(&mut handle).await;
    let q = query(&request);
    assert_eq!(request.uri().path(), "/api/v1/nodes");
    assert_eq!(
        q.get("watch").map(String::as_str),
        Some("true"),
        "{}",
        request.uri()
    );
    assert_eq!(q.get("resourceVersion").map(String::as_str), Some("10"));
    assert_eq!(
        q.get("fieldSelector").map(String::as_str),
        Some("metadata.name%3Dnode-a"),
        "WATCH {}",
        request.uri()
    );
    let event = json!({ "type": "MODIFIED", "object": node("node-a", &["10.5.113.0/24"]) });
    let mut line = serde_json::to_vec(&event).unwrap();
    line.push(b'\n');
    send.send_response(Response::builder().body(Body::from(line)).unwrap());

    let set = timeout(
        WAIT,
        rx.wait_for(|s| s.ready && s.cidrs == ["10.5.113.0/24".parse().unwrap()]),
    )
    .await
    .expect("the watched update is published")
    .unwrap()
    .clone();
    assert_eq!(set.last_error, None);
    driver.abort();
}

#[tokio::test]
async fn cluster_wide_list_has_no_field_selector() {
    let (client, mut handle) = mock_client();
    let (mut rx, driver) = NodeSpecSource::new(client).watch_cluster();
    let driver = tokio::spawn(driver);
    let nodes = list(
        "NodeList",
        "v1",
        vec![
            node("node-a", &["10.5.112.0/24"]),
            node("node-b", &["10.5.113.0/24"]),
        ],
    );
    let (seen, _held) = answer_lists(&mut handle, &[("/api/v1/nodes", nodes)]).await;
    assert!(!seen["/api/v1/nodes"].contains_key("fieldSelector"));
    let set = timeout(WAIT, rx.wait_for(|s| s.ready))
        .await
        .unwrap()
        .unwrap()
        .clone();
    assert_eq!(set.nodes.len(), 2);
    driver.abort();
}

#[tokio::test]
async fn ipam_crd_per_node_watches_its_object_and_its_node() {
    let (client, mut handle) = mock_client();
    let (mut rx, driver) = IpamCrdSource::new(client).watch_node("node-a");
    let driver = tokio::spawn(driver);
    let npc = json!({
        "apiVersion": "podcidr.io/v1alpha1", "kind": "NodePodCIDR",
        "metadata": { "name": "node-a", "resourceVersion": "9" },
        "spec": { "podCIDRs": ["10.5.113.0/24"] },
    });
    let path = "/apis/podcidr.io/v1alpha1/nodepodcidrs";
    let lists = [
        (
            path,
            list("NodePodCIDRList", "podcidr.io/v1alpha1", vec![npc]),
        ),
        (
            "/api/v1/nodes",
            list("NodeList", "v1", vec![node("node-a", &["10.5.112.0/24"])]),
        ),
    ];
    let (seen, _held) = answer_lists(&mut handle, &lists).await;
    for (path, q) in &seen {
        assert_eq!(
            q.get("fieldSelector").map(String::as_str),
            Some("metadata.name%3Dnode-a"),
            "{path}"
        );
    }
    let set = timeout(WAIT, rx.wait_for(|s| s.mismatch.is_some()))
        .await
        .expect("the Node view disagrees")
        .unwrap()
        .clone();
    assert_eq!(set.cidrs, ["10.5.113.0/24".parse().unwrap()]);
    driver.abort();
}

#[tokio::test]
async fn cilium_node_reads_cilium_io_v2_untyped() {
    let (client, mut handle) = mock_client();
    let (mut rx, driver) = CiliumNodeSource::new(client).watch_node("node-a");
    let driver = tokio::spawn(driver);
    let cilium = json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": { "name": "node-a", "resourceVersion": "9" },
        "spec": { "ipam": { "podCIDRs": ["10.5.113.0/24", "fd00:5:1::/64"] } },
    });
    let path = "/apis/cilium.io/v2/ciliumnodes";
    let lists = [
        (path, list("CiliumNodeList", "cilium.io/v2", vec![cilium])),
        ("/api/v1/nodes", list("NodeList", "v1", vec![])),
    ];
    let (seen, _held) = answer_lists(&mut handle, &lists).await;
    assert_eq!(
        seen[path].get("fieldSelector").map(String::as_str),
        Some("metadata.name%3Dnode-a")
    );
    let set = timeout(WAIT, rx.wait_for(|s| s.ready))
        .await
        .unwrap()
        .unwrap()
        .clone();
    assert_eq!(
        set.cidrs,
        [
            "10.5.113.0/24".parse().unwrap(),
            "fd00:5:1::/64".parse().unwrap()
        ]
    );
    driver.abort();

    let (client, mut handle) = mock_client();
    let (_rx, driver) = CiliumNodeSource::new(client).watch_cluster();
    let driver = tokio::spawn(driver);
    let lists = [
        (path, list("CiliumNodeList", "cilium.io/v2", vec![])),
        ("/api/v1/nodes", list("NodeList", "v1", vec![])),
    ];
    let (seen, _held) = answer_lists(&mut handle, &lists).await;
    assert!(seen.values().all(|q| !q.contains_key("fieldSelector")));
    driver.abort();
}
