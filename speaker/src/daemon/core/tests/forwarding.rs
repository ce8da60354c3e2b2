//! The forwarding gate in the core: what peers are offered follows the routing table and
//! the conflist, and the report, the metric and the log say what is held and why.

use super::*;
use crate::daemon::core::forwarding::{HoldReason, KernelRoute, RouteKind, RouteTable};

const GATE_CNI: &str = "forwardingGate: {enabled: true}\ncni: {enabled: true, confDir: /host/cni}";

/// The kernel of these tests with `routes` (on `podcidr0`) besides the uplink's.
fn kernel_with(c: &Config, routes: &[&str]) -> Event {
    let mut facts = kernel_facts(c, Default::default(), lookup);
    let mut table = vec![KernelRoute {
        dst: net("0.0.0.0/0"),
        kind: RouteKind::Unicast,
        dev: Some("eth0".into()),
        via: Some("192.0.2.1".parse().unwrap()),
    }];
    table.extend(routes.iter().map(|r| KernelRoute {
        dst: net(r),
        kind: RouteKind::Unicast,
        dev: Some("podcidr0".into()),
        via: None,
    }));
    facts.routes = RouteTable::new(table);
    Event::Kernel(facts)
}

fn routes_of(out: &[Effect], peer: &str) -> Option<Vec<IpNet>> {
    out.iter().find_map(|e| match e {
        Effect::SetRoutes { name, routes } if name == peer => {
            Some(routes.iter().map(|(p, _)| *p).collect())
        }
        _ => None,
    })
}

