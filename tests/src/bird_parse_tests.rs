//! Parser tests on outputs captured from BIRD 2.0.12 (see testdata/README.md).

use super::*;

const PROTOCOLS: &str = include_str!("testdata/bird_protocols.txt");
const ESTABLISHED: &str = include_str!("testdata/bird_protocols_all_established.txt");
const GR: &str = include_str!("testdata/bird_protocols_all_gr.txt");
const LLGR: &str = include_str!("testdata/bird_protocols_all_llgr.txt");
const DISABLED: &str = include_str!("testdata/bird_protocols_all_disabled.txt");
const PEER_SHUTDOWN: &str = include_str!("testdata/bird_protocols_all_peer_shutdown.txt");
const ROUTES: &str = include_str!("testdata/bird_routes_all.txt");
const ROUTES_GR: &str = include_str!("testdata/bird_routes_all_gr.txt");
const ROUTES_LLGR: &str = include_str!("testdata/bird_routes_all_llgr.txt");
const SOCKET_REPLY: &str = include_str!("testdata/bird_socket_reply.txt");

fn one(text: &str) -> ProtocolInfo {
    let mut v = parse_protocols(text);
    assert_eq!(v.len(), 1, "{v:?}");
    v.remove(0)
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn protocol_summary_table() {
    let ps = parse_protocols(PROTOCOLS);
    let names: Vec<_> = ps.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["device1", "static4", "to_a", "to_c", "gobgp"]);
    assert_eq!(
        (
            ps[0].proto.as_str(),
            ps[0].state.as_str(),
            ps[0].info.as_str()
        ),
        ("Device", "up", "")
    );
    assert_eq!(ps[1].table, "master4");
    assert_eq!(ps[0].since, "2026-11-21 06:58:40.938");
    assert!(ps[2].is_established());
    assert_eq!(ps[2].info_raw, "Established");
}

#[test]
fn established_bgp_protocol() {
    let p = one(ESTABLISHED);
    assert_eq!(
        (p.name.as_str(), p.proto.as_str(), p.state.as_str()),
        ("to_a", "BGP", "up")
    );
    assert_eq!(p.since, "2026-11-21 06:58:41.693");
    assert!(p.is_established());
    assert_eq!(p.neighbor_address, Some(ip("127.166.0.1")));
    assert_eq!((p.neighbor_as, p.local_as), (Some(65001), Some(65002)));
    assert_eq!(p.neighbor_id, Some("127.166.0.1".parse().unwrap()));
    assert_eq!(p.source_address, Some(ip("127.166.0.2")));
    assert_eq!(p.session.as_deref(), Some("external multihop AS4"));
    assert_eq!((p.hold_time, p.keepalive_time), (Some(9), Some(3)));
    assert!(!p.gr_active);
    assert_eq!(p.last_error, None);
    assert!(
        p.local_caps.contains(&"Restart time: 30".to_owned()),
        "{:?}",
        p.local_caps
    );
    assert!(p.neighbor_caps.contains(&"Restart time: 1".to_owned()));
    assert!(p.neighbor_caps.contains(&"LL stale time: 20".to_owned()));
    assert!(p.neighbor_has_cap("Route refresh") && p.neighbor_has_cap("Enhanced refresh"));
    assert_eq!(p.channels.len(), 2);
    let v4 = p.channel("ipv4").unwrap();
    assert_eq!((v4.state.as_str(), v4.table.as_str()), ("UP", "master4"));
    assert_eq!(
        (v4.routes_imported, v4.routes_exported, v4.routes_preferred),
        (Some(2), Some(1), Some(2))
    );
    assert_eq!(
        v4.import_updates,
        [Some(2), Some(0), Some(0), Some(0), Some(2)]
    );
    assert_eq!(v4.export_withdraws, [Some(0), None, None, None, Some(0)]);
    assert_eq!(v4.output_filter, "(unnamed)");
    assert_eq!(v4.neighbor_gr, None);
    assert_eq!(
        p.channel("ipv6").unwrap().bgp_next_hop.as_deref(),
        Some("2001:db8:ffff::1")
    );
    assert_eq!((p.routes_imported, p.routes_exported), (Some(3), Some(1)));
}

