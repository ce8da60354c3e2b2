//! The forwarding gate (`forwardingGate`), pure: which announced pod CIDRs are held back
//! because the node cannot deliver to them yet, and why. Every hold has a reason that becomes
//! a metric label, a log line and the `ForwardingHeld` condition.
//!
//! What counts as "the node can deliver to a CIDR": the main routing table has a unicast
//! route for the CIDR itself or for a prefix inside it (the CNI bridge's subnet route, per-pod
//! /32 or /128 routes), through a device that is not an uplink (a device of a default route or
//! of the route towards a peer), not `lo`, and listed in `forwardingGate.interfaces` when that
//! is set; a device `interfaces` lists explicitly counts even when it is an uplink (a bridge
//! holding both the NIC and the pods' veths). A shorter route that covers the CIDR (a default route, a cluster-wide route) never
//! counts, nor does a blackhole, unreachable or prohibit route. With `cni.enabled`, the
//! conflist handing the CIDR out must also be written.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;
use podcidr_config::{ForwardingGateConfig, PeerAddress, PeerConfig};

/// A route's type, as far as the gate cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteKind {
    Unicast,
    /// Blackhole, unreachable, prohibit, throw: the kernel drops what matches.
    Drop,
    Other,
}

/// One route of the main table (one entry per next hop of a multipath route).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelRoute {
    /// Host bits cleared.
    pub dst: IpNet,
    pub kind: RouteKind,
    pub dev: Option<String>,
    pub via: Option<IpAddr>,
}

/// The main routing table of both families, sorted (see [`RouteTable::new`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteTable(Vec<KernelRoute>);

impl RouteTable {
    pub fn new(mut routes: Vec<KernelRoute>) -> Self {
        for r in &mut routes {
            r.dst = r.dst.trunc();
        }
        routes.sort();
        routes.dedup();
        RouteTable(routes)
    }

    pub fn routes(&self) -> &[KernelRoute] {
        &self.0
    }

    /// The routes for `cidr` or inside it: sorted by (address, length), they are one run
    /// starting where `cidr` itself would be.
    fn within(&self, cidr: &IpNet) -> impl Iterator<Item = &KernelRoute> {
        let start = self.0.partition_point(|r| r.dst < *cidr);
        self.0[start..]
            .iter()
            .take_while(move |r| cidr.contains(&r.dst))
    }

    /// The devices of the most specific routes towards `addr` (the kernel's choice).
    fn devices_towards(&self, addr: IpAddr) -> impl Iterator<Item = &str> {
        let best = self
            .0
            .iter()
            .filter(|r| r.dst.contains(&addr))
            .map(|r| r.dst.prefix_len())
            .max();
        self.0
            .iter()
            .filter(move |r| r.dst.contains(&addr) && Some(r.dst.prefix_len()) == best)
            .filter_map(|r| r.dev.as_deref())
    }
}

/// The uplinks: the devices of the default routes and of the routes towards each peer (and an
/// interface peer's interface). A route through one of them leads back into the fabric.
pub fn uplinks(table: &RouteTable, peers: &[PeerConfig]) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = table
        .0
        .iter()
        .filter(|r| r.dst.prefix_len() == 0 && r.kind == RouteKind::Unicast)
        .filter_map(|r| r.dev.clone())
        .collect();
    for p in peers {
        match &p.address {
            PeerAddress::Fixed(a) => out.extend(table.devices_towards(*a).map(str::to_owned)),
            PeerAddress::Interface { name, .. } => {
                out.insert(name.clone());
            }
            PeerAddress::DefaultGateway(_) => {}
        }
    }
    out
}

/// Why an announced CIDR is held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HoldReason {
    /// `cni.enabled` and the conflist handing it out is not written (yet).
    CniNotWritten,
    /// No route for it or inside it in the main table.
    NoRoute,
    /// Only blackhole/unreachable/prohibit routes for it.
    Unreachable,
    /// Its routes go out an uplink (back into the fabric: announcing it would loop).
    ViaUplink,
    /// Its routes go through devices `forwardingGate.interfaces` does not list (or `lo`).
    InterfaceNotListed,
}

