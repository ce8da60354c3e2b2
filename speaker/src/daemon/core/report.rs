//! The speaker's report: one JSON shape for the `NodeBGPStatus` object, `/debug/peers` and
//! `/debug/routes`, so `diff`, `peers` and `routes` read the same thing from either place.

use std::collections::BTreeMap;
use std::sync::Arc;

use bgp_proto::message::attribute::{format_community, format_large_community};
use bgp_proto::session::{NotificationRecord, SessionStatus, State};
use bgp_proto::{Asn, Family};
use ipam_watch::source::DesiredSet;
use podcidr_api::{
    ConfigReport, HeldCidr, MAX_REPORTED_ROUTES, NotificationReport, ObjectGeneration,
    ObjectNotApplied, PeerReport, RefusedCidr, RouteReport, SpeakerReport,
};

use super::ConfigOrigin;
use crate::objects::{NodeConfig, ObjectKind, ObjectRef};
use ipnet::IpNet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use podcidr_config::PeerConfig;

use super::cni::CniCondition;
use super::errors::{ApiWriteError, ConfigError, Shared};
use super::gateways::Unresolved;
use super::guard::Guarded;
use super::routes::PeerRefusal;

/// Unix seconds as a timestamp (the epoch for what does not fit).
pub fn timestamp(unix: u64) -> Timestamp {
    Timestamp::from_second(i64::try_from(unix).unwrap_or(0)).unwrap_or_default()
}

pub use crate::text::rfc3339;

fn notification(r: &NotificationRecord) -> NotificationReport {
    NotificationReport {
        code: r.code,
        subcode: r.subcode,
        name: r.name.clone(),
        message: r.message.clone(),
        at: rfc3339(r.at),
    }
}

/// One peer as the report shows it, owned. Its routes are the session's Adj-RIB-Out
/// (`status.adj_rib_out`, shared with the session): what the peer was sent, not what the
/// speaker meant to send.
#[derive(Debug, Clone)]
pub struct PeerInput {
    pub config: PeerConfig,
    pub status: SessionStatus,
    pub refused: Arc<[(IpNet, PeerRefusal)]>,
}

pub fn peer_report(local_asn: Asn, v: &PeerInput) -> PeerReport {
    let s = &v.status;
    let neg = s.negotiated.as_ref();
    let families: Vec<Family> = neg.map(|n| n.families.clone()).unwrap_or_default();
    // `asn: auto`: the session type is what the OPEN made it.
    let ibgp = neg.map_or(v.config.is_ibgp(), |n| n.ibgp);
    // Only the first MAX_REPORTED_ROUTES are rendered: the object must stay small.
    let rib = &s.adj_rib_out.0;
    let advertised = rib.len();
    let routes: Vec<RouteReport> = rib
        .advertised()
        .take(MAX_REPORTED_ROUTES)
        .map(|(p, a)| RouteReport {
            prefix: p.to_string(),
            next_hop: a.next_hop.to_string(),
            as_path: if ibgp {
                Vec::new()
            } else {
                vec![local_asn.0; 1 + usize::from(a.as_path_prepend)]
            },
            med: a.med,
            local_pref: if ibgp {
                Some(a.local_pref.unwrap_or(100))
            } else {
                None
            },
            communities: a.communities.iter().map(|c| format_community(*c)).collect(),
            large_communities: a
                .large_communities
                .iter()
                .map(format_large_community)
                .collect(),
        })
        .collect();
    let routes_omitted = (advertised - routes.len()) as u64;
    PeerReport {
        name: v.config.name.clone(),
        bgp_peer: None,
        address: v.config.address.to_string(),
        // `asn: auto`: the AS learned from the OPEN; 0 until then.
        asn: neg
            .map(|n| n.peer_asn.0)
            .or(v.config.asn.fixed().map(|a| a.0))
            .unwrap_or(0),
        state: s.state.as_str().to_owned(),
        since: rfc3339(s.since),
        hold_time: neg.map(|n| n.hold_time.seconds()),
        keepalive_time: neg.map(|n| u16::try_from(n.keepalive.as_secs()).unwrap_or(u16::MAX)),
        families: families.iter().map(|f| f.name()).collect(),
        no_next_hop: super::offer::no_next_hop(&v.refused)
            .into_keys()
            .map(str::to_owned)
            .collect(),
        capabilities: neg
            .map(|n| {
                n.peer_capabilities
                    .iter()
                    .map(|c| (*c).to_owned())
                    .collect()
            })
            .unwrap_or_default(),
        prefixes_sent: s
            .advertised
            .iter()
            .map(|(k, v)| (k.clone(), *v as u64))
            .collect::<BTreeMap<_, _>>(),
        routes,
        routes_omitted,
        messages_sent: s.sent.messages.values().sum(),
        messages_received: s.received.messages.values().sum(),
        flaps: s.flaps,
        last_error: s.last_error.clone(),
        last_notification_sent: s.last_notification_sent.as_ref().map(notification),
        last_notification_received: s.last_notification_received.as_ref().map(notification),
        bfd_strict: bfd_strict(&v.config, s),
        waiting_for_bfd_since: s.waiting_for_bfd_since.map(rfc3339),
    }
}

