//! `egress.followSessions`, pure: the node's own traffic follows its sessions. BFD protects
//! what the fabric sends to the node (the ToR withdraws the node's CIDRs); this protects what
//! the node sends: while a peer whose address is a next hop of the node's default route is
//! down, the node's egress leaves that next hop out.
//!
//! The node's default route is never edited (DHCP, netplan or the operator own it). The
//! speaker installs a route of its own beside it, `0.0.0.0/1` + `128.0.0.0/1` (`::/1` +
//! `8000::/1`), with its own rtnetlink protocol number, holding only the live next hops: the
//! longer prefix wins over the default route whatever its metric (a metric-0 default route has
//! nothing below it), and deleting ours gives the original back untouched. Rules:
//!
//! - a next hop is left out only while every peer at its address is down (BGP not
//!   Established, or its BFD went Up → Down since); a next hop no peer is at counts as live;
//! - the route installed is the lowest-metric group of the default route's next hops that
//!   still has a live one, with only its live ones: never empty;
//! - all next hops live, or none: no route of ours (the original as it is). The node is never
//!   left without a way out because of the speaker: the original route stays in the kernel;
//! - a peer not yet Established since this process started (and not failed since) counts as
//!   it was: in the route the previous process left (adopted from the kernel), or live when
//!   there is none; [`SETTLE`] after start every peer counts as it is.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use podcidr_config::{Config, PeerAddress};

use super::gateways::{DefaultRoutes, Gateway};

/// How long after start a peer that has not been Established yet keeps counting as the
/// previous process left it: long enough for a restart's sessions to come back (connect,
/// OPEN, a ToR's connect-retry), short enough that a route left by a killed process does not
/// outlive a dead uplink by much.
pub const SETTLE: Duration = Duration::from_secs(60);

/// One next hop of a route of ours.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NextHop {
    pub via: IpAddr,
    pub dev: String,
}

impl From<&Gateway> for NextHop {
    fn from(g: &Gateway) -> Self {
        NextHop {
            via: g.via,
            dev: g.dev.clone(),
        }
    }
}

impl std::fmt::Display for NextHop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} dev {}", self.via, self.dev)
    }
}

/// The routes of ours per family: the next hops the node's egress uses while some are left
/// out; empty: no route of ours (the node's default route as it is).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressRoutes {
    pub ipv4: Vec<NextHop>,
    pub ipv6: Vec<NextHop>,
}

impl EgressRoutes {
    pub fn is_empty(&self) -> bool {
        self.ipv4.is_empty() && self.ipv6.is_empty()
    }
}

/// What the node's egress is now: the route of ours per family and the next hops it leaves
/// out (for metrics and logs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressDecision {
    pub routes: EgressRoutes,
    /// Default-route next hops left out of the node's egress now.
    pub withdrawn: Vec<NextHop>,
}

/// A peer's path as the egress sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathState {
    /// The BGP session is Established.
    pub established: bool,
    /// Its BFD session went Up → Down and has not been Up since (nor BGP Established again).
    pub bfd_failed: bool,
    /// Established or failed once since this process started: its state is what counts.
    pub settled: bool,
}

impl PathState {
    pub fn up(&self) -> bool {
        self.established && !self.bfd_failed
    }
}

/// How a next hop counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Liveness {
    Live,
    Dead,
    /// Its peers have not said yet: as the previous process left it.
    Unknown,
}

/// The peers at `hop` (a fixed address, or an interface peer's link-local neighbour on the
/// hop's device).
fn at_hop<'a>(config: &'a Config, hop: &'a Gateway) -> impl Iterator<Item = &'a str> + 'a {
    config
        .peers
        .iter()
        .filter(move |p| match &p.address {
            PeerAddress::Fixed(a) => *a == hop.via,
            PeerAddress::Interface {
                name,
                peer: Some(lla),
            } => IpAddr::V6(*lla) == hop.via && *name == hop.dev,
            _ => false,
        })
        .map(|p| p.name.as_str())
}

fn liveness(
    config: &Config,
    paths: &BTreeMap<String, PathState>,
    settled_all: bool,
    hop: &Gateway,
) -> Liveness {
    let mut any = false;
    let mut unknown = false;
    for name in at_hop(config, hop) {
        any = true;
        let path = paths.get(name).copied().unwrap_or_default();
        if path.up() {
            return Liveness::Live;
        }
        if !path.settled && !settled_all {
            unknown = true;
        }
    }
    match (any, unknown) {
        (false, _) => Liveness::Live,
        (true, true) => Liveness::Unknown,
        (true, false) => Liveness::Dead,
    }
}

