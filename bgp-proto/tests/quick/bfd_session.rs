//! The BFD session state machine against RFC 5880 §6.8, one table test per rule.

use std::time::Duration;

use bgp_proto::bfd::session::SLOW_TX;
use bgp_proto::bfd::{
    BfdInput, BfdOutput, BfdSession, BfdSessionConfig, BfdState, BfdTimer, ControlPacket, Diag,
};

const MY: u32 = 0x1111;
const PEER: u32 = 0x2222;
const MS: Duration = Duration::from_millis(1);
/// The handover window a resumed session listens through (the restart time).
const WINDOW: Duration = Duration::from_secs(120);

fn cfg(tx_ms: u64, rx_ms: u64, mult: u8) -> BfdSessionConfig {
    BfdSessionConfig {
        my_discriminator: MY,
        desired_min_tx: MS * tx_ms as u32,
        required_min_rx: MS * rx_ms as u32,
        detect_mult: mult,
        jitter_seed: 7,
    }
}

fn from_peer(state: BfdState) -> ControlPacket {
    ControlPacket {
        diag: Diag::None,
        state,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 5,
        my_discriminator: PEER,
        your_discriminator: if state == BfdState::Down { 0 } else { MY },
        desired_min_tx: 200_000,
        required_min_rx: 150_000,
        required_min_echo_rx: 0,
        auth: None,
    }
}

fn sent(out: &[BfdOutput]) -> Vec<ControlPacket> {
    out.iter()
        .filter_map(|o| match o {
            BfdOutput::Send(p) => Some(*p),
            _ => None,
        })
        .collect()
}

fn armed(out: &[BfdOutput], timer: BfdTimer) -> Option<Duration> {
    out.iter().rev().find_map(|o| match o {
        BfdOutput::ArmTimer(t, d) if *t == timer => Some(*d),
        _ => None,
    })
}

fn changes(out: &[BfdOutput]) -> Vec<(BfdState, BfdState, Diag, BfdState)> {
    out.iter()
        .filter_map(|o| match o {
            BfdOutput::StateChanged {
                from,
                to,
                diag,
                remote_state,
            } => Some((*from, *to, *diag, *remote_state)),
            _ => None,
        })
        .collect()
}

/// A session brought Up by the three-way handshake (Down → Init → Up).
fn up(c: BfdSessionConfig) -> BfdSession {
    let mut s = BfdSession::new(c);
    s.handle(BfdInput::Start);
    s.handle(BfdInput::Received(from_peer(BfdState::Down)));
    s.handle(BfdInput::Received(from_peer(BfdState::Up)));
    assert_eq!(s.state(), BfdState::Up);
    s
}

#[test]
fn starts_down_with_zero_remote_discriminator_rfc5880_6_8_1() {
    let mut s = BfdSession::new(cfg(100, 100, 3));
    assert_eq!(s.state(), BfdState::Down);
    let out = s.handle(BfdInput::Start);
    let p = sent(&out)[0];
    assert_eq!(
        (p.state, p.your_discriminator, p.my_discriminator),
        (BfdState::Down, 0, MY)
    );
    assert!(
        !p.control_plane_independent,
        "we share fate with the control plane: C=0"
    );
    assert_eq!(p.required_min_echo_rx, 0, "no echo");
}

#[test]
fn desired_min_tx_at_least_one_second_while_not_up_rfc5880_6_8_3() {
    let mut s = BfdSession::new(cfg(100, 100, 3));
    let out = s.handle(BfdInput::Start);
    assert_eq!(sent(&out)[0].desired_min_tx, 1_000_000);
    let t = armed(&out, BfdTimer::Transmit).unwrap();
    assert!(t >= SLOW_TX * 3 / 4 && t <= SLOW_TX, "{t:?}");
}

#[test]
fn state_transitions_table_rfc5880_6_8_6() {
    use BfdState::*;
    // (local state reached by a prefix of packets, received state, expected next state)
    let rows = [
        (Down, Down, Init),
        (Down, Init, Up),
        (Down, Up, Down),
        (Down, AdminDown, Down),
        (Init, Init, Up),
        (Init, Up, Up),
        (Init, Down, Init),
        (Init, AdminDown, Down),
        (Up, Up, Up),
        (Up, Init, Up),
        (Up, Down, Down),
        (Up, AdminDown, Down),
    ];
    for (local, received, want) in rows {
        let mut s = BfdSession::new(cfg(100, 100, 3));
        s.handle(BfdInput::Start);
        match local {
            Down => {}
            Init => {
                s.handle(BfdInput::Received(from_peer(Down)));
            }
            _ => {
                s.handle(BfdInput::Received(from_peer(Down)));
                s.handle(BfdInput::Received(from_peer(Up)));
            }
        }
        assert_eq!(s.state(), local, "setup for {local:?} + {received:?}");
        s.handle(BfdInput::Received(from_peer(received)));
        assert_eq!(s.state(), want, "{local:?} receiving {received:?}");
    }
}

