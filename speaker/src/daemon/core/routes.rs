//! From the guarded CIDRs to the route set each peer should advertise: next hop per family
//! and the peer's attributes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use bgp_proto::Family;
use bgp_proto::session::{OriginKind, RouteAttributes, RouteSet};
use ipnet::IpNet;
use podcidr_config::{NextHopConfig, NextHops, PeerAddress, PeerConfig};

/// Addresses the next-hop policy can use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAddresses {
    /// The Node's first InternalIP of each family (from the API; empty in file mode).
    pub internal_v4: Option<Ipv4Addr>,
    pub internal_v6: Option<Ipv6Addr>,
}

/// Why a prefix is not offered to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PeerRefusal {
    /// The peer is not configured for this family.
    FamilyNotCarried,
    /// No usable next hop of the prefix's family (e.g. `nextHop.ipv6: node` and the Node has
    /// no IPv6 InternalIP).
    NoNextHop,
    /// An IPv4 prefix on an IPv6 session with no IPv4 next hop: it needs `extendedNextHop`
    /// (RFC 8950) on the peer.
    NeedsExtendedNextHop,
}

impl PeerRefusal {
    pub const ALL: [PeerRefusal; 3] = [
        PeerRefusal::FamilyNotCarried,
        PeerRefusal::NoNextHop,
        PeerRefusal::NeedsExtendedNextHop,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            PeerRefusal::FamilyNotCarried => "family-not-carried",
            PeerRefusal::NoNextHop => "no-next-hop",
            PeerRefusal::NeedsExtendedNextHop => "needs-extended-next-hop",
        }
    }
}

/// `self` for one family: the peer's local address when it is of that family, else the
/// source address towards the peer, else the node's address of that family. Lookups are
/// injected so this stays testable.
fn self_address(
    peer: &PeerConfig,
    v6: bool,
    lookup: &dyn Fn(&PeerAddress) -> Option<IpAddr>,
    node: &NodeAddresses,
) -> Option<IpAddr> {
    let same_family = |a: &IpAddr| a.is_ipv6() == v6;
    peer.local_address
        .filter(same_family)
        .or_else(|| {
            (peer.address.is_ipv4() != v6)
                .then(|| lookup(&peer.address))
                .flatten()
                .filter(same_family)
        })
        .or(if v6 {
            node.internal_v6.map(IpAddr::V6)
        } else {
            node.internal_v4.map(IpAddr::V4)
        })
}

/// Next hop per family for one peer. With `extendedNextHop` on an IPv6 session, IPv4
/// routes take the IPv6 next hop when `nextHop.ipv4` is `self` (RFC 8950: the session has
/// no IPv4 address of its own, e.g. an unnumbered link).
pub fn next_hops(
    policy: &NextHops,
    peer: &PeerConfig,
    node: &NodeAddresses,
    lookup: &dyn Fn(&PeerAddress) -> Option<IpAddr>,
) -> (Option<IpAddr>, Option<IpAddr>) {
    let v6 = match policy.ipv6 {
        NextHopConfig::SelfAddress => self_address(peer, true, lookup, node),
        NextHopConfig::Node => node.internal_v6.map(IpAddr::V6),
        NextHopConfig::Address(a) => Some(IpAddr::V6(a)),
    };
    let extended = peer.extended_next_hop
        && !peer.address.is_ipv4()
        && !peer.local_address.is_some_and(|a| a.is_ipv4());
    let v4 = match policy.ipv4 {
        NextHopConfig::SelfAddress if extended => v6,
        NextHopConfig::SelfAddress => self_address(peer, false, lookup, node),
        NextHopConfig::Node => node.internal_v4.map(IpAddr::V4),
        NextHopConfig::Address(a) => Some(IpAddr::V4(a)),
    };
    (v4, v6)
}

pub(super) fn attributes(peer: &PeerConfig, next_hop: IpAddr) -> RouteAttributes {
    RouteAttributes {
        next_hop,
        origin: OriginKind::Igp,
        as_path_prepend: peer.as_path_prepend,
        med: peer.med,
        local_pref: peer.local_pref,
        communities: peer.communities.iter().map(|c| c.0).collect(),
        large_communities: peer
            .large_communities
            .iter()
            .map(|c| c.to_array())
            .collect(),
        extended_communities: Vec::new(),
    }
}

