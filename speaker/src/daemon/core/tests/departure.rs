//! Table tests for departure vs restart at SIGTERM (issue 23 item 4): every Node signal that
//! says the node is leaving makes the stop an RFC 8326 graceful shutdown and a Cease; a pod
//! restart on a staying node keeps graceful restart.

use std::sync::Arc;
use std::time::Duration;

use bgp_proto::session::StopReason;
use ipam_watch::source::DesiredSet;
use podcidr_config::Config;

use super::super::departure::Departure;
use super::*;

const PEERS: &str = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n  - {name: tor2, address: 192.0.2.2, asn: 65000}\n";

fn config(top: &str) -> Config {
    Config::from_yaml_str(&format!(
        "asn: 65010\nrouterId: 192.0.2.10\nsource: {{kind: ipam-crd}}\nallowedPrefixes: [198.19.0.0/16]\n{top}\n{PEERS}"
    ))
    .unwrap()
}

fn lookup(_: &PeerAddress) -> Option<std::net::IpAddr> {
    Some("192.0.2.10".parse().unwrap())
}

fn ready() -> Event {
    Event::Desired(Arc::new(DesiredSet {
        ready: true,
        cidrs: vec!["198.19.1.0/24".parse().unwrap()],
        ..DesiredSet::default()
    }))
}

/// A node with sessions running, seen as `facts`.
fn core_on(top: &str, facts: NodeFacts) -> Core {
    let mut core = Core::with_lookup(config(top), "node-a".into(), true, lookup);
    core.start();
    core.handle(ready());
    core.handle(core.node_seen(facts));
    core
}

fn tainted(key: &str) -> NodeFacts {
    NodeFacts {
        taints: vec![key.to_owned()],
        ..NodeFacts::default()
    }
}

/// What a stop does: `Ok(message)` for a departure (wait, then Cease with this message),
/// `Err(())` for a graceful-restart close. Asserts the path's shape on the way.
fn stop(core: &mut Core, forced: bool) -> Result<String, ()> {
    let out = core.handle(Event::Shutdown { final_stop: forced });
    if let Some(Effect::StopAll(s)) = out.last() {
        assert!(
            s.iter().all(|(_, r)| *r == StopReason::GracefulRestart),
            "a stop without the RFC 8326 wait is a restart: {out:?}"
        );
        return Err(());
    }
    assert_eq!(
        out.last(),
        Some(&Effect::GracefulShutdownWait(Duration::from_secs(5))),
        "{out:?}"
    );
    let out = core.handle(Event::Shutdown { final_stop: forced });
    let Some(Effect::StopAll(s)) = out.last() else {
        panic!("{out:?}")
    };
    let messages: Vec<&String> = s
        .iter()
        .map(|(_, r)| match r {
            StopReason::Shutdown(m) => m,
            other => panic!("a departure ends with a Cease, not {other:?}"),
        })
        .collect();
    assert_eq!(messages.len(), 2);
    Ok(messages[0].clone())
}

#[test]
fn each_node_signal_of_leaving_makes_the_stop_a_departure_rfc8326() {
    let table: Vec<(&str, NodeFacts, Departure, &str)> = vec![
        (
            "Node deleted (watch Delete)",
            NodeFacts {
                deleted: true,
                ..NodeFacts::default()
            },
            Departure::NodeDeleted,
            "the Node was deleted",
        ),
        (
            "deletionTimestamp set",
            NodeFacts {
                deleting: true,
                ..NodeFacts::default()
            },
            Departure::NodeDeleting,
            "being deleted",
        ),
        (
            "cluster autoscaler scale-down",
            tainted("ToBeDeletedByClusterAutoscaler"),
            Departure::Taint("ToBeDeletedByClusterAutoscaler"),
            "cluster autoscaler",
        ),
        (
            "Karpenter v1 disruption",
            tainted("karpenter.sh/disrupted"),
            Departure::Taint("karpenter.sh/disrupted"),
            "Karpenter",
        ),
        (
            "Karpenter v0.3x disruption",
            tainted("karpenter.sh/disruption"),
            Departure::Taint("karpenter.sh/disruption"),
            "Karpenter",
        ),
        (
            "non-graceful node shutdown",
            tainted("node.kubernetes.io/out-of-service"),
            Departure::Taint("node.kubernetes.io/out-of-service"),
            "out of service",
        ),
        (
            "cloud instance shut down",
            tainted("node.cloudprovider.kubernetes.io/shutdown"),
            Departure::Taint("node.cloudprovider.kubernetes.io/shutdown"),
            "shut down",
        ),
        (
            "kubelet graceful node shutdown",
            NodeFacts {
                not_ready: Some("node is shutting down".into()),
                ..NodeFacts::default()
            },
            Departure::ShuttingDown,
            "shutting down",
        ),
        (
            "kubelet graceful node shutdown among other errors",
            NodeFacts {
                not_ready: Some("[container runtime is down, node is shutting down]".into()),
                ..NodeFacts::default()
            },
            Departure::ShuttingDown,
            "shutting down",
        ),
        (
            "cordoned (spec.unschedulable)",
            NodeFacts {
                unschedulable: true,
                ..NodeFacts::default()
            },
            Departure::Cordoned,
            "cordoned",
        ),
        (
            "cordoned (taint only)",
            tainted("node.kubernetes.io/unschedulable"),
            Departure::Cordoned,
            "cordoned",
        ),
    ];
    for (case, facts, want, said) in table {
        // A cordon departs only when asked to (gracefulShutdown.departOnCordon).
        let mut core = core_on("gracefulShutdown: {departOnCordon: true}", facts.clone());
        assert_eq!(
            super::super::departure::departure(&facts, &core.config),
            Some(want.clone()),
            "{case}"
        );
        let message = stop(&mut core, false).unwrap_or_else(|()| panic!("{case}: a restart"));
        assert!(
            message.starts_with("podcidr-bgp speaker stopping: node leaving (")
                && message.contains(said),
            "{case}: {message}"
        );
        assert!(message.len() <= 255, "RFC 9003 caps the message: {message}");
    }
}

