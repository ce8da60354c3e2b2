//! `interface` + `peerAddress` (IPv6 link-local "unnumbered" peering) and `extendedNextHop`
//! (RFC 8950): what is accepted, and the exact error for each rule.

use crate::common;

use common::{invalid, valid, with_peer};
use podcidr_config::PeerAddress;

/// One peer on eth1 instead of at 192.0.2.1, with `fields` added.
fn on_interface(fields: &str) -> String {
    with_peer(&format!("interface: eth1, {fields}")).replace("address: 192.0.2.1, ", "")
}

#[test]
fn interface_peer_is_the_link_local_neighbor_on_that_interface() {
    let c = valid(&on_interface(
        "peerAddress: \"fe80::2\", extendedNextHop: true",
    ));
    let p = &c.peers[0];
    assert_eq!(
        p.address,
        PeerAddress::Interface {
            name: "eth1".into(),
            peer: Some("fe80::2".parse().unwrap()),
        }
    );
    assert!(p.extended_next_hop);
    assert_eq!(p.address.to_string(), "fe80::2%eth1");
    assert_eq!(p.address.ip(), Some("fe80::2".parse().unwrap()));
}

#[test]
fn interface_without_peer_address_discovers_the_neighbor() {
    let c = valid(&on_interface("extendedNextHop: true"));
    assert_eq!(
        c.peers[0].address,
        PeerAddress::Interface {
            name: "eth1".into(),
            peer: None,
        }
    );
    assert_eq!(c.peers[0].address.ip(), None);
}

/// Single-hop BFD over a link-local session, its socket scoped to the interface (RFC 5881,
/// RFC 4007); with or without a configured `peerAddress`.
#[test]
fn bfd_runs_on_an_interface_session_rfc5881() {
    for fields in ["peerAddress: \"fe80::2\", bfd: {minTx: 100}", "bfd: {}"] {
        let c = valid(&on_interface(fields));
        assert!(c.peers[0].bfd.is_some(), "{fields}");
    }
}

#[test]
fn extended_next_hop_is_off_unless_set_rfc8950_3() {
    assert!(!valid(&with_peer("")).peers[0].extended_next_hop);
    // Allowed on any IPv6 peer, not only on interface peers.
    let v6 = with_peer("extendedNextHop: true").replace("192.0.2.1", "\"2001:db8::1\"");
    assert!(valid(&v6).peers[0].extended_next_hop);
}

/// `(rule, yaml, expected error lines)`.
fn table() -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "interface_and_address_are_exclusive",
            with_peer("interface: eth1, peerAddress: \"fe80::2\""),
            "peers[0].interface: cannot be set together with peers[0].address: a peer is either at a fixed address or the neighbor on an interface; remove one",
        ),
        (
            "peer_address_needs_interface",
            with_peer("peerAddress: \"fe80::2\""),
            "peers[0].peerAddress: \"fe80::2\" is not allowed (peerAddress names the neighbor on an interface; set interface too, or use address)",
        ),
        (
            "discovered_neighbor_cannot_be_accepted",
            on_interface("passive: true"),
            "peers[0].passive: true is not allowed (accepting connections needs the neighbor's address: set peerAddress with interface \"eth1\")",
        ),
        (
            "discovered_neighbor_cannot_be_accepted_incoming",
            on_interface("acceptIncoming: true"),
            "peers[0].acceptIncoming: true is not allowed (accepting connections needs the neighbor's address: set peerAddress with interface \"eth1\")",
        ),
        (
            "one_discovered_neighbor_per_interface",
            format!(
                "{}  - {{name: tor2, interface: eth1, asn: 65000}}\n",
                on_interface("port: 179")
            ),
            "peers[1].interface: \"%eth1\" port 179 is already used by peers[0]",
        ),
        (
            "peer_address_is_link_local",
            on_interface("peerAddress: \"2001:db8::2\""),
            "peers[0].peerAddress: \"2001:db8::2\" is not allowed (peerAddress must be an IPv6 link-local (fe80::/10) address; use address for any other)",
        ),
        (
            "interface_name_is_a_linux_name",
            on_interface("peerAddress: \"fe80::2\"").replace("eth1", "a-very-long-interface"),
            "peers[0].interface: \"a-very-long-interface\" is not allowed (an interface name is 1..15 characters without '/', ':', '%' or whitespace)",
        ),
        (
            "interface_session_has_no_local_address",
            on_interface("peerAddress: \"fe80::2\", localAddress: \"2001:db8::1\""),
            "peers[0].localAddress: \"2001:db8::1\" is not allowed (the source of a session on interface \"eth1\" is that interface's link-local address)",
        ),
        (
            "extended_next_hop_needs_ipv4_unicast",
            on_interface(
                "peerAddress: \"fe80::2\", extendedNextHop: true, families: [ipv6-unicast]",
            ),
            "peers[0].extendedNextHop: true is not allowed (extended next hop carries ipv4-unicast routes, and families has no ipv4-unicast)",
        ),
        (
            "interface_endpoints_unique",
            format!(
                "{}  - {{name: tor2, interface: eth2, peerAddress: \"fe80::2\", asn: 65000}}\n",
                on_interface("peerAddress: \"fe80::2\"")
            ),
            "peers[1].peerAddress: \"fe80::2%eth2\" port 179 is already used by peers[0]",
        ),
    ]
}

#[test]
fn invalid_interface_peers_report_exact_errors() {
    let mut failures = Vec::new();
    for (rule, yaml, expected) in table() {
        let got = invalid(&yaml).to_string();
        if got != expected {
            failures.push(format!(
                "{rule}:\n  expected: {expected}\n  got:      {got}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
