//! Follows the node's default routes for `address: default-gateway` peers: dumps them over
//! rtnetlink (else reads the proc files) every [`GATEWAY_POLL`] and hands the core the config with the gateways resolved,
//! so a changed gateway is a changed peer address (only that session resets).

use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};

use podcidr_config::Config;

use super::default_route::{
    self, DefaultRoutes, Gateway, Unresolved, ordered, resolve_config, uses_default_gateway,
};
use super::netlink_route;

/// Time between reads of the routing table (one small dump per family); a gateway change
/// is followed within this (plus the session's connect).
pub const GATEWAY_POLL: Duration = Duration::from_secs(2);

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

/// The config as written and the routes it was last resolved with.
#[derive(Debug)]
pub struct GatewayWatch {
    written: Config,
    routes: DefaultRoutes,
    problems: Vec<Unresolved>,
    /// What the core was last told (see [`GatewayWatch::condition_changed`]).
    told: Option<Option<Vec<String>>>,
}

impl GatewayWatch {
    /// Resolves `config` with the current routes (read only if a peer needs them).
    pub fn new(config: Config) -> (Self, Config) {
        let routes = if uses_default_gateway(&config) {
            read_default_routes()
        } else {
            DefaultRoutes::default()
        };
        let mut w = GatewayWatch {
            written: config,
            routes,
            problems: Vec::new(),
            told: None,
        };
        let resolved = w.resolve();
        (w, resolved)
    }

    pub fn active(&self) -> bool {
        uses_default_gateway(&self.written)
    }

    /// A reloaded config, resolved with the routes as they are now.
    pub fn reloaded(&mut self, config: Config) -> Config {
        self.written = config;
        if self.active() {
            self.routes = read_default_routes();
        }
        self.resolve()
    }

    /// `Some(resolved config)` when the default routes changed since the last look.
    pub fn poll(&mut self) -> Option<Config> {
        let now = read_default_routes();
        if now == self.routes {
            return None;
        }
        tracing::info!(
            ipv4 = %show(&now.ipv4),
            ipv6 = %show(&now.ipv6),
            "default routes changed"
        );
        self.routes = now;
        Some(self.resolve())
    }

    /// The `PeersResolved` input when it differs from what was last returned.
    pub fn condition_changed(&mut self) -> Option<Option<Vec<String>>> {
        let now = self
            .active()
            .then(|| self.problems.iter().map(ToString::to_string).collect());
        if self.told.as_ref() == Some(&now) {
            return None;
        }
        self.told = Some(now.clone());
        Some(now)
    }

    fn resolve(&mut self) -> Config {
        let (config, problems) = resolve_config(&self.written, &self.routes);
        for p in problems.iter().filter(|p| !self.problems.contains(p)) {
            tracing::warn!("{p}");
        }
        self.problems = problems;
        config
    }
}

fn show(gws: &[Gateway]) -> String {
    if gws.is_empty() {
        return "none".into();
    }
    gws.iter()
        .map(|g| format!("via {} dev {} metric {}", g.via, g.dev, g.metric))
        .collect::<Vec<_>>()
        .join(", ")
}
