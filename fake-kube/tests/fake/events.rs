//! `events.k8s.io/v1` Events as `kube::runtime::events::Recorder` writes them: create, then
//! a merge PATCH of the series for a repeat; list, get and watch; the API server's rules.

use crate::common;

use common::{api_error, next, node};
use fake_kube::{FakeKube, Gvr, Verb};
use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::events::{Event as Publish, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};

use serde_json::json;

fn session_up() -> Publish {
    Publish {
        type_: EventType::Normal,
        reason: "BGPSessionEstablished".into(),
        note: Some("first".into()),
        action: "Peer tor1".into(),
        secondary: None,
    }
}

async fn recorder_and_node(
    fake: &FakeKube,
) -> (Recorder, k8s_openapi::api::core::v1::ObjectReference) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(fake.client());
    let node = nodes
        .create(&PostParams::default(), &node("node-a", &[]))
        .await
        .unwrap();
    let reporter = Reporter {
        controller: "podcidr-bgp-speaker".into(),
        instance: Some("node-a".into()),
    };
    (Recorder::new(fake.client(), reporter), node.object_ref(&()))
}

#[tokio::test]
async fn recorder_creates_once_then_patches_the_series_of_a_cluster_scoped_objects_event() {
    let fake = FakeKube::start().await.unwrap();
    let (recorder, node_ref) = recorder_and_node(&fake).await;
    recorder.publish(&session_up(), &node_ref).await.unwrap();
    let mut again = session_up();
    again.note = Some("second (not stored: the note is immutable)".into());
    recorder.publish(&again, &node_ref).await.unwrap();

    // A Node is cluster-scoped: its Events live in "default".
    let stored = fake.list(&Gvr::events(), Some("default"));
    assert_eq!(stored.len(), 1, "{stored:#?}");
    let e = &stored[0];
    assert_eq!(e["reason"], "BGPSessionEstablished");
    assert_eq!(e["note"], "first");
    assert_eq!(e["series"]["count"], 2);
    assert_eq!(e["regarding"]["kind"], "Node");
    assert_eq!(e["regarding"]["uid"], node_ref.uid.clone().unwrap());
    assert_eq!(e["reportingController"], "podcidr-bgp-speaker");
    assert_eq!(e["reportingInstance"], "node-a");
    let by_group = fake.request_counts_by_group();
    let n = |verb| {
        by_group
            .get(&(verb, "events.k8s.io".to_owned(), "events".to_owned()))
            .copied()
            .unwrap_or(0)
    };
    assert_eq!((n(Verb::Create), n(Verb::Patch)), (1, 1));
    assert!(
        fake.list(&Gvr::new("v1", "events"), None).is_empty(),
        "no core/v1 Events"
    );
}

#[tokio::test]
async fn events_v1_are_listed_got_and_watched() {
    let fake = FakeKube::start().await.unwrap();
    let (recorder, node_ref) = recorder_and_node(&fake).await;
    let api: Api<Event> = Api::namespaced(fake.client(), "default");
    let mut watch = api
        .watch(&WatchParams::default().timeout(10), "0")
        .await
        .unwrap()
        .boxed();
    recorder.publish(&session_up(), &node_ref).await.unwrap();
    let added = match next(&mut watch).await.unwrap() {
        WatchEvent::Added(e) => e,
        other => panic!("expected ADDED, got {other:?}"),
    };
    assert_eq!(added.reason.as_deref(), Some("BGPSessionEstablished"));
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    let got = api.get(&added.name_any()).await.unwrap();
    assert_eq!(got.note.as_deref(), Some("first"));
    let all: Api<Event> = Api::all(fake.client());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

#[tokio::test]
async fn events_v1_reject_what_the_api_server_rejects() {
    let fake = FakeKube::start().await.unwrap();
    let (recorder, node_ref) = recorder_and_node(&fake).await;
    recorder.publish(&session_up(), &node_ref).await.unwrap();
    let api: Api<Event> = Api::namespaced(fake.client(), "default");
    let name = fake.list(&Gvr::events(), Some("default"))[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    // Only the series may change.
    let patch = json!({"note": "rewritten"});
    let res = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
    assert_eq!(api_error(res).0, 422);
    let patch = json!({"series": {"count": 1, "lastObservedTime": "2025-01-01T00:00:00.000000Z"}});
    let res = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await;
    assert_eq!(api_error(res).0, 422, "series.count must be at least 2");
    // An Event about a cluster-scoped object outside "default"/"kube-system".
    let elsewhere: Api<Event> = Api::namespaced(fake.client(), "podcidr-system");
    let mut event = api.get(&name).await.unwrap();
    event.metadata = kube::api::ObjectMeta {
        name: Some("node-a.elsewhere".into()),
        ..Default::default()
    };
    let res = elsewhere.create(&PostParams::default(), &event).await;
    assert_eq!(api_error(res).0, 422);
}
