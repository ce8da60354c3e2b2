//! Session FSM rules about what is sent when, beyond the RFC 4271 §8.2.2 table: nothing before
//! the route set is known (RFC 4724 End-of-RIB), route-refresh responses coalesced while one
//! is waiting to be written, and ConnectRetry bounds changed on a running session.

use std::time::Duration;

use bgp_proto::message::Message;
use bgp_proto::message::capability::Capability;
use bgp_proto::message::route_refresh::RouteRefreshSubtype;
use bgp_proto::session::{Input, Output, Session, SessionConfig, State, Timer};
use bgp_proto::{Family, RouteRefresh, Update};

use crate::fsm_harness;
use fsm_harness::*;

fn refresh(family: Family) -> Input {
    recv(Message::RouteRefresh(RouteRefresh::new(family)))
}

fn end_of_ribs(out: &[Output]) -> Vec<Family> {
    updates(out)
        .iter()
        .filter_map(Update::end_of_rib_family)
        .collect()
}

/// Families whose table an answer carries (a plain route-refresh response has no End-of-RIB).
fn refreshed(out: &[Output]) -> Vec<Family> {
    let mut families: Vec<Family> = updates(out)
        .iter()
        .filter_map(|u| {
            if !u.nlri.is_empty() {
                Some(Family::IPV4_UNICAST)
            } else {
                u.mp_reach().map(|m| m.family)
            }
        })
        .collect();
    families.dedup();
    families
}

fn asks_for_drain(out: &[Output]) -> bool {
    out.contains(&Output::NotifyWhenDrained)
}

fn two_routes() -> std::sync::Arc<bgp_proto::session::RouteSet> {
    routes(&[
        ("198.18.1.0/24", "192.0.2.10"),
        ("fd00:1::/64", "2001:db8::10"),
    ])
}

// ----- route set not known yet

#[test]
fn no_end_of_rib_before_routes_are_known_rfc4724_4() {
    let mut s = Session::new(cfg());
    let out = to_established(&mut s, peer_open(PEER, 90, both_families()));
    assert!(
        updates(&out).is_empty(),
        "no UPDATE, no End-of-RIB: {out:?}"
    );
    // A refresh now would be answered by an empty table and End-of-RIB: the first route set
    // answers it instead.
    let out = s.handle(refresh(Family::IPV4_UNICAST));
    assert!(sent(&out).is_empty(), "{out:?}");
    assert!(!asks_for_drain(&out));

    let out = s.handle(Input::SetRoutes(two_routes()));
    let ups = updates(&out);
    assert_eq!(ups.len(), 4, "{ups:?}");
    assert_eq!(ups[0].nlri, vec!["198.18.1.0/24".parse().unwrap()]);
    assert!(ups[1].mp_reach().is_some());
    assert_eq!(
        end_of_ribs(&out),
        vec![Family::IPV4_UNICAST, Family::IPV6_UNICAST]
    );
    assert!(
        updates(&out)
            .iter()
            .all(|u| u.withdrawn_prefixes().is_empty())
    );

    // Later sets send differences only, without End-of-RIB.
    let out = s.handle(Input::SetRoutes(routes(&[("198.18.1.0/24", "192.0.2.10")])));
    let ups = updates(&out);
    assert_eq!(ups.len(), 1);
    assert!(end_of_ribs(&out).is_empty());
}

#[test]
fn no_end_of_rib_on_reconnect_before_routes_are_known_rfc4724_4() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    s.handle(Input::TcpFailed("reset".into()));
    s.handle(Input::TimerFired(Timer::ConnectRetry));
    s.handle(Input::TcpConnected);
    s.handle(recv(Message::Open(peer_open(PEER, 90, both_families()))));
    let out = s.handle(recv(Message::Keepalive));
    assert_eq!(s.state(), State::Established);
    assert!(updates(&out).is_empty(), "{out:?}");
}

#[test]
fn a_known_empty_route_set_still_sends_end_of_rib_rfc4724_4() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(routes(&[])));
    let out = to_established(&mut s, peer_open(PEER, 90, both_families()));
    assert_eq!(
        end_of_ribs(&out),
        vec![Family::IPV4_UNICAST, Family::IPV6_UNICAST]
    );
}

#[test]
fn route_set_known_before_establishment_is_sent_on_establishment_and_reconnect_rfc4724_4() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(two_routes()));
    let out = to_established(&mut s, peer_open(PEER, 90, both_families()));
    assert_eq!(updates(&out).len(), 4);
    s.handle(Input::TcpFailed("reset".into()));
    s.handle(Input::TimerFired(Timer::ConnectRetry));
    s.handle(Input::TcpConnected);
    s.handle(recv(Message::Open(peer_open(PEER, 90, both_families()))));
    let out = s.handle(recv(Message::Keepalive));
    assert_eq!(updates(&out).len(), 4, "table + End-of-RIB again");
}

// ----- route refresh coalescing

#[test]
fn plain_route_refresh_response_has_no_end_of_rib_rfc2918_4_rfc4724_2() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(two_routes()));
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    for family in [Family::IPV4_UNICAST, Family::IPV6_UNICAST] {
        let out = s.handle(refresh(family));
        assert_eq!(refreshed(&out), vec![family], "{out:?}");
        assert!(end_of_ribs(&out).is_empty(), "{out:?}");
        // The coalesced follow-up too.
        s.handle(refresh(family));
        let out = s.handle(Input::SendQueueDrained);
        assert_eq!(refreshed(&out), vec![family], "{out:?}");
        assert!(end_of_ribs(&out).is_empty(), "{out:?}");
        assert!(s.handle(Input::SendQueueDrained).is_empty());
    }
}

