//! The announce guard: what may leave this node. Pure; every refusal has a reason that
//! becomes a metric label, a log line and a status condition.

use ipam_watch::source::{DesiredSet, InvalidReason};
use ipnet::IpNet;
use serde::Serialize;

/// Why a CIDR from the source is not announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuardRefusal {
    /// Outside every `allowedPrefixes` entry.
    OutsideAllowedPrefixes,
    /// `0.0.0.0/0` or `::/0`.
    DefaultRoute,
    /// Shorter than `minPrefixLength` of its family: `0.0.0.0/1` + `128.0.0.0/1` is a
    /// default route in two halves.
    TooShort,
    /// The allocator marked it `Conflict` (another node holds it).
    Conflict,
    /// The value on the object is not a usable CIDR (unparseable, host bits, duplicate).
    Invalid,
}

impl GuardRefusal {
    pub const ALL: [GuardRefusal; 5] = [
        GuardRefusal::OutsideAllowedPrefixes,
        GuardRefusal::DefaultRoute,
        GuardRefusal::TooShort,
        GuardRefusal::Conflict,
        GuardRefusal::Invalid,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            GuardRefusal::OutsideAllowedPrefixes => "outside-allowed-prefixes",
            GuardRefusal::DefaultRoute => "default-route",
            GuardRefusal::TooShort => "shorter-than-minimum",
            GuardRefusal::Conflict => "conflict",
            GuardRefusal::Invalid => "invalid",
        }
    }
}

/// One refused value, as found on the source object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Refused {
    pub value: String,
    pub reason: GuardRefusal,
}

/// The guard's verdict on one desired set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Guarded {
    /// Sorted and free of duplicates (a sorted `Vec`: half the memory of a set at 100,000).
    pub announce: Vec<IpNet>,
    pub refused: Vec<Refused>,
}

/// What the guard lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardPolicy<'a> {
    /// Empty means "no restriction" (only valid with the `file` source; the config rejects
    /// it otherwise).
    pub allowed: &'a [IpNet],
    /// Shortest prefix length announced, per family (`minPrefixLength`).
    pub min_len_v4: u8,
    pub min_len_v6: u8,
}

impl<'a> GuardPolicy<'a> {
    pub fn from_config(c: &'a podcidr_config::Config) -> Self {
        GuardPolicy {
            allowed: &c.allowed_prefixes,
            min_len_v4: c.min_prefix_length.ipv4,
            min_len_v6: c.min_prefix_length.ipv6,
        }
    }
}

