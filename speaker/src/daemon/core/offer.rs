//! What the core offers each peer: the guarded (and forwardable) CIDRs with the peer's next
//! hops and attributes, and the refusals it has not reported yet.

use std::sync::Arc;

use podcidr_config::{PeerAddress, PeerConfig};

use std::collections::BTreeMap;

use super::routes::{NodeAddresses, PeerRefusal, next_hops, peer_routes};
use super::{Core, Effect, Notice, PeerRoutes};

impl Core {
    pub(super) fn addresses(&self) -> NodeAddresses {
        NodeAddresses {
            internal_v4: self.node().internal_v4,
            internal_v6: self.node().internal_v6,
        }
    }

    /// The routes one peer gets now, or `None` before the first guarded set.
    pub(super) fn routes_for(&self, cfg: &PeerConfig) -> Option<PeerRoutes> {
        let g = self
            .announce
            .guarded
            .as_ref()
            .filter(|_| !self.gate_pending())?;
        let source = |a: &PeerAddress| self.kernel.source(a);
        let nhs = next_hops(&self.config.next_hop, cfg, &self.addresses(), &source);
        let announce = self.forwardable(g);
        let peer = self.announce_config(cfg);
        let (set, refused) = peer_routes(&announce, &peer, nhs);
        let set = self.with_service_routes(&peer, set, nhs);
        Some((Arc::new(set), refused))
    }

    pub(super) fn push_routes(&mut self, out: &mut Vec<Effect>) {
        let names: Vec<String> = self.sessions.peers.keys().cloned().collect();
        for name in names {
            self.push_peer_routes(out, &name);
        }
    }

    pub(super) fn push_peer_routes(&mut self, out: &mut Vec<Effect>, name: &str) {
        let Some(cfg) = self.sessions.peers.get(name).map(|p| p.config.clone()) else {
            return;
        };
        let Some((set, refused)) = self.routes_for(&cfg) else {
            return;
        };
        let Some(peer) = self.sessions.peers.get_mut(name) else {
            return;
        };
        // Both lists are sorted by prefix: new refusals by binary search, not a scan.
        // A family without a next hop is said once per family (below), not per prefix.
        for (prefix, reason) in &refused {
            if peer.refused.binary_search(&(*prefix, *reason)).is_err() {
                out.push(Effect::Notice(Notice::PeerRefused {
                    peer: name.to_owned(),
                    prefix: *prefix,
                    reason: *reason,
                }));
            }
        }
        let families = no_next_hop(&refused);
        for (family, reason) in &families {
            if peer.no_next_hop.get(family) != Some(reason) {
                out.push(Effect::Notice(Notice::NoNextHop {
                    peer: name.to_owned(),
                    family,
                    reason: Some(*reason),
                }));
            }
        }
        for family in peer.no_next_hop.keys() {
            if !families.contains_key(family) {
                out.push(Effect::Notice(Notice::NoNextHop {
                    peer: name.to_owned(),
                    family,
                    reason: None,
                }));
            }
        }
        peer.no_next_hop = families;
        peer.refused = refused.into();
        if peer.routes.as_deref() != Some(&*set) {
            peer.routes = Some(Arc::clone(&set));
            out.push(Effect::SetRoutes {
                name: name.to_owned(),
                routes: set,
            });
        }
    }
}

/// The families of `refused` that have no usable next hop on the session, with why: what
/// `podcidr_peer_no_next_hop` and the report's `noNextHop` show per peer.
pub(super) fn no_next_hop(
    refused: &[(ipnet::IpNet, PeerRefusal)],
) -> BTreeMap<&'static str, PeerRefusal> {
    refused
        .iter()
        .filter(|(_, r)| {
            matches!(
                r,
                PeerRefusal::NoNextHop | PeerRefusal::NeedsExtendedNextHop
            )
        })
        .map(|(p, r)| {
            let family = match p {
                ipnet::IpNet::V4(_) => "ipv4-unicast",
                ipnet::IpNet::V6(_) => "ipv6-unicast",
            };
            (family, *r)
        })
        .collect()
}
