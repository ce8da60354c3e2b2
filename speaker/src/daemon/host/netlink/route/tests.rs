use super::super::{NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, NLMSG_HDRLEN};
use super::*;

fn attr(kind: u16, data: &[u8]) -> Vec<u8> {
    let len = 4 + data.len();
    let mut a = Vec::new();
    a.extend_from_slice(&(len as u16).to_ne_bytes());
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(data);
    a.resize(align4(len), 0);
    a
}

fn u32_attr(kind: u16, v: u32) -> Vec<u8> {
    attr(kind, &v.to_ne_bytes())
}

fn ip_bytes(s: &str) -> Vec<u8> {
    match s.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// struct rtnexthop + its RTA_GATEWAY.
fn nexthop(ifindex: u32, via: &str) -> Vec<u8> {
    let gw = attr(RTA_GATEWAY, &ip_bytes(via));
    let len = 8 + gw.len();
    let mut n = Vec::new();
    n.extend_from_slice(&(len as u16).to_ne_bytes());
    n.extend_from_slice(&[0, 0]);
    n.extend_from_slice(&ifindex.to_ne_bytes());
    n.extend_from_slice(&gw);
    n
}

fn message(kind: u16, body: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + body.len();
    let mut m = Vec::new();
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&0x2u16.to_ne_bytes()); // NLM_F_MULTI
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    m.resize(align4(len), 0);
    m
}

/// An RTM_NEWROUTE: rtmsg {family, dst_len, src_len, tos, table, protocol, scope, type,
/// flags} and attributes.
fn route(family: u8, dst_len: u8, table: u8, rtype: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![family, dst_len, 0, 0, table, 3, 0, rtype, 0, 0, 0, 0];
    for a in attrs {
        body.extend_from_slice(a);
    }
    message(RTM_NEWROUTE, &body)
}

fn hop(via: &str, ifindex: u32, metric: u32) -> NextHop {
    NextHop {
        via: via.parse().unwrap(),
        ifindex,
        metric,
    }
}

const MAIN: u8 = 254;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

#[test]
fn dump_request_is_a_getroute_dump_of_one_family_rtnetlink() {
    let r = dump_request(AF_INET6, 7);
    assert_eq!(r.len(), 28);
    assert_eq!(u32_at(&r, 0), Some(28));
    assert_eq!(u16_at(&r, 4), Some(RTM_GETROUTE));
    assert_eq!(u16_at(&r, 6), Some(NLM_F_REQUEST | NLM_F_DUMP));
    assert_eq!(u32_at(&r, 8), Some(7));
    assert_eq!(r.get(16), Some(&AF_INET6));
}

#[test]
fn default_routes_of_the_main_table_and_every_multipath_next_hop_rtnetlink() {
    let gw = |via: &str| attr(RTA_GATEWAY, &ip_bytes(via));
    let mp = |hops: &[Vec<u8>]| attr(RTA_MULTIPATH, &hops.concat());
    // (rule, reply, expected next hops)
    let rows: Vec<(&str, Vec<u8>, Vec<NextHop>)> = vec![
        (
            "a single next hop with its metric",
            route(
                AF_INET,
                0,
                MAIN,
                RTN_UNICAST,
                &[
                    u32_attr(RTA_TABLE, 254),
                    u32_attr(RTA_PRIORITY, 100),
                    gw("198.18.1.1"),
                    u32_attr(RTA_OIF, 2),
                ],
            ),
            vec![hop("198.18.1.1", 2, 100)],
        ),
        (
            "IPv4 multipath: every next hop (what /proc/net/route hides)",
            route(
                AF_INET,
                0,
                MAIN,
                RTN_UNICAST,
                &[mp(&[nexthop(2, "198.18.1.1"), nexthop(3, "198.18.2.1")])],
            ),
            vec![hop("198.18.1.1", 2, 0), hop("198.18.2.1", 3, 0)],
        ),
        (
            "IPv6",
            route(
                AF_INET6,
                0,
                MAIN,
                RTN_UNICAST,
                &[
                    u32_attr(RTA_PRIORITY, 1024),
                    gw("fd00:18:1::1"),
                    u32_attr(RTA_OIF, 2),
                ],
            ),
            vec![hop("fd00:18:1::1", 2, 1024)],
        ),
        (
            "not a default route",
            route(
                AF_INET,
                24,
                MAIN,
                RTN_UNICAST,
                &[gw("198.18.1.1"), u32_attr(RTA_OIF, 2)],
            ),
            vec![],
        ),
        (
            "another table (local, or a policy table by RTA_TABLE)",
            [
                route(
                    AF_INET,
                    0,
                    255,
                    RTN_UNICAST,
                    &[gw("198.18.1.1"), u32_attr(RTA_OIF, 2)],
                ),
                route(
                    AF_INET,
                    0,
                    MAIN,
                    RTN_UNICAST,
                    &[
                        u32_attr(RTA_TABLE, 1000),
                        gw("198.18.1.1"),
                        u32_attr(RTA_OIF, 2),
                    ],
                ),
            ]
            .concat(),
            vec![],
        ),
        (
            "an unreachable default (type 7) has no way out",
            route(AF_INET, 0, MAIN, 7, &[u32_attr(RTA_OIF, 1)]),
            vec![],
        ),
        (
            "a device route without a gateway",
            route(AF_INET, 0, MAIN, RTN_UNICAST, &[u32_attr(RTA_OIF, 2)]),
            vec![],
        ),
    ];
    for (rule, reply, want) in rows {
        assert_eq!(parse_reply(&reply), Ok((want, false)), "{rule}");
    }
}

