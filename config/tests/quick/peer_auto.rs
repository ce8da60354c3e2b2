//! One peer entry for every node: `address: default-gateway` and `asn: auto`.

use crate::common;

use std::net::IpAddr;

use bgp_proto::Asn;
use common::{valid, with_peer};
use podcidr_config::{AddrFamily, PeerAddress, PeerAsn, SessionType};

#[test]
fn default_gateway_is_ipv4_unless_address_family_says_otherwise() {
    let yaml = with_peer("").replace("192.0.2.1", "default-gateway");
    let peer = &valid(&yaml).peers[0];
    assert_eq!(peer.address, PeerAddress::DefaultGateway(AddrFamily::Ipv4));
    assert_eq!(peer.address.fixed(), None);

    let yaml = with_peer("addressFamily: ipv6").replace("192.0.2.1", "default-gateway");
    let peer = &valid(&yaml).peers[0];
    assert_eq!(peer.address, PeerAddress::DefaultGateway(AddrFamily::Ipv6));
    assert_eq!(peer.address.family(), AddrFamily::Ipv6);
}

#[test]
fn one_default_gateway_peer_per_family_is_allowed() {
    let yaml = "asn: 65001\nallowedPrefixes: [10.0.0.0/8]\npeers:\n  \
        - {name: tor4, address: default-gateway, asn: 65000}\n  \
        - {name: tor6, address: default-gateway, addressFamily: ipv6, asn: 65000}\n";
    let peers = valid(yaml).peers;
    assert_eq!(peers.len(), 2);
}

#[test]
fn a_fixed_address_stays_fixed() {
    let peer = &valid(&with_peer("")).peers[0];
    let ip: IpAddr = "192.0.2.1".parse().unwrap();
    assert_eq!(peer.address, PeerAddress::Fixed(ip));
    assert_eq!(peer.address.fixed(), Some(ip));
}

#[test]
fn asn_auto_keeps_its_ranges_and_leaves_the_session_type_to_the_open_rfc4271_6_2() {
    let yaml = with_peer("allowedAsns: [65000-65100, 64512, \"4200000000-4200000100\"]")
        .replace("asn: 65000", "asn: auto");
    let peer = &valid(&yaml).peers[0];
    assert_eq!(
        peer.asn,
        PeerAsn::Auto(vec![
            65000..=65100,
            64512..=64512,
            4_200_000_000..=4_200_000_100
        ])
    );
    assert_eq!(peer.session_type, None);
    assert!(!peer.is_ibgp());
    // The TTL is set before the OPEN: the eBGP default (directly connected) applies.
    assert_eq!(peer.ebgp_multihop, Some(1));
}

#[test]
fn asn_auto_accepts_settings_of_either_session_type() {
    // LOCAL_PREF applies if the learned AS is ours, prepending if it is not.
    let yaml = with_peer("allowedAsns: [65000-65100], localPref: 200, asPathPrepend: 2")
        .replace("asn: 65000", "asn: auto");
    let peer = &valid(&yaml).peers[0];
    assert_eq!((peer.local_pref, peer.as_path_prepend), (Some(200), 2));
}

#[test]
fn a_fixed_asn_still_decides_the_session_type() {
    let peer = &valid(&with_peer("")).peers[0];
    assert_eq!(peer.asn, PeerAsn::Fixed(Asn(65000)));
    assert_eq!(peer.session_type, Some(SessionType::External));
}
