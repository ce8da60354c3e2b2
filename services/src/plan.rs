//! The decision: for one node, which Service routes go to which peer with which attributes,
//! and for every selected address that is not announced, why.
//!
//! Rules, in the order they are checked for one address of one Service under one
//! advertisement (the first that holds is the reason):
//!
//! 1. `ipMode: Proxy` load balancer addresses are served by a proxy, never announced;
//! 2. a node labelled `node.kubernetes.io/exclude-from-external-load-balancers` announces no
//!    LoadBalancer or ExternalIP address;
//! 3. the announced prefix (the address, or its aggregate) must lie inside `allowedPrefixes`;
//! 4. endpoints, chosen as kube-proxy does ([`Endpoints`]): `Cluster` announces from every
//!    selected node while the Service can be served anywhere; `Local` only from a node that
//!    serves it. With aggregation, the aggregate follows the `Cluster` rule (every selected
//!    node, while the Service can be served anywhere) and a `Local` Service adds its host
//!    route only where it is served: routers prefer the longer prefix, so traffic for the
//!    address goes only to nodes with a local endpoint while the aggregate stays stable;
//! 5. the datapath gate (opt-in, `Local` only): the node's service proxy must report a local
//!    endpoint on the Service's `healthCheckNodePort`;
//! 6. drain: after the graceful-shutdown period the node withdraws its Service routes, except
//!    a `Local` Service served here and nowhere else, which stays until another node can
//!    serve it (withdrawing it would black-hole it). During the period, and on what stays,
//!    the routes carry GRACEFUL_SHUTDOWN (RFC 8326) so routers move traffic away first.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use podcidr_config::{Community, LargeCommunity};

use crate::EXCLUDE_FROM_EXTERNAL_LB_LABEL;
use crate::advertisement::{AddressKind, Advertisement, Origin};
use crate::endpoints::{Endpoints, Serving};
use crate::service::{ServiceFacts, ServiceKey, TrafficPolicy};

/// Where the node is in a drain (an explicit trigger; never plain cordon).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Drain {
    #[default]
    No,
    /// The graceful-shutdown period: routes stay, with GRACEFUL_SHUTDOWN.
    Announcing,
    /// After it: routes withdrawn (but see rule 6; what stays keeps GRACEFUL_SHUTDOWN).
    Withdrawn,
}

/// What the node knows about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub drain: Drain,
    /// For advertisements with the datapath gate: per Service, `Ok` when the node's proxy
    /// has served it for the hold-down, or why it is held (the probe's answer, the
    /// hold-down). A Service missing here has not been probed yet.
    pub datapath: BTreeMap<ServiceKey, Result<(), String>>,
}

/// A peer of the node, as advertisements select it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerFacts {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// Why a selected address is not (fully) announced.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// `ipMode: Proxy`.
    ProxyMode,
    /// The node is excluded from external load balancers.
    ExcludedNode,
    /// The prefix is outside `allowedPrefixes`.
    OutsideAllowList(IpNet),
    /// No endpoint anywhere is ready (or serving while terminating).
    NotReady,
    /// `Local`: no endpoint on this node serves it.
    NoLocalEndpoint,
    /// `Local`, datapath gate: the node's proxy does not serve it yet.
    DatapathNotReady(String),
    /// The node drains and another node can serve it.
    Draining,
    /// The advertisement selects no peer of this node.
    NoPeer,
}

impl Reason {
    /// Every [`Reason::as_str`], for metrics that export each at 0.
    pub const CODES: [&'static str; 8] = [
        "ipModeProxy",
        "excludedNode",
        "outsideAllowList",
        "notReady",
        "noLocalEndpoint",
        "datapathNotReady",
        "draining",
        "noPeer",
    ];

