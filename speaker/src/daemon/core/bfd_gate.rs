//! The rules between a BFD session and its BGP session, pure: what a BFD state change says
//! to BGP (RFC 5882 §3.2, the events of draft-ietf-idr-bgp-bfd-strict-mode §4), and how BFD
//! ends when BGP stops (RFC 5882 §4.3). The BGP session decides what that means in its state
//! (`bgp_proto::session::BfdInput`): a failure resets an Established session, which then
//! reconnects on its own backoff; only strict mode, when both OPENs carry it, waits for Up.

use std::time::Duration;

use bgp_proto::bfd::StopMode;
use bgp_proto::bfd::{BfdState, Diag};
use bgp_proto::session::{BfdInput, StopReason};
use podcidr_config::{BfdConfig, Community, PeerConfig};

use super::{Effect, Notice};

/// What the gate tells the BGP session after a BFD state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateAction {
    /// The path failed (Up → Down): an Established session is reset with Cease/BFD Down.
    Failed(Diag),
    /// BFD is Down and was not Up: only a strict-mode session cares (§8.5.2).
    NotUp,
    /// BFD is Up, or the peer stopped it on purpose: nothing for BGP to wait for.
    Up,
}

impl GateAction {
    pub fn input(self) -> BfdInput {
        match self {
            GateAction::Failed(d) => BfdInput::Failed(d.as_str().to_owned()),
            GateAction::NotUp => BfdInput::NotUp,
            GateAction::Up => BfdInput::Up,
        }
    }
}

/// The gate's rule, pure. Nothing here holds BGP down: a failed path resets it once, and BGP
/// reconnects (and accepts the peer's connections) whatever BFD does next.
pub fn gate_action(
    from: BfdState,
    to: BfdState,
    diag: Diag,
    remote_state: BfdState,
) -> Option<GateAction> {
    match (from, to) {
        // RFC 5882 §3.2: a peer that went AdminDown stopped BFD on purpose; the path may be
        // fine, so BGP stays up (and strict mode has nothing to wait for, Event 30).
        (_, BfdState::Down) if remote_state == BfdState::AdminDown => Some(GateAction::Up),
        (BfdState::Up, BfdState::Down) => Some(GateAction::Failed(diag)),
        (_, BfdState::Down) => Some(GateAction::NotUp),
        (_, BfdState::Up | BfdState::AdminDown) => Some(GateAction::Up),
        _ => None,
    }
}

/// The longest handover window: 2^32 - 1 µs (about 71 min 35 s), the detection time the
/// interval fields themselves can carry. Longer windows are expressible (255 × 4295 s), but
/// an engine that keeps the detection time in the fields' 32-bit microseconds would
/// overflow into a short one, and a false Down is what the handover exists to avoid. The
/// longest restart time alone (4095 s) already fits.
pub const MAX_HANDOVER_WINDOW: Duration = Duration::from_micros(u32::MAX as u64);

/// How long the peer should believe in our BFD session across a planned restart
/// (RFC 5882 §4.3): as long as it keeps our routes, so a peer that ends its BGP session on
/// BFD Down (BIRD `bfd on`) does not drop routes graceful restart keeps. That is
/// `restartTime`, plus `longLivedStaleTime` where long-lived graceful restart applies
/// (RFC 9494; not with `no-llgr`, which asks the peer to drop at `restartTime`). At least
/// 1 s (a restart time of 0 keeps nothing: the handover then only spans the close), at
/// most [`MAX_HANDOVER_WINDOW`]: past that, the peer's BFD declares Down and such a peer
/// drops the long-lived stale routes then.
pub fn handover_window(p: &PeerConfig) -> Duration {
    let gr = p.graceful_restart;
    let llgr = if gr.enabled && !p.communities.contains(&Community::NO_LLGR) {
        gr.long_lived_stale_time
    } else {
        0
    };
    let secs = u64::from(gr.restart_time) + u64::from(llgr);
    Duration::from_secs(secs.max(1)).min(MAX_HANDOVER_WINDOW)
}

/// What a planned restart does to a BFD peer that its config does not say, one line per
/// peer (`--check-config` prints them as notes): a restart time of 0 without long-lived
/// graceful restart keeps no routes at the router (BFD or not), and a window past
/// [`MAX_HANDOVER_WINDOW`] ends early at a ToR that ends BGP on BFD Down.
pub fn handover_notes(peers: &[PeerConfig]) -> Vec<String> {
    let mut notes = Vec::new();
    for p in peers {
        let gr = p.graceful_restart;
        if p.bfd.is_none() || !gr.enabled {
            continue;
        }
        let llgr = gr.long_lived_stale_time > 0 && !p.communities.contains(&Community::NO_LLGR);
        if gr.restart_time == 0 && !llgr {
            notes.push(format!(
                "peer {}: gracefulRestart.restartTime 0 without longLivedStaleTime: the router keeps none of our routes across a restart, so every rollout withdraws them (BFD or not; the BFD handover spans only the close); set a restart time, or longLivedStaleTime for restartTime 0 as FRR advises",
                p.name
            ));
        }
        let total = u64::from(gr.restart_time)
            + if llgr {
                u64::from(gr.long_lived_stale_time)
            } else {
                0
            };
        if Duration::from_secs(total) > MAX_HANDOVER_WINDOW {
            notes.push(format!(
                "peer {}: restartTime + longLivedStaleTime is {total} s; the BFD handover lasts at most {} s, after which a ToR that ends BGP on BFD Down (BIRD `bfd on`) drops the long-lived stale routes",
                p.name,
                MAX_HANDOVER_WINDOW.as_secs()
            ));
        }
    }
    notes
}