/// `bfdStrict`: what the peer's last OPEN made of a configured strict mode.
fn bfd_strict(config: &PeerConfig, s: &SessionStatus) -> Option<String> {
    if !config.bfd.as_ref().is_some_and(|b| b.strict) {
        return None;
    }
    let shown = match s.peer_bfd_strict {
        Some(true) => "negotiated",
        Some(false) => "peerNotStrict",
        None => "configured",
    };
    Some(shown.to_owned())
}

pub(super) fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
    now: u64,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if ok { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time: unix_time(now),
        observed_generation: None,
    }
}

/// The whole report. `updated_at` is left empty: the publisher stamps it.
pub fn report(
    source: &str,
    local_asn: Asn,
    desired: &DesiredSet,
    guarded: Option<&Guarded>,
    peers: &[PeerInput],
    now: u64,
) -> SpeakerReport {
    let guard_refused = guarded.map(|g| &g.refused[..]).unwrap_or_default();
    let total = guard_refused.len() + peers.iter().map(|p| p.refused.len()).sum::<usize>();
    // Only the first MAX_REPORTED_ROUTES are listed, like routes: a source full of bad
    // values must not make the object too large to write.
    let refused: Vec<RefusedCidr> = guard_refused
        .iter()
        .map(|r| RefusedCidr {
            cidr: r.value.clone(),
            reason: r.reason.as_str().to_owned(),
            peer: None,
        })
        .chain(peers.iter().flat_map(|p| {
            p.refused.iter().map(|(cidr, reason)| RefusedCidr {
                cidr: cidr.to_string(),
                reason: reason.as_str().to_owned(),
                peer: Some(p.config.name.clone()),
            })
        }))
        .take(MAX_REPORTED_ROUTES)
        .collect();
    let refused_omitted = (total - refused.len()) as u64;
    let mut conditions = vec![condition(
        "Ready",
        desired.ready,
        if desired.ready {
            "SourceSynced"
        } else {
            "SourceNotSynced"
        },
        desired
            .last_error
            .as_ref()
            .map(|e| e.message.clone())
            .unwrap_or_default(),
        now,
    )];
    conditions.push(established(peers, now));
    conditions.push(match &desired.mismatch {
        Some(m) => condition(
            "SourceMismatch",
            true,
            "NodeSpecDiffers",
            format!(
                "{source} says {}, Node.spec.podCIDRs says {}; announcing {source}",
                join(&m.chosen),
                join(&m.node_spec)
            ),
            now,
        ),
        None => condition("SourceMismatch", false, "Agree", String::new(), now),
    });
    conditions.push(condition(
        "Refused",
        !refused.is_empty(),
        if refused.is_empty() {
            "NothingRefused"
        } else {
            "CidrsRefused"
        },
        refused_message(&refused, refused_omitted),
        now,
    ));
    SpeakerReport {
        source: source.to_owned(),
        source_ready: desired.ready,
        allocated: desired.cidrs.iter().map(ToString::to_string).collect(),
        announced: guarded
            .map(|g| g.announce.iter().map(ToString::to_string).collect())
            .unwrap_or_default(),
        held: Vec::new(),
        would_hold: Vec::new(),
        refused,
        refused_omitted,
        node_spec_pod_cidrs: desired
            .mismatch
            .as_ref()
            .map(|m| m.node_spec.iter().map(ToString::to_string).collect())
            .unwrap_or_default(),
        peers: peers.iter().map(|p| peer_report(local_asn, p)).collect(),
        conditions,
        observed_generation: None,
        updated_at: String::new(),
        speaker_version: env!("CARGO_PKG_VERSION").to_owned(),
        local_asn: None,
        local_asn_source: String::new(),
        config: None,
        services: None,
    }
}

