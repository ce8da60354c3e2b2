//! The core between BFD and BGP (RFC 5882 §3.2): a BFD state change goes to the BGP session
//! as an input; nothing in the core starts or stops a session for BFD, and what holds one
//! down after flaps is a bounded timer (RFC 5882 §3.1, `bfd_dampening`).

use bgp_proto::bfd::{BfdEvent, BfdState, Diag};
use bgp_proto::session::{BfdInput, SessionEvent};

use super::*;

const BFD_PEER: &str = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, bfd: {}}\n";

fn bfd(core: &mut Core, from: BfdState, to: BfdState, remote: BfdState) -> Vec<Effect> {
    core.handle(Event::Session(
        "tor1".into(),
        SessionEvent::Bfd(BfdEvent::StateChanged {
            from,
            to,
            diag: Diag::ControlDetectionTimeExpired,
            remote_state: remote,
        }),
    ))
}

fn bfd_inputs(out: &[Effect]) -> Vec<&BfdInput> {
    out.iter()
        .filter_map(|e| match e {
            Effect::Bfd { name, input } if name == "tor1" => Some(input),
            _ => None,
        })
        .collect()
}

/// Neither stopped, reset nor started: the session keeps running and reconnects itself.
fn untouched(out: &[Effect]) -> bool {
    stops(out).is_empty() && resets(out).is_empty() && starts(out).is_empty()
}

#[test]
fn bfd_timeout_resets_bgp_once_and_never_waits_for_bfd_rfc5882_3_2() {
    let (mut core, _) = file_core(config("", BFD_PEER));
    let out = bfd(&mut core, BfdState::Up, BfdState::Down, BfdState::Down);
    assert_eq!(
        bfd_inputs(&out),
        vec![&BfdInput::Failed("control detection time expired".into())]
    );
    assert!(untouched(&out), "{out:?}");
    // BFD stays down for good (the ToR dropped it): BGP gets nothing that could hold it.
    for (from, to) in [
        (BfdState::Down, BfdState::Init),
        (BfdState::Init, BfdState::Down),
    ] {
        let out = bfd(&mut core, from, to, BfdState::Down);
        assert!(untouched(&out), "{out:?}");
        assert!(
            bfd_inputs(&out)
                .iter()
                .all(|i| matches!(i, BfdInput::NotUp)),
            "{out:?}"
        );
    }
    // Up and down again, a quiet period later: reset again, and nothing held.
    tick(&mut core, bfd_dampening::STABLE_PERIOD.as_secs());
    bfd(&mut core, BfdState::Init, BfdState::Up, BfdState::Up);
    let out = bfd(&mut core, BfdState::Up, BfdState::Down, BfdState::Down);
    assert!(matches!(bfd_inputs(&out)[..], [BfdInput::Failed(_)]));
}

/// One flap: Up, then Down by timeout, at `secs`; the hold-down the BGP session heard.
fn flap(core: &mut Core, secs: u64) -> (Option<Duration>, Vec<Effect>) {
    tick(core, secs);
    bfd(core, BfdState::Init, BfdState::Up, BfdState::Up);
    let out = bfd(core, BfdState::Up, BfdState::Down, BfdState::Down);
    let hold = bfd_inputs(&out).into_iter().find_map(|i| match i {
        BfdInput::HoldDown(h) => Some(*h),
        _ => None,
    });
    (hold, out)
}

#[test]
fn flapping_bfd_holds_bgp_down_longer_at_each_flap_bounded_rfc5882_3_1() {
    let (mut core, _) = file_core(config("", BFD_PEER));
    // A lossy optic: a flap every 200 s, each after the hold-down before it ended.
    let holds: Vec<u64> = (0..9)
        .map(|i| flap(&mut core, 200 * i).0.map_or(0, |h| h.as_secs()))
        .collect();
    assert_eq!(holds, [0, 5, 10, 20, 40, 80, 120, 120, 120]);
    // Each hold-down follows the reset (Failed first), touches nothing else, and is told.
    let (_, out) = flap(&mut core, 1800);
    assert!(matches!(
        bfd_inputs(&out)[..],
        [BfdInput::Failed(_), BfdInput::HoldDown(_)]
    ));
    assert!(untouched(&out), "{out:?}");
    assert!(out.iter().any(|e| matches!(
        e,
        Effect::Notice(Notice::BfdHeldDown { peer, hold, flaps: 7, until_unix })
            if peer == "tor1" && hold.as_secs() == 120 && *until_unix == 1_700_000_000 + 1800 + 120
    )), "{out:?}");
}

#[test]
fn bfd_hold_down_is_an_event_on_the_node_rfc5882_3_1() {
    // With an API to publish Events to.
    let mut core = Core::with_lookup(config("", BFD_PEER), "node-a".into(), true, lookup);
    core.start();
    core.handle(ready(&[]));
    flap(&mut core, 0);
    let (_, out) = flap(&mut core, 10);
    assert!(
        out.iter().any(|e| matches!(
            e,
            Effect::KubeEvent(ev) if ev.reason == EventReason::BfdHoldDown && ev.warning
                && ev.note.contains("held down for 5 s")
        )),
        "{out:?}"
    );
}

