//! Departure or restart (issue 23 item 4): at SIGTERM, is this node leaving (RFC 8326
//! graceful shutdown, then Cease: routers withdraw at once) or is only the pod restarting
//! (a graceful-restart close: routers keep the routes stale until the new pod is back)?
//! Decided from the Node as last seen; `--final` forces a departure.

use std::fmt;

use bgp_proto::session::StopReason;
use podcidr_config::Config;

use super::node::NodeFacts;
use super::{Core, Effect, Notice};

pub use podcidr_api::contract::{REMOVAL_TAINTS, SHUTDOWN_MESSAGE};

/// Why a stop is a departure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Departure {
    /// `--final`.
    Forced,
    /// The watch saw the Node deleted.
    NodeDeleted,
    /// The Node has a `deletionTimestamp`.
    NodeDeleting,
    /// A taint of [`REMOVAL_TAINTS`].
    Taint(&'static str),
    /// kubelet is shutting the node down ([`SHUTDOWN_MESSAGE`]).
    ShuttingDown,
    /// Cordoned (`spec.unschedulable`) with `gracefulShutdown.departOnCordon`.
    Cordoned,
}

impl fmt::Display for Departure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Departure::Forced => f.write_str("--final"),
            Departure::NodeDeleted => f.write_str("the Node was deleted"),
            Departure::NodeDeleting => f.write_str("the Node is being deleted"),
            Departure::Taint(key) => {
                let what = REMOVAL_TAINTS
                    .iter()
                    .find(|(k, _)| k == key)
                    .map_or("it is being removed", |(_, w)| w);
                write!(f, "the Node has taint {key}: {what}")
            }
            Departure::ShuttingDown => write!(f, "the Node is shutting down (kubelet)"),
            Departure::Cordoned => {
                f.write_str("the Node is cordoned (gracefulShutdown.departOnCordon)")
            }
        }
    }
}

/// What the Node says about a stop now: `None` when it is a restart.
pub fn departure(node: &NodeFacts, config: &Config) -> Option<Departure> {
    if node.deleted {
        return Some(Departure::NodeDeleted);
    }
    if node.deleting {
        return Some(Departure::NodeDeleting);
    }
    if let Some((key, _)) = REMOVAL_TAINTS
        .iter()
        .find(|(k, _)| node.taints.iter().any(|t| t == k))
    {
        return Some(Departure::Taint(key));
    }
    if node
        .not_ready
        .as_deref()
        .is_some_and(|m| m.contains(SHUTDOWN_MESSAGE))
    {
        return Some(Departure::ShuttingDown);
    }
    let cordoned = node.unschedulable
        || node
            .taints
            .iter()
            .any(|t| t == "node.kubernetes.io/unschedulable");
    (cordoned && config.graceful_shutdown.depart_on_cordon).then_some(Departure::Cordoned)
}

impl Core {
    /// What a stop would be now (`None`: a restart). File mode has no Node: a restart.
    pub(super) fn departure_now(&self) -> Option<Departure> {
        departure(self.node.facts.as_ref()?, &self.config)
    }

    /// A change in what a stop would be is a log line (an operator sees it before the stop).
    pub(super) fn note_departure(&mut self, out: &mut Vec<Effect>) {
        let now = self.departure_now();
        if now != self.departure.seen {
            out.push(Effect::Notice(Notice::Departure(now.clone())));
            self.departure.seen = now;
        }
    }

    /// SIGTERM (again after the RFC 8326 wait, or on a second signal): a departure warns the
    /// peers first and then sends the Cease; a restart closes for graceful restart.
    pub(super) fn shutdown(&mut self, out: &mut Vec<Effect>, forced: bool) {
        let departure = self.decide_stop(out, forced);
        if departure.is_some() && self.begin_final_wait(out) {
            return;
        }
        self.departure.stopping = true;
        if departure.is_some() {
            // Leaving for good: the node's own default route again (a restart leaves the
            // route of ours to the next process, which adopts it).
            self.egress_depart(out);
        }
        let stops = self
            .sessions
            .peers
            .values()
            .map(|p| {
                let reason = match &departure {
                    None if p.config.graceful_restart.enabled => StopReason::GracefulRestart,
                    None | Some(Departure::Forced) => {
                        StopReason::Shutdown("podcidr-bgp speaker stopping".into())
                    }
                    Some(d) => StopReason::Shutdown(format!(
                        "podcidr-bgp speaker stopping: node leaving ({d})"
                    )),
                };
                (p.config.name.clone(), reason)
            })
            .collect();
        out.push(Effect::StopAll(stops));
    }

    /// The first shutdown decides, later ones (the end of the RFC 8326 wait, a second
    /// SIGTERM) keep it.
    fn decide_stop(&mut self, out: &mut Vec<Effect>, forced: bool) -> Option<Departure> {
        if let Some(decided) = &self.departure.decided {
            return decided.clone();
        }
        let decided = if forced {
            Some(Departure::Forced)
        } else {
            self.departure_now()
        };
        out.push(Effect::Notice(Notice::Stopping(decided.clone())));
        self.departure.decided = Some(decided.clone());
        decided
    }
}
