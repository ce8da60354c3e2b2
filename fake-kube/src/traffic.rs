//! What clients asked and what they received: a bounded log of requests (with their selectors
//! and paging parameters) and totals per (verb, resource) of requests, bytes and objects, so a
//! test or a bench can say what one client costs the API server.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::faults::Verb;

/// Requests the log keeps (the oldest are dropped first); the totals count every request.
pub const REQUEST_LOG_CAP: usize = 100_000;

/// Totals for one (verb, resource).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Requests received (faulted ones included).
    pub requests: u64,
    /// Request body bytes received.
    pub bytes_in: u64,
    /// Response body bytes sent; a watch counts each event line as it is sent.
    pub bytes_out: u64,
    /// Objects sent: list items, watch events other than BOOKMARK and ERROR, and the one
    /// object of a successful get, create, update, patch or delete.
    pub objects_out: u64,
}

impl Traffic {
    fn add(&mut self, other: &Traffic) {
        self.requests += other.requests;
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.objects_out += other.objects_out;
    }
}

/// One request as the server understood it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    pub verb: Verb,
    /// The plural, with `/status` for the status subresource (as in the counters).
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// `fieldSelector` as sent (percent-decoded).
    pub field_selector: Option<String>,
    /// `labelSelector` as sent (percent-decoded).
    pub label_selector: Option<String>,
    /// `limit` of a list.
    pub limit: Option<u64>,
    /// The request continued a paged list (`continue` was set).
    pub continued: bool,
}

#[derive(Debug, Default)]
struct State {
    totals: BTreeMap<(Verb, String), Traffic>,
    log: VecDeque<RequestRecord>,
    /// Server-side applies that created their object: authorized as `create` as well as
    /// `patch` by a real API server.
    apply_creates: BTreeSet<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Recorder(Mutex<State>);

impl Recorder {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub(crate) fn request(&self, record: RequestRecord, bytes_in: u64) {
        self.with(|st| {
            let t = st
                .totals
                .entry((record.verb, record.resource.clone()))
                .or_default();
            t.requests += 1;
            t.bytes_in += bytes_in;
            if st.log.len() >= REQUEST_LOG_CAP {
                st.log.pop_front();
            }
            st.log.push_back(record);
        });
    }

    pub(crate) fn sent(&self, verb: Verb, resource: &str, bytes: u64, objects: u64) {
        self.with(|st| {
            let t = st.totals.entry((verb, resource.to_owned())).or_default();
            t.bytes_out += bytes;
            t.objects_out += objects;
        });
    }

    pub(crate) fn apply_created(&self, resource: &str) {
        self.with(|st| st.apply_creates.insert(resource.to_owned()));
    }

    pub(crate) fn totals(&self) -> BTreeMap<(Verb, String), Traffic> {
        self.with(|st| st.totals.clone())
    }

    pub(crate) fn total(&self) -> Traffic {
        self.with(|st| {
            let mut sum = Traffic::default();
            for t in st.totals.values() {
                sum.add(t);
            }
            sum
        })
    }

    pub(crate) fn log(&self) -> Vec<RequestRecord> {
        self.with(|st| st.log.iter().cloned().collect())
    }

    /// (verb, resource) pairs a real API server would have authorized.
    pub(crate) fn authorized(&self) -> BTreeSet<(Verb, String)> {
        self.with(|st| {
            st.totals
                .iter()
                .filter(|(_, t)| t.requests > 0)
                .map(|(k, _)| k.clone())
                .chain(st.apply_creates.iter().map(|r| (Verb::Create, r.clone())))
                .collect()
        })
    }

    pub(crate) fn reset(&self) {
        self.with(|st| *st = State::default());
    }
}
