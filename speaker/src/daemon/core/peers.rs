//! A peer's life in the core: added, reset, removed, reconciled against the config, and the
//! listeners the peers need.

use super::*;

impl Core {
    pub(super) fn add_peer(
        &mut self,
        out: &mut Vec<Effect>,
        cfg: &PeerConfig,
        identity: LocalIdentity,
        restarting: bool,
    ) {
        let setup = self.setup(cfg, identity, restarting);
        let refused = self
            .routes_for(cfg)
            .map(|(_, r)| r.into())
            .unwrap_or_else(|| Arc::<[_]>::from([]));
        let no_next_hop = super::offer::no_next_hop(&refused);
        for (family, reason) in &no_next_hop {
            out.push(Effect::Notice(Notice::NoNextHop {
                peer: cfg.name.clone(),
                family,
                reason: Some(*reason),
            }));
        }
        self.sessions.peers.insert(
            cfg.name.clone(),
            Peer {
                config: cfg.clone(),
                routes: setup.routes.clone(),
                refused,
                no_next_hop,
            },
        );
        out.push(peer_started(cfg, identity));
        out.push(Effect::StartPeer(Box::new(setup)));
    }

    pub(super) fn remove_peer(&mut self, out: &mut Vec<Effect>, name: &str, why: &'static str) {
        if self.sessions.peers.remove(name).is_some() {
            self.sessions.statuses.remove(name);
            out.push(Effect::Notice(Notice::PeerStopped {
                peer: name.to_owned(),
                why,
            }));
            out.push(Effect::StopPeer {
                name: name.to_owned(),
                reason: StopReason::Deconfigured,
            });
        }
    }

    /// Makes the running sessions match the peers that select this node, with the current
    /// identity (a changed identity resets every kept session: it is in every OPEN).
    /// A node whose local AS cannot be resolved runs no session.
    pub(super) fn reconcile_peers(&mut self, out: &mut Vec<Effect>) {
        let view = self.node_view(&self.config);
        let Some((node_config, resolved)) = self.apply_node_view(out, view) else {
            return;
        };
        let Some(identity) = self.resolve_identity(resolved.asn) else {
            if self.node.identity.is_none() {
                out.push(Effect::Notice(Notice::NoRouterId));
            }
            return;
        };
        let wanted: Vec<PeerConfig> = node_config.peers;
        let names: BTreeSet<&str> = wanted.iter().map(|p| p.name.as_str()).collect();
        let gone: Vec<String> = self
            .sessions
            .peers
            .keys()
            .filter(|n| !names.contains(n.as_str()))
            .cloned()
            .collect();
        for name in gone {
            self.remove_peer(out, &name, "no longer selects this node");
        }
        self.sessions.held.retain(|n| names.contains(n.as_str()));
        let identity_changed = self.node.identity.is_some_and(|i| i != identity);
        self.node.identity = Some(identity);
        for cfg in &wanted {
            match self.sessions.peers.get(&cfg.name) {
                None if self.holds_for_routes(cfg) => {
                    if self.sessions.held.insert(cfg.name.clone()) {
                        out.push(Effect::Notice(Notice::PeerHeld {
                            peer: cfg.name.clone(),
                            at_most: hold_bound(cfg),
                        }));
                    }
                }
                None => {
                    let restarting =
                        !self.sessions.started_once || self.sessions.held.remove(&cfg.name);
                    self.add_peer(out, cfg, identity, restarting);
                }
                Some(_) if identity_changed => {
                    self.reset_peer(out, cfg, identity);
                }
                Some(_) => {}
            }
        }
        // A node waiting for its configuration objects has started nothing yet: its first
        // peers are still the process's first (R bit, held for routes).
        if self.config.source != SourceConfig::Unconfigured {
            self.sessions.started_once = true;
        }
        self.sync_listeners(out);
        // Service routes follow the peers (their `spec.peers` selectors) and the Node.
        self.replan_services(out);
    }

    /// A restarted speaker opens no graceful-restart session before it has routes to send:
    /// a helper that sees a second reset before End-of-RIB ends the first restart and drops
    /// every stale route the short session did not refresh (BIRD does; RFC 4724 §4.2 leaves
    /// it open). Bounded by half the restart time, so a long wait for the source still
    /// reconnects before the peer's restart timer drops the routes anyway.
    pub(super) fn holds_for_routes(&self, cfg: &PeerConfig) -> bool {
        cfg.graceful_restart.enabled
            && (self.announce.guarded.is_none() || self.gate_pending())
            && (!self.sessions.started_once || self.sessions.held.contains(&cfg.name))
            && self.now < hold_bound(cfg)
    }

    /// Starts the held peers whose hold ended (routes known, or the bound passed).
    pub(super) fn release_held(&mut self, out: &mut Vec<Effect>) {
        let ended = self
            .peers_for_node()
            .iter()
            .any(|cfg| self.sessions.held.contains(&cfg.name) && !self.holds_for_routes(cfg));
        if ended {
            self.reconcile_peers(out);
        }
    }

    pub(super) fn reset_peer(
        &mut self,
        out: &mut Vec<Effect>,
        cfg: &PeerConfig,
        identity: LocalIdentity,
    ) {
        if self.sessions.held.contains(&cfg.name) {
            // Not started yet: it starts with the config and identity of its release.
            return;
        }
        let setup = self.setup(cfg, identity, false);
        if let Some(p) = self.sessions.peers.get_mut(&cfg.name) {
            p.config = cfg.clone();
            p.routes = setup.routes.clone();
        }
        self.sessions.statuses.remove(&cfg.name);
        out.push(peer_started(cfg, identity));
        out.push(Effect::ResetPeer {
            setup: Box::new(setup),
            // New session settings: RFC 4486 Other Configuration Change (the session sends
            // it as RFC 8538 allows when both sides can restart gracefully).
            reason: StopReason::ConfigurationChange,
        });
    }

    pub(super) fn layout(&self) -> ListenerLayout {
        let mut layout = ListenerLayout::new();
        for p in self
            .sessions
            .peers
            .values()
            .map(|p| &p.config)
            .filter(|p| p.accept_incoming)
        {
            let Some(address) = p.address.ip() else {
                continue;
            };
            // Unresolved `default-gateway` peers never get here (see `default_route`). An
            // interface peer is accepted on the IPv6 wildcard: its link-local address
            // is unique on the node (validated), so the listener tells it apart without a scope.
            let local = match (p.local_address, address) {
                (Some(a), _) => a,
                (None, IpAddr::V4(_)) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                (None, IpAddr::V6(_)) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            };
            layout
                .entry(SocketAddr::new(local, p.port))
                .or_default()
                .push(PassiveSpec {
                    name: p.name.clone(),
                    address,
                    password_file: p.password_file.clone(),
                    ttl: p.ttl_security(),
                });
        }
        layout
    }

    pub(super) fn sync_listeners(&mut self, out: &mut Vec<Effect>) {
        let layout = self.layout();
        if layout != self.sessions.listeners {
            self.sessions.listeners = layout.clone();
            out.push(Effect::SetListeners(layout));
        }
    }
}
