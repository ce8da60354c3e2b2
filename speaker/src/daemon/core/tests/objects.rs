//! Objects mode (`--config-source kubernetes`): the core starts with no config and gets the
//! node's configuration objects as reloads carrying where they came from.

use super::*;
use crate::objects::{NodeConfig, ObjectKind, ObjectRef};

const GR_PEERS: &str = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n";

fn objects_core() -> Core {
    Core::with_lookup(Config::unconfigured(), "node-a".into(), true, lookup)
        .with_origin(ConfigOrigin::Objects(None))
}

fn reference(kind: ObjectKind, name: &str, generation: i64) -> ObjectRef {
    ObjectRef {
        kind,
        name: name.into(),
        generation: Some(generation),
    }
}

fn node_config(config: Option<Config>) -> NodeConfig {
    NodeConfig {
        speaker_config: config
            .is_some()
            .then(|| reference(ObjectKind::SpeakerConfig, "default", 3)),
        peers: config
            .iter()
            .flat_map(|c| &c.peers)
            .map(|p| reference(ObjectKind::Peer, &p.name, 1))
            .collect(),
        config,
        last_good: Vec::new(),
        not_applied: Vec::new(),
        cannot_run: Vec::new(),
        key_refs: std::collections::BTreeMap::new(),
    }
}

fn objects(nc: NodeConfig) -> Event {
    let config = nc.config.clone().unwrap_or_else(Config::unconfigured);
    Event::ConfigReloaded {
        kernel: kernel_facts(&config, Default::default(), lookup),
        config: Box::new(config),
        node_name: "node-a".into(),
        why: "configuration objects changed",
        origin: ConfigOrigin::Objects(Some(Arc::new(nc))),
    }
}

fn ready_effects(out: &[Effect]) -> Vec<bool> {
    out.iter()
        .filter_map(|e| match e {
            Effect::SetReady(r) => Some(*r),
            _ => None,
        })
        .collect()
}

fn events(out: &[Effect]) -> Vec<(&'static str, &str)> {
    out.iter()
        .filter_map(|e| match e {
            Effect::KubeEvent(ev) => Some((ev.reason.as_str(), ev.action.as_str())),
            _ => None,
        })
        .collect()
}

fn rendered(core: &Core) -> podcidr_api::SpeakerReport {
    core.report_inputs().render(1_700_000_000)
}

fn condition<'a>(
    r: &'a podcidr_api::SpeakerReport,
    type_: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    r.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {:?}", r.conditions))
}

/// A speaker restarted in objects mode learns its peers after it starts: they must still
/// open as a restarted process's sessions do (R bit, held until the routes are known), or
/// the routers drop the routes they kept for us.
#[test]
fn peers_from_objects_open_as_a_restarted_speakers_do_rfc4724_4_2() {
    let mut core = objects_core();
    assert!(starts(&core.start()).is_empty());
    assert_eq!(
        publishes(&tick(&mut core, 1)),
        0,
        "nothing to say before the objects"
    );

    let out = core.handle(objects(node_config(Some(api_config("", GR_PEERS)))));
    assert!(
        out.iter()
            .any(|e| matches!(e, Effect::RestartSource { .. })),
        "{out:?}"
    );
    assert!(starts(&out).is_empty(), "the Node is not seen yet");
    assert!(starts(&core.handle(core.node_seen(NodeFacts::default()))).is_empty());
    let out = core.handle(ready(&["198.19.1.0/24"]));
    let s = starts(&out);
    assert_eq!(s.len(), 1, "{out:?}");
    assert!(s[0].restarting, "the R bit: this process restarted");
    assert_eq!(s[0].routes.as_ref().map(|r| r.len()), Some(1));
}

#[test]
fn a_file_source_from_objects_has_no_node_to_wait_for() {
    let mut core = objects_core();
    core.start();
    let mut out = core.handle(objects(node_config(Some(config("", GR_PEERS)))));
    out.extend(core.handle(ready(&["198.19.1.0/24"])));
    let names: Vec<&str> = starts(&out)
        .iter()
        .map(|s| s.config.name.as_str())
        .collect();
    assert_eq!(names, ["tor1"], "no Node to wait for: {out:?}");
}