#[test]
fn peer_down_while_up_sets_diag_neighbor_signaled_down_rfc5880_6_8_6() {
    let mut s = up(cfg(100, 100, 3));
    // The peer's detection time of us expired (a Down that claims no failure waits for a
    // replacing session first: the replacement tests below).
    let mut p = from_peer(BfdState::Down);
    p.diag = Diag::ControlDetectionTimeExpired;
    let out = s.handle(BfdInput::Received(p));
    assert_eq!(
        changes(&out),
        [(
            BfdState::Up,
            BfdState::Down,
            Diag::NeighborSignaledSessionDown,
            BfdState::Down
        )]
    );
    assert_eq!(
        sent(&out)[0].diag,
        Diag::NeighborSignaledSessionDown,
        "the peer is told at once"
    );
}

#[test]
fn peer_admin_down_is_reported_with_remote_state_admin_down_rfc5882_3_2() {
    let mut s = up(cfg(100, 100, 3));
    let out = s.handle(BfdInput::Received(from_peer(BfdState::AdminDown)));
    assert_eq!(
        changes(&out),
        [(
            BfdState::Up,
            BfdState::Down,
            Diag::NeighborSignaledSessionDown,
            BfdState::AdminDown
        )]
    );
}

#[test]
fn detect_time_is_remote_multiplier_times_agreed_interval_rfc5880_6_8_4() {
    // Ours: RequiredMinRx 100 ms. Peer: DesiredMinTx 200 ms, multiplier 5 → 5 × 200 ms.
    let mut s = BfdSession::new(cfg(100, 100, 3));
    s.handle(BfdInput::Start);
    let out = s.handle(BfdInput::Received(from_peer(BfdState::Down)));
    assert_eq!(armed(&out, BfdTimer::Detect), Some(MS * 1000));
    // Ours slower than the peer's: RequiredMinRx 300 ms wins → 5 × 300 ms.
    let mut s = BfdSession::new(cfg(100, 300, 3));
    s.handle(BfdInput::Start);
    let out = s.handle(BfdInput::Received(from_peer(BfdState::Down)));
    assert_eq!(armed(&out, BfdTimer::Detect), Some(MS * 1500));
    assert_eq!(s.detection_time(), Some(MS * 1500));
}

#[test]
fn detection_timeout_takes_up_session_down_with_diag_1_rfc5880_6_8_4() {
    let mut s = up(cfg(100, 100, 3));
    let out = s.handle(BfdInput::TimerFired(BfdTimer::Detect));
    assert_eq!(
        changes(&out),
        [(
            BfdState::Up,
            BfdState::Down,
            Diag::ControlDetectionTimeExpired,
            BfdState::Down
        )]
    );
    // §6.8.1: RemoteDiscr is zeroed after a detection time without packets.
    assert_eq!(s.remote_discriminator(), 0);
    assert_eq!(sent(&out)[0].your_discriminator, 0);
}

#[test]
fn detection_timeout_in_down_only_forgets_the_peer_rfc5880_6_8_1() {
    let mut s = BfdSession::new(cfg(100, 100, 3));
    s.handle(BfdInput::Start);
    s.handle(BfdInput::Received(from_peer(BfdState::AdminDown)));
    assert_eq!(s.remote_discriminator(), PEER);
    let out = s.handle(BfdInput::TimerFired(BfdTimer::Detect));
    assert!(changes(&out).is_empty());
    assert_eq!(s.remote_discriminator(), 0);
}

#[test]
fn tx_interval_is_max_of_desired_tx_and_remote_min_rx_rfc5880_6_8_7() {
    let s = up(cfg(100, 100, 3));
    // Peer requires 150 ms between packets; we want 100 ms → 150 ms.
    assert_eq!(s.tx_interval(), MS * 150);
    let s = up(cfg(400, 100, 3));
    assert_eq!(s.tx_interval(), MS * 400);
}