    /// The short word `diff` and metrics use.
    pub fn as_str(&self) -> &'static str {
        match self {
            Reason::ProxyMode => "ipModeProxy",
            Reason::ExcludedNode => "excludedNode",
            Reason::OutsideAllowList(_) => "outsideAllowList",
            Reason::NotReady => "notReady",
            Reason::NoLocalEndpoint => "noLocalEndpoint",
            Reason::DatapathNotReady(_) => "datapathNotReady",
            Reason::Draining => "draining",
            Reason::NoPeer => "noPeer",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::ProxyMode => f.write_str("ipMode Proxy: a proxy serves it, not the nodes"),
            Reason::ExcludedNode => {
                write!(f, "the node is labelled {EXCLUDE_FROM_EXTERNAL_LB_LABEL}")
            }
            Reason::OutsideAllowList(p) => {
                write!(f, "{p} is outside the advertisement's allowedPrefixes")
            }
            Reason::NotReady => f.write_str("no ready endpoint anywhere"),
            Reason::NoLocalEndpoint => {
                f.write_str("traffic policy Local and no ready endpoint on this node")
            }
            Reason::DatapathNotReady(why) => {
                write!(f, "the node's service proxy does not serve it yet: {why}")
            }
            Reason::Draining => f.write_str("the node drains and another node serves it"),
            Reason::NoPeer => {
                f.write_str("the advertisement's peers selector matches no peer of this node")
            }
        }
    }
}

/// The attributes of one Service route to one peer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Announce {
    pub origin: Origin,
    pub communities: Vec<Community>,
    pub large_communities: Vec<LargeCommunity>,
    pub local_pref: Option<u32>,
    /// The advertisements that put it here, by name.
    pub advertisements: Vec<String>,
}

impl Announce {
    /// What one advertisement puts on its routes; communities sorted, so that merging in any
    /// order gives one answer.
    fn of(ad: &Advertisement, graceful_shutdown: bool) -> Self {
        let mut communities = ad.communities.clone();
        if graceful_shutdown {
            communities.push(Community::GRACEFUL_SHUTDOWN);
        }
        communities.sort();
        communities.dedup();
        let mut large_communities = ad.large_communities.clone();
        large_communities.sort();
        large_communities.dedup();
        Announce {
            origin: ad.origin,
            communities,
            large_communities,
            local_pref: ad.local_pref,
            advertisements: vec![ad.name.clone()],
        }
    }

    /// Two advertisements announcing one prefix to one peer: communities add up, the higher
    /// LOCAL_PREF wins, and ORIGIN is INCOMPLETE if either asks (the migration setting must
    /// not be undone by an overlapping object).
    pub(crate) fn merge(&mut self, other: Announce) {
        self.communities.extend(other.communities);
        self.communities.sort();
        self.communities.dedup();
        self.large_communities.extend(other.large_communities);
        self.large_communities.sort();
        self.large_communities.dedup();
        self.local_pref = self.local_pref.max(other.local_pref);
        self.origin = self.origin.max(other.origin);
        self.advertisements.extend(other.advertisements);
        self.advertisements.sort();
        self.advertisements.dedup();
    }
}

/// One selected address of one Service under one advertisement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub service: ServiceKey,
    pub kind: AddressKind,
    pub address: IpAddr,
    pub advertisement: String,
    /// The prefixes announced for it (the host route and/or the aggregate).
    pub announced: Vec<IpNet>,
    /// Why it is not announced, or (with `announced` non-empty) why the host route is not.
    pub held: Option<Reason>,
    /// The peers that receive it.
    pub peers: Vec<String>,
}

/// Everything one node announces for Services, and why not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Peer name → prefix → attributes.
    pub routes: BTreeMap<String, BTreeMap<IpNet, Announce>>,
    pub rows: Vec<Row>,
    /// Whether the routes carry GRACEFUL_SHUTDOWN (while the node drains).
    pub graceful_shutdown: bool,
}

impl Plan {
    /// Rows announced, and rows held, for counts (NodeBGPStatus carries counts, `diff` rows).
    pub fn counts(&self) -> (usize, usize) {
        let announced = self.rows.iter().filter(|r| !r.announced.is_empty()).count();
        (announced, self.rows.len() - announced)
    }

