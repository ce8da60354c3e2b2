//! The kernel's IPv6 neighbor table, to find an `interface` peer configured without
//! `peerAddress`: a pure parser of rtnetlink RTM_NEWNEIGH messages and a thin reader (one
//! RTM_GETNEIGH dump over a NETLINK_ROUTE socket). Never shells out to `ip`.

use std::io;
use std::net::Ipv6Addr;

const NLMSG_HDR_LEN: usize = 16;
const NDMSG_LEN: usize = 12;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
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

/// What one buffer of a dump held.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DumpChunk {
    pub neighbors: Vec<Neighbor>,
    /// NLMSG_DONE seen: the dump is complete.
    pub done: bool,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Parses one `recv` buffer of an RTM_GETNEIGH dump (host byte order, as the kernel
/// writes it). Errors name what was malformed; an NLMSG_ERROR is returned as the errno.
pub fn parse_dump(buf: &[u8]) -> Result<DumpChunk, io::Error> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("netlink: {what}"));
    let mut chunk = DumpChunk::default();
    let mut at = 0;
    while at + NLMSG_HDR_LEN <= buf.len() {
        let len = u32_at(buf, at).ok_or_else(|| bad("truncated header"))? as usize;
        let kind = u16_at(buf, at + 4).ok_or_else(|| bad("truncated header"))?;
        if len < NLMSG_HDR_LEN || at + len > buf.len() {
            return Err(bad("message length out of bounds"));
        }
        let body = buf.get(at + NLMSG_HDR_LEN..at + len).unwrap_or_default();
        match kind {
            NLMSG_DONE => {
                chunk.done = true;
                return Ok(chunk);
            }
            NLMSG_ERROR => {
                let errno = u32_at(body, 0).ok_or_else(|| bad("truncated error"))? as i32;
                if errno != 0 {
                    return Err(io::Error::from_raw_os_error(-errno));
                }
            }
            RTM_NEWNEIGH => {
                if let Some(n) = parse_neighbor(body) {
                    chunk.neighbors.push(n);
                }
            }
            _ => {}
        }
        at += align4(len);
    }
    Ok(chunk)
}

/// An ndmsg and its attributes; `None` for other families or entries without NDA_DST.
fn parse_neighbor(body: &[u8]) -> Option<Neighbor> {
    if *body.first()? != AF_INET6 {
        return None;
    }
    let ifindex = u32_at(body, 4)?;
    let state = u16_at(body, 8)?;
    let flags = *body.get(10)?;
    let mut at = NDMSG_LEN;
    while at + 4 <= body.len() {
        let len = usize::from(u16_at(body, at)?);
        let kind = u16_at(body, at + 2)?;
        if len < 4 {
            return None;
        }
        let data = body.get(at + 4..at + len)?;
        if kind == NDA_DST {
            let octets: [u8; 16] = data.try_into().ok()?;
            return Some(Neighbor {
                ifindex,
                address: Ipv6Addr::from(octets),
                state,
                router: flags & NTF_ROUTER != 0,
            });
        }
        at += align4(len);
    }
    None
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
    let len = (NLMSG_HDR_LEN + NDMSG_LEN) as u32;
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    let mut req = Vec::with_capacity(len as usize);
    req.extend_from_slice(&len.to_ne_bytes());
    req.extend_from_slice(&RTM_GETNEIGH.to_ne_bytes());
    req.extend_from_slice(&flags.to_ne_bytes());
    req.extend_from_slice(&seq.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.push(AF_INET6);
    req.extend_from_slice(&[0; NDMSG_LEN - 1]);
    req
}

/// Dumps the IPv6 neighbor table (bounded: at most 64 reads of 32 KiB).
pub fn dump() -> io::Result<Vec<Neighbor>> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: plain socket(2); the result is checked and owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let req = dump_request(1);
    // SAFETY: `req` is valid for `req.len()` bytes; no destination address (the kernel).
    let sent = unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 32 * 1024];
    let mut out = Vec::new();
    for _ in 0..64 {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let chunk = parse_dump(buf.get(..n as usize).unwrap_or_default())?;
        out.extend(chunk.neighbors);
        if chunk.done || n == 0 {
            return Ok(out);
        }
    }
    Err(io::Error::other("netlink neighbor dump did not end"))
}

/// The link-local neighbor to connect to on `ifindex`, from the kernel's table.
pub fn discover(ifindex: u32) -> io::Result<Option<Ipv6Addr>> {
    Ok(pick_peer(&dump()?, ifindex))
}

#[cfg(test)]
mod tests {
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
        let lo = bgp_proto::transport::interface_index("lo").unwrap();
        assert_eq!(pick_peer(&neighbors, lo), None);
    }
}
