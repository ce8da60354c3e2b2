//! One test per error case in docs/bgp-errors.md: the action (RFC 7606) and the NOTIFICATION
//! code/subcode (RFC 4271 §6) a conforming speaker uses.

use bgp_proto::message::attribute::AttrValue;
use bgp_proto::message::{Decoded, Message, WireOptions, decode_message};
use bgp_proto::{Action, DecodeError, Family};

use crate::frames;
use frames::*;

fn attrs(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// The most severe outcome: `(action, code, subcode, data)`.
fn outcome(bytes: &[u8]) -> (Action, u8, u8, Vec<u8>) {
    outcome_with(bytes, &WireOptions::four_octet())
}

fn outcome_with(bytes: &[u8], opts: &WireOptions) -> (Action, u8, u8, Vec<u8>) {
    let err: DecodeError = match decode_message(bytes, opts) {
        Err(e) => e,
        Ok(Decoded { errors, .. }) => {
            let mut errors = errors;
            errors.sort_by_key(|e| match e.action() {
                Action::SessionReset => 0,
                Action::AfiSafiDisable(_) => 1,
                Action::TreatAsWithdraw => 2,
                Action::AttributeDiscard => 3,
            });
            errors.into_iter().next().expect("an error was expected")
        }
    };
    let h = err.handling();
    (
        h.action,
        u8::from(h.notification.code),
        h.notification.subcode,
        h.notification.data.to_vec(),
    )
}

fn clean(bytes: &[u8]) -> Decoded {
    let d = decode_message(bytes, &WireOptions::four_octet()).expect("decodes");
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    d
}

fn expect(bytes: &[u8], action: Action, code: u8, subcode: u8) -> Vec<u8> {
    let (a, c, s, data) = outcome(bytes);
    assert_eq!((a, c, s), (action, code, subcode));
    data
}

// ----- message header, RFC 4271 §6.1

#[test]
fn header_marker_not_all_ones_rfc4271_6_1() {
    let mut m = frame(4, &[]);
    m[3] = 0;
    expect(&m, Action::SessionReset, 1, 1);
}

#[test]
fn header_length_below_19_rfc4271_6_1() {
    let mut m = frame(4, &[]);
    m[17] = 18;
    assert_eq!(expect(&m, Action::SessionReset, 1, 2), vec![0, 18]);
}

#[test]
fn header_length_above_4096_without_extended_messages_rfc8654() {
    let m = update(&[], &[], &[8, 10].repeat(2100));
    assert_eq!(m.len(), 4223);
    expect(&m, Action::SessionReset, 1, 2);
    let ext = WireOptions {
        four_octet_as: true,
        extended_message: true,
    };
    assert!(decode_message(&m, &ext).is_ok());
}

#[test]
fn header_unknown_message_type_rfc4271_6_1() {
    assert_eq!(expect(&frame(9, &[]), Action::SessionReset, 1, 3), vec![9]);
}

#[test]
fn keepalive_with_a_body_rfc4271_6_1() {
    expect(&frame(4, &[0]), Action::SessionReset, 1, 2);
}

#[test]
fn open_shorter_than_29_octets_rfc4271_6_1() {
    expect(&frame(1, &[4, 0, 1]), Action::SessionReset, 1, 2);
}

#[test]
fn notification_shorter_than_21_octets_rfc4271_6_1() {
    expect(&frame(3, &[6]), Action::SessionReset, 1, 2);
}

// ----- OPEN, RFC 4271 §6.2

#[test]
fn open_unsupported_version_rfc4271_6_2() {
    let data = expect(&open(3, 90, [1, 1, 1, 1], &[]), Action::SessionReset, 2, 1);
    assert_eq!(data, vec![0, 4], "data is the largest supported version");
}

#[test]
fn open_hold_time_one_is_rejected_rfc4271_6_2() {
    expect(&open(4, 1, [1, 1, 1, 1], &[]), Action::SessionReset, 2, 6);
    expect(&open(4, 2, [1, 1, 1, 1], &[]), Action::SessionReset, 2, 6);
}

#[test]
fn open_bgp_identifier_zero_rfc6286_2_1() {
    expect(&open(4, 90, [0, 0, 0, 0], &[]), Action::SessionReset, 2, 3);
}

#[test]
fn open_unknown_optional_parameter_rfc5492_3() {
    expect(
        &open(4, 90, [1, 1, 1, 1], &[1, 0]),
        Action::SessionReset,
        2,
        4,
    );
}

#[test]
fn open_capability_runs_past_its_parameter_rfc5492_4() {
    expect(
        &open(4, 90, [1, 1, 1, 1], &[2, 2, 65, 4]),
        Action::SessionReset,
        2,
        0,
    );
}

#[test]
fn open_multiprotocol_capability_wrong_length_rfc4760_8() {
    expect(
        &open(4, 90, [1, 1, 1, 1], &[2, 4, 1, 2, 0, 1]),
        Action::SessionReset,
        2,
        0,
    );
}

#[test]
fn open_optional_parameters_length_overruns_rfc4271_6_2() {
    let mut m = open(4, 90, [1, 1, 1, 1], &[]);
    m[28] = 5;
    expect(&m, Action::SessionReset, 2, 0);
}

#[test]
fn open_unknown_capability_is_kept_rfc5492_5() {
    let m = open(4, 90, [1, 1, 1, 1], &[2, 5, 200, 3, 1, 2, 3]);
    let bgp_proto::Message::Open(o) = clean(&m).message else {
        panic!()
    };
    assert_eq!(
        o.capabilities().collect::<Vec<_>>(),
        vec![&bgp_proto::Capability::Unknown {
            code: 200,
            value: vec![1, 2, 3]
        }]
    );
}

// ----- UPDATE, RFC 4271 §6.3 as revised by RFC 7606

#[test]
fn update_withdrawn_length_overruns_message_rfc4271_6_3() {
    let mut m = update(&[24, 10, 0, 0], &[], &[]);
    m[20] = 200;
    expect(&m, Action::SessionReset, 3, 1);
}

#[test]
fn update_total_attribute_length_overruns_message_rfc4271_6_3() {
    let mut m = valid_with(&[]);
    m[22] = 0xff;
    expect(&m, Action::SessionReset, 3, 1);
}

#[test]
fn update_withdrawn_prefix_longer_than_32_rfc7606_5_3() {
    expect(
        &update(&[33, 1, 2, 3, 4, 5], &[], &[]),
        Action::SessionReset,
        3,
        10,
    );
}

#[test]
fn update_nlri_prefix_runs_past_message_rfc7606_5_3() {
    let m = update(&[], &attrs(&[ORIGIN, AS_PATH, NEXT_HOP]), &[24, 10, 0]);
    expect(&m, Action::SessionReset, 3, 10);
}

#[test]
fn update_attribute_runs_past_attribute_field_rfc7606_4() {
    // The last attribute claims 9 octets but 1 remains: NLRI still located, so withdraw.
    let m = update(
        &[],
        &attrs(&[ORIGIN, AS_PATH, NEXT_HOP, &[0x80, 4, 9, 0]]),
        NLRI,
    );
    expect(&m, Action::TreatAsWithdraw, 3, 1);
}

#[test]
fn update_attribute_header_truncated_rfc7606_4() {
    let m = update(&[], &attrs(&[ORIGIN, AS_PATH, NEXT_HOP, &[0x80, 4]]), NLRI);
    expect(&m, Action::TreatAsWithdraw, 3, 1);
}

#[test]
fn update_missing_origin_rfc7606_3_d() {
    let m = update(&[], &attrs(&[AS_PATH, NEXT_HOP]), NLRI);
    assert_eq!(expect(&m, Action::TreatAsWithdraw, 3, 3), vec![1]);
}

#[test]
fn update_missing_next_hop_with_ipv4_nlri_rfc7606_3_d() {
    let m = update(&[], &attrs(&[ORIGIN, AS_PATH]), NLRI);
    assert_eq!(expect(&m, Action::TreatAsWithdraw, 3, 3), vec![3]);
}

#[test]
fn update_withdraw_only_needs_no_mandatory_attributes_rfc4271_5() {
    clean(&update(&[24, 10, 0, 0], &[], &[]));
}

#[test]
fn update_origin_undefined_value_rfc7606_7_1() {
    expect(
        &update(&[], &attrs(&[&[0x40, 1, 1, 3], AS_PATH, NEXT_HOP]), NLRI),
        Action::TreatAsWithdraw,
        3,
        6,
    );
}

#[test]
fn update_origin_wrong_length_rfc7606_7_1() {
    expect(
        &update(&[], &attrs(&[&[0x40, 1, 2, 0, 0], AS_PATH, NEXT_HOP]), NLRI),
        Action::TreatAsWithdraw,
        3,
        5,
    );
}

#[test]
fn update_as_path_unknown_segment_type_rfc7606_7_2() {
    let bad = &[0x40, 2, 6, 7, 1, 0, 0, 0, 1];
    expect(
        &update(&[], &attrs(&[ORIGIN, bad, NEXT_HOP]), NLRI),
        Action::TreatAsWithdraw,
        3,
        11,
    );
}

#[test]
fn update_as_path_segment_overrun_rfc7606_7_2() {
    let bad = &[0x40, 2, 4, 2, 2, 0, 0];
    expect(
        &update(&[], &attrs(&[ORIGIN, bad, NEXT_HOP]), NLRI),
        Action::TreatAsWithdraw,
        3,
        11,
    );
}

#[test]
fn update_next_hop_wrong_length_rfc7606_7_3() {
    let bad = &[0x40, 3, 3, 1, 2, 3];
    expect(
        &update(&[], &attrs(&[ORIGIN, AS_PATH, bad]), NLRI),
        Action::TreatAsWithdraw,
        3,
        5,
    );
}

#[test]
fn update_med_wrong_length_rfc7606_7_4() {
    expect(
        &valid_with(&[0x80, 4, 2, 0, 1]),
        Action::TreatAsWithdraw,
        3,
        5,
    );
}

#[test]
fn update_local_pref_wrong_length_rfc7606_7_5() {
    expect(&valid_with(&[0x40, 5, 0]), Action::TreatAsWithdraw, 3, 5);
}

#[test]
fn update_atomic_aggregate_nonzero_length_rfc7606_7_6() {
    expect(
        &valid_with(&[0x40, 6, 1, 0]),
        Action::AttributeDiscard,
        3,
        5,
    );
}

#[test]
fn update_aggregator_wrong_length_rfc7606_7_7() {
    expect(
        &valid_with(&[0xc0, 7, 6, 0, 1, 1, 1, 1, 1]),
        Action::AttributeDiscard,
        3,
        5,
    );
    // Six octets are right on a 2-octet session.
    let two = WireOptions::default();
    let m = update(
        &[],
        &attrs(&[
            ORIGIN,
            &[0x40, 2, 4, 2, 1, 0xfd, 0xe8],
            NEXT_HOP,
            &[0xc0, 7, 6, 0, 1, 1, 1, 1, 1],
        ]),
        NLRI,
    );
    assert!(decode_message(&m, &two).unwrap().errors.is_empty());
}

#[test]
fn update_communities_not_multiple_of_4_rfc7606_7_8() {
    expect(
        &valid_with(&[0xc0, 8, 3, 0, 0, 1]),
        Action::TreatAsWithdraw,
        3,
        5,
    );
}

#[test]
fn update_communities_empty_rfc7606_7_8() {
    expect(&valid_with(&[0xc0, 8, 0]), Action::TreatAsWithdraw, 3, 5);
}

#[test]
fn update_originator_id_wrong_length_rfc7606_7_9() {
    expect(
        &valid_with(&[0x80, 9, 5, 1, 1, 1, 1, 1]),
        Action::TreatAsWithdraw,
        3,
        5,
    );
}

#[test]
fn update_cluster_list_not_multiple_of_4_rfc7606_7_10() {
    expect(
        &valid_with(&[0x80, 10, 5, 1, 1, 1, 1, 1]),
        Action::TreatAsWithdraw,
        3,
        5,
    );
}

#[test]
fn update_mp_reach_next_hop_length_inconsistent_rfc7606_7_11() {
    // IPv6 unicast with a 4-octet next hop.
    let mp = &[
        0x90, 14, 0, 13, 0, 2, 1, 4, 192, 0, 2, 1, 0, 32, 0x20, 0x01, 0x0d, 0xb8,
    ];
    let m = update(&[], &attrs(&[mp, ORIGIN, AS_PATH]), &[]);
    expect(&m, Action::AfiSafiDisable(Family::IPV6_UNICAST), 3, 9);
}

#[test]
fn update_mp_reach_nlri_overrun_rfc7606_5_3() {
    let mut mp = vec![0x90, 14, 0, 0, 0, 2, 1, 16];
    mp.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    mp.extend_from_slice(&[0, 64, 0x20, 0x01]);
    let len = u8::try_from(mp.len() - 4).unwrap();
    mp[3] = len;
    let m = update(&[], &attrs(&[&mp, ORIGIN, AS_PATH]), &[]);
    expect(&m, Action::AfiSafiDisable(Family::IPV6_UNICAST), 3, 9);
}

#[test]
fn update_mp_unreach_without_afi_safi_rfc7606_7_12() {
    let m = update(&[], &[0x80, 15, 2, 0, 2], &[]);
    expect(&m, Action::SessionReset, 3, 5);
}

#[test]
fn update_mp_reach_twice_rfc7606_3_g() {
    let mp = &[0x80, 15, 3, 0, 2, 1];
    let m = update(&[], &attrs(&[mp, mp]), &[]);
    expect(&m, Action::SessionReset, 3, 1);
}

#[test]
fn update_duplicate_attribute_keeps_first_rfc7606_3_g() {
    let m = valid_with(&attrs(&[
        &[0x80, 4, 4, 0, 0, 0, 7],
        &[0x80, 4, 4, 0, 0, 0, 9],
    ]));
    expect(&m, Action::AttributeDiscard, 3, 1);
    let d = decode_message(&m, &WireOptions::four_octet()).unwrap();
    let bgp_proto::Message::Update(u) = d.message else {
        panic!()
    };
    assert_eq!(u.med(), Some(7));
}

#[test]
fn update_extended_communities_not_multiple_of_8_rfc7606_7_14() {
    expect(
        &valid_with(&[0xc0, 16, 4, 0, 2, 0, 1]),
        Action::TreatAsWithdraw,
        3,
        5,
    );
}

#[test]
fn update_large_communities_not_multiple_of_12_rfc8092_6() {
    expect(
        &valid_with(&[0xc0, 32, 8, 0, 0, 0, 1, 0, 0, 0, 1]),
        Action::TreatAsWithdraw,
        3,
        5,
    );
}

/// AS4_PATH and AS4_AGGREGATOR belong to sessions with a 2-octet AS speaker (RFC 6793 §4.2):
/// a valid UPDATE of such a session plus `extra`, and its outcome.
fn two_octet_outcome(extra: &[u8]) -> (Action, u8, u8, Vec<u8>) {
    let m = update(
        &[],
        &attrs(&[ORIGIN, &[0x40, 2, 4, 2, 1, 0xfd, 0xe8], NEXT_HOP, extra]),
        NLRI,
    );
    outcome_with(&m, &WireOptions::default())
}

#[test]
fn update_as4_path_malformed_is_discarded_rfc6793_6() {
    let (a, c, s, _) = two_octet_outcome(&[0xc0, 17, 3, 2, 1, 0]);
    assert_eq!((a, c, s), (Action::AttributeDiscard, 3, 11));
}

#[test]
fn update_as4_aggregator_wrong_length_is_discarded_rfc6793_6() {
    let (a, c, s, _) = two_octet_outcome(&[0xc0, 18, 4, 0, 0, 0, 1]);
    assert_eq!((a, c, s), (Action::AttributeDiscard, 3, 5));
}

// ----- AS 0 (RFC 7607) and AS4 attributes between 4-octet speakers (RFC 6793 §3)

#[test]
fn open_peer_as_zero_is_bad_peer_as_rfc7607_2() {
    let mut m = open(4, 90, [1, 1, 1, 1], &[]);
    m[20..22].copy_from_slice(&[0, 0]);
    let data = expect(&m, Action::SessionReset, 2, 2);
    assert_eq!(data, vec![0, 0]);
}

#[test]
fn open_four_octet_capability_as_zero_is_bad_peer_as_rfc7607_2() {
    // My AS = AS_TRANS, capability 65 (4-octet AS) = 0.
    let mut m = open(4, 90, [1, 1, 1, 1], &[2, 6, 65, 4, 0, 0, 0, 0]);
    m[20..22].copy_from_slice(&23456u16.to_be_bytes());
    expect(&m, Action::SessionReset, 2, 2);
}

#[test]
fn update_as_path_with_as_zero_is_treat_as_withdraw_rfc7607_2() {
    let path = &[0x40, 2, 10, 2, 2, 0xfa, 0x56, 0xea, 0x01, 0, 0, 0, 0];
    let m = update(&[], &attrs(&[ORIGIN, path, NEXT_HOP]), NLRI);
    let data = expect(&m, Action::TreatAsWithdraw, 3, 11);
    assert_eq!(data, path.to_vec(), "data is the attribute");
}

#[test]
fn update_as4_path_with_as_zero_is_discarded_rfc7607_2() {
    let (a, c, s, _) = two_octet_outcome(&[0xc0, 17, 6, 2, 1, 0, 0, 0, 0]);
    assert_eq!((a, c, s), (Action::AttributeDiscard, 3, 11));
}

#[test]
fn update_aggregator_with_as_zero_is_discarded_rfc7607_2() {
    expect(
        &valid_with(&[0xc0, 7, 8, 0, 0, 0, 0, 192, 0, 2, 1]),
        Action::AttributeDiscard,
        3,
        9,
    );
}

#[test]
fn update_as4_aggregator_with_as_zero_is_discarded_rfc7607_2() {
    let (a, c, s, _) = two_octet_outcome(&[0xc0, 18, 8, 0, 0, 0, 0, 192, 0, 2, 1]);
    assert_eq!((a, c, s), (Action::AttributeDiscard, 3, 9));
}

#[test]
fn update_as4_path_and_as4_aggregator_from_a_four_octet_speaker_are_discarded_rfc6793_3() {
    let as4_path: &[u8] = &[0xc0, 17, 6, 2, 1, 0xfa, 0x56, 0xea, 0x01];
    let as4_aggr: &[u8] = &[0xc0, 18, 8, 0xfa, 0x56, 0xea, 0x01, 192, 0, 2, 1];
    let m = valid_with(&[as4_path, as4_aggr].concat());
    let d = decode_message(&m, &WireOptions::four_octet()).expect("the session continues");
    assert_eq!(d.errors.len(), 2, "{:?}", d.errors);
    for e in &d.errors {
        assert!(
            matches!(e, DecodeError::As4AttributeFromNewSpeaker { .. }),
            "{e:?}"
        );
        assert_eq!(e.action(), Action::AttributeDiscard);
    }
    let Message::Update(u) = d.message else {
        panic!("an UPDATE")
    };
    assert_eq!(u.nlri.len(), 1, "the route itself stands");
    assert!(
        u.attributes.iter().all(|a| !matches!(
            a.value,
            AttrValue::As4Path(_) | AttrValue::As4Aggregator { .. }
        )),
        "{:?}",
        u.attributes
    );
}

#[test]
fn update_well_known_attribute_flagged_optional_rfc7606_3_c() {
    let bad = &[0xc0, 1, 1, 0];
    let data = expect(
        &update(&[], &attrs(&[bad, AS_PATH, NEXT_HOP]), NLRI),
        Action::TreatAsWithdraw,
        3,
        4,
    );
    assert_eq!(data, bad.to_vec(), "data is the erroneous attribute");
}

#[test]
fn update_unrecognized_well_known_attribute_rfc4271_6_3() {
    expect(&valid_with(&[0x40, 99, 1, 0]), Action::SessionReset, 3, 2);
}

#[test]
fn update_unknown_optional_attribute_is_kept_rfc4271_5() {
    let d = clean(&valid_with(&[0xc0, 99, 2, 1, 2]));
    let bgp_proto::Message::Update(u) = d.message else {
        panic!()
    };
    assert!(u.attributes.iter().any(|a| a.type_code() == 99));
}

// ----- ROUTE-REFRESH, RFC 7313 §5

#[test]
fn route_refresh_wrong_length_rfc7313_5() {
    let m = frame(5, &[0, 1, 0, 1, 0]);
    let data = expect(&m, Action::SessionReset, 7, 1);
    assert_eq!(data, m, "data is the complete message");
}

#[test]
fn route_refresh_unknown_subtype_is_decoded_for_the_session_to_ignore_rfc7313_5() {
    clean(&frame(5, &[0, 1, 9, 1]));
}
