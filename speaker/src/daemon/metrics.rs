//! Prometheus metrics (text format on `/metrics`). Names are the contract in the issue.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerLabel {
    pub peer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerFamilyLabel {
    pub peer: String,
    pub family: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerKindLabel {
    pub peer: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NotificationLabel {
    pub direction: String,
    pub code: String,
    pub subcode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabel {
    pub version: String,
    pub commit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerInfoLabel {
    pub peer: String,
    pub address: String,
    pub asn: String,
    pub local_asn: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectReasonLabel {
    pub object: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabel {
    pub object: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FamilyReasonLabel {
    pub family: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FamilyLabel {
    pub family: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub session_up: Family<PeerLabel, Gauge>,
    pub session_state: Family<PeerLabel, Gauge>,
    pub announced_prefixes: Family<PeerFamilyLabel, Gauge>,
    pub updates_sent: Family<PeerLabel, Counter>,
    pub notifications: Family<NotificationLabel, Counter>,
    pub update_errors: Family<PeerKindLabel, Counter>,
    pub guard_refused: Family<ReasonLabel, Counter>,
    /// What is refused now, per reason (the counter counts appearances).
    pub guard_refused_prefixes: Family<ReasonLabel, Gauge>,
    /// What the forwarding gate holds now, per family and reason.
    pub forwarding_held_prefixes: Family<FamilyReasonLabel, Gauge>,
    /// With `forwardingGate.mode: report`: what it would hold (announced anyway).
    pub forwarding_would_hold_prefixes: Family<FamilyReasonLabel, Gauge>,
    /// 1 per peer and family with pod CIDRs to announce and no usable next hop.
    pub peer_no_next_hop: Family<PeerFamilyLabel, Gauge>,
    pub source_mismatch: Gauge,
    pub source_ready: Gauge,
    pub config_reloads: Family<ResultLabel, Counter>,
    pub cni_config_writes: Family<ResultLabel, Counter>,
    pub cni_config_ok: Gauge,
    pub build_info: Family<BuildLabel, Gauge>,
    pub peer_info: Family<PeerInfoLabel, Gauge>,
    /// The label set each peer's info series has now, to remove it.
    peer_info_labels: std::sync::Mutex<std::collections::HashMap<String, PeerInfoLabel>>,
    pub session_flaps: Family<PeerLabel, Counter>,
    /// BFD Up → Down that took the BGP session down (not a peer's AdminDown).
    pub bfd_session_down: Family<PeerLabel, Counter>,
    pub bfd_state: Family<PeerLabel, Gauge>,
    /// BFD datagrams discarded, by reason: the control port's single-hop checks (`ttl`,
    /// `local`, `interface`, `unknown_source`, `queue_full`) and the session's (decoding,
    /// `auth_*`, `discriminator`). Copied from `bgp_io::bfd::drops` at each scrape.
    pub bfd_packets_dropped: Family<ReasonLabel, Counter>,
    /// BFD strict mode: 1 while the session waits in OpenSent for BFD Up.
    pub waiting_for_bfd: Family<PeerLabel, Gauge>,
    /// Unix time the last BFD flap hold-down of the peer's BGP session ends (RFC 5882 §3.1).
    pub bfd_held_down_until: Family<PeerLabel, Gauge>,
    pub config_stale: Gauge,
    pub status_publish_failures: Counter,
    pub status_last_published: Gauge,
    /// Kubernetes Events about the node by outcome.
    pub kube_events: Family<ResultLabel, Counter>,
    pub lease_renew_failures: Counter,
    pub config_rejections: Family<ReasonLabel, Counter>,
    pub api_write_failures: Family<ObjectReasonLabel, Counter>,
    /// Every write attempt to the API (status, lease): what the speaker costs the server.
    pub api_writes: Family<ObjectLabel, Counter>,
    pub lease_last_renewed: Gauge,
    /// Configuration objects selecting this node by state: applied, last_good, not_applied.
    pub node_config_objects: Family<StateLabel, Gauge>,
    /// Of the not applied ones: those that cannot run here and have no last good version.
    pub node_config_cannot_run: Gauge,
    /// The source's CIDRs for this node, and how many some peer is offered.
    pub node_source_cidrs: Gauge,
    pub node_announced_cidrs: Gauge,
    /// Service addresses announced from this node, and those selected but held back.
    pub service_addresses_announced: Gauge,
    pub service_addresses_held: Family<ReasonLabel, Gauge>,
    /// Peers the rollout gate excuses although they answer: never Established on this node.
    pub ready_excused_peers: Gauge,
    /// `egress.followSessions`: default-route next hops left out of the node's egress now,
    /// the next hops of the route of ours (0: none, the default route as it is), and failed
    /// writes of it.
    pub egress_withdrawn: Family<FamilyLabel, Gauge>,
    pub egress_route_next_hops: Family<FamilyLabel, Gauge>,
    pub egress_write_failures: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let m = Metrics {
            registry: Registry::default(),
            session_up: Family::default(),
            session_state: Family::default(),
            announced_prefixes: Family::default(),
            updates_sent: Family::default(),
            notifications: Family::default(),
            update_errors: Family::default(),
            guard_refused: Family::default(),
            guard_refused_prefixes: Family::default(),
            forwarding_held_prefixes: Family::default(),
            forwarding_would_hold_prefixes: Family::default(),
            peer_no_next_hop: Family::default(),
            source_mismatch: Gauge::default(),
            source_ready: Gauge::default(),
            config_reloads: Family::default(),
            cni_config_writes: Family::default(),
            cni_config_ok: Gauge::default(),
            build_info: Family::default(),
            peer_info: Family::default(),
            peer_info_labels: std::sync::Mutex::default(),
            session_flaps: Family::default(),
            bfd_session_down: Family::default(),
            bfd_state: Family::default(),
            bfd_packets_dropped: Family::default(),
            waiting_for_bfd: Family::default(),
            bfd_held_down_until: Family::default(),
            config_stale: Gauge::default(),
            status_publish_failures: Counter::default(),
            status_last_published: Gauge::default(),
            kube_events: Family::default(),
            lease_renew_failures: Counter::default(),
            config_rejections: Family::default(),
            api_write_failures: Family::default(),
            api_writes: Family::default(),
            lease_last_renewed: Gauge::default(),
            node_config_objects: Family::default(),
            node_config_cannot_run: Gauge::default(),
            node_source_cidrs: Gauge::default(),
            node_announced_cidrs: Gauge::default(),
            service_addresses_announced: Gauge::default(),
            service_addresses_held: Family::default(),
            ready_excused_peers: Gauge::default(),
            egress_withdrawn: Family::default(),
            egress_route_next_hops: Family::default(),
            egress_write_failures: Counter::default(),
        };
        // Every state from the start (0 with a config file: no objects select the node), so
        // an alert on one state has a series to read on every speaker.
        for state in ["applied", "last_good", "not_applied"] {
            m.node_config_objects
                .get_or_create(&StateLabel {
                    state: state.to_owned(),
                })
                .set(0);
        }
        registry.register(
            "podcidr_bgp_session_up",
            "1 when the BGP session is Established",
            m.session_up.clone(),
        );
        registry.register(
            "podcidr_bgp_bfd_session_down",
            "BFD sessions that went from Up to Down and took the BGP session down (RFC 5882)",
            m.bfd_session_down.clone(),
        );
        registry.register(
            "podcidr_bgp_bfd_state",
            "RFC 5880 BFD session state: 0 AdminDown, 1 Down, 2 Init, 3 Up",
            m.bfd_state.clone(),
        );
        registry.register(
            "podcidr_bgp_bfd_packets_dropped",
            "BFD packets discarded before or by their session, by reason (RFC 5881 §5 TTL and interface, RFC 5880 §6.7 authentication, §6.8.6)",
            m.bfd_packets_dropped.clone(),
        );
        registry.register(
            "podcidr_bgp_waiting_for_bfd",
            "1 while the session is held waiting for BFD Up (BFD strict mode, both sides)",
            m.waiting_for_bfd.clone(),
        );
        registry.register(
            "podcidr_bgp_bfd_held_down_until_seconds",
            "Unix time the BGP session's last hold-down for a flapping BFD session ends (RFC 5882 §3.1); held while it is in the future",
            m.bfd_held_down_until.clone(),
        );
        registry.register(
            "podcidr_bgp_session_state",
            "RFC 4271 session state: 1 Idle, 2 Connect, 3 Active, 4 OpenSent, 5 OpenConfirm, 6 Established",
            m.session_state.clone(),
        );
        registry.register(
            "podcidr_bgp_announced_prefixes",
            "Prefixes advertised to the peer, per family",
            m.announced_prefixes.clone(),
        );
        registry.register(
            "podcidr_bgp_updates_sent",
            "UPDATE messages sent",
            m.updates_sent.clone(),
        );
        registry.register(
            "podcidr_bgp_notifications",
            "NOTIFICATION messages sent and received",
            m.notifications.clone(),
        );
        registry.register(
            "podcidr_bgp_update_errors",
            "Malformed UPDATEs from the peer handled per RFC 7606 (treat-as-withdraw, attribute discard), by error kind; logged as a summary at most every 10 s",
            m.update_errors.clone(),
        );
        registry.register(
            "podcidr_guard_refused",
            "Pod CIDRs the announce guard refused, by reason (counted when a refusal appears)",
            m.guard_refused.clone(),
        );
        registry.register(
            "podcidr_guard_refused_prefixes",
            "Pod CIDRs refused now, by reason: by the announce guard (once per CIDR) or for a session (once per CIDR and peer); 0 for every reason when nothing is refused",
            m.guard_refused_prefixes.clone(),
        );
        for reason in crate::daemon::core::refused_now::REASONS {
            m.set_refused_now(reason, 0);
        }
        registry.register(
            "podcidr_forwarding_held_prefixes",
            "Announced pod CIDRs the forwarding gate holds back now (forwardingGate), by family and reason; 0 for every series when nothing is held, the gate is off or in mode report",
            m.forwarding_held_prefixes.clone(),
        );
        registry.register(
            "podcidr_forwarding_would_hold_prefixes",
            "Announced pod CIDRs the forwarding gate would hold back (forwardingGate.mode: report: announced anyway), by family and reason; 0 for every series when enforcing or off",
            m.forwarding_would_hold_prefixes.clone(),
        );
        for (family, reason, n) in crate::daemon::core::forwarding::count(&[]) {
            m.set_held_now(family, reason, n);
            m.set_would_hold_now(family, reason, n);
        }
        registry.register(
            "podcidr_peer_no_next_hop",
            "1 while a peer carries a family that has pod CIDRs to announce and no usable next hop for it (nextHop, localAddress, the Node's InternalIPs): that family is announced to no one on the session",
            m.peer_no_next_hop.clone(),
        );
        registry.register(
            "podcidr_source_mismatch",
            "1 while the chosen source and Node.spec.podCIDRs disagree",
            m.source_mismatch.clone(),
        );
        registry.register(
            "podcidr_source_ready",
            "1 once the pod-CIDR source has synced",
            m.source_ready.clone(),
        );
        registry.register(
            "podcidr_config_reloads",
            "Config reloads by result",
            m.config_reloads.clone(),
        );
        registry.register(
            "podcidr_cni_config_writes",
            "CNI conflist writes and checks (cni.enabled) by result: written, unchanged (the file already held it), error",
            m.cni_config_writes.clone(),
        );
        registry.register(
            "podcidr_cni_config_ok",
            "1 when the last CNI conflist write succeeded (the file hands out the announced CIDRs)",
            m.cni_config_ok.clone(),
        );
        registry.register(
            "podcidr_build_info",
            "1, labelled with the version and git commit of this binary",
            m.build_info.clone(),
        );
        m.build_info
            .get_or_create(&BuildLabel {
                version: env!("CARGO_PKG_VERSION").to_owned(),
                commit: env!("PODCIDR_GIT_COMMIT").to_owned(),
            })
            .set(1);
        registry.register(
            "podcidr_bgp_peer_info",
            "1 per configured session of this node, labelled with the peer's address and AS numbers",
            m.peer_info.clone(),
        );
        registry.register(
            "podcidr_bgp_session_flaps",
            "Times the session left Established",
            m.session_flaps.clone(),
        );
        registry.register(
            "podcidr_api_write_failures",
            "Failed writes to the API by object (status, lease) and reason: the API's (Forbidden, Conflict, ...), Timeout or Unreachable",
            m.api_write_failures.clone(),
        );
        registry.register(
            "podcidr_api_writes",
            "Writes to the API by object (status: NodeBGPStatus, lease: the node's Lease), every attempt; Events: podcidr_kube_events_total",
            m.api_writes.clone(),
        );
        for object in ["status", "lease"] {
            let _ = m.api_writes.get_or_create(&ObjectLabel {
                object: object.to_owned(),
            });
        }
        registry.register(
            "podcidr_config_rejections",
            "Config reloads rejected, by reason: Invalid, KeyFile, SourceNeedsApi, NodeName",
            m.config_rejections.clone(),
        );
        registry.register(
            "podcidr_config_stale",
            "1 while an older config runs: the config file on disk was rejected, or a configuration object runs its last good version on this node",
            m.config_stale.clone(),
        );
        registry.register(
            "podcidr_node_config_objects",
            "Configuration objects selecting this node (--config-source kubernetes), by state: applied (at its current generation), last_good (an older generation runs: the current one is not usable here), not_applied",
            m.node_config_objects.clone(),
        );
        registry.register(
            "podcidr_node_config_cannot_run",
            "Configuration objects selecting this node that cannot run here and have no last good version (counted in podcidr_node_config_objects{state=\"not_applied\"} too): the node is not Ready",
            m.node_config_cannot_run.clone(),
        );
        registry.register(
            "podcidr_egress_next_hops_withdrawn",
            "egress.followSessions: next hops of the node's default route left out of its egress now (their peers are down), by family",
            m.egress_withdrawn.clone(),
        );
        registry.register(
            "podcidr_egress_route_next_hops",
            "egress.followSessions: next hops of the speaker's own /1 routes (protocol 179) by family; 0: none installed, the node's default route is used as it is",
            m.egress_route_next_hops.clone(),
        );
        registry.register(
            "podcidr_egress_write_failures",
            "egress.followSessions: failed writes of the speaker's own routes (retried at the next kernel read)",
            m.egress_write_failures.clone(),
        );
        registry.register(
            "podcidr_node_source_cidrs",
            "Pod CIDRs the source has for this node (0 while it is not synced)",
            m.node_source_cidrs.clone(),
        );
        registry.register(
            "podcidr_node_announced_cidrs",
            "Of podcidr_node_source_cidrs, how many are offered to at least one peer (whatever the session state): 0 with CIDRs in the source is a node announcing nothing",
            m.node_announced_cidrs.clone(),
        );
        registry.register(
            "podcidr_service_addresses_announced",
            "Service addresses (per BGPAdvertisement) this node announces to at least one peer",
            m.service_addresses_announced.clone(),
        );
        registry.register(
            "podcidr_service_addresses_held",
            "Service addresses a BGPAdvertisement selects that this node does not announce, by reason (noLocalEndpoint, notReady, datapathNotReady, outsideAllowList, draining, excludedNode, ipModeProxy, noPeer): `podcidr-bgp diff --services` says which",
            m.service_addresses_held.clone(),
        );
        registry.register(
            "podcidr_ready_excused_peers",
            "Peers /readyz excuses although they answer: never Established on this node (before or since this process) after --ready-peer-grace; their router rejects the session",
            m.ready_excused_peers.clone(),
        );
        registry.register(
            "podcidr_status_publish_failures",
            "NodeBGPStatus writes that failed or timed out (by reason: podcidr_api_write_failures_total)",
            m.status_publish_failures.clone(),
        );
        registry.register(
            "podcidr_status_last_published_timestamp_seconds",
            "Unix time of the last successful NodeBGPStatus write (0: none yet)",
            m.status_last_published.clone(),
        );
        registry.register(
            "podcidr_kube_events",
            "Kubernetes Events about this node by result: published (created, or a repeat counted in its series), failed, throttled (a repeat beyond the per-Event rate bound), dropped (the queue to the publisher was full)",
            m.kube_events.clone(),
        );
        for result in ["published", "failed", "throttled", "dropped"] {
            m.kube_event(result, 0);
        }
        registry.register(
            "podcidr_lease_renew_failures",
            "Renewals of the node's Lease (liveness) that failed or timed out (by reason: podcidr_api_write_failures_total)",
            m.lease_renew_failures.clone(),
        );
        registry.register(
            "podcidr_lease_last_renewed_timestamp_seconds",
            "Unix time of the last successful renewal of the node's Lease (0: none yet)",
            m.lease_last_renewed.clone(),
        );
        Metrics { registry, ..m }
    }

    pub fn encode(&self) -> String {
        for (reason, total) in bgp_io::bfd::drops::snapshot() {
            let c = self.bfd_packets_dropped.get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            });
            c.inc_by(total.saturating_sub(c.get()));
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    pub fn peer(name: &str) -> PeerLabel {
        PeerLabel {
            peer: name.to_owned(),
        }
    }

    pub fn notification(&self, direction: &str, code: u8, subcode: u8) {
        self.notifications
            .get_or_create(&NotificationLabel {
                direction: direction.to_owned(),
                code: code.to_string(),
                subcode: subcode.to_string(),
            })
            .inc();
    }

    /// Pod CIDRs refused now for `reason`.
    pub fn set_refused_now(&self, reason: &str, n: usize) {
        self.guard_refused_prefixes
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Pod CIDRs the forwarding gate holds now for `family` and `reason`.
    pub fn set_held_now(&self, family: &str, reason: &str, n: usize) {
        self.forwarding_held_prefixes
            .get_or_create(&FamilyReasonLabel {
                family: family.to_owned(),
                reason: reason.to_owned(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Pod CIDRs the forwarding gate would hold now (`mode: report`).
    pub fn set_would_hold_now(&self, family: &str, reason: &str, n: usize) {
        self.forwarding_would_hold_prefixes
            .get_or_create(&FamilyReasonLabel {
                family: family.to_owned(),
                reason: reason.to_owned(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Whether `peer` has no usable next hop for `family` now.
    pub fn set_no_next_hop(&self, peer: &str, family: &str, none: bool) {
        self.peer_no_next_hop
            .get_or_create(&PeerFamilyLabel {
                peer: peer.to_owned(),
                family: family.to_owned(),
            })
            .set(i64::from(none));
    }

    /// Counts `n` Kubernetes Events with this result.
    pub fn kube_event(&self, result: &str, n: u64) {
        self.kube_events
            .get_or_create(&ResultLabel {
                result: result.to_owned(),
            })
            .inc_by(n);
    }

    pub fn cni_write(&self, result: &str) {
        self.cni_config_writes
            .get_or_create(&ResultLabel {
                result: result.to_owned(),
            })
            .inc();
    }

    /// The info series of a (re)started session.
    pub fn set_peer_info(
        &self,
        peer: &str,
        address: &dyn std::fmt::Display,
        asn: u32,
        local_asn: u32,
    ) {
        let label = PeerInfoLabel {
            peer: peer.to_owned(),
            address: address.to_string(),
            asn: asn.to_string(),
            local_asn: local_asn.to_string(),
        };
        let mut labels = self
            .peer_info_labels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(old) = labels.insert(peer.to_owned(), label.clone()) {
            self.peer_info.remove(&old);
        }
        self.peer_info.get_or_create(&label).set(1);
        // Counters start at 0, so `increase()` sees the first flap.
        let _ = self.session_flaps.get_or_create(&Self::peer(peer));
        // The next-hop gauge exists (at 0) from the start, keeping a value already set.
        for family in ["ipv4-unicast", "ipv6-unicast"] {
            let _ = self.peer_no_next_hop.get_or_create(&PeerFamilyLabel {
                peer: peer.to_owned(),
                family: family.to_owned(),
            });
        }
    }

    /// Forgets a removed peer's series.
    pub fn remove_peer(&self, name: &str) {
        let label = Self::peer(name);
        if let Some(old) = self
            .peer_info_labels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(name)
        {
            self.peer_info.remove(&old);
        }
        self.session_up.remove(&label);
        self.session_state.remove(&label);
        self.updates_sent.remove(&label);
        self.bfd_state.remove(&label);
        self.waiting_for_bfd.remove(&label);
        self.bfd_held_down_until.remove(&label);
        // update_errors stays: its kinds are not known here, and a counter of a removed
        // peer only stops growing.
        for family in ["ipv4-unicast", "ipv6-unicast"] {
            let label = PeerFamilyLabel {
                peer: name.to_owned(),
                family: family.to_owned(),
            };
            self.announced_prefixes.remove(&label);
            self.peer_no_next_hop.remove(&label);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_match_the_contract() {
        let m = Metrics::new();
        m.session_up.get_or_create(&Metrics::peer("tor1")).set(1);
        m.session_state.get_or_create(&Metrics::peer("tor1")).set(6);
        m.announced_prefixes
            .get_or_create(&PeerFamilyLabel {
                peer: "tor1".into(),
                family: "ipv4-unicast".into(),
            })
            .set(2);
        m.updates_sent.get_or_create(&Metrics::peer("tor1")).inc();
        m.waiting_for_bfd
            .get_or_create(&Metrics::peer("tor1"))
            .set(1);
        m.notification("sent", 6, 2);
        m.update_errors
            .get_or_create(&PeerKindLabel {
                peer: "tor1".into(),
                kind: "attribute-length".into(),
            })
            .inc_by(3);
        m.guard_refused
            .get_or_create(&ReasonLabel {
                reason: "outside-allowed-prefixes".into(),
            })
            .inc();
        let text = m.encode();
        for line in [
            "podcidr_bgp_session_up{peer=\"tor1\"} 1",
            "podcidr_bgp_session_state{peer=\"tor1\"} 6",
            "podcidr_bgp_announced_prefixes{peer=\"tor1\",family=\"ipv4-unicast\"} 2",
            "podcidr_bgp_updates_sent_total{peer=\"tor1\"} 1",
            "podcidr_bgp_waiting_for_bfd{peer=\"tor1\"} 1",
            "podcidr_bgp_notifications_total{direction=\"sent\",code=\"6\",subcode=\"2\"} 1",
            "podcidr_bgp_update_errors_total{peer=\"tor1\",kind=\"attribute-length\"} 3",
            "podcidr_guard_refused_total{reason=\"outside-allowed-prefixes\"} 1",
            "podcidr_guard_refused_prefixes{reason=\"outside-allowed-prefixes\"} 0",
            "podcidr_guard_refused_prefixes{reason=\"family-not-carried\"} 0",
            "podcidr_api_writes_total{object=\"lease\"} 0",
            "podcidr_source_mismatch 0",
            "podcidr_source_ready 0",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}
