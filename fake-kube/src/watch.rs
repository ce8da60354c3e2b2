//! Watch streams: newline-delimited JSON events from the store history.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::{Instant, Interval};

use crate::error::ApiError;
use crate::meta::meta_str;
use crate::meta::partial_object;
use crate::resource::Gvr;
use crate::selector::Selectors;
use crate::shared::{Shared, Signals};
use crate::store::{EventType, StoreEvent};

/// A parsed watch request.
#[derive(Debug, Clone)]
pub(crate) struct WatchRequest {
    pub gvr: Gvr,
    pub namespace: Option<String>,
    pub selectors: Selectors,
    /// `resourceVersion` query parameter; `None`/`""`/`"0"` means "current state first".
    pub resource_version: Option<String>,
    pub send_initial_events: bool,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
    /// Objects as `PartialObjectMetadata` (metadata-only request).
    pub meta_only: bool,
}

struct WatchState {
    shared: Arc<Shared>,
    req: WatchRequest,
    kind: String,
    cursor: u64,
    buf: VecDeque<Bytes>,
    rv_rx: watch::Receiver<u64>,
    sig_rx: watch::Receiver<Signals>,
    seen: Signals,
    interval: Option<Interval>,
    deadline: Option<Instant>,
    done: bool,
    _guard: WatchGuard,
}

