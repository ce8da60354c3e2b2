//! One BFD session next to each BGP session that has `bfd` configured. Its events go to the
//! core with the session's, which decides what they mean for BGP (`core::bfd_gate`).

use std::io;
use std::time::Duration;

use bgp_proto::bfd::driver::{self, BfdTask, StopMode};

use bgp_proto::bfd::udp::UdpTransport;
use bgp_proto::bfd::{BfdSession, BfdSessionConfig};
use bgp_proto::session::driver::SessionEvent;
use podcidr_config::PeerConfig;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

/// Upper bound on a planned stop's AdminDown packets (three at the agreed interval, and
/// the interval is at most a minute by config; a stop never waits that long).
pub(super) const BFD_STOP_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub(super) struct BfdHandle {
    pub(super) task: BfdTask,
    forward: JoinHandle<()>,
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
        self.forward.abort();
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

/// Starts BFD for `p` (when configured); its events reach `events` as the session's do.
pub(super) fn start(
    p: &PeerConfig,
    restarting: bool,
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
    let forward = tokio::spawn(super::forward_events(
        p.name.clone(),
        rx,
        events,
        SessionEvent::Bfd,
    ));
    Some(Ok(BfdHandle { task, forward }))
}
