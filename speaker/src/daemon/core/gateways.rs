//! `address: default-gateway`: the node's default routes, read from the kernel's proc files
//! by pure parsers, and the peers they resolve to. No I/O here; `gateway_watch.rs` reads
//! the files.
//!
//! What `default-gateway` means: every next hop of a default route of that family in the
//! main table (ECMP siblings and routes of different metrics alike: a node with two ToRs
//! peers with both), ordered by metric. One session per next hop, always named
//! `<peer>-<interface>` (one gateway or several; `-2`, `-3` for more on one interface), and
//! a session keeps its name while its gateway stays. An IPv6 link-local gateway (a route
//! from Router Advertisements) becomes an `interface` peer on its device. The routes come from an rtnetlink dump
//! (`netlink_route.rs`), else from the proc files, where `/proc/net/route` lists only the
//! first next hop of an IPv4 multipath route.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use podcidr_config::{AddrFamily, Config, PeerAddress, PeerConfig};

/// `RTF_UP | RTF_GATEWAY` (linux/route.h), in both proc files.
const RTF_UP: u32 = 0x1;
const RTF_GATEWAY: u32 = 0x2;
/// `RTF_REJECT`: an unreachable route, not a way out.
const RTF_REJECT: u32 = 0x200;

/// One next hop of a default route.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gateway {
    pub via: IpAddr,
    pub dev: String,
    pub metric: u32,
}

/// The default routes' next hops per family, ordered by metric, then as the kernel lists
/// them; no duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefaultRoutes {
    pub ipv4: Vec<Gateway>,
    pub ipv6: Vec<Gateway>,
}

impl DefaultRoutes {
    pub fn of(&self, family: AddrFamily) -> &[Gateway] {
        match family {
            AddrFamily::Ipv4 => &self.ipv4,
            AddrFamily::Ipv6 => &self.ipv6,
        }
    }
}

fn hex_u32(s: &str) -> Option<u32> {
    u32::from_str_radix(s, 16).ok()
}

/// `/proc/net/route`: `Iface Destination Gateway Flags RefCnt Use Metric Mask …`, addresses
/// as the host prints a network-order `u32` (`%08X`). Malformed lines are skipped.
pub fn parse_ipv4_routes(text: &str) -> Vec<Gateway> {
    let mut out: Vec<Gateway> = text
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [dev, dest, gw, flags, _refcnt, _use, metric, mask, ..] = f.as_slice() else {
                return None;
            };
            let flags = hex_u32(flags)?;
            let up_via_gateway = flags & (RTF_UP | RTF_GATEWAY) == RTF_UP | RTF_GATEWAY;
            if hex_u32(dest)? != 0 || hex_u32(mask)? != 0 || !up_via_gateway {
                return None;
            }
            if flags & RTF_REJECT != 0 {
                return None;
            }
            let via = Ipv4Addr::from(hex_u32(gw)?.to_ne_bytes());
            if via.is_unspecified() {
                return None;
            }
            Some(Gateway {
                via: IpAddr::V4(via),
                dev: (*dev).to_owned(),
                metric: metric.parse().ok()?,
            })
        })
        .collect();
    order(&mut out);
    out
}

fn hex_v6(s: &str) -> Option<Ipv6Addr> {
    if s.len() != 32 {
        return None;
    }
    u128::from_str_radix(s, 16).ok().map(Ipv6Addr::from)
}

/// `/proc/net/ipv6_route`: `dest plen src plen nexthop metric refcnt use flags dev`, all
/// hex; multipath siblings are separate lines. Malformed lines are skipped.
pub fn parse_ipv6_routes(text: &str) -> Vec<Gateway> {
    let mut out: Vec<Gateway> = text
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [
                dest,
                plen,
                _src,
                _src_plen,
                gw,
                metric,
                _refcnt,
                _use,
                flags,
                dev,
            ] = f.as_slice()
            else {
                return None;
            };
            let flags = hex_u32(flags)?;
            let up_via_gateway = flags & (RTF_UP | RTF_GATEWAY) == RTF_UP | RTF_GATEWAY;
            if !hex_v6(dest)?.is_unspecified()
                || hex_u32(plen)? != 0
                || !up_via_gateway
                || flags & RTF_REJECT != 0
            {
                return None;
            }
            let via = hex_v6(gw)?;
            if via.is_unspecified() {
                return None;
            }
            Some(Gateway {
                via: IpAddr::V6(via),
                dev: (*dev).to_owned(),
                metric: hex_u32(metric)?,
            })
        })
        .collect();
    order(&mut out);
    out
}

/// Next hops from elsewhere (an rtnetlink dump) in the order and form the parsers give.
pub fn ordered(mut gws: Vec<Gateway>) -> Vec<Gateway> {
    order(&mut gws);
    gws
}

