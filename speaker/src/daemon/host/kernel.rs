//! Reads what the core asked to know about the kernel ([`KernelQuery`]): the default routes,
//! the link-local neighbours of some interfaces, and the source address towards each peer.
//! Blocking syscalls (a netlink dump, a UDP connect per peer): the loop runs it off its own
//! thread, every [`KERNEL_POLL`], and the core hears the facts when they change.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;
use std::time::Duration;

use crate::daemon::core::kernel::{KernelFacts, KernelQuery};

use super::netlink::neigh;
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
    };
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
            let found = bgp_proto::transport::interface_index(name)
                .ok()
                .and_then(|index| neigh::pick_peer(&table, index));
            (name.clone(), found)
        })
        .collect()
}
