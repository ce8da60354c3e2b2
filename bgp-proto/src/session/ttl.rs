//! How a BGP session uses the IP TTL / IPv6 hop limit: GTSM (RFC 5082) or a plain TTL for
//! eBGP multihop and iBGP. The policy only; `bgp-io`'s transport puts it on the socket.

use std::num::NonZeroU8;

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
    ) -> Result<Self, TtlConfigError> {
        match (gtsm, multihop_ttl) {
            (_, Some(0)) => Err(TtlConfigError::ZeroTtl),
            (true, None | Some(1)) => Ok(Self::Gtsm),
            (true, Some(ttl)) => Err(TtlConfigError::GtsmWithMultihop { ttl }),
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

/// A TTL policy that cannot be configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TtlConfigError {
    /// RFC 5082 GTSM as configured here assumes a directly connected peer.
    #[error("GTSM and eBGP multihop (TTL {ttl}) are mutually exclusive")]
    GtsmWithMultihop { ttl: u8 },
    /// A TTL / hop limit of 0 would never leave the host.
    #[error("TTL must be 1..=255, got 0")]
    ZeroTtl,
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
            Err(TtlConfigError::GtsmWithMultihop { ttl: 2 })
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
            Err(TtlConfigError::ZeroTtl)
        ));
    }
}
