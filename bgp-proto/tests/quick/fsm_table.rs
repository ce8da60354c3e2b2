//! Session FSM against RFC 4271 §8.2.2, one test per (state, event) row we implement, plus
//! the announcing rules (RFC 4724, 2918, 7313, 6793, 8950, 9003, 9687).

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::iana::notification::cease;
use bgp_proto::message::attribute::AttrValue;
use bgp_proto::message::capability::{Capability, ExtendedNextHopEntry};
use bgp_proto::message::route_refresh::RouteRefreshSubtype;
use bgp_proto::message::{Decoded, Message, WireOptions, decode_message};
use bgp_proto::session::{
    GracefulRestartConfig, Input, Output, RouteAttributes, RouteSet, Session, SessionConfig, State,
    StopReason, Timer,
};
use bgp_proto::{
    Asn, DecodeError, ErrorCode, Family, HoldTime, Notification, Open, RouteRefresh, Update,
};

use crate::fsm_harness;
use fsm_harness::*;

// ----- Idle

#[test]
fn idle_manual_start_connects_rfc4271_8_2_2_event_1() {
    let mut s = Session::new(cfg());
    let out = s.handle(Input::Start);
    assert!(out.contains(&Output::Connect));
    assert!(armed(&out, Timer::ConnectRetry).is_some());
    assert_eq!(state_changes(&out), vec![State::Connect]);
}

#[test]
fn idle_manual_start_passive_waits_in_active_rfc4271_8_2_2_event_4() {
    let mut s = Session::new(SessionConfig {
        passive: true,
        ..cfg()
    });
    let out = s.handle(Input::Start);
    assert!(!out.contains(&Output::Connect));
    assert_eq!(s.state(), State::Active);
}

#[test]
fn idle_ignores_connections_messages_and_timers_rfc4271_8_2_2_idle() {
    let mut s = Session::new(cfg());
    for input in [
        Input::TcpConnected,
        recv(Message::Keepalive),
        Input::TimerFired(Timer::Hold),
        Input::TimerFired(Timer::ConnectRetry),
    ] {
        assert!(s.handle(input).is_empty());
        assert_eq!(s.state(), State::Idle);
    }
}

// ----- Connect / Active

#[test]
fn connect_tcp_cr_acked_sends_open_with_large_hold_rfc4271_8_2_2_event_16() {
    let mut s = Session::new(cfg());
    s.handle(Input::Start);
    let out = s.handle(Input::TcpConnected);
    assert!(matches!(sent(&out)[..], [Message::Open(_)]));
    assert_eq!(armed(&out, Timer::Hold), Some(Duration::from_secs(240)));
    assert!(out.contains(&Output::StopTimer(Timer::ConnectRetry)));
    assert_eq!(s.state(), State::OpenSent);
}

#[test]
fn connect_retry_expiry_in_connect_retries_rfc4271_8_2_2_event_9() {
    let mut s = Session::new(cfg());
    s.handle(Input::Start);
    let out = s.handle(Input::TimerFired(Timer::ConnectRetry));
    assert_eq!(out.first(), Some(&Output::Disconnect));
    assert!(out.contains(&Output::Connect));
    assert_eq!(s.state(), State::Connect);
}

#[test]
fn connect_tcp_fails_moves_to_active_rfc4271_8_2_2_event_18() {
    let mut s = Session::new(cfg());
    s.handle(Input::Start);
    let out = s.handle(Input::TcpFailed("refused".into()));
    assert_eq!(s.state(), State::Active);
    assert!(armed(&out, Timer::ConnectRetry).is_some());
    let out = s.handle(Input::TimerFired(Timer::ConnectRetry));
    assert!(out.contains(&Output::Connect));
    assert_eq!(s.state(), State::Connect);
}

#[test]
fn active_tcp_connection_confirmed_sends_open_rfc4271_8_2_2_event_17() {
    let mut s = Session::new(SessionConfig {
        passive: true,
        ..cfg()
    });
    s.handle(Input::Start);
    let out = s.handle(Input::TcpConnected);
    assert!(matches!(sent(&out)[..], [Message::Open(_)]));
    assert_eq!(s.state(), State::OpenSent);
}