    /// Rows not announced, by [`Reason::as_str`].
    pub fn held_by_reason(&self) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for r in self.rows.iter().filter(|r| r.announced.is_empty()) {
            if let Some(reason) = &r.held {
                *out.entry(reason.as_str()).or_default() += 1;
            }
        }
        out
    }
}

/// What every Service of one node is planned against: the node, the advertisements that
/// select it with the peers each sends to, and those with the datapath gate.
#[derive(Debug, Clone, Default)]
pub(crate) struct Context {
    pub(crate) node: NodeFacts,
    /// The advertisements that select the node, each with the peers it selects.
    ads: Vec<(Advertisement, Vec<String>)>,
    /// Indexes into `ads` of those with the datapath gate.
    gated: Vec<usize>,
    /// The longest hold-down among the gated ones.
    pub(crate) hold: std::time::Duration,
}

impl Context {
    pub(crate) fn new(
        node: NodeFacts,
        peers: &[PeerFacts],
        advertisements: &[Advertisement],
    ) -> Self {
        let ads: Vec<(Advertisement, Vec<String>)> = advertisements
            .iter()
            .filter(|a| a.selects_node(&node.labels))
            .map(|a| {
                let to = peers
                    .iter()
                    .filter(|p| a.selects_peer(&p.labels))
                    .map(|p| p.name.clone())
                    .collect();
                (a.clone(), to)
            })
            .collect();
        let gated: Vec<usize> = (0..ads.len())
            .filter(|&i| {
                ads.get(i)
                    .is_some_and(|(a, _)| a.health_check_gate.is_some())
            })
            .collect();
        let hold = gated
            .iter()
            .filter_map(|&i| ads.get(i).and_then(|(a, _)| a.health_check_gate))
            .max()
            .unwrap_or_default();
        Context {
            node,
            ads,
            gated,
            hold,
        }
    }

    /// The whole drain: a route a draining node keeps (rule 6) keeps the community too, so
    /// routers still prefer any other path, and the end of the period changes nothing on it.
    fn graceful_shutdown(&self) -> bool {
        self.node.drain != Drain::No
    }
}

/// One Service's part of a node's plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Share {
    /// Sorted by (kind, address, advertisement).
    pub(crate) rows: Vec<Row>,
    /// (peer, prefix) → attributes, merged over the Service's own addresses and advertisements.
    pub(crate) routes: BTreeMap<(String, IpNet), Announce>,
    /// The `healthCheckNodePort` to probe, when the datapath gate applies (see
    /// [`probe_targets`]).
    pub(crate) probe: Option<u16>,
}

impl Share {
    pub(crate) fn announced(&self) -> usize {
        self.rows.iter().filter(|r| !r.announced.is_empty()).count()
    }

    /// The reasons of its rows not announced.
    pub(crate) fn held(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.rows
            .iter()
            .filter(|r| r.announced.is_empty())
            .filter_map(|r| r.held.as_ref().map(Reason::as_str))
    }
}