#[test]
fn bfd_hold_down_decays_once_bfd_is_stable_and_never_strands_bgp_rfc5882_3_1() {
    let (mut core, _) = file_core(config("", BFD_PEER));
    for i in 0..9 {
        flap(&mut core, 200 * i);
    }
    // Flaps during a running hold-down count but never extend it: BGP comes back on time.
    let (hold, _) = flap(&mut core, 1800);
    assert_eq!(hold, Some(Duration::from_secs(120)));
    assert_eq!(flap(&mut core, 1850).0, None);
    // Stable for a period per remembered flap: the next flap is a first one again.
    let quiet = 1850 + 7 * bfd_dampening::STABLE_PERIOD.as_secs();
    assert_eq!(flap(&mut core, quiet).0, None);
    assert_eq!(flap(&mut core, quiet + 10).0, Some(Duration::from_secs(5)));
}

/// Capability 74 promises the peer a BFD session: when ours cannot start, the BGP session
/// hears so and leaves it out of its OPENs (the FSM side: `fsm_bfd.rs`
/// `strict_capability_74_only_while_our_bfd_runs_draft_bfd_strict_5`).
#[test]
fn bfd_that_cannot_start_takes_capability_74_out_of_the_open_draft_bfd_strict_5() {
    let peers = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, bfd: {strict: true}}\n";
    let (mut core, _) = file_core(config("", peers));
    let out = core.handle(Event::Session(
        "tor1".into(),
        SessionEvent::Bfd(BfdEvent::StartFailed("bind 0.0.0.0:3784: in use".into())),
    ));
    assert_eq!(bfd_inputs(&out), [&BfdInput::Unavailable]);
    assert!(untouched(&out), "{out:?}");
}

#[test]
fn remote_admin_down_never_resets_bgp_rfc5882_3_2() {
    let (mut core, _) = file_core(config("", BFD_PEER));
    let out = bfd(&mut core, BfdState::Up, BfdState::Down, BfdState::AdminDown);
    assert_eq!(bfd_inputs(&out), vec![&BfdInput::Up]);
    assert!(untouched(&out), "{out:?}");
}

#[test]
fn bfd_strict_reaches_the_open_only_with_bfd_on_draft_bfd_strict_3() {
    let strict = |bfd: &str| {
        let peers =
            format!("peers:\n  - {{name: tor1, address: 192.0.2.1, asn: 65000, bfd: {bfd}}}\n");
        let (_, out) = file_core(config("", &peers));
        starts(&out)[0].session_config().bfd_strict
    };
    assert!(strict("{strict: true}"));
    assert!(!strict("{}"));
    // BfdStrictEnabled has no effect without BfdEnabled.
    assert!(!strict("{strict: true, enabled: false}"));
}

#[test]
fn report_says_when_strict_mode_is_not_negotiated_and_since_when_it_waits_draft_bfd_strict_11() {
    let c = config(
        "",
        "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, bfd: {strict: true}}\n",
    );
    let shown = |peer_strict: Option<bool>, waiting: Option<u64>| {
        let mut status = SessionStatus::new(0);
        status.peer_bfd_strict = peer_strict;
        status.waiting_for_bfd_since = waiting;
        let input = report::PeerInput {
            config: c.peers[0].clone(),
            status,
            refused: Arc::from([]),
        };
        let r = report::peer_report(Asn(65010), &input);
        (r.bfd_strict, r.waiting_for_bfd_since)
    };
    assert_eq!(shown(None, None), (Some("configured".into()), None));
    assert_eq!(
        shown(Some(false), None),
        (Some("peerNotStrict".into()), None)
    );
    assert_eq!(
        shown(Some(true), Some(1_700_000_000)),
        (
            Some("negotiated".into()),
            Some("2023-11-14T22:13:20Z".into())
        )
    );
}

/// BFD that cannot start (its socket) is the core's to decide, not the session executor's:
/// the BGP session hears it (strict mode has nothing to wait for: BfdDisabled,
/// draft-ietf-idr-bgp-bfd-strict-mode §8.5.1), nothing is stopped or reset, and the node
/// says why.
#[test]
fn bfd_that_cannot_start_lets_bgp_run_and_is_reported_draft_bfd_strict_8_5_1() {
    let (mut core, _) = file_core(config("", BFD_PEER));
    let out = core.handle(Event::Session(
        "tor1".into(),
        SessionEvent::Bfd(BfdEvent::StartFailed("bind 0.0.0.0:3784: in use".into())),
    ));
    assert_eq!(bfd_inputs(&out), [&BfdInput::Unavailable]);
    assert!(untouched(&out));
    assert!(out.iter().any(|e| matches!(
        e,
        Effect::Notice(Notice::BfdUnavailable { peer, error })
            if peer == "tor1" && error.contains("in use")
    )));
}
