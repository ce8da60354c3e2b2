//! Adj-RIB-Out: what we advertised to one peer, and a pure planner that turns "the routes we
//! should be advertising" into the minimal UPDATEs (MetalLB's `Session.Set` semantics).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

use ipnet::IpNet;

use crate::builder;
use crate::error::EncodeError;
use crate::message::WireOptions;
use crate::message::attribute::{AsPath, AttrValue, Origin, PathAttribute};
use crate::message::update::{MpNextHop, Update};
use crate::types::{Asn, Family};

/// Attributes of an announced route, set per route set (per peer) by the speaker.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteAttributes {
    pub next_hop: IpAddr,
    pub origin: OriginKind,
    /// Extra copies of the local AS on eBGP sessions.
    pub as_path_prepend: u8,
    pub med: Option<u32>,
    /// Sent on iBGP sessions only (RFC 4271 §5.1.5).
    pub local_pref: Option<u32>,
    pub communities: Vec<u32>,
    pub large_communities: Vec<[u32; 3]>,
    pub extended_communities: Vec<[u8; 8]>,
}

/// `Origin` with an ordering, so attribute sets can key maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OriginKind {
    Igp,
    Egp,
    Incomplete,
}

impl From<OriginKind> for Origin {
    fn from(o: OriginKind) -> Origin {
        match o {
            OriginKind::Igp => Origin::Igp,
            OriginKind::Egp => Origin::Egp,
            OriginKind::Incomplete => Origin::Incomplete,
        }
    }
}

impl RouteAttributes {
    pub fn with_next_hop(next_hop: IpAddr) -> Self {
        RouteAttributes {
            next_hop,
            origin: OriginKind::Igp,
            as_path_prepend: 0,
            med: None,
            local_pref: None,
            communities: Vec::new(),
            large_communities: Vec::new(),
            extended_communities: Vec::new(),
        }
    }
}

pub use super::route_set::RouteSet;

/// What the session negotiated that shapes UPDATEs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportContext {
    pub local_asn: Asn,
    pub ibgp: bool,
    pub families: Vec<Family>,
    /// RFC 8950 negotiated for IPv4 unicast with IPv6 next hops.
    pub extended_next_hop_ipv4: bool,
    /// Our link-local address on the link shared with the peer, if any (RFC 2545 §3).
    pub link_local_next_hop: Option<Ipv6Addr>,
    pub wire: WireOptions,
}

/// Why a route was not sent to this peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Refusal {
    /// The peer did not negotiate the prefix's family.
    FamilyNotNegotiated,
    /// IPv4 prefix with an IPv6 next hop without RFC 8950, or an IPv6 prefix with an IPv4
    /// next hop (never sent as IPv4-mapped).
    NextHopFamily,
    /// The attribute set does not fit in one UPDATE next to a single prefix.
    AttributesTooLarge,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::FamilyNotNegotiated => "family-not-negotiated",
            Refusal::NextHopFamily => "next-hop-family",
            Refusal::AttributesTooLarge => "attributes-too-large",
        }
    }
}

fn family_of(p: &IpNet) -> Family {
    match p {
        IpNet::V4(_) => Family::IPV4_UNICAST,
        IpNet::V6(_) => Family::IPV6_UNICAST,
    }
}

/// Whether `route` can be sent on this session.
pub fn check_route(
    prefix: &IpNet,
    attrs: &RouteAttributes,
    ctx: &ExportContext,
) -> Result<(), Refusal> {
    if !ctx.families.contains(&family_of(prefix)) {
        return Err(Refusal::FamilyNotNegotiated);
    }
    match (prefix, attrs.next_hop) {
        (IpNet::V4(_), IpAddr::V4(_)) | (IpNet::V6(_), IpAddr::V6(_)) => Ok(()),
        (IpNet::V4(_), IpAddr::V6(_)) if ctx.extended_next_hop_ipv4 => Ok(()),
        _ => Err(Refusal::NextHopFamily),
    }
}

/// The minimal change from `advertised` to `desired`: withdrawals, then announcements grouped
/// by identical attributes (each group becomes as few UPDATEs as fit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub withdraw: Vec<IpNet>,
    pub announce: BTreeMap<Arc<RouteAttributes>, Vec<IpNet>>,
    pub refused: Vec<(IpNet, Refusal)>,
    /// The route set this plan reaches; `AdjRibOut::apply` keeps it (shared, not copied).
    pub target: Arc<RouteSet>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.withdraw.is_empty() && self.announce.is_empty()
    }
}

/// What was advertised to one peer. Cleared when the session goes down.
///
/// After a plan is sent the peer holds exactly the plan's target minus what the session
/// refused, so the target is kept by reference: a 100,000-route table costs one copy per
/// peer (the speaker's), not two.
#[derive(Debug, Clone, Default)]
pub struct AdjRibOut {
    sent: Arc<RouteSet>,
    /// Prefixes of `sent` that were not put on the wire (see `Refusal`).
    refused: BTreeSet<IpNet>,
}

