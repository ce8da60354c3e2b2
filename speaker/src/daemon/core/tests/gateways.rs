//! The core with `default-gateway` and `asn: auto` peers: a changed gateway resets only
//! that session; a learned AS is noticed once.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use bgp_proto::session::{SessionStatus, State};
use podcidr_config::Config;

use super::*;
use crate::daemon::core::gateways::{DefaultRoutes, Gateway};
use crate::daemon::core::kernel::{KernelFacts, KernelQuery};

fn lookup(_: &PeerAddress) -> Option<IpAddr> {
    Some("198.18.1.2".parse().unwrap())
}

fn written() -> Config {
    Config::from_yaml_str(
        "asn: 65010\nrouterId: 198.18.1.2\nsource: {kind: file, path: /x}\npeers:\n  \
         - {name: tor, address: default-gateway, asn: auto, allowedAsns: [65000-65100]}\n  \
         - {name: rr, address: 198.18.3.1, asn: 65003}\n",
    )
    .unwrap()
}

fn via(gw: &str) -> DefaultRoutes {
    DefaultRoutes {
        ipv4: vec![Gateway {
            via: gw.parse().unwrap(),
            dev: "eth0".into(),
            metric: 0,
        }],
        ipv6: Vec::new(),
    }
}

/// The source's first (empty) set: graceful-restart sessions open once it is known.
fn source_ready() -> Event {
    Event::Desired(std::sync::Arc::new(ipam_watch::source::DesiredSet {
        ready: true,
        ..Default::default()
    }))
}

fn names<'a>(out: &'a [Effect], pick: fn(&'a Effect) -> Option<&'a str>) -> Vec<&'a str> {
    out.iter().filter_map(pick).collect()
}

/// The kernel with these default routes; every source address 198.18.1.2.
fn kernel(routes: DefaultRoutes) -> KernelFacts {
    kernel_facts(&written(), routes, lookup)
}

