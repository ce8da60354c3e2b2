//! The forwarding gate in the core: what [`forwarding`](super::forwarding) holds, decided
//! again whenever one of its inputs changes (the guarded set, the routing table, the
//! conflist, the config) and on ticks while a withdraw hold-down runs, and the notices that
//! say what changed.
//!
//! Hold-down (`forwardingGate.withdrawHoldDown`): a CIDR the gate let through stays announced
//! that long after its verdict turns to "hold", and is withdrawn only if the verdict still
//! says so then; a CIDR never let through is held at once, and a held one is released at
//! once (no delay before announcing). `mode: report` runs the same decisions and only
//! reports them: [`Core::forwardable`] offers everything.

use std::borrow::Cow;

use super::forwarding::{self, GateInputs, Held};
use super::guard::Guarded;
use super::since::Since;
use super::*;
use podcidr_config::GateMode;

impl Core {
    /// The CIDRs offered to peers: the guarded set without what the gate holds (all of it
    /// with `mode: report`).
    pub(super) fn forwardable<'a>(&self, g: &'a Guarded) -> Cow<'a, [IpNet]> {
        if self.announce.fwd_held.is_empty() || !self.config.forwarding_gate.enforces() {
            Cow::Borrowed(&g.announce)
        } else {
            Cow::Owned(forwarding::released(&g.announce, &self.announce.fwd_held))
        }
    }

    /// The gate cannot decide yet: with `cni.enabled` and CIDRs to hand out, no conflist
    /// write has finished since the process started. Routes count as not known meanwhile (no UPDATE, no End-of-RIB;
    /// graceful-restart sessions wait), so a restart does not withdraw everything for the
    /// milliseconds the first write takes. Only an enforcing gate waits.
    pub(super) fn gate_pending(&self) -> bool {
        self.config.forwarding_gate.enforces()
            && self.config.cni.enabled
            && !self.cni.settled()
            && self
                .announce
                .guarded
                .as_ref()
                .is_some_and(|g| !g.announce.is_empty())
    }

    /// The gate's verdicts now, before the hold-down (empty when it is off).
    fn verdicts(&self) -> Vec<Held> {
        let gate = &self.config.forwarding_gate;
        match &self.announce.guarded {
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
        }
    }

    /// Decides again what the gate holds; `true` when that changed (routes must be pushed).
    pub(super) fn regate(&mut self, out: &mut Vec<Effect>) -> bool {
        if self.gate_pending() {
            return false;
        }
        let gate = &self.config.forwarding_gate;
        // What a gate that is off "holds" (nothing) counts as enforced: only `mode: report`
        // moves the counts to the would-hold gauge.
        let enforced = gate.mode == GateMode::Enforce;
        let hold_down = gate.withdraw_hold_down;
        let mut held = Vec::new();
        let mut deferred = BTreeMap::new();
        for h in self.verdicts() {
            // Let through at the last decision: it waits out the hold-down, announced.
            if self.announce.fwd_released.contains(&h.cidr) && !hold_down.is_zero() {
                let since = self.announce.fwd_deferred.get(&h.cidr).copied();
                if !since.is_some_and(|s| s.over(self.now, hold_down)) {
                    if since.is_none() {
                        out.push(Effect::Notice(Notice::ForwardingWithdrawDeferred {
                            cidr: h.cidr,
                            reason: h.reason,
                            hold_down,
                        }));
                    }
                    deferred.insert(h.cidr, since.unwrap_or(Since::NextTick));
                    continue;
                }
            }
            held.push(h);
        }
        self.announce.fwd_deferred = deferred;
        self.announce.fwd_released = match &self.announce.guarded {
            Some(g) => forwarding::released(&g.announce, &held)
                .into_iter()
                .collect(),
            None => BTreeSet::new(),
        };
        let mode_changed = self.announce.fwd_enforced != enforced;
        if held == *self.announce.fwd_held && !mode_changed {
            return false;
        }
        for h in &held {
            // A mode change says every verdict again, in the new mode's words.
            if mode_changed || !self.announce.fwd_held.contains(h) {
                out.push(Effect::Notice(Notice::ForwardingHeld {
                    cidr: h.cidr,
                    reason: h.reason,
                    enforced,
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
                out.push(Effect::Notice(Notice::ForwardingReleased {
                    cidr: h.cidr,
                    enforced,
                }));
            }
        }
        let counts = forwarding::count(&held);
        if mode_changed || counts != forwarding::count(&self.announce.fwd_held) {
            out.push(Effect::Notice(Notice::HeldNow {
                counts: Box::new(counts),
                enforced,
            }));
        }
        self.announce.fwd_held = Arc::new(held);
        self.announce.fwd_enforced = enforced;
        true
    }

    /// On a tick: a hold-down that started since the last one starts now; one that is over
    /// withdraws its CIDR (if the verdict still says so).
    pub(super) fn gate_tick(&mut self, out: &mut Vec<Effect>) {
        if self.announce.fwd_deferred.is_empty() {
            return;
        }
        let (now, hold_down) = (self.now, self.config.forwarding_gate.withdraw_hold_down);
        let mut due = false;
        for since in self.announce.fwd_deferred.values_mut() {
            since.stamp(now);
            due |= since.over(now, hold_down);
        }
        if due && self.regate(out) {
            self.push_routes(out);
        }
    }

    /// What the gate holds, for the report (`None` when it is off), and whether it enforces.
    pub(super) fn gate_report(&self) -> Option<(Arc<Vec<Held>>, bool)> {
        let gate = &self.config.forwarding_gate;
        gate.enabled
            .then(|| (Arc::clone(&self.announce.fwd_held), gate.enforces()))
    }
}
