use super::*;

use podcidr_config::PeerAsn;

/// `/proc/net/route` of a namespace with `default nexthop via 198.18.1.1 dev va nexthop via
/// 198.18.2.1 dev vc` (captured on this kernel: only the first next hop is listed).
const V4_MULTIPATH: &str = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
va\t00000000\t010112C6\t0003\t0\t0\t0\t00000000\t0\t0\t0
va\t000112C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
vc\t000212C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
";

/// The same namespace's `/proc/net/ipv6_route` with `default nexthop via fd00:1::1 dev va
/// nexthop via fd00:2::1 dev vc`: one line per sibling, and the `lo` reject routes.
const V6_MULTIPATH: &str = "\
fd000001000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001       va
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001       va
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000001000000000000000000000001 00000400 00000001 00000000 00000003       va
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000002000000000000000000000001 00000400 00000001 00000000 00000003       vc
ff000000000000000000000000000000 08 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000003 00000000 00000001       vb
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
";

fn gw(via: &str, dev: &str, metric: u32) -> Gateway {
    Gateway {
        via: via.parse().unwrap(),
        dev: dev.to_owned(),
        metric,
    }
}

const HEADER: &str =
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";

fn v4(lines: &[&str]) -> String {
    let mut s = HEADER.to_owned();
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[test]
fn ipv4_default_route_is_destination_and_mask_zero_via_a_gateway_proc_net_route() {
    // (rule, file, expected)
    let rows: Vec<(&str, String, Vec<Gateway>)> = vec![
        (
            "multipath shows its first next hop",
            V4_MULTIPATH.to_owned(),
            vec![gw("198.18.1.1", "va", 0)],
        ),
        (
            "two default routes: both, lower metric first",
            v4(&[
                "eth1\t00000000\t010212C6\t0003\t0\t0\t200\t00000000\t0\t0\t0",
                "eth0\t00000000\t010112C6\t0003\t0\t0\t100\t00000000\t0\t0\t0",
            ]),
            vec![gw("198.18.1.1", "eth0", 100), gw("198.18.2.1", "eth1", 200)],
        ),
        (
            "a default route without RTF_GATEWAY (device route) has no next hop",
            v4(&["ppp0\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0"]),
            vec![],
        ),
        (
            "a route that is down is not used",
            v4(&["eth0\t00000000\t010112C6\t0002\t0\t0\t0\t00000000\t0\t0\t0"]),
            vec![],
        ),
        (
            "a reject route is not a way out",
            v4(&["eth0\t00000000\t010112C6\t0203\t0\t0\t0\t00000000\t0\t0\t0"]),
            vec![],
        ),
        (
            "a more specific route via a gateway is not the default",
            v4(&["eth0\t000012C6\t010112C6\t0003\t0\t0\t0\t0000FFFF\t0\t0\t0"]),
            vec![],
        ),
        (
            "malformed lines are skipped, good ones kept",
            v4(&[
                "eth0\tzz\t010112C6\t0003\t0\t0\t0\t00000000\t0\t0\t0",
                "eth0\t00000000",
                "eth0\t00000000\t010112C6\t0003\t0\t0\t0\t00000000\t0\t0\t0",
            ]),
            vec![gw("198.18.1.1", "eth0", 0)],
        ),
        ("empty file", String::new(), vec![]),
    ];
    for (rule, text, want) in rows {
        assert_eq!(parse_ipv4_routes(&text), want, "{rule}");
    }
}

#[test]
fn ipv6_default_route_lists_every_multipath_sibling_proc_net_ipv6_route() {
    let z = "00000000000000000000000000000000";
    let line = |gw: &str, metric: &str, flags: &str, dev: &str| {
        format!("{z} 00 {z} 00 {gw} {metric} 00000001 00000000 {flags} {dev}\n")
    };
    let rows: Vec<(&str, String, Vec<Gateway>)> = vec![
        (
            "multipath: one line per next hop; reject and connected routes ignored",
            V6_MULTIPATH.to_owned(),
            vec![gw("fd00:1::1", "va", 1024), gw("fd00:2::1", "vc", 1024)],
        ),
        (
            "router-advertised link-local gateway is listed (the resolver refuses it)",
            line(
                "fe800000000000000000000000000001",
                "00000400",
                "00450003",
                "eth0",
            ),
            vec![gw("fe80::1", "eth0", 1024)],
        ),
        (
            "lower metric first",
            line(
                "20010db8000000000000000000000002",
                "00000200",
                "00000003",
                "eth1",
            ) + &line(
                "20010db8000000000000000000000001",
                "00000100",
                "00000003",
                "eth0",
            ),
            vec![
                gw("2001:db8::1", "eth0", 256),
                gw("2001:db8::2", "eth1", 512),
            ],
        ),
        (
            "the same next hop twice counts once",
            line(
                "20010db8000000000000000000000001",
                "00000100",
                "00000003",
                "eth0",
            ) + &line(
                "20010db8000000000000000000000001",
                "00000100",
                "00000003",
                "eth0",
            ),
            vec![gw("2001:db8::1", "eth0", 256)],
        ),
        (
            "short address field is skipped",
            format!("{z} 00 {z} 00 20010db8 00000100 00000001 00000000 00000003 eth0\n"),
            vec![],
        ),
    ];
    for (rule, text, want) in rows {
        assert_eq!(parse_ipv6_routes(&text), want, "{rule}");
    }
}

fn config(peers: &str) -> Config {
    let yaml = format!("asn: 65001\nallowedPrefixes: [10.0.0.0/8]\npeers:\n{peers}");
    Config::from_yaml_str(&yaml).unwrap()
}

fn routes(ipv4: Vec<Gateway>, ipv6: Vec<Gateway>) -> DefaultRoutes {
    DefaultRoutes { ipv4, ipv6 }
}

fn summary(peers: &[PeerConfig]) -> Vec<(String, String)> {
    peers
        .iter()
        .map(|p| (p.name.clone(), p.address.to_string()))
        .collect()
}

#[test]
fn default_gateway_resolves_to_one_peer_per_next_hop() {
    let cfg = config(
        "  - {name: tor, address: default-gateway, asn: auto, allowedAsns: [65000-65100]}\n  \
         - {name: tor6, address: default-gateway, addressFamily: ipv6, asn: 65000}\n  \
         - {name: rr, address: 192.0.2.7, asn: 65001}\n",
    );
    let two_tors = routes(
        vec![
            gw("198.18.1.1", "eth0", 0),
            gw("198.18.2.1", "eth1.100", 10),
        ],
        vec![gw("2001:db8::1", "eth0", 1024)],
    );
    // (rule, routes, expected peers, expected problems)
    type Row = (
        &'static str,
        DefaultRoutes,
        Vec<(&'static str, &'static str)>,
        Vec<&'static str>,
    );
    let rows: Vec<Row> = vec![
        (
            "one gateway: named after its interface too",
            routes(
                vec![gw("198.18.1.1", "eth0", 0)],
                vec![gw("2001:db8::1", "eth0", 1024)],
            ),
            vec![
                ("tor-eth0", "198.18.1.1"),
                ("tor6-eth0", "2001:db8::1"),
                ("rr", "192.0.2.7"),
            ],
            vec![],
        ),
        (
            "two gateways: one session each, named after the interface",
            two_tors,
            vec![
                ("tor-eth0", "198.18.1.1"),
                ("tor-eth1-100", "198.18.2.1"),
                ("tor6-eth0", "2001:db8::1"),
                ("rr", "192.0.2.7"),
            ],
            vec![],
        ),
        (
            "no default route: no session, a clear reason; a link-local gateway peers on its interface",
            routes(vec![], vec![gw("fe80::1", "eth0", 1024)]),
            vec![("tor6-eth0", "fe80::1%eth0"), ("rr", "192.0.2.7")],
            vec!["peer tor: no default route for ipv4; the session starts when one appears"],
        ),
        (
            "a gateway that is already a configured peer is not peered twice",
            routes(vec![gw("192.0.2.7", "eth0", 0)], vec![]),
            vec![("rr", "192.0.2.7")],
            vec![
                "peer tor: the ipv4 default gateway 192.0.2.7 port 179 is already a configured peer",
                "peer tor6: no default route for ipv6; the session starts when one appears",
            ],
        ),
    ];
    for (rule, r, want, want_problems) in rows {
        let (peers, problems) = resolve_peers(&cfg.peers, &r, &[]);
        let want: Vec<(String, String)> = want
            .into_iter()
            .map(|(n, a)| (n.to_owned(), a.to_owned()))
            .collect();
        assert_eq!(summary(&peers), want, "{rule}");
        let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems, want_problems, "{rule}");
        // Everything else is the entry's own settings.
        for p in peers
            .iter()
            .filter(|p| p.name.starts_with("tor-") || p.name == "tor")
        {
            assert!(matches!(p.asn, PeerAsn::Auto(_)), "{rule}");
        }
    }
}