/// Keeps the open-watch count right however the stream ends.
struct WatchGuard(Arc<Shared>);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0
            .open_watches
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Builds the event stream for a watch request (the caller answers 200 with it).
pub(crate) fn watch_stream(
    shared: Arc<Shared>,
    req: WatchRequest,
) -> Result<impl Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + use<>, ApiError> {
    let rv_rx = shared.store.subscribe_rv();
    let sig_rx = shared.signals.subscribe();
    let seen = *sig_rx.borrow();
    let kind = shared.store.kind_of(&req.gvr);
    let mut buf = VecDeque::new();
    let rv_param = req
        .resource_version
        .as_deref()
        .filter(|rv| !rv.is_empty() && *rv != "0");
    let cursor = match rv_param {
        Some(rv) if !req.send_initial_events => rv
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?,
        _ => {
            // Synthetic ADDED events for the current state, as the real watch cache sends.
            let (objects, rv) =
                shared
                    .store
                    .snapshot(&req.gvr, req.namespace.as_deref(), &req.selectors);
            for obj in &objects {
                buf.push_back(object_line("ADDED", obj, req.meta_only));
            }
            if req.send_initial_events && req.bookmarks {
                buf.push_back(bookmark_line(&req.gvr, &kind, rv, true));
            }
            rv
        }
    };
    let interval = shared
        .bookmark_interval
        .filter(|_| req.bookmarks)
        .map(|period| {
            let mut interval = tokio::time::interval_at(Instant::now() + period, period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval
        });
    let deadline = req.timeout.map(|t| Instant::now() + t);
    shared.open_watches.send_modify(|n| *n += 1);
    let state = WatchState {
        _guard: WatchGuard(shared.clone()),
        shared,
        req,
        kind,
        cursor,
        buf,
        rv_rx,
        sig_rx,
        seen,
        interval,
        deadline,
        done: false,
    };
    Ok(futures::stream::unfold(state, |mut st| async move {
        let line = st.next_line().await?;
        st.count(&line);
        Some((Ok(Frame::data(line)), st))
    }))
}

impl WatchState {
    /// Adds a line to the traffic counters: bytes always, an object unless it is a BOOKMARK
    /// or an ERROR.
    fn count(&self, line: &Bytes) {
        let object = !(line.starts_with(b"{\"type\":\"BOOKMARK\"")
            || line.starts_with(b"{\"type\":\"ERROR\""));
        self.shared.traffic.sent(
            crate::faults::Verb::Watch,
            &self.req.gvr.plural,
            line.len() as u64,
            u64::from(object),
        );
    }

    /// The next line to send, or `None` to end the response.
    async fn next_line(&mut self) -> Option<Bytes> {
        // Each pass either returns or waits for a store change, a signal or a timer.
        loop {
            if let Some(line) = self.buf.pop_front() {
                return Some(line);
            }
            if self.done {
                return None;
            }
            self.pull_events();
            if !self.buf.is_empty() {
                continue;
            }
            let wake = tokio::select! {
                r = self.rv_rx.changed() => Wake::Store(r.is_ok()),
                r = self.sig_rx.changed() => Wake::Signal(r.is_ok()),
                () = tick(self.interval.as_mut()) => Wake::Tick,
                () = until(self.deadline) => Wake::Deadline,
            };
            match wake {
                Wake::Store(true) => {}
                Wake::Store(false) | Wake::Signal(false) | Wake::Deadline => self.done = true,
                Wake::Signal(true) => {
                    let now = *self.sig_rx.borrow_and_update();
                    self.on_signals(now);
                }
                Wake::Tick => {
                    self.buf.push_back(bookmark_line(
                        &self.req.gvr,
                        &self.kind,
                        self.cursor,
                        false,
                    ));
                }
            }
        }
    }

    fn on_signals(&mut self, now: Signals) {
        if now.drop != self.seen.drop {
            self.buf.clear();
            self.done = true;
        } else if now.expire != self.seen.expire {
            self.buf.clear();
            let err =
                ApiError::expired("too old resource version: the watch was expired by the test");
            self.buf.push_back(error_line(&err));
            self.done = true;
        } else if now.bookmark != self.seen.bookmark && self.req.bookmarks {
            self.pull_events();
            self.buf
                .push_back(bookmark_line(&self.req.gvr, &self.kind, self.cursor, false));
        }
        self.seen = now;
    }

    fn pull_events(&mut self) {
        match self
            .shared
            .store
            .events_after(Some(&self.req.gvr), self.cursor)
        {
            Ok((events, rv)) => {
                for ev in events {
                    if let Some(line) = self.render(&ev) {
                        self.buf.push_back(line);
                    }
                }
                self.cursor = rv;
            }
            Err(err) => {
                self.buf.push_back(error_line(&err));
                self.done = true;
            }
        }
    }

    fn in_scope(&self, obj: &Value) -> bool {
        self.req
            .namespace
            .as_deref()
            .is_none_or(|ns| meta_str(obj, "namespace") == ns)
            && self.req.selectors.matches(obj)
    }

    /// Objects entering or leaving the selection show up as ADDED / DELETED, like the real server.
    fn render(&self, ev: &StoreEvent) -> Option<Bytes> {
        let now_in = self.in_scope(&ev.object);
        let kind = match ev.event_type {
            EventType::Added => now_in.then_some("ADDED"),
            EventType::Deleted => now_in.then_some("DELETED"),
            EventType::Modified => {
                let was_in = ev.previous.as_ref().is_some_and(|p| self.in_scope(p));
                match (was_in, now_in) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
        }?;
        Some(object_line(kind, &ev.object, self.req.meta_only))
    }
}

enum Wake {
    Store(bool),
    Signal(bool),
    Tick,
    Deadline,
}

async fn tick(interval: Option<&mut Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = format!("{{\"type\":\"{kind}\",\"object\":").into_bytes();
    // Serializing a Value cannot fail.
    serde_json::to_writer(&mut line, object).unwrap_or_default();
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

fn object_line(kind: &str, object: &Value, meta_only: bool) -> Bytes {
    if meta_only {
        event_line(kind, &partial_object(object))
    } else {
        event_line(kind, object)
    }
}

pub(crate) fn error_line(err: &ApiError) -> Bytes {
    event_line("ERROR", &err.to_status())
}

fn bookmark_line(gvr: &Gvr, kind: &str, rv: u64, initial_end: bool) -> Bytes {
    let mut object = json!({
        "kind": kind,
        "apiVersion": gvr.api_version,
        "metadata": {"resourceVersion": rv.to_string()},
    });
    if initial_end {
        object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event_line("BOOKMARK", &object)
}
