//! Table tests for the node's local AS and RFC 8326 graceful shutdown in the core.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::session::StopReason;
use ipam_watch::source::DesiredSet;
use podcidr_config::{Community, Config};

use super::*;

const GSHUT: u32 = 0xFFFF_0000;

fn lookup(_: &PeerAddress) -> Option<IpAddr> {
    Some("192.0.2.10".parse().unwrap())
}

const PEERS: &str = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, communities: [\"65000:7\"]}\n  - {name: rr, address: 192.0.2.2, asn: 65020}\n";

fn config(top: &str) -> Config {
    Config::from_yaml_str(&format!(
        "routerId: 192.0.2.10\nsource: {{kind: ipam-crd}}\nallowedPrefixes: [198.19.0.0/16]\n{top}\n{PEERS}"
    ))
    .unwrap()
}

fn node(core: &Core, labels: &[(&str, &str)], unschedulable: bool) -> Event {
    core.node_seen(NodeFacts {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        unschedulable,
        ..NodeFacts::default()
    })
}

fn ready() -> Event {
    Event::Desired(Arc::new(DesiredSet {
        ready: true,
        cidrs: vec!["198.19.1.0/24".parse().unwrap()],
        ..DesiredSet::default()
    }))
}

/// A core whose source is ready before the Node is known: graceful-restart sessions start
/// as soon as the Node is (none are held for routes).
fn api_core(c: Config) -> Core {
    let mut core = Core::with_lookup(c, "node-a".into(), true, lookup);
    assert!(core.start().is_empty());
    core.handle(ready());
    core
}

/// Peer name → (local AS in its OPEN, iBGP) for each started or reset session.
fn sessions(out: &[Effect]) -> BTreeMap<String, (u32, bool)> {
    out.iter()
        .filter_map(|e| match e {
            Effect::StartPeer(s) | Effect::ResetPeer { setup: s, .. } => Some((
                s.config.name.clone(),
                (s.session_config().local_asn.0, s.config.is_ibgp()),
            )),
            _ => None,
        })
        .collect()
}

/// Peer name → the communities of its routes, for each SetRoutes.
fn route_communities(out: &[Effect]) -> BTreeMap<String, Vec<u32>> {
    out.iter()
        .filter_map(|e| match e {
            Effect::SetRoutes { name, routes } => {
                let attrs = routes.values().next()?;
                Some((name.clone(), attrs.communities.clone()))
            }
            _ => None,
        })
        .collect()
}

fn stopped(out: &[Effect]) -> Vec<&str> {
    out.iter()
        .filter_map(|e| match e {
            Effect::StopPeer { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect()
}

fn asn_condition(core: &Core) -> (String, String, String) {
    let r = core.report_inputs().render(1_700_000_000);
    let c = r
        .conditions
        .iter()
        .find(|c| c.type_ == "LocalASN")
        .expect("LocalASN condition");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

const FROM_LABEL: &str = "asn: {fromNodeLabel: example.com/asn}";

#[test]
fn node_label_is_the_local_as_in_every_open_and_decides_ibgp_rfc4271_5_1_3() {
    let mut core = api_core(config(FROM_LABEL));
    let out = core.handle(node(&core, &[("example.com/asn", "65020")], false));
    assert_eq!(
        sessions(&out),
        BTreeMap::from([
            ("rr".to_owned(), (65020, true)),
            ("tor1".to_owned(), (65020, false)),
        ])
    );
    let r = core.report_inputs().render(1_700_000_000);
    assert_eq!(
        (r.local_asn, r.local_asn_source.as_str()),
        (Some(65020), "label example.com/asn")
    );
    assert_eq!(asn_condition(&core).0, "True");
}

#[test]
fn node_label_change_resets_every_session_with_the_new_as() {
    let mut core = api_core(config(FROM_LABEL));
    core.handle(node(&core, &[("example.com/asn", "65020")], false));
    let out = core.handle(node(&core, &[("example.com/asn", "65021")], false));
    assert!(out.iter().all(|e| !matches!(e, Effect::StartPeer(_))));
    assert_eq!(
        sessions(&out),
        BTreeMap::from([
            ("rr".to_owned(), (65021, false)),
            ("tor1".to_owned(), (65021, false)),
        ])
    );
}

#[test]
fn bad_or_missing_node_asn_runs_no_session_with_condition_and_warning_event() {
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
    let cases: &[Case<'_>] = &[
        (
            &[("example.com/asn", "65x")],
            "LocalASNInvalid",
            "label \"example.com/asn\": \"65x\" is not an AS number (1..4294967295 except 23456)",
        ),
        (
            &[("example.com/asn", "23456")],
            "LocalASNInvalid",
            "label \"example.com/asn\": \"23456\" is not allowed (AS_TRANS 23456 is reserved by RFC 6793)",
        ),
        (
            &[],
            "LocalASNMissing",
            "label \"example.com/asn\": not set on this node (and asn.default is not set)",
        ),
    ];
    for (labels, reason, message) in cases {
        let mut core = api_core(config(FROM_LABEL));
        let out = core.handle(node(&core, labels, false));
        assert!(sessions(&out).is_empty(), "{labels:?}: {out:?}");
        assert_eq!(
            asn_condition(&core),
            (
                "False".to_owned(),
                (*reason).to_owned(),
                (*message).to_owned()
            )
        );
        let event = out.iter().find_map(|e| match e {
            Effect::KubeEvent(ev) => Some(ev),
            _ => None,
        });
        let event = event.expect("an Event");
        assert_eq!(
            (event.reason, event.warning),
            (EventReason::LocalAsnInvalid, true)
        );
        assert!(event.note.starts_with(message), "{}", event.note);
        assert_eq!(core.report_inputs().render(0).local_asn, None);
    }
}

#[test]
fn node_asn_turning_bad_stops_every_session_and_fixing_it_starts_them() {
    let mut core = api_core(config(FROM_LABEL));
    core.handle(node(&core, &[("example.com/asn", "65020")], false));
    let out = core.handle(node(&core, &[("example.com/asn", "0")], false));
    assert_eq!(stopped(&out), ["rr", "tor1"]);
    let out = core.handle(node(&core, &[("example.com/asn", "65000")], false));
    assert_eq!(
        sessions(&out),
        BTreeMap::from([
            ("rr".to_owned(), (65000, false)),
            ("tor1".to_owned(), (65000, true)),
        ])
    );
    assert!(out.iter().any(|e| matches!(
        e,
        Effect::KubeEvent(ev) if ev.reason == EventReason::LocalAsnResolved
    )));
}

#[test]
fn override_selected_by_node_labels_wins_over_asn() {
    let top = "asn: 65010\nasnOverrides: [{nodeSelector: {matchLabels: {rack: r7}}, asn: 65107}]";
    let mut core = api_core(config(top));
    let out = core.handle(node(&core, &[("rack", "r7")], false));
    assert_eq!(sessions(&out)["tor1"], (65107, false));
    assert_eq!(
        core.report_inputs().render(0).local_asn_source,
        "asnOverrides[0]"
    );
    let out = core.handle(node(&core, &[("rack", "r8")], false));
    assert_eq!(sessions(&out)["tor1"], (65010, false));
}

#[test]
fn reload_to_a_peer_type_conflict_on_this_node_stops_its_sessions() {
    let mut core = api_core(config(FROM_LABEL));
    core.handle(node(&core, &[("example.com/asn", "65020")], false));
    let conflict = Config::from_yaml_str(&format!(
        "routerId: 192.0.2.10\nsource: {{kind: ipam-crd}}\nallowedPrefixes: [198.19.0.0/16]\n{FROM_LABEL}\npeers:\n  - {{name: tor1, address: 192.0.2.1, asn: 65000, localPref: 100}}\n"
    ))
    .unwrap();
    let out = core.handle(Event::ConfigReloaded {
        kernel: kernel_facts(&conflict, Default::default(), lookup),
        config: Box::new(conflict),
        node_name: "node-a".into(),
        why: "test",
        origin: ConfigOrigin::File,
    });
    assert_eq!(stopped(&out), ["rr", "tor1"]);
    assert_eq!(asn_condition(&core).1, "PeerTypeConflict");
}

#[test]
fn final_stop_reannounces_with_graceful_shutdown_then_ceases_rfc8326_4() {
    let mut core = api_core(config("asn: 65010"));
    core.handle(node(&core, &[], false));
    core.handle(ready());
    let out = core.handle(Event::Shutdown { final_stop: true });
    let communities = route_communities(&out);
    assert_eq!(communities["tor1"], [(65000 << 16) | 7, GSHUT]);
    assert_eq!(communities["rr"], [GSHUT]);
    assert_eq!(
        out.last(),
        Some(&Effect::GracefulShutdownWait(Duration::from_secs(5)))
    );
    assert!(!out.iter().any(|e| matches!(e, Effect::StopAll(_))));
    // The wait is over (or a second SIGTERM): the Cease, RFC 8203 administrative shutdown.
    let out = core.handle(Event::Shutdown { final_stop: true });
    let Some(Effect::StopAll(s)) = out.last() else {
        panic!("{out:?}")
    };
    assert_eq!(s.len(), 2);
    assert!(s.iter().all(|(_, r)| matches!(r, StopReason::Shutdown(_))));
}

#[test]
fn non_final_stop_keeps_graceful_restart_and_does_not_wait_rfc4724() {
    let mut core = api_core(config("asn: 65010"));
    core.handle(node(&core, &[], false));
    core.handle(ready());
    let out = core.handle(Event::Shutdown { final_stop: false });
    assert!(route_communities(&out).is_empty());
    let Some(Effect::StopAll(s)) = out.last() else {
        panic!("{out:?}")
    };
    assert!(s.iter().all(|(_, r)| *r == StopReason::GracefulRestart));
}

#[test]
fn cordoned_node_routes_carry_graceful_shutdown_until_uncordoned_rfc8326() {
    for (top, expect_gshut) in [
        ("asn: 65010", true),
        ("asn: 65010\ngracefulShutdown: {onCordon: false}", false),
    ] {
        let mut core = api_core(config(top));
        core.handle(node(&core, &[], false));
        core.handle(ready());
        let out = core.handle(node(&core, &[], true));
        let has = |out: &[Effect]| {
            route_communities(out)
                .get("rr")
                .is_some_and(|c| c.contains(&Community::GRACEFUL_SHUTDOWN.0))
        };
        assert_eq!(has(&out), expect_gshut, "{top}");
        let out = core.handle(node(&core, &[], false));
        assert_eq!(
            route_communities(&out).get("rr").map(Vec::len),
            expect_gshut.then_some(0),
            "{top}: uncordoned"
        );
    }
}

#[test]
fn node_annotation_is_the_local_as_and_its_change_resets_sessions() {
    let mut core = api_core(config("asn: {fromNodeAnnotation: example.com/asn}"));
    let annotated = |core: &Core, v: &str| {
        core.node_seen(NodeFacts {
            annotations: [("example.com/asn".to_owned(), v.to_owned())].into(),
            ..NodeFacts::default()
        })
    };
    let out = core.handle(annotated(&core, "4200000001"));
    assert_eq!(sessions(&out)["tor1"], (4_200_000_001, false));
    assert_eq!(
        core.report_inputs().render(0).local_asn_source,
        "annotation example.com/asn"
    );
    let out = core.handle(annotated(&core, "65000"));
    assert_eq!(sessions(&out)["tor1"], (65000, true));
}

#[test]
fn reload_from_a_fixed_asn_to_a_node_label_resets_sessions_with_the_node_as() {
    let mut core = api_core(config("asn: 65010"));
    core.handle(node(&core, &[("example.com/asn", "65030")], false));
    let out = core.handle(Event::ConfigReloaded {
        kernel: kernel_facts(&config(FROM_LABEL), Default::default(), lookup),
        config: Box::new(config(FROM_LABEL)),
        node_name: "node-a".into(),
        why: "test",
        origin: ConfigOrigin::File,
    });
    assert_eq!(
        sessions(&out),
        BTreeMap::from([
            ("rr".to_owned(), (65030, false)),
            ("tor1".to_owned(), (65030, false)),
        ])
    );
    assert!(out.iter().all(|e| !matches!(e, Effect::StartPeer(_))));
}

/// Bug from reading: a learned `asn: auto` peer's info metric carried the config's AS, not
/// the node's, so `podcidr_bgp_peer_info{local_asn}` flipped once the peer's AS was learned.
#[test]
fn a_learned_peer_as_reports_the_nodes_local_as_not_the_configs() {
    let c = Config::from_yaml_str(
        "routerId: 192.0.2.10\nsource: {kind: ipam-crd}\nallowedPrefixes: [198.19.0.0/16]\n\
         asn: {fromNodeLabel: example.com/asn, default: 65010}\n\
         peers:\n  - {name: tor, address: 192.0.2.1, asn: auto, allowedAsns: [\"65000-65100\"]}\n",
    )
    .unwrap();
    let mut core = api_core(c);
    let out = core.handle(node(&core, &[("example.com/asn", "65020")], false));
    let started: Vec<u32> = out
        .iter()
        .filter_map(|e| match e {
            Effect::Notice(Notice::PeerStarted { local_asn, .. }) => Some(*local_asn),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![65020]);
    let mut status = bgp_proto::session::SessionStatus::new(0);
    status.state = bgp_proto::session::State::Established;
    status.negotiated = Some(crate::daemon::core::report::tests::negotiated(65042));
    let out = core.handle(Event::Tick {
        now: Duration::from_secs(1),
        unix: 1_700_000_001,
        statuses: BTreeMap::from([("tor".to_owned(), status)]),
    });
    let learned: Vec<(u32, u32)> = out
        .iter()
        .filter_map(|e| match e {
            Effect::Notice(Notice::PeerAsLearned { asn, local_asn, .. }) => {
                Some((*asn, *local_asn))
            }
            _ => None,
        })
        .collect();
    assert_eq!(learned, vec![(65042, 65020)], "the node's AS, as at start");
}
