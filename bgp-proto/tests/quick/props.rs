//! Properties of the wire format: encode/decode round trips, no panics on any input, and
//! framing independent of how the byte stream is split.

use std::net::{Ipv4Addr, Ipv6Addr};

use bgp_proto::message::attribute::{AttrValue, Origin};
use bgp_proto::message::capability::{AddPathFamily, ExtendedNextHopEntry, LlgrFamily};
use bgp_proto::message::update::{MpReach, MpUnreach};
use bgp_proto::message::{Message, WireOptions, decode_message, decode_stream};
use bgp_proto::{
    AsPath, AsSegment, AsSegmentType, Asn, Capability, Family, Framer, GrFamily, GracefulRestart,
    HoldTime, MpNextHop, MpNlri, Notification, Open, PathAttribute, RouteRefresh, RouterId, Update,
    builder,
};
use bytes::BytesMut;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use proptest::prelude::*;

fn v4net() -> impl Strategy<Value = Ipv4Net> {
    (any::<u32>(), 0u8..=32).prop_map(|(a, l)| Ipv4Net::new(Ipv4Addr::from(a), l).unwrap().trunc())
}

fn v6net() -> impl Strategy<Value = Ipv6Net> {
    (any::<u128>(), 0u8..=128)
        .prop_map(|(a, l)| Ipv6Net::new(Ipv6Addr::from(a), l).unwrap().trunc())
}

fn family() -> impl Strategy<Value = Family> {
    prop_oneof![
        Just(Family::IPV4_UNICAST),
        Just(Family::IPV6_UNICAST),
        (any::<u16>(), any::<u8>()).prop_map(|(a, s)| Family::new(a, s)),
    ]
}

fn capability() -> impl Strategy<Value = Capability> {
    prop_oneof![
        (family(), any::<u8>())
            .prop_map(|(family, reserved)| Capability::Multiprotocol { family, reserved }),
        Just(Capability::RouteRefresh),
        Just(Capability::EnhancedRouteRefresh),
        Just(Capability::ExtendedMessage),
        // AS 0 is Bad Peer AS (RFC 7607 §2).
        (1u32..).prop_map(|a| Capability::FourOctetAs(Asn(a))),
        (
            0u8..16,
            0u16..4096,
            prop::collection::vec((family(), any::<u8>()), 0..4)
        )
            .prop_map(|(f, t, fams)| {
                Capability::GracefulRestart(GracefulRestart {
                    restart_flags: f,
                    restart_time: t,
                    families: fams
                        .into_iter()
                        .map(|(family, flags)| GrFamily { family, flags })
                        .collect(),
                })
            }),
        prop::collection::vec((family(), any::<u8>(), 0u32..=0x00ff_ffff), 0..4).prop_map(|v| {
            Capability::LongLivedGracefulRestart(
                v.into_iter()
                    .map(|(family, flags, stale_time)| LlgrFamily {
                        family,
                        flags,
                        stale_time,
                    })
                    .collect(),
            )
        }),
        prop::collection::vec((any::<u16>(), any::<u16>(), any::<u16>()), 0..4).prop_map(|v| {
            Capability::ExtendedNextHop(
                v.into_iter()
                    .map(|(a, s, n)| ExtendedNextHopEntry {
                        nlri_afi: a,
                        nlri_safi: s,
                        next_hop_afi: n,
                    })
                    .collect(),
            )
        }),
        prop::collection::vec((family(), any::<u8>()), 0..4).prop_map(|v| {
            Capability::AddPath(
                v.into_iter()
                    .map(|(family, send_receive)| AddPathFamily {
                        family,
                        send_receive,
                    })
                    .collect(),
            )
        }),
        (
            prop::collection::vec(any::<u8>(), 0..20),
            prop::collection::vec(any::<u8>(), 0..20)
        )
            .prop_map(|(hostname, domain)| Capability::Fqdn { hostname, domain }),
        Just(Capability::BfdStrictMode),
        // Codes the decoder does not interpret.
        (
            prop::sample::select(vec![0u8, 7, 9, 128, 200]),
            prop::collection::vec(any::<u8>(), 0..16)
        )
            .prop_map(|(code, value)| Capability::Unknown { code, value }),
    ]
}

