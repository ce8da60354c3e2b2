//! What the listener, the router and the watches share: the response body type, the state
//! every request sees, and the handle's signals to open watches.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use tokio::sync::watch;

use crate::faults::Faults;
use crate::store::Store;
use crate::traffic::Recorder;

/// Response body: full JSON documents or a watch stream.
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

/// State shared by the handle and every request.
#[derive(Debug)]
pub(crate) struct Shared {
    pub store: Store,
    pub faults: Faults,
    pub traffic: Recorder,
    pub signals: watch::Sender<Signals>,
    pub open_watches: watch::Sender<usize>,
    pub bookmark_interval: Option<Duration>,
}

/// Handle-driven signals to every open watch; each field is a generation counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Signals {
    pub drop: u64,
    pub expire: u64,
    pub bookmark: u64,
}
