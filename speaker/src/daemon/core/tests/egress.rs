//! `egress.followSessions`: the node's default route follows its sessions. A peer down takes
//! its next hop out of the node's egress (a route of ours beside the default route), the last
//! one never goes, all down is the original route, and a restart adopts what the previous
//! process left.

use std::time::Duration;

use bgp_proto::bfd::{BfdEvent, BfdState, Diag};
use bgp_proto::session::{SessionEvent, State};

use super::*;
use crate::daemon::core::egress::{EgressRoutes, NextHop, SETTLE};
use crate::daemon::core::gateways::{DefaultRoutes, Gateway};
use crate::daemon::core::kernel::KernelFacts;

const TORS: &str = "peers:\n  - {name: tor-a, address: 198.18.1.1, asn: 65001, bfd: {}}\n  \
                    - {name: tor-b, address: 198.18.2.1, asn: 65002, bfd: {}}\n  \
                    - {name: tor-a6, address: \"2001:db8:1::1\", asn: 65001}\n";
const ON: &str = "egress: {followSessions: true}";

fn gw(via: &str, dev: &str, metric: u32) -> Gateway {
    Gateway {
        via: via.parse().unwrap(),
        dev: dev.into(),
        metric,
    }
}

fn hop(via: &str, dev: &str) -> NextHop {
    NextHop {
        via: via.parse().unwrap(),
        dev: dev.into(),
    }
}

/// An ECMP default route through both ToRs (metric 0, as `ip route add default` makes it),
/// and an IPv6 one through ToR A and a router no peer is at.
fn ecmp() -> DefaultRoutes {
    DefaultRoutes {
        ipv4: vec![gw("198.18.1.1", "eth0", 0), gw("198.18.2.1", "eth1", 0)],
        ipv6: vec![
            gw("2001:db8:1::1", "eth0", 1024),
            gw("2001:db8:9::1", "eth1", 1024),
        ],
    }
}

fn core_with(extra: &str, routes: DefaultRoutes, ours: EgressRoutes) -> Core {
    let c = config(extra, TORS);
    let mut facts = super::kernel_facts(&c, routes, lookup);
    facts.egress = ours;
    let mut core = Core::new(c, "node-a".into(), false, facts);
    core.start();
    core.handle(ready(&[]));
    core
}

fn bgp(core: &mut Core, peer: &str, up: bool) -> Vec<Effect> {
    let (from, to) = if up {
        (State::OpenConfirm, State::Established)
    } else {
        (State::Established, State::Idle)
    };
    core.handle(Event::Session(
        peer.into(),
        SessionEvent::StateChanged {
            from,
            to,
            reason: None,
        },
    ))
}

fn bfd(core: &mut Core, peer: &str, from: BfdState, to: BfdState) -> Vec<Effect> {
    core.handle(Event::Session(
        peer.into(),
        SessionEvent::Bfd(BfdEvent::StateChanged {
            from,
            to,
            diag: Diag::ControlDetectionTimeExpired,
            remote_state: BfdState::Down,
        }),
    ))
}

/// The routes of ours asked for in `out` (`None`: nothing asked).
fn asked(out: &[Effect]) -> Option<&EgressRoutes> {
    out.iter()
        .filter_map(|e| match e {
            Effect::SetEgress(r) => Some(r),
            _ => None,
        })
        .last()
}

fn v4(hops: &[NextHop]) -> EgressRoutes {
    EgressRoutes {
        ipv4: hops.to_vec(),
        ipv6: Vec::new(),
    }
}

fn all_up(core: &mut Core) {
    for p in ["tor-a", "tor-b", "tor-a6"] {
        bgp(core, p, true);
    }
}

#[test]
fn a_peer_down_removes_its_next_hop_from_the_node_egress() {
    let mut core = core_with(ON, ecmp(), EgressRoutes::default());
    all_up(&mut core);
    // BFD fails: the next hop goes at once, before BGP is reset.
    let out = bfd(&mut core, "tor-a", BfdState::Up, BfdState::Down);
    assert_eq!(asked(&out), Some(&v4(&[hop("198.18.2.1", "eth1")])));
    let withdrawn = out.iter().find_map(|e| match e {
        Effect::Notice(Notice::Egress(d)) => Some(d.withdrawn.clone()),
        _ => None,
    });
    assert_eq!(withdrawn, Some(vec![hop("198.18.1.1", "eth0")]));
    // BGP going down then says nothing new.
    assert_eq!(asked(&bgp(&mut core, "tor-a", false)), None);
    // IPv6: its peer at ToR A goes; the router no peer is at stays.
    let out = bgp(&mut core, "tor-a6", false);
    assert_eq!(
        asked(&out).map(|r| r.ipv6.clone()),
        Some(vec![hop("2001:db8:9::1", "eth1")])
    );
}

#[test]
fn the_last_next_hop_is_never_removed() {
    // One default route through ToR A only: its peer down leaves it as it is.
    let one = DefaultRoutes {
        ipv4: vec![gw("198.18.1.1", "eth0", 100)],
        ipv6: Vec::new(),
    };
    let mut core = core_with(ON, one, EgressRoutes::default());
    all_up(&mut core);
    let out = bfd(&mut core, "tor-a", BfdState::Up, BfdState::Down);
    assert_eq!(asked(&out), None, "{out:?}");
}

#[test]
fn all_peers_down_gives_the_original_route_back() {
    let mut core = core_with(ON, ecmp(), EgressRoutes::default());
    all_up(&mut core);
    bfd(&mut core, "tor-a", BfdState::Up, BfdState::Down);
    let out = bfd(&mut core, "tor-b", BfdState::Up, BfdState::Down);
    assert_eq!(
        asked(&out).map(|r| r.ipv4.clone()),
        Some(Vec::new()),
        "no route of ours: the default route as it is"
    );
}

