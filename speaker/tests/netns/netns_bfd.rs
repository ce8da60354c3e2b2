//! BFD against BIRD 2 in network namespaces the test creates (node + ToR, veth): a cut
//! link or a crashed speaker takes the node's routes off the ToR through BFD, graceful
//! restart or not; a planned restart (SIGTERM without --final) keeps them, and the ToR's
//! BFD session never goes down (the handover of docs/bgp.md); a ToR that drops BFD never
//! strands the BGP session. Skipped with a message where namespaces, BIRD or iptables are
//! not available.

use crate::common;
use integration_tests::skip::Need;

use std::time::{Duration, Instant};

use integration_tests::bfd_topology::{BfdTopology, BfdTopologyOptions};

const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

fn topology(case: u32) -> Option<BfdTopology> {
    topology_with(case, |c| c)
}

/// [`topology`] with the speaker's config file edited first.
fn topology_with(case: u32, edit: impl FnOnce(String) -> String) -> Option<BfdTopology> {
    let tag = format!("pcbfd{}{case}", std::process::id() % 100_000);
    integration_tests::require!(Need::Netns, Need::Bird, Need::Bin("iptables"));
    let opts = BfdTopologyOptions::bfd_100ms_x3();
    let mut t = BfdTopology::new(&tag, common::BIN.as_ref(), &opts);
    t.edit_speaker_config(edit);
    t.start_speaker();
    let up = t.poll_until(POLL, WAIT, |t| {
        t.tor_has_route() && t.tor_bfd_up() && t.log().contains("BFD session state")
    });
    assert!(
        up.is_some(),
        "no route or BFD at the ToR\n{}",
        t.diagnostics()
    );
    Some(t)
}

/// The "Since" column of the ToR's BFD session with the node: when it last changed state.
fn bfd_since(t: &BfdTopology) -> Option<String> {
    let out = t.birdc("show bfd sessions");
    let line = out.lines().find(|l| l.contains("198.18.1.2"))?;
    line.split_whitespace().nth(3).map(str::to_owned)
}

fn bird_says_bfd_down(t: &BfdTopology) -> bool {
    t.birdc("show protocols all node1")
        .contains("BFD session down")
}

#[test]
fn cut_link_withdraws_routes_through_bfd_not_hold_timer_rfc5882_3_2() {
    let t = integration_tests::needs!(topology(1));
    t.cut_link();
    // Hold time is 90 s: within WAIT only BFD can have taken the session down.
    let gone = t.poll_until(POLL, WAIT, |t| !t.tor_has_route());
    assert!(
        gone.is_some(),
        "route still at the ToR\n{}",
        t.diagnostics()
    );
    assert!(bird_says_bfd_down(&t), "{}", t.diagnostics());
    // Our side: BFD Down tears BGP down (Cease/BFD Down cannot reach the ToR over a cut
    // link, so the log line is the evidence); BGP retries on its own backoff meanwhile.
    // The reset's reason is its own log line, just after the BFD warning: wait for both.
    let logged = t.poll_until(POLL, WAIT, |t| {
        let log = t.log();
        log.contains("BGP session torn down")
            && log.contains("BFD down: control detection time expired")
    });
    assert!(logged.is_some(), "{}", t.log());
    assert!(
        t.log().contains("BFD down: control detection time expired"),
        "{}",
        t.log()
    );
    // The reason, where operators look: `podcidr-bgp peers` (lastError).
    let shown = t.poll_until(POLL, WAIT, |t| {
        t.peers_json()
            .contains("BFD down: control detection time expired")
    });
    assert!(shown.is_some(), "{}", t.peers_json());
    let m = t.metrics();
    assert!(
        m.contains("podcidr_bgp_bfd_session_down_total{peer=\"tor\"} 1"),
        "{m}"
    );
    assert!(m.contains("podcidr_bgp_bfd_state{peer=\"tor\"} 1"), "{m}");
    t.heal_link();
    let back = t.poll_until(POLL, Duration::from_secs(60), |t| {
        t.tor_has_route() && t.tor_bgp_established()
    });
    assert!(
        back.is_some(),
        "not back after healing\n{}",
        t.diagnostics()
    );
}

#[test]
fn crash_is_not_hidden_behind_graceful_restart_rfc5882_4_3() {
    let mut t = integration_tests::needs!(topology(2));
    t.kill_speaker();
    // Restart time is 120 s: within WAIT only BFD can have ended the graceful restart.
    let gone = t.poll_until(POLL, WAIT, |t| !t.tor_has_route());
    assert!(gone.is_some(), "route kept stale\n{}", t.diagnostics());
    assert!(bird_says_bfd_down(&t), "{}", t.diagnostics());
}