impl PartialEq for AdjRibOut {
    fn eq(&self, other: &Self) -> bool {
        self.advertised().eq(other.advertised())
    }
}

impl Eq for AdjRibOut {}

impl AdjRibOut {
    /// The same applied table (by reference) and the same refusals: a cheap equality for
    /// snapshots, where [`PartialEq`] compares every route.
    pub fn same_snapshot(&self, other: &AdjRibOut) -> bool {
        Arc::ptr_eq(&self.sent, &other.sent) && self.refused == other.refused
    }

    /// The advertised routes, sorted by prefix.
    pub fn advertised(&self) -> impl Iterator<Item = (&IpNet, &Arc<RouteAttributes>)> + '_ {
        self.sent.iter().filter(|(p, _)| !self.refused.contains(p))
    }

    pub fn get(&self, prefix: &IpNet) -> Option<&Arc<RouteAttributes>> {
        self.sent
            .get(prefix)
            .filter(|_| !self.refused.contains(prefix))
    }

    pub fn len(&self) -> usize {
        self.sent.len() - self.refused.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&mut self) {
        *self = AdjRibOut::default();
    }

    pub fn count(&self, family: Family) -> usize {
        self.advertised()
            .filter(|(p, _)| family_of(p) == family)
            .count()
    }

    /// Computes the change to reach `desired` without applying it.
    pub fn plan(&self, desired: &Arc<RouteSet>, ctx: &ExportContext) -> Plan {
        let mut plan = Plan {
            target: Arc::clone(desired),
            ..Plan::default()
        };
        // Both sides are sorted by prefix: one merge pass instead of a lookup per prefix.
        let mut advertised = self.advertised().peekable();
        // Consecutive prefixes usually share one attribute set: collect a run, then add it to
        // its group with one map lookup.
        let mut run: Option<(&Arc<RouteAttributes>, Vec<IpNet>)> = None;
        let mut same: Option<(*const RouteAttributes, *const RouteAttributes)> = None;
        for (prefix, attrs) in desired.iter() {
            while let Some((gone, _)) = advertised.next_if(|(p, _)| *p < prefix) {
                plan.withdraw.push(*gone);
            }
            let current = advertised.next_if(|(p, _)| *p == prefix).map(|(_, a)| a);
            if let Err(r) = check_route(prefix, attrs, ctx) {
                plan.refused.push((*prefix, r));
                if current.is_some() {
                    plan.withdraw.push(*prefix);
                }
                continue;
            }
            // Route sets are rebuilt on every change with fresh `Arc`s: compare contents once
            // per pair of allocations, not once per prefix.
            let unchanged = current.is_some_and(|cur| {
                let pair = (Arc::as_ptr(cur), Arc::as_ptr(attrs));
                Arc::ptr_eq(cur, attrs)
                    || same == Some(pair)
                    || (**cur == **attrs && {
                        same = Some(pair);
                        true
                    })
            });
            if unchanged {
                continue;
            }
            match &mut run {
                Some((a, prefixes)) if Arc::ptr_eq(a, attrs) || **a == *attrs => {
                    prefixes.push(*prefix)
                }
                _ => {
                    if let Some((a, prefixes)) = run.replace((attrs, vec![*prefix])) {
                        plan.add_run(a, prefixes);
                    }
                }
            }
        }
        if let Some((a, prefixes)) = run {
            plan.add_run(a, prefixes);
        }
        plan.withdraw.extend(advertised.map(|(p, _)| *p));
        plan
    }

    /// Records a plan as sent: the peer now holds the plan's target minus its refusals.
    pub fn apply(&mut self, plan: &Plan) {
        self.sent = Arc::clone(&plan.target);
        self.refused = plan.refused.iter().map(|(p, _)| *p).collect();
    }
}

impl Plan {
    fn add_run(&mut self, attrs: &Arc<RouteAttributes>, prefixes: Vec<IpNet>) {
        match self.announce.get_mut(attrs) {
            Some(group) => group.extend(prefixes),
            None => {
                self.announce.insert(Arc::clone(attrs), prefixes);
            }
        }
    }
}

