//! Tests of the real-router fixtures themselves: BIRD and GoBGP peering on loopback.

use integration_tests::skip::Need;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use integration_tests::{
    Bird, BirdConfig, BirdNeighbor, Family, Gobgp, GobgpConfig, GobgpNeighbor, GobgpRoute,
    RouteQuery, StaticRoute, net,
};

const T: Duration = Duration::from_secs(15);

fn nh4() -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))
}

/// True if `pid` is gone (or now belongs to a process that is not ours).
fn pid_gone(pid: u32, marker: &str) -> bool {
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Err(_) => true,
        Ok(cmd) => !String::from_utf8_lossy(&cmd).contains(marker),
    }
}

#[test]
fn daemons_are_installed() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
}

#[test]
fn bird_starts_parses_and_stops_on_drop() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
    let t0 = Instant::now();
    let bird = Bird::start(
        BirdConfig::new(net::alloc_v4(), 65001).static_route(
            StaticRoute::new("198.51.100.0/24")
                .community(65001, 7)
                .large_community(65001, 1, 2)
                .med(9),
        ),
    );
    let protos = bird.protocols();
    let names: Vec<&str> = protos.iter().map(|p| p.name.as_str()).collect();
    assert!(
        names.contains(&"device1") && names.contains(&"static4"),
        "{names:?}"
    );
    let st = bird.protocol("static4");
    assert_eq!((st.proto.as_str(), st.state.as_str()), ("Static", "up"));
    assert_eq!(st.routes_imported, Some(1));

    let routes = bird.routes(&RouteQuery::all().table("master4"));
    assert_eq!(routes.len(), 1, "{routes:?}");
    let r = &routes[0];
    assert_eq!(r.prefix, "198.51.100.0/24".parse().unwrap());
    assert_eq!(
        (r.dest.as_str(), r.from_protocol.as_str()),
        ("blackhole", "static4")
    );
    assert_eq!(r.communities, vec![(65001, 7)]);
    assert_eq!(r.large_communities, vec![(65001, 1, 2)]);
    assert_eq!(r.med, Some(9));
    assert!(r.primary && !r.stale);

    bird.disable("static4", Some("maintenance \"now\""));
    let st = bird.protocol("static4");
    assert_eq!(st.state, "down");
    assert_eq!(st.message.as_deref(), Some("maintenance 'now'"));
    assert!(bird.cmd("show protocols all no_such_proto").is_err());

    let (pid, dir) = (bird.pid(), bird.dir().to_owned());
    let marker = dir.join("bird.conf").display().to_string();
    assert!(!pid_gone(pid, &marker));
    drop(bird);
    assert!(
        pid_gone(pid, &marker),
        "bird {pid} still running after drop"
    );
    assert!(!dir.exists(), "{} not removed", dir.display());
    eprintln!("bird_starts_parses_and_stops_on_drop: {:?}", t0.elapsed());
}

#[test]
fn gobgp_crash_and_restart_keeps_config_and_routes() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
    let mut g = Gobgp::start(
        GobgpConfig::new(net::alloc_v4(), 65003).route(GobgpRoute::new(
            "203.0.113.0/24",
            Ipv4Addr::new(198, 18, 2, 1),
        )),
    );
    let (pid, port) = (g.pid(), g.api_port());
    g.crash_and_restart(true);
    assert_ne!(g.pid(), pid);
    assert_eq!(g.api_port(), port);
    assert!(g.is_running());
    assert_eq!(g.rib(Family::Ipv4).len(), 1);
}

#[test]
#[should_panic(expected = "BIRD did not start")]
fn bird_config_error_fails_loudly() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
    Bird::start(BirdConfig::new(net::alloc_v4(), 65001).extra("this is not bird config;"));
}

