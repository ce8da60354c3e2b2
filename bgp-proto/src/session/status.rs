//! What a session reports for logs, metrics and the published status.

use std::collections::BTreeMap;

use crate::message::Message;
use crate::message::notification::Notification;

use super::rib_out::AdjRibOut;
use super::{DownReason, Negotiated, Refusal, State};

/// What the session's Adj-RIB-Out holds, shared (not copied) with the session. Reports are
/// rendered from this, so they say what the peer was sent, not a re-derivation.
#[derive(Debug, Clone, Default)]
pub struct RibSnapshot(pub AdjRibOut);

impl PartialEq for RibSnapshot {
    fn eq(&self, other: &Self) -> bool {
        self.0.same_snapshot(&other.0)
    }
}

impl Eq for RibSnapshot {}

/// Messages and bytes per message type, in one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub messages: BTreeMap<&'static str, u64>,
    pub bytes: u64,
}

impl Counters {
    pub fn record(&mut self, msg: &Message, bytes: usize) {
        *self.messages.entry(msg.type_name()).or_default() += 1;
        self.bytes += bytes as u64;
    }

    pub fn count(&self, type_name: &str) -> u64 {
        self.messages.get(type_name).copied().unwrap_or(0)
    }
}

/// A NOTIFICATION, as shown to operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationRecord {
    pub code: u8,
    pub subcode: u8,
    pub name: String,
    pub message: Option<String>,
    /// Seconds since the Unix epoch.
    pub at: u64,
}

impl NotificationRecord {
    pub fn new(n: &Notification, at: u64) -> Self {
        NotificationRecord {
            code: n.code.into(),
            subcode: n.subcode,
            name: n.name(),
            message: n.shutdown_message(),
            at,
        }
    }
}

/// A snapshot of one session, published by the driver on every change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStatus {
    pub state: State,
    /// Seconds since the Unix epoch when the current state was entered.
    pub since: u64,
    pub negotiated: Option<Negotiated>,
    /// Prefixes advertised, per family name.
    pub advertised: BTreeMap<String, usize>,
    pub sent: Counters,
    pub received: Counters,
    pub last_notification_sent: Option<NotificationRecord>,
    pub last_notification_received: Option<NotificationRecord>,
    /// Why the session last went down or failed to come up, in words.
    pub last_error: Option<String>,
    pub connect_attempts: u64,
    pub flaps: u64,
    /// RFC 7606 non-fatal errors in received UPDATEs since the task started, per
    /// `DecodeError::kind` (a fixed set of keys).
    pub update_errors: BTreeMap<&'static str, u64>,
    /// Most bytes ever queued for the peer and not yet written, over all connections (see
    /// `SessionConfig::send_queue_limit`).
    pub send_queue_high_water: usize,
    /// The routes advertised to the peer (empty unless Established).
    pub adj_rib_out: RibSnapshot,
    /// BFD strict mode: since when (Unix seconds) the session has waited in OpenSent for
    /// BFD Up ("held waiting for BFD"); `None` when it does not wait.
    pub waiting_for_bfd_since: Option<u64>,
    /// Whether the peer's last OPEN advertised BFD strict mode (capability 74); `None`
    /// before any OPEN. Kept across sessions.
    pub peer_bfd_strict: Option<bool>,
}

impl SessionStatus {
    pub fn new(now: u64) -> Self {
        SessionStatus {
            state: State::Idle,
            since: now,
            negotiated: None,
            advertised: BTreeMap::new(),
            sent: Counters::default(),
            received: Counters::default(),
            last_notification_sent: None,
            last_notification_received: None,
            last_error: None,
            connect_attempts: 0,
            flaps: 0,
            update_errors: BTreeMap::new(),
            send_queue_high_water: 0,
            adj_rib_out: RibSnapshot::default(),
            waiting_for_bfd_since: None,
            peer_bfd_strict: None,
        }
    }
}

/// What happened, for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    StateChanged {
        from: State,
        to: State,
        reason: Option<DownReason>,
    },
    NotificationSent(Notification),
    NotificationReceived(Notification),
    /// RFC 7606 non-fatal errors in received UPDATEs, at most one event per
    /// `UPDATE_ERROR_EVENT_INTERVAL` (the driver's): the first at once, the rest summed up at the end of
    /// the interval.
    UpdateErrors {
        /// Errors per `DecodeError::kind` since the last event.
        counts: BTreeMap<&'static str, u64>,
        /// The first error of those, in words.
        example: String,
    },
    Refused(Vec<(ipnet::IpNet, Refusal)>),
    UpdatesSent {
        messages: usize,
    },
    /// The BFD session next to this one changed state (sent by the owner that runs BFD,
    /// through the same channel, so logs and metrics see both in order).
    Bfd(crate::bfd::BfdEvent),
    /// BFD strict mode: the session started (`true`) or stopped waiting for BFD Up.
    WaitingForBfd(bool),
    /// BFD strict mode is configured and the peer's OPEN says whether it is negotiated
    /// (sent when that changes): without the peer's capability 74 the session runs
    /// non-strict.
    BfdStrict {
        negotiated: bool,
    },
}
