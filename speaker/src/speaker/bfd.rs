//! One BFD session next to each BGP session that has `bfd` configured, and the gate between
//! them: BFD Up → Down holds the BGP session down at once (RFC 5882 §3.2, Cease/BFD Down
//! per RFC 9384) until BFD is Up again; a peer's AdminDown does not (RFC 5882 §3.2).

use std::io;
use std::time::Duration;

use bgp_proto::bfd::driver::{self, BfdEvent, BfdTask, StopMode};
use bgp_proto::bfd::udp::UdpTransport;
use bgp_proto::bfd::{BfdSession, BfdSessionConfig, BfdState, Diag};
use bgp_proto::session::StopReason;
use bgp_proto::session::driver::{HoldControl, SessionEvent};
use podcidr_config::PeerConfig;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

/// Upper bound on a planned stop's AdminDown packets (three at the agreed interval, and
/// the interval is at most a minute by config; a stop never waits that long).
pub(super) const BFD_STOP_WAIT: Duration = Duration::from_secs(2);

/// What the gate does with the BGP session after a BFD state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GateAction {
    /// Take BGP down now and keep it down: the path failed.
    HoldDown(Diag),
    /// BFD is Up again: let BGP reconnect.
    Resume,
}

/// The gate's rule, pure. `held`: the BGP session is held down by an earlier BFD Down.
pub(super) fn gate_action(
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

#[derive(Debug)]
pub(super) struct BfdHandle {
    pub(super) task: BfdTask,
    gate: JoinHandle<()>,
}

impl BfdHandle {
    /// Ends BFD the way `mode` says, bounded (AdminDown and handover send a few packets).
    pub(super) async fn stop(self, mode: StopMode) {
        self.task.stop(mode);
        if tokio::time::timeout(BFD_STOP_WAIT, self.task.wait())
            .await
            .is_err()
        {
            tracing::warn!("BFD AdminDown not sent within {BFD_STOP_WAIT:?}");
        }
        self.gate.abort();
    }
}

fn session_config(p: &PeerConfig) -> Option<BfdSessionConfig> {
    let b = p.bfd?;
    Some(BfdSessionConfig {
        // Random and non-zero (RFC 5880 §6.3); one session per peer address, so no clash
        // within this process.
        my_discriminator: fastrand::u32(1..),
        desired_min_tx: b.min_tx,
        required_min_rx: b.min_rx,
        detect_mult: b.multiplier,
        jitter_seed: fastrand::u64(..),
    })
}

/// Starts BFD for `p` (when configured) and the gate that drives its BGP session.
pub(super) fn start(
    p: &PeerConfig,
    restarting: bool,
    bgp: HoldControl,
    events: mpsc::Sender<(String, SessionEvent)>,
) -> Option<io::Result<BfdHandle>> {
    let cfg = session_config(p)?;
    // Interface (link-local) peers are refused with `bfd` by the config; a default gateway is
    // resolved to its address before a session starts.
    let Some(peer) = p.address.fixed() else {
        return Some(Err(io::Error::other(format!(
            "BFD needs the peer's address, not {}",
            p.address
        ))));
    };
    let transport = match UdpTransport::bind(p.local_address, peer) {
        Ok(t) => t,
        Err(e) => return Some(Err(e)),
    };
    let (tx, rx) = broadcast::channel(64);
    // After a planned restart the peer may still run our previous process's session.
    let session = if restarting {
        BfdSession::resuming(cfg)
    } else {
        BfdSession::new(cfg)
    };
    let task = driver::spawn(session, peer, transport, tx);
    let gate = tokio::spawn(run_gate(p.name.clone(), rx, bgp, events));
    Some(Ok(BfdHandle { task, gate }))
}

async fn run_gate(
    peer: String,
    mut rx: broadcast::Receiver<BfdEvent>,
    bgp: HoldControl,
    events: mpsc::Sender<(String, SessionEvent)>,
) {
    use broadcast::error::RecvError;
    let mut held = false;
    loop {
        let ev = match rx.recv().await {
            Ok(ev) => ev,
            // Only drop reports can pile up this fast; state changes are rare.
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        if let BfdEvent::StateChanged {
            from,
            to,
            diag,
            remote_state,
        } = ev
        {
            match gate_action(from, to, diag, remote_state, held) {
                Some(GateAction::HoldDown(diag)) => {
                    held = true;
                    bgp.hold_down(StopReason::BfdDown(diag.as_str().to_owned()));
                }
                Some(GateAction::Resume) => {
                    held = false;
                    bgp.resume();
                }
                None => {}
            }
        }
        if events
            .send((peer.clone(), SessionEvent::Bfd(ev)))
            .await
            .is_err()
        {
            return;
        }
    }
}

/// How BFD ends with its BGP session: a graceful-restart stop hands the session over to the
/// next process within the restart time; every other stop is AdminDown.
pub(super) fn stop_mode(reason: &StopReason, restart_time: u16) -> StopMode {
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
