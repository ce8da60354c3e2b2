//! Which configuration objects one node runs. Conflicts are settled the same way everywhere
//! (the speaker runs the result, the controller reports it): the oldest object wins
//! (`creationTimestamp`, then name); the other is not applied on that node.

use std::collections::BTreeMap;

use ipam_watch::crd::{BGPPeer, BGPPeerSpec, BGPSpeakerConfig};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};

use super::{Objects, age_key};

/// The two kinds, for messages and references.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKind {
    SpeakerConfig,
    Peer,
}

impl ObjectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::SpeakerConfig => "BGPSpeakerConfig",
            ObjectKind::Peer => "BGPPeer",
        }
    }
}

impl std::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An object not applied on a node because an older one takes its place there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub kind: ObjectKind,
    pub loser: String,
    pub winner: String,
    /// What they share: "both select this node", "both peer with 192.0.2.1 port 179".
    pub what: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} is not applied: {} {} is older and {}",
            self.kind, self.loser, self.kind, self.winner, self.what
        )
    }
}

/// What one node runs.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSelection<'a> {
    /// The oldest `BGPSpeakerConfig` selecting the node; `None`: the node announces nothing.
    pub config: Option<&'a BGPSpeakerConfig>,
    /// The `BGPPeer`s selecting the node, one per endpoint, by name.
    pub peers: Vec<&'a BGPPeer>,
    pub conflicts: Vec<Conflict>,
    /// Objects whose `nodeSelector` cannot be evaluated (they select nothing), with why.
    pub bad_selectors: Vec<(ObjectKind, String, String)>,
}

/// Does `selector` (absent or empty: every node) select a node with `labels`?
fn selects(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    let Some(s) = selector else {
        return Ok(true);
    };
    let s = Selector::try_from(s.clone()).map_err(|e| format!("spec.nodeSelector: {e}"))?;
    Ok(s.matches(labels))
}

/// Where a peer is, as far as two peers on one node may not share it: the address (or
/// `default-gateway` of a family, or the interface and neighbour) and the port.
pub fn endpoint_key(spec: &BGPPeerSpec) -> String {
    let port = spec.port.unwrap_or(179);
    let at = match (&spec.address, &spec.interface) {
        (Some(a), _) if a == "default-gateway" => {
            let family = spec.address_family.map_or("ipv4", |f| match f {
                ipam_watch::crd::AddressFamilySpec::Ipv4 => "ipv4",
                ipam_watch::crd::AddressFamilySpec::Ipv6 => "ipv6",
            });
            format!("the {family} default gateway")
        }
        (Some(a), _) => a.clone(),
        (None, Some(i)) => match &spec.peer_address {
            Some(p) => p.clone(),
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
    configs.sort_by_key(|c| age_key(*c));
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
    peers.sort_by_key(|p| age_key(*p));

    let mut conflicts = Vec::new();
    let config = configs.first().copied();
    for other in configs.iter().skip(1) {
        conflicts.push(Conflict {
            kind: ObjectKind::SpeakerConfig,
            loser: other.name_any(),
            winner: config.map(ResourceExt::name_any).unwrap_or_default(),
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
