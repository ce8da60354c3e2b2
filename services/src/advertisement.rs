//! A `BGPAdvertisement` as the planner uses it: selectors compiled, prefixes and communities
//! parsed. Reading never half-succeeds: an object with any bad field is refused whole, with
//! every problem named by its field, and reported on the object (the others keep running).

use std::collections::BTreeMap;

use ipnet::IpNet;
use kube_core::{Selector, SelectorExt};
use podcidr_api::{AdvertisedAddressSpec, BGPAdvertisementSpec, OriginSpec};
use podcidr_config::{Community, LargeCommunity};

/// Which of a Service's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddressKind {
    LoadBalancerIp,
    ExternalIp,
    ClusterIp,
}

impl AddressKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AddressKind::LoadBalancerIp => "LoadBalancerIP",
            AddressKind::ExternalIp => "ExternalIP",
            AddressKind::ClusterIp => "ClusterIP",
        }
    }

    /// Traffic from outside the cluster: the node label that excludes a node from external
    /// load balancers applies, and `externalTrafficPolicy` decides where it is served.
    pub fn is_external(self) -> bool {
        !matches!(self, AddressKind::ClusterIp)
    }
}

impl From<AdvertisedAddressSpec> for AddressKind {
    fn from(a: AdvertisedAddressSpec) -> Self {
        match a {
            AdvertisedAddressSpec::LoadBalancerIp => AddressKind::LoadBalancerIp,
            AdvertisedAddressSpec::ExternalIp => AddressKind::ExternalIp,
            AdvertisedAddressSpec::ClusterIp => AddressKind::ClusterIp,
        }
    }
}

/// ORIGIN of a Service route (RFC 4271 5.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Origin {
    #[default]
    Igp,
    Incomplete,
}

/// One `BGPAdvertisement`, read.
#[derive(Debug, Clone)]
pub struct Advertisement {
    pub name: String,
    /// `None`: every node.
    pub node_selector: Option<Selector>,
    /// `None`: no Service (an absent `serviceSelector` selects none).
    pub service_selector: Option<Selector>,
    pub addresses: Vec<AddressKind>,
    pub allowed_prefixes: Vec<IpNet>,
    /// `None`: every peer of the node.
    pub peers: Option<Selector>,
    pub aggregation_length_ipv4: u8,
    pub aggregation_length_ipv6: u8,
    pub communities: Vec<Community>,
    pub large_communities: Vec<LargeCommunity>,
    pub local_pref: Option<u32>,
    pub load_balancer_class: Option<String>,
    pub origin: Origin,
    /// The datapath gate's hold-down, when the gate is on (`spec.healthCheckGate`).
    pub health_check_gate: Option<std::time::Duration>,
}

/// The gate's hold-down when `spec.healthCheckGate.holdDown` is absent.
pub const DEFAULT_HOLD_DOWN: std::time::Duration = std::time::Duration::from_secs(5);

