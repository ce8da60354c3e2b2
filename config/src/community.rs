//! BGP communities as written in the config: `"A:B"`, well-known names, and `"A:B:C"`.

use std::fmt;
use std::str::FromStr;

/// A standard community (RFC 1997), held as the 32-bit wire value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Community(pub u32);

impl Community {
    /// GRACEFUL_SHUTDOWN, 65535:0 (RFC 8326).
    pub const GRACEFUL_SHUTDOWN: Community = Community(0xFFFF_0000);
    /// LLGR_STALE, 65535:6 (RFC 9494 §4.3): added only by a router keeping a stale route.
    pub const LLGR_STALE: Community = Community(0xFFFF_0006);
    /// NO_LLGR, 65535:7 (RFC 9494 §4.4): do not keep this route as long-lived stale.
    pub const NO_LLGR: Community = Community(0xFFFF_0007);
    pub const NO_EXPORT: Community = Community(0xFFFF_FF01);
    pub const NO_ADVERTISE: Community = Community(0xFFFF_FF02);
    pub const NO_EXPORT_SUBCONFED: Community = Community(0xFFFF_FF03);

    const NAMED: [(&'static str, Community); 4] = [
        ("no-export", Community::NO_EXPORT),
        ("no-advertise", Community::NO_ADVERTISE),
        ("no-export-subconfed", Community::NO_EXPORT_SUBCONFED),
        ("no-llgr", Community::NO_LLGR),
    ];

    pub fn new(asn: u16, value: u16) -> Self {
        Community((u32::from(asn) << 16) | u32::from(value))
    }

    pub fn value(self) -> u32 {
        self.0
    }
}

impl FromStr for Community {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some((_, c)) = Community::NAMED.iter().find(|(name, _)| *name == s) {
            return Ok(*c);
        }
        let rule = || {
            "is not a community (A:B with A and B in 0..65535, or no-export, \
             no-advertise, no-export-subconfed, no-llgr)"
                .to_owned()
        };
        let (a, b) = s.split_once(':').ok_or_else(rule)?;
        let a = parse_decimal::<u16>(a).ok_or_else(rule)?;
        let b = parse_decimal::<u16>(b).ok_or_else(rule)?;
        Ok(Community::new(a, b))
    }
}

impl fmt::Display for Community {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match Community::NAMED.iter().find(|(_, c)| c == self) {
            Some((name, _)) => f.write_str(name),
            None => write!(f, "{}:{}", self.0 >> 16, self.0 & 0xFFFF),
        }
    }
}

/// A large community (RFC 8092): global administrator and two local data parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LargeCommunity {
    pub global_admin: u32,
    pub local_data1: u32,
    pub local_data2: u32,
}

impl LargeCommunity {
    /// The wire triple, as `bgp_proto::AttrValue::LargeCommunities` holds it.
    pub fn to_array(self) -> [u32; 3] {
        [self.global_admin, self.local_data1, self.local_data2]
    }
}

impl FromStr for LargeCommunity {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let rule = || "is not a large community (A:B:C, each in 0..4294967295)".to_owned();
        let mut parts = s.split(':').map(parse_decimal::<u32>);
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(Some(a)), Some(Some(b)), Some(Some(c)), None) => Ok(LargeCommunity {
                global_admin: a,
                local_data1: b,
                local_data2: c,
            }),
            _ => Err(rule()),
        }
    }
}

impl fmt::Display for LargeCommunity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}",
            self.global_admin, self.local_data1, self.local_data2
        )
    }
}

/// Plain decimal digits only (no sign, no spaces), so `+1` and ` 1` are rejected.
fn parse_decimal<T: FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_communities_have_rfc1997_values() {
        assert_eq!("no-export".parse(), Ok(Community(0xFFFF_FF01)));
        assert_eq!("no-advertise".parse(), Ok(Community(0xFFFF_FF02)));
        assert_eq!("no-export-subconfed".parse(), Ok(Community(0xFFFF_FF03)));
        assert_eq!(Community::NO_EXPORT.to_string(), "no-export");
    }

    #[test]
    fn no_llgr_is_the_well_known_65535_7_rfc9494_4_4() {
        assert_eq!("no-llgr".parse(), Ok(Community::NO_LLGR));
        assert_eq!("65535:7".parse(), Ok(Community::NO_LLGR));
        assert_eq!(Community::NO_LLGR.to_string(), "no-llgr");
        assert_eq!(Community::LLGR_STALE, Community::new(65535, 6));
    }

    #[test]
    fn standard_community_halves_are_16_bit() {
        assert_eq!("65000:100".parse(), Ok(Community(65000 << 16 | 100)));
        assert!("65536:1".parse::<Community>().is_err());
        assert!("1:-1".parse::<Community>().is_err());
        assert!("1".parse::<Community>().is_err());
        assert_eq!(Community::new(65000, 100).to_string(), "65000:100");
    }

    #[test]
    fn large_community_parts_are_32_bit() {
        let lc: LargeCommunity = "4200000001:1:2".parse().unwrap();
        assert_eq!(lc.to_array(), [4_200_000_001, 1, 2]);
        assert_eq!(lc.to_string(), "4200000001:1:2");
        assert!("4294967296:1:1".parse::<LargeCommunity>().is_err());
        assert!("1:1".parse::<LargeCommunity>().is_err());
        assert!("1:1:1:1".parse::<LargeCommunity>().is_err());
    }
}