/// How BFD ends with its BGP session: a graceful-restart stop hands the session over to the
/// next process for `window` ([`handover_window`]); every other stop is AdminDown.
pub fn stop_mode(reason: &StopReason, window: Duration) -> StopMode {
    match reason {
        StopReason::GracefulRestart => StopMode::Handover(window),
        _ => StopMode::AdminDown,
    }
}

/// A peer's BFD in the core: its state changes through the gate, and a reload that changes a
/// running peer's `bfd`. BFD runs beside the BGP session, so neither new timers (a Poll
/// Sequence, RFC 5880 §6.8.3) nor BFD on or off resets BGP; a change of strict mode does
/// (capability 74 is in the OPEN): config's diff makes that a reset.
impl super::Core {
    /// The BFD gate (RFC 5882 §3.2): every state change goes to the BGP session as a
    /// [`GateAction`]; a failure resets it (Cease/BFD Down), nothing holds it down.
    pub(super) fn bfd_state_changed(
        &mut self,
        out: &mut Vec<Effect>,
        peer: &str,
        (from, to, diag, remote_state): (BfdState, BfdState, Diag, BfdState),
    ) {
        if !self.sessions.peers.contains_key(peer) {
            return;
        }
        let gate = gate_action(from, to, diag, remote_state);
        if let Some(g) = gate {
            out.push(Effect::Bfd {
                name: peer.to_owned(),
                input: g.input(),
            });
        }
        if let Some(GateAction::Failed(_)) = gate {
            self.bfd_dampen(out, peer);
        }
        out.push(Effect::Notice(Notice::BfdStateChanged {
            peer: peer.to_owned(),
            from,
            to,
            diag,
            gate,
        }));
    }

    /// A BFD failure of a flapping session holds its BGP session down after the reset
    /// (RFC 5882 §3.1; `bfd_dampening` says how long, bounded), and the node says until when.
    fn bfd_dampen(&mut self, out: &mut Vec<Effect>, peer: &str) {
        let now = self.now;
        let flaps = self.sessions.bfd_flaps.entry(peer.to_owned()).or_default();
        let Some(hold) = flaps.failed(now) else {
            return;
        };
        let remembered = flaps.remembered(now);
        let note = format!(
            "BFD with {peer} failed {remembered} times within minutes: BGP session held down for {} s before it reconnects (RFC 5882 §3.1)",
            hold.as_secs()
        );
        self.node_event(
            out,
            super::EventReason::BfdHoldDown,
            true,
            format!("Peer {peer}"),
            note,
        );
        out.push(Effect::Bfd {
            name: peer.to_owned(),
            input: BfdInput::HoldDown(hold),
        });
        out.push(Effect::Notice(Notice::BfdHeldDown {
            peer: peer.to_owned(),
            hold,
            flaps: remembered,
            until_unix: self.unix.saturating_add(hold.as_secs()),
        }));
    }

    /// The peer's BFD session could not start: BGP runs without it, failures detected by the
    /// hold timer only. A strict-mode session has nothing to wait for (BfdDisabled,
    /// draft-ietf-idr-bgp-bfd-strict-mode §8.5.1), as with BFD Up, and its OPENs leave out
    /// capability 74, which would promise the peer a BFD we do not run; the node says why.
    pub(super) fn bfd_unavailable(&mut self, out: &mut Vec<Effect>, peer: &str, error: String) {
        out.push(Effect::Bfd {
            name: peer.to_owned(),
            input: BfdInput::Unavailable,
        });
        out.push(Effect::Notice(Notice::BfdUnavailable {
            peer: peer.to_owned(),
            error,
        }));
    }

