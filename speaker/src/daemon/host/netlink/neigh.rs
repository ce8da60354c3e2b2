//! The kernel's IPv6 neighbor table, to find an `interface` peer configured without
//! `peerAddress`: a pure parser of rtnetlink RTM_NEWNEIGH messages and a thin reader (one
//! RTM_GETNEIGH dump over a NETLINK_ROUTE socket). Never shells out to `ip`.

use std::io;
use std::net::Ipv6Addr;

use super::{self as netlink, u16_at, u32_at};

const NDMSG_LEN: usize = 12;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const NDA_DST: u16 = 1;
const AF_INET6: u8 = 10;
/// NUD_INCOMPLETE and NUD_FAILED: no answer from that address (yet).
const NUD_UNUSABLE: u16 = 0x01 | 0x20;
const NTF_ROUTER: u8 = 0x80;

/// One IPv6 neighbor entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbor {
    pub ifindex: u32,
    pub address: Ipv6Addr,
    /// NUD_* bits.
    pub state: u16,
    /// NTF_ROUTER: the neighbor said it is a router (RA, or NA with the R flag).
    pub router: bool,
}

/// What one buffer of a dump held (the tests' and the fuzzer's view of [`netlink::walk`] with
/// this parser).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DumpChunk {
    pub neighbors: Vec<Neighbor>,
    /// NLMSG_DONE seen: the dump is complete.
    pub done: bool,
}

/// Parses one `recv` buffer of an RTM_GETNEIGH dump (host byte order, as the kernel
/// writes it). Errors name what was malformed; an NLMSG_ERROR is returned as the errno.
pub fn parse_dump(buf: &[u8]) -> Result<DumpChunk, io::Error> {
    let (neighbors, done) = netlink::walk_parsed(buf, RTM_NEWNEIGH, parse_neighbor)?;
    Ok(DumpChunk { neighbors, done })
}

/// An ndmsg and its attributes; `None` for other families or entries without NDA_DST.
fn parse_neighbor(body: &[u8]) -> Option<Neighbor> {
    if *body.first()? != AF_INET6 {
        return None;
    }
    let ifindex = u32_at(body, 4)?;
    let state = u16_at(body, 8)?;
    let flags = *body.get(10)?;
    let (_, dst) = netlink::attributes(body.get(NDMSG_LEN..)?)
        .into_iter()
        .find(|(kind, _)| *kind == NDA_DST)?;
    let octets: [u8; 16] = dst.try_into().ok()?;
    Some(Neighbor {
        ifindex,
        address: Ipv6Addr::from(octets),
        state,
        router: flags & NTF_ROUTER != 0,
    })
}

/// The neighbor to peer with on `ifindex`: a link-local address that answered, routers
/// first, then the lowest address (stable across dumps).
pub fn pick_peer(neighbors: &[Neighbor], ifindex: u32) -> Option<Ipv6Addr> {
    neighbors
        .iter()
        .filter(|n| {
            n.ifindex == ifindex && n.address.is_unicast_link_local() && n.state & NUD_UNUSABLE == 0
        })
        .min_by_key(|n| (!n.router, n.address))
        .map(|n| n.address)
}

/// The RTM_GETNEIGH dump request for IPv6.
fn dump_request(seq: u32) -> Vec<u8> {
    netlink::dump_request(RTM_GETNEIGH, AF_INET6, NDMSG_LEN, seq)
}

/// Dumps the IPv6 neighbor table.
pub fn dump() -> io::Result<Vec<Neighbor>> {
    netlink::dump_parsed(&dump_request(1), RTM_NEWNEIGH, parse_neighbor)
}

#[cfg(test)]
mod tests {
    use super::super::{NLMSG_DONE, NLMSG_ERROR, NLMSG_HDRLEN as NLMSG_HDR_LEN};
    use super::*;

    /// An RTM_NEWNEIGH message as the kernel writes it.
    fn newneigh(ifindex: u32, addr: &str, state: u16, flags: u8) -> Vec<u8> {
        let mut body = vec![AF_INET6, 0, 0, 0];
        body.extend_from_slice(&ifindex.to_ne_bytes());
        body.extend_from_slice(&state.to_ne_bytes());
        body.push(flags);
        body.push(1);
        // NDA_LLADDR (6 octets, padded) before NDA_DST: attributes come in any order.
        body.extend_from_slice(&10u16.to_ne_bytes());
        body.extend_from_slice(&2u16.to_ne_bytes());
        body.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0, 0]);
        body.extend_from_slice(&20u16.to_ne_bytes());
        body.extend_from_slice(&NDA_DST.to_ne_bytes());
        body.extend_from_slice(&addr.parse::<Ipv6Addr>().unwrap().octets());
        message(RTM_NEWNEIGH, &body)
    }

    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDR_LEN + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(body);
        m
    }

    const REACHABLE: u16 = 0x02;
    const STALE: u16 = 0x04;
    const FAILED: u16 = 0x20;

    #[test]
    fn dump_chunk_yields_ipv6_neighbors_until_done() {
        let mut buf = newneigh(3, "fe80::1", REACHABLE, 0);
        buf.extend(newneigh(3, "2001:db8::1", STALE, 0));
        buf.extend(message(NLMSG_DONE, &[0; 4]));
        let chunk = parse_dump(&buf).unwrap();
        assert!(chunk.done);
        assert_eq!(chunk.neighbors.len(), 2);
        assert_eq!(
            chunk.neighbors[0].address,
            "fe80::1".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(chunk.neighbors[0].ifindex, 3);
    }

    #[test]
    fn peer_is_a_link_local_neighbor_that_answered_on_that_interface_routers_first() {
        let n = |ifindex, a: &str, state, router| Neighbor {
            ifindex,
            address: a.parse().unwrap(),
            state,
            router,
        };
        let table = [
            n(3, "fe80::9", FAILED, true),
            n(4, "fe80::1", REACHABLE, true),
            n(3, "2001:db8::1", REACHABLE, true),
            n(3, "fe80::5", STALE, false),
            n(3, "fe80::7", STALE, true),
        ];
        assert_eq!(pick_peer(&table, 3), Some("fe80::7".parse().unwrap()));
        assert_eq!(pick_peer(&table[..4], 3), Some("fe80::5".parse().unwrap()));
        assert_eq!(pick_peer(&table[..3], 3), None);
    }

    #[test]
    fn malformed_dumps_are_errors_not_panics() {
        let mut long = newneigh(3, "fe80::1", REACHABLE, 0);
        long[0] = 200; // length past the buffer
        assert!(parse_dump(&long).is_err());
        let mut short = newneigh(3, "fe80::1", REACHABLE, 0);
        short[0] = 4; // shorter than a header
        assert!(parse_dump(&short).is_err());
        let mut err = message(NLMSG_ERROR, &(-libc::EPERM).to_ne_bytes());
        err.extend_from_slice(&[0; 16]);
        assert_eq!(
            parse_dump(&err).unwrap_err().raw_os_error(),
            Some(libc::EPERM)
        );
        // Every truncation of a valid message parses or errors, never panics.
        let full = newneigh(3, "fe80::1", REACHABLE, 0);
        for cut in 0..full.len() {
            let _ = parse_dump(&full[..cut]);
        }
    }

    #[test]
    fn dump_of_this_namespace_succeeds() {
        // The reader against the real kernel: loopback has no link-local neighbors.
        let neighbors = dump().unwrap();
        let lo = bgp_io::transport::interface_index("lo").unwrap();
        assert_eq!(pick_peer(&neighbors, lo), None);
    }
}
