//! BFD Control packet codec: RFC 5880 §4.1 layout and every §6.8.6 reception check, one
//! table row per rule; proptest round-trip and "any bytes never panic".

use bgp_proto::bfd::{BfdState, ControlPacket, Diag, PacketEncodeError, PacketError, Sha1Auth};
use proptest::prelude::*;

fn packet() -> ControlPacket {
    ControlPacket {
        diag: Diag::None,
        state: BfdState::Up,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discriminator: 0x0102_0304,
        your_discriminator: 0x0a0b_0c0d,
        desired_min_tx: 100_000,
        required_min_rx: 100_000,
        required_min_echo_rx: 0,
        auth: None,
    }
}

#[test]
fn layout_matches_rfc5880_4_1() {
    let mut p = packet();
    p.diag = Diag::ControlDetectionTimeExpired;
    p.poll = true;
    let b = p.encode().unwrap();
    assert_eq!(b[0], 0x20 | 1, "version 1 in the top 3 bits, diag 1 below");
    assert_eq!(
        b[1],
        0xc0 | 0x20,
        "state Up (3) in the top 2 bits, P bit 0x20"
    );
    assert_eq!(b[2], 3, "detect mult");
    assert_eq!(b[3], 24, "length of the mandatory section");
    assert_eq!(&b[4..8], &[1, 2, 3, 4]);
    assert_eq!(&b[8..12], &[0x0a, 0x0b, 0x0c, 0x0d]);
    assert_eq!(&b[12..16], &100_000u32.to_be_bytes());
    assert_eq!(&b[16..20], &100_000u32.to_be_bytes());
    assert_eq!(&b[20..24], &[0, 0, 0, 0]);
}

#[test]
fn flag_bits_rfc5880_4_1() {
    for (set, bit) in [
        (
            (|p: &mut ControlPacket| p.poll = true) as fn(&mut ControlPacket),
            0x20u8,
        ),
        (|p| p.final_ = true, 0x10),
        (|p| p.control_plane_independent = true, 0x08),
        (|p| p.demand = true, 0x02),
    ] {
        let mut p = packet();
        p.state = BfdState::AdminDown;
        set(&mut p);
        let b = p.encode().unwrap();
        assert_eq!(b[1], bit);
        assert_eq!(ControlPacket::decode(&b).unwrap(), p);
    }
}

fn with(edit: impl Fn(&mut [u8])) -> Vec<u8> {
    let mut b = packet().encode().unwrap();
    edit(&mut b);
    b.to_vec()
}

#[test]
fn reception_checks_discard_per_rfc5880_6_8_6() {
    let rows: Vec<(&str, Vec<u8>, PacketError)> = vec![
        (
            "shorter than the mandatory section",
            packet().encode().unwrap()[..23].to_vec(),
            PacketError::LengthExceedsPayload {
                length: 24,
                payload: 23,
            },
        ),
        ("empty", vec![], PacketError::Truncated { len: 0 }),
        (
            "version is not 1",
            with(|b| b[0] = (2 << 5) | (b[0] & 0x1f)),
            PacketError::BadVersion { version: 2 },
        ),
        (
            "version 0",
            with(|b| b[0] &= 0x1f),
            PacketError::BadVersion { version: 0 },
        ),
        (
            "length below 24",
            with(|b| b[3] = 23),
            PacketError::LengthTooSmall {
                length: 23,
                min: 24,
            },
        ),
        (
            "length below 26 with the A bit",
            with(|b| {
                b[1] |= 0x04;
                b[3] = 25
            }),
            PacketError::LengthTooSmall {
                length: 25,
                min: 26,
            },
        ),
        (
            "length beyond the payload",
            with(|b| b[3] = 30),
            PacketError::LengthExceedsPayload {
                length: 30,
                payload: 24,
            },
        ),
        (
            "detect mult zero",
            with(|b| b[2] = 0),
            PacketError::ZeroDetectMult,
        ),
        (
            "multipoint bit",
            with(|b| b[1] |= 0x01),
            PacketError::Multipoint,
        ),
        (
            "my discriminator zero",
            with(|b| b[4..8].fill(0)),
            PacketError::ZeroMyDiscriminator,
        ),
        (
            "your discriminator zero while Up",
            with(|b| b[8..12].fill(0)),
            PacketError::ZeroYourDiscriminator {
                state: BfdState::Up,
            },
        ),
        (
            "your discriminator zero while Init",
            with(|b| {
                b[8..12].fill(0);
                b[1] = 0x80
            }),
            PacketError::ZeroYourDiscriminator {
                state: BfdState::Init,
            },
        ),
    ];
    for (rule, bytes, want) in rows {
        assert_eq!(ControlPacket::decode(&bytes), Err(want), "{rule}");
    }
}

#[test]
fn auth_types_other_than_sha1_are_discarded_rfc5880_6_8_6() {
    // A bit set, length 26 with 2 bytes of auth section (Simple Password, type 1).
    let mut b = with(|b| {
        b[1] |= 0x04;
        b[3] = 26
    });
    b.extend_from_slice(&[1, 2]);
    assert_eq!(
        ControlPacket::decode(&b),
        Err(PacketError::UnsupportedAuthType { auth_type: 1 })
    );
}

fn sha1_packet() -> ControlPacket {
    let mut p = packet();
    p.auth = Some(Sha1Auth {
        meticulous: true,
        key_id: 7,
        reserved: 0,
        sequence: 0x1122_3344,
        digest: [0xab; 20],
    });
    p
}

