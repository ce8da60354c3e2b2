//! The gate's rules, one table row each.

use super::*;

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn route(dst: &str, kind: RouteKind, dev: Option<&str>, via: Option<&str>) -> KernelRoute {
    KernelRoute {
        dst: net(dst),
        kind,
        dev: dev.map(str::to_owned),
        via: via.map(|v| v.parse().unwrap()),
    }
}

fn uni(dst: &str, dev: &str) -> KernelRoute {
    route(dst, RouteKind::Unicast, Some(dev), None)
}

/// A node with its uplink eth0 (default route via 198.18.1.1) and `extra` routes.
fn table(extra: Vec<KernelRoute>) -> RouteTable {
    let mut routes = vec![
        route(
            "0.0.0.0/0",
            RouteKind::Unicast,
            Some("eth0"),
            Some("198.18.1.1"),
        ),
        route(
            "::/0",
            RouteKind::Unicast,
            Some("eth0"),
            Some("fd00:18:1::1"),
        ),
        uni("198.18.1.0/24", "eth0"),
        uni("fd00:18:1::/64", "eth0"),
    ];
    routes.extend(extra);
    RouteTable::new(routes)
}

fn verdict_with(t: &RouteTable, cfg: &ForwardingGateConfig, cidr: &str) -> Option<HoldReason> {
    let up = uplinks(t, &[]);
    super::verdict(
        &net(cidr),
        &GateInputs {
            config: cfg,
            table: t,
            uplinks: &up,
            cni_written: None,
        },
    )
}

fn verdict(t: &RouteTable, cidr: &str) -> Option<HoldReason> {
    verdict_with(t, &ForwardingGateConfig::default(), cidr)
}

#[test]
fn cidr_without_any_route_of_its_own_is_held_no_route() {
    // The default route covers it, but a covering route never counts.
    assert_eq!(
        verdict(&table(vec![]), "198.19.1.0/24"),
        Some(HoldReason::NoRoute)
    );
}

#[test]
fn bridge_subnet_route_on_a_local_device_releases_the_cidr() {
    let t = table(vec![uni("198.19.1.0/24", "podcidr0")]);
    assert_eq!(verdict(&t, "198.19.1.0/24"), None);
}

#[test]
fn one_per_pod_host_route_inside_the_cidr_releases_it() {
    let t = table(vec![
        route("198.19.1.0/24", RouteKind::Drop, None, None),
        uni("198.19.1.7/32", "cali1234"),
        uni("fd00:19:1::7/128", "cali1234"),
    ]);
    assert_eq!(verdict(&t, "198.19.1.0/24"), None);
    assert_eq!(verdict(&t, "fd00:19:1::/64"), None);
}

#[test]
fn only_a_blackhole_route_holds_the_cidr_unreachable() {
    let t = table(vec![route("198.19.1.0/24", RouteKind::Drop, None, None)]);
    assert_eq!(verdict(&t, "198.19.1.0/24"), Some(HoldReason::Unreachable));
}

#[test]
fn route_through_the_default_routes_device_is_held_via_uplink() {
    let t = table(vec![route(
        "198.19.1.0/24",
        RouteKind::Unicast,
        Some("eth0"),
        Some("198.18.1.1"),
    )]);
    assert_eq!(verdict(&t, "198.19.1.0/24"), Some(HoldReason::ViaUplink));
}

#[test]
fn route_through_the_device_towards_a_peer_is_held_via_uplink() {
    // No default route: the uplink is known from the peer's route.
    let t = RouteTable::new(vec![
        uni("198.18.2.0/24", "eth1"),
        uni("198.19.1.0/24", "eth1"),
    ]);
    let peers = podcidr_config::Config::from_yaml_str(
        "asn: 65010\nsource: {kind: file, path: /x}\npeers: [{name: tor, address: 198.18.2.1, asn: 65000}]\n",
    )
    .unwrap()
    .peers;
    let up = uplinks(&t, &peers);
    assert_eq!(up, BTreeSet::from(["eth1".to_owned()]));
    let v = super::verdict(
        &net("198.19.1.0/24"),
        &GateInputs {
            config: &ForwardingGateConfig::default(),
            table: &t,
            uplinks: &up,
            cni_written: None,
        },
    );
    assert_eq!(v, Some(HoldReason::ViaUplink));
}

