//! BFD authentication, Keyed SHA1 and Meticulous Keyed SHA1 (RFC 5880 §6.7.4, §6.8.1,
//! §6.8.6): the digest against an independent computation, and every discard rule of an
//! authenticated session, one test per rule.

use std::time::Duration;

use bgp_proto::bfd::auth::{self, sequence_in_window};
use bgp_proto::bfd::{
    AuthError, BfdAuthKey, BfdInput, BfdOutput, BfdSession, BfdSessionConfig, BfdState, BfdTimer,
    ControlPacket, Diag,
};

const MS: Duration = Duration::from_millis(1);

fn cfg(my: u32) -> BfdSessionConfig {
    BfdSessionConfig {
        my_discriminator: my,
        desired_min_tx: MS * 100,
        required_min_rx: MS * 100,
        detect_mult: 3,
        jitter_seed: 7,
    }
}

fn key(meticulous: bool, secret: &[u8]) -> BfdAuthKey {
    BfdAuthKey::new(meticulous, 1, secret).unwrap()
}

fn sent(out: &[BfdOutput]) -> Vec<ControlPacket> {
    out.iter()
        .filter_map(|o| match o {
            BfdOutput::Send(p) => Some(*p),
            _ => None,
        })
        .collect()
}

fn auth_failures(out: &[BfdOutput]) -> Vec<AuthError> {
    out.iter()
        .filter_map(|o| match o {
            BfdOutput::AuthFailed(e) => Some(*e),
            _ => None,
        })
        .collect()
}

/// Delivers `packets` to `to` over the wire (encode, decode); returns its outputs.
fn deliver(to: &mut BfdSession, packets: &[ControlPacket]) -> Vec<BfdOutput> {
    let mut out = Vec::new();
    for p in packets {
        let wire = ControlPacket::decode(&p.encode().unwrap()).unwrap();
        out.extend(to.handle(BfdInput::Received(wire)));
    }
    out
}

/// Two sessions, each with its key, brought as far as the handshake takes them; returns
/// them and the last packets `a` sent.
fn handshake(a_key: BfdAuthKey, b_key: BfdAuthKey) -> (BfdSession, BfdSession) {
    let mut a = BfdSession::new(cfg(0xa)).with_auth(a_key, 1000);
    let mut b = BfdSession::new(cfg(0xb)).with_auth(b_key, 5000);
    let mut to_b = sent(&a.handle(BfdInput::Start));
    let mut to_a = sent(&b.handle(BfdInput::Start));
    for _ in 0..4 {
        let next_b = sent(&deliver(&mut b, &to_b));
        let next_a = sent(&deliver(&mut a, &to_a));
        to_b = next_a;
        to_a = next_b;
        for (s, t) in [(&mut a, &mut to_b), (&mut b, &mut to_a)] {
            t.extend(sent(&s.handle(BfdInput::TimerFired(BfdTimer::Transmit))));
        }
    }
    (a, b)
}

#[test]
fn keyed_sha1_digest_is_sha1_over_the_packet_with_the_key_rfc5880_6_7_4() {
    let p = ControlPacket {
        diag: Diag::None,
        state: BfdState::Up,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discriminator: 1,
        your_discriminator: 2,
        desired_min_tx: 100_000,
        required_min_rx: 100_000,
        required_min_echo_rx: 0,
        auth: None,
    };
    let signed = auth::sign(p, &key(false, b"secret"), 0x0102_0304).unwrap();
    // python3: hashlib.sha1(mandatory section | 04 1c 01 00 | 01020304 | "secret" + 14 zeros)
    let want: [u8; 20] = [
        0x93, 0x24, 0x0b, 0x14, 0xe2, 0x2f, 0xde, 0x90, 0x37, 0x7e, 0x4b, 0x69, 0xaf, 0xb3, 0x0e,
        0x39, 0xd8, 0x92, 0x62, 0x53,
    ];
    assert_eq!(signed.auth.unwrap().digest, want);
    assert_eq!(
        auth::check(&signed, &key(false, b"secret"), None, 3),
        Ok(0x0102_0304)
    );
}

#[test]
fn sessions_with_the_same_key_come_up_rfc5880_6_7_4() {
    for meticulous in [false, true] {
        let (a, b) = handshake(key(meticulous, b"s3cret"), key(meticulous, b"s3cret"));
        assert_eq!((a.state(), b.state()), (BfdState::Up, BfdState::Up));
    }
}

