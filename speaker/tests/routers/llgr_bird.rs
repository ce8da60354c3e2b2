//! Long-lived graceful restart (RFC 9494) against BIRD 2 (≥ 2.0.8 has LLGR; Debian's package,
//! started by the test on loopback): a speaker down past its restart time leaves its routes at
//! BIRD as LLGR_STALE, and fresh ones replace them when it returns.

use crate::common;
use integration_tests::skip::Need;

use std::collections::BTreeSet;
use std::time::Duration;

use common::TempDir;
use common::speaker::{Peer, Speaker};
use integration_tests::{Bird, BirdConfig, BirdNeighbor, BirdRoute, net};
use ipnet::IpNet;

const OUR_ASN: u32 = 4_200_000_001;
const T: Duration = Duration::from_secs(30);
/// LLGR_STALE (RFC 9494 §4.3) as BIRD prints standard communities.
const LLGR_STALE: (u16, u16) = (65535, 6);
/// The speaker's GR restart time: short, so the tests get past it quickly.
const RESTART_TIME: u16 = 2;
const CIDRS: [&str; 2] = ["198.19.1.0/24", "198.19.2.0/24"];

fn want() -> BTreeSet<IpNet> {
    CIDRS.iter().map(|s| s.parse().unwrap()).collect()
}

fn prefixes(routes: &[BirdRoute]) -> BTreeSet<IpNet> {
    routes.iter().map(|r| r.prefix).collect()
}

/// BIRD as a graceful-restart and LLGR helper, and a speaker with `gr` announcing [`CIDRS`]
/// to it; returns once BIRD has both routes.
fn announcing(tag: &str, gr: &str, communities: &str) -> (Bird, Speaker) {
    let ours = net::alloc_v4();
    let bird = Bird::start(
        BirdConfig::new(net::alloc_v4(), 65001).neighbor(
            BirdNeighbor::new("spk", ours, OUR_ASN)
                .passive(true)
                .graceful_restart(120)
                .long_lived_graceful_restart(3600),
        ),
    );
    let peer = Peer::at(
        "bird",
        &bird.peer_addr("spk"),
        ours.into(),
        &format!("    gracefulRestart: {gr}\n{communities}"),
    );
    let s = Speaker::start(TempDir::new(tag), &CIDRS, "", &[peer], &[]);
    let ok = bird.wait_until(T, |b| prefixes(&b.routes_from("spk")) == want());
    assert!(
        ok,
        "BIRD has {:?}\n{}\n{}",
        bird.routes_from("spk"),
        bird.diagnostics(),
        s.proc.log()
    );
    (bird, s)
}

fn kill(s: &mut Speaker) {
    s.proc.signal(libc::SIGKILL);
    s.proc.wait_exit(Duration::from_secs(10)).expect("killed");
}

fn long_lived(b: &Bird) -> bool {
    b.protocol("spk")
        .channels
        .iter()
        .any(|c| c.neighbor_gr.as_deref() == Some("Long-lived"))
}

/// The rule: with `longLivedStaleTime` the OPEN carries the LLGR capability, and a speaker
/// killed (no NOTIFICATION) and down past its restart time keeps its routes at the router,
/// marked LLGR_STALE, for the long-lived stale time; back up, it replaces them with fresh ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_speaker_routes_stay_llgr_stale_past_the_restart_time_and_come_back_fresh_rfc9494_4()
{
    integration_tests::require!(Need::Bird);
    let gr = format!("{{enabled: true, restartTime: {RESTART_TIME}, longLivedStaleTime: 60}}");
    let (bird, mut s) = announcing("llgr", &gr, "");
    let p = bird.protocol("spk");
    assert!(
        p.neighbor_caps.contains(&"LL stale time: 60".to_owned()),
        "BIRD sees our LLGR capability: {:?}",
        p.neighbor_caps
    );
    let fresh = bird.routes_from("spk");
    assert!(
        fresh.iter().all(|r| !r.communities.contains(&LLGR_STALE)),
        "{fresh:?}"
    );

    kill(&mut s);
    // Only the long-lived phase, after the restart time, adds LLGR_STALE.
    let ok = bird.wait_until(T, |b| {
        let r = b.routes_from("spk");
        long_lived(b)
            && prefixes(&r) == want()
            && r.iter()
                .all(|r| r.llgr_stale && r.communities.contains(&LLGR_STALE))
    });
    assert!(
        ok,
        "past the {RESTART_TIME} s restart time BIRD keeps both routes as LLGR_STALE: {:?}\n{}",
        bird.routes_from("spk"),
        bird.diagnostics()
    );
    // Still there a while later (the stale time is 60 s, the restart time long past).
    let dropped = bird.wait_until(Duration::from_secs(2 * u64::from(RESTART_TIME)), |b| {
        prefixes(&b.routes_from("spk")) != want()
    });
    assert!(!dropped, "{:?}", bird.routes_from("spk"));

    // Back up: fresh routes, no LLGR_STALE, the restart over.
    let Speaker { dir, admin, .. } = s;
    let s = Speaker::spawn(dir, admin, &[]);
    let ok = bird.wait_until(T, |b| {
        let r = b.routes_from("spk");
        let p = b.protocol("spk");
        prefixes(&r) == want()
            && p.is_established()
            && !p.gr_active
            && p.channels.iter().all(|c| c.neighbor_gr.is_none())
            && r.iter()
                .all(|r| !r.stale && !r.communities.contains(&LLGR_STALE))
    });
    assert!(
        ok,
        "fresh routes after the restart: {:?}\n{}\n{}",
        bird.routes_from("spk"),
        bird.diagnostics(),
        s.proc.log()
    );
}

/// Control for the test above: without `longLivedStaleTime` no LLGR capability is sent, and
/// the routes are gone once the restart time has run out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_long_lived_stale_time_routes_go_after_the_restart_time_rfc9494_4() {
    integration_tests::require!(Need::Bird);
    let gr = format!("{{enabled: true, restartTime: {RESTART_TIME}}}");
    let (bird, mut s) = announcing("llgr-off", &gr, "");
    let p = bird.protocol("spk");
    assert!(
        !p.neighbor_caps
            .iter()
            .any(|c| c.starts_with("LL stale time")),
        "{:?}",
        p.neighbor_caps
    );
    kill(&mut s);
    let gone = bird.wait_until(T, |b| b.routes_from("spk").is_empty());
    assert!(
        gone,
        "routes kept past the restart time without LLGR: {:?}\n{}",
        bird.routes_from("spk"),
        bird.diagnostics()
    );
}

/// NO_LLGR (65535:7, `no-llgr`) on our routes: the router drops them when the restart time
/// runs out instead of keeping them long-lived stale (RFC 9494 §4.4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_llgr_community_makes_the_router_drop_instead_of_keeping_stale_rfc9494_4_4() {
    integration_tests::require!(Need::Bird);
    let gr = format!("{{enabled: true, restartTime: {RESTART_TIME}, longLivedStaleTime: 60}}");
    let (bird, mut s) = announcing("llgr-no", &gr, "    communities: [no-llgr]\n");
    let r = bird.routes_from("spk");
    assert!(
        r.iter().all(|r| r.communities.contains(&(65535, 7))),
        "{r:?}"
    );
    let caps = bird.protocol("spk").neighbor_caps;
    assert!(caps.contains(&"LL stale time: 60".to_owned()), "{caps:?}");
    kill(&mut s);
    let gone = bird.wait_until(T, |b| b.routes_from("spk").is_empty());
    assert!(
        gone,
        "NO_LLGR routes kept as stale: {:?}\n{}",
        bird.routes_from("spk"),
        bird.diagnostics()
    );
}
