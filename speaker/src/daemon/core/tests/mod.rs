//! Table tests for the announce core: every restart and reload rule, without I/O.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::Asn;
use bgp_proto::session::{SessionStatus, StopReason};
use ipam_watch::source::DesiredSet;
use ipnet::IpNet;
use podcidr_config::{Config, SourceConfig};

use super::*;

/// The kernel as these tests see it: every source-address lookup answered by `lookup`,
/// default routes as given, no neighbours.
pub(crate) fn kernel_facts(
    config: &Config,
    default_routes: super::gateways::DefaultRoutes,
    lookup: fn(&PeerAddress) -> Option<IpAddr>,
) -> kernel::KernelFacts {
    let mut facts = kernel::KernelFacts {
        default_routes,
        ..Default::default()
    };
    let query = kernel::KernelQuery::for_config(config);
    let destinations: Vec<PeerAddress> = query
        .destinations
        .into_iter()
        .chain(facts.resolved_destinations())
        .collect();
    facts.sources = destinations
        .into_iter()
        .map(|d| {
            let s = lookup(&d);
            (d, s)
        })
        .collect();
    facts
}

impl Core {
    /// A core whose kernel answers every lookup with `lookup`.
    pub(crate) fn with_lookup(
        config: Config,
        node_name: String,
        api: bool,
        lookup: fn(&PeerAddress) -> Option<IpAddr>,
    ) -> Core {
        let facts = kernel_facts(&config, Default::default(), lookup);
        Core::new(config, node_name, api, facts)
    }

    /// The source's set as it is, with the Node seen as `facts` (one watch feeds both).
    pub(super) fn node_seen(&self, facts: NodeFacts) -> Event {
        Event::Desired(Arc::new(DesiredSet {
            node: Some(facts),
            ..(*self.announce.desired).clone()
        }))
    }
}

fn lookup(_: &podcidr_config::PeerAddress) -> Option<IpAddr> {
    Some("192.0.2.10".parse().unwrap())
}

const PEERS: &str = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n  - {name: tor2, address: 192.0.2.2, asn: 65000, passive: true}\n";

fn config(extra: &str, peers: &str) -> Config {
    Config::from_yaml_str(&format!(
        "asn: 65010\nrouterId: 192.0.2.10\nsource: {{kind: file, path: /x}}\n{extra}\n{peers}"
    ))
    .unwrap()
}

