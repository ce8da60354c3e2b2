//! The speaker's one watch of its own Node (field selector on its name). Its labels choose the
//! configuration objects the node runs, and its events feed the pod-CIDR source, whose set
//! then carries the Node's facts to the core (the Node is the source object, or its second
//! view): one watch for every reader.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use ipam_watch::source::NodeEvents;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_stream};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the watch knows of the Node.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum NodeState {
    /// Not listed yet.
    #[default]
    Unknown,
    Present(Arc<Node>),
    /// Listed, and there is no such Node (or it was deleted).
    Absent,
}

/// Watches the Node `name`; keeps the last known state through API errors.
pub fn watch_node(client: Client, name: &str) -> (watch::Receiver<NodeState>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(NodeState::Unknown);
    let api: Api<Node> = Api::all(client);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let task = tokio::spawn(async move {
        let mut stream = watch_stream(api, cfg).default_backoff().boxed();
        let mut relist: Option<Option<Node>> = None;
        while let Some(item) = stream.next().await {
            let next = match item {
                Ok(Event::Init) => {
                    relist = Some(None);
                    continue;
                }
                Ok(Event::InitApply(n)) => {
                    relist = Some(Some(n));
                    continue;
                }
                Ok(Event::InitDone) => match relist.take().flatten() {
                    Some(n) => NodeState::Present(Arc::new(n)),
                    None => NodeState::Absent,
                },
                Ok(Event::Apply(n)) => NodeState::Present(Arc::new(n)),
                Ok(Event::Delete(_)) => NodeState::Absent,
                Err(e) => {
                    tracing::warn!(error = %e, "watching the Node failed; keeping what is known");
                    continue;
                }
            };
            tx.send_if_modified(|cur| {
                let changed = *cur != next;
                *cur = next;
                changed
            });
        }
    });
    (rx, task)
}

/// The Node's changes as watch events for a pod-CIDR source: once the state is known,
/// `Init`, the Node, `InitDone`; then `Apply` or `Delete` per change.
pub fn node_events(rx: watch::Receiver<NodeState>) -> NodeEvents {
    struct S {
        rx: watch::Receiver<NodeState>,
        queue: VecDeque<Event<Node>>,
        last: Option<Arc<Node>>,
        listed: bool,
        /// The state present at the start was read: from then on only changes are.
        primed: bool,
    }
    let s = S {
        rx,
        queue: VecDeque::new(),
        last: None,
        listed: false,
        primed: false,
    };
    futures::stream::unfold(s, |mut s| async move {
        loop {
            if let Some(ev) = s.queue.pop_front() {
                return Some((Ok::<_, watcher::Error>(ev), s));
            }
            if s.primed {
                s.rx.changed().await.ok()?;
            }
            s.primed = true;
            let state = s.rx.borrow_and_update().clone();
            match (&state, s.listed) {
                (NodeState::Unknown, _) => {}
                (_, false) => {
                    s.listed = true;
                    s.queue.push_back(Event::Init);
                    if let NodeState::Present(n) = &state {
                        s.queue.push_back(Event::InitApply(Node::clone(n)));
                    }
                    s.queue.push_back(Event::InitDone);
                }
                (NodeState::Present(n), true) => s.queue.push_back(Event::Apply(Node::clone(n))),
                (NodeState::Absent, true) => {
                    if let Some(n) = &s.last {
                        s.queue.push_back(Event::Delete(Node::clone(n)));
                    }
                }
            }
            if let NodeState::Present(n) = &state {
                s.last = Some(Arc::clone(n));
            } else if matches!(state, NodeState::Absent) {
                s.last = None;
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    fn node(name: &str, label: &str) -> Arc<Node> {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some([("rack".to_owned(), label.to_owned())].into());
        Arc::new(n)
    }

    fn kinds(events: &[Event<Node>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::Init => "Init".into(),
                Event::InitApply(n) => {
                    format!("InitApply {}", n.metadata.labels.as_ref().unwrap()["rack"])
                }
                Event::InitDone => "InitDone".into(),
                Event::Apply(n) => format!("Apply {}", n.metadata.labels.as_ref().unwrap()["rack"]),
                Event::Delete(_) => "Delete".into(),
            })
            .collect()
    }

    /// Drains what the stream has ready now (it never ends on its own).
    fn ready(stream: &mut NodeEvents) -> Vec<Event<Node>> {
        let mut out = Vec::new();
        while let Some(Some(item)) = stream.next().now_or_never() {
            out.push(item.unwrap());
        }
        out
    }

    #[test]
    fn one_node_watch_feeds_a_source_the_events_a_watch_of_its_own_would() {
        let (tx, rx) = watch::channel(NodeState::Unknown);
        let mut events = node_events(rx);
        assert!(
            ready(&mut events).is_empty(),
            "nothing before the Node is listed"
        );
        tx.send_replace(NodeState::Present(node("a", "r1")));
        assert_eq!(
            kinds(&ready(&mut events)),
            ["Init", "InitApply r1", "InitDone"]
        );
        tx.send_replace(NodeState::Present(node("a", "r2")));
        assert_eq!(kinds(&ready(&mut events)), ["Apply r2"]);
        tx.send_replace(NodeState::Absent);
        assert_eq!(kinds(&ready(&mut events)), ["Delete"]);
        tx.send_replace(NodeState::Present(node("a", "r3")));
        assert_eq!(kinds(&ready(&mut events)), ["Apply r3"]);
    }

    #[test]
    fn a_node_missing_at_the_first_list_is_an_empty_relist() {
        let (tx, rx) = watch::channel(NodeState::Unknown);
        let mut events = node_events(rx);
        tx.send_replace(NodeState::Absent);
        assert_eq!(kinds(&ready(&mut events)), ["Init", "InitDone"]);
    }
}
