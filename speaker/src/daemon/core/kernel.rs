//! The kernel as the core sees it: facts that arrive as events ([`KernelFacts`], read by
//! `host::kernel`), what the core needs read ([`KernelQuery`]), and the peers they resolve
//! to. Pure: the default routes, the neighbour table and the source addresses are data here.
//!
//! Resolution: an `address: default-gateway` peer becomes one peer per next hop of the default
//! route of its family (see [`super::gateways`]); an `interface` peer without `peerAddress`
//! becomes a peer on the link-local neighbour the kernel knows on that interface. A peer that
//! cannot be resolved has no session and is named in the `PeersResolved` condition.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv6Addr};

use ipnet::IpNet;
use podcidr_config::{Config, PeerAddress, PeerConfig};

use super::gateways::{
    DefaultRoutes, Unresolved, UnresolvedCause, resolve_peers, uses_default_gateway,
};

/// What the core needs read from the kernel for a config as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelQuery {
    /// Read the default routes (a peer has `address: default-gateway`).
    pub default_routes: bool,
    /// Interfaces whose link-local neighbour names a peer (`interface` without `peerAddress`).
    pub neighbours: BTreeSet<String>,
    /// Peer addresses whose source address matters (`nextHop: self`, the derived router ID,
    /// an interface peer's own link-local address). Resolved addresses are added by the reader.
    pub destinations: BTreeSet<PeerAddress>,
    /// Read the main routing table (`forwardingGate.enabled`), only the routes this keeps.
    pub routes: Option<RouteFilter>,
    /// Read the routes of ours (`egress.followSessions`; every read at start).
    pub egress: bool,
}

/// The routes of the main table the forwarding gate reads, and no other: on a node whose
/// table holds a full feed (100,000 routes and more) the rest is read past, never kept.
/// It needs the default routes (the uplinks), the routes inside a prefix an announced CIDR
/// can be in (`allowedPrefixes`: the guard announces nothing outside them), and the routes
/// towards each peer's address (their devices are uplinks too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteFilter {
    /// Routes inside one of these; empty (`file` source without `allowedPrefixes`): every
    /// route.
    pub within: Vec<IpNet>,
    /// Routes containing one of these addresses.
    pub towards: Vec<IpAddr>,
}

impl RouteFilter {
    pub fn keeps(&self, dst: &IpNet) -> bool {
        dst.prefix_len() == 0
            || self.within.is_empty()
            || self.within.iter().any(|w| w.contains(dst))
            || self.towards.iter().any(|a| dst.contains(a))
    }
}

impl KernelQuery {
    pub fn for_config(config: &Config) -> Self {
        let mut q = KernelQuery {
            default_routes: uses_default_gateway(config) || config.egress.follow_sessions,
            egress: config.egress.follow_sessions,
            routes: config.forwarding_gate.enabled.then(|| RouteFilter {
                within: config.allowed_prefixes.clone(),
                towards: config
                    .peers
                    .iter()
                    .filter_map(|p| match &p.address {
                        PeerAddress::Fixed(a) => Some(*a),
                        _ => None,
                    })
                    .collect(),
            }),
            ..KernelQuery::default()
        };
        for p in &config.peers {
            match &p.address {
                PeerAddress::DefaultGateway(_) => {}
                PeerAddress::Interface { name, peer: None } => {
                    q.neighbours.insert(name.clone());
                }
                a => {
                    q.destinations.insert(a.clone());
                }
            }
        }
        q
    }

    pub fn is_empty(&self) -> bool {
        !self.default_routes
            && !self.egress
            && self.routes.is_none()
            && self.neighbours.is_empty()
            && self.destinations.is_empty()
    }
}

/// What the kernel said, at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelFacts {
    /// The default routes' next hops (read only when a peer needs them).
    pub default_routes: DefaultRoutes,
    /// The link-local neighbour to peer with on each queried interface, if any.
    pub neighbours: BTreeMap<String, Option<Ipv6Addr>>,
    /// The source address the kernel would use towards each peer address (`None`: no route).
    pub sources: BTreeMap<PeerAddress, Option<IpAddr>>,
    /// The main routing table (read only for the forwarding gate).
    pub routes: super::forwarding::RouteTable,
    /// The table could not be read: the core keeps the last one it had.
    pub routes_unread: bool,
    /// The routes of ours (`egress`), as installed.
    pub egress: super::egress::EgressRoutes,
}

impl KernelFacts {
    /// The source address towards `peer`, as last read.
    pub fn source(&self, peer: &PeerAddress) -> Option<IpAddr> {
        self.sources.get(peer).copied().flatten()
    }

    /// The addresses whose source address the reader should look up, beyond the query's:
    /// the resolved gateways and neighbours.
    pub fn resolved_destinations(&self) -> Vec<PeerAddress> {
        let gateways = self
            .default_routes
            .ipv4
            .iter()
            .chain(&self.default_routes.ipv6)
            .map(|g| match g.via {
                IpAddr::V6(v6) if v6.is_unicast_link_local() => PeerAddress::Interface {
                    name: g.dev.clone(),
                    peer: Some(v6),
                },
                via => PeerAddress::Fixed(via),
            });
        let neighbours = self.neighbours.iter().filter_map(|(name, n)| {
            n.map(|peer| PeerAddress::Interface {
                name: name.clone(),
                peer: Some(peer),
            })
        });
        gateways.chain(neighbours).collect()
    }
}

/// The config with every peer the kernel decides resolved: `default-gateway` peers to their
/// gateways, `interface` peers without `peerAddress` to their neighbour. What cannot be
/// resolved is left out and said why. `previous`: the peers as last resolved (a gateway
/// keeps its session's name).
pub fn resolve(
    written: &Config,
    facts: &KernelFacts,
    previous: &[PeerConfig],
) -> (Config, Vec<Unresolved>) {
    let (peers, mut problems) = resolve_peers(&written.peers, &facts.default_routes, previous);
    let mut out = Vec::with_capacity(peers.len());
    for mut p in peers {
        if let PeerAddress::Interface { name, peer: None } = &p.address {
            match facts.neighbours.get(name).copied().flatten() {
                Some(n) => {
                    p.address = PeerAddress::Interface {
                        name: name.clone(),
                        peer: Some(n),
                    };
                }
                None => {
                    problems.push(Unresolved {
                        peer: p.name.clone(),
                        cause: UnresolvedCause::NoNeighbor,
                        reason: format!(
                            "no IPv6 link-local neighbor on {name} in the kernel's neighbor \
                             table yet; set peerAddress, or let the ToR connect or send \
                             Router Advertisements"
                        ),
                    });
                    continue;
                }
            }
        }
        out.push(p);
    }
    (
        Config {
            peers: out,
            ..written.clone()
        },
        problems,
    )
}

/// Whether the `PeersResolved` condition applies: the config has a peer the kernel resolves.
pub fn resolves_peers(written: &Config) -> bool {
    let q = KernelQuery::for_config(written);
    uses_default_gateway(written) || !q.neighbours.is_empty()
}