#[test]
fn wrong_key_is_discarded_rfc5880_6_7_4() {
    for meticulous in [false, true] {
        let (a, b) = handshake(key(meticulous, b"s3cret"), key(meticulous, b"other"));
        assert_eq!((a.state(), b.state()), (BfdState::Down, BfdState::Down));
    }
    let mut s = BfdSession::new(cfg(0xa)).with_auth(key(false, b"s3cret"), 1);
    let mut peer = BfdSession::new(cfg(0xb)).with_auth(key(false, b"other"), 1);
    let out = deliver(&mut s, &sent(&peer.handle(BfdInput::Start)));
    assert_eq!(auth_failures(&out), vec![AuthError::Digest]);
    let other_id = BfdAuthKey::new(false, 2, b"s3cret").unwrap();
    let mut peer = BfdSession::new(cfg(0xb)).with_auth(other_id, 1);
    let out = deliver(&mut s, &sent(&peer.handle(BfdInput::Start)));
    assert_eq!(
        auth_failures(&out),
        vec![AuthError::WrongKeyId { got: 2, want: 1 }]
    );
    let mut peer = BfdSession::new(cfg(0xb)).with_auth(key(true, b"s3cret"), 1);
    let out = deliver(&mut s, &sent(&peer.handle(BfdInput::Start)));
    assert_eq!(auth_failures(&out), vec![AuthError::WrongType]);
}

#[test]
fn packet_without_auth_is_discarded_when_auth_is_on_rfc5880_6_8_6() {
    let mut s = BfdSession::new(cfg(0xa)).with_auth(key(false, b"s3cret"), 1);
    s.handle(BfdInput::Start);
    let mut plain = BfdSession::new(cfg(0xb));
    let out = deliver(&mut s, &sent(&plain.handle(BfdInput::Start)));
    assert_eq!(auth_failures(&out), vec![AuthError::Missing]);
    assert_eq!(
        s.state(),
        BfdState::Down,
        "no Init from an unauthenticated Down"
    );
}

#[test]
fn packet_with_auth_is_discarded_when_auth_is_off_rfc5880_6_8_6() {
    let mut s = BfdSession::new(cfg(0xa));
    s.handle(BfdInput::Start);
    let mut signed = BfdSession::new(cfg(0xb)).with_auth(key(false, b"s3cret"), 1);
    let out = deliver(&mut s, &sent(&signed.handle(BfdInput::Start)));
    assert_eq!(auth_failures(&out), vec![AuthError::Unexpected]);
    assert_eq!(s.state(), BfdState::Down);
}

#[test]
fn replayed_or_old_sequence_is_discarded_rfc5880_6_7_4() {
    for meticulous in [false, true] {
        let (mut a, mut b) = handshake(key(meticulous, b"s3cret"), key(meticulous, b"s3cret"));
        assert_eq!(b.state(), BfdState::Up);
        let first = sent(&a.handle(BfdInput::TimerFired(BfdTimer::Transmit)));
        assert!(auth_failures(&deliver(&mut b, &first)).is_empty());
        // The same packet again: Meticulous refuses it (the sequence must rise), Keyed
        // accepts an equal number (§6.7.4).
        let replay = auth_failures(&deliver(&mut b, &first));
        if meticulous {
            assert!(
                matches!(replay.as_slice(), [AuthError::Sequence { .. }]),
                "{replay:?}"
            );
        } else {
            assert!(replay.is_empty(), "{replay:?}");
        }
        // An older number: refused by both.
        let mut old = first[0];
        let seq = old.auth.unwrap().sequence;
        old = auth::sign(
            ControlPacket { auth: None, ..old },
            &key(meticulous, b"s3cret"),
            seq.wrapping_sub(1),
        )
        .unwrap();
        assert!(matches!(
            auth_failures(&deliver(&mut b, &[old])).as_slice(),
            [AuthError::Sequence { .. }]
        ));
        // Past the 3 × Detect Mult window: refused by both, even with the right digest.
        let far = auth::sign(
            ControlPacket {
                auth: None,
                ..first[0]
            },
            &key(meticulous, b"s3cret"),
            seq.wrapping_add(3 * 3 + 1),
        )
        .unwrap();
        assert!(matches!(
            auth_failures(&deliver(&mut b, &[far])).as_slice(),
            [AuthError::Sequence { .. }]
        ));
        assert_eq!(b.state(), BfdState::Up, "discarded packets change nothing");
    }
}

