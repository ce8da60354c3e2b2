//! The BFD inputs of the session state machine: RFC 5882 §3.2 (a failed path resets an
//! Established session, which then reconnects) and draft-ietf-idr-bgp-bfd-strict-mode
//! (capability 74; with both sides strict, the KEEPALIVE waits for BFD Up).

use std::time::Duration;

use bgp_proto::Framer;
use bgp_proto::iana::notification::cease;
use bgp_proto::message::capability::Capability;
use bgp_proto::message::{Message, WireOptions};
use bgp_proto::session::{BfdInput, DownReason, Input, Output, Session, State, Timer};
use bytes::BytesMut;

use crate::fsm_harness;
use fsm_harness::*;

fn strict_cfg() -> bgp_proto::session::SessionConfig {
    let mut c = cfg();
    c.bfd_strict = true;
    c
}

fn with_strict(mut caps: Vec<Capability>) -> Vec<Capability> {
    caps.push(Capability::BfdStrictMode);
    caps
}

fn down_reason(out: &[Output]) -> Option<&DownReason> {
    out.iter().find_map(|o| match o {
        Output::StateChanged { reason, .. } => reason.as_ref(),
        _ => None,
    })
}

/// A strict session in OpenSent that got the peer's OPEN with capability 74: waiting for BFD.
fn waiting_for_bfd() -> Session {
    let mut s = Session::new(strict_cfg());
    to_open_sent(&mut s);
    s.handle(recv(Message::Open(peer_open(
        PEER,
        90,
        with_strict(both_families()),
    ))));
    s
}

#[test]
fn bfd_strict_mode_capability_is_code_74_with_no_value_draft_bfd_strict_5() {
    let open = bgp_proto::session::open::local_open(&strict_cfg(), false);
    let mut buf = BytesMut::new();
    Framer::new(WireOptions::four_octet())
        .encode(&Message::Open(open), &mut buf)
        .unwrap();
    assert!(buf.windows(2).any(|w| w == [74, 0]), "{buf:?}");
    let plain = bgp_proto::session::open::local_open(&cfg(), false);
    assert!(
        !plain
            .capabilities()
            .any(|c| *c == Capability::BfdStrictMode)
    );
}

#[test]
fn bfd_failure_resets_an_established_session_and_reconnects_rfc5882_3_2() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::Bfd(BfdInput::Failed(
        "control detection time expired".into(),
    )));
    assert_eq!(sent_notification(&out), Some((6, cease::BFD_DOWN)));
    assert_eq!(s.state(), State::Idle);
    assert_eq!(
        down_reason(&out).map(ToString::to_string).as_deref(),
        Some("BFD down: control detection time expired")
    );
    // Not stopped: the ConnectRetry timer brings it back without any BFD input.
    assert!(armed(&out, Timer::ConnectRetry).is_some(), "{out:?}");
    s.handle(Input::TimerFired(Timer::ConnectRetry));
    assert_eq!(s.state(), State::Connect);
}

#[test]
fn bfd_that_never_came_up_never_touches_a_non_strict_session_rfc5882_3_2() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::Bfd(BfdInput::NotUp));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(s.state(), State::Established);
}

#[test]
fn bfd_failure_before_established_is_ignored_without_strict_mode_draft_bfd_strict_8_5_2() {
    let mut s = Session::new(cfg());
    to_open_confirm(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::Bfd(BfdInput::Failed("x".into())));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(s.state(), State::OpenConfirm);
}

#[test]
fn strict_with_a_peer_without_74_does_not_wait_for_bfd_draft_bfd_strict_6() {
    let mut s = Session::new(strict_cfg());
    let out = to_open_confirm(&mut s, peer_open(PEER, 90, both_families()));
    assert!(sent(&out).contains(&&Message::Keepalive), "{out:?}");
    assert!(!s.waiting_for_bfd());
    assert_eq!(s.peer_bfd_strict(), Some(false));
    assert!(!s.negotiated().unwrap().bfd_strict);
}

#[test]
fn strict_without_our_strict_ignores_the_peers_74_draft_bfd_strict_6() {
    let mut s = Session::new(cfg());
    to_open_confirm(&mut s, peer_open(PEER, 90, with_strict(both_families())));
    assert_eq!(s.peer_bfd_strict(), Some(true));
    assert!(!s.negotiated().unwrap().bfd_strict);
}