fn open() -> impl Strategy<Value = Open> {
    (
        1u16..,
        prop_oneof![Just(0u16), 3u16..],
        1u32..,
        prop::collection::vec(prop::collection::vec(capability(), 0..4), 0..3),
        any::<bool>(),
    )
        .prop_map(|(my_as, hold, id, params, extended_params)| Open {
            version: 4,
            my_as,
            hold_time: HoldTime::new(hold).unwrap(),
            router_id: RouterId::new(Ipv4Addr::from(id)).unwrap(),
            params,
            extended_params,
        })
}

fn as_path(four_octet: bool) -> impl Strategy<Value = AsPath> {
    // AS 0 is malformed (RFC 7607 §2).
    let asn = if four_octet {
        (1u32..).boxed()
    } else {
        (1u32..=65535).boxed()
    };
    let kind = prop::sample::select(vec![
        AsSegmentType::Sequence,
        AsSegmentType::Set,
        AsSegmentType::ConfedSequence,
        AsSegmentType::ConfedSet,
    ]);
    prop::collection::vec((kind, prop::collection::vec(asn, 1..6)), 0..3).prop_map(|segs| AsPath {
        segments: segs
            .into_iter()
            .map(|(kind, asns)| AsSegment { kind, asns })
            .collect(),
    })
}

/// Optional attributes, each type at most once (duplicates are discarded on decode).
fn optional_attributes(four_octet: bool) -> impl Strategy<Value = Vec<PathAttribute>> {
    // AS 0 is malformed (RFC 7607 §2).
    let asn = if four_octet {
        (1u32..).boxed()
    } else {
        (1u32..=65535).boxed()
    };
    (
        prop::option::of(any::<u32>().prop_map(AttrValue::Med)),
        prop::option::of(any::<u32>().prop_map(AttrValue::LocalPref)),
        prop::option::of(Just(AttrValue::AtomicAggregate)),
        prop::option::of(
            (asn, any::<u32>()).prop_map(|(asn, a)| AttrValue::Aggregator {
                asn,
                address: a.into(),
            }),
        ),
        prop::option::of(
            prop::collection::vec(any::<u32>(), 1..8).prop_map(AttrValue::Communities),
        ),
        prop::option::of(any::<u32>().prop_map(|a| AttrValue::OriginatorId(a.into()))),
        prop::option::of(
            prop::collection::vec(any::<u32>().prop_map(Ipv4Addr::from), 1..4)
                .prop_map(AttrValue::ClusterList),
        ),
        prop::option::of(
            prop::collection::vec(any::<[u8; 8]>(), 1..6).prop_map(AttrValue::ExtendedCommunities),
        ),
        prop::option::of(
            as_path(true)
                .prop_filter("non-empty", |p| !p.segments.is_empty())
                .prop_map(AttrValue::As4Path),
        ),
        prop::option::of(
            (1u32.., any::<u32>()).prop_map(|(asn, a)| AttrValue::As4Aggregator {
                asn,
                address: a.into(),
            }),
        ),
        prop::option::of(
            prop::collection::vec(any::<[u32; 3]>(), 1..6).prop_map(AttrValue::LargeCommunities),
        ),
        prop::option::of(
            (
                prop::sample::select(vec![0xc0u8, 0xe0, 0x80, 0xd0]),
                100u8..=250,
                prop::collection::vec(any::<u8>(), 0..40),
            )
                .prop_map(|(flags, type_code, data)| PathAttribute {
                    flags,
                    value: AttrValue::Unknown { type_code, data },
                }),
        ),
    )
        .prop_map(move |(a, b, c, d, e, f, g, h, i, j, k, unknown)| {
            // RFC 6793 §3: AS4_PATH and AS4_AGGREGATOR only cross 2-octet sessions.
            let (i, j) = if four_octet { (None, None) } else { (i, j) };
            let mut out: Vec<PathAttribute> = [a, b, c, d, e, f, g, h, i, j, k]
                .into_iter()
                .flatten()
                .map(PathAttribute::new)
                .collect();
            out.extend(unknown);
            out
        })
}