#[test]
fn done_ends_the_dump_and_an_error_reply_is_an_error_rtnetlink() {
    let one = route(
        AF_INET,
        0,
        MAIN,
        RTN_UNICAST,
        &[
            attr(RTA_GATEWAY, &ip_bytes("198.18.1.1")),
            u32_attr(RTA_OIF, 2),
        ],
    );
    let reply = [one.clone(), message(NLMSG_DONE, &0u32.to_ne_bytes())].concat();
    assert_eq!(
        parse_reply(&reply),
        Ok((vec![hop("198.18.1.1", 2, 0)], true))
    );
    let err = message(NLMSG_ERROR, &(-22i32).to_ne_bytes());
    assert_eq!(parse_reply(&err), Err("netlink error -22".to_owned()));
}

#[test]
fn truncated_or_garbled_replies_are_errors_never_panics() {
    let full = [
        route(
            AF_INET,
            0,
            MAIN,
            RTN_UNICAST,
            &[attr(
                RTA_MULTIPATH,
                &[nexthop(2, "198.18.1.1"), nexthop(3, "198.18.2.1")].concat(),
            )],
        ),
        message(NLMSG_DONE, &0u32.to_ne_bytes()),
    ]
    .concat();
    for cut in 0..full.len() {
        let _ = parse_reply(&full[..cut]);
        let mut garbled = full.clone();
        garbled[cut] ^= 0xff;
        let _ = parse_reply(&garbled);
    }
    assert!(parse_reply(&full[..10]).is_err());
    // A length field shorter than the header cannot loop forever.
    let mut short = message(RTM_NEWROUTE, &[]);
    short[..4].copy_from_slice(&4u32.to_ne_bytes());
    assert!(parse_reply(&short).is_err());
}

#[test]
fn main_table_routes_of_every_type_with_destination_device_and_next_hops_rtnetlink() {
    let gw = |via: &str| attr(RTA_GATEWAY, &ip_bytes(via));
    let dst = |d: &str| attr(RTA_DST, &ip_bytes(d));
    let reply = [
        // The CNI bridge's subnet route.
        route(
            AF_INET,
            24,
            MAIN,
            RTN_UNICAST,
            &[dst("198.19.1.0"), u32_attr(RTA_OIF, 5)],
        ),
        // Calico's block blackhole: no device.
        route(AF_INET, 26, MAIN, RTN_BLACKHOLE, &[dst("198.19.2.0")]),
        // The local table is not the node's forwarding: left out.
        route(
            AF_INET,
            32,
            255,
            2,
            &[dst("198.19.1.1"), u32_attr(RTA_OIF, 5)],
        ),
        route(
            AF_INET6,
            0,
            MAIN,
            RTN_UNICAST,
            &[gw("fd00:18:1::1"), u32_attr(RTA_OIF, 2)],
        ),
        message(NLMSG_DONE, &0u32.to_ne_bytes()),
    ]
    .concat();
    let routes = parse_main_reply(&reply).unwrap();
    assert_eq!(routes.len(), 3, "{routes:?}");
    assert_eq!(routes[0].dst, Some("198.19.1.0".parse().unwrap()));
    assert_eq!((routes[0].dst_len, routes[0].ifindex), (24, 5));
    assert!(routes[0].unicast() && !routes[0].drops());
    assert!(routes[1].drops() && routes[1].ifindex == 0);
    assert_eq!(routes[2].dst, None, "a default route has no RTA_DST");
    assert_eq!(routes[2].via, Some("fd00:18:1::1".parse().unwrap()));
}

/// Found by the `netlink_dump` fuzz target: an IPv4 route of prefix length 116 without a
/// destination was read as a route. The kernel writes a destination of the message's own
/// family whenever the prefix length is not 0, and never a length beyond the family's.
#[test]
fn a_route_whose_prefix_does_not_fit_its_family_is_not_read_rtnetlink() {
    let dst = |d: &str| attr(RTA_DST, &ip_bytes(d));
    let oif = u32_attr(RTA_OIF, 2);
    let reply = [
        route(AF_INET, 116, MAIN, RTN_UNICAST, std::slice::from_ref(&oif)),
        route(
            AF_INET,
            33,
            MAIN,
            RTN_UNICAST,
            &[dst("198.19.1.0"), oif.clone()],
        ),
        route(
            AF_INET,
            24,
            MAIN,
            RTN_UNICAST,
            &[dst("fd00:1::"), oif.clone()],
        ),
        route(
            AF_INET6,
            129,
            MAIN,
            RTN_UNICAST,
            &[dst("fd00:1::"), oif.clone()],
        ),
        route(7, 0, MAIN, RTN_UNICAST, std::slice::from_ref(&oif)),
        // What stays: a /24 and an IPv6 default route.
        route(
            AF_INET,
            24,
            MAIN,
            RTN_UNICAST,
            &[dst("198.19.1.0"), oif.clone()],
        ),
        route(AF_INET6, 0, MAIN, RTN_UNICAST, std::slice::from_ref(&oif)),
        message(NLMSG_DONE, &0u32.to_ne_bytes()),
    ]
    .concat();
    let routes = parse_main_reply(&reply).unwrap();
    let kept: Vec<(Option<IpAddr>, u8)> = routes.iter().map(|r| (r.dst, r.dst_len)).collect();
    assert_eq!(kept, [(Some("198.19.1.0".parse().unwrap()), 24), (None, 0)]);
}