#[test]
fn graceful_restart_in_progress() {
    let p = one(GR);
    assert_eq!((p.state.as_str(), p.info.as_str()), ("start", "Passive"));
    assert_eq!(p.info_raw, "Passive       Socket: Connection closed");
    assert_eq!(p.last_error.as_deref(), Some("Socket: Connection closed"));
    assert!(p.gr_active);
    assert!(
        p.channels
            .iter()
            .all(|c| c.neighbor_gr.as_deref() == Some("Regular"))
    );
    assert_eq!(p.routes_imported, Some(3));

    let l = one(LLGR);
    assert!(l.gr_active);
    assert!(
        l.channels
            .iter()
            .all(|c| c.neighbor_gr.as_deref() == Some("Long-lived"))
    );
}

#[test]
fn disabled_and_peer_shutdown() {
    let d = one(DISABLED);
    assert_eq!(
        (d.state.as_str(), d.info.as_str(), d.info_raw.as_str()),
        ("down", "Down", "")
    );
    assert_eq!(d.message.as_deref(), Some("bird-c: planned maintenance"));
    assert_eq!(d.routes_imported, None);

    let s = one(PEER_SHUTDOWN);
    assert_eq!(s.info, "Passive");
    assert_eq!(
        s.last_error.as_deref(),
        Some("Received: Administrative shutdown")
    );
    assert_eq!(s.message.as_deref(), Some("bird-c: planned maintenance"));
}

#[test]
fn routes_with_attributes() {
    let rs = parse_routes(ROUTES);
    assert_eq!(rs.len(), 7, "{rs:#?}");
    // Two routes for 10.1.0.0/16: the second header line starts with spaces.
    let ten: Vec<_> = rs
        .iter()
        .filter(|r| r.prefix == net("10.1.0.0/16"))
        .collect();
    assert_eq!(ten.len(), 2);
    assert_eq!(
        (ten[0].from_protocol.as_str(), ten[0].primary),
        ("to_a", true)
    );
    assert_eq!(
        (ten[1].from_protocol.as_str(), ten[1].primary),
        ("to_c", false)
    );
    assert_eq!(ten[1].from_addr, Some(ip("127.166.0.3")));
    assert_eq!(ten[1].communities, [(65003, 1)]);
    assert_eq!(ten[1].next_hop, Some(ip("198.18.0.3")));

    let r = rs
        .iter()
        .find(|r| r.prefix == net("198.18.5.0/24"))
        .unwrap();
    assert_eq!(r.table, "master4");
    assert_eq!((r.dest.as_str(), r.gateway), ("unreachable", None));
    assert_eq!(r.next_hop, Some(ip("198.18.0.1")));
    assert_eq!(r.since, "2026-11-21 06:58:41.782");
    assert_eq!(
        (r.preference, r.stale, r.llgr_stale),
        (Some(100), false, false)
    );
    assert_eq!(r.route_type.as_deref(), Some("BGP univ"));
    assert_eq!(
        (r.origin.as_deref(), r.as_path.as_slice()),
        (Some("IGP"), &[65001][..])
    );
    assert_eq!((r.med, r.local_pref), (Some(33), Some(100)));
    assert_eq!(r.communities, [(65001, 100), (65535, 65281)]);
    assert_eq!(r.large_communities, [(4_200_000_001, 1, 2)]);
    assert_eq!(r.ext_communities, ["(rt, 65000, 7)"]);

    let st = rs
        .iter()
        .find(|r| r.prefix == net("198.18.8.0/24"))
        .unwrap();
    assert_eq!(
        (st.dest.as_str(), st.from_protocol.as_str(), st.preference),
        ("blackhole", "static4", Some(200))
    );
    assert_eq!((st.from_addr, st.next_hop), (None, None));

    // iBGP from GoBGP: empty AS path, Incomplete origin.
    let g = rs
        .iter()
        .find(|r| r.prefix == net("203.0.113.0/24"))
        .unwrap();
    assert!(g.as_path.is_empty());
    assert_eq!(g.attrs.get("BGP.as_path").map(String::as_str), Some(""));
    assert_eq!(
        (g.origin.as_deref(), g.local_pref),
        (Some("Incomplete"), Some(300))
    );

    let v6: Vec<_> = rs.iter().filter(|r| r.table == "master6").collect();
    assert_eq!(v6.len(), 2);
    assert_eq!(v6[1].next_hop, Some(ip("2001:db8:ffff::1")));
}