#[test]
fn connect_retry_backoff_grows_with_jitter_and_is_capped() {
    let mut s = Session::new(SessionConfig {
        connect_retry_base: Duration::from_secs(1),
        connect_retry_max: Duration::from_secs(8),
        ..cfg()
    });
    let mut out = s.handle(Input::Start);
    let mut delays = Vec::new();
    for _ in 0..8 {
        delays.push(armed(&out, Timer::ConnectRetry).unwrap());
        out = s.handle(Input::TimerFired(Timer::ConnectRetry));
    }
    for (i, d) in delays.iter().enumerate() {
        let step = Duration::from_secs(1 << i.min(3));
        assert!(
            *d >= step / 2 && *d <= step,
            "attempt {i}: {d:?} not in [{:?}, {step:?}]",
            step / 2
        );
    }
}

// ----- OpenSent

#[test]
fn opensent_valid_open_sends_keepalive_and_negotiates_hold_rfc4271_8_2_2_event_19() {
    let mut s = Session::new(cfg());
    to_open_sent(&mut s);
    let out = s.handle(recv(Message::Open(peer_open(PEER, 30, both_families()))));
    assert!(matches!(sent(&out)[..], [Message::Keepalive]));
    assert_eq!(armed(&out, Timer::Hold), Some(Duration::from_secs(30)));
    assert_eq!(armed(&out, Timer::Keepalive), Some(Duration::from_secs(10)));
    let neg = s.negotiated().unwrap();
    assert_eq!(neg.hold_time.seconds(), 30);
    assert_eq!(
        neg.families,
        vec![Family::IPV4_UNICAST, Family::IPV6_UNICAST]
    );
    assert!(neg.four_octet_as);
}

#[test]
fn opensent_wrong_peer_as_sends_bad_peer_as_rfc4271_6_2() {
    let mut s = Session::new(cfg());
    to_open_sent(&mut s);
    let out = s.handle(recv(Message::Open(peer_open(
        Asn(65099),
        90,
        both_families(),
    ))));
    assert_eq!(sent_notification(&out), Some((2, 2)));
    assert!(out.contains(&Output::Disconnect));
    assert_eq!(s.state(), State::Idle);
}

#[test]
fn opensent_as_trans_without_four_octet_capability_is_bad_peer_as_rfc6793_4_1() {
    let mut s = Session::new(SessionConfig {
        peer_asn: Asn(23456),
        ..cfg()
    });
    to_open_sent(&mut s);
    let mut open = peer_open(Asn(23456), 90, both_families());
    open.params = vec![both_families()];
    let out = s.handle(recv(Message::Open(open)));
    assert_eq!(sent_notification(&out), Some((2, 2)));
}

#[test]
fn opensent_ibgp_peer_with_our_router_id_is_bad_identifier_rfc6286_2_2() {
    let mut s = Session::new(SessionConfig {
        peer_asn: LOCAL,
        ..cfg()
    });
    to_open_sent(&mut s);
    let open = Open::new(LOCAL, HoldTime::new(90).unwrap(), rid(10), both_families());
    let out = s.handle(recv(Message::Open(open)));
    assert_eq!(sent_notification(&out), Some((2, 3)));
}

#[test]
fn opensent_no_common_family_is_unsupported_capability_rfc5492_3() {
    let mut s = Session::new(SessionConfig {
        families: vec![Family::IPV6_UNICAST],
        ..cfg()
    });
    to_open_sent(&mut s);
    let caps = vec![Capability::multiprotocol(Family::IPV4_UNICAST)];
    let out = s.handle(recv(Message::Open(peer_open(PEER, 90, caps))));
    assert_eq!(sent_notification(&out), Some((2, 7)));
}

#[test]
fn opensent_peer_without_multiprotocol_means_ipv4_unicast_rfc4760_8() {
    let mut s = Session::new(cfg());
    to_open_confirm(&mut s, peer_open(PEER, 90, vec![]));
    assert_eq!(s.negotiated().unwrap().families, vec![Family::IPV4_UNICAST]);
}

