//! A BGP speaker session for an export-only announcer, as a pure state machine
//! (RFC 4271 §8): [`Session::handle`] takes an [`Input`] and returns [`Output`]s. Timers are
//! outputs ("arm Hold for 90 s") and inputs ("Hold fired"); there is no clock and no I/O here.
//! `bgp-io`'s driver runs it over any `AsyncRead + AsyncWrite`.

pub mod backoff;
mod fsm;
pub mod open;
pub mod rib_out;
pub mod route_set;
mod status;
pub mod ttl;
mod update_errors;

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

pub use fsm::Session;
pub use open::Negotiated;
pub use rib_out::{AdjRibOut, ExportContext, OriginKind, Plan, Refusal, RouteAttributes, RouteSet};
pub use status::{Counters, NotificationRecord, RibSnapshot, SessionEvent, SessionStatus};

use crate::error::DecodeError;
use crate::message::notification::Notification;
use crate::message::{Decoded, Message};
use crate::types::{Asn, Family, HoldTime, RouterId};

/// RFC 4724 graceful restart, as we advertise it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GracefulRestartConfig {
    /// Seconds the peer keeps our routes after the session drops without a NOTIFICATION.
    pub restart_time: u16,
    /// F bit: pod traffic keeps flowing while we restart, so the peer may keep forwarding.
    pub preserve_forwarding: bool,
    /// RFC 9494 Long-lived Stale Time in seconds (24 bits); 0 sends no LLGR capability.
    pub long_lived_stale_time: u32,
}

/// Default [`SessionConfig::send_queue_limit`]: 8 MiB, several copies of a 100,000-route
/// table.
pub const DEFAULT_SEND_QUEUE_LIMIT: usize = 8 << 20;

/// Per-peer session settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    pub local_asn: Asn,
    pub router_id: RouterId,
    pub peer_asn: Asn,
    /// `Some`: the peer's AS is learned from its OPEN (`peer_asn` is not checked) and
    /// accepted only inside one of these inclusive ranges (else Bad Peer AS, RFC 4271 §6.2);
    /// eBGP or iBGP then follows from the learned AS.
    pub peer_asn_ranges: Option<Vec<RangeInclusive<u32>>>,
    pub hold_time: HoldTime,
    /// Default: a third of the hold time.
    pub keepalive: Option<Duration>,
    pub families: Vec<Family>,
    /// Wait for the peer to connect instead of connecting.
    pub passive: bool,
    pub connect_retry_base: Duration,
    pub connect_retry_max: Duration,
    pub graceful_restart: Option<GracefulRestartConfig>,
    /// Offer RFC 8950 (IPv4 NLRI with an IPv6 next hop).
    pub extended_next_hop: bool,
    /// Our link-local address on the link shared with the peer (an interface session):
    /// sent after a global IPv6 next hop, or alone with `::` when there is none (RFC 2545 §3).
    pub link_local_next_hop: Option<std::net::Ipv6Addr>,
    /// RFC 9687 send hold time; default max(8 min, 2 × hold time).
    pub send_hold_time: Option<Duration>,
    /// Bytes queued for the peer but not yet written, per connection (default
    /// [`DEFAULT_SEND_QUEUE_LIMIT`]). A write that would pass it counts as send hold timer
    /// expiry (RFC 9687): a peer that does not read cannot make us buffer without bound. A
    /// write to an empty queue is always accepted, so a table larger than the limit still
    /// goes out.
    pub send_queue_limit: usize,
    /// Seeds the connect-retry jitter, so tests are deterministic.
    pub jitter_seed: u64,
    /// BFD strict mode (draft-ietf-idr-bgp-bfd-strict-mode): advertise capability 74 and,
    /// when the peer advertises it too, send no KEEPALIVE before BFD is Up
    /// ([`Input::Bfd`]). Only meaningful with a BFD session beside this one.
    pub bfd_strict: bool,
}

impl SessionConfig {
    /// A config with the usual defaults: hold 90 s, both unicast families, retry 1 s..120 s.
    pub fn new(local_asn: Asn, router_id: RouterId, peer_asn: Asn) -> Self {
        SessionConfig {
            local_asn,
            router_id,
            peer_asn,
            peer_asn_ranges: None,
            hold_time: HoldTime::new(90).unwrap_or(HoldTime::DISABLED),
            keepalive: None,
            families: vec![Family::IPV4_UNICAST, Family::IPV6_UNICAST],
            passive: false,
            connect_retry_base: Duration::from_secs(1),
            connect_retry_max: Duration::from_secs(120),
            graceful_restart: None,
            extended_next_hop: false,
            link_local_next_hop: None,
            send_hold_time: None,
            send_queue_limit: DEFAULT_SEND_QUEUE_LIMIT,
            jitter_seed: 0x9e37_79b9_7f4a_7c15,
            bfd_strict: false,
        }
    }