/// The route of ours for one family's default route (`hops`, ordered by metric), and the
/// hops it leaves out. `adopted`: the route of ours found in the kernel at start.
fn plan_family(
    hops: &[Gateway],
    live: impl Fn(&Gateway) -> Liveness,
    adopted: &[NextHop],
) -> (Vec<NextHop>, Vec<NextHop>) {
    let counts = |g: &Gateway| match live(g) {
        Liveness::Live => true,
        Liveness::Dead => false,
        Liveness::Unknown => adopted.is_empty() || adopted.contains(&NextHop::from(g)),
    };
    let mut metrics: Vec<u32> = hops.iter().map(|g| g.metric).collect();
    metrics.dedup();
    let Some(&first) = metrics.first() else {
        return (Vec::new(), Vec::new());
    };
    for metric in metrics {
        let group: Vec<&Gateway> = hops.iter().filter(|g| g.metric == metric).collect();
        let kept: Vec<NextHop> = group
            .iter()
            .filter(|g| counts(g))
            .map(|g| NextHop::from(*g))
            .collect();
        if kept.is_empty() {
            continue;
        }
        if metric == first && kept.len() == group.len() {
            // Everything the kernel uses is live: the original route as it is.
            return (Vec::new(), Vec::new());
        }
        let withdrawn = hops
            .iter()
            .filter(|g| g.metric <= metric && !counts(g))
            .map(NextHop::from)
            .collect();
        return (kept, withdrawn);
    }
    // Nothing live: the original route (never no route at all).
    (Vec::new(), Vec::new())
}

/// The decision, pure: from the config (which peers are at which next hop), each peer's
/// path, the node's default routes, the route of ours adopted at start, and whether every
/// peer counts as it is now ([`SETTLE`] has passed).
pub fn decide(
    config: &Config,
    paths: &BTreeMap<String, PathState>,
    default_routes: &DefaultRoutes,
    adopted: &EgressRoutes,
    settled_all: bool,
) -> EgressDecision {
    if !config.egress.follow_sessions {
        return EgressDecision::default();
    }
    let live = |g: &Gateway| liveness(config, paths, settled_all, g);
    let (ipv4, mut withdrawn) = plan_family(&default_routes.ipv4, live, &adopted.ipv4);
    let (ipv6, w6) = plan_family(&default_routes.ipv6, live, &adopted.ipv6);
    withdrawn.extend(w6);
    EgressDecision {
        routes: EgressRoutes { ipv4, ipv6 },
        withdrawn,
    }
}

/// The egress as the core runs it.
#[derive(Debug, Default)]
pub struct EgressState {
    pub paths: BTreeMap<String, PathState>,
    /// The route of ours the kernel held when this process started.
    pub adopted: EgressRoutes,
    /// What was last asked of the kernel (`None`: nothing yet, or to be asked again).
    pub asked: Option<EgressRoutes>,
    /// What was last said about withdrawn next hops.
    pub decided: EgressDecision,
}

use bgp_proto::bfd::BfdState;
use bgp_proto::session::{SessionEvent, State};

use super::{Effect, Notice};

impl super::Core {
    /// A BGP session entered or left Established.
    pub(super) fn egress_session_changed(&mut self, peer: &str, ev: &SessionEvent) {
        let SessionEvent::StateChanged { from, to, .. } = ev else {
            return;
        };
        if (*from == State::Established) == (*to == State::Established) {
            return;
        }
        let path = self.egress.paths.entry(peer.to_owned()).or_default();
        path.established = *to == State::Established;
        if path.established {
            // Fresh evidence the path works, whatever BFD said before.
            path.bfd_failed = false;
            path.settled = true;
        }
    }

    /// A BFD session failed (Up → Down, not the peer's AdminDown: RFC 5882 §3.2) or came Up.
    /// The BGP session is reset by the gate too; this does not wait for that.
    pub(super) fn egress_bfd_changed(
        &mut self,
        peer: &str,
        from: BfdState,
        to: BfdState,
        remote: BfdState,
    ) {
        let path = self.egress.paths.entry(peer.to_owned()).or_default();
        match (from, to) {
            (BfdState::Up, BfdState::Down) if remote != BfdState::AdminDown => {
                path.bfd_failed = true;
                path.settled = true;
            }
            (_, BfdState::Up) => path.bfd_failed = false,
            _ => {}
        }
    }

    /// After every input: asks the kernel for the route the rules give now, when it is not
    /// what was last asked; says which next hops are withdrawn when that changes.
    pub(super) fn reconcile_egress(&mut self, out: &mut Vec<Effect>) {
        let names: BTreeSet<&str> = self.config.peers.iter().map(|p| p.name.as_str()).collect();
        self.egress.paths.retain(|n, _| names.contains(n.as_str()));
        let decision = decide(
            &self.config,
            &self.egress.paths,
            &self.kernel.default_routes,
            &self.egress.adopted,
            self.now >= SETTLE,
        );
        if self.egress.asked.as_ref() != Some(&decision.routes) {
            self.egress.asked = Some(decision.routes.clone());
            out.push(Effect::SetEgress(decision.routes.clone()));
        }
        if decision != self.egress.decided {
            out.push(Effect::Notice(Notice::Egress(decision.clone())));
            self.egress.decided = decision;
        }
    }

    /// The kernel's read of the routes of ours: one that differs from what was asked (deleted
    /// by hand, not written) is asked again.
    pub(super) fn egress_read(&mut self, installed: &EgressRoutes) {
        if self.egress.asked.as_ref() != Some(installed) {
            self.egress.asked = None;
        }
    }

    /// The node leaves for good: no route of ours stays behind.
    pub(super) fn egress_depart(&mut self, out: &mut Vec<Effect>) {
        if self.egress.asked.as_ref().is_none_or(|r| !r.is_empty()) {
            self.egress.asked = Some(EgressRoutes::default());
            out.push(Effect::SetEgress(EgressRoutes::default()));
        }
    }
}
