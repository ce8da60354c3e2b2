//! A reload that changes a running peer's `bfd`: BFD runs beside the BGP session, so neither
//! new timers (a Poll Sequence, RFC 5880 §6.8.3) nor BFD on or off resets BGP.

use podcidr_config::{BfdConfig, PeerConfig};

use super::{Core, Effect};

impl Core {
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
        // Without BFD nothing would ever release a session BFD holds down.
        if cfg.bfd.is_none()
            && let Some(p) = self.peers.get_mut(&cfg.name)
            && p.bfd_held
        {
            p.bfd_held = false;
            out.push(Effect::ResumePeer(cfg.name.clone()));
        }
    }
}