    pub fn send_hold_time(&self) -> Duration {
        self.send_hold_time.unwrap_or_else(|| {
            Duration::from_secs(480)
                .max(Duration::from_secs(2 * u64::from(self.hold_time.seconds())))
        })
    }
}

/// RFC 4271 §8.1.1 session states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    Idle,
    Connect,
    Active,
    OpenSent,
    OpenConfirm,
    Established,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Idle => "Idle",
            State::Connect => "Connect",
            State::Active => "Active",
            State::OpenSent => "OpenSent",
            State::OpenConfirm => "OpenConfirm",
            State::Established => "Established",
        }
    }

    /// Numeric value for the `podcidr_bgp_session_state` metric (RFC 4273 bgpPeerState).
    pub fn as_number(self) -> u8 {
        match self {
            State::Idle => 1,
            State::Connect => 2,
            State::Active => 3,
            State::OpenSent => 4,
            State::OpenConfirm => 5,
            State::Established => 6,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timer {
    ConnectRetry,
    Hold,
    Keepalive,
    /// RFC 9687: armed by the driver while a write is pending; the FSM only hears it fire.
    SendHold,
    /// draft-ietf-idr-bgp-bfd-strict-mode §3 BfdHoldTimer: bounds the wait for BFD Up when
    /// the negotiated hold time is zero (otherwise the hold timer does).
    BfdHold,
    /// RFC 4271 §8.1.1 IdleHoldTimer (DampPeerOscillations): after a flapping BFD session
    /// reset it, the session stays Idle this long before it connects or accepts again.
    IdleHold,
}

/// What the BFD session beside this one says, as the owner of both decides it (RFC 5882
/// §3.2; the events of draft-ietf-idr-bgp-bfd-strict-mode §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BfdInput {
    /// BFD is Up, or was stopped on purpose (AdminDown): nothing to wait for (Events 30, 32).
    Up,
    /// BFD is Down and was not Up just before: it has not come up (Event 31 from Init).
    NotUp,
    /// BFD was Up and went Down: the path failed (Event 31 from Up). The text says why (the
    /// BFD diagnostic).
    Failed(String),
    /// The BFD session flaps (RFC 5882 §3.1): after the reset its failure caused, stay Idle
    /// this long before connecting or accepting again (RFC 4271 §8.1.1 IdleHoldTimer). Only
    /// a session that is not up (Idle, Connect, Active) is held, and a hold running is never
    /// extended: every hold ends on its timer, whatever BFD does meanwhile.
    HoldDown(std::time::Duration),
    /// Our BFD session could not start: nothing to wait for (as Up), and the OPENs from now
    /// on leave out capability 74, which promises a BFD we do not run
    /// (draft-ietf-idr-bgp-bfd-strict-mode §5, §8.5.1 BfdDisabled). Any other BFD input
    /// says BFD runs again and brings the capability back, as configured.
    Unavailable,
}

/// How a session is stopped (RFC 4271 Event 2, ManualStop).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// Planned, final: Cease/Administrative Shutdown with an RFC 9003 message.
    Shutdown(String),
    /// The peer was removed from the configuration: Cease/Peer De-configured.
    Deconfigured,
    /// The peer's session settings changed and it is reset: with graceful restart
    /// negotiated, a graceful-restart close (no NOTIFICATION, RFC 4724 §4: the peer keeps our
    /// routes until the new session's End-of-RIB); otherwise Cease/Other Configuration Change
    /// (RFC 4486 §4).
    ConfigurationChange,
    /// Our process restarts and wants graceful restart: close without a NOTIFICATION so the
    /// peer keeps our routes as stale.
    GracefulRestart,
}

