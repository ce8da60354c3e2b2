//! The session answers as `podcidr-bgp decode` reports: raw bytes go through
//! `decode_message` with the options the session negotiated (as the driver's codec does),
//! then into the FSM. Covers AS 0 (RFC 7607), AS4 attributes between 4-octet speakers
//! (RFC 6793 §3) and the 4,096-octet limit of a session without extended messages (RFC 8654).

use bgp_proto::message::{WireOptions, decode_message};
use bgp_proto::session::{Input, Output, Session, State};
use bgp_proto::{Action, DecodeError, Family};

use crate::frames;
use crate::fsm_harness;
use frames::*;
use fsm_harness::*;

/// What the codec would hand the FSM, and the FSM's answer.
fn feed(s: &mut Session, bytes: &[u8]) -> (Result<Vec<DecodeError>, DecodeError>, Vec<Output>) {
    // Before Established the codec runs with the pre-OPEN defaults.
    let opts = s
        .negotiated()
        .map_or(WireOptions::default(), |n| WireOptions {
            four_octet_as: n.four_octet_as,
            extended_message: n.extended_message,
        });
    match decode_message(bytes, &opts) {
        Ok(d) => {
            let errors = d.errors.clone();
            (Ok(errors), s.handle(Input::Received(d)))
        }
        Err(e) => {
            let out = s.handle(Input::DecodeFailed(e.clone()));
            (Err(e), out)
        }
    }
}

fn established() -> Session {
    let mut s = Session::new(cfg());
    to_established(&mut s, peer_open(PEER, 90, both_families()));
    assert!(s.negotiated().is_some_and(|n| n.four_octet_as));
    s
}