#[test]
fn planned_restart_keeps_routes_and_the_tor_bfd_session_rfc5882_4_3() {
    let mut t = integration_tests::needs!(topology(3));
    let since_before = bfd_since(&t);
    assert!(since_before.is_some(), "{}", t.diagnostics());
    t.stop_speaker();
    // Through ten times the 300 ms detection time the ToR had before the handover, the route
    // and the ToR's BFD session are never absent (a withdraw and re-add inside the window
    // fails here; one look at the end would not see it).
    let window = Instant::now() + Duration::from_secs(3);
    while Instant::now() < window {
        assert!(
            t.tor_has_route(),
            "route gone during the restart\n{}",
            t.diagnostics()
        );
        assert!(t.tor_bfd_up(), "ToR BFD left Up\n{}", t.diagnostics());
    }
    assert!(!bird_says_bfd_down(&t), "{}", t.diagnostics());
    t.start_speaker();
    let resumed = t.poll_until(POLL, WAIT, |t| {
        t.tor_bgp_established() && t.log().contains("BFD session state")
    });
    assert!(resumed.is_some(), "not resumed\n{}", t.diagnostics());
    assert!(t.tor_has_route());
    // Same session at the ToR: its "Since" column did not move.
    assert!(same(&bfd_since(&t), &since_before), "{}", t.diagnostics());
    // And it is fast again: back to 100 ms x 3 (BIRD shows the timeout).
    let fast = t.poll_until(POLL, WAIT, |t| {
        t.birdc("show bfd sessions").contains("0.300")
    });
    assert!(fast.is_some(), "{}", t.diagnostics());
}

/// The peer as `podcidr-bgp peers -o json` shows it.
fn tor_peer(t: &BfdTopology) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&t.peers_json()).ok()?;
    v["peers"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == "tor")
        .cloned()
}

/// (state, flaps) of the session with the ToR.
fn tor_session(t: &BfdTopology) -> Option<(String, u64)> {
    let p = tor_peer(t)?;
    Some((p["state"].as_str()?.to_owned(), p["flaps"].as_u64()?))
}

/// The review's stranded session: the ToR's operator removes `bfd on`, BIRD frees its BFD
/// session without AdminDown, and our BFD times out. BGP is reset once (Cease/BFD Down) and
/// must come back by itself, with BFD down for good and no speaker restart: only strict mode,
/// agreed by both OPENs, may make BGP wait for BFD.
#[test]
fn tor_dropping_bfd_does_not_strand_the_bgp_session_rfc5882_3_2() {
    let t = integration_tests::needs!(topology(4));
    t.tor_reconfigure_without_bfd();
    // The reset's reason is its own log line, written just after the BFD warning: wait for
    // both (a loaded machine showed the first without the second yet).
    let reset = t.poll_until(POLL, WAIT, |t| {
        let log = t.log();
        log.contains("BGP session torn down")
            && log.contains("BFD down: control detection time expired")
    });
    assert!(reset.is_some(), "no BFD timeout\n{}", t.diagnostics());
    assert!(
        t.log().contains("BFD down: control detection time expired"),
        "{}",
        t.log()
    );
    // Back without BFD: Established again after the flap, and the route at the ToR.
    let back = t.poll_until(POLL, Duration::from_secs(60), |t| {
        tor_session(t).is_some_and(|(state, flaps)| state == "Established" && flaps >= 1)
            && t.tor_bgp_established()
            && t.tor_has_route()
    });
    assert!(back.is_some(), "BGP stranded\n{}", t.diagnostics());
    let m = t.metrics();
    assert!(m.contains("podcidr_bgp_session_up{peer=\"tor\"} 1"), "{m}");
    assert!(
        m.contains("podcidr_bgp_waiting_for_bfd{peer=\"tor\"} 0"),
        "{m}"
    );
    assert!(!t.tor_bfd_up(), "{}", t.diagnostics());
}

/// `bfd.strict` against a ToR whose OPEN has no capability 74 (BIRD 2 has none): the
/// session runs non-strict and says so, so losing BFD does not strand it either.
#[test]
fn strict_mode_with_a_tor_without_capability_74_runs_non_strict_draft_bfd_strict_6() {
    let t = integration_tests::needs!(topology_with(5, |c| {
        c.replace("multiplier: 3}", "multiplier: 3, strict: true}")
    }));
    let said = t.poll_until(POLL, WAIT, |t| {
        tor_peer(t).is_some_and(|p| p["bfdStrict"] == "peerNotStrict")
            && t.log().contains("running non-strict")
    });
    assert!(said.is_some(), "{}\n{}", t.peers_json(), t.log());
    t.tor_reconfigure_without_bfd();
    let reset = t.poll_until(POLL, WAIT, |t| t.log().contains("BGP session torn down"));
    assert!(reset.is_some(), "no BFD timeout\n{}", t.diagnostics());
    let back = t.poll_until(POLL, Duration::from_secs(60), |t| {
        tor_session(t).is_some_and(|(state, flaps)| state == "Established" && flaps >= 1)
            && t.tor_has_route()
    });
    assert!(back.is_some(), "BGP stranded\n{}", t.diagnostics());
    assert!(!t.log().contains("held waiting for BFD"), "{}", t.log());
}

