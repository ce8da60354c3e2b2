//! The session answers as `podcidr-bgp decode` reports: raw bytes go through
//! `decode_message` with the options the session negotiated (as the driver's codec does),
//! then into the FSM. Covers AS 0 (RFC 7607), AS4 attributes between 4-octet speakers
//! (RFC 6793 §3) and the 4,096-octet limit of a session without extended messages (RFC 8654).

use bgp_proto::message::{WireOptions, decode_message};
use bgp_proto::session::{Input, Output, Session, State};
use bgp_proto::{Action, DecodeError};

mod frames;
mod fsm_harness;
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