impl Advertisement {
    /// Reads the object's spec; `Err` lists every bad field (`spec.allowedPrefixes[1]: ...`).
    pub fn from_spec(name: &str, spec: &BGPAdvertisementSpec) -> Result<Self, Vec<String>> {
        let mut errs = Vec::new();
        let mut selector = |field: &str, s: &Option<_>| -> Option<Selector> {
            let s = s.as_ref()?;
            Selector::try_from(Clone::clone(s))
                .map_err(|e| errs.push(format!("spec.{field}: {e}")))
                .ok()
        };
        let node_selector = selector("nodeSelector", &spec.node_selector);
        let service_selector = selector("serviceSelector", &spec.service_selector);
        let peers = selector("peers", &spec.peers);

        let mut addresses: Vec<AddressKind> = spec.addresses.iter().map(|&a| a.into()).collect();
        addresses.sort();
        addresses.dedup();
        if addresses.is_empty() {
            errs.push(
                "spec.addresses: required and non-empty (LoadBalancerIP, ExternalIP, ClusterIP)"
                    .into(),
            );
        }
        let mut allowed_prefixes = Vec::new();
        for (i, p) in spec.allowed_prefixes.iter().enumerate() {
            match p.parse::<IpNet>() {
                Ok(net) if net.trunc() == net => allowed_prefixes.push(net),
                Ok(net) => errs.push(format!(
                    "spec.allowedPrefixes[{i}]: {p:?} has host bits set (the network is {})",
                    net.trunc()
                )),
                Err(_) => errs.push(format!("spec.allowedPrefixes[{i}]: {p:?} is not a CIDR")),
            }
        }
        if spec.allowed_prefixes.is_empty() {
            errs.push("spec.allowedPrefixes: required and non-empty (the allow-list)".into());
        }
        let length = |field: &str, v: Option<u8>, max: u8, errs: &mut Vec<String>| match v {
            Some(l) if l > max => {
                errs.push(format!("spec.{field}: {l} is longer than {max}"));
                max
            }
            Some(l) => l,
            None => max,
        };
        let aggregation_length_ipv4 = length(
            "aggregationLengthIPv4",
            spec.aggregation_length_ipv4,
            32,
            &mut errs,
        );
        let aggregation_length_ipv6 = length(
            "aggregationLengthIPv6",
            spec.aggregation_length_ipv6,
            128,
            &mut errs,
        );
        let communities = parse_all("communities", &spec.communities, &mut errs);
        let large_communities = parse_all("largeCommunities", &spec.large_communities, &mut errs);
        let local_pref = match spec.local_pref.map(u32::try_from) {
            Some(Ok(v)) => Some(v),
            Some(Err(_)) => {
                errs.push("spec.localPref: at most 4294967295".into());
                None
            }
            None => None,
        };
        let health_check_gate = spec.health_check_gate.as_ref().map(|g| {
            use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
            let secs = match &g.hold_down {
                None => return DEFAULT_HOLD_DOWN,
                Some(IntOrString::Int(n)) => u64::try_from(*n).map_err(|_| n.to_string()),
                Some(IntOrString::String(s)) => {
                    podcidr_config::parse_seconds(s).map_err(|_| s.clone())
                }
            };
            match secs {
                Ok(s) => std::time::Duration::from_secs(s),
                Err(v) => {
                    errs.push(format!(
                        "spec.healthCheckGate.holdDown: {v:?} is not a duration (90, \"90s\", \"5m\")"
                    ));
                    DEFAULT_HOLD_DOWN
                }
            }
        });
        if spec.load_balancer_class.as_deref() == Some("") {
            errs.push("spec.loadBalancerClass: empty (omit it for Services with no class)".into());
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        Ok(Advertisement {
            name: name.to_owned(),
            node_selector,
            service_selector,
            addresses,
            allowed_prefixes,
            peers,
            aggregation_length_ipv4,
            aggregation_length_ipv6,
            communities,
            large_communities,
            local_pref,
            load_balancer_class: spec.load_balancer_class.clone(),
            origin: match spec.origin {
                Some(OriginSpec::Incomplete) => Origin::Incomplete,
                Some(OriginSpec::Igp) | None => Origin::Igp,
            },
            health_check_gate,
        })
    }

    pub fn selects_node(&self, labels: &BTreeMap<String, String>) -> bool {
        self.node_selector
            .as_ref()
            .is_none_or(|s| s.matches(labels))
    }

    /// Whether a peer (by its object's labels) receives these routes.
    pub fn selects_peer(&self, labels: &BTreeMap<String, String>) -> bool {
        self.peers.as_ref().is_none_or(|s| s.matches(labels))
    }

    /// The covering prefix announced for `ip`.
    pub fn aggregate(&self, ip: std::net::IpAddr) -> IpNet {
        let len = match ip {
            std::net::IpAddr::V4(_) => self.aggregation_length_ipv4,
            std::net::IpAddr::V6(_) => self.aggregation_length_ipv6,
        };
        IpNet::new(ip, len)
            .unwrap_or_else(|_| IpNet::from(ip))
            .trunc()
    }

    /// Whether `prefix` lies inside one allow-list entry.
    pub fn allows(&self, prefix: &IpNet) -> bool {
        self.allowed_prefixes.iter().any(|a| a.contains(prefix))
    }
}

fn parse_all<T: std::str::FromStr>(field: &str, items: &[String], errs: &mut Vec<String>) -> Vec<T>
where
    T::Err: std::fmt::Display,
{
    items
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            s.parse()
                .map_err(|e| errs.push(format!("spec.{field}[{i}]: {s:?}: {e}")))
                .ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> BGPAdvertisementSpec {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn every_bad_field_is_named_and_the_object_is_refused_whole() {
        let errs = Advertisement::from_spec(
            "bad",
            &spec(serde_json::json!({
                "addresses": ["LoadBalancerIP"],
                "allowedPrefixes": ["198.51.100.7/24", "nope"],
                "communities": ["65000:bogus"],
                "aggregationLengthIPv4": 40
            })),
        )
        .unwrap_err();
        let all = errs.join("\n");
        assert!(
            all.contains("spec.allowedPrefixes[0]: \"198.51.100.7/24\" has host bits set"),
            "{all}"
        );
        assert!(
            all.contains("spec.allowedPrefixes[1]: \"nope\" is not a CIDR"),
            "{all}"
        );
        assert!(
            all.contains("spec.communities[0]: \"65000:bogus\""),
            "{all}"
        );
        assert!(
            all.contains("spec.aggregationLengthIPv4: 40 is longer than 32"),
            "{all}"
        );
    }

    #[test]
    fn defaults_are_host_routes_origin_igp_and_every_peer() {
        let ad = Advertisement::from_spec(
            "lb",
            &spec(serde_json::json!({
                "addresses": ["LoadBalancerIP", "LoadBalancerIP"],
                "allowedPrefixes": ["198.51.100.0/24", "2001:db8:5::/64"]
            })),
        )
        .unwrap();
        assert_eq!(ad.addresses, [AddressKind::LoadBalancerIp]);
        assert_eq!(
            ad.aggregate("198.51.100.7".parse().unwrap()).to_string(),
            "198.51.100.7/32"
        );
        assert_eq!(
            ad.aggregate("2001:db8:5::7".parse().unwrap()).to_string(),
            "2001:db8:5::7/128"
        );
        assert_eq!(ad.origin, Origin::Igp);
        assert!(ad.selects_peer(&BTreeMap::new()));
        assert!(
            ad.service_selector.is_none(),
            "absent serviceSelector selects none"
        );
    }
}