fn resolve_config(config: &Config, routes: &DefaultRoutes) -> (Config, Vec<Unresolved>) {
    let (peers, problems) = resolve_peers(&config.peers, routes, &[]);
    (
        Config {
            peers,
            ..config.clone()
        },
        problems,
    )
}

#[test]
fn a_changed_gateway_changes_only_that_peer() {
    let cfg = config(
        "  - {name: tor, address: default-gateway, asn: 65000}\n  \
         - {name: rr, address: 192.0.2.7, asn: 65001}\n",
    );
    let before = resolve_config(&cfg, &routes(vec![gw("198.18.1.1", "eth0", 0)], vec![])).0;
    let after = resolve_config(&cfg, &routes(vec![gw("198.18.9.1", "eth0", 0)], vec![])).0;
    let changes = podcidr_config::diff_peers(&before, &after);
    assert_eq!(changes.changed, vec!["tor-eth0".to_owned()]);
    assert_eq!(changes.unchanged, vec!["rr".to_owned()]);
    assert!(changes.added.is_empty() && changes.removed.is_empty());
}

#[test]
fn a_gateway_keeps_its_session_name_when_another_comes_or_goes() {
    let cfg = config("  - {name: tor, address: default-gateway, asn: 65000}\n");
    let one = routes(vec![gw("198.18.2.1", "eth1", 0)], vec![]);
    let two = routes(
        vec![gw("198.18.1.1", "eth0", 0), gw("198.18.2.1", "eth1", 0)],
        vec![],
    );
    let (one, _) = resolve_config(&cfg, &one);
    let (two, _) = resolve_config(&cfg, &two);
    for (rule, before, after) in [
        ("eth0's route goes", &two, &one),
        ("it returns", &one, &two),
    ] {
        let changes = podcidr_config::diff_peers(before, after);
        assert_eq!(changes.unchanged, vec!["tor-eth1".to_owned()], "{rule}");
        assert!(changes.changed.is_empty(), "{rule}: {changes:?}");
    }
}

