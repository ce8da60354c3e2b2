//! Any bytes as one `recv` buffer of an rtnetlink dump reply (issue 31 item 9): the route dump
//! the forwarding gate and the default-gateway discovery read, and the neighbour dump
//! unnumbered discovery reads. The first byte picks the parser. Oracle: no panic (every read
//! is checked), the same buffer gives the same answer twice, and what is returned is
//! well-formed: prefix lengths within the destination's family, and no prefix length
//! without a destination.
#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use podcidr_bgp::daemon::host::netlink::{neigh, route};

fuzz_target!(|data: &[u8]| {
    let Some((&which, buf)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            let first = route::parse_main_reply(buf);
            assert_eq!(first, route::parse_main_reply(buf));
            for r in first.into_iter().flatten() {
                let max = match r.dst {
                    Some(IpAddr::V4(_)) => 32,
                    Some(IpAddr::V6(_)) => 128,
                    None => 0,
                };
                assert!(r.dst_len <= max, "{r:?}");
            }
        }
        1 => {
            let first = route::parse_reply(buf);
            assert_eq!(first, route::parse_reply(buf));
        }
        _ => {
            let first = neigh::parse_dump(buf).map_err(|e| e.to_string());
            assert_eq!(first, neigh::parse_dump(buf).map_err(|e| e.to_string()));
        }
    }
});