/// Applies the guard. `None` while the source is not ready: nothing new is announced and
/// nothing is withdrawn until the initial list has been processed.
pub fn guard(desired: &DesiredSet, policy: &GuardPolicy<'_>) -> Option<Guarded> {
    let allowed = policy.allowed;
    if !desired.ready {
        return None;
    }
    let mut out = Guarded {
        announce: Vec::with_capacity(desired.cidrs.len()),
        refused: Vec::new(),
    };
    for cidr in &desired.cidrs {
        let min = match cidr {
            IpNet::V4(_) => policy.min_len_v4,
            IpNet::V6(_) => policy.min_len_v6,
        };
        let reason = if cidr.prefix_len() == 0 {
            Some(GuardRefusal::DefaultRoute)
        } else if cidr.prefix_len() < min {
            Some(GuardRefusal::TooShort)
        } else if !allowed.is_empty() && !allowed.iter().any(|a| a.contains(cidr)) {
            Some(GuardRefusal::OutsideAllowedPrefixes)
        } else {
            None
        };
        match reason {
            Some(reason) => out.refused.push(Refused {
                value: cidr.to_string(),
                reason,
            }),
            None => out.announce.push(*cidr),
        }
    }
    out.announce.sort_unstable();
    out.announce.dedup();
    for bad in &desired.invalid {
        let reason = match bad.reason {
            InvalidReason::Conflict => GuardRefusal::Conflict,
            InvalidReason::DefaultRoute => GuardRefusal::DefaultRoute,
            InvalidReason::Unparseable | InvalidReason::HostBitsSet | InvalidReason::Duplicate => {
                GuardRefusal::Invalid
            }
        };
        out.refused.push(Refused {
            value: bad.value.clone(),
            reason,
        });
    }
    out.refused.sort();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipam_watch::source::InvalidCidr;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    /// The guard with the documented default minimum lengths.
    fn guard(d: &DesiredSet, allowed: &[IpNet]) -> Option<Guarded> {
        super::guard(
            d,
            &GuardPolicy {
                allowed,
                min_len_v4: 1,
                min_len_v6: 1,
            },
        )
    }

    fn ready(cidrs: &[&str]) -> DesiredSet {
        DesiredSet {
            ready: true,
            cidrs: cidrs.iter().map(|c| net(c)).collect(),
            ..DesiredSet::default()
        }
    }

    #[test]
    fn source_not_ready_changes_nothing() {
        let d = DesiredSet::default();
        assert_eq!(guard(&d, &[net("10.0.0.0/8")]), None);
    }

    #[test]
    fn prefix_outside_allowed_prefixes_is_refused() {
        let g = guard(
            &ready(&["10.1.0.0/24", "192.168.5.0/24"]),
            &[net("10.0.0.0/8")],
        )
        .unwrap();
        assert_eq!(g.announce, [net("10.1.0.0/24")]);
        assert_eq!(g.refused[0].reason, GuardRefusal::OutsideAllowedPrefixes);
        assert_eq!(g.refused[0].value, "192.168.5.0/24");
    }

    #[test]
    fn allowed_prefix_must_contain_the_whole_cidr() {
        let g = guard(&ready(&["10.0.0.0/7"]), &[net("10.0.0.0/8")]).unwrap();
        assert!(g.announce.is_empty());
    }

    #[test]
    fn default_route_is_refused_even_when_allowed() {
        let g = guard(
            &ready(&["0.0.0.0/0", "::/0"]),
            &[net("0.0.0.0/0"), net("::/0")],
        )
        .unwrap();
        assert!(g.announce.is_empty());
        assert!(
            g.refused
                .iter()
                .all(|r| r.reason == GuardRefusal::DefaultRoute)
        );
    }

    #[test]
    fn allocator_conflicts_and_invalid_values_are_refused_with_their_reason() {
        let mut d = ready(&["10.1.0.0/24"]);
        d.invalid = vec![
            InvalidCidr {
                value: "10.2.0.0/24".into(),
                reason: InvalidReason::Conflict,
            },
            InvalidCidr {
                value: "10.3.0.1/24".into(),
                reason: InvalidReason::HostBitsSet,
            },
        ];
        let g = guard(&d, &[net("10.0.0.0/8")]).unwrap();
        assert_eq!(g.announce.len(), 1);
        let reasons: Vec<_> = g.refused.iter().map(|r| r.reason).collect();
        assert_eq!(reasons, vec![GuardRefusal::Conflict, GuardRefusal::Invalid]);
    }

    #[test]
    fn halves_of_the_default_route_are_refused_with_an_empty_allow_list() {
        let defaults = podcidr_config::MinPrefixLength::default();
        let cidrs = [
            "0.0.0.0/1",
            "128.0.0.0/1",
            "::/1",
            "8000::/1",
            "198.19.1.0/24",
        ];
        let policy = GuardPolicy {
            allowed: &[],
            min_len_v4: defaults.ipv4,
            min_len_v6: defaults.ipv6,
        };
        let g = super::guard(&ready(&cidrs), &policy).unwrap();
        assert_eq!(g.announce, [net("198.19.1.0/24")]);
        assert_eq!(g.refused.len(), 4);
        assert!(g.refused.iter().all(|r| r.reason == GuardRefusal::TooShort));
    }

    #[test]
    fn minimum_prefix_length_is_per_family_and_inclusive() {
        let g = super::guard(
            &ready(&["10.0.0.0/16", "10.1.0.0/15", "fd00::/48", "fd00::/47"]),
            &GuardPolicy {
                allowed: &[],
                min_len_v4: 16,
                min_len_v6: 48,
            },
        )
        .unwrap();
        assert_eq!(g.announce, [net("10.0.0.0/16"), net("fd00::/48")]);
    }

    #[test]
    fn empty_allowed_list_means_no_restriction_for_file_mode() {
        let g = guard(&ready(&["198.19.1.0/24", "fd00:19:1::/64"]), &[]).unwrap();
        assert_eq!(g.announce.len(), 2);
    }

    #[test]
    fn announce_is_sorted_and_unique_whatever_the_source_order() {
        let g = guard(
            &ready(&[
                "198.19.2.0/24",
                "fd00:19:1::/64",
                "198.19.1.0/24",
                "198.19.2.0/24",
            ]),
            &[],
        )
        .unwrap();
        assert_eq!(
            g.announce,
            [
                net("198.19.1.0/24"),
                net("198.19.2.0/24"),
                net("fd00:19:1::/64")
            ]
        );
    }
}