#[test]
fn jitter_reduces_interval_by_up_to_25_percent_rfc5880_6_8_7() {
    let mut s = up(cfg(400, 100, 3));
    let mut seen = Vec::new();
    for _ in 0..200 {
        let out = s.handle(BfdInput::TimerFired(BfdTimer::Transmit));
        seen.push(armed(&out, BfdTimer::Transmit).unwrap());
    }
    assert!(
        seen.iter().all(|d| *d >= MS * 300 && *d <= MS * 400),
        "{seen:?}"
    );
    assert!(seen.iter().any(|d| *d < MS * 325), "jitter is used");
    assert!(
        seen.iter().any(|d| *d > MS * 375),
        "the whole range is used"
    );
}

#[test]
fn jitter_with_multiplier_one_stays_between_75_and_90_percent_rfc5880_6_8_7() {
    let mut s = up(cfg(400, 100, 1));
    for _ in 0..200 {
        let out = s.handle(BfdInput::TimerFired(BfdTimer::Transmit));
        let d = armed(&out, BfdTimer::Transmit).unwrap();
        assert!(d >= MS * 300 && d <= MS * 360, "{d:?}");
    }
}

#[test]
fn going_up_starts_a_poll_with_the_fast_interval_rfc5880_6_8_3() {
    let mut s = BfdSession::new(cfg(100, 100, 3));
    s.handle(BfdInput::Start);
    s.handle(BfdInput::Received(from_peer(BfdState::Down)));
    let out = s.handle(BfdInput::Received(from_peer(BfdState::Up)));
    let p = sent(&out)[0];
    assert!(p.poll && p.state == BfdState::Up, "{p:?}");
    assert_eq!(p.desired_min_tx, 100_000);
    assert!(s.poll_active());
    // Every packet carries P until the Final arrives (§6.5).
    let out = s.handle(BfdInput::TimerFired(BfdTimer::Transmit));
    assert!(sent(&out)[0].poll);
    let mut fin = from_peer(BfdState::Up);
    fin.final_ = true;
    s.handle(BfdInput::Received(fin));
    assert!(!s.poll_active());
    let out = s.handle(BfdInput::TimerFired(BfdTimer::Transmit));
    assert!(!sent(&out)[0].poll);
}

#[test]
fn poll_is_answered_at_once_with_final_and_without_poll_rfc5880_6_8_6() {
    let mut s = up(cfg(100, 100, 3));
    let mut poll = from_peer(BfdState::Up);
    poll.poll = true;
    let out = s.handle(BfdInput::Received(poll));
    let finals: Vec<_> = sent(&out).into_iter().filter(|p| p.final_).collect();
    assert_eq!(finals.len(), 1);
    assert!(!finals[0].poll, "P and F never together (§6.5)");
}

#[test]
fn slower_tx_waits_for_poll_final_rfc5880_6_8_3() {
    let mut s = up(cfg(100, 100, 3));
    let mut fin = from_peer(BfdState::Up);
    fin.final_ = true;
    fin.required_min_rx = 1;
    s.handle(BfdInput::Received(fin)); // ends the poll that going Up started
    assert_eq!(s.tx_interval(), MS * 100);
    let out = s.handle(BfdInput::SetIntervals {
        desired_min_tx: MS * 500,
        required_min_rx: MS * 100,
        detect_mult: 3,
    });
    let p = sent(&out)[0];
    assert!(
        p.poll && p.desired_min_tx == 500_000,
        "announced at once, with P"
    );
    assert_eq!(s.tx_interval(), MS * 100, "still the old rate until Final");
    s.handle(BfdInput::Received(fin));
    assert_eq!(s.tx_interval(), MS * 500);
}

#[test]
fn faster_rx_keeps_old_detection_time_until_final_rfc5880_6_8_3() {
    let mut s = up(cfg(100, 400, 3));
    let mut fin = from_peer(BfdState::Up);
    fin.final_ = true;
    fin.desired_min_tx = 1;
    s.handle(BfdInput::Received(fin));
    assert_eq!(s.detection_time(), Some(MS * 2000)); // 5 × 400 ms
    s.handle(BfdInput::SetIntervals {
        desired_min_tx: MS * 100,
        required_min_rx: MS * 100,
        detect_mult: 3,
    });
    assert_eq!(
        s.detection_time(),
        Some(MS * 2000),
        "not shortened before Final"
    );
    s.handle(BfdInput::Received(fin));
    assert_eq!(s.detection_time(), Some(MS * 500));
}

