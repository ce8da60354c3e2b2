//! BIRD 2 configuration: builder types and the rendered `bird.conf`.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

use crate::{TestPeerAddr, net};

/// What a BGP neighbour's channels export.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Export {
    None,
    /// Only the routes of [`BirdConfig::static_route`] (no transit of learned routes).
    #[default]
    Static,
    All,
    /// A raw BIRD export clause body, e.g. `filter my_filter` or `where net ~ 10.0.0.0/8`.
    Raw(String),
}

/// One `protocol bgp` block. Local address, port and AS default to the daemon's.
#[derive(Debug, Clone)]
pub struct BirdNeighbor {
    pub name: String,
    pub neighbor_addr: IpAddr,
    pub neighbor_port: u16,
    pub neighbor_as: u32,
    pub local_addr: Option<IpAddr>,
    pub local_port: Option<u16>,
    pub local_as: Option<u32>,
    pub multihop: bool,
    pub passive: bool,
    pub hold_time: Option<u16>,
    pub keepalive_time: Option<u16>,
    /// `graceful restart on` with this restart time.
    pub graceful_restart: Option<u32>,
    /// `long lived graceful restart on` with this stale time.
    pub long_lived_stale_time: Option<u32>,
    /// TCP MD5 (RFC 2385).
    pub password: Option<String>,
    /// GTSM (RFC 5082).
    pub ttl_security: bool,
    pub route_refresh: bool,
    pub ipv4: bool,
    pub ipv6: bool,
    pub export: Export,
    /// Channel `next hop address` for outgoing IPv4 routes (GoBGP drops 127/8 next hops);
    /// default: the session's local address, or [`DEFAULT_V4_NEXT_HOP`] on IPv6 sessions.
    pub ipv4_next_hop: Option<Ipv4Addr>,
    /// Channel `next hop address` for IPv6 routes; default [`DEFAULT_V6_NEXT_HOP`].
    pub ipv6_next_hop: Option<std::net::Ipv6Addr>,
    /// `extended next hop on` (RFC 8950) on both channels.
    pub extended_next_hop: bool,
    /// Extra raw lines inside the protocol block.
    pub extra: Vec<String>,
    /// A raw BIRD import clause body for both channels (default `all`), e.g.
    /// `filter { … }`.
    pub import: Option<String>,
}

impl BirdNeighbor {
    /// A neighbour at `addr` on port 179 in AS `asn`; multihop on (BIRD ignores `lo` as a
    /// direct interface), route refresh on, ipv4 and ipv6 channels importing everything.
    pub fn new(name: &str, addr: impl Into<IpAddr>, asn: u32) -> BirdNeighbor {
        BirdNeighbor {
            name: name.to_owned(),
            neighbor_addr: addr.into(),
            neighbor_port: net::BGP_PORT,
            neighbor_as: asn,
            local_addr: None,
            local_port: None,
            local_as: None,
            multihop: true,
            passive: false,
            hold_time: None,
            keepalive_time: None,
            graceful_restart: None,
            long_lived_stale_time: None,
            password: None,
            ttl_security: false,
            route_refresh: true,
            ipv4: true,
            ipv6: true,
            export: Export::Static,
            ipv4_next_hop: None,
            ipv6_next_hop: None,
            extended_next_hop: false,
            extra: Vec::new(),
            import: None,
        }
    }
    /// The import clause of both channels, e.g. `filter { … }` (default `all`).
    pub fn import(mut self, clause: &str) -> Self {
        self.import = Some(clause.to_owned());
        self
    }
    pub fn port(mut self, port: u16) -> Self {
        self.neighbor_port = port;
        self
    }
    pub fn local(mut self, addr: impl Into<IpAddr>, port: u16) -> Self {
        self.local_addr = Some(addr.into());
        self.local_port = Some(port);
        self
    }
    pub fn local_as(mut self, asn: u32) -> Self {
        self.local_as = Some(asn);
        self
    }
    pub fn multihop(mut self, on: bool) -> Self {
        self.multihop = on;
        self
    }
    pub fn passive(mut self, on: bool) -> Self {
        self.passive = on;
        self
    }
    pub fn hold_time(mut self, secs: u16) -> Self {
        self.hold_time = Some(secs);
        self
    }
    pub fn keepalive_time(mut self, secs: u16) -> Self {
        self.keepalive_time = Some(secs);
        self
    }
    pub fn graceful_restart(mut self, restart_time: u32) -> Self {
        self.graceful_restart = Some(restart_time);
        self
    }
    pub fn long_lived_graceful_restart(mut self, stale_time: u32) -> Self {
        self.long_lived_stale_time = Some(stale_time);
        self
    }
    pub fn password(mut self, pw: &str) -> Self {
        self.password = Some(pw.to_owned());
        self
    }
    pub fn ttl_security(mut self, on: bool) -> Self {
        self.ttl_security = on;
        self
    }
    pub fn route_refresh(mut self, on: bool) -> Self {
        self.route_refresh = on;
        self
    }
    pub fn families(mut self, ipv4: bool, ipv6: bool) -> Self {
        self.ipv4 = ipv4;
        self.ipv6 = ipv6;
        self
    }
    pub fn export(mut self, export: Export) -> Self {
        self.export = export;
        self
    }
    pub fn ipv4_next_hop(mut self, nh: Ipv4Addr) -> Self {
        self.ipv4_next_hop = Some(nh);
        self
    }
    pub fn ipv6_next_hop(mut self, nh: std::net::Ipv6Addr) -> Self {
        self.ipv6_next_hop = Some(nh);
        self
    }
    pub fn extended_next_hop(mut self, on: bool) -> Self {
        self.extended_next_hop = on;
        self
    }
    pub fn extra(mut self, line: &str) -> Self {
        self.extra.push(line.to_owned());
        self
    }
}

