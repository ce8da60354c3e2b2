//! Connection collision (RFC 4271 §6.8, RFC 6286 §2.3, RFC 4724 §4.2), one test per rule:
//! an OPEN on a second connection against the session's own connection in each state.

use bgp_proto::Open;
use bgp_proto::iana::notification::{CEASE, FSM_ERROR, cease, fsm};
use bgp_proto::message::capability::Capability;
use bgp_proto::message::{Decoded, Message};
use bgp_proto::session::{GracefulRestartConfig, Input, Output, Session, SessionConfig, State};
use bgp_proto::{Asn, GracefulRestart, HoldTime, Notification};

use crate::fsm_harness;
use fsm_harness::*;

const COLLISION: (u8, u8) = (CEASE, cease::CONNECTION_COLLISION_RESOLUTION);

/// Our identifier in `cfg()` is 192.0.2.10.
fn open_from(id: u8, asn: Asn) -> Open {
    Open::new(asn, HoldTime::new(90).unwrap(), rid(id), both_families())
}

fn second(open: Open) -> Input {
    Input::SecondConnectionOpen(Decoded {
        message: Message::Open(open),
        length: 0,
        errors: Vec::new(),
    })
}

fn closed_second(out: &[Output]) -> Option<(u8, u8)> {
    out.iter().find_map(|o| match o {
        Output::CloseSecondConnection(Some(n)) => Some((u8::from(n.code), n.subcode)),
        Output::CloseSecondConnection(None) => Some((0, 0)),
        _ => None,
    })
}

fn adopted(out: &[Output]) -> bool {
    out.contains(&Output::AdoptSecondConnection)
}

/// Outputs before the adoption act on the first connection, those after on the second.
fn split_at_adoption(out: &[Output]) -> (&[Output], &[Output]) {
    let i = out
        .iter()
        .position(|o| *o == Output::AdoptSecondConnection)
        .expect("adopted");
    (&out[..i], &out[i + 1..])
}

/// Our connection (outbound) in OpenSent or OpenConfirm.
fn with_outbound(state: State) -> Session {
    let mut s = Session::new(cfg());
    s.handle(Input::Start);
    s.handle(Input::TcpConnected);
    if state == State::OpenConfirm {
        s.handle(recv(Message::Open(open_from(1, PEER))));
    }
    assert_eq!(s.state(), state);
    s
}

#[test]
fn higher_local_identifier_keeps_our_connection_in_open_confirm_rfc4271_6_8() {
    let mut s = with_outbound(State::OpenConfirm);
    // 192.0.2.10 > 192.0.2.1: the connection we opened survives.
    let out = s.handle(second(open_from(1, PEER)));
    assert_eq!(closed_second(&out), Some(COLLISION));
    assert!(!adopted(&out));
    assert!(sent(&out).is_empty(), "nothing on our connection: {out:?}");
    assert!(!out.contains(&Output::Disconnect));
    assert_eq!(s.state(), State::OpenConfirm);
}

#[test]
fn higher_local_identifier_keeps_our_connection_in_open_sent_rfc4271_6_8() {
    let mut s = with_outbound(State::OpenSent);
    let out = s.handle(second(open_from(1, PEER)));
    assert_eq!(closed_second(&out), Some(COLLISION));
    assert_eq!(s.state(), State::OpenSent);
}

#[test]
fn higher_remote_identifier_takes_the_peers_connection_with_cease_7_on_ours_rfc4271_6_8() {
    for state in [State::OpenSent, State::OpenConfirm] {
        let mut s = with_outbound(state);
        // 192.0.2.20 > 192.0.2.10: the connection the peer opened survives.
        let out = s.handle(second(open_from(20, PEER)));
        assert_eq!(closed_second(&out), None);
        let (first, then) = split_at_adoption(&out);
        assert_eq!(sent_notification(first), Some(COLLISION), "{state:?}");
        assert!(first.contains(&Output::Disconnect));
        // On the adopted connection: our OPEN, then KEEPALIVE for the peer's OPEN.
        assert!(matches!(
            sent(then)[..],
            [Message::Open(_), Message::Keepalive]
        ));
        assert_eq!(s.state(), State::OpenConfirm);
        assert_eq!(
            s.negotiated().map(|n| n.peer_router_id),
            Some(rid(20)),
            "{state:?}"
        );
        assert_eq!(
            s.last_notification_sent(),
            Some(&Notification::new(
                CEASE,
                cease::CONNECTION_COLLISION_RESOLUTION
            ))
        );
    }
}

#[test]
fn identifiers_compare_as_unsigned_integers_rfc4271_6_8() {
    // As signed 32-bit numbers 192.0.2.10 is negative and would lose to 10.0.0.1.
    let mut s = Session::new(SessionConfig {
        router_id: bgp_proto::RouterId::new([192, 0, 2, 10].into()).unwrap(),
        ..cfg()
    });
    s.handle(Input::Start);
    s.handle(Input::TcpConnected);
    let open = Open::new(
        PEER,
        HoldTime::new(90).unwrap(),
        bgp_proto::RouterId::new([10, 0, 0, 1].into()).unwrap(),
        both_families(),
    );
    let out = s.handle(second(open));
    assert_eq!(closed_second(&out), Some(COLLISION));
}

#[test]
fn equal_identifiers_keep_the_connection_opened_by_the_higher_as_rfc6286_2_3() {
    // eBGP may share identifiers; cfg(): local AS 4200000001, peer AS 65000.
    let mut s = with_outbound(State::OpenSent);
    let out = s.handle(second(open_from(10, PEER)));
    assert_eq!(closed_second(&out), Some(COLLISION), "our AS is higher");

    let mut s = Session::new(SessionConfig {
        local_asn: Asn(64512),
        peer_asn: Asn(65000),
        ..cfg()
    });
    s.handle(Input::Start);
    s.handle(Input::TcpConnected);
    let out = s.handle(second(open_from(10, Asn(65000))));
    assert!(adopted(&out), "the peer's AS is higher: {out:?}");
}