/// The path attributes sent for `attrs` on this session (next hop and NLRI are added by the
/// UPDATE builder).
pub fn path_attributes(attrs: &RouteAttributes, ctx: &ExportContext) -> Vec<PathAttribute> {
    let mut out = vec![PathAttribute::new(AttrValue::Origin(attrs.origin.into()))];
    let path = if ctx.ibgp {
        AsPath::default()
    } else {
        AsPath::sequence(vec![
            ctx.local_asn.0;
            1 + usize::from(attrs.as_path_prepend)
        ])
    };
    // RFC 6793 §4.2.2: a 2-octet peer gets AS_TRANS in AS_PATH and the real path in AS4_PATH.
    let as4 = (!ctx.wire.four_octet_as && path.needs_as4_path()).then(|| path.clone());
    let path = if ctx.wire.four_octet_as {
        path
    } else {
        path.with_as_trans()
    };
    out.push(PathAttribute::new(AttrValue::AsPath(path)));
    if let Some(med) = attrs.med {
        out.push(PathAttribute::new(AttrValue::Med(med)));
    }
    if ctx.ibgp {
        out.push(PathAttribute::new(AttrValue::LocalPref(
            attrs.local_pref.unwrap_or(100),
        )));
    }
    if !attrs.communities.is_empty() {
        out.push(PathAttribute::new(AttrValue::Communities(
            attrs.communities.clone(),
        )));
    }
    if !attrs.extended_communities.is_empty() {
        out.push(PathAttribute::new(AttrValue::ExtendedCommunities(
            attrs.extended_communities.clone(),
        )));
    }
    if let Some(as4) = as4 {
        out.push(PathAttribute::new(AttrValue::As4Path(as4)));
    }
    if !attrs.large_communities.is_empty() {
        out.push(PathAttribute::new(AttrValue::LargeCommunities(
            attrs.large_communities.clone(),
        )));
    }
    out
}

/// Encodes a plan as UPDATEs: withdrawals first, then one group of announcements per
/// attribute set, split by family.
pub fn plan_updates(plan: &Plan, ctx: &ExportContext) -> Result<Vec<Update>, EncodeError> {
    let mut out = builder::withdraw(&plan.withdraw, &ctx.wire)?;
    for (attrs, prefixes) in &plan.announce {
        out.extend(announce_updates(attrs, prefixes, ctx)?);
    }
    Ok(out)
}

/// Full-table UPDATEs for one family (after establishment or a route refresh).
pub fn full_table_updates(
    rib: &AdjRibOut,
    family: Family,
    ctx: &ExportContext,
) -> Result<Vec<Update>, EncodeError> {
    let mut groups: BTreeMap<&Arc<RouteAttributes>, Vec<IpNet>> = BTreeMap::new();
    for (p, a) in rib.advertised() {
        if family_of(p) == family {
            groups.entry(a).or_default().push(*p);
        }
    }
    let mut out = Vec::new();
    for (attrs, prefixes) in groups {
        out.extend(announce_updates(attrs, &prefixes, ctx)?);
    }
    Ok(out)
}

fn announce_updates(
    attrs: &RouteAttributes,
    prefixes: &[IpNet],
    ctx: &ExportContext,
) -> Result<Vec<Update>, EncodeError> {
    let path = path_attributes(attrs, ctx);
    let mut out = Vec::new();
    let v4: Vec<ipnet::Ipv4Net> = prefixes
        .iter()
        .filter_map(|p| match p {
            IpNet::V4(v) => Some(*v),
            IpNet::V6(_) => None,
        })
        .collect();
    let v6: Vec<IpNet> = prefixes
        .iter()
        .filter(|p| matches!(p, IpNet::V6(_)))
        .copied()
        .collect();
    match attrs.next_hop {
        IpAddr::V4(nh) => {
            out.extend(builder::announce_ipv4(&path, nh, &v4, &ctx.wire)?);
        }
        IpAddr::V6(address) => {
            let nh = ipv6_next_hop(address, ctx.link_local_next_hop);
            if !v4.is_empty() {
                let v4: Vec<IpNet> = v4.into_iter().map(IpNet::V4).collect();
                out.extend(builder::announce_mp(
                    &path,
                    Family::IPV4_UNICAST,
                    &nh,
                    &v4,
                    &ctx.wire,
                )?);
            }
            if !v6.is_empty() {
                out.extend(builder::announce_mp(
                    &path,
                    Family::IPV6_UNICAST,
                    &nh,
                    &v6,
                    &ctx.wire,
                )?);
            }
        }
    }
    Ok(out)
}

