//! Properties of the session FSM and the Adj-RIB-Out planner over random inputs.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use bgp_proto::message::WireOptions;
use bgp_proto::message::capability::Capability;
use bgp_proto::message::{Decoded, Message};
use bgp_proto::session::{
    AdjRibOut, ExportContext, Input, OriginKind, Output, RouteAttributes, RouteSet, Session,
    SessionConfig, State, StopReason, Timer, rib_out,
};
use bgp_proto::{
    Asn, DecodeError, Family, HoldTime, Notification, Open, RouteRefresh, RouterId, Update,
};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use proptest::prelude::*;

fn recv(m: Message) -> Input {
    Input::Received(Decoded {
        message: m,
        length: 0,
        errors: Vec::new(),
    })
}

fn route_set() -> impl Strategy<Value = Arc<RouteSet>> {
    let prefix = prop_oneof![
        (any::<u32>(), 8u8..=32)
            .prop_map(|(a, l)| IpNet::V4(Ipv4Net::new(Ipv4Addr::from(a), l).unwrap().trunc())),
        (any::<u128>(), 16u8..=128)
            .prop_map(|(a, l)| IpNet::V6(Ipv6Net::new(Ipv6Addr::from(a), l).unwrap().trunc())),
    ];
    let attrs = (
        prop::sample::select(vec!["192.0.2.10", "192.0.2.11", "2001:db8::10"]),
        prop::option::of(0u32..3),
        prop::sample::select(vec![OriginKind::Igp, OriginKind::Incomplete]),
    )
        .prop_map(|(nh, med, origin)| {
            let mut a = RouteAttributes::with_next_hop(nh.parse::<IpAddr>().unwrap());
            a.med = med;
            a.origin = origin;
            Arc::new(a)
        });
    prop::collection::btree_map(prefix, attrs, 0..40)
        .prop_map(|m| Arc::new(m.into_iter().collect::<RouteSet>()))
}