/// The "Since" column of BIRD's BGP protocol with the node: when it last changed state.
/// Two readings of a BIRD "Since" column name the same instant (it reads a millisecond
/// apart between calls, [`integration_tests::bird_parse::same_since`]).
fn same(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => integration_tests::bird_parse::same_since(a, b),
        _ => a == b,
    }
}

fn bgp_since(t: &BfdTopology) -> Option<String> {
    let out = t.birdc("show protocols node1");
    let line = out.lines().find(|l| l.starts_with("node1"))?;
    line.split_whitespace().nth(3).map(str::to_owned)
}

/// RFC 5880 §6.8.3: new BFD timers by reload reach the ToR through a Poll Sequence, while
/// the BGP session (same connection: BIRD's Since does not move) and BFD stay Up.
#[test]
fn bfd_timer_reload_keeps_bgp_and_polls_the_tor_rfc5880_6_8_3() {
    let t = integration_tests::needs!(topology(6));
    // BIRD's timeout for us is our multiplier × our 100 ms.
    let fast = t.poll_until(POLL, WAIT, |t| {
        t.birdc("show bfd sessions").contains("0.300")
    });
    assert!(fast.is_some(), "{}", t.diagnostics());
    let (bgp_before, bfd_before) = (bgp_since(&t), bfd_since(&t));
    assert!(
        bgp_before.is_some() && bfd_before.is_some(),
        "{}",
        t.diagnostics()
    );
    t.set_speaker_bfd((200, 200, 5));
    // 5 × max(200 ms, BIRD's 100 ms min rx): BIRD took the new values (from our Poll).
    let polled = t.poll_until(POLL, WAIT, |t| {
        t.birdc("show bfd sessions").contains("1.000")
    });
    assert!(polled.is_some(), "{}", t.diagnostics());
    assert!(
        t.log().contains("config reloaded") && t.log().contains("reset=0"),
        "{}",
        t.log()
    );
    assert!(t.tor_bgp_established(), "{}", t.diagnostics());
    assert!(
        same(&bgp_since(&t), &bgp_before),
        "BGP re-established\n{}",
        t.diagnostics()
    );
    assert!(
        same(&bfd_since(&t), &bfd_before),
        "BFD left Up\n{}",
        t.diagnostics()
    );
    assert!(!bird_says_bfd_down(&t), "{}", t.diagnostics());
}

