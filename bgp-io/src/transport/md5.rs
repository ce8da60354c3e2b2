//! TCP MD5 signatures (RFC 2385) through Linux `TCP_MD5SIG`.
//!
//! Keys are per peer address: a connecting socket gets the key of the address it connects
//! to, a listener one key per configured peer, and the kernel copies the matching key to
//! each accepted socket. A segment with a wrong or missing signature is dropped silently.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::os::fd::BorrowedFd;

use super::Family;
use super::error::TransportError;
use super::sys::{self, KernelSockaddrStorage, TcpMd5Sig};

/// Longest key Linux accepts (`TCP_MD5SIG_MAXKEYLEN`).
pub const MD5_MAX_KEY_LEN: usize = libc::TCP_MD5SIG_MAXKEYLEN;

/// A TCP MD5 key (RFC 2385): 1..=80 bytes. `Debug` never prints the key.
#[derive(Clone, PartialEq, Eq)]
pub struct Md5Key(Vec<u8>);

impl Md5Key {
    /// Validates the length (1..=80 bytes).
    pub fn new(key: impl Into<Vec<u8>>) -> Result<Self, TransportError> {
        let key = key.into();
        if key.is_empty() || key.len() > MD5_MAX_KEY_LEN {
            return Err(TransportError::InvalidMd5Key { len: key.len() });
        }
        Ok(Self(key))
    }

    /// The raw key bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Md5Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Md5Key(<{} bytes redacted>)", self.0.len())
    }
}

/// Installs (`Some`) or removes (`None`) the key for `peer` on a socket of `family`.
/// On an IPv6 socket an IPv4 peer is keyed by its v4-mapped address, as the kernel expects
/// for dual-stack listeners.
pub(super) fn set_md5_key(
    fd: BorrowedFd<'_>,
    family: Family,
    peer: IpAddr,
    key: Option<&Md5Key>,
) -> io::Result<()> {
    let addr = match (family, peer) {
        (Family::V4, IpAddr::V4(v4)) => sockaddr_in(v4.octets()),
        (Family::V6, IpAddr::V6(v6)) => sockaddr_in6(v6),
        (Family::V6, IpAddr::V4(v4)) => sockaddr_in6(v4.to_ipv6_mapped()),
        (Family::V4, IpAddr::V6(_)) => return Err(io::Error::from(io::ErrorKind::InvalidInput)),
    };
    let mut sig = TcpMd5Sig {
        addr,
        flags: 0,
        prefixlen: 0,
        keylen: 0,
        ifindex: 0,
        key: [0; MD5_MAX_KEY_LEN],
    };
    if let Some(key) = key {
        // `Md5Key` guarantees 1..=80 bytes, so this cannot truncate.
        sig.keylen =
            u16::try_from(key.0.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        for (dst, src) in sig.key.iter_mut().zip(&key.0) {
            *dst = *src;
        }
    }
    sys::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_MD5SIG, &sig)
}

/// `struct sockaddr_in` with port 0 inside a sockaddr_storage.
fn sockaddr_in(octets: [u8; 4]) -> KernelSockaddrStorage {
    let mut data = [0u8; 126];
    // data: sin_port (2 bytes, left 0), sin_addr (4 bytes), zero padding.
    for (dst, src) in data.iter_mut().skip(2).zip(octets) {
        *dst = src;
    }
    KernelSockaddrStorage {
        family: af(libc::AF_INET),
        data,
    }
}

/// `struct sockaddr_in6` with port, flow info and scope id 0 inside a sockaddr_storage.
fn sockaddr_in6(addr: Ipv6Addr) -> KernelSockaddrStorage {
    let mut data = [0u8; 126];
    // data: sin6_port (2), sin6_flowinfo (4), sin6_addr (16), sin6_scope_id (4).
    for (dst, src) in data.iter_mut().skip(6).zip(addr.octets()) {
        *dst = src;
    }
    KernelSockaddrStorage {
        family: af(libc::AF_INET6),
        data,
    }
}

fn af(family: libc::c_int) -> libc::sa_family_t {
    // AF_INET (2) and AF_INET6 (10) fit in sa_family_t (u16).
    libc::sa_family_t::try_from(family).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_key_length_is_1_to_80_bytes_rfc2385() {
        assert!(Md5Key::new(Vec::new()).is_err());
        assert!(Md5Key::new(vec![b'k'; 1]).is_ok());
        assert!(Md5Key::new(vec![b'k'; 80]).is_ok());
        assert!(matches!(
            Md5Key::new(vec![b'k'; 81]),
            Err(TransportError::InvalidMd5Key { len: 81 })
        ));
    }

    #[test]
    fn md5_key_debug_does_not_leak_the_key() {
        let key = Md5Key::new("s3cret").unwrap();
        let shown = format!("{key:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("6 bytes"), "{shown}");
    }

    #[test]
    fn sockaddr_layout_matches_linux_in_h() {
        let v4 = sockaddr_in([192, 0, 2, 1]);
        assert_eq!(i32::from(v4.family), libc::AF_INET);
        assert_eq!(v4.data[..6], [0, 0, 192, 0, 2, 1]);
        assert!(v4.data[6..].iter().all(|b| *b == 0));

        let v6 = sockaddr_in6("2001:db8::1".parse().unwrap());
        assert_eq!(i32::from(v6.family), libc::AF_INET6);
        assert_eq!(v6.data[..6], [0; 6]);
        assert_eq!(v6.data[6..8], [0x20, 0x01]);
        assert_eq!(v6.data[21], 1);
        assert!(v6.data[22..].iter().all(|b| *b == 0));
    }
}
