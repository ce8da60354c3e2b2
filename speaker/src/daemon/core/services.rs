//! Service routes: the watch task's [`Changes`] (Services, their endpoints seen from this node,
//! the `BGPAdvertisement`s, the `BGPPeer` labels), the node's drain, and the plan a
//! [`Planner`] keeps of them, one Service at a time. `offer.rs` adds the plan's routes to each
//! peer's set, so a change is an incremental UPDATE on the sessions that carry it: no reload,
//! no reset.
//!
//! Drain (withdraw Service routes, keep the sessions and the pod CIDRs): the Node is deleted or
//! being deleted, has a removal taint (the cluster autoscaler's, Karpenter's, ...), kubelet is
//! shutting it down, or it has the taint or annotation [`DRAIN_KEY`]. Never plain cordon. The
//! routes first carry GRACEFUL_SHUTDOWN for `gracefulShutdown.wait` (RFC 8326), then go.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::Family;
use bgp_proto::session::{OriginKind, RouteSet};
use podcidr_config::PeerConfig;
use std::collections::BTreeMap;

use podcidr_services::{
    Changes, Drain, NodeDrain, NodeFacts, Origin, PeerFacts, Planner, ServiceKey, drain_trigger,
};

use super::routes::attributes;

use super::since::Since;
use super::{Core, Effect, Notice};

pub use podcidr_api::contract::SERVICE_DRAIN_KEY as DRAIN_KEY;

/// What the core holds for Service routes.
#[derive(Debug, Default)]
pub struct ServiceState {
    /// The watch task has listed everything once (never without an API).
    synced: bool,
    /// `BGPAdvertisement`s that could not be read, with every problem.
    refused: BTreeMap<String, Vec<String>>,
    /// `BGPPeer` labels by object name, for `spec.peers`.
    peer_labels: BTreeMap<String, BTreeMap<String, String>>,
    planner: Planner,
    /// Since when and why the node drains, while it does.
    drain: Option<(Since, String)>,
    /// Counts last said (announced, held by reason).
    counts: (usize, BTreeMap<&'static str, usize>),
    /// The datapath gate: what the node's service proxy last answered per Service.
    probes: BTreeMap<ServiceKey, Probe>,
    /// What the prober was last asked to probe.
    targets: Option<ProbeTargets>,
}

/// One Service's last probe answer, and since when it has been a local endpoint.
#[derive(Debug, Clone)]
struct Probe {
    answer: Result<(), String>,
    ok_since: Option<Since>,
}

/// What the prober probes: `healthCheckNodePort`s at the node's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTargets {
    pub address: IpAddr,
    pub services: Vec<(ServiceKey, u16)>,
}

impl ServiceState {
    #[cfg(test)]
    pub(super) fn planner(&self) -> &Planner {
        &self.planner
    }
}

impl Core {
    pub(super) fn on_services(&mut self, out: &mut Vec<Effect>, changes: Changes) {
        let s = &mut self.services;
        s.synced = true;
        if let Some(ads) = changes.advertisements {
            for (name, problems) in &ads.refused {
                if s.refused.get(name) != Some(problems) {
                    out.push(Effect::Notice(Notice::AdvertisementRefused {
                        name: name.clone(),
                        problems: problems.join("; "),
                    }));
                }
            }
            s.refused = ads.refused;
            s.planner.set_advertisements(ads.read);
        }
        if let Some(labels) = changes.peer_labels {
            s.peer_labels = labels;
        }
        for (key, service) in changes.services {
            match service {
                Some((facts, endpoints)) => s.planner.upsert(facts, endpoints),
                None => s.planner.remove(&key),
            }
        }
        self.replan_services(out);
    }

    /// Why Service routes drain now (`None`: they do not); `podcidr_services::drain_trigger`
    /// decides, as for `diff --services`.
    fn drain_trigger(&self) -> Option<String> {
        let node = self.node.facts.as_ref()?;
        drain_trigger(NodeDrain {
            deleted: node.deleted,
            deleting: node.deleting,
            taints: &node.taints,
            annotations: &node.annotations,
            not_ready: node.not_ready.as_deref(),
        })
    }

    fn service_drain(&mut self) -> Drain {
        match (self.drain_trigger(), &self.services.drain) {
            (None, _) => {
                self.services.drain = None;
                Drain::No
            }
            (Some(why), None) => {
                self.services.drain = Some((Since::NextTick, why));
                Drain::Announcing
            }
            (Some(_), Some((since, _))) => {
                if since.over(self.now, self.config.graceful_shutdown.wait) {
                    Drain::Withdrawn
                } else {
                    Drain::Announcing
                }
            }
        }
    }

    /// The prober's answers (the datapath gate).
    pub(super) fn on_service_probes(
        &mut self,
        out: &mut Vec<Effect>,
        answers: BTreeMap<ServiceKey, Result<(), String>>,
    ) {
        let probes = &mut self.services.probes;
        probes.retain(|k, _| answers.contains_key(k));
        for (key, answer) in answers {
            let ok_since = match (&answer, probes.get(&key)) {
                (Err(_), _) => None,
                (Ok(()), Some(p)) if p.answer.is_ok() => p.ok_since,
                (Ok(()), _) => Some(Since::NextTick),
            };
            probes.insert(key, Probe { answer, ok_since });
        }
        self.replan_services(out);
    }