#[test]
fn an_interface_peers_interface_is_an_uplink() {
    let t = RouteTable::new(vec![]);
    let peers = podcidr_config::Config::from_yaml_str(
        "asn: 65010\nsource: {kind: file, path: /x}\npeers: [{name: tor, interface: swp1, peerAddress: \"fe80::1\", asn: 65000}]\n",
    )
    .unwrap()
    .peers;
    assert!(uplinks(&t, &peers).contains("swp1"));
}

#[test]
fn a_loopback_route_does_not_count() {
    let t = table(vec![uni("198.19.1.0/24", "lo")]);
    assert_eq!(
        verdict(&t, "198.19.1.0/24"),
        Some(HoldReason::InterfaceNotListed)
    );
}

#[test]
fn with_interfaces_set_only_listed_devices_count() {
    let cfg = ForwardingGateConfig {
        enabled: true,
        interfaces: vec!["cni0".into(), "cali*".into()],
        ..ForwardingGateConfig::default()
    };
    let docker = table(vec![uni("198.19.1.0/24", "docker0")]);
    assert_eq!(
        verdict_with(&docker, &cfg, "198.19.1.0/24"),
        Some(HoldReason::InterfaceNotListed)
    );
    let cali = table(vec![uni("198.19.1.9/32", "caliabc")]);
    assert_eq!(verdict_with(&cali, &cfg, "198.19.1.0/24"), None);
}

/// Review 2 F8: in a bridged design `br0` holds the NIC (so the default route goes out of it)
/// and the pods' veths (so the pod CIDR's route does too). Listed, it counts; unlisted, the
/// uplink heuristic still holds it (a route back into the fabric would loop).
#[test]
fn a_listed_interface_counts_even_when_it_is_an_uplink() {
    let t = RouteTable::new(vec![
        route(
            "0.0.0.0/0",
            RouteKind::Unicast,
            Some("br0"),
            Some("198.18.1.1"),
        ),
        uni("198.18.1.0/24", "br0"),
        uni("198.19.1.0/24", "br0"),
    ]);
    assert!(uplinks(&t, &[]).contains("br0"));
    let listed = ForwardingGateConfig {
        enabled: true,
        interfaces: vec!["br0".into()],
        ..ForwardingGateConfig::default()
    };
    assert_eq!(verdict_with(&t, &listed, "198.19.1.0/24"), None);
    let pattern = ForwardingGateConfig {
        interfaces: vec!["br*".into()],
        ..listed.clone()
    };
    assert_eq!(verdict_with(&t, &pattern, "198.19.1.0/24"), None);
    assert_eq!(
        verdict(&t, "198.19.1.0/24"),
        Some(HoldReason::ViaUplink),
        "not listed: the uplink heuristic holds"
    );
    let lo = ForwardingGateConfig {
        interfaces: vec!["lo".into()],
        ..listed
    };
    let t = table(vec![uni("198.19.1.0/24", "lo")]);
    assert_eq!(
        verdict_with(&t, &lo, "198.19.1.0/24"),
        Some(HoldReason::InterfaceNotListed),
        "lo never counts"
    );
}

#[test]
fn a_route_of_a_neighbouring_cidr_does_not_count() {
    // Sorted next to it, but not inside it.
    let t = table(vec![
        uni("198.19.0.0/24", "podcidr0"),
        uni("198.19.2.0/24", "podcidr0"),
        uni("198.19.0.0/16", "podcidr0"),
    ]);
    assert_eq!(verdict(&t, "198.19.1.0/24"), Some(HoldReason::NoRoute));
}

#[test]
fn a_loop_is_named_before_a_drop_when_both_are_there() {
    let t = table(vec![
        route("198.19.1.0/24", RouteKind::Drop, None, None),
        uni("198.19.1.5/32", "eth0"),
    ]);
    assert_eq!(verdict(&t, "198.19.1.0/24"), Some(HoldReason::ViaUplink));
}

#[test]
fn with_cni_enabled_a_cidr_not_in_the_written_conflist_is_held_even_with_a_route() {
    let t = table(vec![uni("198.19.1.0/24", "podcidr0")]);
    let up = uplinks(&t, &[]);
    let cfg = ForwardingGateConfig::default();
    let inputs = |written: &'static [IpNet]| GateInputs {
        config: &cfg,
        table: &t,
        uplinks: &up,
        cni_written: Some(written),
    };
    assert_eq!(
        super::verdict(&net("198.19.1.0/24"), &inputs(&[])),
        Some(HoldReason::CniNotWritten)
    );
    let written: &'static [IpNet] = Box::leak(Box::new([net("198.19.1.0/24")]));
    assert_eq!(
        super::verdict(&net("198.19.1.0/24"), &inputs(written)),
        None
    );
}

