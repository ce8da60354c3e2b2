//! A reload that changes a running peer's `bfd`: BFD runs beside the BGP session, so neither
//! new timers (a Poll Sequence, RFC 5880 §6.8.3) nor BFD on or off resets BGP. A change of
//! strict mode does (capability 74 is in the OPEN): config's diff makes that a reset.

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
    }
}
