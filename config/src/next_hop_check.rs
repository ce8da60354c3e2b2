//! Families a peer carries whose `nextHop: self` the session cannot supply (the other family's
//! transport; for IPv4 over IPv6, no `extendedNextHop`): the speaker then falls
//! back to the Node's InternalIP of the family and, without one, announces that family to no
//! one on the session (issue 32 item 10). Valid config, so `--check-config` warns, it does
//! not refuse: whether a node has such an InternalIP is not in the config.

use std::fmt;

use bgp_proto::Family;

use crate::{Config, NextHopConfig, PeerConfig};

/// One peer and family whose next hop comes only from the Node, or from nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHopGap {
    pub peer: String,
    /// `ipv4-unicast` or `ipv6-unicast`.
    pub family: &'static str,
    /// The source has no Node (`source.kind: file`): no fallback, never announced.
    pub never: bool,
}

impl fmt::Display for NextHopGap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (key, v) = if self.family == "ipv6-unicast" {
            ("nextHop.ipv6", "IPv6")
        } else {
            ("nextHop.ipv4", "IPv4")
        };
        write!(
            f,
            "peer {}: {key} is self and the session has no {v} address of its own",
            self.peer
        )?;
        if self.never {
            write!(
                f,
                "; with a file source there is no Node to take an {v} InternalIP from, so no \
                 {} route is announced to it",
                self.family
            )?;
        } else {
            write!(
                f,
                "; {} routes go to it only from nodes with an {v} InternalIP (others announce \
                 none and count podcidr_peer_no_next_hop)",
                self.family
            )?;
        }
        write!(
            f,
            ". Set {key} to node or an address, or add a session over {v}"
        )?;
        if self.family == "ipv4-unicast" {
            write!(f, " (or extendedNextHop: true, RFC 8950)")?;
        }
        Ok(())
    }
}

impl Config {
    /// Every peer and family whose `self` next hop the session cannot supply, for a family
    /// the config expects pod CIDRs of (`allowedPrefixes` has one; an empty list allows any).
    pub fn next_hop_gaps(&self) -> Vec<NextHopGap> {
        let expects = |v6: bool| {
            self.allowed_prefixes.is_empty()
                || self
                    .allowed_prefixes
                    .iter()
                    .any(|p| p.addr().is_ipv6() == v6)
        };
        let mut out = Vec::new();
        for p in &self.peers {
            for (family, v6) in [(Family::IPV4_UNICAST, false), (Family::IPV6_UNICAST, true)] {
                let is_self = if v6 {
                    self.next_hop.ipv6 == NextHopConfig::SelfAddress
                } else {
                    self.next_hop.ipv4 == NextHopConfig::SelfAddress
                };
                if p.families.contains(&family) && expects(v6) && is_self && !session_has(p, v6) {
                    out.push(NextHopGap {
                        peer: p.name.clone(),
                        family: if v6 { "ipv6-unicast" } else { "ipv4-unicast" },
                        never: self.source.is_file(),
                    });
                }
            }
        }
        out
    }
}

/// The session itself gives a next hop of the family (as the speaker's `self` resolves it;
/// `localAddress` is always of the session's family).
fn session_has(p: &PeerConfig, v6: bool) -> bool {
    let extended = !v6 && p.extended_next_hop;
    p.address.is_ipv4() != v6 || extended
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn gaps(yaml: &str) -> Vec<(String, &'static str, bool)> {
        Config::from_yaml_str(yaml)
            .unwrap()
            .next_hop_gaps()
            .into_iter()
            .map(|g| (g.peer, g.family, g.never))
            .collect()
    }

    const V4_PEER: &str = "peers: [{name: tor1, address: 192.0.2.1, asn: 65000}]\n";

    /// Issue 32 item 10: `nextHop.ipv6: self` on an IPv4 session of a dual-stack config.
    #[test]
    fn ipv6_self_next_hop_on_an_ipv4_session_is_a_gap_for_a_dual_stack_config() {
        let api = format!(
            "asn: 65010\nsource: {{kind: node-spec}}\nallowedPrefixes: [10.0.0.0/8, \"fd00::/48\"]\n{V4_PEER}"
        );
        assert_eq!(gaps(&api), [("tor1".to_owned(), "ipv6-unicast", false)]);
        let file = format!("asn: 65010\nsource: {{kind: file, path: /x}}\n{V4_PEER}");
        assert_eq!(gaps(&file), [("tor1".to_owned(), "ipv6-unicast", true)]);
        let text = Config::from_yaml_str(&file).unwrap().next_hop_gaps()[0].to_string();
        assert!(
            text.starts_with("peer tor1: nextHop.ipv6 is self and the session has no IPv6 address"),
            "{text}"
        );
        assert!(
            text.contains("no ipv6-unicast route is announced"),
            "{text}"
        );
    }

    #[test]
    fn no_gap_where_the_family_has_a_next_hop_or_is_not_expected() {
        let base = "asn: 65010\nsource: {kind: node-spec}\n";
        // IPv4-only pools: the default families and next hops say nothing.
        assert!(gaps(&format!("{base}allowedPrefixes: [10.0.0.0/8]\n{V4_PEER}")).is_empty());
        let dual = "allowedPrefixes: [10.0.0.0/8, \"fd00::/48\"]\n";
        for ok in [
            format!("{base}{dual}nextHop: {{ipv6: node}}\n{V4_PEER}"),
            format!("{base}{dual}nextHop: {{ipv6: \"2001:db8::5\"}}\n{V4_PEER}"),
            format!(
                "{base}{dual}peers: [{{name: tor1, address: 192.0.2.1, asn: 65000, families: [ipv4-unicast]}}]\n"
            ),
            format!(
                "{base}{dual}peers: [{{name: tor1, address: \"2001:db8::1\", asn: 65000, extendedNextHop: true}}]\n"
            ),
        ] {
            assert!(gaps(&ok).is_empty(), "{ok}");
        }
        // IPv4 over an IPv6 session without extendedNextHop: the mirror image.
        assert_eq!(
            gaps(&format!(
                "{base}{dual}peers: [{{name: tor1, address: \"2001:db8::1\", asn: 65000}}]\n"
            )),
            [("tor1".to_owned(), "ipv4-unicast", false)]
        );
    }
}