#[test]
fn opensent_hold_timer_expiry_sends_hold_timer_expired_rfc4271_8_2_2_event_10() {
    let mut s = Session::new(cfg());
    to_open_sent(&mut s);
    let out = s.handle(Input::TimerFired(Timer::Hold));
    assert_eq!(sent_notification(&out), Some((4, 0)));
    assert_eq!(s.state(), State::Idle);
    assert!(
        armed(&out, Timer::ConnectRetry).is_some(),
        "automatic restart after backoff"
    );
}

#[test]
fn opensent_keepalive_is_fsm_error_rfc6608_opensent() {
    let mut s = Session::new(cfg());
    to_open_sent(&mut s);
    let out = s.handle(recv(Message::Keepalive));
    assert_eq!(sent_notification(&out), Some((5, 1)));
}

#[test]
fn opensent_notification_closes_without_reply_rfc4271_8_2_2_event_25() {
    let mut s = Session::new(cfg());
    to_open_sent(&mut s);
    let out = s.handle(recv(Message::Notification(Notification::new(6, 5))));
    assert_eq!(sent_notification(&out), None);
    assert_eq!(s.state(), State::Idle);
    assert_eq!(s.last_notification_received().unwrap().subcode, 5);
}

#[test]
fn opensent_decode_error_sends_its_notification_rfc4271_8_2_2_event_22() {
    let mut s = Session::new(cfg());
    to_open_sent(&mut s);
    let out = s.handle(Input::DecodeFailed(DecodeError::UnacceptableHoldTime {
        hold_time: 1,
    }));
    assert_eq!(sent_notification(&out), Some((2, 6)));
}

#[test]
fn opensent_tcp_failure_goes_idle_and_retries_rfc4271_8_2_2_event_18() {
    let mut s = Session::new(cfg());
    to_open_sent(&mut s);
    let out = s.handle(Input::TcpFailed("reset".into()));
    assert_eq!(s.state(), State::Idle);
    assert!(armed(&out, Timer::ConnectRetry).is_some());
}

// ----- OpenConfirm

#[test]
fn openconfirm_keepalive_establishes_rfc4271_8_2_2_event_26() {
    let mut s = Session::new(cfg());
    to_open_confirm(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(recv(Message::Keepalive));
    assert_eq!(state_changes(&out), vec![State::Established]);
    assert_eq!(armed(&out, Timer::Hold), Some(Duration::from_secs(90)));
}

#[test]
fn openconfirm_keepalive_timer_sends_keepalive_rfc4271_8_2_2_event_11() {
    let mut s = Session::new(cfg());
    to_open_confirm(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::TimerFired(Timer::Keepalive));
    assert!(matches!(sent(&out)[..], [Message::Keepalive]));
    assert_eq!(armed(&out, Timer::Keepalive), Some(Duration::from_secs(30)));
}

#[test]
fn openconfirm_update_is_fsm_error_rfc6608_openconfirm() {
    let mut s = Session::new(cfg());
    to_open_confirm(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(recv(Message::Update(Update::default())));
    assert_eq!(sent_notification(&out), Some((5, 2)));
}

#[test]
fn openconfirm_hold_timer_expiry_rfc4271_8_2_2_event_10() {
    let mut s = Session::new(cfg());
    to_open_confirm(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::TimerFired(Timer::Hold));
    assert_eq!(sent_notification(&out), Some((4, 0)));
}

#[test]
fn hold_time_zero_disables_hold_and_keepalive_timers_rfc4271_4_4() {
    let mut s = Session::new(cfg());
    let out = to_open_confirm(&mut s, peer_open(PEER, 0, both_families()));
    assert_eq!(armed(&out, Timer::Keepalive), None);
    assert!(out.contains(&Output::StopTimer(Timer::Hold)));
    let out = s.handle(recv(Message::Keepalive));
    assert_eq!(armed(&out, Timer::Hold), None);
    assert_eq!(armed(&out, Timer::Keepalive), None);
}

// ----- Established: announcing

#[test]
fn established_sends_full_table_then_end_of_rib_per_family_rfc4724_4() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(routes(&[
        ("198.18.1.0/24", "192.0.2.10"),
        ("198.18.2.0/24", "192.0.2.10"),
        ("fd00:1::/64", "2001:db8::10"),
    ])));
    let out = to_established(&mut s, peer_open(PEER, 90, both_families()));
    let ups = updates(&out);
    assert_eq!(ups.len(), 4, "{ups:?}");
    assert_eq!(ups[0].nlri.len(), 2, "equal attributes share one UPDATE");
    assert_eq!(ups[0].next_hop(), Some(Ipv4Addr::new(192, 0, 2, 10)));
    let v6 = ups[1].mp_reach().unwrap();
    assert_eq!(v6.next_hop.primary(), Some("2001:db8::10".parse().unwrap()));
    assert_eq!(ups[2].end_of_rib_family(), Some(Family::IPV4_UNICAST));
    assert_eq!(ups[3].end_of_rib_family(), Some(Family::IPV6_UNICAST));
    assert_eq!(s.adj_rib_out().len(), 3);
}

