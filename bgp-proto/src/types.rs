//! Newtypes for protocol invariants.

use std::fmt;
use std::net::Ipv4Addr;

/// AS_TRANS (RFC 6793 §2): the 2-octet stand-in for a 4-octet AS number.
pub const AS_TRANS: u16 = 23456;

/// An autonomous system number (4-octet capable, RFC 6793).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Asn(pub u32);

impl Asn {
    /// The value for the 2-octet "My Autonomous System" field: itself, or AS_TRANS when it
    /// does not fit (RFC 6793 §4.1).
    pub fn as_two_octet(self) -> u16 {
        u16::try_from(self.0).unwrap_or(AS_TRANS)
    }

    pub fn is_four_octet_only(self) -> bool {
        self.0 > u32::from(u16::MAX)
    }
}

impl fmt::Display for Asn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Hold time in seconds: 0 (no keepalives) or at least 3 (RFC 4271 §4.2, §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HoldTime(u16);

impl HoldTime {
    pub const DISABLED: HoldTime = HoldTime(0);

    /// `None` for 1 and 2, which RFC 4271 §6.2 says MUST be rejected.
    pub fn new(seconds: u16) -> Option<Self> {
        match seconds {
            1 | 2 => None,
            s => Some(HoldTime(s)),
        }
    }

    pub fn seconds(self) -> u16 {
        self.0
    }

    pub fn is_disabled(self) -> bool {
        self.0 == 0
    }

    /// RFC 4271 §4.4: negotiated hold time is the smaller of the two.
    pub fn negotiate(self, other: HoldTime) -> HoldTime {
        self.min(other)
    }
}

/// BGP Identifier: a non-zero 4-octet value, written as an IPv4 address (RFC 6286).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouterId(Ipv4Addr);

impl RouterId {
    /// `None` for 0.0.0.0 (RFC 6286 §2.1: the identifier MUST be non-zero).
    pub fn new(addr: Ipv4Addr) -> Option<Self> {
        (!addr.is_unspecified()).then_some(RouterId(addr))
    }

    /// An identifier that is non-zero by construction.
    pub const fn from_nonzero(v: std::num::NonZeroU32) -> Self {
        RouterId(Ipv4Addr::from_bits(v.get()))
    }

    pub fn addr(self) -> Ipv4Addr {
        self.0
    }
}

impl fmt::Display for RouterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Address Family Identifier (IANA Address Family Numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Afi(pub u16);

impl Afi {
    pub const IPV4: Afi = Afi(1);
    pub const IPV6: Afi = Afi(2);
}

/// Subsequent Address Family Identifier (IANA SAFI registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Safi(pub u8);

impl Safi {
    pub const UNICAST: Safi = Safi(1);
}

/// An (AFI, SAFI) pair. Unknown pairs are representable so they round-trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Family {
    pub afi: Afi,
    pub safi: Safi,
}

impl Family {
    pub const IPV4_UNICAST: Family = Family {
        afi: Afi::IPV4,
        safi: Safi::UNICAST,
    };
    pub const IPV6_UNICAST: Family = Family {
        afi: Afi::IPV6,
        safi: Safi::UNICAST,
    };

    pub fn new(afi: u16, safi: u8) -> Self {
        Family {
            afi: Afi(afi),
            safi: Safi(safi),
        }
    }

    /// `ipv4-unicast`, `ipv6-unicast`, or `afi-N-safi-M`.
    pub fn name(self) -> String {
        match self {
            Family::IPV4_UNICAST => "ipv4-unicast".to_owned(),
            Family::IPV6_UNICAST => "ipv6-unicast".to_owned(),
            Family { afi, safi } => format!("afi-{}-safi-{}", afi.0, safi.0),
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_time_one_and_two_are_rejected_rfc4271_6_2() {
        assert_eq!(HoldTime::new(1), None);
        assert_eq!(HoldTime::new(2), None);
        assert_eq!(HoldTime::new(0), Some(HoldTime::DISABLED));
        assert_eq!(HoldTime::new(3).map(HoldTime::seconds), Some(3));
    }

    #[test]
    fn hold_time_negotiates_to_the_minimum_rfc4271_4_4() {
        let a = HoldTime::new(90).unwrap();
        let b = HoldTime::new(30).unwrap();
        assert_eq!(a.negotiate(b), b);
        assert_eq!(a.negotiate(HoldTime::DISABLED), HoldTime::DISABLED);
    }

    #[test]
    fn four_octet_asn_uses_as_trans_in_two_octet_field_rfc6793_4_1() {
        assert_eq!(Asn(4_200_000_001).as_two_octet(), AS_TRANS);
        assert_eq!(Asn(65000).as_two_octet(), 65000);
    }

    #[test]
    fn router_id_zero_is_rejected_rfc6286() {
        assert_eq!(RouterId::new(Ipv4Addr::UNSPECIFIED), None);
    }
}