#[test]
fn admin_down_sends_state_admin_down_with_diag_7_and_ignores_peer_rfc5880_6_8_16() {
    let mut s = up(cfg(100, 100, 3));
    let out = s.handle(BfdInput::AdminDown);
    let p = sent(&out)[0];
    assert_eq!(
        (p.state, p.diag),
        (BfdState::AdminDown, Diag::AdministrativelyDown)
    );
    assert!(out.contains(&BfdOutput::StopTimer(BfdTimer::Detect)));
    // §6.8.6: in AdminDown received packets change no state.
    let out = s.handle(BfdInput::Received(from_peer(BfdState::Init)));
    assert!(changes(&out).is_empty());
    assert_eq!(s.state(), BfdState::AdminDown);
    s.handle(BfdInput::AdminUp);
    assert_eq!(s.state(), BfdState::Down);
}

#[test]
fn mismatched_your_discriminator_is_ignored_rfc5880_6_8_6() {
    let mut s = up(cfg(100, 100, 3));
    let mut p = from_peer(BfdState::Down);
    p.your_discriminator = MY + 1;
    let out = s.handle(BfdInput::Received(p));
    assert!(matches!(out.as_slice(), [BfdOutput::Ignored(_)]), "{out:?}");
    assert_eq!(s.state(), BfdState::Up);
}

#[test]
fn no_periodic_packets_while_peer_asks_for_none_rfc5880_6_8_7() {
    let mut s = up(cfg(100, 100, 3));
    let mut p = from_peer(BfdState::Up);
    p.required_min_rx = 0;
    s.handle(BfdInput::Received(p));
    let out = s.handle(BfdInput::TimerFired(BfdTimer::Transmit));
    assert!(sent(&out).is_empty());
}

#[test]
fn leaving_up_returns_to_one_second_tx_rfc5880_6_8_3() {
    let mut s = up(cfg(100, 100, 3));
    let out = s.handle(BfdInput::TimerFired(BfdTimer::Detect));
    assert_eq!(sent(&out)[0].desired_min_tx, 1_000_000);
    assert!(armed(&out, BfdTimer::Transmit).unwrap() >= SLOW_TX * 3 / 4);
}

#[test]
fn resuming_session_adopts_the_discriminator_of_an_up_peer_and_goes_up() {
    let mut s = BfdSession::resuming(cfg(100, 100, 3), WINDOW);
    let out = s.handle(BfdInput::Start);
    assert!(sent(&out).is_empty(), "listens before it speaks");
    let mut p = from_peer(BfdState::Up);
    p.your_discriminator = 0x7777; // the previous process's
    let out = s.handle(BfdInput::Received(p));
    assert_eq!(s.state(), BfdState::Up);
    assert_eq!(s.config().my_discriminator, 0x7777);
    assert_eq!(changes(&out)[0].1, BfdState::Up);
    let p = sent(&out)[0];
    assert_eq!(
        (p.my_discriminator, p.your_discriminator, p.state),
        (0x7777, PEER, BfdState::Up)
    );
}

#[test]
fn resuming_session_with_a_down_peer_does_the_usual_handshake_rfc5880_6_8_6() {
    let mut s = BfdSession::resuming(cfg(100, 100, 3), WINDOW);
    s.handle(BfdInput::Start);
    s.handle(BfdInput::Received(from_peer(BfdState::Down)));
    assert_eq!(s.state(), BfdState::Init);
    assert_eq!(s.config().my_discriminator, MY);
    // Adoption is for the first packet only: a later stray Up is discarded as usual.
    let mut p = from_peer(BfdState::Up);
    p.your_discriminator = 0x7777;
    let out = s.handle(BfdInput::Received(p));
    assert!(matches!(out.as_slice(), [BfdOutput::Ignored(_)]));
}

#[test]
fn a_fresh_session_never_adopts_rfc5880_6_8_6() {
    let mut s = up(cfg(100, 100, 3));
    let mut p = from_peer(BfdState::Up);
    p.your_discriminator = 0x7777;
    assert!(matches!(
        s.handle(BfdInput::Received(p)).as_slice(),
        [BfdOutput::Ignored(_)]
    ));
    let mut s = BfdSession::new(cfg(100, 100, 3));
    s.handle(BfdInput::Start);
    s.handle(BfdInput::Received(p));
    assert_eq!(s.state(), BfdState::Down);
}