#[test]
fn established_route_change_sends_withdrawals_first_then_only_the_difference() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(routes(&[
        ("198.18.1.0/24", "192.0.2.10"),
        ("198.18.2.0/24", "192.0.2.10"),
    ])));
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::SetRoutes(routes(&[
        ("198.18.2.0/24", "192.0.2.10"),
        ("198.18.3.0/24", "192.0.2.10"),
    ])));
    let ups = updates(&out);
    assert_eq!(ups.len(), 2);
    assert_eq!(ups[0].withdrawn, vec!["198.18.1.0/24".parse().unwrap()]);
    assert_eq!(ups[1].nlri, vec!["198.18.3.0/24".parse().unwrap()]);
    assert!(
        armed(&out, Timer::Keepalive).is_some(),
        "sending an UPDATE restarts KeepaliveTimer"
    );
    assert!(
        updates(&s.handle(Input::SetRoutes(routes(&[
            ("198.18.2.0/24", "192.0.2.10"),
            ("198.18.3.0/24", "192.0.2.10")
        ]))))
        .is_empty()
    );
}

#[test]
fn ipv6_routes_go_only_to_sessions_that_negotiated_ipv6_rfc4760() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(routes(&[
        ("198.18.1.0/24", "192.0.2.10"),
        ("fd00:1::/64", "2001:db8::10"),
    ])));
    let out = to_established(
        &mut s,
        peer_open(
            PEER,
            90,
            vec![Capability::multiprotocol(Family::IPV4_UNICAST)],
        ),
    );
    let ups = updates(&out);
    assert!(ups.iter().all(|u| u.mp_reach().is_none()));
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Refused(r) if r.len() == 1))
    );
    assert_eq!(
        ups.last().unwrap().end_of_rib_family(),
        Some(Family::IPV4_UNICAST)
    );
}

#[test]
fn ipv4_with_ipv6_next_hop_needs_extended_next_hop_rfc8950() {
    let v4_over_v6 = routes(&[("198.18.1.0/24", "2001:db8::10")]);
    let mut s = Session::new(SessionConfig {
        extended_next_hop: true,
        ..cfg()
    });
    s.handle(Input::SetRoutes(v4_over_v6.clone()));
    let out = to_established(&mut s, peer_open(PEER, 90, both_families()));
    assert!(
        out.iter().any(|o| matches!(o, Output::Refused(_))),
        "peer did not offer RFC 8950"
    );

    let mut s = Session::new(SessionConfig {
        extended_next_hop: true,
        ..cfg()
    });
    s.handle(Input::SetRoutes(v4_over_v6));
    let mut caps = both_families();
    caps.push(Capability::ExtendedNextHop(vec![ExtendedNextHopEntry {
        nlri_afi: 1,
        nlri_safi: 1,
        next_hop_afi: 2,
    }]));
    let out = to_established(&mut s, peer_open(PEER, 90, caps));
    let mp = updates(&out)[0].mp_reach().cloned().unwrap();
    assert_eq!(mp.family, Family::IPV4_UNICAST);
    assert_eq!(mp.next_hop.primary(), Some("2001:db8::10".parse().unwrap()));
}