#[test]
fn a_node_no_speaker_config_selects_is_ready_and_its_status_says_why() {
    let mut core = objects_core();
    core.start();
    assert!(!rendered(&core).conditions.is_empty());
    assert_eq!(
        condition(&rendered(&core), "ConfigApplied").reason,
        "Waiting"
    );

    let mut nc = node_config(None);
    nc.not_applied.push((
        ObjectKind::SpeakerConfig,
        "rack9".into(),
        "spec.asn: required".into(),
    ));
    let out = core.handle(objects(nc));
    assert_eq!(
        ready_effects(&out),
        [true],
        "it does what it is configured to: nothing"
    );
    assert!(starts(&out).is_empty());
    let r = rendered(&core);
    let applied = condition(&r, "ConfigApplied");
    assert_eq!(
        (applied.status.as_str(), applied.reason.as_str()),
        ("False", "NoSpeakerConfig")
    );
    assert!(
        applied
            .message
            .contains("BGPSpeakerConfig rack9: spec.asn: required")
    );
    assert_eq!(condition(&r, "Ready").status, "True");
    assert!(
        r.conditions.iter().all(|c| c.type_ != "ConfigValid"),
        "a file's condition"
    );
    let config = r.config.expect("status.config");
    assert!(config.speaker_config.is_none());
    assert_eq!(config.not_applied[0].kind, "BGPSpeakerConfig");
    assert!(
        publishes(&tick(&mut core, 1)) == 1,
        "published once the objects are known"
    );
}

#[test]
fn status_names_the_objects_and_generations_each_session_comes_from() {
    let mut core = objects_core();
    core.start();
    core.handle(objects(node_config(Some(api_config("", GR_PEERS)))));
    core.handle(core.node_seen(NodeFacts::default()));
    core.handle(ready(&["198.19.1.0/24"]));
    let statuses: BTreeMap<String, SessionStatus> =
        [("tor1".to_owned(), SessionStatus::new(0))].into();
    core.handle(Event::Tick {
        now: Duration::from_secs(1),
        unix: 1_700_000_001,
        statuses,
    });
    let r = rendered(&core);
    assert_eq!(r.peers[0].bgp_peer.as_deref(), Some("tor1"));
    let config = r.config.clone().expect("status.config");
    assert_eq!(
        config
            .speaker_config
            .as_ref()
            .map(|o| (o.name.as_str(), o.generation)),
        Some(("default", Some(3)))
    );
    assert_eq!(config.peers[0].name, "tor1");
    assert_eq!(config.peers[0].generation, Some(1));
    let applied = condition(&r, "ConfigApplied");
    assert_eq!(
        (applied.status.as_str(), applied.reason.as_str()),
        ("True", "Applied")
    );
}

#[test]
fn a_last_good_object_is_reported_once_as_an_event_and_cleared_with_another() {
    let mut core = objects_core();
    core.start();
    core.handle(core.node_seen(NodeFacts::default()));
    let good = node_config(Some(api_config("", GR_PEERS)));
    core.handle(objects(good.clone()));

    let mut stale = good.clone();
    stale.last_good.push((
        reference(ObjectKind::Peer, "tor1", 1),
        "the current version is not usable: BGPPeer tor1: spec.holdTime: 2 is not allowed".into(),
    ));
    let out = core.handle(objects(stale.clone()));
    assert_eq!(events(&out), [("BGPConfigLastGood", "Config BGPPeer tor1")]);
    assert!(
        resets(&out).is_empty() && stops(&out).is_empty(),
        "the session goes on"
    );
    let r = rendered(&core);
    let applied = condition(&r, "ConfigApplied");
    assert_eq!(
        (applied.status.as_str(), applied.reason.as_str()),
        ("False", "LastGood")
    );
    assert!(applied.message.contains("BGPPeer tor1 runs generation 1"));
    assert!(r.config.unwrap().peers[0].last_good.is_some());

    assert!(events(&core.handle(objects(stale))).is_empty(), "once");
    let out = core.handle(objects(good));
    assert_eq!(events(&out), [("BGPConfigApplied", "Config")]);
}