fn api_config(extra: &str, peers: &str) -> Config {
    Config::from_yaml_str(&format!(
        "asn: 65010\nrouterId: 192.0.2.10\nsource: {{kind: ipam-crd}}\nallowedPrefixes: [198.19.0.0/16, \"fd00:19::/32\"]\n{extra}\n{peers}"
    ))
    .unwrap()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn ready(cidrs: &[&str]) -> Event {
    Event::Desired(Arc::new(DesiredSet {
        ready: true,
        cidrs: cidrs.iter().map(|c| net(c)).collect(),
        ..DesiredSet::default()
    }))
}

fn not_ready() -> Event {
    Event::Desired(Arc::new(DesiredSet::default()))
}

fn reload(c: Config) -> Event {
    Event::ConfigReloaded {
        kernel: kernel_facts(&c, Default::default(), lookup),
        config: Box::new(c),
        node_name: "node-a".into(),
        why: "test",
        origin: ConfigOrigin::File,
    }
}

/// A file-mode core after start and its source's first (empty) set: the sessions are open.
fn file_core(c: Config) -> (Core, Vec<Effect>) {
    let mut core = Core::with_lookup(c, "node-a".into(), false, lookup);
    let mut out = core.start();
    out.extend(core.handle(ready(&[])));
    (core, out)
}

fn starts(out: &[Effect]) -> Vec<&PeerSetup> {
    out.iter()
        .filter_map(|e| match e {
            Effect::StartPeer(s) => Some(&**s),
            _ => None,
        })
        .collect()
}

fn resets(out: &[Effect]) -> Vec<&PeerSetup> {
    out.iter()
        .filter_map(|e| match e {
            Effect::ResetPeer { setup: s, .. } => Some(&**s),
            _ => None,
        })
        .collect()
}

fn set_routes(out: &[Effect]) -> Vec<(&str, usize)> {
    out.iter()
        .filter_map(|e| match e {
            Effect::SetRoutes { name, routes } => Some((name.as_str(), routes.len())),
            _ => None,
        })
        .collect()
}

fn stops(out: &[Effect]) -> Vec<(&str, &StopReason)> {
    out.iter()
        .filter_map(|e| match e {
            Effect::StopPeer { name, reason } => Some((name.as_str(), reason)),
            _ => None,
        })
        .collect()
}

fn publishes(out: &[Effect]) -> usize {
    out.iter()
        .filter(|e| matches!(e, Effect::Publish { .. }))
        .count()
}

fn tick(core: &mut Core, secs: u64) -> Vec<Effect> {
    let statuses: BTreeMap<String, SessionStatus> = ["tor1", "tor2"]
        .into_iter()
        .map(|n| (n.to_owned(), SessionStatus::new(0)))
        .collect();
    core.handle(Event::Tick {
        now: Duration::from_secs(secs),
        unix: 1_700_000_000 + secs,
        statuses,
    })
}

/// Chaos soak finding: a session opened before the routes were known, then a second kill,
/// made BIRD end the first restart and drop every stale route.
#[test]
fn restarted_speaker_opens_graceful_restart_sessions_only_with_routes_rfc4724_4_2() {
    let mut core = Core::with_lookup(config("", PEERS), "node-a".into(), false, lookup);
    assert!(
        starts(&core.start()).is_empty(),
        "held until the source is ready"
    );
    assert!(starts(&core.handle(not_ready())).is_empty());
    assert!(
        starts(&tick(&mut core, 59)).is_empty(),
        "still within 120 s / 2"
    );
    let out = core.handle(ready(&["198.19.1.0/24"]));
    let s = starts(&out);
    assert_eq!(s.len(), 2);
    assert!(
        s.iter().all(|s| s.restarting),
        "first sessions of the process"
    );
    assert!(
        s.iter()
            .all(|s| s.routes.as_ref().map(|r| r.len()) == Some(1)),
        "opened with the routes to send"
    );
}

#[test]
fn held_session_opens_without_routes_after_half_the_restart_time_no_end_of_rib() {
    let mut core = Core::with_lookup(config("", PEERS), "node-a".into(), false, lookup);
    core.start();
    assert!(starts(&tick(&mut core, 59)).is_empty());
    let out = tick(&mut core, 60);
    let s = starts(&out);
    assert_eq!(
        s.len(),
        2,
        "before the peer's restart timer (120 s) drops the routes"
    );
    assert!(s.iter().all(|s| s.restarting));
    // `None` is "routes unknown": the session sends no UPDATE and no End-of-RIB.
    assert!(s.iter().all(|s| s.routes.is_none()));
    let out = core.handle(ready(&["198.19.1.0/24"]));
    assert_eq!(set_routes(&out), [("tor1", 1), ("tor2", 1)]);
}

#[test]
fn sessions_without_graceful_restart_open_at_once() {
    let mut core = Core::with_lookup(
        config(
            "",
            "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, gracefulRestart: {enabled: false}}\n",
        ),
        "node-a".into(),
        false,
        lookup,
    );
    let s = starts(&core.start()).len();
    assert_eq!(s, 1, "nothing stale to protect");
}

#[test]
fn a_source_that_stops_being_ready_withdraws_nothing() {
    let (mut core, _) = file_core(config("", PEERS));
    core.handle(ready(&["198.19.1.0/24"]));
    let out = core.handle(not_ready());
    assert!(set_routes(&out).is_empty());
}

#[test]
fn only_the_first_sessions_after_process_start_set_the_restart_bit() {
    let (mut core, out) = file_core(config("", PEERS));
    assert!(starts(&out).iter().all(|s| s.restarting));
    let peers3 = format!("{PEERS}  - {{name: tor3, address: 192.0.2.3, asn: 65000}}\n");
    let out = core.handle(reload(config("", &peers3)));
    let s = starts(&out);
    assert_eq!(s.len(), 1);
    assert!(!s[0].restarting, "a peer added by a reload did not restart");
}

#[test]
fn restart_bit_is_not_set_without_graceful_restart() {
    let (_, out) = file_core(config(
        "",
        "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, gracefulRestart: {enabled: false}}\n",
    ));
    assert!(!starts(&out)[0].restarting);
}

#[test]
fn identity_reload_resets_every_session_with_the_new_identity() {
    let (mut core, _) = file_core(config("", PEERS));
    let new = Config::from_yaml_str(&format!(
        "asn: 65011\nrouterId: 192.0.2.11\nsource: {{kind: file, path: /x}}\n{PEERS}"
    ))
    .unwrap();
    let out = core.handle(reload(new));
    let r = resets(&out);
    assert_eq!(r.len(), 2);
    for s in r {
        assert_eq!(s.identity.asn, Asn(65011));
        assert_eq!(s.identity.router_id.to_string(), "192.0.2.11");
        assert_eq!(s.session_config().local_asn, Asn(65011));
        assert!(!s.restarting, "a reset is not a process restart");
    }
}

#[test]
fn a_reset_session_keeps_the_routes_already_known() {
    let (mut core, _) = file_core(config("", PEERS));
    core.handle(ready(&["198.19.1.0/24"]));
    let changed = PEERS.replace(
        "asn: 65000}\n  - {name: tor2",
        "asn: 65001}\n  - {name: tor2",
    );
    let out = core.handle(reload(config("", &changed)));
    let r = resets(&out);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].config.name, "tor1");
    assert_eq!(r[0].routes.as_ref().map(|r| r.len()), Some(1));
}

