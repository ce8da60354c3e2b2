//! IPv6 next hops: RFC 8950 extended next hop (IPv4 NLRI over an IPv6 next hop) and the
//! RFC 2545 §3 global + link-local next hop of a session on a shared link.

use std::net::Ipv6Addr;

use bgp_proto::message::attribute::{AttrValue, PathAttribute};
use bgp_proto::message::capability::{Capability, ExtendedNextHopEntry};
use bgp_proto::message::update::{MpNextHop, MpNlri, MpReach};
use bgp_proto::message::{Message, WireOptions, decode_message};
use bgp_proto::session::{Input, Output, Session, SessionConfig, State};
use bgp_proto::{Action, Family, Update};

use crate::fsm_harness;
use fsm_harness::*;

const LINK_LOCAL: &str = "fe80::1";

fn with_enh() -> Vec<Capability> {
    let mut caps = both_families();
    caps.push(Capability::ExtendedNextHop(vec![ExtendedNextHopEntry {
        nlri_afi: 1,
        nlri_safi: 1,
        next_hop_afi: 2,
    }]));
    caps
}

fn on_link(enh: bool) -> SessionConfig {
    SessionConfig {
        extended_next_hop: enh,
        link_local_next_hop: Some(LINK_LOCAL.parse().unwrap()),
        ..cfg()
    }
}

fn next_hop_of(out: &[Output], family: Family) -> MpNextHop {
    updates(out)
        .iter()
        .filter_map(|u| u.mp_reach())
        .find(|m| m.family == family)
        .map(|m| m.next_hop.clone())
        .unwrap_or_else(|| panic!("no MP_REACH_NLRI for {family}"))
}

/// The next hop length octet as it goes on the wire.
fn wire_next_hop_len(out: &[Output], family: Family) -> u8 {
    let u = updates(out)
        .into_iter()
        .find(|u| u.mp_reach().is_some_and(|m| m.family == family))
        .unwrap();
    let opts = WireOptions {
        four_octet_as: true,
        ..WireOptions::default()
    };
    let bytes = Message::Update(u).to_bytes(&opts).unwrap();
    // Header 19, withdrawn length 2 (0), attributes length 2, flags, type, 2-octet length,
    // AFI 2, SAFI 1: the next hop length follows.
    assert_eq!(bytes.get(23..25), Some(&[0x90, 14][..]), "MP_REACH first");
    *bytes.get(30).unwrap()
}

#[test]
fn extended_next_hop_offered_only_when_configured_rfc8950_3() {
    let offered = |cfg: SessionConfig| {
        bgp_proto::session::open::local_open(&cfg, false)
            .capabilities()
            .any(|c| {
                matches!(c, Capability::ExtendedNextHop(e)
                if e == &[ExtendedNextHopEntry { nlri_afi: 1, nlri_safi: 1, next_hop_afi: 2 }])
            })
    };
    assert!(offered(on_link(true)));
    assert!(!offered(on_link(false)));
    // Without IPv4 unicast there is nothing to carry over an IPv6 next hop.
    assert!(!offered(SessionConfig {
        families: vec![Family::IPV6_UNICAST],
        ..on_link(true)
    }));
}

#[test]
fn extended_next_hop_needs_both_sides_rfc8950_3() {
    let negotiated = |cfg: SessionConfig, caps: Vec<Capability>| {
        let mut s = Session::new(cfg);
        to_established(&mut s, peer_open(PEER, 90, caps));
        s.negotiated().map(|n| n.extended_next_hop_ipv4)
    };
    assert_eq!(negotiated(on_link(true), with_enh()), Some(true));
    assert_eq!(negotiated(on_link(true), both_families()), Some(false));
    assert_eq!(negotiated(on_link(false), with_enh()), Some(false));
    // An entry for another next-hop AFI is not ours.
    let mut other = both_families();
    other.push(Capability::ExtendedNextHop(vec![ExtendedNextHopEntry {
        nlri_afi: 1,
        nlri_safi: 128,
        next_hop_afi: 2,
    }]));
    assert_eq!(negotiated(on_link(true), other), Some(false));
}

#[test]
fn ipv4_routes_over_link_local_next_hop_go_in_mp_reach_rfc8950_4() {
    let mut s = Session::new(on_link(true));
    s.handle(Input::SetRoutes(routes(&[("198.18.1.0/24", LINK_LOCAL)])));
    let out = to_established(&mut s, peer_open(PEER, 90, with_enh()));
    let u = updates(&out);
    let reach = u.iter().find_map(Update::mp_reach).unwrap();
    assert_eq!(reach.family, Family::IPV4_UNICAST);
    assert_eq!(
        reach.nlri,
        MpNlri::Ipv4(vec!["198.18.1.0/24".parse().unwrap()])
    );
    assert!(
        u.iter()
            .all(|u| u.nlri.is_empty() && u.next_hop().is_none())
    );
}

#[test]
fn link_local_only_next_hop_is_unspecified_global_then_link_local_rfc2545_3() {
    let mut s = Session::new(on_link(true));
    s.handle(Input::SetRoutes(routes(&[
        ("198.18.1.0/24", LINK_LOCAL),
        ("2001:db8:1::/64", LINK_LOCAL),
    ])));
    let out = to_established(&mut s, peer_open(PEER, 90, with_enh()));
    let expected = MpNextHop::Ipv6 {
        global: Ipv6Addr::UNSPECIFIED,
        link_local: Some(LINK_LOCAL.parse().unwrap()),
    };
    assert_eq!(next_hop_of(&out, Family::IPV4_UNICAST), expected);
    assert_eq!(next_hop_of(&out, Family::IPV6_UNICAST), expected);
    assert_eq!(wire_next_hop_len(&out, Family::IPV6_UNICAST), 32);
}