#[test]
fn an_edit_of_one_peer_resets_only_that_session() {
    let two = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n  - {name: tor2, address: 192.0.2.2, asn: 65000}\n";
    let edited = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, holdTime: 30}\n  - {name: tor2, address: 192.0.2.2, asn: 65000}\n";
    let mut core = objects_core();
    core.start();
    core.handle(objects(node_config(Some(api_config("", two)))));
    core.handle(core.node_seen(NodeFacts::default()));
    assert_eq!(starts(&core.handle(ready(&["198.19.1.0/24"]))).len(), 2);
    let out = core.handle(objects(node_config(Some(api_config("", edited)))));
    let reset: Vec<&str> = resets(&out)
        .iter()
        .map(|s| s.config.name.as_str())
        .collect();
    assert_eq!(reset, ["tor1"]);
    assert!(starts(&out).is_empty() && stops(&out).is_empty());
}

fn readiness(out: &[Effect]) -> Vec<&crate::daemon::core::readiness::Readiness> {
    out.iter()
        .filter_map(|e| match e {
            Effect::SetReadiness(r) => Some(r),
            _ => None,
        })
        .collect()
}

fn coverage(out: &[Effect]) -> Vec<Coverage> {
    out.iter()
        .filter_map(|e| match e {
            Effect::Notice(Notice::Coverage(c)) => Some(*c),
            _ => None,
        })
        .collect()
}

/// Issue 30: a restarted speaker that cannot run what selects its node, with no last good
/// version, must not pass the rollout gate as "nothing selects me" did.
#[test]
fn a_node_selected_by_a_config_that_cannot_run_without_last_good_is_not_ready_and_says_why() {
    let mut core = objects_core();
    core.start();
    let mut nc = node_config(None);
    nc.not_applied.push((
        ObjectKind::SpeakerConfig,
        "default".into(),
        "spec.allowedPrefixes[0]: has host bits set".into(),
    ));
    nc.cannot_run
        .push((ObjectKind::SpeakerConfig, "default".into()));
    let out = core.handle(objects(nc));
    assert!(ready_effects(&out).iter().all(|r| !r), "{out:?}");
    let why = readiness(&out);
    assert_eq!(why.len(), 1, "{out:?}");
    assert!(!why[0].ready);
    assert!(
        why[0]
            .why
            .contains("BGPSpeakerConfig default: spec.allowedPrefixes[0]: has host bits set"),
        "{}",
        why[0].why
    );
    let r = rendered(&core);
    let ready = condition(&r, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "ConfigObjectCannotRun")
    );
    assert_eq!(
        condition(&r, "ConfigApplied").reason,
        "SpeakerConfigCannotRun"
    );
}

/// Issue 30: the failure no per-peer series shows. Peers dropped from the config (not
/// down: gone) leave the source's CIDRs offered to nobody.
#[test]
fn peers_dropped_from_the_config_leave_the_source_cidrs_announced_to_none() {
    let mut core = objects_core();
    core.start();
    core.handle(objects(node_config(Some(config("", GR_PEERS)))));
    let out = core.handle(ready(&["198.19.1.0/24"]));
    assert_eq!(
        coverage(&out),
        [Coverage {
            source: 1,
            announced: 1
        }],
        "{out:?}"
    );
    // Every BGPPeer gone from the node (deleted, unselected, unusable): the config alone.
    let mut alone = config("", GR_PEERS);
    alone.peers.clear();
    let out = core.handle(objects(node_config(Some(alone))));
    assert_eq!(
        coverage(&out),
        [Coverage {
            source: 1,
            announced: 0
        }],
        "{out:?}"
    );
}

/// The coverage count walks each peer's set with a cursor: a source list out of order, and
/// a CIDR the guard refuses (outside `allowedPrefixes`), are counted as a per-CIDR search
/// would, and an event that changes neither the source nor a peer's routes says nothing.
#[test]
fn coverage_counts_an_unordered_source_and_only_changes_are_said() {
    let mut core = objects_core();
    core.start();
    let allowed = "allowedPrefixes: [198.19.0.0/16]";
    core.handle(objects(node_config(Some(config(allowed, GR_PEERS)))));
    let out = core.handle(ready(&["198.19.3.0/24", "10.9.0.0/24", "198.19.1.0/24"]));
    assert_eq!(
        coverage(&out),
        [Coverage {
            source: 3,
            announced: 2
        }],
        "{out:?}"
    );
    let out = core.handle(Event::Session(
        "tor1".into(),
        bgp_proto::session::SessionEvent::StateChanged {
            from: bgp_proto::session::State::OpenConfirm,
            to: bgp_proto::session::State::Established,
            reason: None,
        },
    ));
    assert!(coverage(&out).is_empty(), "{out:?}");
}
