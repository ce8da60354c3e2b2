//! `egress`: the node's own default route follows its sessions. While a peer whose address is
//! a next hop of the node's default route is down (BGP not Established, or its BFD session
//! failed), the speaker installs a route of its own that leaves that next hop out, so the
//! node's egress stops using an uplink the fabric has already stopped using. Off by default in
//! every mode: it writes the node's routing table (docs/bgp.md, "Node egress").

use crate::error::Errors;
use crate::tree::{Lookup, Node, Obj, boolean};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct EgressConfig {
    /// `followSessions`: leave a down peer's next hop out of the node's default route.
    pub follow_sessions: bool,
}

const KEYS: &[&str] = &["followSessions"];

pub(crate) fn parse_egress(n: Node<'_, '_>, errs: &mut Errors) -> Option<EgressConfig> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(KEYS, errs);
    let follow_sessions = Lookup::of(&obj, "followSessions", errs, boolean).known(false);
    Some(EgressConfig {
        follow_sessions: follow_sessions?,
    })
}

#[cfg(test)]
mod tests {
    use crate::Config;

    const BASE: &str = "asn: 65010\nsource: {kind: file, path: /x}\npeers: [{name: t, address: 192.0.2.1, asn: 65000}]\n";

    #[test]
    fn egress_follows_sessions_only_when_asked() {
        let c = Config::from_yaml_str(BASE).unwrap();
        assert!(!c.egress.follow_sessions);
        let c =
            Config::from_yaml_str(&format!("{BASE}egress: {{followSessions: true}}\n")).unwrap();
        assert!(c.egress.follow_sessions);
    }

    #[test]
    fn egress_rejects_a_bad_value_and_an_unknown_key_by_path() {
        let err = Config::from_yaml_str(&format!(
            "{BASE}egress: {{followSessions: sometimes, withdraw: true}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("egress.followSessions"), "{err}");
        assert!(err.contains("egress.withdraw"), "{err}");
    }
}