#[test]
fn strict_with_a_peer_with_74_withholds_keepalive_until_bfd_up_draft_bfd_strict_8_5_5() {
    let mut s = Session::new(strict_cfg());
    to_open_sent(&mut s);
    let out = s.handle(recv(Message::Open(peer_open(
        PEER,
        90,
        with_strict(both_families()),
    ))));
    assert!(sent(&out).is_empty(), "no KEEPALIVE: {out:?}");
    assert_eq!(s.state(), State::OpenSent);
    assert!(s.waiting_for_bfd());
    // The negotiated hold time bounds the wait.
    assert_eq!(armed(&out, Timer::Hold), Some(Duration::from_secs(90)));
    let out = s.handle(Input::Bfd(BfdInput::Up));
    assert_eq!(sent(&out), vec![&Message::Keepalive]);
    assert_eq!(s.state(), State::OpenConfirm);
    assert!(!s.waiting_for_bfd());
    s.handle(recv(Message::Keepalive));
    assert_eq!(s.state(), State::Established);
}

#[test]
fn strict_bfd_up_first_does_not_wait_draft_bfd_strict_8_5_5() {
    let mut s = Session::new(strict_cfg());
    s.handle(Input::Bfd(BfdInput::Up));
    let out = to_open_confirm(&mut s, peer_open(PEER, 90, with_strict(both_families())));
    assert!(sent(&out).contains(&&Message::Keepalive));
}

#[test]
fn strict_peer_keepalive_while_waiting_establishes_on_bfd_up_draft_bfd_strict_8_5_6() {
    let mut s = waiting_for_bfd();
    let out = s.handle(recv(Message::Keepalive));
    assert_eq!(s.state(), State::OpenSent, "not an FSM error: {out:?}");
    assert_eq!(armed(&out, Timer::Hold), Some(Duration::from_secs(90)));
    let out = s.handle(Input::Bfd(BfdInput::Up));
    assert_eq!(sent(&out).first(), Some(&&Message::Keepalive));
    assert_eq!(s.state(), State::Established);
}

#[test]
fn strict_second_open_while_waiting_is_an_fsm_error_draft_bfd_strict_8_5_5() {
    let mut s = Session::new(strict_cfg());
    to_open_sent(&mut s);
    let open = peer_open(PEER, 90, with_strict(both_families()));
    s.handle(recv(Message::Open(open.clone())));
    let out = s.handle(recv(Message::Open(open)));
    assert_eq!(sent_notification(&out).map(|n| n.0), Some(5));
}

#[test]
fn strict_bfd_down_while_waiting_sends_cease_bfd_down_draft_bfd_strict_8_5_2() {
    let mut s = waiting_for_bfd();
    let out = s.handle(Input::Bfd(BfdInput::NotUp));
    assert_eq!(sent_notification(&out), Some((6, cease::BFD_DOWN)));
    assert_eq!(s.state(), State::Idle);
    assert!(
        armed(&out, Timer::ConnectRetry).is_some(),
        "retries: {out:?}"
    );
}

#[test]
fn strict_hold_timer_while_waiting_names_bfd_draft_bfd_strict_10() {
    let mut s = waiting_for_bfd();
    let out = s.handle(Input::TimerFired(Timer::Hold));
    assert_eq!(sent_notification(&out), Some((4, 0)));
    assert_eq!(down_reason(&out), Some(&DownReason::BfdNotUp));
    assert!(armed(&out, Timer::ConnectRetry).is_some());
}

#[test]
fn strict_hold_time_zero_waits_bfd_hold_time_draft_bfd_strict_8_5_3() {
    let mut s = Session::new(strict_cfg());
    to_open_sent(&mut s);
    let out = s.handle(recv(Message::Open(peer_open(
        PEER,
        0,
        with_strict(both_families()),
    ))));
    assert_eq!(armed(&out, Timer::BfdHold), Some(Duration::from_secs(30)));
    let out = s.handle(Input::TimerFired(Timer::BfdHold));
    assert_eq!(sent_notification(&out), Some((6, cease::BFD_DOWN)));
    assert_eq!(s.state(), State::Idle);
}

