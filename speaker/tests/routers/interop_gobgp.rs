//! The speaker against GoBGP 3.10 (Debian package) on loopback, with assertions on what
//! GoBGP itself reports. GoBGP drops IPv4 routes whose next hop is in 127/8, so the test
//! announces next hops from 198.18.0.0/15 and 2001:db8::/32.

use crate::common;
use integration_tests::skip::Need;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use common::TempDir;
use common::speaker::{Peer, Speaker, write_cidrs};
use integration_tests::{Family as GobgpFamily, Gobgp, GobgpConfig, GobgpNeighbor, net};
use ipnet::IpNet;

const T: Duration = Duration::from_secs(40);

fn rib(g: &Gobgp) -> BTreeSet<(IpNet, Option<IpAddr>)> {
    [GobgpFamily::Ipv4, GobgpFamily::Ipv6]
        .into_iter()
        .flat_map(|f| g.rib(f))
        .map(|p| (p.prefix, p.next_hop))
        .collect()
}

fn want(items: &[(&str, &str)]) -> BTreeSet<(IpNet, Option<IpAddr>)> {
    items
        .iter()
        .map(|(p, nh)| (p.parse().unwrap(), Some(nh.parse().unwrap())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gobgp_learns_both_families_with_our_next_hops_md5_and_withdrawals() {
    integration_tests::require!(Need::Gobgp);
    let ours = net::alloc_v4();
    let listen = net::alloc_v4();
    // GoBGP is the passive side: its own outgoing connects wait 5-9 s.
    let gobgp = Gobgp::start(
        GobgpConfig::new(listen, 65002).neighbor(
            GobgpNeighbor::new(ours, 4_200_000_001)
                .passive(true)
                .ebgp_multihop(Some(2))
                .auth_password("k3y"),
        ),
    );
    let dir = TempDir::new("interop-gobgp");
    std::fs::write(dir.path("key"), "k3y").unwrap();
    let a = gobgp.peer_addr();
    let peer = Peer {
        name: "gobgp",
        address: a.addr,
        port: a.port,
        asn: a.asn,
        local: IpAddr::V4(ours),
        extra: format!(
            "    ebgpMultihop: 2\n    passwordFile: {}\n",
            dir.path("key").display()
        ),
    };
    let top = "nextHop: {ipv4: 198.18.0.31, ipv6: \"2001:db8::31\"}\n";
    let s = Speaker::start(
        dir,
        &["198.19.1.0/24", "198.19.2.0/24", "fd00:19:1::/64"],
        top,
        &[peer],
        &[],
    );
    let expected = want(&[
        ("198.19.1.0/24", "198.18.0.31"),
        ("198.19.2.0/24", "198.18.0.31"),
        ("fd00:19:1::/64", "2001:db8::31"),
    ]);
    assert!(
        gobgp.wait_until(T, |g| rib(g) == expected),
        "GoBGP has {:?}\n{}\n{}",
        rib(&gobgp),
        gobgp.diagnostics(),
        s.proc.log()
    );
    let paths = gobgp.rib(GobgpFamily::Ipv4);
    assert!(
        paths.iter().all(|p| p.as_path == vec![4_200_000_001]),
        "{paths:?}"
    );

    write_cidrs(&s.dir, &["198.19.2.0/24"]);
    let expected = want(&[("198.19.2.0/24", "198.18.0.31")]);
    assert!(
        gobgp.wait_until(T, |g| rib(g) == expected),
        "GoBGP has {:?}",
        rib(&gobgp)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gobgp_keeps_routes_stale_after_a_hard_kill_and_a_final_stop_withdraws_them() {
    integration_tests::require!(Need::Gobgp);
    let ours = net::alloc_v4();
    let listen = net::alloc_v4();
    let gobgp = Gobgp::start(
        GobgpConfig::new(listen, 65002).neighbor(
            GobgpNeighbor::new(ours, 4_200_000_001)
                .passive(true)
                .ebgp_multihop(Some(2))
                .graceful_restart(60),
        ),
    );
    let a = gobgp.peer_addr();
    let peer = Peer {
        name: "gobgp",
        address: a.addr,
        port: a.port,
        asn: a.asn,
        local: IpAddr::V4(ours),
        extra: "    ebgpMultihop: 2\n    gracefulRestart: {enabled: true, restartTime: 60}\n"
            .into(),
    };
    // The final stop below withdraws at once (no RFC 8326 wait).
    let top = "nextHop: {ipv4: 198.18.0.31}\ngracefulShutdown: {wait: 0}\n";
    let mut s = Speaker::start(
        TempDir::new("gobgp-gr"),
        &["198.19.3.0/24"],
        top,
        &[peer],
        &[],
    );
    let expected = want(&[("198.19.3.0/24", "198.18.0.31")]);
    assert!(
        gobgp.wait_until(T, |g| rib(g) == expected),
        "{}\n{}",
        gobgp.diagnostics(),
        s.proc.log()
    );

    s.proc.signal(libc::SIGKILL);
    s.proc.wait_exit(Duration::from_secs(10)).expect("killed");
    assert!(
        gobgp.wait_until(T, |g| g.rib(GobgpFamily::Ipv4).iter().any(|p| p.stale)),
        "GoBGP keeps our route as stale\n{}",
        gobgp.diagnostics()
    );

    // Back with --final: the route is refreshed, then a SIGTERM withdraws it at once.
    let Speaker { dir, admin, .. } = s;
    let mut s = Speaker::spawn(dir, admin, &["--final"]);
    assert!(
        gobgp.wait_until(T, |g| {
            let paths = g.rib(GobgpFamily::Ipv4);
            paths.len() == 1 && !paths[0].stale
        }),
        "{}\n{}",
        gobgp.diagnostics(),
        s.proc.log()
    );
    s.proc.signal(libc::SIGTERM);
    s.proc
        .wait_exit(Duration::from_secs(20))
        .expect("exits on SIGTERM");
    assert!(
        gobgp.wait_until(T, |g| rib(g).is_empty()),
        "a final stop withdraws\n{}",
        gobgp.diagnostics()
    );
}
