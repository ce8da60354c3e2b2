//! The session state machine: [`Session::handle`] dispatches per input (rustybgp's shape),
//! each input's handler matching on the state inside; RFC 4271 §8.2.2 event names in comments.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::backoff::{Backoff, Jitter, JitterRng};
use crate::error::Action;
use crate::iana::notification::{self as n, cease, fsm as fsm_err};
use crate::message::capability::GracefulRestart;
use crate::message::notification::{ErrorCode, Notification};
use crate::message::open::Open;
use crate::message::route_refresh::{RouteRefresh, RouteRefreshSubtype};
use crate::message::update::Update;
use crate::message::{Decoded, Message, WireOptions};
use crate::types::Family;

use super::open::{Negotiated, local_open, negotiate};
use super::rib_out::{self, AdjRibOut, ExportContext, Refusal, RouteSet};
use super::update_errors::unnegotiated_next_hop;
use super::{DownReason, Input, Output, SessionConfig, State, StopReason, Timer};

mod bfd;
use bfd::BfdPending;

/// RFC 4271 §8.2.2: "a large value (4 minutes)" for the hold timer before OPEN arrives.
const OPEN_HOLD: Duration = Duration::from_secs(240);

#[derive(Debug)]
pub struct Session {
    cfg: SessionConfig,
    state: State,
    /// Started and not stopped: failures lead back to Connect/Active automatically.
    started: bool,
    /// Set the graceful restart R bit in the next OPEN (we restarted and want GR).
    restarting: bool,
    negotiated: Option<Negotiated>,
    rib: AdjRibOut,
    /// None until the route source is ready: an empty table and End-of-RIB then would make a
    /// graceful-restart peer flush every route it kept for us (RFC 4724 §4.2).
    desired: Option<Arc<RouteSet>>,
    /// A route refresh response is queued and not yet written (see `route_refresh`).
    refresh_draining: bool,
    /// Families asked for again while a response was queued: answered once it drained.
    refresh_pending: BTreeSet<Family>,
    /// The current connection was opened by us (Event 16), not by the peer (Event 17).
    outbound: bool,
    retry: Backoff,
    rng: JitterRng,
    last_sent: Option<Notification>,
    last_received: Option<Notification>,
    /// The BFD session beside this one is Up (or AdminDown): strict mode need not wait.
    bfd_up: bool,
    /// Strict mode: the OPENs are exchanged and the KEEPALIVE waits for BFD Up.
    bfd_pending: Option<BfdPending>,
    /// Whether the peer's last OPEN carried BFD strict mode; kept across sessions.
    peer_bfd_strict: Option<bool>,
    /// A BFD hold-down runs: the session stays Idle until [`Timer::IdleHold`] fires.
    idle_held: bool,
    /// `bfd_strict` as configured; `cfg.bfd_strict` is it while our BFD runs, else false.
    bfd_strict_configured: bool,
}

impl Session {
    pub fn new(cfg: SessionConfig) -> Self {
        let retry = Backoff::new(cfg.connect_retry_base, cfg.connect_retry_max)
            .with_jitter(Jitter::Rfc4271);
        let rng = JitterRng::new(cfg.jitter_seed);
        Session {
            state: State::Idle,
            started: false,
            restarting: false,
            negotiated: None,
            rib: AdjRibOut::default(),
            desired: None,
            refresh_draining: false,
            refresh_pending: BTreeSet::new(),
            outbound: false,
            retry,
            rng,
            last_sent: None,
            last_received: None,
            bfd_up: false,
            bfd_pending: None,
            peer_bfd_strict: None,
            idle_held: false,
            bfd_strict_configured: cfg.bfd_strict,
            cfg,
        }
    }

