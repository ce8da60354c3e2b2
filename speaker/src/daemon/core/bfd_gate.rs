//! The rules between a BFD session and its BGP session, pure: when BFD holds BGP down or lets
//! it reconnect (RFC 5882 §3.2), and how BFD ends when BGP stops (RFC 5882 §4.3).

use std::time::Duration;

use bgp_proto::bfd::StopMode;
use bgp_proto::bfd::{BfdState, Diag};
use bgp_proto::session::StopReason;

/// What the gate does with the BGP session after a BFD state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateAction {
    /// Take BGP down now and keep it down: the path failed.
    HoldDown(Diag),
    /// BFD is Up again: let BGP reconnect.
    Resume,
}

/// The gate's rule, pure. `held`: the BGP session is held down by an earlier BFD Down.
pub fn gate_action(
    from: BfdState,
    to: BfdState,
    diag: Diag,
    remote_state: BfdState,
    held: bool,
) -> Option<GateAction> {
    match (from, to) {
        // RFC 5882 §3.2: a peer that went AdminDown stopped BFD on purpose; the path may be
        // fine, so BGP stays up.
        (BfdState::Up, BfdState::Down) if remote_state == BfdState::AdminDown => None,
        (BfdState::Up, BfdState::Down) => Some(GateAction::HoldDown(diag)),
        (_, BfdState::Up) if held => Some(GateAction::Resume),
        _ => None,
    }
}

/// How BFD ends with its BGP session: a graceful-restart stop hands the session over to the
/// next process within the restart time; every other stop is AdminDown.
pub fn stop_mode(reason: &StopReason, restart_time: u16) -> StopMode {
    match reason {
        StopReason::GracefulRestart => {
            StopMode::Handover(Duration::from_secs(u64::from(restart_time.max(1))))
        }
        _ => StopMode::AdminDown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BfdState::*;

    #[test]
    fn gate_table_rfc5882_3_2() {
        let timeout = Diag::ControlDetectionTimeExpired;
        let neighbor = Diag::NeighborSignaledSessionDown;
        let rows = [
            // (from, to, diag, remote state, held) → action
            (
                (Up, Down, timeout, Down, false),
                Some(GateAction::HoldDown(timeout)),
            ),
            (
                (Up, Down, neighbor, Down, false),
                Some(GateAction::HoldDown(neighbor)),
            ),
            ((Up, Down, neighbor, AdminDown, false), None),
            ((Down, Init, Diag::None, Down, true), None),
            ((Init, Up, Diag::None, Up, true), Some(GateAction::Resume)),
            ((Down, Up, Diag::None, Init, true), Some(GateAction::Resume)),
            ((Init, Up, Diag::None, Up, false), None),
            ((Up, AdminDown, Diag::AdministrativelyDown, Up, false), None),
        ];
        for ((from, to, diag, remote, held), want) in rows {
            assert_eq!(
                gate_action(from, to, diag, remote, held),
                want,
                "{from:?} -> {to:?} remote {remote:?} held {held}"
            );
        }
    }

    #[test]
    fn graceful_restart_hands_bfd_over_everything_else_sends_admin_down_rfc5882_4_3() {
        assert_eq!(
            stop_mode(&StopReason::GracefulRestart, 120),
            StopMode::Handover(Duration::from_secs(120))
        );
        for r in [
            StopReason::Shutdown("bye".into()),
            StopReason::Deconfigured,
            StopReason::ConfigurationChange,
        ] {
            assert_eq!(stop_mode(&r, 120), StopMode::AdminDown, "{r:?}");
        }
    }
}
