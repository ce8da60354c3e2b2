//! Helpers shared by the FSM table tests: a peer's OPEN, driving a session to a state, and
//! picking messages and timers out of outputs.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::message::capability::Capability;
use bgp_proto::message::{Decoded, Message};
use bgp_proto::session::{
    Input, Output, RouteAttributes, RouteSet, Session, SessionConfig, State, Timer,
};
use bgp_proto::{Asn, Family, HoldTime, Open, RouterId, Update};
use ipnet::IpNet;

pub const LOCAL: Asn = Asn(4_200_000_001);
pub const PEER: Asn = Asn(65000);

pub fn rid(a: u8) -> RouterId {
    RouterId::new(Ipv4Addr::new(192, 0, 2, a)).unwrap()
}

pub fn cfg() -> SessionConfig {
    SessionConfig::new(LOCAL, rid(10), PEER)
}

pub fn peer_open(asn: Asn, hold: u16, caps: Vec<Capability>) -> Open {
    Open::new(asn, HoldTime::new(hold).unwrap(), rid(1), caps)
}

pub fn both_families() -> Vec<Capability> {
    vec![
        Capability::multiprotocol(Family::IPV4_UNICAST),
        Capability::multiprotocol(Family::IPV6_UNICAST),
        Capability::RouteRefresh,
    ]
}

pub fn recv(m: Message) -> Input {
    Input::Received(Decoded {
        message: m,
        length: 0,
        errors: Vec::new(),
    })
}

pub fn state_changes(out: &[Output]) -> Vec<State> {
    out.iter()
        .filter_map(|o| match o {
            Output::StateChanged { to, .. } => Some(*to),
            _ => None,
        })
        .collect()
}

pub fn sent(out: &[Output]) -> Vec<&Message> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send(m) => Some(m),
            _ => None,
        })
        .collect()
}

pub fn sent_notification(out: &[Output]) -> Option<(u8, u8)> {
    sent(out).into_iter().find_map(|m| match m {
        Message::Notification(n) => Some((u8::from(n.code), n.subcode)),
        _ => None,
    })
}

pub fn armed(out: &[Output], t: Timer) -> Option<Duration> {
    out.iter().rev().find_map(|o| match o {
        Output::ArmTimer(x, d) if *x == t => Some(*d),
        _ => None,
    })
}

pub fn updates(out: &[Output]) -> Vec<Update> {
    sent(out)
        .into_iter()
        .filter_map(|m| match m {
            Message::Update(u) => Some(u.clone()),
            _ => None,
        })
        .collect()
}

pub fn to_open_sent(s: &mut Session) {
    s.handle(Input::Start);
    s.handle(Input::TcpConnected);
    assert_eq!(s.state(), State::OpenSent);
}

pub fn to_open_confirm(s: &mut Session, open: Open) -> Vec<Output> {
    to_open_sent(s);
    let out = s.handle(recv(Message::Open(open)));
    assert_eq!(s.state(), State::OpenConfirm, "{out:?}");
    out
}

pub fn to_established(s: &mut Session, open: Open) -> Vec<Output> {
    to_open_confirm(s, open);
    let out = s.handle(recv(Message::Keepalive));
    assert_eq!(s.state(), State::Established);
    out
}

pub fn routes(items: &[(&str, &str)]) -> Arc<RouteSet> {
    Arc::new(
        items
            .iter()
            .map(|(p, nh)| {
                let p: IpNet = p.parse().unwrap();
                let nh: IpAddr = nh.parse().unwrap();
                (p, Arc::new(RouteAttributes::with_next_hop(nh)))
            })
            .collect(),
    )
}