#[test]
fn multiplier_change_alone_is_sent_at_once_without_poll_rfc5880_6_8_3() {
    let mut s = up(cfg(100, 100, 3));
    let mut fin = from_peer(BfdState::Up);
    fin.final_ = true;
    s.handle(BfdInput::Received(fin));
    let out = s.handle(BfdInput::SetIntervals {
        desired_min_tx: MS * 100,
        required_min_rx: MS * 100,
        detect_mult: 255,
    });
    let p = sent(&out)[0];
    assert_eq!((p.detect_mult, p.poll), (255, false));
}

/// A process that resumes after a planned restart must never send before it hears the
/// peer (its first packet would be Down with Your Discriminator 0, which takes the peer's
/// handed-over Up session down, §6.8.6), however slowly the peer sends; the periodic
/// timer firing changes nothing.
#[test]
fn resumed_session_sends_nothing_before_it_hears_the_peer_rfc5880_6_8_6() {
    let mut s = BfdSession::resuming(cfg(300, 2000, 3), WINDOW);
    let mut out = s.handle(BfdInput::Start);
    assert_eq!(armed(&out, BfdTimer::HandoverWindow), Some(WINDOW));
    assert_eq!(armed(&out, BfdTimer::Transmit), None);
    for _ in 0..10 {
        out.extend(s.handle(BfdInput::TimerFired(BfdTimer::Transmit)));
    }
    // A handover during the wait (the next restart) sends nothing either.
    out.extend(s.handle(BfdInput::SetIntervals {
        desired_min_tx: MS * 300,
        required_min_rx: MS * 2000,
        detect_mult: 255,
    }));
    out.extend(s.handle(BfdInput::TimerFired(BfdTimer::Transmit)));
    assert!(
        sent(&out).is_empty(),
        "sent before hearing the peer: {out:?}"
    );
    // The peer's handed-over session, Up, addressed to the previous process.
    let mut p = from_peer(BfdState::Up);
    p.your_discriminator = 0x7777;
    let out = s.handle(BfdInput::Received(p));
    assert_eq!(s.state(), BfdState::Up);
    assert!(sent(&out).iter().all(|p| p.state == BfdState::Up));
    assert!(
        armed(&out, BfdTimer::Transmit).is_some(),
        "speaks from now on"
    );
}

/// FRR's bfdd replaces a peer's session when BGP reaches Established (FRR 10.3): the old
/// session's last packet is Down with diag 3 (which we never signaled), then a new session,
/// a new discriminator, starts with Down/Your Discriminator 0 and comes Up. The peer's
/// session was replaced, the path never failed: the client hears no Up → Down.
#[test]
fn peer_session_replaced_by_a_new_discriminator_is_not_a_path_failure_rfc5880_6_8_6() {
    const NEW: u32 = 0x3333;
    let mut s = up(cfg(100, 100, 3));
    let mut last = from_peer(BfdState::Down);
    last.diag = Diag::NeighborSignaledSessionDown;
    let mut out = s.handle(BfdInput::Received(last));
    assert_eq!(
        s.state(),
        BfdState::Down,
        "Down on the wire, as §6.8.6 says"
    );
    let mut first = from_peer(BfdState::Down);
    first.my_discriminator = NEW;
    out.extend(s.handle(BfdInput::Received(first)));
    assert_eq!(s.state(), BfdState::Init);
    let mut up = from_peer(BfdState::Up);
    up.my_discriminator = NEW;
    out.extend(s.handle(BfdInput::Received(up)));
    assert_eq!(s.state(), BfdState::Up);
    assert_eq!(s.remote_discriminator(), NEW);
    assert!(out.contains(&BfdOutput::PeerReplaced {
        old: PEER,
        new: NEW
    }));
    assert!(
        !changes(&out)
            .iter()
            .any(|c| c.0 == BfdState::Up && c.1 == BfdState::Down),
        "reported a path failure: {:?}",
        changes(&out)
    );
}

/// The other end of the wait: when the peer's detection time of the handed-over session
/// (the window) has passed without a word from the peer, that session is gone there, and
/// the resumed one starts as a new session does (a passive peer waits for us).
#[test]
fn resumed_session_speaks_once_the_handover_window_has_passed_rfc5880_6_8_6() {
    let mut s = BfdSession::resuming(cfg(300, 2000, 3), WINDOW);
    s.handle(BfdInput::Start);
    let out = s.handle(BfdInput::TimerFired(BfdTimer::HandoverWindow));
    let p = sent(&out);
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].state, p[0].your_discriminator), (BfdState::Down, 0));
    assert!(armed(&out, BfdTimer::Transmit).is_some());
    // A stop on purpose is said even while listening: AdminDown is no Down.
    let mut s = BfdSession::resuming(cfg(300, 2000, 3), WINDOW);
    s.handle(BfdInput::Start);
    let out = s.handle(BfdInput::AdminDown);
    assert_eq!(sent(&out)[0].state, BfdState::AdminDown);
}