/// RFC 2545 §3: a global next hop goes alone, or followed by our link-local address when
/// the peer shares our link. A link-local next hop (an unnumbered session with no global
/// address) goes in the second field after `::`, where BIRD and FRR look for it; it is never
/// sent as the global address.
pub fn ipv6_next_hop(address: Ipv6Addr, link_local: Option<Ipv6Addr>) -> MpNextHop {
    if address.is_unicast_link_local() {
        return MpNextHop::Ipv6 {
            global: Ipv6Addr::UNSPECIFIED,
            link_local: Some(address),
        };
    }
    MpNextHop::Ipv6 {
        global: address,
        link_local: link_local.filter(Ipv6Addr::is_unicast_link_local),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The planner before the merge-join rewrite: one lookup per prefix.
    fn plan_by_lookup(rib: &AdjRibOut, desired: &Arc<RouteSet>, ctx: &ExportContext) -> Plan {
        let mut plan = Plan {
            target: Arc::clone(desired),
            ..Plan::default()
        };
        for (prefix, attrs) in desired.iter() {
            if let Err(r) = check_route(prefix, attrs, ctx) {
                plan.refused.push((*prefix, r));
                continue;
            }
            if rib.get(prefix) != Some(attrs) {
                plan.announce
                    .entry(Arc::clone(attrs))
                    .or_default()
                    .push(*prefix);
            }
        }
        for (prefix, _) in rib.advertised() {
            let still = desired
                .get(prefix)
                .is_some_and(|a| check_route(prefix, a, ctx).is_ok());
            if !still {
                plan.withdraw.push(*prefix);
            }
        }
        plan
    }

    fn set(entries: &[(u8, bool, u8)]) -> Arc<RouteSet> {
        // Attribute sets 0..3: 1 and 2 are equal in content but distinct allocations; 3 has
        // an IPv6 next hop (refused for IPv4 prefixes without RFC 8950).
        let nh4 = |last| IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, last));
        let attrs = [
            Arc::new(RouteAttributes::with_next_hop(nh4(1))),
            Arc::new(RouteAttributes::with_next_hop(nh4(2))),
            Arc::new(RouteAttributes::with_next_hop(nh4(2))),
            Arc::new(RouteAttributes::with_next_hop(IpAddr::V6(
                std::net::Ipv6Addr::LOCALHOST,
            ))),
        ];
        entries
            .iter()
            .map(|&(i, v6, a)| {
                let p: IpNet = if v6 {
                    format!("fd00:{i}::/64").parse().unwrap()
                } else {
                    format!("10.0.{i}.0/24").parse().unwrap()
                };
                (p, Arc::clone(&attrs[usize::from(a % 4)]))
            })
            .collect::<RouteSet>()
            .into()
    }

    #[test]
    fn applied_target_is_shared_not_copied_and_refusals_are_not_advertised() {
        let ctx = ExportContext {
            local_asn: Asn(65000),
            ibgp: false,
            families: vec![Family::IPV4_UNICAST],
            extended_next_hop_ipv4: false,
            link_local_next_hop: None,
            wire: WireOptions::default(),
        };
        // Two IPv4 routes and one IPv6 route the IPv4-only session refuses.
        let target = set(&[(1, false, 0), (2, false, 1), (3, true, 0)]);
        let mut rib = AdjRibOut::default();
        let plan = rib.plan(&target, &ctx);
        assert_eq!(plan.refused.len(), 1);
        rib.apply(&plan);
        drop(plan);
        assert!(
            Arc::ptr_eq(&rib.sent, &target),
            "the target is kept by reference"
        );
        assert_eq!(rib.len(), 2);
        assert_eq!(rib.count(Family::IPV4_UNICAST), 2);
        assert_eq!(rib.count(Family::IPV6_UNICAST), 0);
        let v6: IpNet = "fd00:3::/64".parse().unwrap();
        assert_eq!(rib.get(&v6), None);
        assert!(rib.advertised().all(|(p, _)| *p != v6));
        assert!(rib.plan(&target, &ctx).is_empty());
    }

    proptest! {
        #[test]
        fn merge_join_plan_equals_lookup_plan(
            before in prop::collection::vec((0u8..16, any::<bool>(), 0u8..4), 0..24),
            after in prop::collection::vec((0u8..16, any::<bool>(), 0u8..4), 0..24),
            v6 in any::<bool>(),
        ) {
            let mut families = vec![Family::IPV4_UNICAST];
            if v6 {
                families.push(Family::IPV6_UNICAST);
            }
            let ctx = ExportContext {
                local_asn: Asn(65000),
                ibgp: false,
                families,
                extended_next_hop_ipv4: false,
                link_local_next_hop: None,
                wire: WireOptions::default(),
            };
            let mut rib = AdjRibOut::default();
            let first = rib.plan(&set(&before), &ctx);
            prop_assert_eq!(&first, &plan_by_lookup(&rib, &set(&before), &ctx));
            rib.apply(&first);
            let mut reference = RouteSet::new();
            for (attrs, prefixes) in &first.announce {
                for p in prefixes {
                    reference.insert(*p, Arc::clone(attrs));
                }
            }
            let kept: RouteSet = rib.advertised().map(|(p, a)| (*p, Arc::clone(a))).collect();
            prop_assert_eq!(&kept, &reference, "the kept target equals what was announced");
            prop_assert_eq!(rib.len(), reference.len());
            let desired = set(&after);
            prop_assert_eq!(rib.plan(&desired, &ctx), plan_by_lookup(&rib, &desired, &ctx));
        }
    }
}
