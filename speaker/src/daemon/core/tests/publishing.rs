//! Table tests for when the core writes to the API: the status on change and hourly, the
//! Lease every minute, over simulated hours.

use super::*;

/// The config reloaded with the node renamed to node-b, as a changed `NODE_NAME` does.
fn rename_to_node_b(core: &mut Core) {
    let mut renamed = api_config("status: {minInterval: 1}", PEERS);
    renamed.node_name = Some("node-b".into());
    core.handle(Event::ConfigReloaded {
        kernel: kernel_facts(&renamed, Default::default(), lookup),
        config: Box::new(renamed),
        node_name: "node-b".into(),
        why: "test",
        origin: ConfigOrigin::File,
    });
}

fn renewals(out: &[Effect]) -> usize {
    out.iter()
        .filter(|e| matches!(e, Effect::RenewLease { .. }))
        .count()
}

/// What moves from one tick to the next while nothing happens to the node.
#[derive(Debug, Clone, Copy)]
enum Churn {
    Nothing,
    /// Keepalives: both sessions Established, message counters growing every second.
    Keepalives,
    /// A down router: the session cycles through Connect and Active, `since` moving.
    Retries,
}

fn statuses(churn: Churn, secs: u64) -> BTreeMap<String, SessionStatus> {
    ["tor1", "tor2"]
        .into_iter()
        .map(|n| {
            let mut s = SessionStatus::new(0);
            match churn {
                Churn::Nothing => {}
                Churn::Keepalives => {
                    s.state = bgp_proto::session::State::Established;
                    s.sent.messages.insert("KEEPALIVE", secs / 30);
                    s.received.messages.insert("KEEPALIVE", secs / 30);
                }
                Churn::Retries => {
                    s.state = if secs % 20 < 10 {
                        bgp_proto::session::State::Connect
                    } else {
                        bgp_proto::session::State::Active
                    };
                    s.since = 1_700_000_000 + secs / 10 * 10;
                    s.connect_attempts = secs / 20;
                    s.last_error = Some("connection refused".into());
                }
            }
            (n.to_owned(), s)
        })
        .collect()
}

/// Runs `secs` seconds of ticks, answering every write at once (ok), and counts
/// (status writes, Lease renewals) after the first second.
fn idle_for(core: &mut Core, churn: Churn, secs: u64) -> (usize, usize) {
    let (mut writes, mut renewed) = (0, 0);
    for s in 1..=secs {
        let out = core.handle(Event::Tick {
            now: Duration::from_secs(s),
            unix: 1_700_000_000 + s,
            statuses: statuses(churn, s),
        });
        let mut answers = Vec::new();
        for e in &out {
            match e {
                Effect::Publish {
                    fingerprint, at, ..
                } => {
                    writes += 1;
                    answers.push(Event::Published {
                        fingerprint: *fingerprint,
                        at: *at,
                        result: Ok(()),
                    });
                }
                Effect::RenewLease { node, at, .. } => {
                    renewed += 1;
                    answers.push(Event::LeaseRenewed {
                        unix: 0,
                        node: node.clone(),
                        at: *at,
                        result: Ok(()),
                    });
                }
                _ => {}
            }
        }
        for a in answers {
            core.handle(a);
        }
    }
    (writes, renewed)
}

/// The target: with nothing changing, at most one `NodeBGPStatus` write per node per
/// hour (it was a write every 60 s, and one per keepalive); liveness is one Lease renewal a
/// minute. Three simulated hours per row.
#[test]
fn idle_status_is_written_once_an_hour_and_the_lease_renewed_every_minute() {
    for churn in [Churn::Nothing, Churn::Keepalives, Churn::Retries] {
        let mut core = publishing_core();
        core.handle(ready(&["198.19.1.0/24"]));
        let (writes, renewed) = idle_for(&mut core, churn, 3 * 3600);
        // The first write at 1 s, refreshes at 3601 s and 7201 s.
        assert_eq!(writes, 3, "{churn:?}");
        assert_eq!(renewed, 180, "{churn:?}: at 1 s, 61 s, ..., 10741 s");
    }
}

#[test]
fn a_change_is_one_write_whatever_else_moves() {
    let mut core = publishing_core();
    core.handle(ready(&["198.19.1.0/24"]));
    assert_eq!(idle_for(&mut core, Churn::Keepalives, 600).0, 1);
    core.handle(ready(&["198.19.1.0/24", "198.19.2.0/24"]));
    let out = core.handle(Event::Tick {
        now: Duration::from_secs(601),
        unix: 1_700_000_601,
        statuses: statuses(Churn::Keepalives, 601),
    });
    assert_eq!(publishes(&out), 1);
    assert_eq!(publish_report(&out).allocated.len(), 2);
}

#[test]
fn lease_renewals_one_at_a_time_a_failure_retried_after_ten_seconds() {
    let mut core = publishing_core();
    let out = tick(&mut core, 1);
    assert_eq!(renewals(&out), 1);
    let Some(Effect::RenewLease {
        node,
        duration,
        unix,
        at,
        ..
    }) = out
        .iter()
        .find(|e| matches!(e, Effect::RenewLease { .. }))
        .cloned()
    else {
        panic!("{out:?}")
    };
    assert_eq!(
        (node.as_str(), duration, unix),
        ("node-a", LEASE_DURATION, 1_700_000_001)
    );
    // Still in flight: no second renewal.
    assert_eq!(renewals(&tick(&mut core, 5)), 0);
    core.handle(Event::LeaseRenewed {
        unix: 0,
        node: node.clone(),
        at,
        result: Err(ApiWriteError::Unreachable("test".into())),
    });
    assert_eq!(renewals(&tick(&mut core, 6)), 0, "retry waits 10 s");
    let out = tick(&mut core, 11);
    assert_eq!(renewals(&out), 1, "retried 10 s after the failed attempt");
    core.handle(Event::LeaseRenewed {
        unix: 0,
        node: "node-a".into(),
        at: Duration::from_secs(11),
        result: Ok(()),
    });
    assert_eq!(renewals(&tick(&mut core, 70)), 0);
    assert_eq!(renewals(&tick(&mut core, 71)), 1, "60 s after the success");
}