/// The core chooses the NOTIFICATION of a reset, not the loop that carries it out: new
/// session settings stop the session with Cease/Other Configuration Change (RFC 4486 §4, sent
/// as RFC 8538 allows when both sides restart gracefully).
#[test]
fn a_reset_for_new_session_settings_stops_with_other_configuration_change_rfc4486_4() {
    let (mut core, _) = file_core(config("", PEERS));
    let changed = PEERS.replace(
        "asn: 65000}\n  - {name: tor2",
        "asn: 65001}\n  - {name: tor2",
    );
    let out = core.handle(reload(config("", &changed)));
    let reasons: Vec<(&str, &StopReason)> = out
        .iter()
        .filter_map(|e| match e {
            Effect::ResetPeer { setup, reason } => Some((setup.config.name.as_str(), reason)),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, [("tor1", &StopReason::ConfigurationChange)]);
}

#[test]
fn connect_retry_reload_reaches_the_running_session_without_a_reset() {
    let (mut core, _) = file_core(config("", PEERS));
    let changed = PEERS.replace(
        "asn: 65000}\n  - {name: tor2",
        "asn: 65000, connectRetry: {base: 5, max: 60}}\n  - {name: tor2",
    );
    let out = core.handle(reload(config("", &changed)));
    assert!(resets(&out).is_empty());
    assert!(out.contains(&Effect::SetConnectRetry {
        name: "tor1".into(),
        base: Duration::from_secs(5),
        max: Duration::from_secs(60),
    }));
}

#[test]
fn attribute_reload_reannounces_without_a_reset() {
    let (mut core, _) = file_core(config("", PEERS));
    core.handle(ready(&["198.19.1.0/24"]));
    let changed = PEERS.replace(
        "asn: 65000}\n  - {name: tor2",
        "asn: 65000, med: 7}\n  - {name: tor2",
    );
    let out = core.handle(reload(config("", &changed)));
    assert!(resets(&out).is_empty());
    let routes: Vec<_> = out
        .iter()
        .filter_map(|e| match e {
            Effect::SetRoutes { name, routes } if name == "tor1" => Some(routes),
            _ => None,
        })
        .collect();
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0].values().next().unwrap().med, Some(7));
}

#[test]
fn log_level_reload_is_applied() {
    let (mut core, _) = file_core(config("", PEERS));
    let out = core.handle(reload(config("log: {level: debug}", PEERS)));
    assert!(
        out.iter()
            .any(|e| matches!(e, Effect::SetLog(l) if l.level == podcidr_config::LogLevel::Debug))
    );
}

