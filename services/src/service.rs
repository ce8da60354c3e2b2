//! What of a `Service` decides whether and where its addresses are announced. A speaker keeps
//! this, not the object.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;

use crate::{SERVICE_NAME_LABEL, SERVICE_NAMESPACE_LABEL};

/// `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ServiceKey {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `externalTrafficPolicy` / `internalTrafficPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrafficPolicy {
    #[default]
    Cluster,
    Local,
}

impl TrafficPolicy {
    fn parse(p: Option<&str>) -> Self {
        if p == Some("Local") {
            TrafficPolicy::Local
        } else {
            TrafficPolicy::Cluster
        }
    }
}

/// A Service as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceFacts {
    pub key: ServiceKey,
    /// Its labels plus the virtual `podcidr.io/service-name` and `-namespace`.
    pub labels: BTreeMap<String, String>,
    pub load_balancer_class: Option<String>,
    pub cluster_ips: Vec<IpAddr>,
    pub external_ips: Vec<IpAddr>,
    /// `status.loadBalancer.ingress[].ip`, with whether its `ipMode` is `Proxy` (such an
    /// address is served by a proxy in front of the nodes, not by them: never announced).
    pub load_balancer_ips: Vec<(IpAddr, bool)>,
    /// `LoadBalancer` type: only these have load balancer addresses of their own.
    pub is_load_balancer: bool,
    pub external_policy: TrafficPolicy,
    pub internal_policy: TrafficPolicy,
    pub health_check_node_port: Option<u16>,
    /// Addresses a migration reads from other announcers' annotations
    /// (`metallb.io/loadBalancerIPs`, `lbipam.cilium.io/ips`), while the Service's status is
    /// still written by them: announced as LoadBalancer addresses, never written back.
    pub annotated_ips: Vec<IpAddr>,
}

/// The annotations read (never written) during a migration from MetalLB or Cilium.
pub const MIGRATION_ANNOTATIONS: &[&str] = &["metallb.io/loadBalancerIPs", "lbipam.cilium.io/ips"];

impl ServiceFacts {
    /// `None` for a Service that has no address to announce (`ExternalName`, headless).
    pub fn from_service(svc: &Service) -> Option<Self> {
        let meta = &svc.metadata;
        let key = ServiceKey {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone()?,
        };
        let spec = svc.spec.as_ref()?;
        let kind = spec.type_.as_deref().unwrap_or("ClusterIP");
        if kind == "ExternalName" {
            return None;
        }
        let ips = |v: Option<&Vec<String>>| -> Vec<IpAddr> {
            v.into_iter()
                .flatten()
                .filter_map(|s| s.parse().ok())
                .collect()
        };
        let mut cluster_ips = ips(spec.cluster_ips.as_ref());
        if cluster_ips.is_empty() {
            cluster_ips = spec
                .cluster_ip
                .iter()
                .filter_map(|s| s.parse().ok())
                .collect();
        }
        let is_load_balancer = kind == "LoadBalancer";
        let load_balancer_ips = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|i| {
                let ip = i.ip.as_deref()?.parse().ok()?;
                Some((ip, i.ip_mode.as_deref() == Some("Proxy")))
            })
            .collect();
        let annotated_ips = meta
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| MIGRATION_ANNOTATIONS.contains(&k.as_str()))
            .flat_map(|(_, v)| v.split(','))
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        let mut labels = meta.labels.clone().unwrap_or_default();
        labels.insert(SERVICE_NAME_LABEL.into(), key.name.clone());
        labels.insert(SERVICE_NAMESPACE_LABEL.into(), key.namespace.clone());
        Some(ServiceFacts {
            labels,
            load_balancer_class: spec.load_balancer_class.clone(),
            cluster_ips,
            external_ips: ips(spec.external_ips.as_ref()),
            load_balancer_ips,
            is_load_balancer,
            external_policy: TrafficPolicy::parse(spec.external_traffic_policy.as_deref()),
            internal_policy: TrafficPolicy::parse(spec.internal_traffic_policy.as_deref()),
            health_check_node_port: spec
                .health_check_node_port
                .and_then(|p| u16::try_from(p).ok()),
            annotated_ips,
            key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_every_address_kind_and_marks_proxy_mode_ingress() {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop", "labels": {"tier": "front"},
                         "annotations": {"metallb.io/loadBalancerIPs": "198.51.100.9, 2001:db8:5::9"}},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10",
                     "clusterIPs": ["10.96.0.10", "fd00:96::10"], "externalIPs": ["203.0.113.5"],
                     "externalTrafficPolicy": "Local", "healthCheckNodePort": 32000},
            "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"},
                                                    {"ip": "198.51.100.8", "ipMode": "Proxy"},
                                                    {"hostname": "lb.example"}]}}
        }))
        .unwrap();
        let f = ServiceFacts::from_service(&svc).unwrap();
        assert_eq!(f.key.to_string(), "shop/web");
        assert_eq!(f.cluster_ips.len(), 2);
        assert_eq!(f.external_ips, ["203.0.113.5".parse::<IpAddr>().unwrap()]);
        assert_eq!(
            f.load_balancer_ips,
            [
                ("198.51.100.7".parse().unwrap(), false),
                ("198.51.100.8".parse().unwrap(), true)
            ]
        );
        assert_eq!(f.annotated_ips.len(), 2);
        assert_eq!(f.external_policy, TrafficPolicy::Local);
        assert_eq!(f.internal_policy, TrafficPolicy::Cluster);
        assert_eq!(f.health_check_node_port, Some(32000));
        assert_eq!(f.labels["tier"], "front");
        assert_eq!(f.labels[SERVICE_NAME_LABEL], "web");
        assert_eq!(f.labels[SERVICE_NAMESPACE_LABEL], "shop");
    }

    #[test]
    fn external_name_and_headless_services_have_nothing_to_announce() {
        let ext: Service = serde_json::from_value(json!({
            "metadata": {"name": "x", "namespace": "a"},
            "spec": {"type": "ExternalName", "externalName": "db.example"}
        }))
        .unwrap();
        assert!(ServiceFacts::from_service(&ext).is_none());
        let headless: Service = serde_json::from_value(json!({
            "metadata": {"name": "h", "namespace": "a"},
            "spec": {"clusterIP": "None", "clusterIPs": ["None"]}
        }))
        .unwrap();
        let f = ServiceFacts::from_service(&headless).unwrap();
        assert!(f.cluster_ips.is_empty(), "None is not an address");
    }
}