/// Rules 1-6 for every address of one Service under every advertisement of `ctx`.
/// It reads the endpoints only through [`Endpoints::serving`].
pub(crate) fn plan_service(ctx: &Context, svc: &ServiceFacts, endpoints: &Endpoints) -> Share {
    let serving = endpoints.serving();
    let mut share = Share {
        probe: probe_port(ctx, svc, serving),
        ..Share::default()
    };
    let excluded = ctx.node.labels.contains_key(EXCLUDE_FROM_EXTERNAL_LB_LABEL);
    for (ad, to) in &ctx.ads {
        if !selects_service(ad, svc) {
            continue;
        }
        for (kind, address, proxy) in addresses(ad, svc) {
            let decided = decide(&ctx.node, excluded, ad, svc, serving, kind, address, proxy);
            let (announced, held) = match decided {
                Ok(_) if to.is_empty() => (Vec::new(), Some(Reason::NoPeer)),
                Ok((prefixes, held)) => (prefixes, held),
                Err(reason) => (Vec::new(), Some(reason)),
            };
            for peer in to {
                for prefix in &announced {
                    let attrs = Announce::of(ad, ctx.graceful_shutdown());
                    match share.routes.get_mut(&(peer.clone(), *prefix)) {
                        Some(existing) => existing.merge(attrs),
                        None => {
                            share.routes.insert((peer.clone(), *prefix), attrs);
                        }
                    }
                }
            }
            share.rows.push(Row {
                service: svc.key.clone(),
                kind,
                address,
                advertisement: ad.name.clone(),
                peers: if announced.is_empty() {
                    Vec::new()
                } else {
                    to.clone()
                },
                announced,
                held,
            });
        }
    }
    share.rows.sort_by(|a, b| {
        (a.kind, a.address, &a.advertisement).cmp(&(b.kind, b.address, &b.advertisement))
    });
    share
}

/// The plan of one node. `services` yields each Service with its endpoints as seen from this
/// node; advertisements that do not select the node are skipped. [`crate::Planner`] keeps the
/// same plan up to date one Service at a time.
pub fn plan<'a>(
    node: &NodeFacts,
    peers: &[PeerFacts],
    advertisements: &[Advertisement],
    services: impl IntoIterator<Item = (&'a ServiceFacts, &'a Endpoints)>,
) -> Plan {
    let ctx = Context::new(node.clone(), peers, advertisements);
    let mut out = Plan {
        graceful_shutdown: ctx.graceful_shutdown(),
        ..Plan::default()
    };
    if ctx.ads.is_empty() {
        return out;
    }
    for (svc, endpoints) in services {
        let share = plan_service(&ctx, svc, endpoints);
        for ((peer, prefix), attrs) in share.routes {
            let routes = out.routes.entry(peer).or_default();
            match routes.get_mut(&prefix) {
                Some(existing) => existing.merge(attrs),
                None => {
                    routes.insert(prefix, attrs);
                }
            }
        }
        out.rows.extend(share.rows);
    }
    out.rows.sort_by(|a, b| {
        (&a.service, a.kind, a.address, &a.advertisement).cmp(&(
            &b.service,
            b.kind,
            b.address,
            &b.advertisement,
        ))
    });
    out
}

/// Whether `ad` selects `svc`: its `loadBalancerClass`, then its `serviceSelector` (absent
/// selects none).
pub(crate) fn selects_service(ad: &Advertisement, svc: &ServiceFacts) -> bool {
    use kube_core::SelectorExt;
    ad.load_balancer_class == svc.load_balancer_class
        && ad
            .service_selector
            .as_ref()
            .is_some_and(|s| s.matches(&svc.labels))
}