#[test]
fn established_session_closes_the_new_connection_rfc4271_6_8() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    // Even a peer with the higher identifier does not displace an Established session.
    let out = s.handle(second(open_from(20, PEER)));
    assert_eq!(closed_second(&out), Some(COLLISION));
    assert!(!out.contains(&Output::Disconnect));
    assert_eq!(s.state(), State::Established);
}

#[test]
fn new_connection_from_a_graceful_restart_peer_replaces_the_established_one_rfc4724_4_2() {
    let mut s = Session::new(SessionConfig {
        graceful_restart: Some(GracefulRestartConfig {
            restart_time: 120,
            preserve_forwarding: true,
            long_lived_stale_time: 0,
        }),
        ..cfg()
    });
    let mut caps = both_families();
    caps.push(Capability::GracefulRestart(GracefulRestart {
        restart_flags: 0,
        restart_time: 120,
        families: Vec::new(),
    }));
    to_established(&mut s, peer_open(PEER, 90, caps.clone()));
    let out = s.handle(second(Open::new(
        PEER,
        HoldTime::new(90).unwrap(),
        rid(1),
        caps,
    )));
    let (first, then) = split_at_adoption(&out);
    // The old connection is dead (the peer restarted): no NOTIFICATION on it.
    assert_eq!(sent_notification(first), None);
    assert!(first.contains(&Output::Disconnect));
    assert!(matches!(
        sent(then)[..],
        [Message::Open(_), Message::Keepalive]
    ));
    assert_eq!(s.state(), State::OpenConfirm);
}

#[test]
fn second_connection_from_the_peer_replaces_its_first_in_open_sent_rfc4271_6_8() {
    // Both connections opened by the peer (passive session): it gave up the first.
    let mut s = Session::new(SessionConfig {
        passive: true,
        ..cfg()
    });
    s.handle(Input::Start);
    s.handle(Input::TcpAccepted);
    assert_eq!(s.state(), State::OpenSent);
    // Lower identifier than ours, and still it wins: no identifier rule between two of
    // the peer's own connections.
    let out = s.handle(second(open_from(1, PEER)));
    let (first, _) = split_at_adoption(&out);
    assert_eq!(sent_notification(first), Some(COLLISION));
    assert_eq!(s.state(), State::OpenConfirm);
}

#[test]
fn second_connection_without_a_first_is_taken_at_once_rfc4271_8_2_2_event_17() {
    // Our connection failed while the peer's waited for its OPEN: no collision left.
    let mut s = with_outbound(State::OpenSent);
    s.handle(Input::TcpFailed("reset".into()));
    assert_eq!(s.state(), State::Idle);
    let out = s.handle(second(open_from(1, PEER)));
    assert_eq!(closed_second(&out), None);
    let (first, _) = split_at_adoption(&out);
    assert!(sent(first).is_empty());
    assert_eq!(s.state(), State::OpenConfirm);
}

#[test]
fn adopted_connection_with_a_bad_open_fails_like_any_open_rfc4271_6_2() {
    let mut s = with_outbound(State::OpenSent);
    let out = s.handle(second(open_from(20, Asn(65999))));
    let (_, then) = split_at_adoption(&out);
    assert_eq!(
        sent_notification(then),
        Some((2, 2)),
        "Bad Peer AS: {then:?}"
    );
    assert_eq!(s.state(), State::Idle);
}

#[test]
fn second_connection_that_does_not_start_with_open_gets_an_fsm_error_rfc4271_6_6() {
    let mut s = with_outbound(State::OpenSent);
    let out = s.handle(Input::SecondConnectionOpen(Decoded {
        message: Message::Keepalive,
        length: 19,
        errors: Vec::new(),
    }));
    assert_eq!(
        closed_second(&out),
        Some((FSM_ERROR, fsm::UNEXPECTED_IN_OPENSENT))
    );
    assert_eq!(s.state(), State::OpenSent);
}

#[test]
fn stopped_session_rejects_a_second_connection_rfc4486_cease_5() {
    let mut s = Session::new(cfg());
    let out = s.handle(second(open_from(1, PEER)));
    assert_eq!(
        closed_second(&out),
        Some((CEASE, cease::CONNECTION_REJECTED))
    );
    assert_eq!(s.state(), State::Idle);
}

#[test]
fn peer_connection_during_backoff_is_taken_at_once_rfc4271_8_2_2_event_17() {
    let mut s = with_outbound(State::OpenSent);
    s.handle(Input::TcpFailed("reset".into()));
    assert_eq!(s.state(), State::Idle);
    let out = s.handle(Input::TcpAccepted);
    assert!(matches!(sent(&out)[..], [Message::Open(_)]));
    assert!(out.contains(&Output::StopTimer(bgp_proto::session::Timer::ConnectRetry)));
    assert_eq!(s.state(), State::OpenSent);
}

#[test]
fn notification_on_the_second_connection_closes_it_without_an_answer_rfc4271_6_8() {
    // The peer resolved the collision first and closed its connection with Cease 7.
    let mut s = with_outbound(State::OpenConfirm);
    let out = s.handle(Input::SecondConnectionOpen(Decoded {
        message: Message::Notification(Notification::new(
            CEASE,
            cease::CONNECTION_COLLISION_RESOLUTION,
        )),
        length: 21,
        errors: Vec::new(),
    }));
    assert_eq!(out, vec![Output::CloseSecondConnection(None)]);
    assert_eq!(s.state(), State::OpenConfirm);
}
