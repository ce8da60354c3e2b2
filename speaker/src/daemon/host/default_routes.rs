//! The node's default routes, for `address: default-gateway` peers: an rtnetlink dump (every
//! multipath next hop), else the proc files.

use std::sync::atomic::{AtomicBool, Ordering};

use super::netlink::route as netlink_route;
use crate::daemon::core::gateways::{self as default_route, DefaultRoutes, Gateway, ordered};

const ROUTE: &str = "/proc/net/route";
const IPV6_ROUTE: &str = "/proc/net/ipv6_route";

/// The default routes now, from an rtnetlink dump (every multipath next hop); where that
/// fails, from the proc files (a missing file, e.g. no IPv6, reads as no routes).
pub fn read_default_routes() -> DefaultRoutes {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let from_netlink = |family: i32| {
        let hops = netlink_route::dump(family).inspect_err(|e| {
            if !WARNED.swap(true, Ordering::Relaxed) {
                tracing::warn!(error = %e, "rtnetlink route dump failed; reading /proc/net (IPv4 multipath routes show their first next hop only)");
            }
        });
        hops.ok().map(|hops| {
            ordered(
                hops.into_iter()
                    .map(|(h, dev)| Gateway {
                        via: h.via,
                        dev,
                        metric: h.metric,
                    })
                    .collect(),
            )
        })
    };
    DefaultRoutes {
        ipv4: from_netlink(libc::AF_INET)
            .unwrap_or_else(|| default_route::parse_ipv4_routes(&read(ROUTE))),
        ipv6: from_netlink(libc::AF_INET6)
            .unwrap_or_else(|| default_route::parse_ipv6_routes(&read(IPV6_ROUTE))),
    }
}