fn mp_attribute() -> impl Strategy<Value = Option<AttrValue>> {
    let nh6 = (any::<u128>(), prop::option::of(any::<u128>())).prop_map(|(g, l)| MpNextHop::Ipv6 {
        global: g.into(),
        link_local: l.map(Into::into),
    });
    prop_oneof![
        Just(None),
        (nh6.clone(), prop::collection::vec(v6net(), 0..20)).prop_map(|(next_hop, n)| Some(
            AttrValue::MpReach(MpReach {
                family: Family::IPV6_UNICAST,
                next_hop,
                nlri: MpNlri::Ipv6(n),
            })
        )),
        (nh6, prop::collection::vec(v4net(), 0..20)).prop_map(|(next_hop, n)| Some(
            AttrValue::MpReach(MpReach {
                family: Family::IPV4_UNICAST,
                next_hop,
                nlri: MpNlri::Ipv4(n),
            })
        )),
        prop::collection::vec(v6net(), 0..20).prop_map(|n| Some(AttrValue::MpUnreach(MpUnreach {
            family: Family::IPV6_UNICAST,
            withdrawn: MpNlri::Ipv6(n),
        }))),
    ]
}

fn update(four_octet: bool) -> impl Strategy<Value = Update> {
    (
        prop::collection::vec(v4net(), 0..30),
        prop::collection::vec(v4net(), 0..30),
        prop::sample::select(vec![Origin::Igp, Origin::Egp, Origin::Incomplete]),
        as_path(four_octet),
        any::<u32>(),
        optional_attributes(four_octet),
        mp_attribute(),
    )
        .prop_map(|(withdrawn, nlri, origin, path, nh, optional, mp)| {
            let mut attributes = Vec::new();
            attributes.extend(mp.map(PathAttribute::new));
            attributes.push(PathAttribute::new(AttrValue::Origin(origin)));
            attributes.push(PathAttribute::new(AttrValue::AsPath(path)));
            attributes.push(PathAttribute::new(AttrValue::NextHop(nh.into())));
            attributes.extend(optional);
            Update {
                withdrawn,
                attributes,
                nlri,
            }
        })
}

fn notification() -> impl Strategy<Value = Notification> {
    (
        any::<u8>(),
        any::<u8>(),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(c, s, d)| Notification {
            code: c.into(),
            subcode: s,
            data: d.into(),
        })
}

