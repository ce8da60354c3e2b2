//! The core between BFD and BGP (RFC 5882 §3.2): a BFD state change goes to the BGP session
//! as an input; nothing in the core holds a session down, starts or stops it for BFD.

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
fn bfd_timeout_resets_bgp_once_and_never_holds_it_rfc5882_3_2() {
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
    // Up and down again: reset again.
    bfd(&mut core, BfdState::Init, BfdState::Up, BfdState::Up);
    let out = bfd(&mut core, BfdState::Up, BfdState::Down, BfdState::Down);
    assert!(matches!(bfd_inputs(&out)[..], [BfdInput::Failed(_)]));
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
/// the BGP session hears Up (strict mode has nothing to wait for: BfdDisabled,
/// draft-ietf-idr-bgp-bfd-strict-mode §8.5.1), nothing is stopped or reset, and the node
/// says why.
#[test]
fn bfd_that_cannot_start_lets_bgp_run_and_is_reported_draft_bfd_strict_8_5_1() {
    let (mut core, _) = file_core(config("", BFD_PEER));
    let out = core.handle(Event::Session(
        "tor1".into(),
        SessionEvent::Bfd(BfdEvent::StartFailed("bind 0.0.0.0:3784: in use".into())),
    ));
    assert_eq!(bfd_inputs(&out), [&BfdInput::Up]);
    assert!(untouched(&out));
    assert!(out.iter().any(|e| matches!(
        e,
        Effect::Notice(Notice::BfdUnavailable { peer, error })
            if peer == "tor1" && error.contains("in use")
    )));
}
