//! Which configuration objects one node runs. Conflicts are settled the same way everywhere
//! (the speaker runs the result, the controller reports it): the higher `spec.priority` wins,
//! then the first name in alphabetical order; the other is not applied on that node. Never
//! the creation time: a restore, a GitOps bootstrap or `replace --force` would reorder it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};
use podcidr_api::{BGPPeer, BGPPeerSpec, BGPSpeakerConfig};

use super::Objects;

/// The configuration kinds, for messages and references.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKind {
    SpeakerConfig,
    Peer,
    /// Service routes: read by every speaker, never part of a node's config.
    Advertisement,
}

impl ObjectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::SpeakerConfig => "BGPSpeakerConfig",
            ObjectKind::Peer => "BGPPeer",
            ObjectKind::Advertisement => "BGPAdvertisement",
        }
    }
}

impl std::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An object not applied on a node because one of higher precedence takes its place there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub kind: ObjectKind,
    pub loser: String,
    pub winner: String,
    /// Their `spec.priority`s: (winner, loser).
    pub priorities: (i32, i32),
    /// What they share: "both select this node", "both peer with 192.0.2.1 port 179".
    pub what: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, winner) = (self.kind, &self.winner);
        let (won, lost) = self.priorities;
        write!(f, "{kind} {} is not applied: {kind} {winner} ", self.loser)?;
        if won == lost {
            write!(
                f,
                "has the same priority ({won}) and comes first by name, and {}; \
                 set spec.priority to choose",
                self.what
            )
        } else {
            write!(f, "has priority {won} (this one {lost}) and {}", self.what)
        }
    }
}

/// `spec.priority`, default 0.
pub fn priority<K: PrioritySpec>(o: &K) -> i32 {
    o.priority().unwrap_or(0)
}

/// The kinds that carry `spec.priority`.
pub trait PrioritySpec: kube::Resource {
    fn priority(&self) -> Option<i32>;
}

impl PrioritySpec for BGPSpeakerConfig {
    fn priority(&self) -> Option<i32> {
        self.spec.priority
    }
}

impl PrioritySpec for BGPPeer {
    fn priority(&self) -> Option<i32> {
        self.spec.priority
    }
}

/// Precedence: the highest priority first, then the name.
fn precedence<K: PrioritySpec>(o: &K) -> (std::cmp::Reverse<i32>, String) {
    (
        std::cmp::Reverse(priority(o)),
        o.meta().name.clone().unwrap_or_default(),
    )
}

/// What one node runs.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSelection<'a> {
    /// The `BGPSpeakerConfig` of highest precedence selecting the node; `None`: the node announces nothing.
    pub config: Option<&'a BGPSpeakerConfig>,
    /// The `BGPPeer`s selecting the node, one per endpoint, by name.
    pub peers: Vec<&'a BGPPeer>,
    pub conflicts: Vec<Conflict>,
    /// Objects whose `nodeSelector` cannot be evaluated (they select nothing), with why.
    pub bad_selectors: Vec<(ObjectKind, String, String)>,
}

/// Does `selector` (absent or empty: every node) select a node with `labels`?
pub(super) fn selects(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    let Some(s) = selector else {
        return Ok(true);
    };
    let s = Selector::try_from(s.clone()).map_err(|e| format!("spec.nodeSelector: {e}"))?;
    Ok(s.matches(labels))
}

/// An address as an address: `2001:DB8::1` and `2001:db8:0::1` are one router, and an
/// IPv4-mapped IPv6 address is the IPv4 address. Anything else (the schema refuses it) as
/// written.
fn canonical_address(a: &str) -> String {
    a.parse::<std::net::IpAddr>()
        .map_or_else(|_| a.to_owned(), |ip| ip.to_canonical().to_string())
}

/// Where a peer is, as far as two peers on one node may not share it: the address (or
/// `default-gateway` of a family, or the interface and neighbour) and the port. Addresses
/// compare as addresses; a link-local neighbour is one only on its own interface.
pub fn endpoint_key(spec: &BGPPeerSpec) -> String {
    let port = spec.port.unwrap_or(179);
    let at = match (&spec.address, &spec.interface) {
        (Some(a), _) if a == "default-gateway" => {
            let family = spec.address_family.map_or("ipv4", |f| match f {
                podcidr_api::AddressFamilySpec::Ipv4 => "ipv4",
                podcidr_api::AddressFamilySpec::Ipv6 => "ipv6",
            });
            format!("the {family} default gateway")
        }
        (Some(a), _) => canonical_address(a),
        (None, Some(i)) => match &spec.peer_address {
            Some(p) => format!("{} on {i}", canonical_address(p)),
            None => format!("the neighbour on {i}"),
        },
        (None, None) => "no address".to_owned(),
    };
    format!("{at} port {port}")
}

/// The objects that apply to a node with these labels, conflicts settled.
pub fn select<'a>(objects: &'a Objects, labels: &BTreeMap<String, String>) -> NodeSelection<'a> {
    let mut bad = Vec::new();
    let mut check = |kind, name: String, selector| match selects(selector, labels) {
        Ok(yes) => yes,
        Err(e) => {
            bad.push((kind, name, e));
            false
        }
    };
    let mut configs: Vec<&BGPSpeakerConfig> = objects
        .configs
        .values()
        .filter(|c| {
            check(
                ObjectKind::SpeakerConfig,
                c.name_any(),
                c.spec.node_selector.as_ref(),
            )
        })
        .collect();
    configs.sort_by_key(|c| precedence(*c));
    let mut peers: Vec<&BGPPeer> = objects
        .peers
        .values()
        .filter(|p| {
            check(
                ObjectKind::Peer,
                p.name_any(),
                p.spec.node_selector.as_ref(),
            )
        })
        .collect();
    peers.sort_by_key(|p| precedence(*p));

    let mut conflicts = Vec::new();
    let config = configs.first().copied();
    for other in configs.iter().skip(1) {
        conflicts.push(Conflict {
            kind: ObjectKind::SpeakerConfig,
            loser: other.name_any(),
            winner: config.map(ResourceExt::name_any).unwrap_or_default(),
            priorities: (config.map_or(0, priority), priority(*other)),
            what: "both select this node".into(),
        });
    }
    let mut by_endpoint: BTreeMap<String, &BGPPeer> = BTreeMap::new();
    let mut kept = Vec::new();
    for p in peers {
        let key = endpoint_key(&p.spec);
        match by_endpoint.get(&key) {
            Some(winner) => conflicts.push(Conflict {
                kind: ObjectKind::Peer,
                loser: p.name_any(),
                winner: winner.name_any(),
                priorities: (priority(*winner), priority(p)),
                what: format!("both peer with {key} on this node"),
            }),
            None => {
                by_endpoint.insert(key, p);
                kept.push(p);
            }
        }
    }
    kept.sort_by_key(|p| p.name_any());
    NodeSelection {
        config,
        peers: kept,
        conflicts,
        bad_selectors: bad,
    }
}
