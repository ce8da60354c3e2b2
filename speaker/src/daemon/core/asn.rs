//! The node's local AS (issue 16 part 2) and RFC 8326 graceful shutdown, as core decisions:
//! which AS this node speaks with and what happens when it cannot be resolved, and when
//! every route carries GRACEFUL_SHUTDOWN (a final stop's wait, a cordoned Node).

use std::borrow::Cow;

use podcidr_config::{
    Community, Config, NodeAsnError, NodeMeta, PeerChanges, PeerConfig, ResolvedAsn, diff_peers,
};

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

    /// What a reload changes for this node's peers (an unresolvable AS counts as no peers),
    /// and the new config as it applies to the node.
    pub(super) fn reload_views(&self, new: &Config) -> (PeerChanges, NodeView) {
        let without_peers = |c: &Config| Config {
            peers: Vec::new(),
            ..c.clone()
        };
        let old_view = self
            .node_view(&self.config)
            .map_or_else(|_| without_peers(&self.config), |v| v.0);
        let new_view = self.node_view(new);
        let new_node = new_view
            .as_ref()
            .map_or_else(|_| without_peers(new), |v| v.0.clone());
        (diff_peers(&old_view, &new_node), new_view)
    }

    /// Records the node's AS; a change is a log line, and an error (or its end) an Event.
    pub(super) fn record_asn(&mut self, out: &mut Vec<Effect>, now: AsnResolution) {
        if self.node_asn.as_ref() == Some(&now) {
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
            Ok(r) if matches!(self.node_asn, Some(Err(_))) => self.asn_event(
                out,
                EventReason::LocalAsnResolved,
                false,
                format!("local AS {} from {}; sessions start", r.asn.0, r.origin),
            ),
            Ok(_) => {}
        }
        self.node_asn = Some(now);
    }

    fn asn_event(&self, out: &mut Vec<Effect>, reason: EventReason, warning: bool, note: String) {
        self.node_event(out, reason, warning, "LocalASN".into(), note);
    }

    /// Stops every session: nothing is announced with a wrong AS.
    pub(super) fn stop_all_peers(&mut self, out: &mut Vec<Effect>, why: &'static str) {
        let names: Vec<String> = self.peers.keys().cloned().collect();
        for name in names {
            self.remove_peer(out, &name, why);
        }
    }

    /// RFC 8326: during a final stop's wait, and while the Node is cordoned (when
    /// `gracefulShutdown.onCordon`), every route carries GRACEFUL_SHUTDOWN.
    pub(super) fn graceful_shutdown_active(&self) -> bool {
        self.final_wait || (self.config.graceful_shutdown.on_cordon && self.node().unschedulable)
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
        if self.final_wait || wait.is_zero() || self.peers.is_empty() {
            return false;
        }
        self.final_wait = true;
        self.push_routes(out);
        out.push(Effect::GracefulShutdownWait(wait));
        true
    }
}
