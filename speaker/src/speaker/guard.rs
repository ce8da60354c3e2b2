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
    /// The allocator marked it `Conflict` (another node holds it).
    Conflict,
    /// The value on the object is not a usable CIDR (unparseable, host bits, duplicate).
    Invalid,
}

impl GuardRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardRefusal::OutsideAllowedPrefixes => "outside-allowed-prefixes",
            GuardRefusal::DefaultRoute => "default-route",
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

/// Applies the guard. `None` while the source is not ready: nothing new is announced and
/// nothing is withdrawn until the initial list has been processed.
/// `allowed` empty means "no restriction" (only valid with the `file` source; the config
/// rejects it otherwise).
pub fn guard(desired: &DesiredSet, allowed: &[IpNet]) -> Option<Guarded> {
    if !desired.ready {
        return None;
    }
    let mut out = Guarded {
        announce: Vec::with_capacity(desired.cidrs.len()),
        refused: Vec::new(),
    };
    for cidr in &desired.cidrs {
        let reason = if cidr.prefix_len() == 0 {
            Some(GuardRefusal::DefaultRoute)
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