    /// The next OPEN carries the graceful restart R bit (RFC 4724 §3): we are coming back
    /// from a restart the peer may have kept our routes through.
    pub fn set_restarting(&mut self, restarting: bool) {
        self.restarting = restarting;
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    pub fn adj_rib_out(&self) -> &AdjRibOut {
        &self.rib
    }

    pub fn last_notification_sent(&self) -> Option<&Notification> {
        self.last_sent.as_ref()
    }

    pub fn last_notification_received(&self) -> Option<&Notification> {
        self.last_received.as_ref()
    }

    pub fn handle(&mut self, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        match input {
            Input::Start => self.start(&mut out),
            Input::Stop(reason) => self.stop(&mut out, reason),
            Input::TimerFired(t) => self.timer(&mut out, t),
            Input::TcpConnected => self.tcp_connected(&mut out, true),
            Input::TcpAccepted => self.tcp_accepted(&mut out),
            Input::SecondConnectionOpen(d) => self.second_connection_open(&mut out, d),
            Input::TcpFailed(e) => self.tcp_failed(&mut out, e),
            Input::Received(d) => self.received(&mut out, d),
            Input::DecodeFailed(e) => {
                // Events 21/22/28: BGPHeaderErr, BGPOpenMsgErr, UpdateMsgErr.
                let h = e.handling();
                if self.state == State::Established && matches!(h.action, Action::AfiSafiDisable(_))
                {
                    // The decoder reports these with the message; should one arrive here, it
                    // is still only counted: we import nothing, so the family is already
                    // ignored (RFC 4760 §7), and a reset would withdraw our own routes.
                    self.restart_hold(&mut out);
                    out.push(Output::UpdateErrors(vec![e]));
                } else if self.state >= State::OpenSent {
                    debug_assert!(h.action.is_fatal(), "{e:?}");
                    self.fail(&mut out, None, Some(h.notification));
                }
            }
            Input::SetRoutes(routes) => {
                let first = self.desired.replace(routes).is_none();
                if self.state == State::Established {
                    if first {
                        self.send_full_table(&mut out);
                    } else {
                        self.send_changes(&mut out);
                    }
                }
            }
            Input::SetConnectRetry { base, max } => {
                // Bounds only: the attempt count (and so the current backoff step) stays.
                self.cfg.connect_retry_base = base;
                self.cfg.connect_retry_max = max;
                self.retry.base = base;
                self.retry.max = max;
            }
            Input::SendQueueDrained => self.refresh_drained(&mut out),
            Input::Bfd(b) => self.bfd(&mut out, b),
        }
        out
    }

    fn enter(&mut self, out: &mut Vec<Output>, to: State, reason: Option<DownReason>) {
        let from = self.state;
        if from == to {
            return;
        }
        self.state = to;
        // The sub-states of strict mode live in OpenSent only.
        self.bfd_pending = None;
        if to < State::OpenConfirm {
            self.negotiated = None;
        }
        if from == State::Established {
            self.rib.clear();
            self.refresh_draining = false;
            self.refresh_pending.clear();
        }
        out.push(Output::StateChanged { from, to, reason });
    }

    /// Exponential backoff with RFC 4271 §10 jitter, so speakers that failed together do not
    /// retry together.
    fn retry_delay(&mut self) -> Duration {
        self.retry.next_delay(self.rng.next_u64())
    }

    fn connect(&mut self, out: &mut Vec<Output>) {
        let delay = self.retry_delay();
        out.push(Output::Connect);
        out.push(Output::ArmTimer(Timer::ConnectRetry, delay));
        self.enter(out, State::Connect, None);
    }

    fn start(&mut self, out: &mut Vec<Output>) {
        // Event 1 ManualStart / Event 4 ManualStart_with_PassiveTcpEstablishment.
        if self.state != State::Idle {
            return;
        }
        self.started = true;
        self.retry.reset();
        if self.cfg.passive {
            self.enter(out, State::Active, None);
        } else {
            self.connect(out);
        }
    }

    /// Both sides advertised graceful restart on this session (we did: it is configured;
    /// the peer did: its OPEN carried the capability).
    fn graceful_restart_negotiated(&self) -> bool {
        self.cfg.graceful_restart.is_some()
            && self
                .negotiated
                .as_ref()
                .is_some_and(|n| n.peer_graceful_restart.is_some())
    }

    /// Both sides advertised RFC 8538's N bit (we do whenever we advertise graceful
    /// restart): a NOTIFICATION other than Hard Reset then keeps our routes at the peer as a
    /// graceful restart would.
    fn notification_negotiated(&self) -> bool {
        self.graceful_restart_negotiated()
            && self
                .negotiated
                .as_ref()
                .and_then(|n| n.peer_graceful_restart.as_ref())
                .is_some_and(|gr| gr.restart_flags & GracefulRestart::NOTIFICATION != 0)
    }

    /// What goes on the wire for `nt`: with RFC 8538 negotiated, a Cease that must make the
    /// peer drop our routes at once (§5: Maximum Number of Prefixes, Administrative Shutdown,
    /// Peer De-configured; and BFD Down, a failed path) is sent as a Hard Reset carrying it;
    /// anything else keeps its graceful meaning.
    fn on_the_wire(&self, nt: Notification) -> Notification {
        let final_cease = nt.code == ErrorCode::Cease
            && matches!(
                nt.subcode,
                cease::MAXIMUM_PREFIXES_REACHED
                    | cease::ADMINISTRATIVE_SHUTDOWN
                    | cease::PEER_DECONFIGURED
                    | cease::BFD_DOWN
            );
        if final_cease && self.notification_negotiated() {
            nt.hard_reset()
        } else {
            nt
        }
    }

    fn stop(&mut self, out: &mut Vec<Output>, reason: StopReason) {
        // Event 2 ManualStop.
        self.started = false;
        if self.state >= State::OpenSent {
            let notification = match &reason {
                StopReason::Shutdown(text) => {
                    Some(shutdown_notification(cease::ADMINISTRATIVE_SHUTDOWN, text))
                }
                StopReason::Deconfigured => {
                    Some(Notification::new(n::CEASE, cease::PEER_DECONFIGURED))
                }
                // A reset for new settings: with graceful restart negotiated (both sides
                // advertised it), the peer must keep our routes as stale until the new
                // session's End-of-RIB. With RFC 8538's N bit on both sides, Cease/Other
                // Configuration Change does that and tells the router why (§4); without it,
                // close as a restarting speaker does, RFC 4724 §4, as a Cease would make the
                // peer withdraw them at once. Without graceful restart: RFC 4486's Cease.
                StopReason::ConfigurationChange if self.notification_negotiated() => Some(
                    Notification::new(n::CEASE, cease::OTHER_CONFIGURATION_CHANGE),
                ),
                StopReason::ConfigurationChange if self.graceful_restart_negotiated() => None,
                StopReason::ConfigurationChange => Some(Notification::new(
                    n::CEASE,
                    cease::OTHER_CONFIGURATION_CHANGE,
                )),
                // RFC 4724: no NOTIFICATION, so the peer keeps our routes as stale.
                StopReason::GracefulRestart => None,
            };
            if let Some(nt) = notification {
                let nt = self.on_the_wire(nt);
                self.last_sent = Some(nt.clone());
                out.push(Output::Send(Message::Notification(nt)));
            }
        }
        if self.state != State::Idle {
            out.push(Output::Disconnect);
        }
        self.stop_timers(out);
        self.enter(out, State::Idle, Some(DownReason::Stopped(reason)));
    }

    fn stop_timers(&mut self, out: &mut Vec<Output>) {
        for t in [
            Timer::ConnectRetry,
            Timer::Hold,
            Timer::Keepalive,
            Timer::SendHold,
            Timer::BfdHold,
            Timer::IdleHold,
        ] {
            out.push(Output::StopTimer(t));
        }
        self.idle_held = false;
    }

    /// Any error: optionally send a NOTIFICATION, drop the connection, go Idle, and (if still
    /// started) come back after a backoff.
    fn fail(
        &mut self,
        out: &mut Vec<Output>,
        reason: Option<DownReason>,
        notification: Option<Notification>,
    ) {
        let reason = match notification {
            Some(nt) => {
                let nt = self.on_the_wire(nt);
                self.last_sent = Some(nt.clone());
                out.push(Output::Send(Message::Notification(nt.clone())));
                reason.unwrap_or(DownReason::NotificationSent(nt))
            }
            None => reason.unwrap_or(DownReason::ConnectionFailed("closed".into())),
        };
        out.push(Output::Disconnect);
        self.stop_timers(out);
        self.enter(out, State::Idle, Some(reason));
        if self.started {
            if self.cfg.passive {
                self.enter(out, State::Active, None);
            } else {
                let delay = self.retry_delay();
                out.push(Output::ArmTimer(Timer::ConnectRetry, delay));
            }
        }
    }

    fn timer(&mut self, out: &mut Vec<Output>, t: Timer) {
        match (self.state, t) {
            // Event 9 ConnectRetryTimer_Expires.
            (State::Idle, Timer::ConnectRetry) if self.started => {
                if self.cfg.passive {
                    self.enter(out, State::Active, None);
                } else {
                    self.connect(out);
                }
            }
            (State::Connect, Timer::ConnectRetry) => {
                out.push(Output::Disconnect);
                self.connect(out);
            }
            (State::Active, Timer::ConnectRetry) if !self.cfg.passive => self.connect(out),
            // Event 10 HoldTimer_Expires.
            (State::OpenSent | State::OpenConfirm | State::Established, Timer::Hold) => {
                let nt = Notification::new(n::HOLD_TIMER_EXPIRED, 0);
                // draft-ietf-idr-bgp-bfd-strict-mode §10: say it was the wait for BFD.
                let why = if self.bfd_pending.is_some() {
                    DownReason::BfdNotUp
                } else {
                    DownReason::HoldTimerExpired
                };
                self.fail(out, Some(why), Some(nt));
            }
            (State::OpenSent, Timer::BfdHold) => self.bfd_hold_expired(out),
            (State::Idle, Timer::IdleHold) => self.idle_hold_expired(out),
            // Event 11 KeepaliveTimer_Expires.
            (State::OpenConfirm | State::Established, Timer::Keepalive) => {
                out.push(Output::Send(Message::Keepalive));
                self.arm_keepalive(out);
            }
            // RFC 9687 §4: the peer stopped reading; a NOTIFICATION is attempted, not awaited.
            (State::OpenSent | State::OpenConfirm | State::Established, Timer::SendHold) => {
                let nt = Notification::new(n::SEND_HOLD_TIMER_EXPIRED, 0);
                self.fail(out, Some(DownReason::SendHoldTimerExpired), Some(nt));
            }
            _ => {}
        }
    }

    fn tcp_connected(&mut self, out: &mut Vec<Output>, outbound: bool) {
        // Events 16/17: Tcp_CR_Acked, TcpConnectionConfirmed.
        if !matches!(self.state, State::Connect | State::Active) {
            return;
        }
        self.outbound = outbound;
        out.push(Output::StopTimer(Timer::ConnectRetry));
        let open = local_open(&self.cfg, self.restarting);
        out.push(Output::Send(Message::Open(open)));
        out.push(Output::ArmTimer(Timer::Hold, OPEN_HOLD));
        self.enter(out, State::OpenSent, None);
    }

    /// Event 17. The peer may connect while we wait out a backoff (Idle, started) or while
    /// our own connect is in flight (Connect): either way its connection is taken at once.
    fn tcp_accepted(&mut self, out: &mut Vec<Output>) {
        // RFC 4271 §8.2.2: Idle refuses connections, and a BFD hold-down keeps it Idle.
        if self.state == State::Idle && self.started && !self.idle_held {
            self.enter(out, State::Active, None);
        }
        self.tcp_connected(out, false);
    }

    /// RFC 4271 §6.8: an OPEN on a second connection from the peer. With the first one in
    /// OpenSent or OpenConfirm, the connection opened by the speaker with the higher BGP
    /// Identifier survives (compared as unsigned integers; on a tie, RFC 6286 §2.3, the one
    /// opened by the higher AS); the loser gets Cease 7. An Established session keeps its
    /// connection, unless the peer negotiated graceful restart: then a new connection means
    /// it restarted (RFC 4724 §4.2) and replaces the old one. When both connections were
    /// opened by the peer, it has given up the first, so the second replaces it.
    fn second_connection_open(&mut self, out: &mut Vec<Output>, d: Decoded) {
        let collision = || Notification::new(n::CEASE, cease::CONNECTION_COLLISION_RESOLUTION);
        let open = match &d.message {
            Message::Open(open) => open,
            // The peer settled the collision itself.
            Message::Notification(_) => {
                out.push(Output::CloseSecondConnection(None));
                return;
            }
            _ => {
                let nt = Notification::new(n::FSM_ERROR, fsm_err::UNEXPECTED_IN_OPENSENT);
                out.push(Output::CloseSecondConnection(Some(nt)));
                return;
            }
        };
        if !self.started {
            let nt = Notification::new(n::CEASE, cease::CONNECTION_REJECTED);
            out.push(Output::CloseSecondConnection(Some(nt)));
            return;
        }
        match self.state {
            State::Idle | State::Connect | State::Active => {}
            State::OpenSent | State::OpenConfirm => {
                if self.outbound && self.local_initiated_wins(open) {
                    out.push(Output::CloseSecondConnection(Some(collision())));
                    return;
                }
                let nt = collision();
                self.last_sent = Some(nt.clone());
                out.push(Output::Send(Message::Notification(nt.clone())));
                self.drop_connection(out, DownReason::NotificationSent(nt));
            }
            State::Established => {
                let restarted = self
                    .negotiated
                    .as_ref()
                    .is_some_and(|n| n.peer_graceful_restart.is_some());
                if !restarted {
                    out.push(Output::CloseSecondConnection(Some(collision())));
                    return;
                }
                let why = "the peer opened a new connection: it restarted (RFC 4724 §4.2)";
                self.drop_connection(out, DownReason::ConnectionFailed(why.into()));
            }
        }
        out.push(Output::AdoptSecondConnection);
        self.tcp_accepted(out);
        self.received(out, d);
    }

    /// Whether the connection we opened survives a collision with one the peer opened.
    fn local_initiated_wins(&self, open: &Open) -> bool {
        let local = self.cfg.router_id.addr().to_bits();
        let remote = open.router_id.addr().to_bits();
        if local != remote {
            return local > remote;
        }
        self.cfg.local_asn.0 > open.asn().0
    }

    /// Closes the current connection and waits in Active for the one being adopted.
    fn drop_connection(&mut self, out: &mut Vec<Output>, reason: DownReason) {
        out.push(Output::Disconnect);
        self.stop_timers(out);
        self.enter(out, State::Active, Some(reason));
    }

    fn tcp_failed(&mut self, out: &mut Vec<Output>, e: String) {
        // Event 18 TcpConnectionFails.
        match self.state {
            State::Connect => {
                let delay = self.retry_delay();
                out.push(Output::ArmTimer(Timer::ConnectRetry, delay));
                self.enter(out, State::Active, Some(DownReason::ConnectionFailed(e)));
            }
            State::OpenSent | State::OpenConfirm | State::Established => {
                self.fail(out, Some(DownReason::ConnectionFailed(e)), None);
            }
            State::Idle | State::Active => {}
        }
    }

    fn arm_keepalive(&mut self, out: &mut Vec<Output>) {
        if let Some(neg) = &self.negotiated
            && !neg.keepalive.is_zero()
        {
            out.push(Output::ArmTimer(Timer::Keepalive, neg.keepalive));
        }
    }

    fn restart_hold(&mut self, out: &mut Vec<Output>) {
        if let Some(neg) = &self.negotiated
            && !neg.hold_time.is_disabled()
        {
            out.push(Output::ArmTimer(
                Timer::Hold,
                Duration::from_secs(neg.hold_time.seconds().into()),
            ));
        }
    }

    fn fsm_error(&mut self, out: &mut Vec<Output>) {
        let subcode = match self.state {
            State::OpenSent => fsm_err::UNEXPECTED_IN_OPENSENT,
            State::OpenConfirm => fsm_err::UNEXPECTED_IN_OPENCONFIRM,
            State::Established => fsm_err::UNEXPECTED_IN_ESTABLISHED,
            _ => fsm_err::UNSPECIFIED,
        };
        self.fail(out, None, Some(Notification::new(n::FSM_ERROR, subcode)));
    }

    fn received(&mut self, out: &mut Vec<Output>, d: Decoded) {
        if !matches!(
            self.state,
            State::OpenSent | State::OpenConfirm | State::Established
        ) {
            return;
        }
        match (self.state, d.message) {
            // Events 24/25 NotifMsgVerErr / NotifMsg.
            (_, Message::Notification(nt)) => {
                self.last_received = Some(nt.clone());
                self.fail(out, Some(DownReason::NotificationReceived(nt)), None);
            }
            // draft-ietf-idr-bgp-bfd-strict-mode §8.5.5: a second OPEN while waiting.
            (State::OpenSent, Message::Open(_)) if self.bfd_pending.is_some() => {
                self.fsm_error(out);
            }
            // Event 19 BGPOpen.
            (State::OpenSent, Message::Open(open)) => match negotiate(&self.cfg, &open) {
                Err(nt) => self.fail(out, None, Some(nt)),
                Ok(neg) => {
                    out.push(Output::Negotiated(Box::new(neg.clone())));
                    self.peer_bfd_strict = Some(neg.peer_bfd_strict);
                    let wait_for_bfd = neg.bfd_strict && !self.bfd_up;
                    self.negotiated = Some(neg);
                    self.restarting = false;
                    if wait_for_bfd {
                        self.wait_for_bfd(out);
                        return;
                    }
                    out.push(Output::Send(Message::Keepalive));
                    self.arm_keepalive(out);
                    if self
                        .negotiated
                        .as_ref()
                        .is_some_and(|n| n.hold_time.is_disabled())
                    {
                        out.push(Output::StopTimer(Timer::Hold));
                    } else {
                        self.restart_hold(out);
                    }
                    self.enter(out, State::OpenConfirm, None);
                }
            },
            // draft-ietf-idr-bgp-bfd-strict-mode §8.5.6: the peer's BFD came Up first.
            (State::OpenSent, Message::Keepalive) if self.bfd_pending.is_some() => {
                self.restart_hold(out);
                self.bfd_pending = Some(BfdPending::PeerConfirmed);
            }
            // Event 26 KeepAliveMsg.
            (State::OpenConfirm, Message::Keepalive) => self.establish(out),
            (State::Established, Message::Keepalive) => self.restart_hold(out),
            // Event 27 UpdateMsg: validated on decode, then discarded (we do not import).
            // RFC 7606 errors short of a reset, AFI/SAFI disable included, are only counted:
            // the family's routes are ignored as every received route is (RFC 4760 §7), and a
            // reset would withdraw the node's routes for a route we never use.
            (State::Established, Message::Update(u)) => {
                self.restart_hold(out);
                let mut errors = d.errors;
                errors.extend(self.export_context().and_then(|ctx| {
                    unnegotiated_next_hop(&u, ctx.extended_next_hop_ipv4, &ctx.wire)
                }));
                if !errors.is_empty() {
                    out.push(Output::UpdateErrors(errors));
                }
            }
            (State::Established, Message::RouteRefresh(rr)) => {
                self.restart_hold(out);
                self.route_refresh(out, rr);
            }
            // Events 19 (OPEN outside OpenSent), 26/27 too early: FSM error.
            _ => self.fsm_error(out),
        }
    }

    fn establish(&mut self, out: &mut Vec<Output>) {
        self.restart_hold(out);
        self.retry.reset();
        self.enter(out, State::Established, None);
        self.send_full_table(out);
    }

    fn export_context(&self) -> Option<ExportContext> {
        let neg = self.negotiated.as_ref()?;
        Some(ExportContext {
            local_asn: self.cfg.local_asn,
            ibgp: neg.ibgp,
            families: neg.families.clone(),
            extended_next_hop_ipv4: neg.extended_next_hop_ipv4,
            link_local_next_hop: self.cfg.link_local_next_hop,
            wire: WireOptions {
                four_octet_as: neg.four_octet_as,
                extended_message: neg.extended_message,
            },
        })
    }

    fn send_updates(&mut self, out: &mut Vec<Output>, updates: Vec<Update>) {
        let any = !updates.is_empty();
        out.extend(
            updates
                .into_iter()
                .map(|u| Output::Send(Message::Update(u))),
        );
        // RFC 4271 §8.2.2: sending an UPDATE restarts the KeepaliveTimer.
        if any {
            self.arm_keepalive(out);
        }
    }

    /// Diffs desired against advertised and sends the minimal UPDATEs.
    fn send_changes(&mut self, out: &mut Vec<Output>) {
        let Some(ctx) = self.export_context() else {
            return;
        };
        let Some(desired) = &self.desired else {
            return;
        };
        let plan = self.rib.plan(desired, &ctx);
        if !plan.refused.is_empty() {
            out.push(Output::Refused(plan.refused.clone()));
        }
        if plan.is_empty() {
            return;
        }
        match rib_out::plan_updates(&plan, &ctx) {
            Ok(updates) => {
                self.rib.apply(&plan);
                self.send_updates(out, updates);
            }
            Err(_) => {
                let refused = plan
                    .announce
                    .values()
                    .flatten()
                    .map(|p| (*p, Refusal::AttributesTooLarge))
                    .collect();
                out.push(Output::Refused(refused));
            }
        }
    }

    /// After establishment: everything, then End-of-RIB for every negotiated family
    /// (RFC 4724 §4), so a peer holding our routes as stale flushes only what is gone. Before
    /// the first route set is known nothing is sent; its arrival sends the table then.
    fn send_full_table(&mut self, out: &mut Vec<Output>) {
        if self.desired.is_none() {
            return;
        }
        self.send_changes(out);
        if let Some(neg) = &self.negotiated {
            let families = neg.families.clone();
            let eors = families.into_iter().map(Update::end_of_rib).collect();
            self.send_updates(out, eors);
        }
    }

    /// A peer that asks faster than it reads gets one queued response per family plus one
    /// follow-up, not a table copy per request: while a response waits to be written, new
    /// requests only mark their family, answered once the queue drained (so every request
    /// still gets a full response that starts after it arrived).
    fn route_refresh(&mut self, out: &mut Vec<Output>, rr: RouteRefresh) {
        let Some(ctx) = self.export_context() else {
            return;
        };
        // RFC 2918 §4: ignore families we did not negotiate; RFC 7313 §5: ignore BoRR/EoRR
        // from the peer (they concern its routes) and unknown subtypes.
        if rr.subtype != RouteRefreshSubtype::Normal || !ctx.families.contains(&rr.family) {
            return;
        }
        // Before the first route set the answer is the full table that set brings; an empty
        // one now would be a refresh that says we have nothing (an EoRR flushes the peer's
        // stale routes).
        if self.desired.is_none() {
            return;
        }
        if self.refresh_draining {
            self.refresh_pending.insert(rr.family);
            return;
        }
        self.refresh_response(out, &ctx, rr.family);
        self.refresh_draining = true;
        out.push(Output::NotifyWhenDrained);
    }

    fn refresh_drained(&mut self, out: &mut Vec<Output>) {
        if self.state != State::Established || !self.refresh_draining {
            return;
        }
        self.refresh_draining = false;
        if self.refresh_pending.is_empty() {
            return;
        }
        let Some(ctx) = self.export_context() else {
            return;
        };
        for family in std::mem::take(&mut self.refresh_pending) {
            self.refresh_response(out, &ctx, family);
        }
        self.refresh_draining = true;
        out.push(Output::NotifyWhenDrained);
    }

    fn refresh_response(&mut self, out: &mut Vec<Output>, ctx: &ExportContext, family: Family) {
        let enhanced = self
            .negotiated
            .as_ref()
            .is_some_and(|n| n.enhanced_route_refresh);
        let marker =
            |subtype| Output::Send(Message::RouteRefresh(RouteRefresh { family, subtype }));
        if enhanced {
            out.push(marker(RouteRefreshSubtype::BeginningOfRouteRefresh));
        }
        // The table was encodable when first sent, so this does not fail in practice.
        if let Ok(updates) = rib_out::full_table_updates(&self.rib, family, ctx) {
            self.send_updates(out, updates);
        }
        // A plain response ends without End-of-RIB: RFC 2918 §4 asks for none, and RFC 4724
        // §2 defines it for the initial update only. EoRR is the marker when negotiated.
        if enhanced {
            out.push(marker(RouteRefreshSubtype::EndOfRouteRefresh));
        }
    }
}

/// Cease with an RFC 9003 message; a message over 255 octets is cut at a character
/// boundary, since the text is for humans and the stop must still happen.
fn shutdown_notification(subcode: u8, text: &str) -> Notification {
    let mut end = text
        .len()
        .min(crate::message::notification::MAX_SHUTDOWN_MESSAGE_LEN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = text.get(..end).unwrap_or_default();
    Notification::cease_with_message(subcode, text)
        .unwrap_or_else(|_| Notification::new(n::CEASE, subcode))
}