/// A non-fatal error: decode's action is not a reset, the FSM sends nothing and stays up.
fn kept_with(s: &mut Session, bytes: &[u8], action: Action) -> Vec<DecodeError> {
    let (decoded, out) = feed(s, bytes);
    let errors = decoded.expect("the message decodes");
    assert!(!errors.is_empty());
    assert!(errors.iter().all(|e| e.action() == action), "{errors:?}");
    assert_eq!(sent_notification(&out), None, "{out:?}");
    assert_eq!(s.state(), State::Established);
    // Counted: the driver adds what UpdateErrors carries to the status and the metric.
    let counted: Vec<&str> = out
        .iter()
        .filter_map(|o| match o {
            Output::UpdateErrors(e) => Some(e.iter().map(DecodeError::kind)),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(
        counted,
        errors.iter().map(DecodeError::kind).collect::<Vec<_>>()
    );
    errors
}

#[test]
fn open_with_peer_as_zero_gets_bad_peer_as_from_the_session_rfc7607_2() {
    let mut s = Session::new(cfg());
    to_open_sent(&mut s);
    let mut m = open(4, 90, [192, 0, 2, 1], &[]);
    m[20..22].copy_from_slice(&[0, 0]);
    let (decoded, out) = feed(&mut s, &m);
    let e = decoded.expect_err("decode rejects it");
    let n = &e.handling().notification;
    assert_eq!((u8::from(n.code), n.subcode), (2, 2));
    assert_eq!(sent_notification(&out), Some((2, 2)));
    assert_eq!(s.state(), State::Idle);
}

#[test]
fn as_path_with_as_zero_is_withdrawn_and_the_session_stays_rfc7607_2() {
    let mut s = established();
    let path = &[0x40, 2, 6, 2, 1, 0, 0, 0, 0];
    let m = update(&[], &[ORIGIN, path, NEXT_HOP].concat(), NLRI);
    let errors = kept_with(&mut s, &m, Action::TreatAsWithdraw);
    assert!(matches!(errors[0], DecodeError::MalformedAsPath { .. }));
}

#[test]
fn aggregator_with_as_zero_is_discarded_and_the_session_stays_rfc7607_2() {
    let mut s = established();
    let m = valid_with(&[0xc0, 7, 8, 0, 0, 0, 0, 192, 0, 2, 1]);
    let errors = kept_with(&mut s, &m, Action::AttributeDiscard);
    assert!(matches!(errors[0], DecodeError::AggregatorAsZero { .. }));
}

#[test]
fn as4_path_from_a_four_octet_speaker_is_discarded_and_the_session_stays_rfc6793_3() {
    let mut s = established();
    let m = valid_with(&[0xc0, 17, 6, 2, 1, 0xfa, 0x56, 0xea, 0x01]);
    let errors = kept_with(&mut s, &m, Action::AttributeDiscard);
    assert!(matches!(
        errors[0],
        DecodeError::As4AttributeFromNewSpeaker { type_code: 17, .. }
    ));
}

#[test]
fn message_over_4096_octets_resets_a_session_without_extended_messages_rfc8654() {
    let mut s = established();
    assert!(s.negotiated().is_some_and(|n| !n.extended_message));
    let m = update(&[], &[], &[8, 10].repeat(2100));
    let (decoded, out) = feed(&mut s, &m);
    assert!(matches!(
        decoded,
        Err(DecodeError::BadMessageLength { length: 4223 })
    ));
    assert_eq!(sent_notification(&out), Some((1, 2)));
    assert_eq!(s.state(), State::Idle);
}

// ----- AFI/SAFI disable (RFC 7606 §7.11, RFC 4760 §7): counted, the session stays. We import
// nothing, so the family's received routes are already ignored; a reset would withdraw the
// node's own routes and the ToR would resend the same route, a flap loop.

const V6: Action = Action::AfiSafiDisable(Family::IPV6_UNICAST);

#[test]
fn mp_reach_next_hop_length_wrong_for_the_family_is_counted_and_the_session_stays_rfc7606_7_11() {
    let mut s = established();
    // IPv6 unicast with a 4-octet next hop, then 2001:db8::/32.
    let mp = &[
        0x90, 14, 0, 14, 0, 2, 1, 4, 192, 0, 2, 1, 0, 32, 0x20, 0x01, 0x0d, 0xb8,
    ];
    let m = update(&[], &[mp, ORIGIN, AS_PATH].concat(), &[]);
    let errors = kept_with(&mut s, &m, V6);
    assert_eq!(errors[0].kind(), "malformed-mp-attribute");
    // And the next message is handled as usual.
    kept_with(&mut s, &m, V6);
}

#[test]
fn mp_reach_nlri_overrun_is_counted_and_the_session_stays_rfc7606_5_3() {
    let mut s = established();
    let mut mp = vec![0x90, 14, 0, 0, 0, 2, 1, 16];
    mp.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    mp.extend_from_slice(&[0, 64, 0x20, 0x01]);
    mp[3] = u8::try_from(mp.len() - 4).unwrap();
    let m = update(&[], &[&mp, ORIGIN, AS_PATH].concat(), &[]);
    kept_with(&mut s, &m, V6);
}

#[test]
fn mp_unreach_prefix_too_long_is_counted_and_the_session_stays_rfc7606_5_3() {
    let mut s = established();
    // IPv6 unicast withdrawal of a /200.
    let m = update(&[], &[0x90, 15, 0, 5, 0, 2, 1, 200, 0], &[]);
    kept_with(&mut s, &m, V6);
}

// ----- what RFC 7606 does not recover from still resets, with its NOTIFICATION

fn reset_with(bytes: &[u8], code: (u8, u8)) {
    let mut s = established();
    let (decoded, out) = feed(&mut s, bytes);
    assert!(decoded.is_err(), "{decoded:?}");
    assert_eq!(sent_notification(&out), Some(code));
    assert_eq!(s.state(), State::Idle);
}

#[test]
fn mp_unreach_too_short_for_afi_safi_still_resets_with_3_5_rfc7606_7_12() {
    reset_with(&update(&[], &[0x80, 15, 2, 0, 2], &[]), (3, 5));
}

#[test]
fn mp_reach_twice_still_resets_with_3_1_rfc7606_3_g() {
    let mp: &[u8] = &[0x80, 15, 3, 0, 2, 1];
    reset_with(&update(&[], &[mp, mp].concat(), &[]), (3, 1));
}

#[test]
fn invalid_ipv4_nlri_still_resets_with_3_10_rfc7606_5_3() {
    reset_with(
        &update(&[], &[ORIGIN, AS_PATH, NEXT_HOP].concat(), &[33, 10]),
        (3, 10),
    );
}
