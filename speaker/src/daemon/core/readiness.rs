//! `/readyz` as a rollout gate (issue 23 item 4, issue 30 item 8). A DaemonSet's readiness
//! matters only to its rollout, so it holds a new pod back until BGP works: Ready once the
//! source is synced and every peer of this node has been Established, except
//! - a peer that has said nothing at all (no OPEN, no NOTIFICATION) for `--ready-peer-grace`
//!   since start: a router that is down or unreachable (ToR maintenance) must not hold a
//!   rollout forever;
//! - a peer that answers but was never Established on this node before this process (the
//!   previous process's record in `--state-dir`), after the same grace: a router that rejects
//!   us (a wrong AS label, its policy, an admin-shut neighbour) is the rack's problem, not the
//!   release's, and one such rack must not stop every rollout of a 5,000-node fleet. It is
//!   excused and said (`podcidr_ready_excused_peers`, alert PodcidrPeerExcusedFromRollout).
//!
//! A peer that was Established before the restart and now answers without reaching
//! Established holds readiness until it does: that is what a release that cannot peer looks
//! like, and its rollout stops at its first node.
//! Once passed, the gate stays passed: later session losses never make the pod unready
//! (only the source does, as before).

use std::collections::BTreeMap;
use std::time::Duration;

use bgp_proto::session::{SessionStatus, State};

use super::{Core, Effect, Notice};

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
    /// Peers Established on this node before this process (`--state-dir`).
    pub before: std::collections::BTreeSet<String>,
    /// What was last handed to be kept (`established` ∪ `before`).
    pub kept: Option<std::collections::BTreeSet<String>>,
    /// Peers last said to be excused as never Established.
    pub excused: Vec<String>,
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
        if !self.ready(&self.announce.desired) {
            return Readiness::not("pod-CIDR source not synced yet".into());
        }
        if self.gate.passed {
            return Readiness::ready();
        }
        if self.node.facts.is_none() {
            return Readiness::not("the Node has not been seen yet".into());
        }
        let grace_over = self.now >= self.ready_grace;
        let waiting: Vec<String> = self
            .peers_for_node()
            .iter()
            .map(|p| &p.name)
            .filter(|n| !self.gate.established.contains(*n))
            .filter_map(|n| {
                if self.gate.answered.contains(n) && self.gate.before.contains(n) {
                    Some(format!(
                        "{n} (Established before this restart; answers, not Established again)"
                    ))
                } else if !grace_over {
                    if self.gate.answered.contains(n) {
                        Some(format!("{n} (answers, not Established yet)"))
                    } else {
                        Some(format!("{n} (not Established yet)"))
                    }
                } else {
                    // Silent for the whole grace (down or unreachable), or answering but never
                    // Established on this node: not our release.
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

    /// Peers the gate excuses although they answer: never Established on this node, before
    /// or since this process started, and the grace is over.
    fn excused_never_established(&self) -> Vec<String> {
        if self.now < self.ready_grace {
            return Vec::new();
        }
        self.peers_for_node()
            .iter()
            .map(|p| p.name.clone())
            .filter(|n| {
                self.gate.answered.contains(n)
                    && !self.gate.established.contains(n)
                    && !self.gate.before.contains(n)
            })
            .collect()
    }

    /// What a later process must know: the peers Established on this node (those of the
    /// previous process that are still configured, and this one's).
    fn note_established(&mut self, out: &mut Vec<Effect>) {
        let names: std::collections::BTreeSet<String> = self
            .peers_for_node()
            .iter()
            .map(|p| p.name.clone())
            .collect();
        let now: std::collections::BTreeSet<String> = self
            .gate
            .established
            .iter()
            .chain(self.gate.before.iter().filter(|n| names.contains(*n)))
            .cloned()
            .collect();
        if self.gate.kept.as_ref() != Some(&now) && !now.is_empty() {
            self.gate.kept = Some(now.clone());
            out.push(Effect::KeepEstablished(now));
        }
        let excused = self.excused_never_established();
        if excused != self.gate.excused {
            self.gate.excused = excused.clone();
            out.push(Effect::Notice(Notice::ExcusedPeers(excused)));
        }
    }

    /// Hands a changed readiness to the admin endpoint; the gate latches once passed.
    pub(super) fn update_readiness(&mut self, out: &mut Vec<Effect>) {
        self.note_established(out);
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