#[test]
fn global_next_hop_on_a_shared_link_adds_link_local_rfc2545_3() {
    let mut s = Session::new(on_link(false));
    s.handle(Input::SetRoutes(routes(&[(
        "2001:db8:1::/64",
        "2001:db8::10",
    )])));
    let out = to_established(&mut s, peer_open(PEER, 90, both_families()));
    assert_eq!(
        next_hop_of(&out, Family::IPV6_UNICAST),
        MpNextHop::Ipv6 {
            global: "2001:db8::10".parse().unwrap(),
            link_local: Some(LINK_LOCAL.parse().unwrap()),
        }
    );
    assert_eq!(wire_next_hop_len(&out, Family::IPV6_UNICAST), 32);

    // Not on a shared link: the global address alone, 16 octets.
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(routes(&[(
        "2001:db8:1::/64",
        "2001:db8::10",
    )])));
    let out = to_established(&mut s, peer_open(PEER, 90, both_families()));
    assert_eq!(wire_next_hop_len(&out, Family::IPV6_UNICAST), 16);
}

#[test]
fn ipv4_without_extended_next_hop_is_refused_not_sent_rfc8950_3() {
    let mut s = Session::new(on_link(true));
    s.handle(Input::SetRoutes(routes(&[("198.18.1.0/24", LINK_LOCAL)])));
    let out = to_established(&mut s, peer_open(PEER, 90, both_families()));
    assert!(out.iter().any(|o| matches!(o, Output::Refused(_))));
    assert!(
        updates(&out)
            .iter()
            .all(|u| u.nlri.is_empty() && u.mp_reach().is_none()),
        "nothing IPv4 may go out"
    );
}

fn ipv4_via_ipv6_update() -> Update {
    let attrs = vec![PathAttribute::new(AttrValue::MpReach(MpReach {
        family: Family::IPV4_UNICAST,
        next_hop: MpNextHop::Ipv6 {
            global: "2001:db8::2".parse().unwrap(),
            link_local: None,
        },
        nlri: MpNlri::Ipv4(vec!["198.18.9.0/24".parse().unwrap()]),
    }))];
    Update {
        attributes: attrs,
        ..Update::default()
    }
}

/// RFC 7606 §7.11 makes this AFI/SAFI disable; we import nothing, so it is only counted (a
/// reset would withdraw the node's routes over a route we never use).
#[test]
fn received_ipv6_next_hop_for_ipv4_without_negotiation_is_counted_and_the_session_stays_rfc7606_7_11()
 {
    let mut s = Session::new(on_link(false));
    to_established(&mut s, peer_open(PEER, 90, with_enh()));
    let out = s.handle(recv(Message::Update(ipv4_via_ipv6_update())));
    assert_eq!(sent_notification(&out), None, "{out:?}");
    assert_eq!(s.state(), State::Established);
    let counted: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::UpdateErrors(e) => Some(e.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(counted.len(), 1, "{out:?}");
    assert_eq!(counted[0].kind(), "malformed-mp-attribute");
    assert_eq!(
        counted[0].action(),
        Action::AfiSafiDisable(Family::IPV4_UNICAST)
    );
}

#[test]
fn received_ipv6_next_hop_for_ipv4_with_negotiation_is_accepted_rfc8950_3() {
    let mut s = Session::new(on_link(true));
    to_established(&mut s, peer_open(PEER, 90, with_enh()));
    // Through the decoder, so the 16-octet next hop for AFI 1 is decoded too.
    let opts = WireOptions {
        four_octet_as: true,
        ..WireOptions::default()
    };
    let bytes = Message::Update(ipv4_via_ipv6_update())
        .to_bytes(&opts)
        .unwrap();
    let d = decode_message(&bytes, &opts).unwrap();
    let out = s.handle(Input::Received(d));
    assert_eq!(sent_notification(&out), None);
    assert_eq!(s.state(), State::Established);
}

/// The hand-written fuzz seeds for RFC 8950 are what their names say (first byte: wire
/// option flags, 1 = 4-octet AS).
#[test]
fn rfc8950_fuzz_seeds_decode_and_round_trip() {
    let seed = |name: &str| {
        let path = format!(
            "{}/../fuzz/seeds/decode_message/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let data = std::fs::read(path).unwrap();
        assert_eq!(data.first(), Some(&1));
        let opts = WireOptions {
            four_octet_as: true,
            ..WireOptions::default()
        };
        assert_eq!(
            bgp_proto::message::check_round_trip(&data[1..], &opts),
            Ok(1)
        );
        decode_message(&data[1..], &opts).unwrap().message
    };
    let Message::Open(open) = seed("rfc8950-open-extended-next-hop") else {
        panic!("not an OPEN");
    };
    assert!(
        open.capabilities()
            .any(|c| matches!(c, Capability::ExtendedNextHop(e) if e.len() == 1))
    );
    let Message::Update(update) = seed("rfc8950-update-ipv4-via-link-local") else {
        panic!("not an UPDATE");
    };
    let reach = update.mp_reach().unwrap();
    assert_eq!(reach.family, Family::IPV4_UNICAST);
    assert_eq!(
        reach.next_hop,
        MpNextHop::Ipv6 {
            global: Ipv6Addr::UNSPECIFIED,
            link_local: Some("fe80::2".parse().unwrap()),
        }
    );
}