#[test]
fn a_pod_restart_on_a_staying_node_closes_for_graceful_restart_rfc4724() {
    let table: Vec<(&str, NodeFacts)> = vec![
        ("a healthy node", NodeFacts::default()),
        (
            "NotReady for another reason",
            NodeFacts {
                not_ready: Some("container runtime network not ready".into()),
                ..NodeFacts::default()
            },
        ),
        ("an unrelated taint", tainted("example.com/gpu")),
        (
            "a scale-down candidate only (soft taint)",
            tainted("DeletionCandidateOfClusterAutoscaler"),
        ),
        (
            "NoSchedule for not-ready (node lifecycle controller)",
            tainted("node.kubernetes.io/not-ready"),
        ),
    ];
    for (case, facts) in table {
        let mut core = core_on("", facts);
        assert_eq!(stop(&mut core, false), Err(()), "{case}");
    }
}

/// Issue 30 item 8: a cordon alone (a drain blocked by a PodDisruptionBudget, an
/// investigation, a batch cordoned ahead of draining) leaves a node serving; a pod restart
/// there must not withdraw it. Only `departOnCordon` makes it a departure.
#[test]
fn cordon_alone_is_a_restart_unless_depart_on_cordon_is_set() {
    let cordoned = || NodeFacts {
        unschedulable: true,
        ..NodeFacts::default()
    };
    for top in [
        "",
        "gracefulShutdown: {onCordon: false}",
        "gracefulShutdown: {onCordon: true}",
    ] {
        let mut core = core_on(top, cordoned());
        assert_eq!(stop(&mut core, false), Err(()), "{top:?}");
    }
    let mut core = core_on("gracefulShutdown: {departOnCordon: true}", cordoned());
    assert!(stop(&mut core, false).is_ok());
}

#[test]
fn final_forces_a_departure_on_a_staying_node() {
    let mut core = core_on("", NodeFacts::default());
    assert_eq!(
        stop(&mut core, true),
        Ok("podcidr-bgp speaker stopping".to_owned())
    );
}

#[test]
fn the_node_as_seen_at_sigterm_decides_and_the_first_signal_keeps_its_decision() {
    let mut core = core_on("", tainted("ToBeDeletedByClusterAutoscaler"));
    // Scale-down cancelled: the autoscaler removes its taint again.
    core.handle(core.node_seen(NodeFacts::default()));
    assert_eq!(stop(&mut core, false), Err(()));

    let mut core = core_on("", NodeFacts::default());
    let out = core.handle(Event::Shutdown { final_stop: false });
    assert!(matches!(out.last(), Some(Effect::StopAll(_))));
    // The Node starts leaving after the stop began: nothing changes any more.
    assert!(
        core.handle(core.node_seen(NodeFacts {
            deleting: true,
            ..NodeFacts::default()
        }))
        .is_empty()
    );

    // During the RFC 8326 wait the Node comes back: the departure goes on to its Cease.
    let mut core = core_on("", tainted("ToBeDeletedByClusterAutoscaler"));
    let out = core.handle(Event::Shutdown { final_stop: false });
    assert!(matches!(out.last(), Some(Effect::GracefulShutdownWait(_))));
    core.handle(core.node_seen(NodeFacts::default()));
    let out = core.handle(Event::Shutdown { final_stop: false });
    let Some(Effect::StopAll(s)) = out.last() else {
        panic!("{out:?}")
    };
    assert!(s.iter().all(|(_, r)| matches!(r, StopReason::Shutdown(_))));
}

#[test]
fn file_mode_has_no_node_and_stops_for_graceful_restart() {
    let c = Config::from_yaml_str(&format!(
        "asn: 65010\nrouterId: 192.0.2.10\nsource: {{kind: file, path: /x}}\n{PEERS}"
    ))
    .unwrap();
    let mut core = Core::with_lookup(c, "node-a".into(), false, lookup);
    core.start();
    core.handle(ready());
    assert_eq!(stop(&mut core, false), Err(()));
}

#[test]
fn what_a_stop_would_be_is_logged_when_it_changes() {
    let departures = |out: &[Effect]| -> Vec<Option<Departure>> {
        out.iter()
            .filter_map(|e| match e {
                Effect::Notice(Notice::Departure(d)) => Some(d.clone()),
                _ => None,
            })
            .collect()
    };
    let mut core = core_on("", NodeFacts::default());
    let out = core.handle(core.node_seen(tainted("ToBeDeletedByClusterAutoscaler")));
    assert_eq!(
        departures(&out),
        [Some(Departure::Taint("ToBeDeletedByClusterAutoscaler"))]
    );
    // The same facts again: no new line.
    assert!(departures(&core.handle(ready())).is_empty());
    let out = core.handle(core.node_seen(NodeFacts::default()));
    assert_eq!(departures(&out), [None]);
    let out = core.handle(Event::Shutdown { final_stop: false });
    assert!(
        out.contains(&Effect::Notice(Notice::Stopping(None))),
        "{out:?}"
    );
}
