//! `/readyz` as a rollout gate (issue 23 item 4). A DaemonSet's readiness matters only to its
//! rollout, so it holds a new pod back until BGP works: Ready once the source is synced and
//! every peer of this node has been Established, except a peer that has said nothing at all
//! (no OPEN, no NOTIFICATION) for `--ready-peer-grace` since start: a router that is down or
//! unreachable (ToR maintenance) must not hold a rollout forever. A peer that answers and
//! still does not reach Established holds readiness until it does: that is what a release
//! that cannot peer looks like, and its rollout stops at its first node.
//! Once passed, the gate stays passed: later session losses never make the pod unready
//! (only the source does, as before).

use std::collections::BTreeMap;
use std::time::Duration;

use bgp_proto::session::{SessionStatus, State};

use super::{Core, Effect};

/// The default `--ready-peer-grace`: the default graceful-restart time, beyond which the
/// routers have dropped a restarting node's routes anyway.
pub const DEFAULT_READY_PEER_GRACE: Duration = Duration::from_secs(120);

/// What `/readyz` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    /// Why not (empty when ready).
    pub why: String,
}

impl Readiness {
    fn ready() -> Self {
        Readiness {
            ready: true,
            why: String::new(),
        }
    }

    fn not(why: String) -> Self {
        Readiness { ready: false, why }
    }
}

/// The per-peer facts the gate needs, kept from session snapshots since start.
#[derive(Debug, Default, Clone)]
pub(super) struct GateState {
    /// Peers that reached Established at least once.
    pub established: std::collections::BTreeSet<String>,
    /// Peers that sent an OPEN or a NOTIFICATION at least once.
    pub answered: std::collections::BTreeSet<String>,
    /// Ready once with every peer settled: sessions no longer count.
    pub passed: bool,
    /// What was last handed to the admin endpoint.
    pub last: Option<Readiness>,
}

impl GateState {
    pub(super) fn observe(&mut self, statuses: &BTreeMap<String, SessionStatus>) {
        for (name, s) in statuses {
            if s.state == State::Established {
                self.established.insert(name.clone());
            }
            if s.received.count("OPEN") + s.received.count("NOTIFICATION") > 0 {
                self.answered.insert(name.clone());
            }
        }
    }
}

impl Core {
    /// `/readyz` now.
    pub(super) fn readiness(&self) -> Readiness {
        // Before the gate latches: a new pod that would run less than the old one did stops
        // the rollout on its first node. Said first: without its config the node has no
        // source to wait for either.
        if !self.gate.passed
            && let Some(why) = self.origin.cannot_run()
        {
            return Readiness::not(format!(
                "configuration objects select this node but cannot run here and have no last good version: {why}"
            ));
        }
        if !self.ready(&self.desired) {
            return Readiness::not("pod-CIDR source not synced yet".into());
        }
        if self.gate.passed {
            return Readiness::ready();
        }
        if self.node.is_none() {
            return Readiness::not("the Node has not been seen yet".into());
        }
        let grace_over = self.now >= self.ready_grace;
        let waiting: Vec<String> = self
            .peers_for_node()
            .iter()
            .map(|p| &p.name)
            .filter(|n| !self.gate.established.contains(*n))
            .filter_map(|n| {
                if self.gate.answered.contains(n) {
                    Some(format!("{n} (answers, never Established)"))
                } else if !grace_over {
                    Some(format!("{n} (not Established yet)"))
                } else {
                    // Silent for the whole grace: down or unreachable, not our release.
                    None
                }
            })
            .collect();
        if waiting.is_empty() {
            return Readiness::ready();
        }
        Readiness::not(format!(
            "waiting for BGP sessions: {}{}",
            waiting.join(", "),
            if grace_over {
                String::new()
            } else {
                format!(
                    "; a silent peer is excused {}s after start (--ready-peer-grace)",
                    self.ready_grace.as_secs()
                )
            }
        ))
    }

    /// Hands a changed readiness to the admin endpoint; the gate latches once passed.
    pub(super) fn update_readiness(&mut self, out: &mut Vec<Effect>) {
        let now = self.readiness();
        if now.ready {
            self.gate.passed = true;
        }
        if self.gate.last.as_ref() != Some(&now) {
            self.gate.last = Some(now.clone());
            out.push(Effect::SetReadiness(now));
        }
    }
}
