//! The node's local AS, as core decisions: which AS this node speaks with, what happens when
//! it cannot be resolved, and the AS an `asn: auto` peer's OPEN named.

use std::collections::BTreeMap;

use bgp_proto::session::SessionStatus;

use podcidr_config::{Config, NodeAsnError, NodeMeta, PeerConfig, ResolvedAsn};

use super::{Core, Effect, EventReason, Notice};

/// What the core last resolved the node's AS to.
pub type AsnResolution = Result<ResolvedAsn, NodeAsnError>;

/// A config as it applies to this node, with the node's AS.
pub(super) type NodeView = Result<(Config, ResolvedAsn), NodeAsnError>;

impl Core {
    /// `config` as it applies to this node: its AS, its peers, their eBGP/iBGP types.
    pub(super) fn node_view(&self, config: &Config) -> NodeView {
        config.resolve_for_node(NodeMeta {
            labels: &self.node().labels,
            annotations: &self.node().annotations,
        })
    }

    /// The peers that select this node, with their types for its AS (none while the AS
    /// cannot be resolved).
    pub(super) fn peers_for_node(&self) -> Vec<PeerConfig> {
        self.node_view(&self.config)
            .map(|v| v.0.peers)
            .unwrap_or_default()
    }

    /// Records the node's AS; an unresolvable one stops every session (`None`).
    pub(super) fn apply_node_view(
        &mut self,
        out: &mut Vec<Effect>,
        view: NodeView,
    ) -> Option<(Config, ResolvedAsn)> {
        self.record_asn(
            out,
            view.as_ref().map(|v| v.1.clone()).map_err(Clone::clone),
        );
        if view.is_err() {
            self.stop_all_peers(out, "the node's local AS cannot be resolved");
            self.sync_listeners(out);
        }
        view.ok()
    }

    /// Records the node's AS; a change is a log line, and an error (or its end) an Event.
    pub(super) fn record_asn(&mut self, out: &mut Vec<Effect>, now: AsnResolution) {
        if self.node.asn.as_ref() == Some(&now) {
            return;
        }
        out.push(Effect::Notice(Notice::LocalAsn(now.clone())));
        match &now {
            Err(e) => self.asn_event(
                out,
                EventReason::LocalAsnInvalid,
                true,
                format!("{e}; no BGP session runs on this node until it is fixed"),
            ),
            Ok(r) if matches!(self.node.asn, Some(Err(_))) => self.asn_event(
                out,
                EventReason::LocalAsnResolved,
                false,
                format!("local AS {} from {}; sessions start", r.asn.0, r.origin),
            ),
            Ok(_) => {}
        }
        self.node.asn = Some(now);
    }

    fn asn_event(&self, out: &mut Vec<Effect>, reason: EventReason, warning: bool, note: String) {
        self.node_event(out, reason, warning, "LocalASN".into(), note);
    }

    /// Stops every session: nothing is announced with a wrong AS.
    pub(super) fn stop_all_peers(&mut self, out: &mut Vec<Effect>, why: &'static str) {
        let names: Vec<String> = self.sessions.peers.keys().cloned().collect();
        for name in names {
            self.remove_peer(out, &name, why);
        }
    }

    /// `asn: auto` peers whose negotiated AS is new since the last tick.
    pub(super) fn learned_asns(
        &self,
        out: &mut Vec<Effect>,
        now: &BTreeMap<String, SessionStatus>,
    ) {
        let asn = |s: Option<&SessionStatus>| s?.negotiated.as_ref().map(|n| n.peer_asn.0);
        for p in self
            .sessions
            .peers
            .values()
            .filter(|p| p.config.asn.fixed().is_none())
        {
            let name = &p.config.name;
            let Some(learned) = asn(now.get(name)) else {
                continue;
            };
            let address = p.config.address.clone();
            if asn(self.sessions.statuses.get(name)) != Some(learned) {
                out.push(Effect::Notice(Notice::PeerAsLearned {
                    peer: name.clone(),
                    address,
                    asn: learned,
                    // The node's AS (label, annotation, override), as in PeerStarted.
                    local_asn: self.node.identity.map_or(self.config.asn.0, |i| i.asn.0),
                }));
            }
        }
    }
}
