//! Kubernetes Events about this node ([`Effect::KubeEvent`](super::core::Effect)), published
//! off the loop through `kube::runtime::events::Recorder`: events.k8s.io/v1 Events regarding
//! the Node (cluster-scoped, so they live in namespace `default`), reported by
//! `podcidr-bgp-speaker` with the node name as instance.
//!
//! Bounded three ways, so a flapping peer costs the API server little:
//! - the Recorder de-duplicates: a repeat (same reason, type, action, Node) within its cache
//!   window (6 min) PATCHes the first Event's `series` instead of creating an object;
//! - [`Throttle`]: each such Event is written at most [`BURST`] times at once, then once per
//!   [`REFILL`]; repeats beyond that are counted (`podcidr_kube_events_total{result=
//!   "throttled"}`) but not written, so a series count is a lower bound;
//! - the loop hands events over through a queue of [`QUEUE`]; when it is full (the API is
//!   slow) the event is dropped and counted (`result="dropped"`). Nothing waits on the API.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ipam_watch::allocator::throttle::{ApiLimits, TokenBucket};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event as Publish, EventType, Recorder, Reporter};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::daemon::core::NodeEvent;
use crate::daemon::metrics::Metrics;
use crate::text::escape;

/// Events waiting for the publisher; beyond this they are dropped.
pub const QUEUE: usize = 64;
/// Writes of one Event allowed at once.
pub const BURST: u32 = 5;
/// After the burst, one more write of that Event per this period.
pub const REFILL: Duration = Duration::from_secs(60);
/// Bound on one publish (create or patch).
const TIMEOUT: Duration = Duration::from_secs(10);
/// Distinct Events the throttle remembers before it forgets those with a full bucket.
const MAX_KEYS: usize = 1024;
/// API limits (bytes) on events.k8s.io/v1 fields.
const NOTE_LIMIT: usize = 1024;
const ACTION_LIMIT: usize = 128;
const INSTANCE_LIMIT: usize = 128;

/// `reportingController` of the speaker's Events (the field manager of its writes).
pub const REPORTER: &str = "podcidr-bgp-speaker";

/// The loop's end of the queue to the publisher task.
#[derive(Debug)]
pub struct EventSink {
    tx: mpsc::Sender<NodeEvent>,
    metrics: Arc<Metrics>,
}

impl EventSink {
    /// Starts the publisher task; it ends when the sink is dropped and the queue is drained.
    pub fn spawn(client: Client, node: &str, metrics: Arc<Metrics>) -> (EventSink, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let reporter = Reporter {
            controller: REPORTER.into(),
            instance: Some(cut(node, INSTANCE_LIMIT)),
        };
        let recorder = Recorder::new(client, reporter);
        let task = tokio::spawn(publish_all(rx, recorder, Arc::clone(&metrics)));
        (EventSink { tx, metrics }, task)
    }

    /// Queues an event without waiting; a full queue drops it (counted).
    pub fn send(&self, event: NodeEvent) {
        if self.tx.try_send(event).is_err() {
            self.metrics.kube_event("dropped", 1);
        }
    }
}

async fn publish_all(mut rx: mpsc::Receiver<NodeEvent>, recorder: Recorder, metrics: Arc<Metrics>) {
    let mut throttle = Throttle::default();
    while let Some(event) = rx.recv().await {
        if !throttle.admit(key(&event), Instant::now()) {
            metrics.kube_event("throttled", 1);
            continue;
        }
        let (publish, regarding) = to_api(&event);
        let reason = event.reason.as_str();
        match tokio::time::timeout(TIMEOUT, recorder.publish(&publish, &regarding)).await {
            Ok(Ok(())) => metrics.kube_event("published", 1),
            Ok(Err(e)) => {
                tracing::warn!(reason, error = %e, "Kubernetes Event not published");
                metrics.kube_event("failed", 1);
            }
            Err(_) => {
                tracing::warn!(reason, "publishing a Kubernetes Event timed out");
                metrics.kube_event("failed", 1);
            }
        }
    }
}

/// What tells Events apart, as the Recorder does (its reporter is fixed).
fn key(e: &NodeEvent) -> String {
    format!(
        "{}\0{}\0{}\0{}\0{}",
        e.reason.as_str(),
        e.warning,
        e.action,
        e.node,
        e.node_uid.as_deref().unwrap_or("")
    )
}

/// The Recorder's event and the Node it regards; free text escaped and cut to API limits.
pub fn to_api(e: &NodeEvent) -> (Publish, ObjectReference) {
    let publish = Publish {
        type_: if e.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: e.reason.as_str().into(),
        note: Some(cut(&escape(&e.note), NOTE_LIMIT)),
        action: cut(&escape(&e.action), ACTION_LIMIT),
        secondary: None,
    };
    let regarding = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(e.node.clone()),
        uid: e.node_uid.clone(),
        ..ObjectReference::default()
    };
    (publish, regarding)
}

pub use crate::text::cut;

/// A token bucket per Event: [`BURST`] writes at once, then one per [`REFILL`] (the
/// allocator's GCRA bucket).
#[derive(Debug, Default)]
pub struct Throttle {
    buckets: HashMap<String, TokenBucket>,
}

impl Throttle {
    /// Whether this occurrence may be written now (and takes its token).
    pub fn admit(&mut self, key: String, now: Instant) -> bool {
        let now = now.into_std();
        if self.buckets.len() >= MAX_KEYS && !self.buckets.contains_key(&key) {
            self.buckets.retain(|_, b| !b.is_full(now));
        }
        let limits = ApiLimits {
            qps: 1.0 / REFILL.as_secs_f64(),
            burst: BURST,
        };
        self.buckets
            .entry(key)
            .or_insert_with(|| TokenBucket::new(limits, now))
            .try_take(now)
            .is_ok()
    }

    #[cfg(test)]
    fn keys(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests;