/// Inputs, with the RFC 4271 §8.1 events they stand for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Event 1 ManualStart (Event 4/5 with passive TCP establishment when configured).
    Start,
    /// Event 2 ManualStop.
    Stop(StopReason),
    /// Events 9–11 and RFC 9687 SendHoldTimer_Expires.
    TimerFired(Timer),
    /// Event 16 Tcp_CR_Acked: the connection we opened is up.
    TcpConnected,
    /// Event 17 TcpConnectionConfirmed: the peer opened a connection and it is now the
    /// session's (there was none, or the driver adopted it after
    /// [`Output::AdoptSecondConnection`]).
    TcpAccepted,
    /// An OPEN arrived on a second connection the peer opened while the session already has
    /// one (RFC 4271 §6.8 connection collision). The session answers with
    /// [`Output::CloseSecondConnection`] or [`Output::AdoptSecondConnection`].
    SecondConnectionOpen(Decoded),
    /// Event 18 TcpConnectionFails.
    TcpFailed(String),
    /// Events 19, 25–27 and ROUTE-REFRESH.
    Received(Decoded),
    /// Events 21, 22, 28: a message that failed to decode.
    DecodeFailed(DecodeError),
    /// The routes this session should advertise (latest value wins). Until the first one
    /// arrives the session sends no UPDATE and no End-of-RIB.
    SetRoutes(Arc<RouteSet>),
    /// New ConnectRetry backoff bounds for future retries; the session is not reset.
    SetConnectRetry { base: Duration, max: Duration },
    /// Everything queued for the peer was written (after [`Output::NotifyWhenDrained`]).
    SendQueueDrained,
    /// The BFD session beside this one changed (see [`BfdInput`]).
    Bfd(BfdInput),
}

/// Why the session left Established or failed to get there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownReason {
    Stopped(StopReason),
    HoldTimerExpired,
    SendHoldTimerExpired,
    ConnectionFailed(String),
    NotificationReceived(Notification),
    NotificationSent(Notification),
    /// BFD went down (Cease/BFD Down sent, RFC 9384); the session reconnects as after any
    /// failure. The text is the BFD diagnostic.
    BfdDown(String),
    /// Strict mode: BFD did not come Up before the hold timer (or the BfdHoldTimer) ran
    /// out.
    BfdNotUp,
}

impl std::fmt::Display for DownReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DownReason::Stopped(StopReason::Shutdown(m)) => {
                write!(f, "administrative shutdown: {m}")
            }
            DownReason::Stopped(StopReason::Deconfigured) => f.write_str("peer de-configured"),
            DownReason::Stopped(StopReason::ConfigurationChange) => {
                f.write_str("configuration changed")
            }
            DownReason::Stopped(StopReason::GracefulRestart) => f.write_str("graceful restart"),
            DownReason::HoldTimerExpired => f.write_str("hold timer expired"),
            DownReason::SendHoldTimerExpired => {
                f.write_str("send hold timer expired (peer not reading)")
            }
            DownReason::ConnectionFailed(e) => write!(f, "connection failed: {e}"),
            DownReason::NotificationReceived(n) => {
                write!(f, "NOTIFICATION received: {}", n.name())?;
                if let Some(m) = n.shutdown_message() {
                    write!(f, " ({m})")?;
                }
                Ok(())
            }
            DownReason::NotificationSent(n) => write!(f, "NOTIFICATION sent: {}", n.name()),
            DownReason::BfdDown(why) => write!(f, "BFD down: {why}"),
            DownReason::BfdNotUp => {
                f.write_str("BFD strict mode: BFD did not come Up within the hold time")
            }
        }
    }
}

/// Effects for the driver to carry out, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Open a TCP connection to the peer (active mode).
    Connect,
    Send(Message),
    /// Close the TCP connection (after sending what came before).
    Disconnect,
    ArmTimer(Timer, std::time::Duration),
    StopTimer(Timer),
    /// The codec must use these options from now on.
    Negotiated(Box<Negotiated>),
    StateChanged {
        from: State,
        to: State,
        reason: Option<DownReason>,
    },
    /// A received UPDATE had RFC 7606 errors that keep the session up (treat-as-withdraw,
    /// attribute discard, AFI/SAFI disable): counted and logged; its routes are ignored anyway.
    UpdateErrors(Vec<DecodeError>),
    /// Routes that could not be sent to this peer.
    Refused(Vec<(ipnet::IpNet, Refusal)>),
    /// Feed [`Input::SendQueueDrained`] once every byte queued so far (this output's sends
    /// included) was written to the peer.
    NotifyWhenDrained,
    /// Close the second connection, after sending this NOTIFICATION on it (none when the
    /// peer closed it with one). The session's own connection is untouched.
    CloseSecondConnection(Option<Notification>),
    /// From here on the second connection is the session's connection (the first one, if
    /// any, was closed by the outputs before this one; a connect in flight is abandoned).
    /// The outputs after this one already act on it: the session has taken the OPEN that
    /// arrived on it.
    AdoptSecondConnection,
}
