//! `forwardingGate`: hold a pod CIDR back until the node can deliver to it (a kernel route
//! for it towards a local device; with `cni.enabled`, the conflist written). Off by default.

use crate::error::Errors;
use crate::tree::{Lookup, Node, Obj, boolean};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ForwardingGateConfig {
    pub enabled: bool,
    /// Devices whose routes count (`cni0`, or a prefix pattern `cali*`); empty: any device
    /// but the uplinks the sessions use and `lo`.
    pub interfaces: Vec<String>,
}

impl ForwardingGateConfig {
    /// Whether a route through `dev` may count (before the uplink check).
    pub fn lists(&self, dev: &str) -> bool {
        self.interfaces.is_empty()
            || self.interfaces.iter().any(|p| match p.strip_suffix('*') {
                Some(prefix) => dev.starts_with(prefix),
                None => dev == p,
            })
    }
}

const KEYS: &[&str] = &["enabled", "interfaces"];

pub(crate) fn parse_forwarding_gate(
    n: Node<'_, '_>,
    errs: &mut Errors,
) -> Option<ForwardingGateConfig> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(KEYS, errs);
    let enabled = Lookup::of(&obj, "enabled", errs, boolean).known(false);
    let interfaces = Lookup::of(&obj, "interfaces", errs, |n, e| {
        let items = n.list(e)?;
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in &items {
            match crate::tree::node(item).parse("an interface name or pattern", e, check_pattern) {
                Some(p) => out.push(p),
                None => ok = false,
            }
        }
        ok.then_some(out)
    })
    .known(Vec::new());
    Some(ForwardingGateConfig {
        enabled: enabled?,
        interfaces: interfaces?,
    })
}

/// A Linux interface name (1..15 bytes, no '/', ':' or spaces), or such a prefix followed by
/// one `*`.
fn check_pattern(s: &str) -> Result<String, String> {
    let name = s.strip_suffix('*').unwrap_or(s);
    let bad = name.len() > 15
        || (name.is_empty() && !s.ends_with('*'))
        || name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| matches!(c, '/' | ':' | '*') || c.is_whitespace() || c.is_control());
    if bad {
        return Err(
            "is not an interface name or a name prefix ending in '*' (e.g. cni0, cali*)".to_owned(),
        );
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use crate::Config;

    const BASE: &str = "asn: 65010\nsource: {kind: file, path: /x}\npeers: [{name: t, address: 192.0.2.1, asn: 65000}]\n";

    #[test]
    fn forwarding_gate_is_off_by_default() {
        let c = Config::from_yaml_str(BASE).unwrap();
        assert!(!c.forwarding_gate.enabled);
        assert!(c.forwarding_gate.interfaces.is_empty());
    }

    #[test]
    fn forwarding_gate_interfaces_take_names_and_prefix_patterns() {
        let c = Config::from_yaml_str(&format!(
            "{BASE}forwardingGate: {{enabled: true, interfaces: [cni0, \"cali*\"]}}\n"
        ))
        .unwrap();
        let g = &c.forwarding_gate;
        assert!(g.enabled);
        assert!(g.lists("cni0") && g.lists("cali12ab") && !g.lists("cni1") && !g.lists("eth0"));
    }

    #[test]
    fn forwarding_gate_rejects_a_bad_pattern_and_an_unknown_key_by_path() {
        let err = Config::from_yaml_str(&format!(
            "{BASE}forwardingGate: {{enabled: yes-please, interfaces: [\"a*b\"], device: x}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("forwardingGate.interfaces[0]"), "{err}");
        assert!(err.contains("forwardingGate.device"), "{err}");
        assert!(err.contains("forwardingGate.enabled"), "{err}");
    }
}