/// The peer's Down first, then our Down for the client only once the grace has passed:
/// no new session came, so it was a failure after all.
#[test]
fn peer_down_without_a_replacing_session_counts_when_the_grace_ends_rfc5882_3_2() {
    let mut s = up(cfg(100, 100, 3));
    let mut last = from_peer(BfdState::Down);
    last.diag = Diag::NeighborSignaledSessionDown;
    let detection = s.detection_time().unwrap();
    let out = s.handle(BfdInput::Received(last));
    assert!(changes(&out).is_empty(), "held back: {out:?}");
    assert_eq!(
        armed(&out, BfdTimer::Replacement),
        Some(bgp_proto::bfd::session::replacement_grace(detection))
    );
    // The old session's detection time passing in Down changes nothing yet.
    assert!(changes(&s.handle(BfdInput::TimerFired(BfdTimer::Detect))).is_empty());
    let out = s.handle(BfdInput::TimerFired(BfdTimer::Replacement));
    assert_eq!(
        changes(&out),
        [(
            BfdState::Up,
            BfdState::Down,
            Diag::NeighborSignaledSessionDown,
            BfdState::Down
        )]
    );
}

/// What keeps real failures as fast as before: the peer reporting its own detection
/// timeout (diag 1), or its same session coming back (a bounce, not a replacement), counts
/// at once; so does our own detection timeout.
#[test]
fn peer_down_claiming_a_path_failure_counts_at_once_rfc5882_3_2() {
    let mut s = up(cfg(100, 100, 3));
    let mut p = from_peer(BfdState::Down);
    p.diag = Diag::ControlDetectionTimeExpired;
    let out = s.handle(BfdInput::Received(p));
    assert_eq!(changes(&out)[0].0, BfdState::Up);
    assert_eq!(changes(&out)[0].1, BfdState::Down);

    let mut s = up(cfg(100, 100, 3));
    let mut p = from_peer(BfdState::Down);
    p.diag = Diag::NeighborSignaledSessionDown;
    assert!(changes(&s.handle(BfdInput::Received(p))).is_empty());
    // The same discriminator again: the session was not replaced.
    let out = s.handle(BfdInput::Received(from_peer(BfdState::Down)));
    let c = changes(&out);
    assert_eq!((c[0].0, c[0].1), (BfdState::Up, BfdState::Down), "{c:?}");

    let mut s = up(cfg(100, 100, 3));
    let out = s.handle(BfdInput::TimerFired(BfdTimer::Detect));
    assert_eq!(
        changes(&out),
        [(
            BfdState::Up,
            BfdState::Down,
            Diag::ControlDetectionTimeExpired,
            BfdState::Down
        )]
    );
}

/// The other order: the new session's Down (a new discriminator) reaches us first; the old
/// session's last packet after it is a leftover.
#[test]
fn peer_session_replaced_new_discriminator_first_is_not_a_path_failure_rfc5880_6_8_6() {
    const NEW: u32 = 0x3333;
    let mut s = up(cfg(100, 100, 3));
    let mut first = from_peer(BfdState::Down);
    first.my_discriminator = NEW;
    let mut out = s.handle(BfdInput::Received(first));
    assert_eq!(s.state(), BfdState::Down);
    let mut last = from_peer(BfdState::Down);
    last.diag = Diag::NeighborSignaledSessionDown;
    out.extend(s.handle(BfdInput::Received(last)));
    assert_eq!(
        s.remote_discriminator(),
        NEW,
        "the old session's packet is ignored"
    );
    out.extend(s.handle(BfdInput::Received(first)));
    let mut up = from_peer(BfdState::Up);
    up.my_discriminator = NEW;
    out.extend(s.handle(BfdInput::Received(up)));
    assert_eq!(s.state(), BfdState::Up);
    assert!(changes(&out).is_empty(), "{:?}", changes(&out));
    assert!(out.contains(&BfdOutput::PeerReplaced {
        old: PEER,
        new: NEW
    }));
}
