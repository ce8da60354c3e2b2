//! The BFD session's say in the BGP session: a failed path resets it (RFC 5882 §3.2), and
//! in strict mode (draft-ietf-idr-bgp-bfd-strict-mode §8) the KEEPALIVE that confirms the
//! OPEN waits for BFD Up. Nothing here stops the session from reconnecting: a reset is a
//! failure like any other, retried with the ConnectRetry backoff.

use std::time::Duration;

use crate::iana::notification::{self as n, cease};
use crate::message::Message;
use crate::message::notification::Notification;

use super::super::{BfdInput, DownReason, Output, State, Timer};
use super::Session;

/// draft-ietf-idr-bgp-bfd-strict-mode §3 BfdHoldTime default: the wait for BFD Up when the
/// negotiated hold time is zero.
pub const BFD_HOLD_TIME: Duration = Duration::from_secs(30);

/// The OpenSent sub-states of §8.1 (the DelayOpen ones do not apply: no DelayOpenTimer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BfdPending {
    /// OpenSentBfdUpPending: the peer's OPEN is in, our KEEPALIVE waits for BFD Up.
    Open,
    /// OpenSentConfirmedBfdUpPending: the peer's KEEPALIVE came too; BFD Up establishes.
    PeerConfirmed,
}

impl Session {
    /// Strict mode is negotiated and the KEEPALIVE waits for BFD Up (the sub-states of
    /// draft-ietf-idr-bgp-bfd-strict-mode §8.1, shown as "held waiting for BFD").
    pub fn waiting_for_bfd(&self) -> bool {
        self.bfd_pending.is_some()
    }

    /// Whether the peer's last OPEN advertised BFD strict mode (`None` before any OPEN);
    /// kept when the session goes down, so status can say why a strict session did not
    /// wait.
    pub fn peer_bfd_strict(&self) -> Option<bool> {
        self.peer_bfd_strict
    }

    /// §8.5.5: the OPEN is accepted but BFD is not Up: no KEEPALIVE, stay in OpenSent. The
    /// hold timer (or, with hold time zero, the BfdHoldTimer) bounds the wait.
    pub(super) fn wait_for_bfd(&mut self, out: &mut Vec<Output>) {
        self.bfd_pending = Some(BfdPending::Open);
        if self
            .negotiated
            .as_ref()
            .is_some_and(|n| n.hold_time.is_disabled())
        {
            out.push(Output::StopTimer(Timer::Hold));
            out.push(Output::ArmTimer(Timer::BfdHold, BFD_HOLD_TIME));
        } else {
            self.restart_hold(out);
        }
    }

    pub(super) fn bfd(&mut self, out: &mut Vec<Output>, input: BfdInput) {
        let strict = self.negotiated.as_ref().is_some_and(|n| n.bfd_strict);
        // Capability 74 only while our BFD runs: every input but Unavailable comes from a
        // running BFD session.
        if !matches!(input, BfdInput::HoldDown(_)) {
            self.cfg.bfd_strict =
                self.bfd_strict_configured && !matches!(input, BfdInput::Unavailable);
        }
        match input {
            BfdInput::Up | BfdInput::Unavailable => {
                self.bfd_up = true;
                if let Some(pending) = self.bfd_pending {
                    self.release(out, pending);
                }
            }
            // §8.5.2 / §8.6.2: Down while strict mode waits or confirms ends the attempt;
            // in Connect and Active it is ignored (§8.3.2, §8.4.2), and without strict mode
            // a BFD that never came up never touches BGP.
            BfdInput::NotUp => {
                self.bfd_up = false;
                if strict && matches!(self.state, State::OpenSent | State::OpenConfirm) {
                    self.bfd_reset(out, "session went Down before coming Up".into());
                }
            }
            // RFC 5882 §3.2, §8.7.2: the path failed under an Established session.
            BfdInput::Failed(why) => {
                self.bfd_up = false;
                let reset = self.state == State::Established
                    || (strict && matches!(self.state, State::OpenSent | State::OpenConfirm));
                if reset {
                    self.bfd_reset(out, why);
                }
            }
            BfdInput::HoldDown(hold) => self.hold_down(out, hold),
        }
    }

    /// RFC 5882 §3.1 / RFC 4271 §8.1.1: a flapping BFD session keeps BGP Idle for `hold`.
    /// Bounded by construction: the hold is a timer, never a wait for BFD, and one running
    /// is not extended (the stranded session the gate must never make).
    fn hold_down(&mut self, out: &mut Vec<Output>, hold: Duration) {
        let down = matches!(self.state, State::Idle | State::Connect | State::Active);
        if !self.started || !down || self.idle_held || hold.is_zero() {
            return;
        }
        if self.state == State::Connect {
            out.push(Output::Disconnect);
        }
        out.push(Output::StopTimer(Timer::ConnectRetry));
        if self.state != State::Idle {
            self.enter(out, State::Idle, None);
        }
        out.push(Output::ArmTimer(Timer::IdleHold, hold));
        self.idle_held = true;
    }

    /// The hold-down is over: connect (or listen) again, as after a ConnectRetry backoff.
    pub(super) fn idle_hold_expired(&mut self, out: &mut Vec<Output>) {
        if !self.idle_held {
            return;
        }
        self.idle_held = false;
        out.push(Output::ArmTimer(Timer::ConnectRetry, Duration::ZERO));
    }

    /// A BFD hold-down keeps the session Idle (see [`BfdInput::HoldDown`]).
    pub fn held_down(&self) -> bool {
        self.idle_held
    }

    /// §8.5.1: BFD is Up: the withheld KEEPALIVE goes out.
    fn release(&mut self, out: &mut Vec<Output>, pending: BfdPending) {
        out.push(Output::StopTimer(Timer::BfdHold));
        out.push(Output::Send(Message::Keepalive));
        self.arm_keepalive(out);
        match pending {
            BfdPending::Open => self.enter(out, State::OpenConfirm, None),
            BfdPending::PeerConfirmed => self.establish(out),
        }
    }

    /// Cease/BFD Down (RFC 9384, draft §9), then Idle and the usual reconnect backoff.
    fn bfd_reset(&mut self, out: &mut Vec<Output>, why: String) {
        let nt = Notification::new(n::CEASE, cease::BFD_DOWN);
        self.fail(out, Some(DownReason::BfdDown(why)), Some(nt));
    }

    /// §8.5.3: strict mode with hold time zero, and BFD never came Up.
    pub(super) fn bfd_hold_expired(&mut self, out: &mut Vec<Output>) {
        if self.bfd_pending.is_some() {
            let nt = Notification::new(n::CEASE, cease::BFD_DOWN);
            self.fail(out, Some(DownReason::BfdNotUp), Some(nt));
        }
    }
}