/// Two edges of the planned restart, one topology (both cost a restart):
///
/// - RFC 9494 × RFC 5882 §4.3: with long-lived graceful restart the handover window is
///   restartTime + longLivedStaleTime. A restart that outlasts restartTime (2 s here) keeps
///   the ToR's BFD session Up, so BIRD (`bfd on`, which flushes on BFD Down, LLGR-stale
///   routes included) keeps the routes as LLGR-stale. It was restartTime only.
/// - RFC 5880 §6.8.6: the resumed session sends nothing before it hears the ToR. With
///   `bfd.minRx: 2000` the ToR sends to us every 1.5-2 s, slower than the 0.75-1 s at which
///   the new process's first packet (Down, Your Discriminator 0) went out; a peer that
///   selects the session by address, as §6.8.6 says, goes Down on it. BIRD 2.0.12 does not
///   (it drops a new discriminator while Up: "mismatched remote id"), so the check is what
///   the new process sends: the ToR's packets are held back at the node until well past
///   that first packet's time, and the node must have sent nothing meanwhile.
#[test]
fn planned_restart_past_restart_time_keeps_llgr_routes_and_a_slow_tor_bfd_up_rfc9494_rfc5880_6_8_6()
{
    integration_tests::require!(Need::Netns, Need::Bird, Need::Bin("iptables"));
    let tag = format!("pcbfdl{}", std::process::id() % 100_000);
    let opts = BfdTopologyOptions {
        restart_time: 2,
        ..BfdTopologyOptions::bfd_100ms_x3()
    };
    let llgr = "long lived graceful restart on; long lived stale time 60;";
    let mut t = BfdTopology::with_tor_bgp(&tag, common::BIN.as_ref(), &opts, llgr);
    t.edit_speaker_config(|c| {
        c.replace("restartTime: 2}", "restartTime: 2, longLivedStaleTime: 60}")
            .replace("minRx: 100,", "minRx: 2000,")
    });
    t.start_speaker();
    let up = t.poll_until(POLL, WAIT, |t| t.tor_has_route() && t.tor_bfd_up());
    assert!(up.is_some(), "{}", t.diagnostics());
    let since_before = bfd_since(&t);
    t.stop_speaker();
    // Past the restart time (2 s) and then some: the route stays, LLGR-stale, and the
    // ToR's BFD session never leaves Up.
    let window = Instant::now() + Duration::from_secs(4);
    while Instant::now() < window {
        assert!(t.tor_has_route(), "route gone\n{}", t.diagnostics());
        assert!(t.tor_bfd_up(), "ToR BFD left Up\n{}", t.diagnostics());
    }
    let routes = integration_tests::bird_parse::parse_routes(&t.birdc("show route all"));
    assert!(
        routes.iter().any(|r| r.llgr_stale),
        "not LLGR-stale\n{}",
        t.diagnostics()
    );
    assert!(!bird_says_bfd_down(&t), "{}", t.diagnostics());
    // The next process, and a ToR it cannot hear yet.
    t.hold_tor_bfd();
    t.start_speaker();
    let established = t.poll_until(POLL, WAIT, |t| t.tor_bgp_established());
    // Our BFD started with the session, just before; its first periodic packet was due
    // within 1 s of that. Through 1.2 s more the ToR's session stays Up.
    let window = Instant::now() + Duration::from_millis(1200);
    while established.is_some() && Instant::now() < window {
        assert!(t.tor_bfd_up(), "ToR BFD left Up\n{}", t.diagnostics());
    }
    let sent = t.release_tor_bfd();
    assert!(established.is_some(), "{}", t.diagnostics());
    assert_eq!(
        sent,
        0,
        "BFD sent before the ToR was heard\n{}",
        t.diagnostics()
    );
    let resumed = t.poll_until(POLL, WAIT, |t| {
        t.birdc("show bfd sessions").contains("0.300") && t.tor_has_route()
    });
    assert!(resumed.is_some(), "{}", t.diagnostics());
    assert!(same(&bfd_since(&t), &since_before), "{}", t.diagnostics());
    assert!(!bird_says_bfd_down(&t), "{}", t.diagnostics());
}

/// FRR 10.3's bfdd replaces a peer's BFD session the moment BGP reaches Established (its old
/// session's last packet: Down, diag 3; then a new discriminator starts with Down). Both
/// sides follow RFC 5880, the path never failed: the speaker must not reset the fresh BGP
/// session (it did, Cease/BFD Down 0-2 ms after Established). Debian's FRR is 8.4, which does
/// not do this, so a scripted BFD peer in the ToR's namespace replays the sequence, with
/// BIRD (BFD off) as the BGP peer.
#[test]
fn peer_bfd_session_replaced_at_established_does_not_reset_bgp_rfc5880_6_8_6() {
    integration_tests::require!(Need::Netns, Need::Bird, Need::Bin("python3"));
    let tag = format!("pcbfdr{}", std::process::id() % 100_000);
    let opts = BfdTopologyOptions {
        bfd: None,
        hold_time: 90,
        restart_time: 120,
    };
    let mut t = BfdTopology::new(&tag, common::BIN.as_ref(), &opts);
    t.edit_speaker_config(|c| format!("{c}    bfd: {{minTx: 100, minRx: 100, multiplier: 3}}\n"));
    let trigger = integration_tests::TempDir::new(&tag);
    let trigger = trigger.path("established");
    let _frr = Killed(t.spawn_frr_replacing_bfd_peer(&trigger));
    t.start_speaker();
    let bfd_up = |t: &BfdTopology| {
        t.metrics()
            .contains("podcidr_bgp_bfd_state{peer=\"tor\"} 3")
    };
    let up = t.poll_until(POLL, WAIT, |t| t.tor_bgp_established() && bfd_up(t));
    let since = bgp_since(&t);
    // BGP is Established: the ToR replaces its BFD session.
    std::fs::write(&trigger, "").unwrap();
    let replaced = up.and_then(|_| {
        t.poll_until(POLL, WAIT, |t| {
            t.log().contains("the peer replaced its BFD session")
                || t.log().contains("BGP session torn down")
        })
    });
    assert!(up.is_some(), "no BGP or BFD\n{}", t.diagnostics());
    assert!(replaced.is_some(), "{}", t.diagnostics());
    assert!(
        !t.log().contains("BGP session torn down"),
        "BGP reset on the peer's replaced BFD session\n{}",
        t.diagnostics()
    );
    assert!(bfd_up(&t), "{}", t.metrics());
    assert!(same(&bgp_since(&t), &since), "{}", t.diagnostics());
}

/// A child process of this test, killed (by its PID) when the test ends, pass or fail.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
