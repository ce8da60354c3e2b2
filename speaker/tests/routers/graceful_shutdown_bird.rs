//! RFC 8326 graceful shutdown against BIRD 2 on loopback: on a final stop the speaker
//! re-announces its routes with GRACEFUL_SHUTDOWN (65535:0), BIRD's import filter lowers
//! their preference (RFC 8326 §4, the filter in docs/tor.md), and the Cease follows.

use crate::common;
use integration_tests::skip::Need;

use std::net::IpAddr;
use std::time::Duration;

use common::TempDir;
use common::speaker::{Peer, Speaker};
use integration_tests::{Bird, BirdConfig, BirdNeighbor, net};

const OUR_ASN: u32 = 4_200_000_001;
const T: Duration = Duration::from_secs(30);
const GSHUT: (u16, u16) = (65535, 0);
const PREFIX: &str = "198.19.6.0/24";

/// RFC 8326 §4: the receiver lowers LOCAL_PREF of routes with GRACEFUL_SHUTDOWN to 0.
const GSHUT_IMPORT: &str =
    "filter { if (65535, 0) ~ bgp_community then bgp_local_pref = 0; accept; }";

fn bird(ours: std::net::Ipv4Addr) -> Bird {
    Bird::start(
        BirdConfig::new(net::alloc_v4(), 65001).neighbor(
            BirdNeighbor::new("spk", ours, OUR_ASN)
                .passive(true)
                .import(GSHUT_IMPORT),
        ),
    )
}

/// Communities and local pref of a route.
type Held = (Vec<(u16, u16)>, Option<u32>);

/// Our prefix as BIRD holds it.
fn route(bird: &Bird) -> Option<Held> {
    bird.routes_from("spk")
        .into_iter()
        .find(|r| r.prefix.to_string() == PREFIX)
        .map(|r| (r.communities, r.local_pref))
}

fn speaker(bird: &Bird, ours: std::net::Ipv4Addr, wait: &str) -> Speaker {
    let peer = Peer::at(
        "bird",
        &bird.peer_addr("spk"),
        IpAddr::V4(ours),
        "    communities: [\"65000:7\"]\n",
    );
    Speaker::start(
        TempDir::new("gshut"),
        &[PREFIX],
        &format!("allowedPrefixes: [198.19.0.0/16]\ngracefulShutdown: {{wait: {wait}}}\n"),
        &[peer],
        &["--final"],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn final_stop_reannounces_with_graceful_shutdown_then_ceases_rfc8326_4() {
    integration_tests::require!(Need::Bird);
    let ours = net::alloc_v4();
    let bird = bird(ours);
    // Longer than the test waits: only the second SIGTERM can end it.
    let mut s = speaker(&bird, ours, "300s");
    assert!(
        bird.wait_until(T, |b| route(b).is_some_and(|(c, _)| c == [(65000, 7)])),
        "no route before the stop\n{}\n{}",
        bird.diagnostics(),
        s.proc.log()
    );
    assert_eq!(route(&bird).and_then(|r| r.1), Some(100));

    s.proc.signal(libc::SIGTERM);
    assert!(
        bird.wait_until(T, |b| route(b).is_some_and(|(c, lp)| c.contains(&GSHUT)
            && c.contains(&(65000, 7))
            && lp == Some(0))),
        "BIRD never saw 65535:0 (with the peer's own community) at local pref 0: {:?}\n{}\n{}",
        route(&bird),
        bird.diagnostics(),
        s.proc.log()
    );
    assert!(
        bird.protocol("spk").is_established(),
        "still up during the wait"
    );

    s.proc.signal(libc::SIGTERM);
    s.proc
        .wait_exit(T)
        .expect("a second SIGTERM ends the wait and the process");
    assert!(
        bird.wait_until(T, |b| b.log_contains("podcidr-bgp speaker stopping")),
        "BIRD logged our Administrative Shutdown communication\n{}",
        bird.log()
    );
    assert!(
        bird.wait_until(T, |b| route(b).is_none()),
        "routes withdrawn after the Cease\n{}",
        bird.diagnostics()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_wait_ends_by_itself_with_the_cease() {
    integration_tests::require!(Need::Bird);
    let ours = net::alloc_v4();
    let bird = bird(ours);
    let mut s = speaker(&bird, ours, "2s");
    assert!(
        bird.wait_until(T, |b| route(b).is_some()),
        "{}\n{}",
        bird.diagnostics(),
        s.proc.log()
    );
    s.proc.signal(libc::SIGTERM);
    s.proc
        .wait_exit(T)
        .expect("exits once the wait is over, without a second signal");
    assert!(
        s.proc.log().contains("graceful shutdown (RFC 8326)"),
        "{}",
        s.proc.log()
    );
    assert!(
        bird.wait_until(T, |b| b.log_contains("podcidr-bgp speaker stopping")),
        "{}",
        bird.log()
    );
}