#[test]
fn stale_routes() {
    // Plain GR: nothing in the route lines differs (Bird::routes adds `stale`).
    let gr = parse_routes(ROUTES_GR);
    assert_eq!(gr.len(), 3);
    assert!(gr.iter().all(|r| !r.stale && !r.llgr_stale));
    // LLGR: "(100s)" and the LLGR_STALE community (65535,6).
    let ll = parse_routes(ROUTES_LLGR);
    assert_eq!(ll.len(), 3);
    for r in &ll {
        assert!(r.stale && r.llgr_stale && r.primary, "{r:?}");
        assert_eq!(r.preference, Some(100));
        assert!(r.communities.contains(&(65535, 6)));
    }
}

#[test]
fn socket_reply_matches_birdc_text() {
    let text = socket_reply_to_text(SOCKET_REPLY).unwrap();
    assert!(text.starts_with("Table master4:\n10.1.0.0/16 "), "{text}");
    assert!(text.contains("\n\tBGP.community: (65003,1)\n"));
    let rs = parse_routes(&text);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].communities, [(65003, 1)]);
    let err = socket_reply_to_text("9001 syntax error, unexpected CF_SYM_UNDEFINED\n");
    assert_eq!(
        err.unwrap_err(),
        "syntax error, unexpected CF_SYM_UNDEFINED"
    );
    assert_eq!(
        socket_reply_to_text("0009-st4: disabled\n0000 \n").unwrap(),
        "st4: disabled\n"
    );
}

#[test]
fn continuation_lines_and_odd_input() {
    let text = "Table master4:\n10.0.0.0/8           unreachable [p1 12:00:00.000 from 10.1.1.1] * (100) [AS1i]\n\tBGP.community: (1,1) (1,2)\n\t\t(1,3)\n\tBGP.as_path: 1 {2 3}\ngarbage line\n192.0.2.0/24         via 10.1.1.1 on eth0 [p2 12:00:01.000] * (200)\n";
    let rs = parse_routes(text);
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[0].communities, [(1, 1), (1, 2), (1, 3)]);
    assert_eq!(rs[0].as_path, [1, 2, 3]);
    assert_eq!(rs[0].since, "12:00:00.000");
    assert_eq!(rs[1].gateway, Some(ip("10.1.1.1")));
    assert_eq!(rs[1].next_hop, Some(ip("10.1.1.1")));
    assert!(parse_routes("").is_empty());
    assert!(parse_protocols("").is_empty());
    // Short (non-ISO) time format.
    let p = one("device1    Device     ---        up     06:51:57.606  \n");
    assert_eq!((p.since.as_str(), p.info.as_str()), ("06:51:57.606", ""));
}

/// BIRD prints one instant a millisecond apart between two calls (a CI run's
/// 12:17:58.313 / .314): the same; a reset is seconds later: not.
#[test]
fn since_readings_a_millisecond_apart_are_the_same_instant() {
    use crate::bird_parse::same_since;
    assert!(same_since("12:17:58.313", "12:17:58.314"));
    assert!(same_since(
        "2026-11-29 12:17:58.313",
        "2026-11-29 12:17:58.300"
    ));
    assert!(!same_since("12:17:58.313", "12:17:59.313"));
    assert!(!same_since("12:17:58.313", "12:18:58.313"));
    assert!(same_since("never", "never"));
    assert!(!same_since("never", "12:17:58.313"));
}