#[test]
fn bird_to_bird_session_carries_routes_and_attributes() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
    let t0 = Instant::now();
    let (a_addr, b_addr) = (net::alloc_v4(), net::alloc_v4());
    let a = Bird::start(
        BirdConfig::new(a_addr, 65001)
            .neighbor(
                BirdNeighbor::new("to_b", b_addr, 65002)
                    .ipv4_next_hop(Ipv4Addr::new(198, 18, 0, 1))
                    .hold_time(9),
            )
            .static_route(
                StaticRoute::new("198.18.5.0/24")
                    .community(65001, 100)
                    .community(65535, 65281)
                    .large_community(4_200_000_001, 1, 2)
                    .med(33),
            )
            .static_route(StaticRoute::new("10.1.0.0/16"))
            .static_route(StaticRoute::new("2001:db8:5::/48").community(65001, 6)),
    );
    let b = Bird::start(
        BirdConfig::new(b_addr, 65002).neighbor(
            BirdNeighbor::new("to_a", a_addr, 65001)
                .passive(true)
                .hold_time(9),
        ),
    );
    assert_eq!(b.peer_addr("to_a").socket_addr(), (b_addr, 179).into());

    let p = b.wait_established("to_a", T);
    assert_eq!(p.neighbor_address, Some(IpAddr::V4(a_addr)));
    assert_eq!((p.neighbor_as, p.local_as), (Some(65001), Some(65002)));
    assert_eq!(p.hold_time, Some(9));
    assert!(p.neighbor_has_cap("Route refresh"), "{:?}", p.neighbor_caps);
    assert!(
        b.wait_until(T, |b| b.protocol("to_a").routes_imported == Some(3)),
        "{}",
        b.diagnostics()
    );

    let v4 = b.routes(&RouteQuery::protocol("to_a").table("master4"));
    assert_eq!(v4.len(), 2, "{v4:?}");
    let r = v4
        .iter()
        .find(|r| r.prefix == "198.18.5.0/24".parse().unwrap())
        .expect("198.18.5.0/24");
    assert_eq!(r.next_hop, Some(nh4()));
    assert_eq!(r.from_addr, Some(IpAddr::V4(a_addr)));
    assert_eq!(r.as_path, vec![65001]);
    assert_eq!(r.communities, vec![(65001, 100), (65535, 65281)]);
    assert_eq!(r.large_communities, vec![(4_200_000_001, 1, 2)]);
    assert_eq!(
        (r.med, r.local_pref, r.origin.as_deref()),
        (Some(33), Some(100), Some("IGP"))
    );
    assert_eq!(r.route_type.as_deref(), Some("BGP univ"));
    assert!(!r.stale);
    let v6 = b.routes(&RouteQuery::protocol("to_a").table("master6"));
    assert_eq!(v6.len(), 1, "{v6:?}");
    assert_eq!(
        v6[0].next_hop,
        Some(IpAddr::V6(Ipv6Addr::new(
            0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 1
        )))
    );
    assert_eq!(v6[0].communities, vec![(65001, 6)]);

    // ROUTE-REFRESH from B reaches A (BIRD logs received packets with `debug … packets`).
    b.reload_in("to_a");
    assert!(
        a.wait_until(T, |a| a.log_contains("Got ROUTE-REFRESH")),
        "{}",
        a.log()
    );
    eprintln!(
        "bird_to_bird_session_carries_routes_and_attributes: {:?}",
        t0.elapsed()
    );
}

#[test]
fn bird_marks_routes_stale_during_graceful_restart() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
    let t0 = Instant::now();
    let (a_addr, b_addr) = (net::alloc_v4(), net::alloc_v4());
    let a_cfg = BirdConfig::new(a_addr, 65001)
        .neighbor(BirdNeighbor::new("to_b", b_addr, 65002).graceful_restart(30))
        .static_route(StaticRoute::new("198.18.6.0/24"));
    let mut a = Bird::start(a_cfg.clone());
    let b = Bird::start(
        BirdConfig::new(b_addr, 65002).neighbor(
            BirdNeighbor::new("to_a", a_addr, 65001)
                .passive(true)
                .graceful_restart(30),
        ),
    );
    b.wait_established("to_a", T);
    assert!(b.wait_until(T, |b| b.routes_from("to_a").len() == 1));
    assert!(!b.routes_from("to_a")[0].stale);

    a.kill(); // no NOTIFICATION: B keeps the routes as stale
    assert!(
        b.wait_until(T, |b| b.protocol("to_a").gr_active),
        "{}",
        b.diagnostics()
    );
    let p = b.protocol("to_a");
    assert_eq!(
        p.channel("ipv4").and_then(|c| c.neighbor_gr.as_deref()),
        Some("Regular")
    );
    let routes = b.routes_from("to_a");
    assert_eq!(routes.len(), 1, "{routes:?}");
    assert!(routes[0].stale && !routes[0].llgr_stale, "{routes:?}");

    // A comes back (no F bit): B flushes and takes the re-announced route, not stale.
    let _a = Bird::start(a_cfg);
    b.wait_established("to_a", T);
    assert!(
        b.wait_until(T, |b| {
            b.routes_from("to_a").iter().any(|r| !r.stale) && !b.protocol("to_a").gr_active
        }),
        "{}",
        b.diagnostics()
    );
    eprintln!(
        "bird_marks_routes_stale_during_graceful_restart: {:?}",
        t0.elapsed()
    );
}