/// Default `next hop address` for IPv6 routes (2001:db8:ffff::1).
pub const DEFAULT_V6_NEXT_HOP: std::net::Ipv6Addr =
    std::net::Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 1);
/// Default `next hop address` for IPv4 routes over an IPv6 session (198.18.0.1).
pub const DEFAULT_V4_NEXT_HOP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

/// A route in `protocol static` (`static4`/`static6`), blackhole unless `via` is set.
#[derive(Debug, Clone)]
pub struct StaticRoute {
    pub prefix: IpNet,
    pub via: Option<IpAddr>,
    /// Filter statements run on the route, e.g. `bgp_med = 5;`.
    pub attrs: Vec<String>,
}

impl StaticRoute {
    /// Panics on an unparsable prefix (test input).
    pub fn new(prefix: &str) -> StaticRoute {
        let prefix = prefix
            .parse()
            .unwrap_or_else(|e| panic!("bad prefix {prefix:?}: {e}"));
        StaticRoute {
            prefix,
            via: None,
            attrs: Vec::new(),
        }
    }
    pub fn via(mut self, gw: impl Into<IpAddr>) -> Self {
        self.via = Some(gw.into());
        self
    }
    pub fn community(self, asn: u16, val: u16) -> Self {
        self.attr(&format!("bgp_community.add(({asn},{val}));"))
    }
    pub fn large_community(self, a: u32, b: u32, c: u32) -> Self {
        self.attr(&format!("bgp_large_community.add(({a},{b},{c}));"))
    }
    pub fn med(self, med: u32) -> Self {
        self.attr(&format!("bgp_med = {med};"))
    }
    pub fn local_pref(self, lp: u32) -> Self {
        self.attr(&format!("bgp_local_pref = {lp};"))
    }
    pub fn attr(mut self, stmt: &str) -> Self {
        self.attrs.push(stmt.to_owned());
        self
    }
}

/// `protocol kernel` exporting everything to the kernel table (`learn off`).
/// Only allowed inside a network namespace ([`BirdConfig::netns`]): it edits the host's
/// routes otherwise.
#[derive(Debug, Clone, Default)]
pub struct KernelConfig {
    pub ipv4: bool,
    pub ipv6: bool,
    /// `merge paths on`: equal BGP routes from several neighbours become one ECMP kernel
    /// route (a ToR spreading a Service address over the nodes that announce it).
    pub merge_paths: bool,
}