#[test]
fn strict_established_session_is_reset_by_bfd_failure_then_waits_again_draft_bfd_strict_8_7_2() {
    let mut s = Session::new(strict_cfg());
    s.handle(Input::Bfd(BfdInput::Up));
    to_established(&mut s, peer_open(PEER, 90, with_strict(both_families())));
    let out = s.handle(Input::Bfd(BfdInput::Failed("x".into())));
    assert_eq!(sent_notification(&out), Some((6, cease::BFD_DOWN)));
    // Reconnects (the FSM stays enabled, §10), and the next OPEN waits for BFD Up.
    s.handle(Input::TimerFired(Timer::ConnectRetry));
    s.handle(Input::TcpConnected);
    let out = s.handle(recv(Message::Open(peer_open(
        PEER,
        90,
        with_strict(both_families()),
    ))));
    assert!(sent(&out).is_empty(), "{out:?}");
    assert!(s.waiting_for_bfd());
}

/// An Established session reset by a BFD failure, then told to hold down.
fn held_down(hold: Duration) -> (Session, Vec<Output>) {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    s.handle(Input::Bfd(BfdInput::Failed("x".into())));
    let out = s.handle(Input::Bfd(BfdInput::HoldDown(hold)));
    (s, out)
}

#[test]
fn bfd_hold_down_keeps_the_session_idle_then_reconnects_by_itself_rfc4271_8_1_1() {
    let hold = Duration::from_secs(20);
    let (mut s, out) = held_down(hold);
    assert_eq!(armed(&out, Timer::IdleHold), Some(hold), "{out:?}");
    assert!(
        out.contains(&Output::StopTimer(Timer::ConnectRetry)),
        "{out:?}"
    );
    assert!(s.held_down());
    // Idle refuses the peer's connection meanwhile (RFC 4271 §8.2.2), and a stale
    // ConnectRetry does nothing.
    s.handle(Input::TcpAccepted);
    assert_eq!(s.state(), State::Idle);
    // The hold is a timer: it ends without any BFD input, and BGP connects again.
    let out = s.handle(Input::TimerFired(Timer::IdleHold));
    assert_eq!(
        armed(&out, Timer::ConnectRetry),
        Some(Duration::ZERO),
        "{out:?}"
    );
    assert!(!s.held_down());
    s.handle(Input::TimerFired(Timer::ConnectRetry));
    assert_eq!(s.state(), State::Connect);
}

#[test]
fn bfd_hold_down_running_is_never_extended_so_never_strands_the_session_rfc5882_3_1() {
    let (mut s, _) = held_down(Duration::from_secs(20));
    let out = s.handle(Input::Bfd(BfdInput::HoldDown(Duration::from_secs(120))));
    assert!(out.is_empty(), "{out:?}");
    s.handle(Input::TimerFired(Timer::IdleHold));
    assert!(!s.held_down());
}

#[test]
fn bfd_hold_down_never_touches_a_session_that_is_up_rfc5882_3_1() {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    let out = s.handle(Input::Bfd(BfdInput::HoldDown(Duration::from_secs(20))));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(s.state(), State::Established);
}

#[test]
fn bfd_hold_down_ends_with_a_stop_rfc4271_8_1_1() {
    let (mut s, _) = held_down(Duration::from_secs(20));
    let out = s.handle(Input::Stop(bgp_proto::session::StopReason::Deconfigured));
    assert!(out.contains(&Output::StopTimer(Timer::IdleHold)), "{out:?}");
    assert!(!s.held_down());
}

/// Whether the OPEN in `out` carries capability 74.
fn open_has_74(out: &[Output]) -> Option<bool> {
    sent(out).into_iter().find_map(|m| match m {
        Message::Open(o) => Some(o.capabilities().any(|c| *c == Capability::BfdStrictMode)),
        _ => None,
    })
}

#[test]
fn strict_capability_74_only_while_our_bfd_runs_draft_bfd_strict_5() {
    let mut s = Session::new(strict_cfg());
    s.handle(Input::Bfd(BfdInput::Unavailable));
    s.handle(Input::Start);
    let out = s.handle(Input::TcpConnected);
    assert_eq!(open_has_74(&out), Some(false), "{out:?}");
    // Nothing to wait for either: the peer's OPEN with 74 gets our KEEPALIVE at once.
    let out = s.handle(recv(Message::Open(peer_open(
        PEER,
        90,
        with_strict(both_families()),
    ))));
    assert_eq!(s.state(), State::OpenConfirm, "{out:?}");
    // BFD runs again (a reload started it): the next OPEN promises it again.
    s.handle(Input::Bfd(BfdInput::NotUp));
    s.handle(Input::Stop(bgp_proto::session::StopReason::Deconfigured));
    s.handle(Input::Start);
    let out = s.handle(Input::TcpConnected);
    assert_eq!(open_has_74(&out), Some(true), "{out:?}");
}