#[test]
fn no_lease_without_the_api_or_with_status_publishing_off() {
    let (mut core, _) = file_core(config("", PEERS));
    assert_eq!(renewals(&tick(&mut core, 1)), 0, "no API");
    let mut core = Core::with_lookup(
        api_config("status: {publish: false}", PEERS),
        "node-a".into(),
        true,
        lookup,
    );
    core.start();
    assert_eq!(renewals(&tick(&mut core, 1)), 0, "publish: false");
}

#[test]
fn the_lease_is_about_the_process_not_the_node_and_follows_a_rename() {
    let mut core = Core::with_lookup(
        api_config("status: {minInterval: 1}", PEERS),
        "node-a".into(),
        true,
        lookup,
    );
    core.start();
    // The Node is not known yet and the source not ready: the process runs all the same.
    let out = tick(&mut core, 1);
    assert_eq!(renewals(&out), 1);
    assert!(
        out.iter()
            .any(|e| matches!(e, Effect::RenewLease { node_uid: None, .. }))
    );
    core.handle(Event::LeaseRenewed {
        unix: 0,
        node: "node-a".into(),
        at: Duration::from_secs(1),
        result: Ok(()),
    });
    // The Node's UID arrives: renewed at once, now owned by the Node.
    core.handle(core.node_seen(NodeFacts {
        uid: Some("uid-a".into()),
        ..NodeFacts::default()
    }));
    let out = tick(&mut core, 2);
    assert!(
        out.iter().any(|e| matches!(
            e,
            Effect::RenewLease { node_uid: Some(u), .. } if u == "uid-a"
        )),
        "{out:?}"
    );
    core.handle(Event::LeaseRenewed {
        unix: 0,
        node: "node-a".into(),
        at: Duration::from_secs(2),
        result: Ok(()),
    });
    assert_eq!(renewals(&tick(&mut core, 3)), 0, "then every minute again");
    rename_to_node_b(&mut core);
    let out = tick(&mut core, 4);
    assert!(
        out.iter().any(|e| matches!(
            e,
            Effect::RenewLease { node, node_uid: None, .. } if node == "node-b"
        )),
        "the new node's Lease at once, not owned by the old Node: {out:?}"
    );
}

/// Bug from reading: after a rename the status and the Events still named the old Node's
/// UID as their owner (the Lease did not), so the new node's NodeBGPStatus could be
/// garbage-collected as the dependent of a Node that is not its own. Followed through a
/// second publish: the old UID never appears, the new one does once the new Node is seen.
#[test]
fn a_renamed_nodes_status_and_events_never_carry_the_old_nodes_uid() {
    let mut core = Core::with_lookup(
        api_config("status: {minInterval: 1}", PEERS),
        "node-a".into(),
        true,
        lookup,
    );
    core.start();
    core.handle(core.node_seen(NodeFacts {
        uid: Some("uid-a".into()),
        ..NodeFacts::default()
    }));
    core.handle(ready(&["198.19.1.0/24"]));
    let publish_uid = |out: &[Effect]| {
        out.iter().find_map(|e| match e {
            Effect::Publish {
                node_uid,
                fingerprint,
                at,
                ..
            } => Some((node_uid.clone(), *fingerprint, *at)),
            _ => None,
        })
    };
    let answer = |core: &mut Core, (_, fingerprint, at): (Option<String>, u64, Duration)| {
        core.handle(Event::Published {
            fingerprint,
            at,
            result: Ok(()),
        });
    };
    let first = publish_uid(&tick(&mut core, 1)).expect("first publish");
    assert_eq!(first.0.as_deref(), Some("uid-a"));
    answer(&mut core, first);

    rename_to_node_b(&mut core);
    // A change to publish, and an Event, before the new Node is seen.
    let out = core.handle(ready(&["198.19.1.0/24", "198.19.2.0/24"]));
    let mut events: Vec<Option<String>> = out
        .iter()
        .filter_map(|e| match e {
            Effect::KubeEvent(ev) => Some(ev.node_uid.clone()),
            _ => None,
        })
        .collect();
    let out = core.handle(Event::Session(
        "tor1".into(),
        bgp_proto::session::SessionEvent::StateChanged {
            from: bgp_proto::session::State::OpenConfirm,
            to: bgp_proto::session::State::Established,
            reason: None,
        },
    ));
    events.extend(out.iter().filter_map(|e| match e {
        Effect::KubeEvent(ev) => Some(ev.node_uid.clone()),
        _ => None,
    }));
    assert!(!events.is_empty(), "an Event about node-b was raised");
    assert!(
        events.iter().all(|u| u.is_none()),
        "Events about node-b carry no owner UID until node-b is seen: {events:?}"
    );
    let second = publish_uid(&tick(&mut core, 2)).expect("second publish, after the rename");
    assert_eq!(second.0, None, "not owned by node-a's Node");
    answer(&mut core, second);

    core.handle(core.node_seen(NodeFacts {
        uid: Some("uid-b".into()),
        ..NodeFacts::default()
    }));
    core.handle(ready(&["198.19.2.0/24"]));
    let third = publish_uid(&tick(&mut core, 3)).expect("third publish");
    assert_eq!(third.0.as_deref(), Some("uid-b"));
}