#[test]
fn name_suffixes_stay_unique() {
    let cfg = config(
        "  - {name: tor, address: default-gateway, asn: 65000}\n  \
         - {name: tor-eth0, address: 192.0.2.7, asn: 65000}\n",
    );
    let r = routes(
        vec![gw("198.18.1.1", "eth0", 0), gw("198.18.1.2", "eth0", 0)],
        vec![],
    );
    let (peers, _) = resolve_peers(&cfg.peers, &r, &[]);
    let names: Vec<&str> = peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["tor-eth0-2", "tor-eth0-3", "tor-eth0"]);
}

#[test]
fn a_second_gateway_on_one_interface_keeps_its_name_when_the_first_goes() {
    let cfg = config("  - {name: tor, address: default-gateway, asn: 65000}\n");
    let both = routes(
        vec![gw("198.18.1.1", "eth0", 0), gw("198.18.1.2", "eth0", 10)],
        vec![],
    );
    let second = routes(vec![gw("198.18.1.2", "eth0", 10)], vec![]);
    let (first_run, _) = resolve_peers(&cfg.peers, &both, &[]);
    assert_eq!(
        summary(&first_run),
        vec![
            ("tor-eth0".to_owned(), "198.18.1.1".to_owned()),
            ("tor-eth0-2".to_owned(), "198.18.1.2".to_owned())
        ]
    );
    let (alone, _) = resolve_peers(&cfg.peers, &second, &first_run);
    assert_eq!(
        summary(&alone),
        vec![("tor-eth0-2".to_owned(), "198.18.1.2".to_owned())]
    );
    // The first returns: it takes the free name, the second keeps its own.
    let (again, _) = resolve_peers(&cfg.peers, &both, &alone);
    assert_eq!(summary(&again), summary(&first_run));
}
