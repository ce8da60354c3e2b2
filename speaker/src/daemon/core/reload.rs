//! A new config, from the file or the objects: what it changes for the running process and
//! its peers, applied in steps. The diff itself is `podcidr_config::diff_peers`, the one a
//! file reload and a rollout gate share: a peer whose session settings changed is reset, an
//! added one started, a removed one stopped, one whose other settings changed (communities,
//! BFD timers, connect retry) updated in place.

use podcidr_config::{PeerChanges, diff_peers};

use super::asn::NodeView;
use super::*;

/// What the peer step did, for the `ReloadApplied` notice.
#[derive(Debug, Default, Clone, Copy)]
struct Applied {
    reset: usize,
    updated: usize,
}

impl Core {
    pub(super) fn apply_config(
        &mut self,
        out: &mut Vec<Effect>,
        new: Config,
        node_name: String,
        why: &'static str,
    ) {
        let (changes, new_view) = self.reload_views(&new);
        let old = std::mem::replace(&mut self.config, new);
        self.process_settings(out, &old, &changes);
        self.follow_node(out, &old, node_name);
        if self.node.facts.is_none() && !watches_node(self.api, &self.config) {
            // Objects mode started with no source; a `file` source has no Node to wait for.
            self.node.facts = Some(NodeFacts::default());
        }
        if !self.sessions.started_once {
            self.first_peers(out, why);
            return;
        }
        let view = self
            .node
            .facts
            .is_some()
            .then(|| self.apply_node_view(out, new_view))
            .flatten();
        let applied = view
            .map(|(node_config, resolved)| {
                self.apply_peer_changes(out, &changes, &node_config, resolved.asn)
            })
            .unwrap_or_default();
        out.push(Effect::Notice(Notice::ReloadApplied {
            why,
            added: changes.added.len(),
            removed: changes.removed.len(),
            reset: applied.reset,
            updated: applied.updated,
        }));
        // Guard and attributes with the new settings (allowedPrefixes, nextHop, peers).
        self.regard(out);
        self.plan_cni(out);
    }

    /// Settings of the process itself: the log applies at once, the admin listeners only at
    /// the next start.
    fn process_settings(&self, out: &mut Vec<Effect>, old: &Config, changes: &PeerChanges) {
        if changes.settings.log {
            out.push(Effect::SetLog(self.config.log));
        }
        if old.admin.listen != self.config.admin.listen {
            out.push(Effect::Notice(Notice::NeedsRestart("admin.listen")));
        }
        if old.admin.metrics_listen != self.config.admin.metrics_listen {
            out.push(Effect::Notice(Notice::NeedsRestart("admin.metricsListen")));
        }
    }

    /// A different Node or a different source: the source restarts; what it announced stays
    /// until the new one is ready.
    fn follow_node(&mut self, out: &mut Vec<Effect>, old: &Config, node_name: String) {
        let node_changed = node_name != self.node.name;
        if node_changed {
            // A different Node: its labels, addresses and source. Sessions and announced
            // routes stay until the new Node is known and its source is ready.
            self.node.name = node_name.clone();
            // The new node's Lease is renewed at the next tick; the old one expires.
            self.publishing.lease.renewed = None;
            self.publishing.lease.failed = None;
            self.publishing.lease_owner = None;
            // The new source watches the new Node; until it is seen, `node` is the old one.
            self.node.renamed = watches_node(self.api, &self.config);
        }
        if node_changed || old.source != self.config.source {
            out.push(Effect::RestartSource {
                source: self.config.source.clone(),
                node: node_name,
            });
            // The old source's set stays announced until the new one is ready.
            self.announce.desired = Arc::new(DesiredSet {
                ready: false,
                ..(*self.announce.desired).clone()
            });
        }
    }

    /// Nothing started yet (objects mode starts unconfigured): the first peers start as a
    /// restarted process's do, and the reload's diff is moot.
    fn first_peers(&mut self, out: &mut Vec<Effect>, why: &'static str) {
        if self.node.facts.is_some() {
            self.reconcile_peers(out);
        }
        out.push(Effect::Notice(Notice::ReloadApplied {
            why,
            added: self.sessions.peers.len(),
            removed: 0,
            reset: 0,
            updated: 0,
        }));
        self.regard(out);
        self.plan_cni(out);
    }

    /// The diff applied to the running peers, with the node's config and AS.
    fn apply_peer_changes(
        &mut self,
        out: &mut Vec<Effect>,
        changes: &PeerChanges,
        node_config: &Config,
        asn: Asn,
    ) -> Applied {
        let mut applied = Applied::default();
        for name in &changes.removed {
            self.remove_peer(out, name, "removed from the config");
        }
        let identity = self.resolve_identity(asn);
        let identity_changed = identity != self.node.identity;
        let Some(identity) = identity else {
            out.push(Effect::Notice(Notice::NoRouterId));
            self.sync_listeners(out);
            return applied;
        };
        self.node.identity = Some(identity);
        let by_name = |names: &[String]| -> Vec<PeerConfig> {
            names
                .iter()
                .filter_map(|n| node_config.peer(n).cloned())
                .collect()
        };
        let (changed, added, kept_updated, unchanged) = (
            by_name(&changes.changed),
            by_name(&changes.added),
            by_name(&changes.updated),
            by_name(&changes.unchanged),
        );
        for cfg in &changed {
            self.reset_peer(out, cfg, identity);
            applied.reset += 1;
        }
        if identity_changed {
            // A derived router ID can change without `settings.identity`.
            for cfg in kept_updated.iter().chain(&unchanged) {
                self.reset_peer(out, cfg, identity);
                applied.reset += 1;
            }
        }
        for cfg in &added {
            self.add_peer(out, cfg, identity, false);
        }
        if !identity_changed {
            for cfg in &kept_updated {
                self.update_peer(out, cfg);
                applied.updated += 1;
            }
        }
        self.sync_listeners(out);
        applied
    }

    /// A running peer whose changes need no reset: its config replaced, BFD and connect
    /// retry told.
    fn update_peer(&mut self, out: &mut Vec<Effect>, cfg: &PeerConfig) {
        let before = self
            .sessions
            .peers
            .get(&cfg.name)
            .map(|p| p.config.connect_retry);
        let bfd_before = self
            .sessions
            .peers
            .get(&cfg.name)
            .and_then(|p| p.config.bfd.clone());
        if let Some(p) = self.sessions.peers.get_mut(&cfg.name) {
            p.config = cfg.clone();
        }
        self.bfd_reconfigured(out, cfg, bfd_before);
        if before != Some(cfg.connect_retry) {
            out.push(Effect::SetConnectRetry {
                name: cfg.name.clone(),
                base: cfg.connect_retry.base,
                max: cfg.connect_retry.max,
            });
        }
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
}