#[test]
fn two_octet_peer_gets_as_trans_and_as4_path_rfc6793_4_2_2() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(routes(&[("198.18.1.0/24", "192.0.2.10")])));
    let mut open = peer_open(PEER, 90, vec![]);
    open.params = vec![vec![Capability::multiprotocol(Family::IPV4_UNICAST)]];
    let out = to_established(&mut s, open);
    let u = &updates(&out)[0];
    let opts = WireOptions::default();
    let bytes = Message::Update(u.clone()).to_bytes(&opts).unwrap();
    let Message::Update(back) = decode_message(&bytes, &opts).unwrap().message else {
        panic!()
    };
    assert_eq!(
        back.effective_as_path(&opts).unwrap().sequence_asns(),
        vec![LOCAL.0]
    );
    assert!(
        back.attributes
            .iter()
            .any(|a| matches!(&a.value, AttrValue::AsPath(p) if p.sequence_asns() == vec![23456]))
    );
}

#[test]
fn ibgp_gets_local_pref_and_empty_as_path_ebgp_gets_neither_rfc4271_5_1() {
    let mut attrs = RouteAttributes::with_next_hop("192.0.2.10".parse().unwrap());
    attrs.local_pref = Some(200);
    attrs.as_path_prepend = 2;
    let set: Arc<RouteSet> = Arc::new(
        [("198.18.1.0/24".parse().unwrap(), Arc::new(attrs))]
            .into_iter()
            .collect(),
    );
    let mut ibgp = Session::new(SessionConfig {
        peer_asn: LOCAL,
        ..cfg()
    });
    ibgp.handle(Input::SetRoutes(set.clone()));
    let u = &updates(&to_established(
        &mut ibgp,
        Open::new(LOCAL, HoldTime::new(90).unwrap(), rid(1), both_families()),
    ))[0];
    assert_eq!(u.local_pref(), Some(200));
    assert!(
        u.effective_as_path(&WireOptions::four_octet())
            .unwrap()
            .segments
            .is_empty()
    );
    let mut ebgp = Session::new(cfg());
    ebgp.handle(Input::SetRoutes(set));
    let u = &updates(&to_established(
        &mut ebgp,
        peer_open(PEER, 90, both_families()),
    ))[0];
    assert_eq!(u.local_pref(), None);
    assert_eq!(
        u.effective_as_path(&WireOptions::four_octet())
            .unwrap()
            .sequence_asns(),
        vec![LOCAL.0; 3]
    );
}

// ----- Established: receiving

#[test]
fn established_keepalive_and_update_restart_hold_timer_rfc4271_8_2_2_events_26_27() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    assert_eq!(
        armed(&s.handle(recv(Message::Keepalive)), Timer::Hold),
        Some(Duration::from_secs(90))
    );
    assert_eq!(
        armed(
            &s.handle(recv(Message::Update(Update::default()))),
            Timer::Hold
        ),
        Some(Duration::from_secs(90))
    );
    assert_eq!(s.state(), State::Established);
}

#[test]
fn established_treat_as_withdraw_update_keeps_the_session_rfc7606_2() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let d = Decoded {
        message: Message::Update(Update::default()),
        length: 23,
        errors: vec![DecodeError::MissingWellKnownAttribute { type_code: 1 }],
    };
    let out = s.handle(Input::Received(d));
    assert_eq!(sent_notification(&out), None);
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::UpdateErrors(e) if e.len() == 1))
    );
    assert_eq!(s.state(), State::Established);
}

#[test]
fn established_fatal_update_error_resets_with_its_notification_rfc4271_8_2_2_event_28() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::DecodeFailed(DecodeError::MalformedAttributeList {
        reason: "x",
    }));
    assert_eq!(sent_notification(&out), Some((3, 1)));
    assert_eq!(s.state(), State::Idle);
    assert!(
        s.adj_rib_out().is_empty(),
        "Adj-RIB-Out is cleared when the session drops"
    );
}

#[test]
fn established_open_is_fsm_error_rfc6608_established() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(recv(Message::Open(peer_open(PEER, 90, both_families()))));
    assert_eq!(sent_notification(&out), Some((5, 3)));
}

#[test]
fn established_route_refresh_resends_that_family_rfc2918_4() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(routes(&[
        ("198.18.1.0/24", "192.0.2.10"),
        ("fd00:1::/64", "2001:db8::10"),
    ])));
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(recv(Message::RouteRefresh(RouteRefresh::new(
        Family::IPV4_UNICAST,
    ))));
    let ups = updates(&out);
    assert_eq!(
        ups.len(),
        1,
        "the table, no End-of-RIB (RFC 4724 §2): {ups:?}"
    );
    assert_eq!(ups[0].nlri, vec!["198.18.1.0/24".parse().unwrap()]);
}