#[test]
fn bird_to_bird_over_ipv6_loopback() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
    let t0 = Instant::now();
    let (pa, pb) = (
        net::free_port(net::V6_LOOPBACK),
        net::free_port(net::V6_LOOPBACK),
    );
    let a = Bird::start(
        BirdConfig::new(net::V6_LOOPBACK, 65001)
            .port(pa)
            .neighbor(
                BirdNeighbor::new("to_b", net::V6_LOOPBACK, 65002)
                    .port(pb)
                    .families(false, true),
            )
            .static_route(StaticRoute::new("2001:db8:7::/48")),
    );
    let b = Bird::start(
        BirdConfig::new(net::V6_LOOPBACK, 65002).port(pb).neighbor(
            BirdNeighbor::new("to_a", net::V6_LOOPBACK, 65001)
                .port(pa)
                .passive(true)
                .families(false, true),
        ),
    );
    b.wait_established("to_a", T);
    assert!(
        b.wait_until(T, |b| b.routes_from("to_a").len() == 1),
        "{}",
        b.diagnostics()
    );
    assert_eq!(
        b.routes_from("to_a")[0].prefix,
        "2001:db8:7::/48".parse().unwrap()
    );
    drop(a);
    eprintln!("bird_to_bird_over_ipv6_loopback: {:?}", t0.elapsed());
}

#[test]
fn gobgp_peers_with_bird_and_exchanges_routes() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
    let t0 = Instant::now();
    let (g_addr, b_addr) = (net::alloc_v4(), net::alloc_v4());
    // GoBGP passive: it waits 5-9 s before connecting out itself.
    let g = Gobgp::start(
        GobgpConfig::new(g_addr, 65003)
            .neighbor(
                GobgpNeighbor::new(b_addr, 65001)
                    .graceful_restart(30)
                    .auth_password("md5-pw"),
            )
            .route(
                GobgpRoute::new("203.0.113.0/24", Ipv4Addr::new(198, 18, 2, 1))
                    .arg("community 65003:9 med 20"),
            ),
    );
    assert_eq!(g.peer_addr().socket_addr(), (g_addr, 179).into());
    let b = Bird::start(
        BirdConfig::new(b_addr, 65001)
            .neighbor(
                BirdNeighbor::new("gobgp", g_addr, 65003)
                    .ipv4_next_hop(Ipv4Addr::new(198, 18, 0, 1))
                    .graceful_restart(30)
                    .password("md5-pw"),
            )
            .static_route(
                StaticRoute::new("198.18.9.0/24")
                    .community(65001, 42)
                    .large_community(65001, 3, 4),
            )
            .static_route(StaticRoute::new("2001:db8:9::/48")),
    );
    let n = g.wait_established(IpAddr::V4(b_addr), T);
    assert_eq!(n.peer_as, Some(65001));
    b.wait_established("gobgp", T);

    assert!(g.wait_until(T, |g| {
        g.rib(Family::Ipv4)
            .iter()
            .any(|p| p.neighbor_ip == Some(IpAddr::V4(b_addr)))
    }));
    let rib4 = g.rib(Family::Ipv4);
    let p = rib4
        .iter()
        .find(|p| p.prefix == "198.18.9.0/24".parse().unwrap())
        .expect("route in GoBGP rib");
    assert_eq!(p.next_hop, Some(nh4()));
    assert_eq!(p.as_path, vec![65001]);
    assert_eq!(p.communities, vec![(65001, 42)]);
    assert_eq!(p.large_communities, vec![(65001, 3, 4)]);
    assert!(p.best && !p.stale);
    assert!(g.wait_until(T, |g| {
        g.rib(Family::Ipv6)
            .iter()
            .any(|p| p.prefix == "2001:db8:9::/48".parse().unwrap())
    }));
    assert_eq!(g.adj_in(IpAddr::V4(b_addr), Family::Ipv4).len(), 1);

    // And the other way: GoBGP's own route at BIRD.
    assert!(
        b.wait_until(T, |b| !b.routes_from("gobgp").is_empty()),
        "{}",
        b.diagnostics()
    );
    let r = &b.routes_from("gobgp")[0];
    assert_eq!(r.prefix, "203.0.113.0/24".parse().unwrap());
    assert_eq!(r.next_hop, Some(IpAddr::V4(Ipv4Addr::new(198, 18, 2, 1))));
    assert_eq!(
        (r.communities.clone(), r.med, r.as_path.clone()),
        (vec![(65003, 9)], Some(20), vec![65003])
    );

    // BIRD crashes: GoBGP keeps its routes as stale (graceful restart).
    let mut b = b;
    b.kill();
    assert!(
        g.wait_until(T, |g| g
            .rib(Family::Ipv4)
            .iter()
            .any(|p| p.prefix == "198.18.9.0/24".parse().unwrap() && p.stale)),
        "{}",
        g.diagnostics()
    );
    eprintln!(
        "gobgp_peers_with_bird_and_exchanges_routes: {:?}",
        t0.elapsed()
    );
}