/// The Service's addresses of the kinds the advertisement names: (kind, address, ipMode
/// Proxy). Addresses from migration annotations are LoadBalancer addresses.
fn addresses(ad: &Advertisement, svc: &ServiceFacts) -> Vec<(AddressKind, IpAddr, bool)> {
    let mut out = Vec::new();
    for &kind in &ad.addresses {
        match kind {
            AddressKind::LoadBalancerIp if svc.is_load_balancer => {
                out.extend(
                    svc.load_balancer_ips
                        .iter()
                        .map(|&(ip, proxy)| (kind, ip, proxy)),
                );
                for &ip in &svc.annotated_ips {
                    if !svc.load_balancer_ips.iter().any(|(i, _)| *i == ip) {
                        out.push((kind, ip, false));
                    }
                }
            }
            AddressKind::LoadBalancerIp => {}
            AddressKind::ExternalIp => {
                out.extend(svc.external_ips.iter().map(|&ip| (kind, ip, false)))
            }
            AddressKind::ClusterIp => {
                out.extend(svc.cluster_ips.iter().map(|&ip| (kind, ip, false)))
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Rules 1-6 for one address: the prefixes to announce and, if not all of them, why.
#[allow(clippy::too_many_arguments)]
fn decide(
    node: &NodeFacts,
    excluded: bool,
    ad: &Advertisement,
    svc: &ServiceFacts,
    serving: Serving,
    kind: AddressKind,
    address: IpAddr,
    proxy: bool,
) -> Result<(Vec<IpNet>, Option<Reason>), Reason> {
    if proxy {
        return Err(Reason::ProxyMode);
    }
    if excluded && kind.is_external() {
        return Err(Reason::ExcludedNode);
    }
    let host = IpNet::from(address);
    let aggregate = ad.aggregate(address);
    if !ad.allows(&aggregate) {
        return Err(Reason::OutsideAllowList(aggregate));
    }
    let policy = if kind.is_external() {
        svc.external_policy
    } else {
        svc.internal_policy
    };
    if !serving.anywhere {
        return Err(Reason::NotReady);
    }
    let aggregated = aggregate != host;
    // What the host route needs beyond "served anywhere" (Local only).
    let host_held = match policy {
        TrafficPolicy::Cluster => None,
        TrafficPolicy::Local if !serving.here => Some(Reason::NoLocalEndpoint),
        TrafficPolicy::Local if ad.health_check_gate.is_none() => None,
        TrafficPolicy::Local if svc.health_check_node_port.is_none() => Some(
            Reason::DatapathNotReady("the Service has no healthCheckNodePort to probe".into()),
        ),
        TrafficPolicy::Local => match node.datapath.get(&svc.key) {
            Some(Ok(())) => None,
            Some(Err(why)) => Some(Reason::DatapathNotReady(why.clone())),
            None => Some(Reason::DatapathNotReady("not probed yet".into())),
        },
    };
    if node.drain == Drain::Withdrawn {
        let last_server =
            policy == TrafficPolicy::Local && host_held.is_none() && !serving.elsewhere;
        if !last_server {
            return Err(Reason::Draining);
        }
    }
    match (aggregated, policy, host_held) {
        (false, _, None) => Ok((vec![host], None)),
        (false, _, Some(why)) => Err(why),
        (true, TrafficPolicy::Cluster, _) => Ok((vec![aggregate], None)),
        (true, TrafficPolicy::Local, None) => Ok((vec![aggregate, host], None)),
        (true, TrafficPolicy::Local, Some(why)) => Ok((vec![aggregate], Some(why))),
    }
}

/// The Services the node's service proxy must be probed for: `Local` ones (external traffic
/// policy, LoadBalancer or ExternalIP addresses) with a `healthCheckNodePort` and an endpoint
/// here, selected by an advertisement with the datapath gate that selects the node. With the
/// longest hold-down among those advertisements.
pub fn probe_targets<'a>(
    node: &NodeFacts,
    advertisements: &[Advertisement],
    services: impl IntoIterator<Item = (&'a ServiceFacts, &'a Endpoints)>,
) -> (Vec<(ServiceKey, u16)>, std::time::Duration) {
    let ctx = Context::new(node.clone(), &[], advertisements);
    let targets = services
        .into_iter()
        .filter_map(|(svc, e)| {
            probe_port(&ctx, svc, e.serving()).map(|port| (svc.key.clone(), port))
        })
        .collect();
    (targets, ctx.hold)
}

/// One Service's `healthCheckNodePort`, if the node's proxy must be probed for it.
fn probe_port(ctx: &Context, svc: &ServiceFacts, serving: Serving) -> Option<u16> {
    let port = svc.health_check_node_port?;
    let external = ctx
        .gated
        .iter()
        .filter_map(|&i| ctx.ads.get(i))
        .any(|(a, _)| selects_service(a, svc) && a.addresses.iter().any(|k| k.is_external()));
    (external && svc.external_policy == TrafficPolicy::Local && serving.here).then_some(port)
}