#[test]
fn a_peer_back_up_restores_its_next_hop() {
    let mut core = core_with(ON, ecmp(), EgressRoutes::default());
    all_up(&mut core);
    bfd(&mut core, "tor-a", BfdState::Up, BfdState::Down);
    bgp(&mut core, "tor-a", false);
    // BFD Up alone is not enough while BGP is down.
    assert_eq!(
        asked(&bfd(&mut core, "tor-a", BfdState::Init, BfdState::Up)),
        None
    );
    let out = bgp(&mut core, "tor-a", true);
    assert_eq!(asked(&out), Some(&EgressRoutes::default()));
}

#[test]
fn a_down_next_hop_falls_back_to_the_next_metric() {
    // Active/standby default routes: A at metric 0 (nothing below it), B at 200.
    let routes = DefaultRoutes {
        ipv4: vec![gw("198.18.1.1", "eth0", 0), gw("198.18.2.1", "eth1", 200)],
        ipv6: Vec::new(),
    };
    let mut core = core_with(ON, routes, EgressRoutes::default());
    all_up(&mut core);
    let out = bgp(&mut core, "tor-a", false);
    assert_eq!(asked(&out), Some(&v4(&[hop("198.18.2.1", "eth1")])));
    // B down too: the original again.
    let out = bgp(&mut core, "tor-b", false);
    assert_eq!(asked(&out), Some(&EgressRoutes::default()));
}

#[test]
fn a_restart_adopts_the_route_the_previous_process_left() {
    let left = v4(&[hop("198.18.2.1", "eth1")]);
    let mut core = core_with(ON, ecmp(), left.clone());
    // No session has said anything: the route stays as it was left (nothing asked).
    let out = core.handle(Event::Tick {
        now: Duration::from_secs(1),
        unix: 1,
        statuses: Default::default(),
    });
    assert_eq!(asked(&out), None, "{out:?}");
    // ToR B comes back first: A is still as it was left (out).
    assert_eq!(asked(&bgp(&mut core, "tor-b", true)), None);
    assert_eq!(asked(&bgp(&mut core, "tor-a6", true)), None);
    // A never comes up: after SETTLE it counts as down, which is what the route says.
    let out = core.handle(Event::Tick {
        now: SETTLE,
        unix: 2,
        statuses: Default::default(),
    });
    assert_eq!(asked(&out), None, "{out:?}");
    // A comes back: the original route.
    assert_eq!(
        asked(&bgp(&mut core, "tor-a", true)),
        Some(&EgressRoutes::default())
    );
}

#[test]
fn a_restart_without_adoption_counts_silent_peers_as_live_until_settled() {
    let mut core = core_with(ON, ecmp(), EgressRoutes::default());
    bgp(&mut core, "tor-a", true);
    bgp(&mut core, "tor-a6", true);
    // B has not connected yet: still used.
    let out = core.handle(Event::Tick {
        now: Duration::from_secs(1),
        unix: 1,
        statuses: Default::default(),
    });
    assert_eq!(asked(&out), None);
    let out = core.handle(Event::Tick {
        now: SETTLE,
        unix: 2,
        statuses: Default::default(),
    });
    assert_eq!(asked(&out), Some(&v4(&[hop("198.18.1.1", "eth0")])));
}

#[test]
fn egress_off_never_writes_and_removes_what_a_previous_process_left() {
    let mut core = core_with("", ecmp(), EgressRoutes::default());
    all_up(&mut core);
    assert_eq!(
        asked(&bfd(&mut core, "tor-a", BfdState::Up, BfdState::Down)),
        None
    );
    // Started with egress off over a route of ours: it goes.
    let c = config("", TORS);
    let facts = KernelFacts {
        egress: v4(&[hop("198.18.2.1", "eth1")]),
        ..super::kernel_facts(&c, ecmp(), lookup)
    };
    let mut core = Core::new(c, "node-a".into(), false, facts);
    let mut out = core.start();
    out.extend(core.handle(ready(&[])));
    assert_eq!(asked(&out), Some(&EgressRoutes::default()));
}

#[test]
fn a_route_of_ours_deleted_by_hand_is_written_again() {
    let mut core = core_with(ON, ecmp(), EgressRoutes::default());
    all_up(&mut core);
    bfd(&mut core, "tor-a", BfdState::Up, BfdState::Down);
    let c = config(ON, TORS);
    let facts = super::kernel_facts(&c, ecmp(), lookup);
    let out = core.handle(Event::Kernel(facts));
    assert_eq!(asked(&out), Some(&v4(&[hop("198.18.2.1", "eth1")])));
}

#[test]
fn a_departure_removes_the_route_of_ours_and_a_restart_keeps_it() {
    for (forced, removed) in [(true, true), (false, false)] {
        let mut core = core_with(ON, ecmp(), EgressRoutes::default());
        all_up(&mut core);
        bfd(&mut core, "tor-a", BfdState::Up, BfdState::Down);
        let mut out = core.handle(Event::Shutdown { final_stop: forced });
        // A departure waits with GRACEFUL_SHUTDOWN first (RFC 8326), sessions and the
        // route still up; the second call is its end.
        out.extend(core.handle(Event::Shutdown { final_stop: forced }));
        assert_eq!(
            asked(&out) == Some(&EgressRoutes::default()),
            removed,
            "forced {forced}: {out:?}"
        );
    }
}