#[test]
fn a_changed_default_gateway_resets_only_that_peer_towards_the_new_gateway() {
    let mut core = Core::new(written(), "node-a".into(), false, kernel(via("198.18.1.1")));
    let mut started = core.start();
    started.extend(core.handle(source_ready()));
    let started = names(&started, |e| match e {
        Effect::StartPeer(s) => Some(s.config.name.as_str()),
        _ => None,
    });
    assert_eq!(started, vec!["tor-eth0", "rr"]);

    let out = core.handle(Event::Kernel(kernel(via("198.18.2.1"))));
    let reset: Vec<(&str, String)> = out
        .iter()
        .filter_map(|e| match e {
            Effect::ResetPeer { setup: s, .. } => {
                Some((s.config.name.as_str(), s.config.address.to_string()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(reset, vec![("tor-eth0", "198.18.2.1".to_owned())]);
    assert!(
        !out.iter()
            .any(|e| matches!(e, Effect::StopPeer { .. } | Effect::StartPeer(_)))
    );

    // The default route goes away: the session stops; rr stays.
    let out = core.handle(Event::Kernel(kernel(DefaultRoutes::default())));
    let problems: Vec<&Unresolved> = out
        .iter()
        .filter_map(|e| match e {
            Effect::Notice(Notice::PeerUnresolved(p)) => Some(p),
            _ => None,
        })
        .collect();
    assert_eq!(problems.len(), 1);
    let stopped = names(&out, |e| match e {
        Effect::StopPeer { name, .. } => Some(name.as_str()),
        _ => None,
    });
    assert_eq!(stopped, vec!["tor-eth0"]);
    assert!(!out.iter().any(|e| matches!(e, Effect::ResetPeer { .. })));
}

fn two_uplinks(devs: &[&str]) -> DefaultRoutes {
    DefaultRoutes {
        ipv4: devs
            .iter()
            .map(|dev| Gateway {
                via: match *dev {
                    "eth0" => "198.18.1.1",
                    _ => "198.18.2.1",
                }
                .parse()
                .unwrap(),
                dev: (*dev).into(),
                metric: 0,
            })
            .collect(),
        ipv6: Vec::new(),
    }
}

/// Every effect that names the session `name`: a start, reset or stop (a Cease), or an
/// address change.
fn touches(out: &[Effect], name: &str) -> Vec<String> {
    out.iter()
        .filter(|e| match e {
            Effect::StartPeer(s) | Effect::ResetPeer { setup: s, .. } => s.config.name == name,
            Effect::StopPeer { name: n, .. } => n == name,
            _ => false,
        })
        .map(|e| format!("{e:?}"))
        .collect()
}

#[test]
fn losing_one_of_two_uplinks_leaves_the_other_session_alone() {
    let mut core = Core::new(
        written(),
        "node-a".into(),
        false,
        kernel(two_uplinks(&["eth0", "eth1"])),
    );
    let mut out = core.start();
    out.extend(core.handle(source_ready()));
    let started = names(&out, |e| match e {
        Effect::StartPeer(s) => Some(s.config.name.as_str()),
        _ => None,
    });
    assert_eq!(started, vec!["tor-eth0", "tor-eth1", "rr"]);

    // eth0's default route goes: only its session stops, eth1's keeps its name and runs on.
    let out = core.handle(Event::Kernel(kernel(two_uplinks(&["eth1"]))));
    let stopped = names(&out, |e| match e {
        Effect::StopPeer { name, .. } => Some(name.as_str()),
        _ => None,
    });
    assert_eq!(stopped, vec!["tor-eth0"], "{out:?}");
    assert_eq!(touches(&out, "tor-eth1"), Vec::<String>::new(), "no Cease");
    assert_eq!(touches(&out, "tor"), Vec::<String>::new(), "no rename");

    // It comes back: eth0's session starts again, eth1's is still untouched.
    let out = core.handle(Event::Kernel(kernel(two_uplinks(&["eth0", "eth1"]))));
    let started = names(&out, |e| match e {
        Effect::StartPeer(s) => Some(s.config.name.as_str()),
        _ => None,
    });
    assert_eq!(started, vec!["tor-eth0"], "{out:?}");
    assert_eq!(touches(&out, "tor-eth1"), Vec::<String>::new());
}

fn established(asn: u32) -> SessionStatus {
    let mut s = SessionStatus::new(0);
    s.state = State::Established;
    s.negotiated = Some(crate::daemon::core::report::tests::negotiated(asn));
    s
}

fn tick(core: &mut Core, secs: u64, tor: SessionStatus) -> Vec<(String, u32)> {
    let statuses: BTreeMap<String, SessionStatus> = [
        ("tor-eth0".to_owned(), tor),
        ("rr".to_owned(), established(65003)),
    ]
    .into();
    core.handle(Event::Tick {
        now: Duration::from_secs(secs),
        unix: 1_700_000_000 + secs,
        statuses,
    })
    .into_iter()
    .filter_map(|e| match e {
        Effect::Notice(Notice::PeerAsLearned { peer, asn, .. }) => Some((peer, asn)),
        _ => None,
    })
    .collect()
}

#[test]
fn the_as_an_auto_peer_learned_from_its_open_is_noticed_once_rfc4271_6_2() {
    let mut core = Core::new(written(), "node-a".into(), false, kernel(via("198.18.1.1")));
    core.start();
    core.handle(source_ready());
    assert_eq!(tick(&mut core, 1, SessionStatus::new(0)), vec![]);
    assert_eq!(
        tick(&mut core, 2, established(65042)),
        vec![("tor-eth0".to_owned(), 65042)]
    );
    assert_eq!(tick(&mut core, 3, established(65042)), vec![], "once");
    // A fixed-AS peer (rr) is never "learned"; a different AS after a reconnect is.
    assert_eq!(
        tick(&mut core, 4, established(65077)),
        vec![("tor-eth0".to_owned(), 65077)]
    );
}

#[test]
fn a_default_gateway_peer_without_a_gateway_is_a_false_peers_resolved_condition() {
    let mut core = Core::new(
        written(),
        "node-a".into(),
        false,
        kernel(DefaultRoutes::default()),
    );
    core.start();
    let condition = |core: &Core| {
        core.report_inputs()
            .render(0)
            .conditions
            .into_iter()
            .find(|c| c.type_ == "PeersResolved")
            .map(|c| (c.status, c.reason, c.message))
    };
    // The core resolves the peers itself: the condition is there from the start.
    assert_eq!(
        condition(&core),
        Some((
            "False".to_owned(),
            "NoDefaultGateway".to_owned(),
            "peer tor: no default route for ipv4; the session starts when one appears".to_owned()
        ))
    );
    core.handle(Event::Kernel(kernel(via("198.18.1.1"))));
    assert_eq!(
        condition(&core),
        Some(("True".to_owned(), "AllResolved".to_owned(), String::new()))
    );
    let fixed = Config::from_yaml_str(
        "asn: 65010\nrouterId: 198.18.1.2\nsource: {kind: file, path: /x}\npeers:\n  \
         - {name: rr, address: 198.18.3.1, asn: 65003}\n",
    )
    .unwrap();
    core.handle(Event::ConfigReloaded {
        kernel: kernel_facts(&fixed, DefaultRoutes::default(), lookup),
        config: Box::new(fixed),
        node_name: "node-a".into(),
        why: "test",
        origin: ConfigOrigin::File,
    });
    assert_eq!(
        condition(&core),
        None,
        "no default-gateway peer: no condition"
    );
}

/// Moved from the session connector, which read the neighbour table at each connect: the
/// core now resolves an interface peer without `peerAddress` from the kernel's facts, and
/// says what to do while there is no neighbour.
#[test]
fn discovery_without_a_neighbor_says_what_to_do() {
    let c = Config::from_yaml_str(
        "asn: 65010\nrouterId: 198.18.1.2\nsource: {kind: file, path: /x}\npeers:\n  \
         - {name: tor, interface: lo, asn: 65000}\n",
    )
    .unwrap();
    let facts = KernelFacts {
        neighbours: [("lo".to_owned(), None)].into(),
        ..KernelFacts::default()
    };
    let mut core = Core::new(c.clone(), "node-a".into(), false, facts);
    let out = core.start();
    assert!(!out.iter().any(|e| matches!(e, Effect::StartPeer(_))));
    let message = core
        .report_inputs()
        .render(0)
        .conditions
        .into_iter()
        .find(|c| c.type_ == "PeersResolved")
        .map(|c| (c.reason, c.message))
        .expect("PeersResolved");
    assert_eq!(message.0, "NoNeighbor");
    assert!(
        message
            .1
            .contains("no IPv6 link-local neighbor on lo in the kernel's neighbor table yet"),
        "{message:?}"
    );
    // The neighbour appears: the session starts towards it, on that interface.
    let neighbour: std::net::Ipv6Addr = "fe80::2".parse().unwrap();
    let facts = KernelFacts {
        neighbours: [("lo".to_owned(), Some(neighbour))].into(),
        ..KernelFacts::default()
    };
    let mut out = core.handle(Event::Kernel(facts));
    out.extend(core.handle(source_ready()));
    let started: Vec<String> = out
        .iter()
        .filter_map(|e| match e {
            Effect::StartPeer(s) | Effect::ResetPeer { setup: s, .. } => {
                Some(s.config.address.to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(started.len(), 1, "{out:?}");
    assert!(started[0].contains("fe80::2"), "{started:?}");
}

/// Issue 31 item 8: discovery trusts the link (the router-flagged neighbour with the lowest
/// address wins, so a rogue Router Advertisement on a shared segment would). `peerAddress`
/// pins the router: the neighbour table is not even read for that peer, and a rogue
/// neighbour with a lower address on the interface changes nothing.
#[test]
fn a_pinned_peer_address_ignores_every_neighbour_on_the_link() {
    let c = Config::from_yaml_str(
        "asn: 65010\nrouterId: 198.18.1.2\nsource: {kind: file, path: /x}\npeers:\n  \
         - {name: tor, interface: lo, peerAddress: \"fe80::9\", asn: 65000}\n",
    )
    .unwrap();
    assert!(
        KernelQuery::for_config(&c).neighbours.is_empty(),
        "no neighbour lookup for a pinned peer"
    );
    let rogue: std::net::Ipv6Addr = "fe80::1".parse().unwrap();
    let facts = KernelFacts {
        neighbours: [("lo".to_owned(), Some(rogue))].into(),
        ..KernelFacts::default()
    };
    let mut core = Core::new(c, "node-a".into(), false, facts.clone());
    let mut out = core.start();
    out.extend(core.handle(Event::Kernel(facts)));
    out.extend(core.handle(source_ready()));
    let started: Vec<String> = out
        .iter()
        .filter_map(|e| match e {
            Effect::StartPeer(s) | Effect::ResetPeer { setup: s, .. } => {
                Some(s.config.address.to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(started.len(), 1, "{out:?}");
    assert!(
        started[0].contains("fe80::9") && !started[0].contains("fe80::1"),
        "{started:?}"
    );
}
