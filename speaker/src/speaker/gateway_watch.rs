//! Follows the node's default routes for `address: default-gateway` peers: reads the proc
//! files every [`GATEWAY_POLL`] and hands the core the config with the gateways resolved,
//! so a changed gateway is a changed peer address (only that session resets).

use std::time::Duration;

use podcidr_config::Config;

use super::default_route::{DefaultRoutes, Unresolved, resolve_config, uses_default_gateway};

/// Time between reads of the routing table. Two small proc files; a gateway change is
/// followed within this (plus the session's connect).
pub const GATEWAY_POLL: Duration = Duration::from_secs(2);

const ROUTE: &str = "/proc/net/route";
const IPV6_ROUTE: &str = "/proc/net/ipv6_route";

/// The default routes now; a missing file (no IPv6 in the kernel) reads as no routes.
pub fn read_default_routes() -> DefaultRoutes {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    DefaultRoutes::from_proc(&read(ROUTE), &read(IPV6_ROUTE))
}

/// The config as written and the routes it was last resolved with.
#[derive(Debug)]
pub struct GatewayWatch {
    written: Config,
    routes: DefaultRoutes,
    problems: Vec<Unresolved>,
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

    fn resolve(&mut self) -> Config {
        let (config, problems) = resolve_config(&self.written, &self.routes);
        for p in problems.iter().filter(|p| !self.problems.contains(p)) {
            tracing::warn!("{p}");
        }
        self.problems = problems;
        config
    }
}

fn show(gws: &[super::default_route::Gateway]) -> String {
    if gws.is_empty() {
        return "none".into();
    }
    gws.iter()
        .map(|g| format!("via {} dev {} metric {}", g.via, g.dev, g.metric))
        .collect::<Vec<_>>()
        .join(", ")
}
