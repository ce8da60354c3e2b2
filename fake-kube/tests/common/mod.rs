//! Helpers shared by the fake-kube integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::ObjectMeta;
use serde_json::{Value, json};

/// Upper bound for every wait in these tests.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// `(code, reason)` of a kube API error, or a panic naming the unexpected error.
pub fn api_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A Node with the given labels.
pub fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

/// The same node as raw JSON, for `FakeKube::insert`.
pub fn node_json(name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
}

/// The next stream item, or a panic after [`TIMEOUT`].
pub async fn next<S: Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(TIMEOUT, stream.next())
        .await
        .expect("timed out waiting for the next stream item")
        .expect("stream ended")
}

/// Polls `stream` while waiting for `until`, returning what the stream yielded meanwhile.
/// Needed because a watcher only opens its watch while it is being polled.
pub async fn drive_until<S, F>(stream: &mut S, until: F) -> Vec<S::Item>
where
    S: Stream + Unpin,
    F: Future,
{
    let mut seen = Vec::new();
    let mut until = std::pin::pin!(until);
    let run = async {
        loop {
            tokio::select! {
                _ = &mut until => return,
                item = stream.next() => match item {
                    Some(item) => seen.push(item),
                    None => return,
                },
            }
        }
    };
    tokio::time::timeout(TIMEOUT, run)
        .await
        .expect("timed out driving the stream");
    seen
}
