//! Which occurrences become Kubernetes Events about the Node ([`Effect::KubeEvent`]): a
//! session reaching or leaving Established, a source mismatch beginning or ending, each new
//! guard refusal. Pure, like the rest of the core; how often they are written is the
//! publisher's (`kube/events.rs`).

use bgp_proto::session::SessionEvent;
use bgp_proto::session::{DownReason, State};

use super::{Core, Effect, EventReason, GuardRefusal, NodeEvent};

/// New guard refusals that get an Event of their own per guard pass; beyond these, one
/// Event says how many more (a source object full of bad values is not an Event storm).
pub const REFUSAL_EVENTS: usize = 8;

impl Core {
    /// A session reaching or leaving Established becomes an Event on the Node.
    pub(super) fn session_event(&self, out: &mut Vec<Effect>, peer: &str, ev: &SessionEvent) {
        let SessionEvent::StateChanged { from, to, reason } = ev else {
            return;
        };
        let Some(cfg) = self.sessions.peers.get(peer).map(|p| &p.config) else {
            return;
        };
        let who = format!("{peer} ({}, AS {})", cfg.address, cfg.asn);
        let (kind, warning, note) = if *to == State::Established {
            let note = format!("BGP session with {who} established");
            (EventReason::SessionEstablished, false, note)
        } else if *from == State::Established {
            let why = reason
                .as_ref()
                .map_or_else(|| "no reason given".to_owned(), ToString::to_string);
            // We stopped it (a reload reset it): not a warning.
            let planned = matches!(reason, Some(DownReason::Stopped(_)));
            let note = format!("BGP session with {who} left Established: {why}");
            (EventReason::SessionDown, !planned, note)
        } else {
            return;
        };
        self.node_event(out, kind, warning, format!("Peer {peer}"), note);
    }

    /// A mismatch beginning or ending (before `mismatch_seen` is updated). A mismatch whose
    /// values change is still the same one: no Event.
    pub(super) fn mismatch_event(&self, out: &mut Vec<Effect>, now: &Option<String>) {
        let source = self.config.source.kind();
        let (reason, warning, note) = match (&self.announce.mismatch_seen, now) {
            (None, Some(text)) => (
                EventReason::SourceMismatch,
                true,
                format!(
                    "source {source} and Node.spec.podCIDRs disagree: {text}; announcing what {source} says"
                ),
            ),
            (Some(_), None) => (
                EventReason::SourceMismatchResolved,
                false,
                format!("source {source} and Node.spec.podCIDRs agree again"),
            ),
            _ => return,
        };
        self.node_event(out, reason, warning, "Announce".into(), note);
    }

    /// One Event per new refusal (the first [`REFUSAL_EVENTS`]), then one for the rest.
    pub(super) fn refusal_events(&self, out: &mut Vec<Effect>, new: &[&(String, GuardRefusal)]) {
        let source = self.config.source.kind();
        for (cidr, reason) in new.iter().take(REFUSAL_EVENTS) {
            self.node_event(
                out,
                EventReason::PodCidrRefused,
                true,
                format!("Announce {cidr}"),
                format!(
                    "pod CIDR {cidr} from source {source} is not announced: {}",
                    reason.as_str()
                ),
            );
        }
        if let Some(more) = new.len().checked_sub(REFUSAL_EVENTS).filter(|n| *n > 0) {
            self.node_event(
                out,
                EventReason::PodCidrRefused,
                true,
                "Announce".into(),
                format!(
                    "{more} more pod CIDRs from source {source} are not announced; the NodeBGPStatus condition Refused lists them"
                ),
            );
        }
    }

    /// An Event about this node, when there is an API to publish it to.
    pub(super) fn node_event(
        &self,
        out: &mut Vec<Effect>,
        reason: EventReason,
        warning: bool,
        action: String,
        note: String,
    ) {
        if !self.api {
            return;
        }
        out.push(Effect::KubeEvent(Box::new(NodeEvent {
            node: self.node.name.clone(),
            node_uid: self.owner_uid(),
            reason,
            warning,
            action,
            note,
        })));
    }
}
