//! RFC 8326 graceful shutdown, as core decisions: when every route carries GRACEFUL_SHUTDOWN
//! (a final stop's wait, a cordoned Node with `gracefulShutdown.onCordon`), and the final
//! stop's wait itself.

use std::borrow::Cow;

use podcidr_config::{Community, PeerConfig};

use super::{Core, Effect};

impl Core {
    /// RFC 8326: during a final stop's wait, and while the Node is cordoned (when
    /// `gracefulShutdown.onCordon`), every route carries GRACEFUL_SHUTDOWN.
    pub(super) fn graceful_shutdown_active(&self) -> bool {
        self.departure.final_wait
            || (self.config.graceful_shutdown.on_cordon && self.node().unschedulable)
    }

    /// The peer config routes are built from: the peer's communities, plus 65535:0 while
    /// graceful shutdown is active.
    pub(super) fn announce_config<'a>(&self, cfg: &'a PeerConfig) -> Cow<'a, PeerConfig> {
        let gshut = Community::GRACEFUL_SHUTDOWN;
        if !self.graceful_shutdown_active() || cfg.communities.contains(&gshut) {
            return Cow::Borrowed(cfg);
        }
        let mut cfg = cfg.clone();
        cfg.communities.push(gshut);
        Cow::Owned(cfg)
    }

    /// A final stop: with a wait configured and sessions to warn, re-announce every route
    /// with GRACEFUL_SHUTDOWN and ask the loop to wait; `true` when it does.
    pub(super) fn begin_final_wait(&mut self, out: &mut Vec<Effect>) -> bool {
        let wait = self.config.graceful_shutdown.wait;
        if self.departure.final_wait || wait.is_zero() || self.sessions.peers.is_empty() {
            return false;
        }
        self.departure.final_wait = true;
        self.push_routes(out);
        out.push(Effect::GracefulShutdownWait(wait));
        true
    }
}