fn held_notices(out: &[Effect]) -> Vec<(IpNet, HoldReason)> {
    out.iter()
        .filter_map(|e| match e {
            Effect::Notice(Notice::ForwardingHeld { cidr, reason, .. }) => Some((*cidr, *reason)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_cidr_is_announced_only_once_its_conflist_is_written_and_its_route_is_there_and_withdrawn_when_the_route_goes()
 {
    let c = config(GATE_CNI, PEERS);
    let (mut core, _) = file_core(c.clone());
    let out = core.handle(ready(&["198.19.1.0/24", "fd00:19:1::/64"]));
    assert_eq!(
        routes_of(&out, "tor1"),
        None,
        "nothing offered yet: {out:?}"
    );
    // The conflist is planned from the guarded set, not the gated one (no deadlock).
    let file = cni_writes(&out)[0].clone();
    let out = core.handle(Event::CniWritten {
        file,
        result: Ok(true),
    });
    assert_eq!(
        held_notices(&out),
        [
            (net("198.19.1.0/24"), HoldReason::NoRoute),
            (net("fd00:19:1::/64"), HoldReason::NoRoute)
        ]
    );
    assert_eq!(
        routes_of(&out, "tor1"),
        None,
        "still the empty set of the first pass"
    );
    // The bridge gets its IPv4 address (the first pod): that CIDR goes out, alone.
    let out = core.handle(kernel_with(&c, &["198.19.1.0/24"]));
    assert_eq!(routes_of(&out, "tor1"), Some(vec![net("198.19.1.0/24")]));
    assert!(out.contains(&Effect::Notice(Notice::ForwardingReleased {
        cidr: net("198.19.1.0/24"),
        enforced: true,
    })));
    let counts = out.iter().find_map(|e| match e {
        Effect::Notice(Notice::HeldNow {
            counts,
            enforced: true,
        }) => Some(**counts),
        _ => None,
    });
    let counts = counts.expect("the gauge follows");
    assert!(counts.contains(&("ipv4", "no-route", 0)));
    assert!(counts.contains(&("ipv6", "no-route", 1)));
    let r = core.report_inputs().render(0);
    assert_eq!(r.announced, ["198.19.1.0/24"]);
    assert_eq!(r.held.len(), 1);
    assert_eq!(
        (r.held[0].cidr.as_str(), r.held[0].reason.as_str()),
        ("fd00:19:1::/64", "no-route")
    );
    let cond = r
        .conditions
        .iter()
        .find(|c| c.type_ == "ForwardingHeld")
        .expect("the condition");
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("True", "CidrsHeld")
    );
    assert_eq!(cond.message, "fd00:19:1::/64 (no-route)");
    // The same table again changes nothing; the route gone withdraws the CIDR once the
    // withdraw hold-down (10 s by default) is over.
    assert_eq!(
        routes_of(&core.handle(kernel_with(&c, &["198.19.1.0/24"])), "tor1"),
        None
    );
    let out = core.handle(kernel_with(&c, &[]));
    assert_eq!(routes_of(&out, "tor1"), None, "hold-down: {out:?}");
    tick(&mut core, 1);
    let out = tick(&mut core, 11);
    assert_eq!(routes_of(&out, "tor1"), Some(vec![]));
    assert_eq!(
        held_notices(&out),
        [(net("198.19.1.0/24"), HoldReason::NoRoute)]
    );
    assert!(resets(&out).is_empty() && stops(&out).is_empty());
}

#[test]
fn a_cidr_whose_conflist_write_failed_is_held_cni_not_written() {
    let c = config(GATE_CNI, PEERS);
    let (mut core, _) = file_core(c.clone());
    core.handle(kernel_with(&c, &["198.19.1.0/24"]));
    let out = core.handle(ready(&["198.19.1.0/24"]));
    let file = cni_writes(&out)[0].clone();
    let out = core.handle(Event::CniWritten {
        file: file.clone(),
        result: Err(errors::Shared::new(errors::CniWriteError::NoDir {
            dir: "/host/cni".into(),
        })),
    });
    assert_eq!(
        held_notices(&out),
        [(net("198.19.1.0/24"), HoldReason::CniNotWritten)]
    );
    assert_eq!(
        routes_of(&out, "tor1"),
        None,
        "still the empty set of the first pass"
    );
    // The retry (10 s later) succeeds: announced.
    assert!(cni_writes(&tick(&mut core, 5)).is_empty());
    let retry = cni_writes(&tick(&mut core, 11))[0].clone();
    assert_eq!(retry, file);
    let out = core.handle(Event::CniWritten {
        file: retry,
        result: Ok(true),
    });
    assert_eq!(routes_of(&out, "tor1"), Some(vec![net("198.19.1.0/24")]));
}

/// A restart with the gate and `cni` on: until the first conflist write finishes the routes
/// are not known, so a graceful-restart session waits instead of opening with an empty table
/// (its End-of-RIB would make the router drop every stale route).
#[test]
fn restarted_speaker_waits_for_the_first_conflist_write_before_opening_graceful_restart_sessions_rfc4724_4_2()
 {
    let c = config(GATE_CNI, PEERS);
    let mut core = Core::with_lookup(c.clone(), "node-a".into(), false, lookup);
    core.start();
    core.handle(kernel_with(&c, &["198.19.1.0/24"]));
    let out = core.handle(ready(&["198.19.1.0/24"]));
    assert!(starts(&out).is_empty(), "held: {out:?}");
    assert!(held_notices(&out).is_empty(), "nothing decided yet");
    let file = cni_writes(&out)[0].clone();
    let out = core.handle(Event::CniWritten {
        file,
        result: Ok(false),
    });
    let s = starts(&out);
    assert_eq!(s.len(), 2, "{out:?}");
    assert!(
        s.iter()
            .all(|s| s.restarting && s.routes.as_ref().map(|r| r.len()) == Some(1))
    );
}

#[test]
fn with_the_gate_off_there_is_no_condition_and_nothing_is_held() {
    let (mut core, _) = file_core(config("", PEERS));
    let out = core.handle(ready(&["198.19.1.0/24"]));
    assert_eq!(routes_of(&out, "tor1"), Some(vec![net("198.19.1.0/24")]));
    let r = core.report_inputs().render(0);
    assert!(r.held.is_empty());
    assert!(!r.conditions.iter().any(|c| c.type_ == "ForwardingHeld"));
}

#[test]
fn turning_the_gate_on_by_reload_withdraws_what_cannot_be_forwarded_after_the_hold_down_without_a_reset()
 {
    let (mut core, _) = file_core(config("", PEERS));
    core.handle(ready(&["198.19.1.0/24", "198.19.2.0/24"]));
    let c = config("forwardingGate: {enabled: true}", PEERS);
    let mut ev = reload(c.clone());
    if let (Event::ConfigReloaded { kernel, .. }, Event::Kernel(k)) =
        (&mut ev, kernel_with(&c, &["198.19.2.0/24"]))
    {
        *kernel = k;
    }
    let out = core.handle(ev);
    assert_eq!(
        routes_of(&out, "tor1"),
        None,
        "announced: the hold-down runs"
    );
    tick(&mut core, 1);
    let out = tick(&mut core, 11);
    assert_eq!(routes_of(&out, "tor1"), Some(vec![net("198.19.2.0/24")]));
    assert!(resets(&out).is_empty(), "{out:?}");
    let out = core.handle(reload(config("", PEERS)));
    assert_eq!(
        routes_of(&out, "tor1").map(|r| r.len()),
        Some(2),
        "off again: everything guarded"
    );
}

#[test]
fn an_unreadable_routing_table_keeps_the_last_decision_instead_of_withdrawing() {
    let c = config("forwardingGate: {enabled: true}", PEERS);
    let (mut core, _) = file_core(c.clone());
    core.handle(kernel_with(&c, &["198.19.1.0/24"]));
    let out = core.handle(ready(&["198.19.1.0/24"]));
    assert_eq!(routes_of(&out, "tor1"), Some(vec![net("198.19.1.0/24")]));
    let mut unread = kernel_facts(&c, Default::default(), lookup);
    unread.routes_unread = true;
    let out = core.handle(Event::Kernel(unread));
    assert_eq!(routes_of(&out, "tor1"), None, "{out:?}");
    assert!(held_notices(&out).is_empty());
}

/// Review 2 F8 (`mode: report`): a gate enabled on a CNI whose routes it cannot see must not
/// withdraw anything. It decides as an enforcing gate would, says so (gauge, condition,
/// `wouldHold`, log) and announces everything.
#[test]
fn report_mode_announces_what_it_would_hold_and_reports_it_as_would_hold() {
    let c = config("forwardingGate: {enabled: true, mode: report}", PEERS);
    let (mut core, _) = file_core(c.clone());
    core.handle(kernel_with(&c, &["198.19.2.0/24"]));
    let out = core.handle(ready(&["198.19.1.0/24", "198.19.2.0/24"]));
    assert_eq!(
        routes_of(&out, "tor1"),
        Some(vec![net("198.19.1.0/24"), net("198.19.2.0/24")]),
        "nothing withheld: {out:?}"
    );
    assert!(out.iter().any(|e| matches!(
        e,
        Effect::Notice(Notice::ForwardingHeld {
            reason: HoldReason::NoRoute,
            enforced: false,
            ..
        })
    )));
    let counts = out.iter().find_map(|e| match e {
        Effect::Notice(Notice::HeldNow {
            counts,
            enforced: false,
        }) => Some(**counts),
        _ => None,
    });
    assert!(
        counts
            .expect("the would-hold gauge")
            .contains(&("ipv4", "no-route", 1)),
        "{counts:?}"
    );
    let r = core.report_inputs().render(0);
    assert_eq!(r.announced, ["198.19.1.0/24", "198.19.2.0/24"]);
    assert!(r.held.is_empty(), "{:?}", r.held);
    assert_eq!(r.would_hold.len(), 1);
    assert_eq!(
        (
            r.would_hold[0].cidr.as_str(),
            r.would_hold[0].reason.as_str()
        ),
        ("198.19.1.0/24", "no-route")
    );
    let cond = (r.conditions.iter())
        .find(|c| c.type_ == "ForwardingHeld")
        .expect("the condition");
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "WouldHold")
    );
    assert_eq!(
        cond.message,
        "mode report, announced anyway: would hold 198.19.1.0/24 (no-route)"
    );
    // Enforcing by reload withdraws what it would hold (after the hold-down: it was announced).
    let e = config(
        "forwardingGate: {enabled: true, withdrawHoldDown: 0}",
        PEERS,
    );
    let mut ev = reload(e.clone());
    if let (Event::ConfigReloaded { kernel, .. }, Event::Kernel(k)) =
        (&mut ev, kernel_with(&e, &["198.19.2.0/24"]))
    {
        *kernel = k;
    }
    let out = core.handle(ev);
    assert_eq!(routes_of(&out, "tor1"), Some(vec![net("198.19.2.0/24")]));
    let r = core.report_inputs().render(0);
    assert!(r.would_hold.is_empty());
    assert_eq!(r.held.len(), 1);
}

/// Review 2 F8 (hysteresis): a per-pod CNI's node draining to zero pods, or a CNI agent
/// rewriting its routes, must not churn the fabric. An announced CIDR whose route goes stays
/// announced for `withdrawHoldDown`; a route back within it changes nothing; a route back
/// after the withdraw announces at once (no hold-down before announcing).
#[test]
fn withdraw_hold_down_delays_a_withdraw_but_not_an_announce() {
    let c = config(
        "forwardingGate: {enabled: true, withdrawHoldDown: 5s}",
        PEERS,
    );
    let (mut core, _) = file_core(c.clone());
    core.handle(kernel_with(&c, &["198.19.1.7/32"]));
    let out = core.handle(ready(&["198.19.1.0/24"]));
    assert_eq!(routes_of(&out, "tor1"), Some(vec![net("198.19.1.0/24")]));
    tick(&mut core, 10);
    // The last pod goes: announced still, the hold-down starts at the next tick.
    let out = core.handle(kernel_with(&c, &[]));
    assert_eq!(routes_of(&out, "tor1"), None, "{out:?}");
    assert!(held_notices(&out).is_empty());
    assert!(out.iter().any(|e| matches!(
        e,
        Effect::Notice(Notice::ForwardingWithdrawDeferred { hold_down, .. })
            if hold_down.as_secs() == 5
    )));
    assert!(core.report_inputs().render(0).held.is_empty());
    assert_eq!(routes_of(&tick(&mut core, 11), "tor1"), None);
    assert_eq!(routes_of(&tick(&mut core, 15), "tor1"), None, "4 s in");
    // The next pod within the hold-down: nothing changes, and the clock starts again.
    let out = core.handle(kernel_with(&c, &["198.19.1.9/32"]));
    assert_eq!(routes_of(&out, "tor1"), None);
    core.handle(kernel_with(&c, &[]));
    assert_eq!(routes_of(&tick(&mut core, 16), "tor1"), None);
    assert_eq!(
        routes_of(&tick(&mut core, 20), "tor1"),
        None,
        "4 s in again"
    );
    let out = tick(&mut core, 21);
    assert_eq!(routes_of(&out, "tor1"), Some(vec![]), "5 s: withdrawn");
    assert_eq!(
        held_notices(&out),
        [(net("198.19.1.0/24"), HoldReason::NoRoute)]
    );
    // A pod again: announced by the event itself, no tick, no hold-down.
    let out = core.handle(kernel_with(&c, &["198.19.1.3/32"]));
    assert_eq!(routes_of(&out, "tor1"), Some(vec![net("198.19.1.0/24")]));
}

#[test]
fn a_zero_withdraw_hold_down_withdraws_at_once() {
    let c = config(
        "forwardingGate: {enabled: true, withdrawHoldDown: 0}",
        PEERS,
    );
    let (mut core, _) = file_core(c.clone());
    core.handle(kernel_with(&c, &["198.19.1.0/24"]));
    core.handle(ready(&["198.19.1.0/24"]));
    let out = core.handle(kernel_with(&c, &[]));
    assert_eq!(routes_of(&out, "tor1"), Some(vec![]));
}

/// Issue 32 item 10: `nextHop.ipv6: self` on IPv4 sessions of a node without an IPv6
/// InternalIP announces no IPv6 route. Said once per peer and family (not per prefix), in
/// the report's `noNextHop`, and again when it is over.
#[test]
fn a_family_without_a_next_hop_is_said_once_per_peer_and_family_not_per_prefix() {
    let c = config("", PEERS);
    let (mut core, _) = file_core(c);
    let no_next_hop = |out: &[Effect]| -> Vec<(String, &'static str, bool)> {
        out.iter()
            .filter_map(|e| match e {
                Effect::Notice(Notice::NoNextHop {
                    peer,
                    family,
                    reason,
                }) => Some((peer.clone(), *family, reason.is_some())),
                _ => None,
            })
            .collect()
    };
    let out = core.handle(ready(&[
        "198.19.1.0/24",
        "fd00:19:1::/64",
        "fd00:19:2::/64",
    ]));
    assert_eq!(
        no_next_hop(&out),
        [
            ("tor1".to_owned(), "ipv6-unicast", true),
            ("tor2".to_owned(), "ipv6-unicast", true)
        ]
    );
    let r = core.report_inputs().render(0);
    assert!(
        r.peers.iter().all(|p| p.no_next_hop == ["ipv6-unicast"]),
        "{:?}",
        r.peers
    );
    let out = core.handle(ready(&[
        "198.19.1.0/24",
        "fd00:19:1::/64",
        "fd00:19:3::/64",
    ]));
    assert!(no_next_hop(&out).is_empty(), "{out:?}");
    let out = core.handle(ready(&["198.19.1.0/24"]));
    assert_eq!(
        no_next_hop(&out),
        [
            ("tor1".to_owned(), "ipv6-unicast", false),
            ("tor2".to_owned(), "ipv6-unicast", false)
        ]
    );
    let r = core.report_inputs().render(0);
    assert!(r.peers.iter().all(|p| p.no_next_hop.is_empty()));
}