#[test]
fn admin_listen_reload_says_it_needs_a_restart() {
    let (mut core, _) = file_core(config("", PEERS));
    let out = core.handle(reload(config("admin: {listen: \"127.0.0.1:9999\"}", PEERS)));
    assert!(out.contains(&Effect::Notice(Notice::NeedsRestart("admin.listen"))));
    let out = core.handle(reload(config(
        "admin: {listen: \"127.0.0.1:9999\", metricsListen: \"127.0.0.1:9182\"}",
        PEERS,
    )));
    assert_eq!(
        out.iter()
            .filter(|e| matches!(e, Effect::Notice(Notice::NeedsRestart(_))))
            .collect::<Vec<_>>(),
        [&Effect::Notice(Notice::NeedsRestart("admin.metricsListen"))]
    );
}

#[test]
fn node_name_reload_watches_the_new_node_and_restarts_its_source() {
    let mut core = Core::with_lookup(api_config("", PEERS), "node-a".into(), true, lookup);
    core.start();
    core.handle(core.node_seen(NodeFacts {
        ..NodeFacts::default()
    }));
    core.handle(ready(&["198.19.1.0/24"]));
    let out = core.handle(Event::ConfigReloaded {
        kernel: kernel_facts(
            &api_config("nodeName: node-b", PEERS),
            Default::default(),
            lookup,
        ),
        config: Box::new(api_config("nodeName: node-b", PEERS)),
        node_name: "node-b".into(),
        why: "test",
        origin: ConfigOrigin::File,
    });
    assert!(out.contains(&Effect::RestartSource {
        source: SourceConfig::IpamCrd,
        node: "node-b".into(),
    }));
    assert_eq!(core.node_name(), "node-b");
    // Until the new source is ready, the old routes stay announced.
    let out = core.handle(not_ready());
    assert!(set_routes(&out).is_empty());
}

#[test]
fn source_reload_keeps_routes_until_the_new_source_is_ready() {
    let (mut core, _) = file_core(config("", PEERS));
    core.handle(ready(&["198.19.1.0/24"]));
    let new = Config::from_yaml_str(&format!(
        "asn: 65010\nrouterId: 192.0.2.10\nsource: {{kind: file, path: /y}}\n{PEERS}"
    ))
    .unwrap();
    let out = core.handle(reload(new));
    assert!(
        out.iter()
            .any(|e| matches!(e, Effect::RestartSource { .. }))
    );
    assert!(set_routes(&out).is_empty());
    let out = core.handle(not_ready());
    assert!(set_routes(&out).is_empty());
    let out = core.handle(ready(&["198.19.2.0/24"]));
    assert_eq!(set_routes(&out).len(), 2);
}

#[test]
fn removed_peer_is_stopped_deconfigured_and_others_untouched() {
    let (mut core, _) = file_core(config("", PEERS));
    let out = core.handle(reload(config(
        "",
        "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n",
    )));
    assert_eq!(stops(&out), [("tor2", &StopReason::Deconfigured)]);
    assert!(resets(&out).is_empty());
    assert!(starts(&out).is_empty());
}

