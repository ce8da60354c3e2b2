//! The core's notices as log lines and metric changes. Text that comes from a peer (an
//! RFC 9003 shutdown message, a reason built from it) is escaped, so it cannot forge lines
//! in a text log.

use bgp_proto::bfd::BfdEvent;
use bgp_proto::bfd::{BfdState, Diag};
use bgp_proto::session::SessionEvent;
use bgp_proto::session::State as SessionState;

use super::core::Notice;
use super::core::bfd_gate::GateAction;
use super::core::errors::ApiWriteError;
use super::core::gateways::Gateway;
use super::core::routes::PeerRefusal;
use super::metrics::{
    Metrics, ObjectLabel, ObjectReasonLabel, PeerFamilyLabel, PeerKindLabel, ReasonLabel,
    ResultLabel, StateLabel,
};

pub use crate::text::escape;

fn count_refusal(m: &Metrics, reason: &str) {
    m.guard_refused
        .get_or_create(&ReasonLabel {
            reason: reason.to_owned(),
        })
        .inc();
}

fn count_reload(m: &Metrics, result: &str) {
    m.config_reloads
        .get_or_create(&ResultLabel {
            result: result.to_owned(),
        })
        .inc();
}

pub fn record(m: &Metrics, notice: Notice) {
    match notice {
        Notice::RefusedNow(counts) => {
            for (reason, n) in counts {
                m.set_refused_now(reason, n);
            }
        }
        Notice::HeldNow { counts, enforced } => {
            // One gauge carries the counts, the other zeros: a mode change moves them.
            for (family, reason, n) in *counts {
                let (held, would) = if enforced { (n, 0) } else { (0, n) };
                m.set_held_now(family, reason, held);
                m.set_would_hold_now(family, reason, would);
            }
        }
        Notice::ForwardingHeld {
            cidr,
            reason,
            enforced: true,
        } => tracing::warn!(
            %cidr,
            reason = reason.as_str(),
            "forwarding gate holds a pod CIDR back: the node cannot deliver to it yet"
        ),
        Notice::ForwardingHeld {
            cidr,
            reason,
            enforced: false,
        } => tracing::warn!(
            %cidr,
            reason = reason.as_str(),
            "forwarding gate (mode report) would hold this pod CIDR back; announced anyway"
        ),
        Notice::ForwardingReleased {
            cidr,
            enforced: true,
        } => {
            tracing::info!(%cidr, "forwarding gate released a pod CIDR: the node can deliver to it, announcing");
        }
        Notice::ForwardingReleased {
            cidr,
            enforced: false,
        } => {
            tracing::info!(%cidr, "forwarding gate (mode report) would release this pod CIDR again");
        }
        Notice::ForwardingWithdrawDeferred {
            cidr,
            reason,
            hold_down,
        } => tracing::info!(
            %cidr,
            reason = reason.as_str(),
            hold_down_secs = hold_down.as_secs(),
            "forwarding gate: the pod CIDR's route is gone; it stays announced for the withdraw hold-down in case it returns"
        ),
        Notice::NoNextHop {
            peer,
            family,
            reason: Some(reason),
        } => {
            m.set_no_next_hop(&peer, family, true);
            tracing::warn!(
                %peer,
                family,
                reason = reason.as_str(),
                "no usable next hop for this family: its pod CIDRs are announced to no one on this session (set nextHop, the peer's localAddress, or give the Node an InternalIP of the family)"
            );
        }
        Notice::NoNextHop {
            peer,
            family,
            reason: None,
        } => {
            m.set_no_next_hop(&peer, family, false);
            tracing::info!(%peer, family, "this family has a usable next hop again");
        }
        Notice::GuardRefused { cidr, reason } => {
            tracing::warn!(%cidr, reason = reason.as_str(), "announce guard refused a pod CIDR");
            count_refusal(m, reason.as_str());
        }
        Notice::PeerRefused {
            peer,
            prefix,
            reason,
        } => {
            // A family without a next hop is logged once (`NoNextHop`), not per prefix.
            if !matches!(
                reason,
                PeerRefusal::NoNextHop | PeerRefusal::NeedsExtendedNextHop
            ) {
                tracing::warn!(%peer, %prefix, reason = reason.as_str(), "not announced to this peer");
            }
            count_refusal(m, reason.as_str());
        }
        Notice::Mismatch(Some(text)) => {
            m.source_mismatch.set(1);
            tracing::warn!(mismatch = %text, "the chosen source and Node.spec.podCIDRs disagree; announcing the chosen source");
        }
        Notice::Mismatch(None) => {
            m.source_mismatch.set(0);
            tracing::info!("source and Node.spec.podCIDRs agree again");
        }
        Notice::LocalAsn(Ok(r)) => {
            tracing::info!(asn = r.asn.0, source = %r.origin, "local AS of this node");
            if let Some(w) = r.warning() {
                tracing::warn!(asn = r.asn.0, "{w}");
            }
        }
        Notice::LocalAsn(Err(e)) => tracing::error!(
            reason = e.reason,
            error = %escape(&e.message),
            "the node's local AS cannot be resolved; no BGP session runs"
        ),
        Notice::PeerUnresolved(p) => tracing::warn!("{p}"),
        Notice::Egress(d) => egress_decided(m, &d),
        Notice::DefaultRoutesChanged(routes) => tracing::info!(
            ipv4 = %show_gateways(&routes.ipv4),
            ipv6 = %show_gateways(&routes.ipv6),
            "default routes changed"
        ),
        Notice::BfdUnavailable { peer, error } => tracing::error!(
            peer,
            error = %escape(&error),
            "BFD not started; failures are detected by the hold timer only"
        ),
        Notice::BfdStateChanged {
            peer,
            from,
            to,
            diag,
            gate,
        } => bfd_state_changed(m, &peer, (from, to, diag, gate)),
        Notice::BfdHeldDown {
            peer,
            hold,
            flaps,
            until_unix,
        } => {
            m.bfd_held_down_until
                .get_or_create(&Metrics::peer(&peer))
                .set(i64::try_from(until_unix).unwrap_or(i64::MAX));
            tracing::warn!(
                peer,
                hold_secs = hold.as_secs(),
                flaps,
                until = %crate::text::rfc3339(until_unix),
                "BFD flapping: BGP session held down before it reconnects (RFC 5882 §3.1); the hold-down doubles with each flap, at most 120 s, and decays after 5 minutes without one"
            );
        }
        Notice::StatusWritten { unix, result } => {
            write_finished(m, WriteKind::Status, unix, result);
        }
        Notice::LeaseRenewed { unix, result } => write_finished(m, WriteKind::Lease, unix, result),
        Notice::NoRouterId => tracing::error!(
            "routerId: not set and no IPv4 address found (set routerId in the config)"
        ),
        Notice::PeerHeld { peer, at_most } => tracing::info!(
            %peer,
            at_most_secs = at_most.as_secs(),
            "graceful restart: session opens once the source is ready, so the peer keeps \
             our stale routes until we can refresh them"
        ),
        Notice::PeerAsLearned {
            peer,
            address,
            asn,
            local_asn,
        } => {
            tracing::info!(%peer, %address, asn, "peer AS learned from its OPEN (asn: auto)");
            m.set_peer_info(&peer, &address, asn, local_asn);
        }
        Notice::PeerStarted {
            peer,
            address,
            asn,
            local_asn,
        } => {
            tracing::info!(%peer, "session started");
            m.set_peer_info(&peer, &address, asn, local_asn);
        }
        Notice::PeerStopped { peer, why } => {
            tracing::info!(%peer, why, "session stopped");
            m.remove_peer(&peer);
        }
        Notice::ReloadApplied {
            why,
            added,
            removed,
            reset,
            updated,
        } => {
            tracing::info!(
                reason = why,
                added,
                removed,
                reset,
                updated,
                "config reloaded"
            );
            count_reload(m, "applied");
            m.config_stale.set(0);
        }
        Notice::ReloadRejected { why, error } => {
            tracing::error!(reason = why, kind = error.reason(), errors = %error, "config reload rejected; keeping the running config");
            count_reload(m, "rejected");
            m.config_rejections
                .get_or_create(&ReasonLabel {
                    reason: error.reason().to_owned(),
                })
                .inc();
            // The file on disk is not what runs until a reload succeeds.
            m.config_stale.set(1);
        }
        Notice::ConfigObjects {
            applied,
            last_good,
            not_applied,
            cannot_run,
            new,
        } => {
            for line in &new {
                tracing::warn!("{line}");
            }
            tracing::info!(
                applied,
                last_good,
                not_applied,
                cannot_run,
                "configuration objects for this node"
            );
            m.node_config_cannot_run
                .set(i64::try_from(cannot_run).unwrap_or(i64::MAX));
            for (state, n) in [
                ("applied", applied),
                ("last_good", last_good),
                ("not_applied", not_applied),
            ] {
                m.node_config_objects
                    .get_or_create(&StateLabel {
                        state: state.to_owned(),
                    })
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            m.config_stale.set(i64::from(last_good > 0));
        }
        Notice::ExcusedPeers(peers) => {
            if !peers.is_empty() {
                tracing::warn!(
                    ?peers,
                    "excused from the rollout gate: they answer but were never Established on this node (their router rejects the session)"
                );
            }
            m.ready_excused_peers
                .set(i64::try_from(peers.len()).unwrap_or(i64::MAX));
        }
        Notice::ServiceRoutes {
            announced,
            held,
            held_by_reason,
        } => {
            tracing::info!(announced, held, ?held_by_reason, "service addresses");
            m.service_addresses_announced
                .set(i64::try_from(announced).unwrap_or(i64::MAX));
            // Every reason, so a reason that clears reads 0 rather than its last value.
            for reason in podcidr_services::Reason::CODES {
                let n = held_by_reason.get(reason).copied().unwrap_or(0);
                m.service_addresses_held
                    .get_or_create(&ReasonLabel {
                        reason: reason.to_owned(),
                    })
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        Notice::AdvertisementRefused { name, problems } => {
            tracing::warn!(advertisement = %name, %problems, "BGPAdvertisement not applied: it cannot be read");
        }
        Notice::Coverage(c) => {
            if c.source > 0 && c.announced == 0 {
                tracing::warn!(
                    source_cidrs = c.source,
                    "the source has pod CIDRs for this node and none is offered to any peer"
                );
            }
            m.node_source_cidrs
                .set(i64::try_from(c.source).unwrap_or(i64::MAX));
            m.node_announced_cidrs
                .set(i64::try_from(c.announced).unwrap_or(i64::MAX));
        }
        Notice::NeedsRestart(key) => {
            tracing::warn!(key, "this setting takes effect after a restart");
        }
        Notice::Departure(Some(why)) => {
            tracing::info!(%why, "the node is leaving: a stop now is a departure (RFC 8326 graceful shutdown, then Cease)");
        }
        Notice::Departure(None) => {
            tracing::info!("the node is staying: a stop now is a restart (graceful restart)");
        }
        Notice::Stopping(Some(why)) => {
            tracing::info!(%why, "stopping sessions: departure (RFC 8326 graceful shutdown, then Cease)");
        }
        Notice::Stopping(None) => {
            tracing::info!(
                "stopping sessions: restart (graceful restart close, routers keep the routes)"
            );
        }
        Notice::SessionMetrics(statuses) => {
            for (peer, s) in statuses {
                let label = Metrics::peer(&peer);
                m.session_up
                    .get_or_create(&label)
                    .set(i64::from(s.state == SessionState::Established));
                m.session_state
                    .get_or_create(&label)
                    .set(i64::from(s.state.as_number()));
                m.waiting_for_bfd
                    .get_or_create(&label)
                    .set(i64::from(s.waiting_for_bfd_since.is_some()));
                for (family, n) in &s.advertised {
                    m.announced_prefixes
                        .get_or_create(&PeerFamilyLabel {
                            peer: peer.clone(),
                            family: family.clone(),
                        })
                        .set(i64::try_from(*n).unwrap_or(i64::MAX));
                }
            }
        }
        Notice::Session(peer, ev) => session_event(m, &peer, ev),
        Notice::CniWritten { path, changed } => {
            if changed {
                tracing::info!(path = %path.display(), "CNI config written");
            }
            m.cni_config_ok.set(1);
            m.cni_write(if changed { "written" } else { "unchanged" });
        }
        Notice::CniFailed { path, error } => {
            tracing::error!(path = %path.display(), error = %error, "CNI config not written; announcing goes on");
            m.cni_config_ok.set(0);
            m.cni_write("error");
        }
    }
}

fn session_event(m: &Metrics, peer: &str, ev: SessionEvent) {
    match ev {
        SessionEvent::StateChanged { from, to, reason } => {
            if from == SessionState::Established {
                m.session_flaps.get_or_create(&Metrics::peer(peer)).inc();
            }
            match &reason {
                Some(r) if from == SessionState::Established || to == SessionState::Idle => {
                    tracing::warn!(peer, from = from.as_str(), to = to.as_str(), reason = %escape(&r.to_string()), "session state")
                }
                _ => tracing::info!(
                    peer,
                    from = from.as_str(),
                    to = to.as_str(),
                    "session state"
                ),
            }
        }
        SessionEvent::NotificationSent(n) => {
            tracing::warn!(peer, notification = %n.name(), "NOTIFICATION sent");
            m.notification("sent", n.code.into(), n.subcode);
        }
        SessionEvent::NotificationReceived(n) => {
            let text = escape(&n.shutdown_message().unwrap_or_default());
            tracing::warn!(peer, notification = %n.name(), message = %text, "NOTIFICATION received");
            m.notification("received", n.code.into(), n.subcode);
        }
        SessionEvent::UpdatesSent { messages } => {
            m.updates_sent
                .get_or_create(&Metrics::peer(peer))
                .inc_by(messages as u64);
        }
        SessionEvent::UpdateErrors { counts, example } => {
            for (kind, n) in &counts {
                m.update_errors
                    .get_or_create(&PeerKindLabel {
                        peer: peer.to_owned(),
                        kind: (*kind).to_owned(),
                    })
                    .inc_by(*n);
            }
            tracing::warn!(
                peer,
                ?counts,
                example = %escape(&example),
                "malformed UPDATEs from the peer handled per RFC 7606 (summary)"
            );
        }
        SessionEvent::Bfd(ev) => bfd_event(peer, ev),
        SessionEvent::WaitingForBfd(waiting) => {
            m.waiting_for_bfd
                .get_or_create(&Metrics::peer(peer))
                .set(i64::from(waiting));
            if waiting {
                tracing::warn!(
                    peer,
                    "held waiting for BFD: strict mode negotiated (capability 74 both ways); the KEEPALIVE waits for BFD Up, at most the hold time"
                );
            } else {
                tracing::info!(peer, "no longer waiting for BFD");
            }
        }
        SessionEvent::BfdStrict { negotiated: true } => {
            tracing::info!(peer, "BFD strict mode negotiated: BGP waits for BFD Up");
        }
        SessionEvent::BfdStrict { negotiated: false } => tracing::warn!(
            peer,
            "BFD strict mode configured but the peer's OPEN does not carry it (capability 74): running non-strict, BGP does not wait for BFD"
        ),
        SessionEvent::Refused(refused) => {
            for (prefix, reason) in refused {
                tracing::warn!(peer, %prefix, reason = reason.as_str(), "not sent on this session");
            }
        }
    }
}

fn egress_decided(m: &Metrics, d: &crate::daemon::core::egress::EgressDecision) {
    use crate::daemon::metrics::FamilyLabel;
    let show = |hops: &[crate::daemon::core::egress::NextHop]| {
        if hops.is_empty() {
            return "none (the default route as it is)".to_owned();
        }
        hops.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (family, route, v6) in [
        ("ipv4", &d.routes.ipv4, false),
        ("ipv6", &d.routes.ipv6, true),
    ] {
        let label = FamilyLabel {
            family: family.into(),
        };
        let withdrawn = d.withdrawn.iter().filter(|h| h.via.is_ipv6() == v6).count();
        m.egress_withdrawn
            .get_or_create(&label)
            .set(i64::try_from(withdrawn).unwrap_or(i64::MAX));
        m.egress_route_next_hops
            .get_or_create(&label)
            .set(i64::try_from(route.len()).unwrap_or(i64::MAX));
    }
    if d.withdrawn.is_empty() {
        tracing::info!("egress: every next hop of the node's default route is used");
    } else {
        tracing::warn!(
            withdrawn = %show(&d.withdrawn),
            ipv4 = %show(&d.routes.ipv4),
            ipv6 = %show(&d.routes.ipv6),
            "egress: next hops whose peers are down are left out of the node's egress"
        );
    }
}

fn show_gateways(gws: &[Gateway]) -> String {
    if gws.is_empty() {
        return "none".into();
    }
    gws.iter()
        .map(|g| format!("via {} dev {} metric {}", g.via, g.dev, g.metric))
        .collect::<Vec<_>>()
        .join(", ")
}

fn bfd_event(peer: &str, ev: BfdEvent) {
    match ev {
        // State changes come through the core, with the gate's decision.
        BfdEvent::StateChanged { .. } => {}
        BfdEvent::Dropped { kind, detail } => {
            tracing::debug!(peer, kind, detail = %escape(&detail), "BFD packet dropped");
        }
        BfdEvent::SendFailed(e) => tracing::debug!(peer, error = %e, "BFD send failed"),
        BfdEvent::PeerReplaced { old, new } => tracing::info!(
            peer,
            old = format_args!("{old:#010x}"),
            new = format_args!("{new:#010x}"),
            "the peer replaced its BFD session (a new discriminator, Up at once): not a path failure, BGP stays up"
        ),
        // Decided in the core (Notice::BfdUnavailable).
        BfdEvent::StartFailed(_) => {}
    }
}

fn bfd_state_changed(
    m: &Metrics,
    peer: &str,
    (from, to, diag, gate): (BfdState, BfdState, Diag, Option<GateAction>),
) {
    let label = Metrics::peer(peer);
    m.bfd_state.get_or_create(&label).set(to as i64);
    match gate {
        Some(GateAction::Failed(_)) => {
            m.bfd_session_down.get_or_create(&label).inc();
            tracing::warn!(
                peer,
                diag = diag.as_str(),
                "BFD session down: BGP session torn down (Cease/BFD Down); BGP reconnects, BFD keeps trying"
            );
        }
        Some(GateAction::Up) if from == BfdState::Up && to == BfdState::Down => tracing::warn!(
            peer,
            diag = diag.as_str(),
            "BFD session down: the peer signalled AdminDown; the BGP session is kept"
        ),
        _ => tracing::info!(
            peer,
            from = from.as_str(),
            to = to.as_str(),
            "BFD session state"
        ),
    }
}

fn write_finished(m: &Metrics, what: WriteKind, unix: u64, result: Result<(), ApiWriteError>) {
    let at = i64::try_from(unix).unwrap_or(i64::MAX);
    let object = match what {
        WriteKind::Status => "status",
        WriteKind::Lease => "lease",
    };
    m.api_writes
        .get_or_create(&ObjectLabel {
            object: object.to_owned(),
        })
        .inc();
    match (what, result) {
        (WriteKind::Status, Ok(())) => {
            m.status_last_published.set(at);
        }
        (WriteKind::Lease, Ok(())) => {
            m.lease_last_renewed.set(at);
        }
        (what, Err(e)) => {
            let (counter, text) = match what {
                WriteKind::Status => (
                    &m.status_publish_failures,
                    "publishing NodeBGPStatus failed; will retry",
                ),
                WriteKind::Lease => (
                    &m.lease_renew_failures,
                    "renewing the Lease failed; will retry",
                ),
            };
            counter.inc();
            m.api_write_failures
                .get_or_create(&ObjectReasonLabel {
                    object: object.to_owned(),
                    reason: e.reason().to_owned(),
                })
                .inc();
            tracing::warn!(error = %e, reason = e.reason(), "{text}");
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum WriteKind {
    Status,
    Lease,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_shutdown_text_cannot_inject_log_lines() {
        let e = escape("bye\nlevel=error msg=\"forged\"\r\x1b[31m");
        assert!(!e.contains('\n') && !e.contains('\r') && !e.contains('\x1b'));
        assert!(e.contains("\\n"));
        assert_eq!(escape("maintenance"), "maintenance");
    }

    #[test]
    fn update_error_summaries_are_counted_per_peer_and_kind_rfc7606() {
        let m = Metrics::new();
        for _ in 0..2 {
            let counts = [("attribute-length", 4000), ("bad-nlri", 1)]
                .into_iter()
                .collect();
            let ev = SessionEvent::UpdateErrors {
                counts,
                example: "bad\nline".into(),
            };
            record(&m, Notice::Session("tor1".into(), ev));
        }
        let text = m.encode();
        for line in [
            "podcidr_bgp_update_errors_total{peer=\"tor1\",kind=\"attribute-length\"} 8000",
            "podcidr_bgp_update_errors_total{peer=\"tor1\",kind=\"bad-nlri\"} 2",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    #[test]
    fn report_mode_counts_go_to_the_would_hold_gauge_and_a_family_without_next_hop_to_its_own() {
        let m = Metrics::new();
        let mut counts = crate::daemon::core::forwarding::count(&[]);
        counts[1].2 = 2; // ipv4, no-route
        let held = |enforced| Notice::HeldNow {
            counts: Box::new(counts),
            enforced,
        };
        record(&m, held(false));
        let text = m.encode();
        let series = |name: &str| format!("{name}{{family=\"ipv4\",reason=\"no-route\"}}");
        assert!(
            text.contains(&format!(
                "{} 2\n",
                series("podcidr_forwarding_would_hold_prefixes")
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "{} 0\n",
                series("podcidr_forwarding_held_prefixes")
            )),
            "{text}"
        );
        record(&m, held(true));
        let text = m.encode();
        assert!(text.contains(&format!(
            "{} 0\n",
            series("podcidr_forwarding_would_hold_prefixes")
        )));
        assert!(text.contains(&format!(
            "{} 2\n",
            series("podcidr_forwarding_held_prefixes")
        )));

        let nh = |reason| Notice::NoNextHop {
            peer: "tor1".into(),
            family: "ipv6-unicast",
            reason,
        };
        record(
            &m,
            nh(Some(crate::daemon::core::routes::PeerRefusal::NoNextHop)),
        );
        let line = "podcidr_peer_no_next_hop{peer=\"tor1\",family=\"ipv6-unicast\"}";
        assert!(m.encode().contains(&format!("{line} 1\n")));
        m.set_peer_info("tor1", &"192.0.2.1", 65000, 65010);
        assert!(
            m.encode().contains(&format!("{line} 1\n")),
            "a restart keeps it"
        );
        record(&m, nh(None));
        assert!(m.encode().contains(&format!("{line} 0\n")));
        m.remove_peer("tor1");
        assert!(!m.encode().contains("podcidr_peer_no_next_hop{"));
    }

    #[test]
    fn refused_now_sets_every_reason_and_writes_count_every_attempt() {
        let m = Metrics::new();
        let mut counts = crate::daemon::core::refused_now::count([], []);
        counts[0].1 = 3;
        record(&m, Notice::RefusedNow(counts));
        let text = m.encode();
        assert!(
            text.contains(
                "podcidr_guard_refused_prefixes{reason=\"outside-allowed-prefixes\"} 3\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("podcidr_guard_refused_prefixes{reason=\"conflict\"} 0\n"),
            "{text}"
        );
        record(
            &m,
            Notice::RefusedNow(crate::daemon::core::refused_now::count([], [])),
        );
        assert!(
            m.encode().contains(
                "podcidr_guard_refused_prefixes{reason=\"outside-allowed-prefixes\"} 0\n"
            )
        );

        record(
            &m,
            Notice::LeaseRenewed {
                unix: 10,
                result: Ok(()),
            },
        );
        record(
            &m,
            Notice::LeaseRenewed {
                unix: 20,
                result: Err(ApiWriteError::Timeout(std::time::Duration::from_secs(5))),
            },
        );
        let text = m.encode();
        assert!(
            text.contains("podcidr_api_writes_total{object=\"lease\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("podcidr_api_writes_total{object=\"status\"} 0\n"),
            "{text}"
        );
    }

    #[test]
    fn config_stale_follows_the_last_reload_and_flaps_count_drops_from_established() {
        let m = Metrics::new();
        let line = |m: &Metrics, l: &str| m.encode().lines().any(|x| x == l);
        record(
            &m,
            Notice::ReloadRejected {
                why: "test",
                error: crate::daemon::core::errors::Shared::new(
                    crate::daemon::core::errors::ConfigError::SourceNeedsApi(
                        podcidr_config::SourceNeedsApi("node-spec"),
                    ),
                ),
            },
        );
        assert!(line(&m, "podcidr_config_stale 1"));
        record(
            &m,
            Notice::ReloadApplied {
                why: "test",
                added: 0,
                removed: 0,
                reset: 0,
                updated: 0,
            },
        );
        assert!(line(&m, "podcidr_config_stale 0"));

        record(
            &m,
            Notice::PeerStarted {
                peer: "tor1".into(),
                address: podcidr_config::PeerAddress::Fixed("192.0.2.1".parse().unwrap()),
                asn: 65000,
                local_asn: 65001,
            },
        );
        assert!(
            line(&m, "podcidr_bgp_session_flaps_total{peer=\"tor1\"} 0"),
            "starts at 0"
        );
        for (from, to) in [
            (SessionState::Idle, SessionState::Connect),
            (SessionState::OpenConfirm, SessionState::Established),
            (SessionState::Established, SessionState::Idle),
        ] {
            let ev = SessionEvent::StateChanged {
                from,
                to,
                reason: None,
            };
            record(&m, Notice::Session("tor1".into(), ev));
        }
        assert!(
            line(&m, "podcidr_bgp_session_flaps_total{peer=\"tor1\"} 1"),
            "{}",
            m.encode()
        );
    }
}