/// By metric (stable: the kernel's order within a metric), without repeats.
fn order(gws: &mut Vec<Gateway>) {
    gws.sort_by_key(|g| g.metric);
    let mut seen = BTreeSet::new();
    gws.retain(|g| seen.insert((g.via, g.dev.clone())));
}

/// Why a peer the kernel resolves has no session (for logs and status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub peer: String,
    pub cause: UnresolvedCause,
    pub reason: String,
}

/// The `PeersResolved` condition's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnresolvedCause {
    /// No usable default gateway of the peer's family.
    NoDefaultGateway,
    /// No link-local neighbour on the peer's interface.
    NoNeighbor,
}

impl UnresolvedCause {
    pub fn as_str(self) -> &'static str {
        match self {
            UnresolvedCause::NoDefaultGateway => "NoDefaultGateway",
            UnresolvedCause::NoNeighbor => "NoNeighbor",
        }
    }
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "peer {}: {}", self.peer, self.reason)
    }
}

/// The peers with every `default-gateway` replaced by its gateway(s); fixed peers as they are.
/// `previous`: the peers as last resolved; a gateway still there keeps its session's name.
pub fn resolve_peers(
    peers: &[PeerConfig],
    routes: &DefaultRoutes,
    previous: &[PeerConfig],
) -> (Vec<PeerConfig>, Vec<Unresolved>) {
    let mut out: Vec<PeerConfig> = Vec::with_capacity(peers.len());
    let mut problems = Vec::new();
    let taken: BTreeSet<(IpAddr, u16)> = peers
        .iter()
        .filter_map(|p| Some((p.address.ip()?, p.port)))
        .collect();
    let mut names: BTreeSet<String> = peers.iter().map(|p| p.name.clone()).collect();
    for p in peers {
        let PeerAddress::DefaultGateway(family) = p.address else {
            out.push(p.clone());
            continue;
        };
        let problem = |reason: String| Unresolved {
            peer: p.name.clone(),
            cause: UnresolvedCause::NoDefaultGateway,
            reason,
        };
        let mut usable = Vec::new();
        for g in routes.of(family) {
            if taken.contains(&(g.via, p.port)) {
                problems.push(problem(format!(
                    "the {family} default gateway {} port {} is already a configured peer",
                    g.via, p.port
                )));
            } else {
                usable.push(g);
            }
        }
        if routes.of(family).is_empty() {
            problems.push(problem(format!(
                "no default route for {family}; the session starts when one appears"
            )));
        }
        // Always `<peer>-<interface>`, however many gateways there are: a name that
        // followed the count would rename (reset) the surviving uplink's session when
        // the other uplink's default route goes. A gateway that has a session keeps its
        // name first, so a second gateway on one interface (`-2`) is not renumbered when
        // the first goes.
        let wanted: Vec<(String, PeerAddress)> = usable
            .iter()
            .map(|g| (format!("{}-{}", p.name, label(&g.dev)), gateway_address(g)))
            .collect();
        let kept: Vec<Option<String>> = wanted
            .iter()
            .map(|(want, address)| {
                previous
                    .iter()
                    .find(|q| q.address == *address && q.port == p.port && numbered(&q.name, want))
                    .map(|q| q.name.clone())
                    .filter(|n| names.insert(n.clone()))
            })
            .collect();
        for ((want, address), kept) in wanted.into_iter().zip(kept) {
            let name = kept.unwrap_or_else(|| unique_name(&mut names, &want));
            out.push(PeerConfig {
                name,
                address,
                ..p.clone()
            });
        }
    }
    (out, problems)
}

/// A router-advertised IPv6 gateway is link-local: peer on its interface.
fn gateway_address(g: &Gateway) -> PeerAddress {
    match g.via {
        IpAddr::V6(v6) if v6.is_unicast_link_local() => PeerAddress::Interface {
            name: g.dev.clone(),
            peer: Some(v6),
        },
        via => PeerAddress::Fixed(via),
    }
}

pub fn uses_default_gateway(config: &Config) -> bool {
    config
        .peers
        .iter()
        .any(|p| matches!(p.address, PeerAddress::DefaultGateway(_)))
}

/// An interface name as a peer-name suffix: lower case, `[a-z0-9-]` only.
fn label(dev: &str) -> String {
    dev.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// `name` is `want` or one of [`unique_name`]'s `want-<n>`.
fn numbered(name: &str, want: &str) -> bool {
    name.strip_prefix(want).is_some_and(|rest| {
        rest.is_empty()
            || rest
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn unique_name(names: &mut BTreeSet<String>, want: &str) -> String {
    let mut name = want.to_owned();
    let mut n = 2;
    while !names.insert(name.clone()) {
        name = format!("{want}-{n}");
        n += 1;
    }
    name
}

#[cfg(test)]
mod tests;