#[test]
fn adding_a_passive_peer_updates_the_listener_in_place_and_resets_nobody() {
    let (mut core, out) = file_core(config("", PEERS));
    let first: Vec<_> = out
        .iter()
        .filter_map(|e| match e {
            Effect::SetListeners(l) => Some(l.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(first.len(), 1);
    let peers3 =
        format!("{PEERS}  - {{name: tor3, address: 192.0.2.3, asn: 65000, passive: true}}\n");
    let out = core.handle(reload(config("", &peers3)));
    let layouts: Vec<_> = out
        .iter()
        .filter_map(|e| match e {
            Effect::SetListeners(l) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(layouts.len(), 1);
    // Same socket address as before: kept, with both peers.
    assert_eq!(
        layouts[0].keys().collect::<Vec<_>>(),
        first[0].keys().collect::<Vec<_>>()
    );
    assert_eq!(layouts[0].values().next().unwrap().len(), 2);
    assert!(resets(&out).is_empty());
    // Nothing about listeners changes: no effect at all.
    let out = core.handle(reload(config("", &peers3)));
    assert!(!out.iter().any(|e| matches!(e, Effect::SetListeners(_))));
}

#[test]
fn rejected_reload_changes_nothing() {
    let (mut core, _) = file_core(config("", PEERS));
    let out = core.handle(Event::ConfigRejected {
        why: "SIGHUP",
        error: errors::Shared::new(errors::ConfigError::SourceNeedsApi(
            podcidr_config::SourceNeedsApi("node-spec"),
        )),
    });
    assert_eq!(out.len(), 1);
    assert!(matches!(
        out[0],
        Effect::Notice(Notice::ReloadRejected { .. })
    ));
}

#[test]
fn node_labels_that_stop_selecting_a_peer_stop_it() {
    let peers = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, nodeSelector: {matchLabels: {rack: r1}}}\n";
    let mut core = Core::with_lookup(api_config("", peers), "node-a".into(), true, lookup);
    assert!(core.start().is_empty(), "nothing before the Node is known");
    core.handle(ready(&[]));
    let labels = |v: &str| NodeFacts {
        labels: [("rack".to_owned(), v.to_owned())].into(),
        ..NodeFacts::default()
    };
    let out = core.handle(core.node_seen(labels("r1")));
    assert_eq!(starts(&out).len(), 1);
    let out = core.handle(core.node_seen(labels("r2")));
    assert_eq!(stops(&out), [("tor1", &StopReason::Deconfigured)]);
}

/// A core that publishes status (minInterval 1 s) for a known node.
fn publishing_core() -> Core {
    let mut core = Core::with_lookup(
        api_config("status: {minInterval: 1}", PEERS),
        "node-a".into(),
        true,
        lookup,
    );
    core.start();
    core.handle(core.node_seen(NodeFacts {
        ..NodeFacts::default()
    }));
    core
}

/// The `Published` answer to the one `Publish` in `out`.
fn published(out: Vec<Effect>, ok: bool) -> Event {
    match out
        .into_iter()
        .find(|e| matches!(e, Effect::Publish { .. }))
    {
        Some(Effect::Publish {
            fingerprint, at, ..
        }) => Event::Published {
            fingerprint,
            at,
            result: if ok {
                Ok(())
            } else {
                Err(ApiWriteError::Unreachable("test".into()))
            },
        },
        _ => panic!("no publish"),
    }
}

#[test]
fn status_is_written_only_when_its_content_changes() {
    let mut core = publishing_core();
    core.handle(ready(&["198.19.1.0/24"]));
    let out = tick(&mut core, 1);
    assert_eq!(publishes(&out), 1);
    let answer = published(out, true);
    // One write at a time.
    assert_eq!(publishes(&tick(&mut core, 3)), 0);
    core.handle(answer);
    for s in 4..30 {
        assert_eq!(
            publishes(&tick(&mut core, s)),
            0,
            "unchanged content at {s}s"
        );
    }
    core.handle(ready(&["198.19.1.0/24", "198.19.2.0/24"]));
    assert_eq!(publishes(&tick(&mut core, 31)), 1);
}

#[test]
fn a_failed_status_write_is_retried() {
    let mut core = publishing_core();
    let out = tick(&mut core, 1);
    core.handle(published(out, false));
    assert_eq!(publishes(&tick(&mut core, 2)), 1);
}

#[test]
fn shutdown_closes_for_graceful_restart_unless_final() {
    let (mut core, _) = file_core(config("", PEERS));
    let out = core.handle(Event::Shutdown { final_stop: false });
    let Some(Effect::StopAll(s)) = out.last() else {
        panic!("{out:?}")
    };
    assert!(s.iter().all(|(_, r)| *r == StopReason::GracefulRestart));
    // No graceful shutdown wait (RFC 8326, core_asn_tests.rs): the Cease at once.
    let (mut core, _) = file_core(config("gracefulShutdown: {wait: 0}", PEERS));
    let out = core.handle(Event::Shutdown { final_stop: true });
    let Some(Effect::StopAll(s)) = out.last() else {
        panic!("{out:?}")
    };
    assert!(s.iter().all(|(_, r)| matches!(r, StopReason::Shutdown(_))));
    // Nothing after a shutdown.
    assert!(core.handle(ready(&["198.19.1.0/24"])).is_empty());
}

#[test]
fn guard_refusal_is_noticed_once_per_appearance() {
    let (mut core, _) = file_core(config("allowedPrefixes: [198.19.0.0/16]", PEERS));
    let out = core.handle(ready(&["198.19.1.0/24", "203.0.113.0/24"]));
    let n = |out: &[Effect]| {
        out.iter()
            .filter(|e| matches!(e, Effect::Notice(Notice::GuardRefused { .. })))
            .count()
    };
    assert_eq!(n(&out), 1);
    assert_eq!(
        n(&core.handle(ready(&["198.19.1.0/24", "203.0.113.0/24"]))),
        0
    );
}

/// The gauge behind `PodcidrGuardRefusals`: what is refused now, not what appeared.
#[test]
fn refused_now_follows_the_current_refusals_not_their_appearance() {
    let (mut core, _) = file_core(config(
        "allowedPrefixes: [198.19.0.0/16, \"fd00:19::/32\"]",
        "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, families: [ipv4-unicast]}\n",
    ));
    let counts = |out: &[Effect]| {
        out.iter()
            .find_map(|e| match e {
                Effect::Notice(Notice::RefusedNow(c)) => Some(*c),
                _ => None,
            })
            .map(|c| c.into_iter().filter(|(_, n)| *n > 0).collect::<Vec<_>>())
    };
    let out = core.handle(ready(&[
        "198.19.1.0/24",
        "203.0.113.0/24",
        "fd00:19:1::/64",
    ]));
    assert_eq!(
        counts(&out),
        Some(vec![
            ("outside-allowed-prefixes", 1),
            ("family-not-carried", 1)
        ])
    );
    // The same refusals again: nothing new to say, and the counts stand.
    assert_eq!(
        counts(&core.handle(ready(&[
            "198.19.1.0/24",
            "203.0.113.0/24",
            "fd00:19:1::/64"
        ]))),
        None
    );
    assert_eq!(counts(&tick(&mut core, 5)), None);
    let out = core.handle(ready(&["198.19.1.0/24"]));
    assert_eq!(counts(&out), Some(vec![]), "back to zero when resolved");
}

fn cni_writes(out: &[Effect]) -> Vec<&CniFile> {
    out.iter()
        .filter_map(|e| match e {
            Effect::WriteCni(f) => Some(f),
            _ => None,
        })
        .collect()
}

const CNI_ON: &str = "cni: {enabled: true, confDir: /host/cni}";

#[test]
fn cni_config_follows_the_announced_set_not_the_raw_source() {
    let mut core = Core::with_lookup(api_config(CNI_ON, PEERS), "node-a".into(), true, lookup);
    core.start();
    core.handle(core.node_seen(NodeFacts {
        ..NodeFacts::default()
    }));
    assert!(
        cni_writes(&core.handle(not_ready())).is_empty(),
        "source not ready"
    );
    // 10.0.0.0/24 is outside allowedPrefixes: refused, so no pod may get an address in it.
    let out = core.handle(ready(&["198.19.1.0/24", "10.0.0.0/24", "fd00:19:1::/64"]));
    let writes = cni_writes(&out);
    assert_eq!(writes.len(), 1, "{out:?}");
    let file = writes[0].clone();
    assert_eq!(
        file.path.to_str(),
        Some("/host/cni/10-podcidr-bgp.conflist")
    );
    assert!(file.content.contains("198.19.1.0/24") && file.content.contains("fd00:19:1::/64"));
    assert!(!file.content.contains("10.0.0.0"), "{}", file.content);

    let out = core.handle(Event::CniWritten {
        file,
        result: Ok(true),
    });
    assert!(out.contains(&Effect::Notice(Notice::CniWritten {
        path: "/host/cni/10-podcidr-bgp.conflist".into(),
        changed: true,
    })));
    assert!(cni_writes(&tick(&mut core, 1)).is_empty(), "written once");
    let cond = core.report_inputs().cni.expect("condition");
    assert_eq!((cond.ok, cond.reason), (true, "Written"));

    // A source outage changes nothing; a new allocation writes the new range.
    assert!(cni_writes(&core.handle(not_ready())).is_empty());
    let out = core.handle(ready(&["198.19.2.0/24"]));
    assert!(cni_writes(&out)[0].content.contains("198.19.2.0/24"));
}

#[test]
fn cni_write_failure_keeps_announcing_and_is_retried_on_ticks() {
    let (mut core, _) = file_core(config(CNI_ON, PEERS));
    let out = core.handle(ready(&["198.19.1.0/24"]));
    assert_eq!(set_routes(&out).len(), 2, "routes go out regardless");
    let file = cni_writes(&out)[0].clone();
    let out = core.handle(Event::CniWritten {
        file,
        result: Err(errors::Shared::new(errors::CniWriteError::NoDir {
            dir: "/host/cni".into(),
        })),
    });
    assert!(matches!(
        &out[..],
        [Effect::Notice(Notice::CniFailed { .. })]
    ));
    let cond = core.report_inputs().cni.unwrap();
    assert_eq!((cond.ok, cond.reason), (false, "WriteFailed"));
    assert!(cni_writes(&tick(&mut core, 5)).is_empty());
    assert_eq!(cni_writes(&tick(&mut core, 11)).len(), 1, "retried");
}

#[test]
fn cni_reload_rewrites_without_touching_sessions() {
    let (mut core, _) = file_core(config("", PEERS));
    assert!(
        cni_writes(&core.handle(ready(&["198.19.1.0/24"]))).is_empty(),
        "off by default"
    );
    assert!(core.report_inputs().cni.is_none());
    let out = core.handle(reload(config(CNI_ON, PEERS)));
    assert_eq!(cni_writes(&out).len(), 1, "{out:?}");
    assert!(resets(&out).is_empty() && stops(&out).is_empty());
}

fn publish_report(out: &[Effect]) -> &podcidr_api::SpeakerReport {
    out.iter()
        .find_map(|e| match e {
            Effect::Publish { report, .. } => Some(&**report),
            _ => None,
        })
        .expect("a publish")
}

fn transition(r: &podcidr_api::SpeakerReport, type_: &str) -> i64 {
    r.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {:?}", r.conditions))
        .last_transition_time
        .0
        .as_second()
}

/// API conventions: `lastTransitionTime` is when the status changed, not when the report
/// was written (it was stamped on every render).
#[test]
fn condition_transition_times_move_only_when_the_status_changes() {
    let mut core = publishing_core();
    core.handle(ready(&["198.19.1.0/24"]));
    let out = tick(&mut core, 1);
    let first = publish_report(&out).clone();
    let t1 = 1_700_000_001;
    assert_eq!(transition(&first, "Ready"), t1);
    assert_eq!(transition(&first, "Refused"), t1);
    core.handle(published(out, true));
    // A refusal appears 30 s later: Refused changes status, Ready does not.
    core.handle(ready(&["198.19.1.0/24", "10.0.0.0/24"]));
    let out = tick(&mut core, 31);
    let second = publish_report(&out);
    assert_eq!(transition(second, "Ready"), t1, "Ready stayed True");
    assert_eq!(transition(second, "Refused"), t1 + 30);
    // What the admin endpoint renders agrees.
    let shown = core.report_inputs().render(1_700_000_040);
    assert_eq!(transition(&shown, "Ready"), t1);
}

/// Status refresh and Lease renewal over simulated hours.
mod asn;
mod bfd;
mod bfd_reload;
mod departure;
mod egress;
mod forwarding;
mod gateways;
mod node_events;
mod objects;
mod publishing;
mod readiness;
mod services;

/// The core is pure by construction, not by habit: no source file of `core/` (tests aside)
/// names a runtime, a client, a socket, a file, a clock or the effectful modules around it.
#[test]
fn the_core_names_no_io_no_clock_and_no_runtime() {
    const FORBIDDEN: &[&str] = &[
        "tokio",
        "kube::",
        "std::fs",
        "std::io::Read",
        "UdpSocket",
        "TcpStream",
        "SystemTime",
        "Instant::now",
        "std::thread",
        "libc::",
        "::driver",
        "daemon::host",
        "daemon::kube",
        "daemon::sessions",
        "daemon::run",
        "crate::time",
        "crate::process",
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/daemon/core");
    let mut files = vec![dir.clone()];
    let mut checked = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            let is_tests = path.file_name().is_some_and(|n| n == "tests");
            if !is_tests || path == dir {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // Inline test modules may do what tests do.
        let code = text
            .split("#[cfg(test)]\nmod tests {")
            .next()
            .unwrap_or_default();
        for word in FORBIDDEN {
            let hit = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .find(|l| l.contains(word));
            assert!(hit.is_none(), "{} names {word}: {hit:?}", path.display());
        }
        checked += 1;
    }
    assert!(checked >= 15, "read {checked} core files");
}
