//! `/readyz` as a rollout gate against BIRD 2 on loopback (issue 23 item 4): 503 until BIRD
//! itself reports the session Established, 200 after; a peer nothing answers for holds
//! readiness back only until `--ready-peer-grace` has passed.

use crate::common;
use integration_tests::skip::Need;

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use common::speaker::{Peer, Speaker};
use common::{TempDir, free_port, http_get, poll};
use integration_tests::{Bird, BirdConfig, BirdNeighbor, net};

const OUR_ASN: u32 = 4_200_000_001;
const T: Duration = Duration::from_secs(30);

fn bird(ours: Ipv4Addr) -> Bird {
    Bird::start(
        BirdConfig::new(net::alloc_v4(), 65001)
            .neighbor(BirdNeighbor::new("spk", ours, OUR_ASN).passive(true)),
    )
}

fn bird_peer(bird: &Bird, ours: Ipv4Addr) -> Peer {
    Peer::at("bird", &bird.peer_addr("spk"), IpAddr::V4(ours), "")
}

async fn readyz(s: &Speaker) -> Option<(u16, String)> {
    http_get(s.admin, "/readyz").await
}

/// `/readyz` once the source has synced: the body names the sessions it waits for.
async fn waiting_for_bgp(s: &Speaker) -> (u16, String) {
    poll(T, || async {
        readyz(s)
            .await
            .filter(|(c, b)| *c == 200 || b.contains("waiting for BGP sessions"))
    })
    .await
    .unwrap_or_else(|| panic!("/readyz never got past the source\n{}", s.proc.log()))
}

async fn wait_ready(s: &Speaker) {
    let ok = poll(T, || async { readyz(s).await.filter(|(c, _)| *c == 200) }).await;
    assert!(ok.is_some(), "never ready\n{}", s.proc.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_before_bird_establishes_and_200_after() {
    integration_tests::require!(Need::Bird);
    let ours = net::alloc_v4();
    let bird = bird(ours);
    // BIRD refuses the session until the test enables it.
    bird.disable("spk", None);
    let s = Speaker::start(
        TempDir::new("ready-bird"),
        &["198.19.7.0/24"],
        "allowedPrefixes: [198.19.0.0/16]\n",
        &[bird_peer(&bird, ours)],
        &["--ready-peer-grace", "10m"],
    );
    let (code, body) = waiting_for_bgp(&s).await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("bird (not Established yet)"), "{body}");
    assert!(!bird.protocol("spk").is_established());

    bird.enable("spk");
    bird.wait_established("spk", T);
    wait_ready(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_peer_holds_readiness_only_until_the_ready_peer_grace() {
    integration_tests::require!(Need::Bird);
    const GRACE: Duration = Duration::from_secs(5);
    let ours = net::alloc_v4();
    let bird = bird(ours);
    // Nothing listens there: connection refused, the peer never says anything.
    let down = Peer {
        name: "down",
        address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port: free_port(),
        asn: 65002,
        local: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        extra: String::new(),
    };
    let started = Instant::now();
    let s = Speaker::start(
        TempDir::new("ready-bird-down"),
        &["198.19.8.0/24"],
        "allowedPrefixes: [198.19.0.0/16]\n",
        &[bird_peer(&bird, ours), down],
        &["--ready-peer-grace", "5s"],
    );
    bird.wait_established("spk", T);
    // Once the speaker has seen BIRD's session, only the silent peer holds it back.
    let held = poll(T, || async {
        readyz(&s).await.filter(|(c, b)| {
            *c == 200 || (b.contains("down (not Established yet)") && !b.contains("bird"))
        })
    })
    .await;
    let (code, body) = held.unwrap_or_else(|| panic!("{}", s.proc.log()));
    assert_eq!(code, 503, "ready before the bound: {body}");
    wait_ready(&s).await;
    assert!(
        started.elapsed() >= GRACE,
        "ready before the bound: {:?}",
        started.elapsed()
    );
}

/// Issue 30 item 8, against BIRD 2: a peer that answers without reaching Established holds
/// a restarted pod's readiness only if this node had it Established before the restart (the
/// previous process's record in `--state-dir`): that is a release that cannot peer. On a node
/// that never had it (a rack whose router rejects us) it is excused after the grace, and
/// said in `podcidr_ready_excused_peers`, so one rack cannot stop every rollout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answering_peer_holds_readiness_only_if_it_was_established_before_this_restart() {
    integration_tests::require!(Need::Bird);
    let ours = net::alloc_v4();
    let bird_a = bird(ours);
    let state = TempDir::new("ready-state");
    let state_dir = state.path("state");
    let state_flag = format!("--state-dir={}", state_dir.display());
    let first = Speaker::start(
        TempDir::new("ready-first"),
        &["198.19.7.0/24"],
        "allowedPrefixes: [198.19.0.0/16]\n",
        &[bird_peer(&bird_a, ours)],
        &["--ready-peer-grace", "2s", &state_flag],
    );
    wait_ready(&first).await;
    let kept = poll(T, || async {
        std::fs::read_to_string(state_dir.join("established.json"))
            .ok()
            .filter(|s| s.contains("\"bird\""))
    })
    .await;
    assert!(kept.is_some(), "{}", first.proc.log());
    drop(first);

    // The next process on the node cannot peer: it expects another AS and refuses BIRD's
    // OPEN with a NOTIFICATION (what a broken release looks like from the gate).
    let mut wrong = bird_peer(&bird_a, ours);
    wrong.asn = 65099;
    let restarted = Speaker::start(
        TempDir::new("ready-restarted"),
        &["198.19.7.0/24"],
        "allowedPrefixes: [198.19.0.0/16]\n",
        &[wrong],
        &["--ready-peer-grace", "2s", &state_flag],
    );
    let held = "bird (Established before this restart; answers, not Established again)";
    let answered = poll(T, || async {
        readyz(&restarted).await.filter(|(_, b)| b.contains(held))
    })
    .await;
    assert!(answered.is_some(), "{}", restarted.proc.log());
    // The same on a node that never had the session (its own BIRD, no state kept).
    let other = net::alloc_v4();
    let bird_b = bird(other);
    let mut rejected = bird_peer(&bird_b, other);
    rejected.asn = 65099;
    let fresh = Speaker::start(
        TempDir::new("ready-fresh"),
        &["198.19.8.0/24"],
        "allowedPrefixes: [198.19.0.0/16]\n",
        &[rejected],
        &["--ready-peer-grace", "2s"],
    );
    // The fresh node is excused once its grace is over (it started after the restarted one,
    // so the restarted one's grace is over too).
    wait_ready(&fresh).await;
    let excused = poll(T, || async {
        http_get(fresh.admin, "/metrics")
            .await
            .map(|(_, b)| b)
            .filter(|b| b.contains("podcidr_ready_excused_peers 1"))
    })
    .await;
    assert!(excused.is_some(), "{}", fresh.proc.log());
    let (code, body) = readyz(&restarted).await.expect("/readyz answers");
    assert_eq!(code, 503, "{body}\n{}", restarted.proc.log());
    assert!(body.contains(held), "{body}");
}