    /// Each probed Service's gate: open once the proxy has reported a local endpoint for the
    /// hold-down.
    fn datapath(&self, hold: Duration) -> BTreeMap<ServiceKey, Result<(), String>> {
        self.services
            .probes
            .iter()
            .map(|(k, p)| {
                let gate = match (&p.answer, p.ok_since) {
                    (Err(why), _) => Err(why.clone()),
                    (Ok(()), Some(since)) if since.over(self.now, hold) => Ok(()),
                    // Not the seconds left: the reason would change every tick.
                    (Ok(()), _) => Err(format!(
                        "held down: the proxy must report a local endpoint for {} s",
                        hold.as_secs()
                    )),
                };
                (k.clone(), gate)
            })
            .collect()
    }

    /// Brings the plan up to date with the node and its peers; pushes routes when they
    /// changed, says when the counts or the probe targets did.
    pub(super) fn replan_services(&mut self, out: &mut Vec<Effect>) {
        let drain = self.service_drain();
        if !self.services.synced {
            return;
        }
        let node = NodeFacts {
            name: self.node.name.clone(),
            labels: self.node().labels.clone(),
            drain,
            datapath: self.datapath(self.services.planner.hold_down()),
        };
        let peers: Vec<PeerFacts> = self
            .sessions
            .peers
            .keys()
            .map(|name| PeerFacts {
                name: name.clone(),
                labels: self
                    .services
                    .peer_labels
                    .get(name)
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect();
        let address = self.probe_address();
        let s = &mut self.services;
        s.planner.set_peers(peers);
        s.planner.set_node(node);
        let targets = ProbeTargets {
            address,
            services: s.planner.probe_targets().0,
        };
        if s.targets.as_ref() != Some(&targets) {
            s.targets = Some(targets.clone());
            out.push(Effect::ProbeServices(targets));
        }
        let (announced, held) = s.planner.counts();
        if announced != s.counts.0 || s.planner.held_by_reason() != &s.counts.1 {
            s.counts = (announced, s.planner.held_by_reason().clone());
            out.push(Effect::Notice(Notice::ServiceRoutes {
                announced,
                held,
                held_by_reason: s.counts.1.clone(),
            }));
        }
        // Only a change of routes touches the peers' sets (a reason alone is for diff).
        if s.planner.take_routes_changed() {
            self.push_routes(out);
        }
    }

    /// `pods` (the peer's pod-CIDR routes) plus the plan's Service routes for this peer, with
    /// the peer's attributes and the advertisements' on top. A pod CIDR wins a prefix both
    /// have; a family the peer does not carry or has no next hop for is left out (as for pod
    /// CIDRs).
    pub(super) fn with_service_routes(
        &self,
        peer: &PeerConfig,
        pods: RouteSet,
        (nh_v4, nh_v6): (Option<IpAddr>, Option<IpAddr>),
    ) -> RouteSet {
        let Some(routes) = self.services.planner.routes().get(&peer.name) else {
            return pods;
        };
        let services = routes.iter().filter_map(|(prefix, a)| {
            let (family, nh) = if prefix.addr().is_ipv4() {
                (Family::IPV4_UNICAST, nh_v4)
            } else {
                (Family::IPV6_UNICAST, nh_v6)
            };
            if !peer.families.contains(&family) {
                return None;
            }
            let mut attrs = attributes(peer, nh?);
            attrs.origin = match a.origin {
                Origin::Igp => OriginKind::Igp,
                Origin::Incomplete => OriginKind::Incomplete,
            };
            attrs.communities.extend(a.communities.iter().map(|c| c.0));
            attrs.communities.sort_unstable();
            attrs.communities.dedup();
            attrs
                .large_communities
                .extend(a.large_communities.iter().map(|c| c.to_array()));
            attrs.large_communities.sort_unstable();
            attrs.large_communities.dedup();
            attrs.local_pref = a.local_pref.or(attrs.local_pref);
            Some((*prefix, Arc::new(attrs)))
        });
        // Collecting keeps the last value of a prefix given twice: pod CIDRs come last.
        let pod_routes = pods.iter().map(|(p, a)| (*p, Arc::clone(a)));
        services.chain(pod_routes).collect()
    }

    /// `status.services`: counts (`None` while no advertisement selects the node).
    pub(super) fn services_report(&self) -> Option<podcidr_api::ServiceRoutesReport> {
        let planner = &self.services.planner;
        let (announced, held) = planner.counts();
        if announced + held == 0 {
            return None;
        }
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Some(podcidr_api::ServiceRoutesReport {
            announced: n(announced),
            held: n(held),
            held_by_reason: planner
                .held_by_reason()
                .iter()
                .map(|(k, v)| ((*k).to_owned(), n(*v)))
                .collect(),
        })
    }

    /// Where the service proxy's health servers answer: the node's InternalIP (what cloud
    /// load balancers probe), else loopback.
    fn probe_address(&self) -> IpAddr {
        let n = self.node();
        n.internal_v4
            .map(IpAddr::from)
            .or(n.internal_v6.map(IpAddr::from))
            .unwrap_or(IpAddr::from([127, 0, 0, 1]))
    }

    /// A drain's graceful-shutdown period, or a gate's hold-down, starts and ends on a tick.
    pub(super) fn services_tick(&mut self, out: &mut Vec<Effect>) {
        let now = self.now;
        if let Some((since, _)) = &mut self.services.drain {
            since.stamp(now);
        }
        for since in self
            .services
            .probes
            .values_mut()
            .filter_map(|p| p.ok_since.as_mut())
        {
            since.stamp(now);
        }
        let holding = self.services.probes.values().any(|p| p.answer.is_ok());
        if holding || self.services.drain.is_some() || self.drain_trigger().is_some() {
            self.replan_services(out);
        }
    }
}
