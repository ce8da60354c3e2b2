//! Bidirectional Forwarding Detection for single-hop IP (RFC 5880, RFC 5881): the Control
//! packet codec and the pure session state machine (the tokio driver and the UDP transport
//! are in `bgp-io`).
//!
//! Supported: asynchronous mode, Poll/Final for parameter changes, §6.8.7 jitter, TTL 255
//! on send and the GTSM check on receive, Keyed SHA1 and Meticulous Keyed SHA1
//! authentication (§6.7.4). Not supported (documented in docs/bgp.md): demand mode, echo,
//! the password and MD5 authentication types (their packets are discarded).

pub mod auth;
pub mod packet;
pub mod session;
pub mod timers;

use std::time::Duration;

pub use auth::{AuthError, BfdAuthKey};
pub use packet::{BfdState, ControlPacket, Diag, PacketEncodeError, PacketError, Sha1Auth};
pub use session::{BfdInput, BfdOutput, BfdSession, BfdSessionConfig, BfdTimer};

/// What a BFD session reports, for its owner (the gate, logs, metrics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BfdEvent {
    StateChanged {
        from: BfdState,
        to: BfdState,
        diag: Diag,
        remote_state: BfdState,
    },
    /// The peer replaced its session (discriminator `old`) by a new one (`new`) that came
    /// Up at once: not a path failure, so no state change was reported
    /// ([`session::BfdOutput::PeerReplaced`]).
    PeerReplaced { old: u32, new: u32 },
    /// A datagram discarded before or by the session: label and details.
    Dropped { kind: &'static str, detail: String },
    /// Sending failed; the session keeps going (its detection timer decides).
    SendFailed(String),
    /// The BFD session could not start (its socket), reported by its owner: the BGP session
    /// runs without BFD, and what that means for it is the owner's core's decision.
    StartFailed(String),
}

/// How a session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Tell the peer we stop on purpose (AdminDown, RFC 5880 §6.8.16).
    AdminDown,
    /// A planned restart of this process: stretch the peer's detection time to about
    /// `window` (a larger multiplier and, past 255, a slower transmit interval, announced
    /// with a Poll; [`timers::handover_timers`]) and fall silent; the next process continues the session ([`BfdSession::resuming`])
    /// before the peer would declare it down.
    Handover(Duration),
    /// Just stop sending.
    Silent,
}