#[test]
fn established_enhanced_route_refresh_brackets_with_borr_eorr_rfc7313_4() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(routes(&[("fd00:1::/64", "2001:db8::10")])));
    let mut caps = both_families();
    caps.push(Capability::EnhancedRouteRefresh);
    to_established(&mut s, peer_open(PEER, 90, caps));
    let out = s.handle(recv(Message::RouteRefresh(RouteRefresh::new(
        Family::IPV6_UNICAST,
    ))));
    let kinds: Vec<String> = sent(&out)
        .iter()
        .map(|m| match m {
            Message::RouteRefresh(r) => r.subtype.name().to_owned(),
            other => other.type_name().to_owned(),
        })
        .collect();
    assert_eq!(kinds, vec!["BoRR", "UPDATE", "EoRR"]);
}

#[test]
fn route_refresh_for_a_family_not_negotiated_is_ignored_rfc2918_4() {
    let mut s = Session::new(cfg());
    to_established(
        &mut s,
        peer_open(
            PEER,
            90,
            vec![Capability::multiprotocol(Family::IPV4_UNICAST)],
        ),
    );
    assert!(
        sent(&s.handle(recv(Message::RouteRefresh(RouteRefresh::new(
            Family::IPV6_UNICAST
        )))))
        .is_empty()
    );
    let borr = RouteRefresh {
        family: Family::IPV4_UNICAST,
        subtype: RouteRefreshSubtype::BeginningOfRouteRefresh,
    };
    assert!(
        sent(&s.handle(recv(Message::RouteRefresh(borr)))).is_empty(),
        "the peer's BoRR concerns its routes"
    );
}

// ----- stopping

#[test]
fn planned_stop_sends_cease_administrative_shutdown_with_message_rfc9003() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::Stop(StopReason::Shutdown("node drained".into())));
    let n = sent(&out).into_iter().find_map(|m| match m {
        Message::Notification(n) => Some(n.clone()),
        _ => None,
    });
    let n = n.unwrap();
    assert_eq!(
        (n.code, n.subcode),
        (ErrorCode::Cease, cease::ADMINISTRATIVE_SHUTDOWN)
    );
    assert_eq!(n.shutdown_message().as_deref(), Some("node drained"));
    assert_eq!(s.state(), State::Idle);
    assert!(
        armed(&out, Timer::ConnectRetry).is_none(),
        "a stopped session does not restart"
    );
}

#[test]
fn peer_removal_sends_cease_peer_deconfigured_rfc4486() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::Stop(StopReason::Deconfigured));
    assert_eq!(sent_notification(&out), Some((6, 3)));
}

#[test]
fn peer_settings_change_without_graceful_restart_sends_cease_other_configuration_change_rfc4486() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::Stop(StopReason::ConfigurationChange));
    assert_eq!(sent_notification(&out), Some((6, 6)));
}

fn gr_config() -> SessionConfig {
    SessionConfig {
        graceful_restart: Some(GracefulRestartConfig {
            restart_time: 120,
            preserve_forwarding: false,
            long_lived_stale_time: 0,
        }),
        ..cfg()
    }
}

fn with_peer_graceful_restart() -> Vec<Capability> {
    let mut caps = both_families();
    caps.push(Capability::GracefulRestart(
        bgp_proto::message::capability::GracefulRestart {
            restart_flags: 0,
            restart_time: 120,
            families: Vec::new(),
        },
    ));
    caps
}

/// Issue 30: a settings change resets a session; with graceful restart negotiated it closes
/// as a restarting speaker does, so the router keeps the node's routes (stale) until the new
/// session's End-of-RIB instead of withdrawing them for the seconds of the reset.
#[test]
fn peer_settings_change_with_graceful_restart_closes_without_notification_rfc4724_4() {
    let mut s = Session::new(gr_config());
    to_established(&mut s, peer_open(PEER, 90, with_peer_graceful_restart()));
    let out = s.handle(Input::Stop(StopReason::ConfigurationChange));
    assert_eq!(sent_notification(&out), None);
    assert!(out.contains(&Output::Disconnect));
    // Only one side advertising it is no graceful restart: the Cease.
    for (config, caps) in [
        (cfg(), with_peer_graceful_restart()),
        (gr_config(), both_families()),
    ] {
        let mut s = Session::new(config);
        to_established(&mut s, peer_open(PEER, 90, caps));
        let out = s.handle(Input::Stop(StopReason::ConfigurationChange));
        assert_eq!(sent_notification(&out), Some((6, 6)));
    }
}