#[test]
fn sha1_auth_section_layout_rfc5880_4_4() {
    let b = sha1_packet().encode().unwrap();
    assert_eq!(b.len(), 52);
    assert_eq!(b[1] & 0x04, 0x04, "A bit");
    assert_eq!(b[3], 52, "Length covers the section");
    assert_eq!(
        &b[24..28],
        &[5, 28, 7, 0],
        "type 5, Auth Len 28, key ID, reserved"
    );
    assert_eq!(&b[28..32], &[0x11, 0x22, 0x33, 0x44], "sequence number");
    assert_eq!(&b[32..52], &[0xab; 20]);
    assert_eq!(ControlPacket::decode(&b), Ok(sha1_packet()));
    let mut keyed = sha1_packet();
    keyed.auth.as_mut().unwrap().meticulous = false;
    assert_eq!(keyed.encode().unwrap()[24], 4, "Keyed SHA1 is type 4");
}

#[test]
fn sha1_auth_len_other_than_28_is_discarded_rfc5880_6_8_6() {
    let good = sha1_packet().encode().unwrap().to_vec();
    let mut short = good.clone();
    short[25] = 24;
    assert_eq!(
        ControlPacket::decode(&short),
        Err(PacketError::AuthLength {
            auth_len: 24,
            length: 52
        })
    );
    // Length past the section: the digest would not cover the packet.
    let mut long = good.clone();
    long[3] = 53;
    long.push(0);
    assert_eq!(
        ControlPacket::decode(&long),
        Err(PacketError::AuthLength {
            auth_len: 28,
            length: 53
        })
    );
    // Cut inside the section.
    assert_eq!(
        ControlPacket::decode(&good[..40]),
        Err(PacketError::LengthExceedsPayload {
            length: 52,
            payload: 40
        })
    );
}

#[test]
fn zero_your_discriminator_accepted_in_down_and_admin_down_rfc5880_6_8_6() {
    for state in [BfdState::Down, BfdState::AdminDown] {
        let mut p = packet();
        p.state = state;
        p.your_discriminator = 0;
        assert_eq!(ControlPacket::decode(&p.encode().unwrap()), Ok(p));
    }
}

#[test]
fn trailing_bytes_beyond_length_are_ignored_rfc5880_6_8_6() {
    let mut b = packet().encode().unwrap().to_vec();
    b.extend_from_slice(&[0xff; 8]);
    assert_eq!(ControlPacket::decode(&b), Ok(packet()));
}

#[test]
fn encoder_refuses_what_a_receiver_must_discard() {
    let mut p = packet();
    p.detect_mult = 0;
    assert_eq!(p.encode(), Err(PacketEncodeError::ZeroDetectMult));
    let mut p = packet();
    p.my_discriminator = 0;
    assert_eq!(p.encode(), Err(PacketEncodeError::ZeroMyDiscriminator));
    // RFC 5880 §6.5: Poll and Final never together.
    let mut p = packet();
    p.poll = true;
    p.final_ = true;
    assert_eq!(p.encode(), Err(PacketEncodeError::PollAndFinal));
}

#[test]
fn reserved_diagnostics_round_trip() {
    for code in 0..32u8 {
        assert_eq!(Diag::from_code(code).code(), code);
    }
}

fn arb_packet() -> impl Strategy<Value = ControlPacket> {
    (
        (
            0u8..32,
            0u8..4,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        (
            1u8..=255,
            1u32..,
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
        ),
        proptest::option::of((
            any::<bool>(),
            any::<u8>(),
            any::<u8>(),
            any::<u32>(),
            any::<[u8; 20]>(),
        )),
    )
        .prop_map(
            |((diag, st, poll, fin, c, d), (mult, my, your, tx, rx, echo), auth)| {
                let state = [
                    BfdState::AdminDown,
                    BfdState::Down,
                    BfdState::Init,
                    BfdState::Up,
                ][st as usize];
                let your = if your == 0 && state >= BfdState::Init {
                    1
                } else {
                    your
                };
                ControlPacket {
                    diag: Diag::from_code(diag),
                    state,
                    poll: poll && !fin,
                    final_: fin,
                    control_plane_independent: c,
                    demand: d,
                    detect_mult: mult,
                    my_discriminator: my,
                    your_discriminator: your,
                    desired_min_tx: tx,
                    required_min_rx: rx,
                    required_min_echo_rx: echo,
                    auth: auth.map(
                        |(meticulous, key_id, reserved, sequence, digest)| Sha1Auth {
                            meticulous,
                            key_id,
                            reserved,
                            sequence,
                            digest,
                        },
                    ),
                }
            },
        )
}

proptest! {
    #[test]
    fn encode_then_decode_round_trips(p in arb_packet()) {
        prop_assert_eq!(ControlPacket::decode(&p.encode().unwrap()), Ok(p));
    }

    #[test]
    fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        let _ = ControlPacket::decode(&bytes);
    }

    #[test]
    fn any_decoded_packet_re_encodes_to_its_mandatory_section(
        bytes in proptest::collection::vec(any::<u8>(), 24..60)
    ) {
        if let Ok(p) = ControlPacket::decode(&bytes) {
            // Poll+Final together is decodable (we are liberal) but never encodable.
            if !(p.poll && p.final_) {
                let again = p.encode().unwrap();
                prop_assert_eq!(ControlPacket::decode(&again), Ok(p));
            }
        }
    }
}