impl HoldReason {
    pub const ALL: [HoldReason; 5] = [
        HoldReason::CniNotWritten,
        HoldReason::NoRoute,
        HoldReason::Unreachable,
        HoldReason::ViaUplink,
        HoldReason::InterfaceNotListed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            HoldReason::CniNotWritten => "cni-not-written",
            HoldReason::NoRoute => "no-route",
            HoldReason::Unreachable => "unreachable",
            HoldReason::ViaUplink => "via-uplink",
            HoldReason::InterfaceNotListed => "interface-not-listed",
        }
    }
}

/// One held CIDR.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Held {
    pub cidr: IpNet,
    pub reason: HoldReason,
}

/// What the gate decides from.
#[derive(Debug, Clone, Copy)]
pub struct GateInputs<'a> {
    pub config: &'a ForwardingGateConfig,
    pub table: &'a RouteTable,
    pub uplinks: &'a BTreeSet<String>,
    /// `Some` with `cni.enabled`: the CIDRs the conflist on disk hands out.
    pub cni_written: Option<&'a [IpNet]>,
}

/// Why `cidr` is held, or `None` when the node can deliver to it.
pub fn verdict(cidr: &IpNet, i: &GateInputs<'_>) -> Option<HoldReason> {
    if let Some(written) = i.cni_written
        && !written.contains(cidr)
    {
        return Some(HoldReason::CniNotWritten);
    }
    let mut worst: Option<HoldReason> = None;
    let mut note = |r: HoldReason| {
        // Of several unusable routes, the one most worth telling: a loop, then a device
        // not listed, then a drop.
        let rank = |r: HoldReason| match r {
            HoldReason::ViaUplink => 3,
            HoldReason::InterfaceNotListed => 2,
            HoldReason::Unreachable => 1,
            _ => 0,
        };
        if worst.is_none_or(|w| rank(r) > rank(w)) {
            worst = Some(r);
        }
    };
    for r in i.table.within(cidr) {
        match (r.kind, r.dev.as_deref()) {
            (RouteKind::Drop, _) => note(HoldReason::Unreachable),
            // A device the operator names counts even when it is also an uplink: in a
            // bridged design one bridge holds the NIC and the pods' veths.
            (RouteKind::Unicast, Some(dev)) if dev != "lo" && i.config.names(dev) => {
                return None;
            }
            (RouteKind::Unicast, Some(dev)) if i.uplinks.contains(dev) => {
                note(HoldReason::ViaUplink);
            }
            (RouteKind::Unicast, Some(dev)) if dev != "lo" && i.config.lists(dev) => {
                return None;
            }
            (RouteKind::Unicast, Some(_)) => note(HoldReason::InterfaceNotListed),
            (RouteKind::Unicast, None) | (RouteKind::Other, _) => {}
        }
    }
    Some(worst.unwrap_or(HoldReason::NoRoute))
}

/// The held CIDRs of `announce` (sorted as `announce` is).
pub fn held(announce: &[IpNet], i: &GateInputs<'_>) -> Vec<Held> {
    announce
        .iter()
        .filter_map(|c| verdict(c, i).map(|reason| Held { cidr: *c, reason }))
        .collect()
}

/// `announce` without the held CIDRs (both sorted by CIDR).
pub fn released(announce: &[IpNet], held: &[Held]) -> Vec<IpNet> {
    announce
        .iter()
        .filter(|c| held.binary_search_by(|h| h.cidr.cmp(c)).is_err())
        .copied()
        .collect()
}

/// Counts per (family, reason), zeros included: the gauge `podcidr_forwarding_held_prefixes`.
pub type HeldCounts = [(&'static str, &'static str, usize); 10];

pub fn count(held: &[Held]) -> HeldCounts {
    let mut out = [("", "", 0); 10];
    for (k, slot) in out.iter_mut().enumerate() {
        let family = if k < 5 { "ipv4" } else { "ipv6" };
        *slot = (family, HoldReason::ALL[k % 5].as_str(), 0);
    }
    for h in held {
        let family = match h.cidr {
            IpNet::V4(_) => "ipv4",
            IpNet::V6(_) => "ipv6",
        };
        if let Some(slot) = out
            .iter_mut()
            .find(|(f, r, _)| *f == family && *r == h.reason.as_str())
        {
            slot.2 += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests;
