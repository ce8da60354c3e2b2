//! Loopback addresses and ports that parallel tests (threads and processes) do not share.
//!
//! IPv4: every call returns a new `127.S.Y.Z` with `S = 100 + pid % 100`, so two test
//! processes only meet when their PIDs agree mod 100; an address whose BGP port is already
//! bound is skipped as well. Each daemon owns its address, so all can use port 179.
//! IPv6 has only `::1`, so v6 tests share it and use distinct free ports.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

pub const BGP_PORT: u16 = 179;
pub const V6_LOOPBACK: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// A fresh `127.x.y.z` no other test in this process got, and whose port 179 is free.
pub fn alloc_v4() -> Ipv4Addr {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let second = 100 + (std::process::id() % 100) as u8;
    for _ in 0..1000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // .0 and .255 avoided in the last octet; 254 * 256 addresses per process.
        let third = ((n / 254) % 256) as u8;
        let fourth = (n % 254 + 1) as u8;
        let addr = Ipv4Addr::new(127, second, third, fourth);
        if port_free(IpAddr::V4(addr), BGP_PORT) {
            return addr;
        }
    }
    panic!("no free loopback address after 1000 tries");
}

/// Whether `addr:port` can be bound now (a permission error counts as free: nobody has it).
fn port_free(addr: IpAddr, port: u16) -> bool {
    match TcpListener::bind(SocketAddr::new(addr, port)) {
        Ok(_) => true,
        Err(e) => e.kind() != ErrorKind::AddrInUse,
    }
}

/// A currently free TCP port on `addr`, never the same twice in this process.
pub fn free_port(addr: IpAddr) -> u16 {
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    for _ in 0..100 {
        let port = TcpListener::bind(SocketAddr::new(addr, 0))
            .and_then(|l| l.local_addr())
            .unwrap_or_else(|e| panic!("binding {addr}:0: {e}"))
            .port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if given.get_or_insert_with(HashSet::new).insert(port) {
            return port;
        }
    }
    panic!("no fresh free port on {addr} after 100 tries");
}

/// The port a daemon on `addr` should listen on for BGP: 179 on an IPv4 address of its own
/// (when root), otherwise a free port.
pub fn bgp_port_for(addr: IpAddr) -> u16 {
    if addr.is_ipv4() && is_root() {
        BGP_PORT
    } else {
        free_port(addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_addresses_are_distinct_and_in_range() {
        let mut seen = HashSet::new();
        for _ in 0..600 {
            let a = alloc_v4();
            let o = a.octets();
            assert_eq!(o[0], 127);
            assert!((100..200).contains(&o[1]), "{a}");
            assert!(o[3] != 0 && o[3] != 255, "{a}");
            assert!(seen.insert(a), "duplicate {a}");
        }
    }

    #[test]
    fn ports_are_distinct() {
        let a = free_port(V6_LOOPBACK);
        let b = free_port(V6_LOOPBACK);
        assert_ne!(a, b);
        assert_ne!(a, 0);
    }
}
