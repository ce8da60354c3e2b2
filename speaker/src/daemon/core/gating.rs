//! The forwarding gate in the core: what [`forwarding`](super::forwarding) holds, decided
//! again whenever one of its inputs changes (the guarded set, the routing table, the
//! conflist, the config), and the notices that say what changed.

use std::borrow::Cow;

use super::forwarding::{self, GateInputs, Held};
use super::guard::Guarded;
use super::*;

impl Core {
    /// The CIDRs offered to peers: the guarded set without what the gate holds.
    pub(super) fn forwardable<'a>(&self, g: &'a Guarded) -> Cow<'a, [IpNet]> {
        if self.announce.fwd_held.is_empty() {
            Cow::Borrowed(&g.announce)
        } else {
            Cow::Owned(forwarding::released(&g.announce, &self.announce.fwd_held))
        }
    }

    /// The gate cannot decide yet: with `cni.enabled` and CIDRs to hand out, no conflist
    /// write has finished since the process started. Routes count as not known meanwhile (no UPDATE, no End-of-RIB;
    /// graceful-restart sessions wait), so a restart does not withdraw everything for the
    /// milliseconds the first write takes.
    pub(super) fn gate_pending(&self) -> bool {
        self.config.forwarding_gate.enabled
            && self.config.cni.enabled
            && !self.cni.settled()
            && self
                .announce
                .guarded
                .as_ref()
                .is_some_and(|g| !g.announce.is_empty())
    }

    /// Decides again what the gate holds; `true` when that changed (routes must be pushed).
    pub(super) fn regate(&mut self, out: &mut Vec<Effect>) -> bool {
        if self.gate_pending() {
            return false;
        }
        let gate = &self.config.forwarding_gate;
        let held = match &self.announce.guarded {
            Some(g) if gate.enabled => {
                let uplinks = forwarding::uplinks(&self.kernel.routes, &self.config.peers);
                let cni = &self.config.cni;
                forwarding::held(
                    &g.announce,
                    &GateInputs {
                        config: gate,
                        table: &self.kernel.routes,
                        uplinks: &uplinks,
                        cni_written: cni.enabled.then(|| self.cni.written_cidrs(cni)),
                    },
                )
            }
            _ => Vec::new(),
        };
        if held == *self.announce.fwd_held {
            return false;
        }
        for h in &held {
            if !self.announce.fwd_held.contains(h) {
                out.push(Effect::Notice(Notice::ForwardingHeld {
                    cidr: h.cidr,
                    reason: h.reason,
                }));
            }
        }
        let announced = |c: &IpNet| {
            self.announce
                .guarded
                .as_ref()
                .is_some_and(|g| g.announce.binary_search(c).is_ok())
        };
        for h in self.announce.fwd_held.iter() {
            let still = held.binary_search_by(|x| x.cidr.cmp(&h.cidr)).is_ok();
            if !still && announced(&h.cidr) {
                out.push(Effect::Notice(Notice::ForwardingReleased { cidr: h.cidr }));
            }
        }
        let counts = forwarding::count(&held);
        if counts != forwarding::count(&self.announce.fwd_held) {
            out.push(Effect::Notice(Notice::HeldNow(Box::new(counts))));
        }
        self.announce.fwd_held = Arc::new(held);
        true
    }

    /// What the gate holds, for the report (`None` when it is off).
    pub(super) fn gate_report(&self) -> Option<Arc<Vec<Held>>> {
        self.config
            .forwarding_gate
            .enabled
            .then(|| Arc::clone(&self.announce.fwd_held))
    }
}