/// A BIRD instance: router id, own address and AS, neighbours, static routes.
#[derive(Debug, Clone)]
pub struct BirdConfig {
    pub router_id: Ipv4Addr,
    pub local_addr: IpAddr,
    pub local_port: u16,
    pub asn: u32,
    pub neighbors: Vec<BirdNeighbor>,
    pub static_routes: Vec<StaticRoute>,
    pub kernel: Option<KernelConfig>,
    /// Run as `ip netns exec NAME bird …`.
    pub netns: Option<String>,
    /// `debug protocols { … }` classes, logged to the log file.
    pub debug: String,
    /// Raw top-level config appended at the end.
    pub extra: String,
}

impl BirdConfig {
    /// BIRD on `local` (use [`net::alloc_v4`], or `::1`) in AS `asn`. The BGP port is 179 on
    /// an own IPv4 address, otherwise a free port.
    pub fn new(local: impl Into<IpAddr>, asn: u32) -> BirdConfig {
        let local = local.into();
        let router_id = match local {
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => net::alloc_v4(),
        };
        BirdConfig {
            router_id,
            local_addr: local,
            local_port: net::bgp_port_for(local),
            asn,
            neighbors: Vec::new(),
            static_routes: Vec::new(),
            kernel: None,
            netns: None,
            debug: "states, events, packets".to_owned(),
            extra: String::new(),
        }
    }
    pub fn port(mut self, port: u16) -> Self {
        self.local_port = port;
        self
    }
    pub fn router_id(mut self, id: Ipv4Addr) -> Self {
        self.router_id = id;
        self
    }
    pub fn neighbor(mut self, n: BirdNeighbor) -> Self {
        self.neighbors.push(n);
        self
    }
    pub fn static_route(mut self, r: StaticRoute) -> Self {
        self.static_routes.push(r);
        self
    }
    pub fn kernel(mut self, k: KernelConfig) -> Self {
        self.kernel = Some(k);
        self
    }
    pub fn netns(mut self, ns: &str) -> Self {
        self.netns = Some(ns.to_owned());
        self
    }
    pub fn debug(mut self, classes: &str) -> Self {
        self.debug = classes.to_owned();
        self
    }
    pub fn extra(mut self, text: &str) -> Self {
        self.extra.push_str(text);
        self.extra.push('\n');
        self
    }

    /// Where a speaker configured as neighbour `name` should connect.
    pub fn peer_addr(&self, name: &str) -> TestPeerAddr {
        let n = self.neighbors.iter().find(|n| n.name == name);
        let n = n.unwrap_or_else(|| panic!("no BIRD neighbour named {name:?}"));
        TestPeerAddr {
            addr: n.local_addr.unwrap_or(self.local_addr),
            port: n.local_port.unwrap_or(self.local_port),
            asn: n.local_as.unwrap_or(self.asn),
        }
    }

    /// The config file text; `log` is the log file path.
    pub fn render(&self, log: &std::path::Path) -> String {
        let mut c = String::new();
        let _ = writeln!(c, "log \"{}\" all;", log.display());
        let _ = writeln!(c, "debug protocols {{ {} }};", self.debug);
        let _ = writeln!(c, "router id {};", self.router_id);
        // Full dates: stale detection compares route and session times.
        c.push_str("timeformat route iso long ms;\ntimeformat protocol iso long ms;\n");
        // BIRD 2.0 can leave queued work (e.g. the initial UPDATEs after Established) until
        // its 3 s idle poll timeout; a 1 s device scan timer bounds that delay to 1 s.
        c.push_str("protocol device { scan time 1; debug off; }\n");
        for v6 in [false, true] {
            let routes: Vec<_> = self
                .static_routes
                .iter()
                .filter(|r| r.prefix.addr().is_ipv6() == v6)
                .collect();
            if routes.is_empty() {
                continue;
            }
            let (name, chan) = if v6 {
                ("static6", "ipv6")
            } else {
                ("static4", "ipv4")
            };
            let _ = writeln!(c, "protocol static {name} {{\n  {chan};");
            for r in routes {
                let dest = r.via.map_or("blackhole".to_owned(), |g| format!("via {g}"));
                let _ = write!(c, "  route {} {dest}", r.prefix);
                if r.attrs.is_empty() {
                    c.push_str(";\n");
                } else {
                    let _ = writeln!(c, " {{ {} }};", r.attrs.join(" "));
                }
            }
            c.push_str("}\n");
        }
        if let Some(k) = &self.kernel {
            assert!(
                self.netns.is_some(),
                "protocol kernel without netns would change the host's routing table"
            );
            let merge = if k.merge_paths {
                "  merge paths on;\n"
            } else {
                ""
            };
            if k.ipv4 {
                let _ = writeln!(
                    c,
                    "protocol kernel kernel4 {{\n  learn off;\n{merge}  ipv4 {{ import none; export all; }};\n}}"
                );
            }
            if k.ipv6 {
                let _ = writeln!(
                    c,
                    "protocol kernel kernel6 {{\n  learn off;\n{merge}  ipv6 {{ import none; export all; }};\n}}"
                );
            }
        }
        for n in &self.neighbors {
            self.render_neighbor(&mut c, n);
        }
        c.push_str(&self.extra);
        c
    }

