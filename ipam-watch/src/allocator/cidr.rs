//! Address families, canonical pod CIDRs, node identities and time.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Address family, always decided by parsing an address (never by list position).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// Both families, IPv4 first.
    pub const ALL: [Family; 2] = [Family::V4, Family::V6];

    /// Address width in bits.
    pub fn bits(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    /// Index into per-family arrays.
    pub fn index(self) -> usize {
        match self {
            Family::V4 => 0,
            Family::V6 => 1,
        }
    }

    /// Human name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

/// Why a CIDR string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// Not `address/length`.
    #[error("not a CIDR: {0}")]
    Syntax(String),
    /// Host bits set, e.g. `10.0.0.1/24` (never silently truncated).
    #[error("host bits set (did you mean {0}?)")]
    HostBitsSet(String),
    /// IPv4-mapped IPv6 (`::ffff:a.b.c.d`) hides an IPv4 prefix in the IPv6 space.
    #[error("IPv4-mapped IPv6 prefix is not allowed")]
    Ipv4Mapped,
    /// Prefix length larger than the family width.
    #[error("prefix length {len} exceeds {bits}")]
    Length {
        /// Requested length.
        len: u8,
        /// Family width.
        bits: u8,
    },
}

/// A canonical prefix: family, network address (host bits zero) and length.
/// IPv4 addresses live in the low 32 bits of `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodCidr {
    family: Family,
    addr: u128,
    len: u8,
}

/// Mask of the host bits of a `/len` in a `bits`-wide family.
pub(crate) fn host_mask(len: u8, bits: u8) -> u128 {
    let host = u32::from(bits.saturating_sub(len));
    if host >= 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    }
}

impl PodCidr {
    /// Builds a prefix; refuses host bits and over-long lengths.
    pub fn new(family: Family, addr: u128, len: u8) -> Result<Self, CidrError> {
        let bits = family.bits();
        if len > bits {
            return Err(CidrError::Length { len, bits });
        }
        if family == Family::V4 && addr > u128::from(u32::MAX) {
            return Err(CidrError::Syntax(format!(
                "{addr:#x} is not an IPv4 address"
            )));
        }
        let hm = host_mask(len, bits);
        if addr & hm != 0 {
            let fixed = PodCidr {
                family,
                addr: addr & !hm,
                len,
            };
            return Err(CidrError::HostBitsSet(fixed.to_string()));
        }
        if family == Family::V6 && addr >> 32 == 0xffff && len >= 96 {
            return Err(CidrError::Ipv4Mapped);
        }
        Ok(PodCidr { family, addr, len })
    }

    /// Trusted constructor for keys that came out of a valid `PodCidr`.
    pub(crate) fn from_raw(family: Family, addr: u128, len: u8) -> Self {
        PodCidr { family, addr, len }
    }

    /// Parses `a.b.c.d/n` or `x::/n`; the family comes from the address syntax.
    pub fn parse(s: &str) -> Result<Self, CidrError> {
        let (ip, len) = s
            .trim()
            .split_once('/')
            .ok_or_else(|| CidrError::Syntax(s.to_string()))?;
        let len: u8 = len.parse().map_err(|_| CidrError::Syntax(s.to_string()))?;
        match IpAddr::from_str(ip).map_err(|_| CidrError::Syntax(s.to_string()))? {
            IpAddr::V4(a) => PodCidr::new(Family::V4, u128::from(u32::from(a)), len),
            IpAddr::V6(a) => PodCidr::new(Family::V6, u128::from(a), len),
        }
    }

    /// Address family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// Network address as an integer.
    pub fn addr(&self) -> u128 {
        self.addr
    }

    /// Prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// Last address covered (inclusive).
    pub fn last(&self) -> u128 {
        self.addr | host_mask(self.len, self.family.bits())
    }

    /// True if `other` lies entirely inside `self`.
    pub fn contains(&self, other: &PodCidr) -> bool {
        self.family == other.family
            && self.len <= other.len
            && self.addr <= other.addr
            && other.last() <= self.last()
    }

    /// True if the two prefixes share any address.
    pub fn overlaps(&self, other: &PodCidr) -> bool {
        self.family == other.family && self.addr <= other.last() && other.addr <= self.last()
    }

    /// The network address as a std address.
    pub fn ip(&self) -> IpAddr {
        match self.family {
            Family::V4 => IpAddr::V4(Ipv4Addr::from(self.addr as u32)),
            Family::V6 => IpAddr::V6(Ipv6Addr::from(self.addr)),
        }
    }
}

impl fmt::Display for PodCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.ip(), self.len)
    }
}

impl FromStr for PodCidr {
    type Err = CidrError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PodCidr::parse(s)
    }
}

/// Kubernetes Node UID; identity of an allocation owner (names get reused).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeUid(pub String);

impl From<&str> for NodeUid {
    fn from(s: &str) -> Self {
        NodeUid(s.to_string())
    }
}

impl fmt::Display for NodeUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Time as an input: seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// `self + secs`, saturating.
    pub fn plus(self, secs: u64) -> Timestamp {
        Timestamp(self.0.saturating_add(secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_round_trips_and_detects_family() {
        for s in [
            "10.0.0.0/8",
            "10.1.2.0/24",
            "fd00::/64",
            "2001:db8::/32",
            "0.0.0.0/0",
        ] {
            assert_eq!(PodCidr::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(PodCidr::parse("10.0.0.0/8").unwrap().family(), Family::V4);
        assert_eq!(PodCidr::parse("fd00::/8").unwrap().family(), Family::V6);
    }

    #[test]
    fn refuses_bad_input_without_guessing() {
        assert!(
            matches!(PodCidr::parse("10.0.0.1/24"), Err(CidrError::HostBitsSet(s)) if s == "10.0.0.0/24")
        );
        assert!(matches!(
            PodCidr::parse("10.0.0.0/33"),
            Err(CidrError::Length { .. })
        ));
        assert!(matches!(
            PodCidr::parse("::ffff:10.0.0.0/120"),
            Err(CidrError::Ipv4Mapped)
        ));
        for bad in ["", "10.0.0.0", "10.0.0.0/x", "nonsense/24", "10.0.0.0/-1"] {
            assert!(
                matches!(PodCidr::parse(bad), Err(CidrError::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn containment_and_overlap() {
        let big = PodCidr::parse("10.0.0.0/16").unwrap();
        let small = PodCidr::parse("10.0.3.0/24").unwrap();
        let other = PodCidr::parse("10.1.0.0/24").unwrap();
        let v6 = PodCidr::parse("::/0").unwrap();
        assert!(big.contains(&small) && !small.contains(&big));
        assert!(big.overlaps(&small) && small.overlaps(&big));
        assert!(!big.overlaps(&other));
        assert!(!v6.overlaps(&big), "families never overlap");
        assert_eq!(v6.last(), u128::MAX);
    }
}