#[test]
fn released_is_the_announced_set_minus_what_is_held() {
    let announce = [
        net("198.19.1.0/24"),
        net("198.19.2.0/24"),
        net("fd00:19:1::/64"),
    ];
    let t = table(vec![uni("198.19.2.0/24", "podcidr0")]);
    let up = uplinks(&t, &[]);
    let cfg = ForwardingGateConfig::default();
    let h = held(
        &announce,
        &GateInputs {
            config: &cfg,
            table: &t,
            uplinks: &up,
            cni_written: None,
        },
    );
    assert_eq!(
        h.iter().map(|h| h.cidr).collect::<Vec<_>>(),
        [net("198.19.1.0/24"), net("fd00:19:1::/64")]
    );
    assert_eq!(released(&announce, &h), [net("198.19.2.0/24")]);
    let c = count(&h);
    assert!(c.contains(&("ipv4", "no-route", 1)));
    assert!(c.contains(&("ipv6", "no-route", 1)));
    assert_eq!(c.iter().map(|x| x.2).sum::<usize>(), 2);
}

#[test]
fn every_family_and_reason_has_its_own_gauge_series() {
    let mut labels: Vec<_> = count(&[]).iter().map(|(f, r, _)| (*f, *r)).collect();
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels.len(), 10);
}

/// Issue 31 item 7: a node with a full table (here 20,000 routes outside the pod pool, among
/// pod routes, a blackhole, a loop via the uplink and routes towards a peer) reads only what
/// the gate needs (`kernel::RouteFilter`), and every verdict and every uplink is what the
/// whole table gives.
#[test]
fn the_filtered_table_gives_every_verdict_the_whole_table_gives() {
    use crate::daemon::core::kernel::RouteFilter;
    let peer: IpAddr = "198.19.7.1".parse().unwrap();
    let filter = RouteFilter {
        within: vec![net("10.244.0.0/16"), net("fd00:244::/48")],
        towards: vec![peer, "198.18.1.1".parse().unwrap()],
    };
    let mut rng = fastrand::Rng::with_seed(7);
    let mut routes = vec![
        uni("10.244.1.0/24", "cni0"),
        uni("10.244.2.0/25", "cni0"),
        route("10.244.3.0/24", RouteKind::Drop, None, None),
        uni("10.244.4.0/24", "eth0"),
        uni("fd00:244:0:1::/64", "cni0"),
        uni("198.19.7.0/24", "eth1"),
        route("10.0.0.0/8", RouteKind::Drop, None, None),
    ];
    for _ in 0..20_000 {
        let a = std::net::Ipv4Addr::from(rng.u32(..));
        let len = rng.u8(8..=32);
        let dev = ["eth0", "eth1", "cni0"][rng.usize(..3)];
        routes.push(uni(
            &format!("{}", IpNet::new(a.into(), len).unwrap().trunc()),
            dev,
        ));
    }
    let whole = table(routes);
    let kept: Vec<KernelRoute> = whole
        .routes()
        .iter()
        .filter(|r| filter.keeps(&r.dst))
        .cloned()
        .collect();
    assert!(kept.len() < 200, "{} routes kept", kept.len());
    let filtered = RouteTable::new(kept);
    let peers = podcidr_config::Config::from_yaml_str(
        "asn: 65010\nrouterId: 198.18.1.2\nsource: {kind: file, path: /x}\npeers:\n  \
         - {name: tor, address: 198.19.7.1, asn: 65000}\n",
    )
    .unwrap()
    .peers;
    assert_eq!(uplinks(&filtered, &peers), uplinks(&whole, &peers));
    let cfg = ForwardingGateConfig::default();
    let (up_filtered, up_whole) = (uplinks(&filtered, &peers), uplinks(&whole, &peers));
    let inputs = |table, uplinks| GateInputs {
        config: &cfg,
        table,
        uplinks,
        cni_written: None,
    };
    let mut held = 0;
    for i in 0..=255u8 {
        for cidr in [format!("10.244.{i}.0/24"), format!("fd00:244:0:{i:x}::/64")] {
            let c = net(&cidr);
            let v = super::verdict(&c, &inputs(&whole, &up_whole));
            held += usize::from(v.is_some());
            assert_eq!(
                super::verdict(&c, &inputs(&filtered, &up_filtered)),
                v,
                "{cidr}"
            );
        }
    }
    assert!(
        held > 0 && held < 512,
        "some verdicts of each kind: {held} held"
    );
}
