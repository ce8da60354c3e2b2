//! JSON parsing tests on outputs captured from gobgp 3.10.0 (see testdata/README.md).

use super::*;

const NEIGHBOR_UP: &str = include_str!("testdata/gobgp_neighbor_established.json");
const NEIGHBOR_IDLE: &str = include_str!("testdata/gobgp_neighbor_idle.json");
const NEIGHBORS: &str = include_str!("testdata/gobgp_neighbors.json");
const RIB4: &str = include_str!("testdata/gobgp_rib_ipv4.json");
const RIB4_STALE: &str = include_str!("testdata/gobgp_rib_ipv4_stale.json");
const RIB4_EBGP: &str = include_str!("testdata/gobgp_rib_ipv4_ebgp.json");
const RIB6: &str = include_str!("testdata/gobgp_rib_ipv6.json");
const EMPTY: &str = include_str!("testdata/gobgp_adj_in_empty.json");

fn state(text: &str) -> GobgpNeighborState {
    GobgpNeighborState::from_json(&serde_json::from_str(text).unwrap())
}

fn find<'a>(paths: &'a [GobgpPath], prefix: &str) -> &'a GobgpPath {
    let p: IpNet = prefix.parse().unwrap();
    paths
        .iter()
        .find(|x| x.prefix == p)
        .unwrap_or_else(|| panic!("{prefix} not in {paths:?}"))
}

#[test]
fn neighbor_states() {
    let up = state(NEIGHBOR_UP);
    assert!(up.is_established());
    assert_eq!(up.peer_as, Some(65002));
    assert!(up.address.is_some_and(|a| a.is_loopback()));
    assert_eq!(up.ipv4, (1, 1, 2));
    assert_eq!(up.ipv6, (0, 0, 2));
    assert_eq!(up.negotiated_hold_time, Some(90));

    let idle = state(NEIGHBOR_IDLE);
    assert_eq!(idle.state, "IDLE");
    assert!(!idle.is_established());

    let all: serde_json::Value = serde_json::from_str(NEIGHBORS).unwrap();
    let all: Vec<_> = all
        .as_array()
        .unwrap()
        .iter()
        .map(GobgpNeighborState::from_json)
        .collect();
    assert_eq!(all.len(), 1);
    // Enum names are accepted too.
    let named = GobgpNeighborState::from_json(
        &serde_json::json!({"state": {"session_state": "BGP_FSM_ESTABLISHED"}}),
    );
    assert!(named.is_established());
    assert_eq!(
        GobgpNeighborState::from_json(&serde_json::json!({})).state,
        "UNKNOWN"
    );
}

#[test]
fn rib_paths() {
    let rib = parse_rib_json(RIB4).unwrap();
    assert_eq!(rib.len(), 2);
    let own = find(&rib, "203.0.113.0/24");
    assert_eq!(own.next_hop, Some("198.18.2.1".parse().unwrap()));
    assert_eq!(
        (own.origin, own.med, own.local_pref),
        (Some(2), Some(20), Some(300))
    );
    assert_eq!(own.communities, [(65002, 9)]);
    assert_eq!(own.large_communities, [(65002, 1, 1)]);
    assert_eq!(own.neighbor_ip, None);
    assert!(own.best && !own.stale);
    let learned = find(&rib, "198.18.8.0/24");
    assert_eq!(learned.neighbor_ip, Some("127.166.0.2".parse().unwrap()));
    assert!(learned.as_path.is_empty());

    let ebgp = parse_rib_json(RIB4_EBGP).unwrap();
    let r = find(&ebgp, "198.18.5.0/24");
    assert_eq!(r.as_path, [65001]);
    assert_eq!((r.med, r.origin), (Some(33), Some(0)));
    assert_eq!(r.communities, [(65000, 100)]);
    assert_eq!(r.large_communities, [(4_200_000_001, 1, 2)]);
}

#[test]
fn stale_ipv6_and_empty() {
    let stale = parse_rib_json(RIB4_STALE).unwrap();
    assert!(find(&stale, "198.18.8.0/24").stale);
    assert!(!find(&stale, "203.0.113.0/24").stale);

    let v6 = parse_rib_json(RIB6).unwrap();
    let r = find(&v6, "2001:db8:2::/48");
    assert_eq!(r.next_hop, Some("2001:db8:ffff::2".parse().unwrap()));
    assert_eq!(r.communities, [(65002, 6)]);

    assert!(parse_rib_json(EMPTY).unwrap().is_empty());
    assert!(parse_rib_json("").unwrap().is_empty());
    assert!(parse_rib_json("not json").is_err());
}

#[test]
fn config_renders_neighbors() {
    let c = GobgpConfig::new(std::net::Ipv4Addr::new(127, 100, 0, 9), 65010)
        .port(1179)
        .neighbor(
            GobgpNeighbor::new(std::net::Ipv4Addr::new(127, 100, 0, 10), 65011)
                .graceful_restart(30)
                .auth_password("s3"),
        )
        .neighbor(
            GobgpNeighbor::new(std::net::Ipv4Addr::new(127, 100, 0, 11), 65010)
                .families(true, false),
        );
    let t = c.render();
    assert!(t.contains("local-address-list = [\"127.100.0.9\"]"), "{t}");
    assert!(t.contains("port = 1179"));
    assert!(t.contains("auth-password = \"s3\""));
    assert_eq!(t.matches("passive-mode = true").count(), 2);
    // Multihop only for the eBGP neighbour.
    assert_eq!(t.matches("ebgp-multihop").count(), 1);
    assert_eq!(t.matches("mp-graceful-restart").count(), 2);
    assert_eq!(t.matches("ipv6-unicast").count(), 1);
    assert_eq!(c.peer_addr().port, 1179);
}