fn input() -> impl Strategy<Value = Input> {
    let open = (
        prop::sample::select(vec![0u16, 3, 90]),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(hold, v6, good_as)| {
            let mut caps = vec![
                Capability::multiprotocol(Family::IPV4_UNICAST),
                Capability::RouteRefresh,
            ];
            if v6 {
                caps.push(Capability::multiprotocol(Family::IPV6_UNICAST));
            }
            let asn = if good_as { Asn(65000) } else { Asn(65001) };
            let id = RouterId::new(Ipv4Addr::new(192, 0, 2, 1)).unwrap();
            recv(Message::Open(Open::new(
                asn,
                HoldTime::new(hold).unwrap(),
                id,
                caps,
            )))
        });
    prop_oneof![
        Just(Input::Start),
        prop::sample::select(vec![
            StopReason::Shutdown("bye".into()),
            StopReason::Deconfigured,
            StopReason::GracefulRestart
        ])
        .prop_map(Input::Stop),
        prop::sample::select(vec![
            Timer::ConnectRetry,
            Timer::Hold,
            Timer::Keepalive,
            Timer::SendHold
        ])
        .prop_map(Input::TimerFired),
        Just(Input::TcpConnected),
        Just(Input::TcpFailed("reset".into())),
        open.clone(),
        open,
        Just(recv(Message::Keepalive)),
        Just(recv(Message::Keepalive)),
        Just(recv(Message::Update(Update::default()))),
        Just(recv(Message::Notification(Notification::new(6, 2)))),
        Just(recv(Message::RouteRefresh(RouteRefresh::new(
            Family::IPV4_UNICAST
        )))),
        Just(Input::DecodeFailed(DecodeError::MalformedAttributeList {
            reason: "x"
        })),
        route_set().prop_map(Input::SetRoutes),
        Just(Input::SendQueueDrained),
        (1u64..5, 5u64..60).prop_map(|(base, max)| Input::SetConnectRetry {
            base: std::time::Duration::from_secs(base),
            max: std::time::Duration::from_secs(max),
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Never panics; Established only after OPEN then KEEPALIVE on the current connection;
    /// the hold timer is armed after OPEN iff the negotiated hold time is non-zero; nothing is
    /// sent without a connection; no UPDATE (not even End-of-RIB) before the first route set;
    /// the Adj-RIB-Out matches what UPDATEs said.
    #[test]
    fn session_invariants_hold_for_any_input_sequence(
        inputs in prop::collection::vec(input(), 1..60),
        passive in any::<bool>(),
    ) {
        let cfg = SessionConfig {
            passive,
            ..SessionConfig::new(Asn(4_200_000_001), RouterId::new(Ipv4Addr::new(192, 0, 2, 10)).unwrap(), Asn(65000))
        };
        let mut s = Session::new(cfg);
        let mut connected = false;
        let mut open_seen = false;
        let mut keepalive_after_open = false;
        let mut routes_known = false;
        for input in inputs {
            routes_known |= matches!(input, Input::SetRoutes(_));
            let before = s.state();
            match &input {
                Input::TcpConnected if matches!(before, State::Connect | State::Active) => {
                    connected = true;
                    open_seen = false;
                    keepalive_after_open = false;
                }
                Input::Received(d) if connected => match d.message {
                    Message::Open(_) if before == State::OpenSent => open_seen = true,
                    Message::Keepalive if open_seen && before == State::OpenConfirm => keepalive_after_open = true,
                    _ => {}
                },
                _ => {}
            }
            let out = s.handle(input);
            for o in &out {
                match o {
                    Output::Send(m) => {
                        prop_assert!(connected, "sent without a connection: {out:?}");
                        prop_assert!(routes_known || !matches!(m, Message::Update(_)), "UPDATE before routes: {out:?}");
                    }
                    Output::Disconnect => connected = false,
                    Output::ArmTimer(Timer::Hold, d) if s.negotiated().is_some() => {
                        prop_assert!(!s.negotiated().unwrap().hold_time.is_disabled());
                        prop_assert_eq!(d.as_secs(), u64::from(s.negotiated().unwrap().hold_time.seconds()));
                    }
                    Output::ArmTimer(Timer::Keepalive, d) => {
                        let neg = s.negotiated().unwrap();
                        prop_assert!(!neg.hold_time.is_disabled());
                        prop_assert!(d.as_secs() * 3 <= u64::from(neg.hold_time.seconds()));
                    }
                    _ => {}
                }
            }
            if s.state() == State::Established {
                prop_assert!(open_seen && keepalive_after_open);
            } else {
                prop_assert!(s.adj_rib_out().is_empty());
            }
            if s.state() >= State::OpenSent {
                prop_assert!(connected);
            }
        }
    }

    /// Applying the plan's UPDATEs to what was advertised yields exactly the sendable part of
    /// the desired set; every UPDATE fits; no prefix is both withdrawn and announced.
    #[test]
    fn applying_the_plan_yields_the_desired_set(
        before in route_set(),
        after in route_set(),
        v6 in any::<bool>(),
        ibgp in any::<bool>(),
    ) {
        let mut families = vec![Family::IPV4_UNICAST];
        if v6 {
            families.push(Family::IPV6_UNICAST);
        }
        let ctx = ExportContext {
            local_asn: Asn(4_200_000_001),
            ibgp,
            families,
            extended_next_hop_ipv4: false,
            link_local_next_hop: None,
            wire: WireOptions::four_octet(),
        };
        let mut rib = AdjRibOut::default();
        let first = rib.plan(&before, &ctx);
        rib.apply(&first);
        let mut on_wire: std::collections::BTreeMap<IpNet, Option<IpAddr>> = rib
            .advertised()
            .map(|(p, a)| (*p, Some(a.next_hop)))
            .collect();
        let plan = rib.plan(&after, &ctx);
        let updates = rib_out::plan_updates(&plan, &ctx).unwrap();
        for u in &updates {
            let len = Message::Update(u.clone()).to_bytes(&ctx.wire).unwrap().len();
            prop_assert!(len <= 4096);
            let withdrawn = u.withdrawn_prefixes();
            for p in &withdrawn {
                prop_assert!(!u.announced().contains(p));
                on_wire.remove(p);
            }
            let nh = u.next_hop().map(IpAddr::V4).or_else(|| u.mp_reach().and_then(|m| m.next_hop.primary()));
            for p in u.announced() {
                on_wire.insert(p, nh);
            }
        }
        rib.apply(&plan);
        let expected: std::collections::BTreeMap<IpNet, Option<IpAddr>> = after
            .iter()
            .filter(|(p, a)| rib_out::check_route(p, a, &ctx).is_ok())
            .map(|(p, a)| (*p, Some(a.next_hop)))
            .collect();
        prop_assert_eq!(&on_wire, &expected);
        let recorded: std::collections::BTreeMap<IpNet, Option<IpAddr>> =
            rib.advertised().map(|(p, a)| (*p, Some(a.next_hop))).collect();
        prop_assert_eq!(recorded, expected);
        prop_assert!(rib.plan(&after, &ctx).is_empty(), "a second plan is empty");
    }
}