fn message(four_octet: bool) -> impl Strategy<Value = Message> {
    prop_oneof![
        open().prop_map(Message::Open),
        update(four_octet).prop_map(Message::Update),
        notification().prop_map(Message::Notification),
        Just(Message::Keepalive),
        (family(), any::<u8>()).prop_map(|(f, s)| Message::RouteRefresh(RouteRefresh {
            family: f,
            subtype: s.into()
        })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decode_of_encode_is_identity_four_octet(m in message(true)) {
        let opts = WireOptions::four_octet();
        let bytes = m.to_bytes(&opts).unwrap();
        let d = decode_message(&bytes, &opts).unwrap();
        prop_assert!(d.errors.is_empty(), "{:?}", d.errors);
        prop_assert_eq!(d.length, bytes.len());
        prop_assert_eq!(d.message, m);
    }

    #[test]
    fn decode_of_encode_is_identity_two_octet(m in message(false)) {
        let opts = WireOptions::default();
        let bytes = m.to_bytes(&opts).unwrap();
        let d = decode_message(&bytes, &opts).unwrap();
        prop_assert!(d.errors.is_empty(), "{:?}", d.errors);
        prop_assert_eq!(d.message, m);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600), four in any::<bool>()) {
        let opts = WireOptions { four_octet_as: four, extended_message: false };
        let _ = decode_message(&bytes, &opts);
        let _ = decode_stream(&bytes, &opts);
    }

    /// Random bytes rarely get past the header; mutating valid messages reaches every decoder.
    #[test]
    fn mutated_messages_never_panic(m in message(true), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let opts = WireOptions::four_octet();
        let mut bytes = m.to_bytes(&opts).unwrap().to_vec();
        for (i, v) in flips {
            let i = i.index(bytes.len());
            bytes[i] = v;
        }
        // Keep the header consistent so the body decoders run.
        let len = u16::try_from(bytes.len()).unwrap().to_be_bytes();
        bytes[16] = len[0];
        bytes[17] = len[1];
        if let Ok(d) = decode_message(&bytes, &opts) {
            // Whatever decodes encodes again, to the same message.
            let again = d.message.to_bytes(&opts).unwrap();
            prop_assert_eq!(decode_message(&again, &opts).unwrap().message, d.message);
        }
    }

    #[test]
    fn codec_yields_the_same_messages_however_the_stream_is_split(
        msgs in prop::collection::vec(message(true), 1..6),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let opts = WireOptions::four_octet();
        let mut stream = BytesMut::new();
        for m in &msgs {
            m.encode(&opts, &mut stream).unwrap();
        }
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
        points.push(stream.len());
        points.sort_unstable();
        let mut codec = Framer::new(opts);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut from = 0;
        for to in points {
            buf.extend_from_slice(&stream[from..to]);
            from = to;
            while let Some(d) = codec.decode(&mut buf).unwrap() {
                out.push(d.message);
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(out, msgs);
    }

    #[test]
    fn packed_announcements_carry_every_prefix_within_the_size_limit(
        prefixes in prop::collection::vec(v4net(), 0..3000),
        v6 in prop::collection::vec(v6net(), 0..1000),
        extended in any::<bool>(),
    ) {
        let opts = WireOptions { four_octet_as: true, extended_message: extended };
        let attrs = vec![
            PathAttribute::new(AttrValue::Origin(Origin::Igp)),
            PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![65000]))),
        ];
        let mut seen_v4 = Vec::new();
        for u in builder::announce_ipv4(&attrs, Ipv4Addr::new(192, 0, 2, 1), &prefixes, &opts).unwrap() {
            prop_assert!(Message::Update(u.clone()).to_bytes(&opts).unwrap().len() <= opts.max_message_len());
            seen_v4.extend(u.nlri);
        }
        prop_assert_eq!(seen_v4, prefixes.clone());
        let v6nets: Vec<IpNet> = v6.iter().copied().map(IpNet::V6).collect();
        let nh = MpNextHop::Ipv6 { global: "2001:db8::1".parse().unwrap(), link_local: None };
        let mut seen_v6 = Vec::new();
        for u in builder::announce_mp(&attrs, Family::IPV6_UNICAST, &nh, &v6nets, &opts).unwrap() {
            prop_assert!(Message::Update(u.clone()).to_bytes(&opts).unwrap().len() <= opts.max_message_len());
            seen_v6.extend(u.announced());
        }
        prop_assert_eq!(seen_v6, v6nets.clone());
        let mut all: Vec<IpNet> = prefixes.iter().copied().map(IpNet::V4).collect();
        all.extend(v6nets);
        let mut withdrawn = Vec::new();
        for u in builder::withdraw(&all, &opts).unwrap() {
            prop_assert!(Message::Update(u.clone()).to_bytes(&opts).unwrap().len() <= opts.max_message_len());
            withdrawn.extend(u.withdrawn_prefixes());
        }
        prop_assert_eq!(withdrawn, all);
    }
}