    /// `before`: the peer's `bfd` in the running config.
    pub(super) fn bfd_reconfigured(
        &mut self,
        out: &mut Vec<Effect>,
        cfg: &PeerConfig,
        before: Option<BfdConfig>,
    ) {
        if before == cfg.bfd {
            return;
        }
        out.push(Effect::SetBfd(Box::new(cfg.clone())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BfdState::*;

    #[test]
    fn gate_table_bfd_failure_resets_remote_admin_down_never_does_rfc5882_3_2() {
        let timeout = Diag::ControlDetectionTimeExpired;
        let neighbor = Diag::NeighborSignaledSessionDown;
        let rows = [
            // (from, to, diag, remote state) → action
            ((Up, Down, timeout, Down), Some(GateAction::Failed(timeout))),
            (
                (Up, Down, neighbor, Down),
                Some(GateAction::Failed(neighbor)),
            ),
            // The peer's AdminDown is never a failure, from any state.
            ((Up, Down, neighbor, AdminDown), Some(GateAction::Up)),
            ((Init, Down, neighbor, AdminDown), Some(GateAction::Up)),
            // Never Up: not a failure, so a non-strict session never hears of it.
            ((Init, Down, timeout, Down), Some(GateAction::NotUp)),
            ((AdminDown, Down, Diag::None, Down), Some(GateAction::NotUp)),
            ((Down, Init, Diag::None, Down), None),
            ((Init, Up, Diag::None, Up), Some(GateAction::Up)),
            ((Down, Up, Diag::None, Init), Some(GateAction::Up)),
            (
                (Up, AdminDown, Diag::AdministrativelyDown, Up),
                Some(GateAction::Up),
            ),
        ];
        for ((from, to, diag, remote), want) in rows {
            assert_eq!(
                gate_action(from, to, diag, remote),
                want,
                "{from:?} -> {to:?} remote {remote:?}"
            );
        }
    }

    #[test]
    fn gate_never_holds_bgp_down_whatever_bfd_does_rfc5882_3_2() {
        // Every transition maps to an input the session handles without stopping: there is
        // no "hold" left to get stuck in (the review's stranded session).
        let states = [AdminDown, Down, Init, Up];
        for from in states {
            for to in states {
                for remote in states {
                    let a = gate_action(from, to, Diag::ControlDetectionTimeExpired, remote);
                    if let Some(GateAction::Failed(_)) = a {
                        assert_eq!((from, to), (Up, Down));
                        assert_ne!(remote, AdminDown);
                    }
                }
            }
        }
    }

    #[test]
    fn graceful_restart_hands_bfd_over_everything_else_sends_admin_down_rfc5882_4_3() {
        let window = Duration::from_secs(120);
        assert_eq!(
            stop_mode(&StopReason::GracefulRestart, window),
            StopMode::Handover(window)
        );
        for r in [
            StopReason::Shutdown("bye".into()),
            StopReason::Deconfigured,
            StopReason::ConfigurationChange,
        ] {
            assert_eq!(stop_mode(&r, window), StopMode::AdminDown, "{r:?}");
        }
    }

    /// RFC 9494 × RFC 5882 §4.3: the peer keeps our routes for restartTime, then as
    /// long-lived stale for longLivedStaleTime; the handover spans both, bounded.
    #[test]
    fn handover_window_spans_restart_and_long_lived_stale_time_rfc9494_4() {
        let s = Duration::from_secs;
        let peer = |restart: u16, llgr: u32, enabled: bool, no_llgr: bool| {
            let yaml = "nodeName: node1\nasn: 64512\nrouterId: 198.18.0.2\n\
                        source: {kind: file, path: /dev/null}\n\
                        peers: [{name: tor, address: 198.18.0.1, asn: 65000, bfd: {}}]\n";
            let mut p = podcidr_config::Config::from_yaml_str(yaml).unwrap().peers[0].clone();
            p.graceful_restart.enabled = enabled;
            p.graceful_restart.restart_time = restart;
            p.graceful_restart.long_lived_stale_time = llgr;
            if no_llgr {
                p.communities.push(Community::NO_LLGR);
            }
            p
        };
        // (restartTime, longLivedStaleTime, GR on, no-llgr) → window
        let rows = [
            ((120, 0, true, false), s(120)),
            ((120, 3600, true, false), s(3720)),
            // FRR's advice with LLGR: restart time 0, straight to long-lived stale.
            ((0, 3600, true, false), s(3600)),
            // Nothing kept: the handover only spans the close.
            ((0, 0, true, false), s(1)),
            // no-llgr: the peer drops at restartTime, so the window ends there.
            ((120, 3600, true, true), s(120)),
            // Bounded: about 71.6 min.
            ((120, 86_400, true, false), MAX_HANDOVER_WINDOW),
            ((4095, 16_777_215, true, false), MAX_HANDOVER_WINDOW),
        ];
        for ((restart, llgr, enabled, no_llgr), want) in rows {
            let p = peer(restart, llgr, enabled, no_llgr);
            assert_eq!(handover_window(&p), want, "{restart} {llgr} {no_llgr}");
        }
        assert_eq!(MAX_HANDOVER_WINDOW.as_micros(), u128::from(u32::MAX));
        // --check-config says what the window cannot do.
        let notes = handover_notes(&[
            peer(0, 0, true, false),
            peer(0, 3600, true, false),
            peer(120, 86_400, true, false),
        ]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("restartTime 0 without longLivedStaleTime"));
        assert!(notes[1].contains("86520 s") && notes[1].contains("4294 s"));
        // Every window the fields can announce at the default 300 ms × 3.
        let (interval, mult) = bgp_proto::bfd::timers::handover_timers(
            MAX_HANDOVER_WINDOW,
            Duration::from_millis(300),
            3,
        );
        assert!(interval * u32::from(mult) >= MAX_HANDOVER_WINDOW);
        assert!(interval.as_micros() <= u128::from(u32::MAX));
    }
}