#[test]
fn graceful_restart_stop_closes_without_notification_rfc4724_4() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::Stop(StopReason::GracefulRestart));
    assert_eq!(sent_notification(&out), None);
    assert!(out.contains(&Output::Disconnect));
}

#[test]
fn send_hold_timer_expiry_closes_the_session_rfc9687_4() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::TimerFired(Timer::SendHold));
    assert_eq!(sent_notification(&out), Some((8, 0)));
    assert_eq!(s.state(), State::Idle);
}

// ----- graceful restart capability

#[test]
fn graceful_restart_capability_lists_only_carried_families_with_f_bits_rfc4724_3() {
    let gr = GracefulRestartConfig {
        restart_time: 120,
        preserve_forwarding: true,
        long_lived_stale_time: 0,
    };
    let mut s = Session::new(SessionConfig {
        families: vec![Family::IPV4_UNICAST],
        graceful_restart: Some(gr),
        ..cfg()
    });
    s.set_restarting(true);
    s.handle(Input::Start);
    let out = s.handle(Input::TcpConnected);
    let Message::Open(open) = sent(&out)[0] else {
        panic!()
    };
    let cap = open
        .capabilities()
        .find_map(|c| match c {
            Capability::GracefulRestart(g) => Some(g.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(cap.restart_time, 120);
    assert!(cap.restarting());
    assert_eq!(cap.families.len(), 1);
    assert_eq!(cap.families[0].family, Family::IPV4_UNICAST);
    assert!(cap.families[0].forwarding_preserved());
}

fn our_open_with(gr: Option<GracefulRestartConfig>) -> Open {
    let mut s = Session::new(SessionConfig {
        graceful_restart: gr,
        ..cfg()
    });
    s.handle(Input::Start);
    let out = s.handle(Input::TcpConnected);
    let Message::Open(open) = sent(&out)[0] else {
        panic!()
    };
    open.clone()
}

#[test]
fn llgr_capability_follows_graceful_restart_for_each_family_rfc9494_3() {
    let open = our_open_with(Some(GracefulRestartConfig {
        restart_time: 2,
        preserve_forwarding: true,
        long_lived_stale_time: 86_400,
    }));
    let codes: Vec<u8> = open.capabilities().map(Capability::code).collect();
    let gr = codes.iter().position(|c| *c == 64).expect("GR capability");
    let llgr = codes
        .iter()
        .position(|c| *c == 71)
        .expect("LLGR capability");
    assert!(gr < llgr, "{codes:?}");
    let Some(Capability::LongLivedGracefulRestart(families)) =
        open.capabilities().find(|c| c.code() == 71)
    else {
        panic!()
    };
    let carried: Vec<Family> = families.iter().map(|f| f.family).collect();
    assert_eq!(carried, cfg().families);
    for f in families {
        assert_eq!(f.stale_time, 86_400);
        assert_eq!(f.flags, bgp_proto::LlgrFamily::FORWARDING_STATE);
    }
}

#[test]
fn no_llgr_capability_when_the_stale_time_is_zero_or_without_graceful_restart_rfc9494_3() {
    let off = our_open_with(Some(GracefulRestartConfig {
        restart_time: 120,
        preserve_forwarding: true,
        long_lived_stale_time: 0,
    }));
    assert!(off.capabilities().any(|c| c.code() == 64));
    assert!(!off.capabilities().any(|c| c.code() == 71));
    let no_gr = our_open_with(None);
    assert!(
        !no_gr
            .capabilities()
            .any(|c| c.code() == 64 || c.code() == 71)
    );
}

#[test]
fn reconnect_after_failure_resends_the_full_table() {
    let mut s = Session::new(cfg());
    s.handle(Input::SetRoutes(routes(&[("198.18.1.0/24", "192.0.2.10")])));
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    s.handle(Input::TcpFailed("reset".into()));
    s.handle(Input::TimerFired(Timer::ConnectRetry));
    s.handle(Input::TcpConnected);
    s.handle(recv(Message::Open(peer_open(PEER, 90, both_families()))));
    let out = s.handle(recv(Message::Keepalive));
    let ups = updates(&out);
    assert_eq!(ups[0].nlri, vec!["198.18.1.0/24".parse().unwrap()]);
    assert_eq!(ups.len(), 3, "table + two End-of-RIB");
}

fn with_peer_notification_gr() -> Vec<Capability> {
    let mut caps = both_families();
    caps.push(Capability::GracefulRestart(
        bgp_proto::message::capability::GracefulRestart {
            restart_flags: bgp_proto::message::capability::GracefulRestart::NOTIFICATION,
            restart_time: 120,
            families: Vec::new(),
        },
    ));
    caps
}

/// Issue 30 item 3: where both sides advertise the N bit, a settings reset tells the router
/// why (Cease/Other Configuration Change) and the router still keeps the node's routes, as
/// RFC 8538 §4 makes any NOTIFICATION but Hard Reset a graceful restart.
#[test]
fn peer_settings_change_with_the_n_bit_sends_cease_other_configuration_change_rfc8538_4() {
    let mut s = Session::new(gr_config());
    to_established(&mut s, peer_open(PEER, 90, with_peer_notification_gr()));
    let out = s.handle(Input::Stop(StopReason::ConfigurationChange));
    assert_eq!(sent_notification(&out), Some((6, 6)));
}

/// With the N bit negotiated, a plain Cease would leave our routes at the router as stale
/// (RFC 8538 §4): a departure, a removed peer and a BFD failure are sent as Hard Reset
/// carrying the Cease (§3, §5), its RFC 9003 message included.
#[test]
fn final_stops_with_the_n_bit_are_a_hard_reset_carrying_the_cease_rfc8538_3() {
    let mut s = Session::new(gr_config());
    to_established(&mut s, peer_open(PEER, 90, with_peer_notification_gr()));
    let out = s.handle(Input::Stop(StopReason::Shutdown("node drained".into())));
    let n = sent(&out)
        .into_iter()
        .find_map(|m| match m {
            Message::Notification(n) => Some(n.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!((n.code, n.subcode), (ErrorCode::Cease, cease::HARD_RESET));
    assert_eq!(
        n.hard_reset_of().map(|i| i.subcode),
        Some(cease::ADMINISTRATIVE_SHUTDOWN)
    );
    assert_eq!(n.shutdown_message().as_deref(), Some("node drained"));
    assert_eq!(n.name(), "Cease/Hard Reset (Cease/Administrative Shutdown)");

    let mut s = Session::new(gr_config());
    to_established(&mut s, peer_open(PEER, 90, with_peer_notification_gr()));
    let out = s.handle(Input::Stop(StopReason::Deconfigured));
    assert_eq!(sent_notification(&out), Some((6, cease::HARD_RESET)));

    // Without the peer's N bit: the plain Cease, as before.
    let mut s = Session::new(gr_config());
    to_established(&mut s, peer_open(PEER, 90, with_peer_graceful_restart()));
    let out = s.handle(Input::Stop(StopReason::Deconfigured));
    assert_eq!(sent_notification(&out), Some((6, cease::PEER_DECONFIGURED)));
}

/// We advertise the N bit whenever we advertise graceful restart (RFC 8538 §2).
#[test]
fn our_graceful_restart_capability_carries_the_n_bit_rfc8538_2() {
    let mut s = Session::new(gr_config());
    let out = s.handle(Input::Start);
    let out2 = s.handle(Input::TcpConnected);
    let open = sent(&out)
        .into_iter()
        .chain(sent(&out2))
        .find_map(|m| match m {
            Message::Open(o) => Some(o.clone()),
            _ => None,
        })
        .expect("an OPEN");
    let gr = open
        .capabilities()
        .find_map(|c| match c {
            Capability::GracefulRestart(g) => Some(g.clone()),
            _ => None,
        })
        .expect("the graceful restart capability");
    assert_ne!(
        gr.restart_flags & bgp_proto::message::capability::GracefulRestart::NOTIFICATION,
        0
    );
}
