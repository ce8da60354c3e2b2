//! Reads what the core asked to know about the kernel ([`KernelQuery`]): the default routes,
//! the link-local neighbours of some interfaces, and the source address towards each peer.
//! Blocking syscalls (a netlink dump, a UDP connect per peer): the loop runs it off its own
//! thread, every [`KERNEL_POLL`], and the core hears the facts when they change.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;
use std::time::Duration;

use crate::daemon::core::forwarding::{KernelRoute, RouteKind, RouteTable};
use crate::daemon::core::kernel::{KernelFacts, KernelQuery, RouteFilter};

use super::netlink::{neigh, route};
use super::{default_routes, route_lookup};

/// Time between reads: a changed gateway, neighbour or source address is followed within this
/// (plus the session's connect).
pub const KERNEL_POLL: Duration = Duration::from_secs(2);

/// The facts `query` asks for, now.
pub fn read(query: &KernelQuery) -> KernelFacts {
    let mut facts = KernelFacts {
        default_routes: if query.default_routes {
            default_routes::read_default_routes()
        } else {
            Default::default()
        },
        neighbours: neighbours(&query.neighbours),
        sources: BTreeMap::new(),
        routes: RouteTable::default(),
        routes_unread: false,
        egress: if query.egress {
            egress_routes()
        } else {
            Default::default()
        },
    };
    if let Some(filter) = &query.routes {
        // The gateways' own routes too: the device towards a gateway is an uplink.
        let mut filter = filter.clone();
        filter.towards.extend(
            facts
                .default_routes
                .ipv4
                .iter()
                .chain(&facts.default_routes.ipv6)
                .map(|g| g.via),
        );
        match main_routes(&filter) {
            Some(table) => facts.routes = table,
            None => facts.routes_unread = true,
        }
    }
    let destinations: BTreeSet<_> = query
        .destinations
        .iter()
        .cloned()
        .chain(facts.resolved_destinations())
        .collect();
    facts.sources = destinations
        .into_iter()
        .map(|d| {
            let source = route_lookup::peer_source(&d);
            (d, source)
        })
        .collect();
    facts
}

/// The routes of ours (`egress`); none when the dump fails (one warning per failure streak):
/// the core then writes what it decided again.
fn egress_routes() -> crate::daemon::core::egress::EgressRoutes {
    use std::sync::atomic::{AtomicBool, Ordering};
    static FAILING: AtomicBool = AtomicBool::new(false);
    match super::netlink::egress::read() {
        Ok(routes) => {
            FAILING.store(false, Ordering::Relaxed);
            routes
        }
        Err(e) => {
            if !FAILING.swap(true, Ordering::Relaxed) {
                tracing::warn!(error = %e, "reading the egress routes of ours failed");
            }
            Default::default()
        }
    }
}

/// The neighbour to peer with on each interface (one dump of the table for all of them).
fn neighbours(interfaces: &BTreeSet<String>) -> BTreeMap<String, Option<Ipv6Addr>> {
    if interfaces.is_empty() {
        return BTreeMap::new();
    }
    let table = neigh::dump().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "reading the IPv6 neighbor table failed");
        Vec::new()
    });
    interfaces
        .iter()
        .map(|name| {
            let found = bgp_io::transport::interface_index(name)
                .ok()
                .and_then(|index| neigh::pick_peer(&table, index));
            (name.clone(), found)
        })
        .collect()
}

/// The main routing table of both families; `None` when a dump fails (one warning per
/// failure streak): the core then keeps the table it had.
fn main_routes(filter: &RouteFilter) -> Option<RouteTable> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use std::sync::atomic::{AtomicBool, Ordering};
    static FAILING: AtomicBool = AtomicBool::new(false);
    let mut routes = Vec::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        let unspecified = if family == libc::AF_INET {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        };
        let keep = |e: &route::RouteEntry| {
            ipnet::IpNet::new(e.dst.unwrap_or(unspecified), e.dst_len)
                .is_ok_and(|dst| filter.keeps(&dst.trunc()))
        };
        let entries = match route::dump_main(family, &keep) {
            Ok(entries) => entries,
            Err(e) => {
                if !FAILING.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "reading the routing table failed; the forwarding gate keeps its last decision");
                }
                return None;
            }
        };
        routes.extend(entries.into_iter().filter_map(|(e, dev)| {
            let dst = ipnet::IpNet::new(e.dst.unwrap_or(unspecified), e.dst_len).ok()?;
            let kind = if e.unicast() {
                RouteKind::Unicast
            } else if e.drops() {
                RouteKind::Drop
            } else {
                RouteKind::Other
            };
            Some(KernelRoute {
                dst,
                kind,
                dev,
                via: e.via,
            })
        }));
    }
    FAILING.store(false, Ordering::Relaxed);
    Some(RouteTable::new(routes))
}
