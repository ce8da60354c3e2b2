//! `asn: auto`: the peer AS learned from the OPEN, bounded by the configured ranges
//! (RFC 4271 §6.2 Bad Peer AS, RFC 6793 §4.1 for the 4-octet AS).

use std::sync::Arc;

use bgp_proto::message::{Message, WireOptions};
use bgp_proto::session::{RouteAttributes, RouteSet, Session, SessionConfig, State};
use bgp_proto::{Asn, HoldTime, Open};

use crate::fsm_harness;
use fsm_harness::*;

fn auto(ranges: &[std::ops::RangeInclusive<u32>]) -> SessionConfig {
    SessionConfig {
        // Deliberately not the peer's: with ranges it must not be checked.
        peer_asn: Asn(1),
        peer_asn_ranges: Some(ranges.to_vec()),
        ..cfg()
    }
}

#[test]
fn auto_peer_as_inside_a_range_is_learned_from_the_open_rfc4271_6_2() {
    let mut s = Session::new(auto(&[64512..=64520, 65000..=65100]));
    to_open_confirm(&mut s, peer_open(Asn(65042), 90, both_families()));
    let neg = s.negotiated().unwrap();
    assert_eq!(neg.peer_asn, Asn(65042));
    assert!(!neg.ibgp);
}

#[test]
fn auto_peer_as_outside_every_range_is_bad_peer_as_rfc4271_6_2() {
    for asn in [64511, 64521, 64999, 65101, 4_200_000_000] {
        let mut s = Session::new(auto(&[64512..=64520, 65000..=65100]));
        to_open_sent(&mut s);
        let out = s.handle(recv(Message::Open(peer_open(
            Asn(asn),
            90,
            both_families(),
        ))));
        assert_eq!(sent_notification(&out), Some((2, 2)), "AS {asn}");
        assert_eq!(s.state(), State::Idle, "AS {asn}");
        assert!(s.negotiated().is_none());
    }
}

#[test]
fn auto_peer_as_uses_the_four_octet_capability_not_as_trans_rfc6793_4_1() {
    let mut s = Session::new(auto(&[4_200_000_000..=4_200_000_100]));
    // Open::new puts AS_TRANS in "My AS" and the real AS in the capability.
    to_open_confirm(&mut s, peer_open(Asn(4_200_000_050), 90, both_families()));
    assert_eq!(s.negotiated().unwrap().peer_asn, Asn(4_200_000_050));

    // A range covering AS_TRANS does not admit a 2-octet peer claiming it.
    let mut s = Session::new(auto(&[23456..=23456]));
    to_open_sent(&mut s);
    let mut open = peer_open(Asn(23456), 90, both_families());
    open.params = vec![both_families()];
    let out = s.handle(recv(Message::Open(open)));
    assert_eq!(sent_notification(&out), Some((2, 2)));
}

#[test]
fn auto_peer_as_equal_to_ours_makes_the_session_ibgp_after_the_open_rfc4271_5_1() {
    let mut attrs = RouteAttributes::with_next_hop("192.0.2.10".parse().unwrap());
    attrs.local_pref = Some(200);
    attrs.as_path_prepend = 2;
    let set: Arc<RouteSet> = Arc::new(
        [("198.18.1.0/24".parse().unwrap(), Arc::new(attrs))]
            .into_iter()
            .collect(),
    );
    let ranges = [LOCAL.0..=LOCAL.0, PEER.0..=PEER.0];

    let mut ibgp = Session::new(auto(&ranges));
    ibgp.handle(bgp_proto::session::Input::SetRoutes(set.clone()));
    let open = Open::new(LOCAL, HoldTime::new(90).unwrap(), rid(1), both_families());
    let u = &updates(&to_established(&mut ibgp, open))[0];
    assert!(ibgp.negotiated().unwrap().ibgp);
    assert_eq!(u.local_pref(), Some(200));
    let path = u.effective_as_path(&WireOptions::four_octet()).unwrap();
    assert!(path.segments.is_empty());

    let mut ebgp = Session::new(auto(&ranges));
    ebgp.handle(bgp_proto::session::Input::SetRoutes(set));
    let u = &updates(&to_established(
        &mut ebgp,
        peer_open(PEER, 90, both_families()),
    ))[0];
    assert!(!ebgp.negotiated().unwrap().ibgp);
    assert_eq!(u.local_pref(), None);
    let path = u.effective_as_path(&WireOptions::four_octet()).unwrap();
    assert_eq!(path.sequence_asns(), vec![LOCAL.0; 3]);
}

#[test]
fn auto_ibgp_peer_with_our_router_id_is_bad_identifier_rfc6286_2_2() {
    let mut s = Session::new(auto(&[LOCAL.0..=LOCAL.0]));
    to_open_sent(&mut s);
    let open = Open::new(LOCAL, HoldTime::new(90).unwrap(), rid(10), both_families());
    let out = s.handle(recv(Message::Open(open)));
    assert_eq!(sent_notification(&out), Some((2, 3)));
}