#[test]
fn bird_llgr_routes_are_marked() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
    let t0 = Instant::now();
    let (a_addr, b_addr) = (net::alloc_v4(), net::alloc_v4());
    let mut a = Bird::start(
        BirdConfig::new(a_addr, 65001)
            .neighbor(
                BirdNeighbor::new("to_b", b_addr, 65002)
                    .graceful_restart(1)
                    .long_lived_graceful_restart(30),
            )
            .static_route(StaticRoute::new("198.18.6.0/24")),
    );
    let b = Bird::start(
        BirdConfig::new(b_addr, 65002).neighbor(
            BirdNeighbor::new("to_a", a_addr, 65001)
                .passive(true)
                .graceful_restart(30)
                .long_lived_graceful_restart(30),
        ),
    );
    b.wait_established("to_a", T);
    assert!(b.wait_until(T, |b| b.routes_from("to_a").len() == 1));
    a.kill();
    // GR time 1 s, then LLGR: "(100s)" and community (65535,6).
    assert!(
        b.wait_until(T, |b| b.routes_from("to_a").iter().all(|r| r.llgr_stale)),
        "{}",
        b.diagnostics()
    );
    let r = &b.routes_from("to_a")[0];
    assert!(r.stale && r.communities.contains(&(65535, 6)));
    let p = b.protocol("to_a");
    assert_eq!(
        p.channel("ipv4").and_then(|c| c.neighbor_gr.as_deref()),
        Some("Long-lived")
    );
    eprintln!("bird_llgr_routes_are_marked: {:?}", t0.elapsed());
}

#[test]
fn bird_md5_gtsm_and_hold_timer_expiry() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
    // GTSM with `multihop` (needed on loopback): BIRD sends TTL 255, accepts >= 256 - 64.
    let t0 = Instant::now();
    let (a_addr, b_addr) = (net::alloc_v4(), net::alloc_v4());
    let mut a = Bird::start(
        BirdConfig::new(a_addr, 65001).neighbor(
            BirdNeighbor::new("to_b", b_addr, 65002)
                .ttl_security(true)
                .password("s3cret")
                .hold_time(3)
                .keepalive_time(1),
        ),
    );
    let b = Bird::start(
        BirdConfig::new(b_addr, 65002).neighbor(
            BirdNeighbor::new("to_a", a_addr, 65001)
                .ttl_security(true)
                .password("s3cret")
                .passive(true)
                .hold_time(3)
                .keepalive_time(1),
        ),
    );
    let p = b.wait_established("to_a", T);
    assert_eq!(p.hold_time, Some(3));
    // A frozen: no KEEPALIVEs, B's hold timer (3 s) expires.
    a.stop_signal();
    let expired = b.wait_until(T, |b| {
        b.protocol("to_a")
            .last_error
            .is_some_and(|e| e.contains("Hold timer expired"))
    });
    a.cont_signal();
    assert!(expired, "{}", b.diagnostics());
    assert!(b.log_contains("Hold timer expired"));
    b.wait_established("to_a", T);
    eprintln!("bird_md5_gtsm_and_hold_timer_expiry: {:?}", t0.elapsed());
}

#[test]
fn gobgp_and_bird_over_ipv6_loopback() {
    integration_tests::require!(Need::Bird, Need::Gobgp);
    let t0 = Instant::now();
    let (gp, bp) = (
        net::free_port(net::V6_LOOPBACK),
        net::free_port(net::V6_LOOPBACK),
    );
    let g = Gobgp::start(
        GobgpConfig::new(net::V6_LOOPBACK, 65003)
            .port(gp)
            .neighbor(GobgpNeighbor::new(net::V6_LOOPBACK, 65001).families(false, true)),
    );
    assert_eq!(g.peer_addr().socket_addr(), (net::V6_LOOPBACK, gp).into());
    let b = Bird::start(
        BirdConfig::new(net::V6_LOOPBACK, 65001)
            .port(bp)
            .neighbor(
                BirdNeighbor::new("gobgp", net::V6_LOOPBACK, 65003)
                    .port(gp)
                    .families(false, true),
            )
            .static_route(StaticRoute::new("2001:db8:66::/48").community(65001, 66)),
    );
    b.wait_established("gobgp", T);
    g.wait_established(net::V6_LOOPBACK, T);
    assert!(
        g.wait_until(T, |g| !g.rib(Family::Ipv6).is_empty()),
        "{}",
        g.diagnostics()
    );
    let p = &g.rib(Family::Ipv6)[0];
    assert_eq!(p.prefix, "2001:db8:66::/48".parse().unwrap());
    assert_eq!(
        p.next_hop,
        Some(IpAddr::V6(integration_tests::bird::DEFAULT_V6_NEXT_HOP))
    );
    assert_eq!(p.communities, vec![(65001, 66)]);
    eprintln!("gobgp_and_bird_over_ipv6_loopback: {:?}", t0.elapsed());
}