/// The routes for one peer, and what it refuses. `announce` is the guard's sorted list.
pub fn peer_routes(
    announce: &[IpNet],
    peer: &PeerConfig,
    (nh_v4, nh_v6): (Option<IpAddr>, Option<IpAddr>),
) -> (RouteSet, Vec<(IpNet, PeerRefusal)>) {
    let v4 = nh_v4.map(|nh| Arc::new(attributes(peer, nh)));
    let v6 = nh_v6.map(|nh| Arc::new(attributes(peer, nh)));
    // `announce` is sorted, so every insert appends.
    let mut set = RouteSet::with_capacity(announce.len());
    let mut refused = Vec::new();
    for prefix in announce {
        let (family, attrs) = match prefix {
            IpNet::V4(_) => (Family::IPV4_UNICAST, &v4),
            IpNet::V6(_) => (Family::IPV6_UNICAST, &v6),
        };
        if !peer.families.contains(&family) {
            refused.push((*prefix, PeerRefusal::FamilyNotCarried));
            continue;
        }
        match attrs {
            Some(a) => {
                set.insert(*prefix, Arc::clone(a));
            }
            None if family == Family::IPV4_UNICAST
                && !peer.address.is_ipv4()
                && !peer.extended_next_hop =>
            {
                refused.push((*prefix, PeerRefusal::NeedsExtendedNextHop));
            }
            None => refused.push((*prefix, PeerRefusal::NoNextHop)),
        }
    }
    (set, refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use podcidr_config::Config;

    fn config(extra: &str) -> Config {
        let yaml = format!(
            "asn: 65010\nsource: {{kind: file, path: /x}}\n{extra}\npeers:\n  - name: tor1\n    address: 192.0.2.1\n    asn: 65000\n    communities: [\"65000:100\"]\n    med: 10\n"
        );
        Config::from_yaml_str(&yaml).unwrap()
    }

    fn lookup(p: &PeerAddress) -> Option<IpAddr> {
        match p {
            PeerAddress::Fixed(_) => Some("192.0.2.10".parse().unwrap()),
            PeerAddress::Interface { .. } => Some("fe80::10".parse().unwrap()),
            PeerAddress::DefaultGateway(_) => None,
        }
    }

    fn interface_peer(extra: &str) -> Config {
        let yaml = format!(
            "asn: 65010\nsource: {{kind: file, path: /x}}\npeers:\n  - {{name: tor1, interface: eth1, peerAddress: \"fe80::1\", asn: 65000{extra}}}\n"
        );
        Config::from_yaml_str(&yaml).unwrap()
    }

    #[test]
    fn ipv4_takes_the_ipv6_next_hop_only_with_extended_next_hop_rfc8950() {
        let c = interface_peer(", extendedNextHop: true");
        let node = NodeAddresses::default();
        let (v4, v6) = next_hops(&c.next_hop, &c.peers[0], &node, &lookup);
        assert_eq!(v6, Some("fe80::10".parse().unwrap()));
        assert_eq!(v4, v6);

        let c = interface_peer("");
        let (v4, v6) = next_hops(&c.next_hop, &c.peers[0], &node, &lookup);
        assert_eq!((v4, v6), (None, Some("fe80::10".parse().unwrap())));
        let (set, refused) =
            peer_routes(&["198.18.1.0/24".parse().unwrap()], &c.peers[0], (v4, v6));
        assert!(set.is_empty());
        assert_eq!(refused[0].1, PeerRefusal::NeedsExtendedNextHop);
        assert_eq!(refused[0].1.as_str(), "needs-extended-next-hop");
    }

    #[test]
    fn fixed_ipv4_next_hop_wins_over_extended_next_hop() {
        let c = interface_peer(", extendedNextHop: true");
        let policy = NextHops {
            ipv4: NextHopConfig::Address("198.18.0.1".parse().unwrap()),
            ..c.next_hop
        };
        let (v4, _) = next_hops(&policy, &c.peers[0], &NodeAddresses::default(), &lookup);
        assert_eq!(v4, Some("198.18.0.1".parse().unwrap()));
    }

    #[test]
    fn self_next_hop_is_the_source_address_towards_the_peer() {
        let c = config("");
        let node = NodeAddresses {
            internal_v4: None,
            internal_v6: Some("2001:db8::10".parse().unwrap()),
        };
        let (v4, v6) = next_hops(&c.next_hop, &c.peers[0], &node, &lookup);
        assert_eq!(v4, Some("192.0.2.10".parse().unwrap()));
        // An IPv4 session has no IPv6 source address: the node's IPv6 address, never mapped.
        assert_eq!(v6, Some("2001:db8::10".parse().unwrap()));
    }

    #[test]
    fn ipv6_prefix_without_ipv6_next_hop_is_refused_not_sent_mapped() {
        let c = config("");
        let (set, refused) = peer_routes(
            &[
                "198.19.1.0/24".parse().unwrap(),
                "fd00:19:1::/64".parse().unwrap(),
            ],
            &c.peers[0],
            (Some("192.0.2.10".parse().unwrap()), None),
        );
        assert_eq!(set.len(), 1);
        assert_eq!(
            refused,
            vec![("fd00:19:1::/64".parse().unwrap(), PeerRefusal::NoNextHop)]
        );
        let attrs = set.values().next().unwrap();
        assert_eq!(attrs.med, Some(10));
        assert_eq!(attrs.communities, vec![(65000 << 16) | 100]);
    }

    #[test]
    fn family_the_peer_does_not_carry_is_refused() {
        let yaml = "asn: 65010\nsource: {kind: file, path: /x}\npeers:\n  - name: tor1\n    address: 192.0.2.1\n    asn: 65000\n    families: [ipv4-unicast]\n";
        let c = Config::from_yaml_str(yaml).unwrap();
        let (_, refused) = peer_routes(
            &["fd00:19:1::/64".parse().unwrap()],
            &c.peers[0],
            (None, Some("2001:db8::10".parse().unwrap())),
        );
        assert_eq!(refused[0].1, PeerRefusal::FamilyNotCarried);
    }

    #[test]
    fn node_next_hop_uses_the_internal_ip() {
        let c = config("nextHop: {ipv4: node, ipv6: 2001:db8::99}");
        let node = NodeAddresses {
            internal_v4: Some("198.18.0.7".parse().unwrap()),
            internal_v6: None,
        };
        let (v4, v6) = next_hops(&c.next_hop, &c.peers[0], &node, &lookup);
        assert_eq!(v4, Some("198.18.0.7".parse().unwrap()));
        assert_eq!(v6, Some("2001:db8::99".parse().unwrap()));
    }
}