    /// Own static routes only, with their attributes applied again at export: BIRD drops
    /// attributes like MED on eBGP export unless the export filter sets them.
    fn static_export_filter(&self) -> String {
        let mut f = "filter {\n      if source != RTS_STATIC then reject;\n".to_owned();
        for r in self.static_routes.iter().filter(|r| !r.attrs.is_empty()) {
            let _ = writeln!(
                f,
                "      if net = {} then {{ {} }}",
                r.prefix,
                r.attrs.join(" ")
            );
        }
        f.push_str("      accept;\n    }");
        f
    }

    fn render_neighbor(&self, c: &mut String, n: &BirdNeighbor) {
        let local = n.local_addr.unwrap_or(self.local_addr);
        let _ = writeln!(c, "protocol bgp {} {{", n.name);
        let _ = writeln!(
            c,
            "  local {local} port {} as {};",
            n.local_port.unwrap_or(self.local_port),
            n.local_as.unwrap_or(self.asn)
        );
        let _ = writeln!(
            c,
            "  neighbor {} port {} as {};",
            n.neighbor_addr, n.neighbor_port, n.neighbor_as
        );
        c.push_str("  strict bind on;\n");
        // Short timers so sessions (re)connect within a test's budget.
        c.push_str("  connect delay time 1;\n  connect retry time 2;\n  error wait time 1, 2;\n");
        if n.multihop {
            c.push_str("  multihop;\n");
        }
        let onoff = |b: bool| if b { "on" } else { "off" };
        let _ = writeln!(c, "  passive {};", onoff(n.passive));
        let _ = writeln!(c, "  enable route refresh {};", onoff(n.route_refresh));
        if let Some(h) = n.hold_time {
            let _ = writeln!(c, "  hold time {h};");
        }
        if let Some(k) = n.keepalive_time {
            let _ = writeln!(c, "  keepalive time {k};");
        }
        match n.graceful_restart {
            Some(t) => {
                let _ = writeln!(c, "  graceful restart on;\n  graceful restart time {t};");
            }
            None => c.push_str("  graceful restart off;\n"),
        }
        if let Some(t) = n.long_lived_stale_time {
            let _ = writeln!(
                c,
                "  long lived graceful restart on;\n  long lived stale time {t};"
            );
        }
        if let Some(pw) = &n.password {
            let _ = writeln!(c, "  password \"{pw}\";");
        }
        if n.ttl_security {
            c.push_str("  ttl security on;\n");
        }
        for l in &n.extra {
            let _ = writeln!(c, "  {l}");
        }
        let export = match &n.export {
            Export::None => "none".to_owned(),
            Export::Static => self.static_export_filter(),
            Export::All => "all".to_owned(),
            Export::Raw(s) => s.clone(),
        };
        // A next hop equal to the receiver's own address (both ends on ::1) is unusable, and
        // an IPv4 session has no IPv6 address of its own (and vice versa).
        let v6_next_hop = n.ipv6_next_hop.unwrap_or(DEFAULT_V6_NEXT_HOP);
        let v4_next_hop = n
            .ipv4_next_hop
            .or_else(|| (local.is_ipv6() && !n.extended_next_hop).then_some(DEFAULT_V4_NEXT_HOP));
        for (on, chan, nh) in [
            (n.ipv4, "ipv4", v4_next_hop.map(IpAddr::V4)),
            (n.ipv6, "ipv6", Some(IpAddr::V6(v6_next_hop))),
        ] {
            if !on {
                continue;
            }
            let import = n.import.as_deref().unwrap_or("all");
            let _ = writeln!(c, "  {chan} {{\n    import {import};\n    export {export};");
            if let Some(nh) = nh {
                let _ = writeln!(c, "    next hop address {nh};");
            }
            if n.extended_next_hop {
                c.push_str("    extended next hop on;\n");
            }
            c.push_str("  };\n");
        }
        c.push_str("}\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn v4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn renders_neighbour_options() {
        let c = BirdConfig::new(v4("127.100.0.1"), 65001)
            .port(1790)
            .neighbor(
                BirdNeighbor::new("spk", v4("127.100.0.2"), 65000)
                    .port(1791)
                    .passive(true)
                    .hold_time(9)
                    .graceful_restart(30)
                    .password("pw")
                    .ttl_security(true)
                    .extended_next_hop(true)
                    .ipv4_next_hop(v4("198.18.0.7")),
            )
            .static_route(StaticRoute::new("198.51.100.0/24").med(5))
            .static_route(StaticRoute::new("2001:db8::/32"));
        let t = c.render(Path::new("/tmp/x.log"));
        for want in [
            "log \"/tmp/x.log\" all;",
            "router id 127.100.0.1;",
            "local 127.100.0.1 port 1790 as 65001;",
            "neighbor 127.100.0.2 port 1791 as 65000;",
            "strict bind on;",
            "multihop;",
            "passive on;",
            "hold time 9;",
            "graceful restart on;\n  graceful restart time 30;",
            "password \"pw\";",
            "ttl security on;",
            "enable route refresh on;",
            "next hop address 198.18.0.7;",
            "next hop address 2001:db8:ffff::1;",
            "extended next hop on;",
            "route 198.51.100.0/24 blackhole { bgp_med = 5; };",
            "if net = 198.51.100.0/24 then { bgp_med = 5; }",
            "protocol static static6 {\n  ipv6;\n  route 2001:db8::/32 blackhole;",
        ] {
            assert!(t.contains(want), "missing {want:?} in:\n{t}");
        }
        let p = c.peer_addr("spk");
        assert_eq!(
            (p.addr, p.port, p.asn),
            (IpAddr::V4(v4("127.100.0.1")), 1790, 65001)
        );
    }

    #[test]
    fn ipv6_session_defaults_an_ipv4_next_hop() {
        let c = BirdConfig::new(net::V6_LOOPBACK, 65001)
            .neighbor(BirdNeighbor::new("n", net::V6_LOOPBACK, 65002).export(Export::None));
        let t = c.render(Path::new("/tmp/x.log"));
        assert!(t.contains("next hop address 198.18.0.1;"), "{t}");
        assert!(t.contains("export none;"));
        assert!(c.router_id.is_loopback());
    }

    #[test]
    #[should_panic(expected = "host's routing table")]
    fn kernel_requires_netns() {
        let c = BirdConfig::new(v4("127.100.0.1"), 1).kernel(KernelConfig {
            ipv4: true,
            ..KernelConfig::default()
        });
        c.render(Path::new("/tmp/x.log"));
    }

    #[test]
    fn kernel_in_netns() {
        let c = BirdConfig::new(v4("127.100.0.1"), 1)
            .netns("tor")
            .kernel(KernelConfig {
                ipv4: true,
                ..KernelConfig::default()
            });
        let t = c.render(Path::new("/tmp/x.log"));
        assert!(
            t.contains(
                "protocol kernel kernel4 {\n  learn off;\n  ipv4 { import none; export all; };"
            ),
            "{t}"
        );
        assert!(!t.contains("merge paths"), "{t}");
    }

    #[test]
    fn kernel_merge_paths_makes_ecmp_routes() {
        let c = BirdConfig::new(v4("127.100.0.1"), 1)
            .netns("tor")
            .kernel(KernelConfig {
                ipv4: true,
                merge_paths: true,
                ..KernelConfig::default()
            });
        let t = c.render(Path::new("/tmp/x.log"));
        assert!(
            t.contains("protocol kernel kernel4 {\n  learn off;\n  merge paths on;\n  ipv4 {"),
            "{t}"
        );
    }
}