#[test]
fn route_refreshes_while_a_response_is_queued_coalesce_into_one_follow_up_rfc2918_4() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(two_routes()));
    to_established(&mut s, peer_open(PEER, 90, both_families()));

    let out = s.handle(refresh(Family::IPV4_UNICAST));
    assert_eq!(refreshed(&out), vec![Family::IPV4_UNICAST]);
    assert!(asks_for_drain(&out), "the response is sent at once");

    for _ in 0..100 {
        let out = s.handle(refresh(Family::IPV4_UNICAST));
        assert!(sent(&out).is_empty(), "only marked pending: {out:?}");
        assert!(!asks_for_drain(&out));
    }
    // Routes change while waiting: the follow-up starts after the requests, so it has them.
    s.handle(Input::SetRoutes(routes(&[
        ("198.18.1.0/24", "192.0.2.10"),
        ("198.18.2.0/24", "192.0.2.10"),
    ])));

    let out = s.handle(Input::SendQueueDrained);
    let ups = updates(&out);
    assert_eq!(ups.len(), 1, "one table: {ups:?}");
    assert_eq!(ups[0].nlri.len(), 2);
    assert_eq!(refreshed(&out), vec![Family::IPV4_UNICAST]);
    assert!(asks_for_drain(&out), "the follow-up is awaited too");

    let out = s.handle(Input::SendQueueDrained);
    assert!(out.is_empty(), "nothing pending: {out:?}");
    let out = s.handle(refresh(Family::IPV4_UNICAST));
    assert_eq!(refreshed(&out), vec![Family::IPV4_UNICAST]);
    assert!(asks_for_drain(&out), "answered at once again");
}

#[test]
fn pending_route_refreshes_are_kept_per_family_rfc2918_4() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(two_routes()));
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    s.handle(refresh(Family::IPV6_UNICAST));
    for family in [
        Family::IPV4_UNICAST,
        Family::IPV6_UNICAST,
        Family::IPV4_UNICAST,
        Family::IPV6_UNICAST,
    ] {
        assert!(sent(&s.handle(refresh(family))).is_empty());
    }
    let out = s.handle(Input::SendQueueDrained);
    assert_eq!(
        refreshed(&out),
        vec![Family::IPV4_UNICAST, Family::IPV6_UNICAST]
    );
    assert_eq!(
        out.iter()
            .filter(|o| **o == Output::NotifyWhenDrained)
            .count(),
        1
    );
}

#[test]
fn enhanced_route_refresh_follow_up_is_bracketed_too_rfc7313_4() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(two_routes()));
    let mut caps = both_families();
    caps.push(Capability::EnhancedRouteRefresh);
    to_established(&mut s, peer_open(PEER, 90, caps));
    s.handle(refresh(Family::IPV6_UNICAST));
    s.handle(refresh(Family::IPV6_UNICAST));
    let out = s.handle(Input::SendQueueDrained);
    let subtypes: Vec<RouteRefreshSubtype> = sent(&out)
        .iter()
        .filter_map(|m| match m {
            Message::RouteRefresh(r) => Some(r.subtype),
            _ => None,
        })
        .collect();
    assert_eq!(
        subtypes,
        vec![
            RouteRefreshSubtype::BeginningOfRouteRefresh,
            RouteRefreshSubtype::EndOfRouteRefresh
        ]
    );
}

#[test]
fn route_refresh_coalescing_resets_when_the_session_drops() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(two_routes()));
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    s.handle(refresh(Family::IPV4_UNICAST));
    s.handle(refresh(Family::IPV4_UNICAST));
    s.handle(Input::TcpFailed("reset".into()));
    assert!(
        s.handle(Input::SendQueueDrained).is_empty(),
        "not Established: nothing to answer"
    );
    s.handle(Input::TimerFired(Timer::ConnectRetry));
    s.handle(Input::TcpConnected);
    s.handle(recv(Message::Open(peer_open(PEER, 90, both_families()))));
    s.handle(recv(Message::Keepalive));
    let out = s.handle(refresh(Family::IPV4_UNICAST));
    assert_eq!(
        refreshed(&out),
        vec![Family::IPV4_UNICAST],
        "a new connection answers at once"
    );
}

// ----- ConnectRetry on a running session

#[test]
fn set_connect_retry_bounds_the_next_retry_rfc4271_10() {
    let mut s = Session::new(SessionConfig {
        connect_retry_base: Duration::from_secs(60),
        connect_retry_max: Duration::from_secs(600),
        ..cfg()
    });
    s.handle(Input::Start);
    for _ in 0..3 {
        s.handle(Input::TimerFired(Timer::ConnectRetry));
    }
    let (base, max) = (Duration::from_secs(1), Duration::from_secs(2));
    let out = s.handle(Input::SetConnectRetry { base, max });
    assert!(out.is_empty(), "no reset: {out:?}");
    assert_eq!(s.state(), State::Connect);
    assert_eq!(
        (s.config().connect_retry_base, s.config().connect_retry_max),
        (base, max)
    );
    let out = s.handle(Input::TimerFired(Timer::ConnectRetry));
    let d = armed(&out, Timer::ConnectRetry).unwrap();
    assert!(d <= max && d >= base * 3 / 4, "{d:?}");
}