/// `Established`: every session of this node is up, so `kubectl wait
/// --for=condition=Established nodebgpstatus/<node>` waits for the node's routes to be out.
fn established(peers: &[PeerInput], now: u64) -> Condition {
    let down: Vec<String> = peers
        .iter()
        .filter(|p| p.status.state != State::Established)
        .map(|p| match &p.status.last_error {
            Some(e) => format!("{} {} ({e})", p.config.name, p.status.state.as_str()),
            None => format!("{} {}", p.config.name, p.status.state.as_str()),
        })
        .collect();
    if peers.is_empty() {
        return condition(
            "Established",
            false,
            "NoPeers",
            "no peer applies to this node".into(),
            now,
        );
    }
    if down.is_empty() {
        return condition("Established", true, "AllEstablished", String::new(), now);
    }
    let mut message = down
        .iter()
        .take(CONDITION_LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if down.len() > CONDITION_LISTED {
        message.push_str(&format!(" and {} more", down.len() - CONDITION_LISTED));
    }
    condition("Established", false, "NotEstablished", message, now)
}

/// When each condition type last changed status: `(status, unix seconds)`.
pub type Transitions = BTreeMap<String, (String, u64)>;

/// Gives every condition whose status is the one recorded its recorded transition time, and
/// records the others as changed `now` (Kubernetes API conventions: `lastTransitionTime` is
/// when the status last changed, not when the report was written).
pub fn stamp_transitions(conditions: &mut [Condition], transitions: &mut Transitions, now: u64) {
    for c in conditions {
        match transitions.get(&c.type_) {
            Some((status, since)) if *status == c.status => {
                c.last_transition_time = unix_time(*since);
            }
            _ => {
                c.last_transition_time = unix_time(now);
                transitions.insert(c.type_.clone(), (c.status.clone(), now));
            }
        }
    }
}

fn unix_time(secs: u64) -> Time {
    Time(timestamp(secs))
}

/// Conditions are read by people: the first few refusals and a count.
pub(super) const CONDITION_LISTED: usize = 10;

fn refused_message(refused: &[RefusedCidr], omitted: u64) -> String {
    let mut text = refused
        .iter()
        .take(CONDITION_LISTED)
        .map(|r| format!("{} ({})", r.cidr, r.reason))
        .collect::<Vec<_>>()
        .join(", ");
    let more = (refused.len().saturating_sub(CONDITION_LISTED)) as u64 + omitted;
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

fn join(v: &[IpNet]) -> String {
    if v.is_empty() {
        return "nothing".to_owned();
    }
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A fingerprint of what the report says, leaving out what moves while nothing happens: the
/// times (`updatedAt`, condition transition times), the message counters (every keepalive
/// moves them: a 10 s keepalive would mean a write every 10 s) and which retry state a down
/// session is in (Idle/Connect/Active, `since` and the `Established` condition's message
/// change with every reconnect attempt). A down session stays "down", with its last error.
/// The publisher keeps this rather than the last report, which at 100,000 prefixes is
/// megabytes.
pub fn content_fingerprint(r: &SpeakerReport) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut r = r.clone();
    r.updated_at.clear();
    for c in &mut r.conditions {
        c.last_transition_time = Time(Timestamp::UNIX_EPOCH);
        if c.type_ == "Established" {
            c.message.clear();
        }
    }
    for p in &mut r.peers {
        p.messages_sent = 0;
        p.messages_received = 0;
        if p.state != State::Established.as_str() {
            p.state = "down".to_owned();
            p.since.clear();
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(&r).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// What a report is rendered from, cheap to clone (the large parts are shared). The main
/// loop hands a copy to the admin endpoint each tick and the report is rendered only when
/// someone reads it or it is published: a 100,000-prefix node does not format 200,000
/// strings a second into memory nobody reads.
#[derive(Debug, Clone)]
pub struct ReportInputs {
    pub source: &'static str,
    pub local_asn: Asn,
    /// `local_asn` is the node's (not a stand-in while it is unresolved).
    pub local_asn_resolved: bool,
    /// Where the node's AS came from (`AsnOrigin`'s text).
    pub local_asn_source: String,
    /// Why the node's AS cannot be resolved.
    pub asn_error: Option<podcidr_config::NodeAsnError>,
    pub desired: Arc<DesiredSet>,
    pub guarded: Option<Arc<Guarded>>,
    /// What the forwarding gate holds (`None`: the gate is off), and whether it enforces
    /// (`false`: `mode: report`, it would hold them and announces them anyway).
    pub held: Option<(Arc<Vec<super::forwarding::Held>>, bool)>,
    pub peers: Vec<PeerInput>,
    /// `CNIConfigured`, when `cni` is enabled.
    pub cni: Option<CniCondition>,
    /// When each condition last changed status (kept by the core across reports).
    pub transitions: Arc<Transitions>,
    /// `PeersResolved`, when a peer is resolved by the kernel (`default-gateway`, an
    /// interface without `peerAddress`).
    pub unresolved: Option<Vec<Unresolved>>,
    /// `ConfigValid`: why the last reload was rejected.
    pub config_rejected: Option<Shared<ConfigError>>,
    /// `LeaseRenewed`, when the speaker renews a Lease: why the last renewal failed.
    pub lease: Option<Option<ApiWriteError>>,
    /// Where the config comes from: `ConfigValid` for a file, `ConfigApplied` and
    /// `status.config` for configuration objects.
    pub origin: ConfigOrigin,
    /// Service routes, when some advertisement selects the node.
    pub services: Option<podcidr_api::ServiceRoutesReport>,
}

/// `status.config`, the `ConfigApplied` condition and each session's `bgpPeer`; a node that
/// no `BGPSpeakerConfig` selects is `Ready` (it does what it is configured to: nothing).
fn objects_report(r: &mut SpeakerReport, objects: Option<&NodeConfig>, now: u64) {
    let Some(c) = objects else {
        r.conditions.push(condition(
            "ConfigApplied",
            false,
            "Waiting",
            "the configuration objects are not listed yet".into(),
            now,
        ));
        return;
    };
    for p in &mut r.peers {
        p.bgp_peer = Some(p.name.clone());
    }
    let last_good = |o: &ObjectRef| {
        c.last_good
            .iter()
            .find(|(l, _)| l.kind == o.kind && l.name == o.name)
            .map(|(_, why)| why.clone())
    };
    let generation = |o: &ObjectRef| ObjectGeneration {
        name: o.name.clone(),
        generation: o.generation,
        last_good: last_good(o),
    };
    r.config = Some(ConfigReport {
        speaker_config: c.speaker_config.as_ref().map(generation),
        peers: c.peers.iter().map(generation).collect(),
        not_applied: c
            .not_applied
            .iter()
            .map(|(kind, name, reason)| ObjectNotApplied {
                kind: kind.as_str().to_owned(),
                name: name.clone(),
                reason: reason.clone(),
            })
            .collect(),
    });
    let listed = |items: Vec<String>| {
        let n = items.len();
        let mut m = items
            .into_iter()
            .take(CONDITION_LISTED)
            .collect::<Vec<_>>()
            .join("; ");
        if n > CONDITION_LISTED {
            m.push_str(&format!("; and {} more", n - CONDITION_LISTED));
        }
        m
    };
    let (ok, reason, message) = if c.config.is_none() {
        let mut m = "no usable BGPSpeakerConfig selects this node: nothing is announced".to_owned();
        if !c.not_applied.is_empty() {
            let why = c
                .not_applied
                .iter()
                .map(|(k, n, w)| format!("{k} {n}: {w}"));
            m = format!("{m} ({})", listed(why.collect()));
        }
        let cannot = c
            .cannot_run
            .iter()
            .any(|(k, _)| *k == ObjectKind::SpeakerConfig);
        let reason = if cannot {
            "SpeakerConfigCannotRun"
        } else {
            "NoSpeakerConfig"
        };
        (false, reason, m)
    } else if !c.last_good.is_empty() {
        let items = c.last_good.iter().map(|(o, why)| {
            let g = o.generation.map_or_else(|| "?".into(), |g| g.to_string());
            format!("{} {} runs generation {g}: {why}", o.kind, o.name)
        });
        (false, "LastGood", listed(items.collect()))
    } else if !c.not_applied.is_empty() {
        let items = c
            .not_applied
            .iter()
            .map(|(k, n, w)| format!("{k} {n}: {w}"));
        (false, "NotApplied", listed(items.collect()))
    } else {
        let name = c.speaker_config.as_ref().map_or("", |o| o.name.as_str());
        let message = format!("BGPSpeakerConfig {name} and {}", count_peers(c.peers.len()));
        (true, "Applied", message)
    };
    r.conditions
        .push(condition("ConfigApplied", ok, reason, message, now));
    let Some(ready) = r.conditions.iter_mut().find(|c| c.type_ == "Ready") else {
        return;
    };
    if let Some(why) = c.cannot_run_reason() {
        *ready = condition(
            "Ready",
            false,
            "ConfigObjectCannotRun",
            format!("cannot run here, no last good version: {why}"),
            now,
        );
    } else if c.config.is_none() {
        *ready = condition(
            "Ready",
            true,
            "NoSpeakerConfig",
            "no BGPSpeakerConfig selects this node".into(),
            now,
        );
    }
}

fn count_peers(n: usize) -> String {
    if n == 1 {
        "1 BGPPeer".to_owned()
    } else {
        format!("{n} BGPPeers")
    }
}

impl ReportInputs {
    pub fn render(&self, now: u64) -> SpeakerReport {
        let mut r = report(
            self.source,
            self.local_asn,
            &self.desired,
            self.guarded.as_deref(),
            &self.peers,
            now,
        );
        if self.local_asn_resolved {
            r.local_asn = Some(self.local_asn.0);
            r.local_asn_source = self.local_asn_source.clone();
        }
        r.conditions.push(match &self.asn_error {
            Some(e) => condition("LocalASN", false, e.reason, e.message.clone(), now),
            None if self.local_asn_resolved => condition(
                "LocalASN",
                true,
                "Resolved",
                format!("AS {} from {}", self.local_asn.0, self.local_asn_source),
                now,
            ),
            None => condition("LocalASN", false, "NodeNotSeen", String::new(), now),
        });
        match &self.held {
            Some((held, true)) => report_held(&mut r, held, now),
            Some((held, false)) => report_would_hold(&mut r, held, now),
            None => {}
        }
        if let Some(c) = &self.cni {
            r.conditions.push(condition(
                "CNIConfigured",
                c.ok,
                c.reason,
                c.message.clone(),
                now,
            ));
        }
        if let Some(u) = &self.unresolved {
            let (reason, message) = match u.first() {
                None => ("AllResolved", String::new()),
                Some(first) => (
                    first.cause.as_str(),
                    u.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
            };
            r.conditions.push(condition(
                "PeersResolved",
                u.is_empty(),
                reason,
                message,
                now,
            ));
        }
        match &self.origin {
            ConfigOrigin::File => r.conditions.push(match &self.config_rejected {
                Some(e) => condition("ConfigValid", false, e.reason(), e.to_string(), now),
                None => condition("ConfigValid", true, "Loaded", String::new(), now),
            }),
            ConfigOrigin::Objects(objects) => objects_report(&mut r, objects.as_deref(), now),
        }
        if let Some(services) = &self.services {
            r.conditions.push(datapath_held(services, now));
        }
        r.services = self.services.clone();
        if let Some(lease) = &self.lease {
            r.conditions.push(match lease {
                Some(e) => condition("LeaseRenewed", false, e.reason(), e.to_string(), now),
                None => condition("LeaseRenewed", true, "Renewed", String::new(), now),
            });
        }
        stamp_transitions(&mut r.conditions, &mut (*self.transitions).clone(), now);
        r
    }
}

/// `ServiceDatapathHeld`: Service addresses an advertisement's `healthCheckGate` holds back
/// because the node's service proxy does not serve them yet (or the hold-down runs). Only this
/// reason: the others (no local endpoint, not ready) are the normal state of most nodes.
fn datapath_held(services: &podcidr_api::ServiceRoutesReport, now: u64) -> Condition {
    match services.held_by_reason.get("datapathNotReady").copied() {
        Some(n) if n > 0 => condition(
            "ServiceDatapathHeld",
            true,
            "ProxyNotServing",
            format!(
                "{n} Service address(es) wait for the node's service proxy to report a local \
                 endpoint on the healthCheckNodePort; `podcidr-bgp diff --services` lists them"
            ),
            now,
        ),
        _ => condition(
            "ServiceDatapathHeld",
            false,
            "NothingHeld",
            String::new(),
            now,
        ),
    }
}

/// The report with the gate on: `announced` without what is held, `held` (the first
/// `MAX_REPORTED_ROUTES`) and the `ForwardingHeld` condition.
pub fn report_held(r: &mut SpeakerReport, held: &[super::forwarding::Held], now: u64) {
    let shown: std::collections::HashSet<String> =
        held.iter().map(|h| h.cidr.to_string()).collect();
    r.announced.retain(|c| !shown.contains(c));
    r.held = held_list(held);
    let (status, reason) = if held.is_empty() {
        (false, "NothingHeld")
    } else {
        (true, "CidrsHeld")
    };
    r.conditions.push(condition(
        "ForwardingHeld",
        status,
        reason,
        held_message(held),
        now,
    ));
}

/// The report with `forwardingGate.mode: report`: everything stays in `announced`, what an
/// enforcing gate would hold goes to `wouldHold`, and `ForwardingHeld` is `False` (nothing
/// is held) with reason `WouldHold` and the list, so a rollout can be judged first.
pub fn report_would_hold(r: &mut SpeakerReport, held: &[super::forwarding::Held], now: u64) {
    r.would_hold = held_list(held);
    let (reason, message) = if held.is_empty() {
        (
            "NothingHeld",
            "mode report: nothing would be held".to_owned(),
        )
    } else {
        (
            "WouldHold",
            format!(
                "mode report, announced anyway: would hold {}",
                held_message(held)
            ),
        )
    };
    r.conditions
        .push(condition("ForwardingHeld", false, reason, message, now));
}

fn held_list(held: &[super::forwarding::Held]) -> Vec<HeldCidr> {
    held.iter()
        .take(MAX_REPORTED_ROUTES)
        .map(|h| HeldCidr {
            cidr: h.cidr.to_string(),
            reason: h.reason.as_str().to_owned(),
        })
        .collect()
}

fn held_message(held: &[super::forwarding::Held]) -> String {
    let mut message = held
        .iter()
        .take(CONDITION_LISTED)
        .map(|h| format!("{} ({})", h.cidr, h.reason.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    if held.len() > CONDITION_LISTED {
        message.push_str(&format!(" and {} more", held.len() - CONDITION_LISTED));
    }
    message
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bgp_proto::session::{Negotiated, RouteAttributes, State};
    use bgp_proto::{HoldTime, RouterId};
    use std::time::Duration;

    /// An Established session's negotiated parameters: IPv4 unicast with `peer_asn`.
    pub(crate) fn negotiated(peer_asn: u32) -> Negotiated {
        Negotiated {
            peer_asn: Asn(peer_asn),
            peer_router_id: RouterId::new("192.0.2.1".parse().unwrap()).unwrap(),
            hold_time: HoldTime::new(90).unwrap(),
            keepalive: Duration::from_secs(30),
            families: vec![Family::IPV4_UNICAST],
            four_octet_as: true,
            route_refresh: true,
            enhanced_route_refresh: false,
            extended_next_hop_ipv4: false,
            extended_message: false,
            peer_graceful_restart: None,
            ibgp: false,
            peer_capabilities: Vec::new(),
            peer_bfd_strict: false,
            bfd_strict: false,
        }
    }

    #[test]
    fn report_lists_what_the_adj_rib_out_holds_up_to_the_cap() {
        let cfg = podcidr_config::Config::from_yaml_str(
            "asn: 65010\nsource: {kind: file, path: /x}\npeers:\n  - name: tor\n    address: 192.0.2.1\n    asn: 65000\n",
        )
        .unwrap();
        let attrs = Arc::new(RouteAttributes::with_next_hop(
            "192.0.2.10".parse().unwrap(),
        ));
        let routes: Arc<bgp_proto::session::RouteSet> = Arc::new(
            (0..300u32)
                .map(|i| {
                    (
                        IpNet::V4(
                            ipnet::Ipv4Net::new((0x0a00_0000 + (i << 8)).into(), 24).unwrap(),
                        ),
                        Arc::clone(&attrs),
                    )
                })
                .collect(),
        );
        let mut status = SessionStatus::new(0);
        status.state = State::Established;
        status.negotiated = Some(negotiated(65000));
        // What the session applied: the IPv6 route is refused (family not negotiated), so
        // the peer holds 300 routes, not 301.
        let mut desired = (*routes).clone();
        desired.insert("fd00::/64".parse().unwrap(), Arc::clone(&attrs));
        let ctx = bgp_proto::session::ExportContext {
            local_asn: Asn(65010),
            ibgp: false,
            families: vec![Family::IPV4_UNICAST],
            extended_next_hop_ipv4: false,
            link_local_next_hop: None,
            wire: bgp_proto::message::WireOptions::default(),
        };
        let mut rib = bgp_proto::session::AdjRibOut::default();
        let plan = rib.plan(&Arc::new(desired), &ctx);
        rib.apply(&plan);
        status.adj_rib_out = bgp_proto::session::RibSnapshot(rib);
        let view = PeerInput {
            config: cfg.peers[0].clone(),
            status,
            refused: Arc::new([]),
        };
        let r = peer_report(Asn(65010), &view);
        assert_eq!(r.routes.len(), MAX_REPORTED_ROUTES);
        assert_eq!(r.routes_omitted, 300 - MAX_REPORTED_ROUTES as u64);
        assert!(r.routes.iter().all(|route| route.prefix.starts_with("10.")));
    }

    #[test]
    fn an_asn_auto_peer_reports_the_as_learned_from_the_open_rfc4271_6_2() {
        let cfg = podcidr_config::Config::from_yaml_str(
            "asn: 65010\nsource: {kind: file, path: /x}\npeers:\n  - name: tor\n    \
             address: default-gateway\n    asn: auto\n    allowedAsns: [65000-65100]\n",
        )
        .unwrap();
        let mut view = PeerInput {
            config: cfg.peers[0].clone(),
            status: SessionStatus::new(0),
            refused: Arc::new([]),
        };
        assert_eq!(peer_report(Asn(65010), &view).asn, 0, "nothing learned yet");
        view.status.negotiated = Some(negotiated(65042));
        assert_eq!(peer_report(Asn(65010), &view).asn, 65042);
    }

    #[test]
    fn refused_list_is_capped_so_the_status_object_stays_writable() {
        let desired = DesiredSet {
            ready: true,
            ..DesiredSet::default()
        };
        let guarded = Guarded {
            announce: Vec::new(),
            refused: (0..100_000u32)
                .map(|i| super::super::guard::Refused {
                    value: format!("203.{}.{}.0/24", i >> 8 & 0xff, i & 0xff),
                    reason: super::super::guard::GuardRefusal::OutsideAllowedPrefixes,
                })
                .collect(),
        };
        let r = report("file", Asn(65010), &desired, Some(&guarded), &[], 0);
        assert_eq!(r.refused.len(), MAX_REPORTED_ROUTES);
        assert_eq!(r.refused_omitted, 100_000 - MAX_REPORTED_ROUTES as u64);
        let bytes = serde_json::to_vec(&r).unwrap().len();
        assert!(bytes < 64 * 1024, "report is {bytes} bytes");
        let cond = r.conditions.iter().find(|c| c.type_ == "Refused").unwrap();
        assert!(
            cond.message.ends_with(" and 99990 more"),
            "{}",
            cond.message
        );
    }

    #[test]
    fn fingerprint_ignores_times_but_not_content() {
        let mut a = SpeakerReport {
            allocated: vec!["10.0.0.0/24".into()],
            conditions: vec![condition("Ready", true, "SourceSynced", String::new(), 100)],
            ..SpeakerReport::default()
        };
        let mut b = a.clone();
        b.updated_at = rfc3339(200);
        b.conditions[0].last_transition_time = Time(Timestamp::from_second(200).unwrap());
        assert_eq!(content_fingerprint(&a), content_fingerprint(&b));
        a.allocated.push("10.0.1.0/24".into());
        assert_ne!(content_fingerprint(&a), content_fingerprint(&b));
    }

    /// Keepalives move the message counters and a down session cycles through
    /// Connect/Active/Idle on every retry: none of that is a change worth a write.
    #[test]
    fn fingerprint_ignores_counters_and_retry_states_but_not_up_or_down() {
        let peer = |state: &str, since: &str, sent: u64| PeerReport {
            name: "tor1".into(),
            state: state.into(),
            since: since.into(),
            messages_sent: sent,
            messages_received: sent,
            last_error: (state != "Established").then(|| "connection refused".into()),
            ..PeerReport::default()
        };
        let with = |p: PeerReport, message: &str| SpeakerReport {
            peers: vec![p],
            conditions: vec![condition(
                "Established",
                false,
                "NotEstablished",
                message.into(),
                0,
            )],
            ..SpeakerReport::default()
        };
        let f = |r: &SpeakerReport| content_fingerprint(r);
        let up = with(peer("Established", "2026-01-01T00:00:00Z", 10), "");
        let up_later = with(peer("Established", "2026-01-01T00:00:00Z", 99), "");
        assert_eq!(f(&up), f(&up_later), "keepalives");
        let connect = with(peer("Connect", "2026-01-01T00:01:00Z", 99), "tor1 Connect");
        let active = with(peer("Active", "2026-01-01T00:01:05Z", 99), "tor1 Active");
        assert_eq!(f(&connect), f(&active), "retries");
        assert_ne!(f(&up), f(&connect), "a session going down is a change");
        let mut other_error = active.clone();
        other_error.peers[0].last_error = Some("no route to host".into());
        assert_ne!(f(&active), f(&other_error), "a new error is a change");
    }

    #[test]
    fn established_condition_says_which_sessions_are_down() {
        let cfg = podcidr_config::Config::from_yaml_str(
            "asn: 65010\nsource: {kind: file, path: /x}\npeers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n  - {name: tor2, address: 192.0.2.2, asn: 65000}\n",
        )
        .unwrap();
        let peer = |i: usize, state: State, error: Option<&str>| {
            let mut status = SessionStatus::new(0);
            status.state = state;
            status.last_error = error.map(str::to_owned);
            PeerInput {
                config: cfg.peers[i].clone(),
                status,
                refused: Arc::new([]),
            }
        };
        let up = [
            peer(0, State::Established, None),
            peer(1, State::Established, None),
        ];
        let c = established(&up, 0);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "AllEstablished")
        );
        let half = [
            peer(0, State::Established, None),
            peer(1, State::Active, Some("connection refused")),
        ];
        let c = established(&half, 0);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "NotEstablished")
        );
        assert_eq!(c.message, "tor2 Active (connection refused)");
        let c = established(&[], 0);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "NoPeers"));
    }
}
