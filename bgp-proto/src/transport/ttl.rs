//! GTSM (RFC 5082) and eBGP multihop TTL through `IP_TTL`/`IP_MINTTL` and
//! `IPV6_UNICAST_HOPS`/`IPV6_MINHOPCOUNT`.

use std::io;
use std::num::NonZeroU8;
use std::os::fd::{AsFd, BorrowedFd};

use super::error::TransportError;
use super::sys;
use super::{Family, socket_family};

/// TTL every GTSM speaker sends with.
pub const GTSM_SEND_TTL: u8 = 255;
/// Lowest TTL a GTSM speaker accepts: 255 minus one hop (RFC 5082 §3).
pub const GTSM_MIN_TTL: u8 = 254;
/// eBGP default: peers are directly connected (RFC 4271 practice), TTL 1.
pub const EBGP_DEFAULT_TTL: u8 = 1;
/// iBGP default: peers are usually loopback-to-loopback several hops apart. 64 is the Linux
/// default TTL (`net.ipv4.ip_default_ttl`), so iBGP behaves like any other TCP connection.
pub const IBGP_DEFAULT_TTL: u8 = 64;

/// How a BGP socket uses the IP TTL / IPv6 hop limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlSecurity {
    /// RFC 5082 GTSM for a directly connected peer: send with 255, drop anything below 254.
    Gtsm,
    /// Send with this TTL and accept any incoming TTL (eBGP multihop, iBGP).
    Ttl(NonZeroU8),
}

impl TtlSecurity {
    /// The eBGP default, TTL 1.
    pub const EBGP_DEFAULT: Self = Self::Ttl(NonZeroU8::MIN);
    /// The iBGP default, TTL 64 (see [`IBGP_DEFAULT_TTL`]).
    pub const IBGP_DEFAULT: Self = match NonZeroU8::new(IBGP_DEFAULT_TTL) {
        Some(ttl) => Self::Ttl(ttl),
        None => Self::EBGP_DEFAULT,
    };

    /// From peer configuration: `gtsm` on/off and an optional eBGP multihop TTL.
    /// GTSM with a multihop TTL above 1 is rejected; without either, the default for
    /// eBGP or iBGP applies.
    pub fn from_config(
        gtsm: bool,
        multihop_ttl: Option<u8>,
        ibgp: bool,
    ) -> Result<Self, TransportError> {
        match (gtsm, multihop_ttl) {
            (_, Some(0)) => Err(TransportError::ZeroTtl),
            (true, None | Some(1)) => Ok(Self::Gtsm),
            (true, Some(ttl)) => Err(TransportError::GtsmWithMultihop { ttl }),
            (false, Some(ttl)) => Ok(NonZeroU8::new(ttl).map_or(Self::EBGP_DEFAULT, Self::Ttl)),
            (false, None) if ibgp => Ok(Self::IBGP_DEFAULT),
            (false, None) => Ok(Self::EBGP_DEFAULT),
        }
    }

    /// TTL / hop limit put on outgoing packets.
    #[must_use]
    pub fn send_ttl(self) -> u8 {
        match self {
            Self::Gtsm => GTSM_SEND_TTL,
            Self::Ttl(ttl) => ttl.get(),
        }
    }

    /// Minimum TTL / hop limit accepted on incoming packets (0 = no check).
    #[must_use]
    pub fn min_ttl(self) -> u8 {
        match self {
            Self::Gtsm => GTSM_MIN_TTL,
            Self::Ttl(_) => 0,
        }
    }

    /// True for GTSM.
    #[must_use]
    pub fn is_gtsm(self) -> bool {
        self == Self::Gtsm
    }
}

/// Sets send and minimum TTL. IPv6 sockets get the IPv4 options as well, because a
/// dual-stack socket carries IPv4 peers as v4-mapped addresses under the IPv4 rules.
/// On error returns the name of the option that failed.
pub(super) fn apply(
    fd: BorrowedFd<'_>,
    family: Family,
    ttl: TtlSecurity,
) -> Result<(), (&'static str, io::Error)> {
    let send = libc::c_int::from(ttl.send_ttl());
    let min = libc::c_int::from(ttl.min_ttl());
    let set = |level, name, label: &'static str, value: libc::c_int| {
        sys::setsockopt(fd, level, name, &value).map_err(|e| (label, e))
    };
    set(libc::IPPROTO_IP, libc::IP_TTL, "IP_TTL", send)?;
    set(libc::IPPROTO_IP, libc::IP_MINTTL, "IP_MINTTL", min)?;
    if family == Family::V6 {
        set(
            libc::IPPROTO_IPV6,
            libc::IPV6_UNICAST_HOPS,
            "IPV6_UNICAST_HOPS",
            send,
        )?;
        set(
            libc::IPPROTO_IPV6,
            libc::IPV6_MINHOPCOUNT,
            "IPV6_MINHOPCOUNT",
            min,
        )?;
    }
    Ok(())
}

/// Effective send TTL (IPv4) or unicast hop limit (IPv6) of a socket, stream or listener.
pub fn ttl(sock: &impl AsFd) -> io::Result<u8> {
    let fd = sock.as_fd();
    let value = match socket_family(fd)? {
        Family::V4 => sys::getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TTL)?,
        Family::V6 => sys::getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS)?,
    };
    to_u8(value)
}

/// Effective minimum accepted TTL (`IP_MINTTL`) or hop limit (`IPV6_MINHOPCOUNT`); 0 = none.
pub fn min_ttl(sock: &impl AsFd) -> io::Result<u8> {
    let fd = sock.as_fd();
    let value = match socket_family(fd)? {
        Family::V4 => sys::getsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MINTTL)?,
        Family::V6 => sys::getsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MINHOPCOUNT)?,
    };
    to_u8(value)
}

fn to_u8(value: libc::c_int) -> io::Result<u8> {
    u8::try_from(value).map_err(|_| io::Error::other(format!("TTL {value} out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtsm_sends_255_and_requires_254_rfc5082() {
        assert_eq!(TtlSecurity::Gtsm.send_ttl(), 255);
        assert_eq!(TtlSecurity::Gtsm.min_ttl(), 254);
    }

    #[test]
    fn gtsm_and_multihop_are_mutually_exclusive_rfc5082() {
        assert!(matches!(
            TtlSecurity::from_config(true, Some(2), false),
            Err(TransportError::GtsmWithMultihop { ttl: 2 })
        ));
        // A "multihop" of 1 is just a direct peer.
        assert_eq!(
            TtlSecurity::from_config(true, Some(1), false).unwrap(),
            TtlSecurity::Gtsm
        );
        assert_eq!(
            TtlSecurity::from_config(true, None, true).unwrap(),
            TtlSecurity::Gtsm
        );
    }

    #[test]
    fn ttl_defaults_are_1_for_ebgp_and_64_for_ibgp() {
        let ebgp = TtlSecurity::from_config(false, None, false).unwrap();
        let ibgp = TtlSecurity::from_config(false, None, true).unwrap();
        assert_eq!((ebgp.send_ttl(), ebgp.min_ttl()), (1, 0));
        assert_eq!((ibgp.send_ttl(), ibgp.min_ttl()), (64, 0));
        let multihop = TtlSecurity::from_config(false, Some(3), false).unwrap();
        assert_eq!(multihop.send_ttl(), 3);
        assert!(matches!(
            TtlSecurity::from_config(false, Some(0), false),
            Err(TransportError::ZeroTtl)
        ));
    }
}