#[test]
fn sequence_window_is_three_detect_mult_and_circular_rfc5880_6_7_4() {
    assert!(sequence_in_window(u32::MAX, u32::MAX - 1, true, 3));
    assert!(sequence_in_window(3, u32::MAX - 5, true, 3), "wraps");
    assert!(!sequence_in_window(4, u32::MAX - 5, true, 3));
    assert!(sequence_in_window(10, 10, false, 1));
    assert!(!sequence_in_window(10, 10, true, 1));
    assert!(sequence_in_window(13, 10, true, 1));
    assert!(!sequence_in_window(14, 10, true, 1));
}

#[test]
fn meticulous_sequence_rises_with_every_packet_keyed_follows_the_floor_rfc5880_6_7_4() {
    let mut m = BfdSession::new(cfg(0xa)).with_auth(key(true, b"k"), 100);
    let mut seqs = Vec::new();
    seqs.extend(sent(&m.handle(BfdInput::Start)));
    for _ in 0..3 {
        seqs.extend(sent(&m.handle(BfdInput::TimerFired(BfdTimer::Transmit))));
    }
    let seqs: Vec<u32> = seqs.iter().map(|p| p.auth.unwrap().sequence).collect();
    assert_eq!(seqs, vec![100, 101, 102, 103]);

    let mut k = BfdSession::new(cfg(0xa)).with_auth(key(false, b"k"), 100);
    let a = sent(&k.handle(BfdInput::Start));
    let b = sent(&k.handle(BfdInput::TimerFired(BfdTimer::Transmit)));
    k.handle(BfdInput::AuthSequenceFloor(105));
    let c = sent(&k.handle(BfdInput::TimerFired(BfdTimer::Transmit)));
    // A floor below the current number never takes it back.
    k.handle(BfdInput::AuthSequenceFloor(7));
    let d = sent(&k.handle(BfdInput::TimerFired(BfdTimer::Transmit)));
    let seqs: Vec<u32> = [a, b, c, d]
        .iter()
        .map(|p| p[0].auth.unwrap().sequence)
        .collect();
    assert_eq!(seqs, vec![100, 100, 105, 105]);
}

#[test]
fn sequence_is_forgotten_when_the_detection_time_expires_rfc5880_6_8_1() {
    let (mut a, mut b) = handshake(key(true, b"s3cret"), key(true, b"s3cret"));
    b.handle(BfdInput::TimerFired(BfdTimer::Detect));
    assert_eq!(b.state(), BfdState::Down);
    // `a` restarts its numbering far away: accepted, as AuthSeqKnown is 0 again.
    a.handle(BfdInput::AuthSequenceFloor(
        a.xmit_auth_seq().unwrap().wrapping_add(1_000),
    ));
    let p = sent(&a.handle(BfdInput::TimerFired(BfdTimer::Transmit)));
    assert!(auth_failures(&deliver(&mut b, &p)).is_empty());
}

#[test]
fn keys_longer_than_twenty_bytes_or_empty_are_refused_rfc5880_4_4() {
    assert!(BfdAuthKey::new(false, 0, &[1; 20]).is_ok());
    assert!(BfdAuthKey::new(false, 0, &[1; 21]).is_err());
    assert!(BfdAuthKey::new(false, 0, b"").is_err());
    assert!(!format!("{:?}", key(false, b"hunter2")).contains("hunter2"));
}

/// The fuzzer's hand-written SHA1 seeds are what their names say: they decode with their
/// section and re-encode to the same bytes.
#[test]
fn sha1_fuzz_seeds_decode_and_round_trip_rfc5880_4_4() {
    for (name, meticulous) in [
        ("auth-meticulous-sha1", true),
        ("auth-keyed-sha1-down", false),
    ] {
        let path = format!(
            "{}/../fuzz/seeds/bfd_packet/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap();
        let p = ControlPacket::decode(&bytes).unwrap();
        assert_eq!(p.auth.unwrap().meticulous, meticulous, "{name}");
        assert_eq!(&*p.encode().unwrap(), bytes.as_slice(), "{name}");
    }
}
