//! `forwardingGate`: hold a pod CIDR back until the node can deliver to it (a kernel route
//! for it towards a local device; with `cni.enabled`, the conflist written). Off by default.

use std::time::Duration;

use crate::error::Errors;
use crate::fields::seconds;
use crate::tree::{Lookup, Node, Obj, boolean};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ForwardingGateConfig {
    pub enabled: bool,
    /// Devices whose routes count (`cni0`, or a prefix pattern `cali*`); empty: any device
    /// but the uplinks the sessions use and `lo`. A device named here counts even when it is
    /// an uplink.
    pub interfaces: Vec<String>,
    /// `enforce` (the default) withholds what the gate holds; `report` only says what it
    /// would hold and announces everything.
    pub mode: GateMode,
    /// How long an announced CIDR the gate would hold stays announced before it is withdrawn
    /// (a route gone for less is not churned through the fabric). None before announcing.
    pub withdraw_hold_down: Duration,
}

impl Default for ForwardingGateConfig {
    fn default() -> Self {
        ForwardingGateConfig {
            enabled: false,
            interfaces: Vec::new(),
            mode: GateMode::Enforce,
            withdraw_hold_down: DEFAULT_WITHDRAW_HOLD_DOWN,
        }
    }
}

/// `forwardingGate.withdrawHoldDown` when absent: covers a CNI agent rewriting its routes and
/// a per-pod CNI's node between its last pod and the next one, yet a route that is really
/// gone is withdrawn within seconds.
pub const DEFAULT_WITHDRAW_HOLD_DOWN: Duration = Duration::from_secs(10);
/// Upper bound of `forwardingGate.withdrawHoldDown`: longer would announce a CIDR the node
/// cannot deliver to (or that loops back out of an uplink) for minutes.
pub const MAX_WITHDRAW_HOLD_DOWN: u64 = 300;

/// `forwardingGate.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GateMode {
    /// Held CIDRs are not announced.
    #[default]
    Enforce,
    /// Everything is announced; what would be held is only reported (metrics, the
    /// `ForwardingHeld` condition, `diff`): the way to try the gate on a CNI before enforcing.
    Report,
}

impl GateMode {
    pub const fn as_str(self) -> &'static str {
        match self {
            GateMode::Enforce => "enforce",
            GateMode::Report => "report",
        }
    }
}

impl ForwardingGateConfig {
    /// The gate decides (enabled) and withholds what it holds (not only reports it).
    pub fn enforces(&self) -> bool {
        self.enabled && self.mode == GateMode::Enforce
    }

    /// Whether a route through `dev` may count when `dev` is not an uplink: any device when
    /// `interfaces` is empty, else the devices it names.
    pub fn lists(&self, dev: &str) -> bool {
        self.interfaces.is_empty() || self.names(dev)
    }

    /// Whether `interfaces` names `dev` (by name or pattern): such a route counts even
    /// through an uplink, since the operator said so (a bridge holding the NIC and the veths).
    pub fn names(&self, dev: &str) -> bool {
        self.interfaces.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => dev.starts_with(prefix),
            None => dev == p,
        })
    }
}

const KEYS: &[&str] = &["enabled", "interfaces", "mode", "withdrawHoldDown"];

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
    let mode = Lookup::of(&obj, "mode", errs, |n, e| {
        n.parse("enforce or report", e, |s| match s {
            "enforce" => Ok(GateMode::Enforce),
            "report" => Ok(GateMode::Report),
            _ => Err("is not enforce or report".to_owned()),
        })
    })
    .known(GateMode::Enforce);
    let rule = format!("0..{MAX_WITHDRAW_HOLD_DOWN} seconds");
    let hold_down = Lookup::of(&obj, "withdrawHoldDown", errs, |n, e| {
        seconds(n, 0, MAX_WITHDRAW_HOLD_DOWN, &rule, e)
    })
    .known(DEFAULT_WITHDRAW_HOLD_DOWN.as_secs());
    Some(ForwardingGateConfig {
        enabled: enabled?,
        interfaces: interfaces?,
        mode: mode?,
        withdraw_hold_down: Duration::from_secs(hold_down?),
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

    /// A config that enabled the gate before `mode` existed keeps enforcing it.
    #[test]
    fn forwarding_gate_enforces_by_default_and_reports_only_when_asked() {
        use super::{DEFAULT_WITHDRAW_HOLD_DOWN, GateMode};
        let c =
            Config::from_yaml_str(&format!("{BASE}forwardingGate: {{enabled: true}}\n")).unwrap();
        assert_eq!(c.forwarding_gate.mode, GateMode::Enforce);
        assert!(c.forwarding_gate.enforces());
        assert_eq!(
            c.forwarding_gate.withdraw_hold_down,
            DEFAULT_WITHDRAW_HOLD_DOWN
        );
        let c = Config::from_yaml_str(&format!(
            "{BASE}forwardingGate: {{enabled: true, mode: report, withdrawHoldDown: 1m}}\n"
        ))
        .unwrap();
        assert_eq!(c.forwarding_gate.mode, GateMode::Report);
        assert!(!c.forwarding_gate.enforces());
        assert_eq!(c.forwarding_gate.withdraw_hold_down.as_secs(), 60);
    }

    #[test]
    fn forwarding_gate_rejects_an_unknown_mode_and_an_unbounded_hold_down_by_path() {
        let err = Config::from_yaml_str(&format!(
            "{BASE}forwardingGate: {{enabled: true, mode: warn, withdrawHoldDown: 1h}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("forwardingGate.mode: \"warn\" is not enforce or report"),
            "{err}"
        );
        assert!(err.contains("forwardingGate.withdrawHoldDown"), "{err}");
        assert!(err.contains("0..300 seconds"), "{err}");
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
