//! Building our OPEN and validating the peer's (RFC 4271 §6.2, RFC 5492, RFC 6793, RFC 4724).

use std::time::Duration;

use crate::iana::notification::{self as n, open as open_err};
use crate::message::capability::{
    Capability, ExtendedNextHopEntry, GrFamily, GracefulRestart, LlgrFamily,
};
use crate::message::notification::Notification;
use crate::message::open::Open;
use crate::types::{AS_TRANS, Afi, Asn, Family, HoldTime, RouterId};

use super::{GracefulRestartConfig, SessionConfig};

/// What both sides agreed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    pub peer_asn: Asn,
    pub peer_router_id: RouterId,
    pub hold_time: HoldTime,
    /// Zero when the hold time is zero (no keepalives, RFC 4271 §4.4).
    pub keepalive: Duration,
    /// Families both sides advertised (IPv4 unicast when the peer sent no multiprotocol
    /// capability, RFC 4760 §8).
    pub families: Vec<Family>,
    pub four_octet_as: bool,
    pub route_refresh: bool,
    pub enhanced_route_refresh: bool,
    pub extended_next_hop_ipv4: bool,
    pub extended_message: bool,
    /// The peer's graceful restart capability, if it sent one.
    pub peer_graceful_restart: Option<GracefulRestart>,
    pub ibgp: bool,
    /// Capability codes the peer sent, for status.
    pub peer_capabilities: Vec<&'static str>,
    /// The peer advertised BFD strict mode (capability 74).
    pub peer_bfd_strict: bool,
    /// Both sides advertised BFD strict mode: BfdStrictNegotiated
    /// (draft-ietf-idr-bgp-bfd-strict-mode §6).
    pub bfd_strict: bool,
}

/// Our OPEN. Graceful restart lists only the families this session carries.
pub fn local_open(cfg: &SessionConfig, restarting: bool) -> Open {
    let mut caps: Vec<Capability> = cfg
        .families
        .iter()
        .map(|f| Capability::multiprotocol(*f))
        .collect();
    caps.push(Capability::RouteRefresh);
    caps.push(Capability::EnhancedRouteRefresh);
    if cfg.extended_next_hop && cfg.families.contains(&Family::IPV4_UNICAST) {
        caps.push(Capability::ExtendedNextHop(vec![ExtendedNextHopEntry {
            nlri_afi: Afi::IPV4.0,
            nlri_safi: 1,
            next_hop_afi: Afi::IPV6.0,
        }]));
    }
    if let Some(GracefulRestartConfig {
        restart_time,
        preserve_forwarding,
        long_lived_stale_time,
    }) = cfg.graceful_restart
    {
        let flags = if preserve_forwarding {
            GrFamily::FORWARDING_STATE
        } else {
            0
        };
        caps.push(Capability::GracefulRestart(GracefulRestart {
            // N (RFC 8538): a NOTIFICATION other than Hard Reset keeps routes as a graceful
            // restart does; final stops are sent as Hard Reset (`Fsm::on_the_wire`).
            restart_flags: GracefulRestart::NOTIFICATION
                | if restarting {
                    GracefulRestart::RESTART_STATE
                } else {
                    0
                },
            restart_time: restart_time.min(0x0fff),
            families: cfg
                .families
                .iter()
                .map(|f| GrFamily { family: *f, flags })
                .collect(),
        }));
        // RFC 9494 §3: only next to the GR capability, for the same families.
        if long_lived_stale_time > 0 {
            caps.push(Capability::LongLivedGracefulRestart(
                cfg.families
                    .iter()
                    .map(|f| LlgrFamily {
                        family: *f,
                        flags,
                        stale_time: long_lived_stale_time.min(LlgrFamily::MAX_STALE_TIME),
                    })
                    .collect(),
            ));
        }
    }
    // draft-ietf-idr-bgp-bfd-strict-mode §6: a strict-mode speaker MUST advertise it.
    if cfg.bfd_strict {
        caps.push(Capability::BfdStrictMode);
    }
    Open::new(cfg.local_asn, cfg.hold_time, cfg.router_id, caps)
}

fn notification(subcode: u8, data: Vec<u8>) -> Notification {
    let mut n = Notification::new(n::OPEN_MESSAGE_ERROR, subcode);
    n.data = data.into();
    n
}

/// Validates the peer's OPEN against our configuration; `Err` is the NOTIFICATION to send.
pub fn negotiate(cfg: &SessionConfig, peer: &Open) -> Result<Negotiated, Notification> {
    let four_octet_as = peer
        .capabilities()
        .any(|c| matches!(c, Capability::FourOctetAs(_)));
    let peer_asn = peer.asn();
    // RFC 6793 §4.1: a peer without the capability cannot have AS_TRANS as its AS.
    let accepted = match &cfg.peer_asn_ranges {
        None => peer_asn == cfg.peer_asn,
        Some(ranges) => ranges.iter().any(|r| r.contains(&peer_asn.0)),
    };
    if !accepted || (!four_octet_as && peer.my_as == AS_TRANS) {
        return Err(notification(
            open_err::BAD_PEER_AS,
            peer.my_as.to_be_bytes().to_vec(),
        ));
    }
    let ibgp = peer_asn == cfg.local_asn;
    // RFC 6286 §2.2: identifiers must differ within an AS.
    if ibgp && peer.router_id == cfg.router_id {
        return Err(notification(open_err::BAD_BGP_IDENTIFIER, Vec::new()));
    }
    let hold_time = cfg.hold_time.negotiate(peer.hold_time);
    let keepalive = if hold_time.is_disabled() {
        Duration::ZERO
    } else {
        let wanted = cfg
            .keepalive
            .unwrap_or(Duration::from_secs(u64::from(cfg.hold_time.seconds()) / 3));
        // Never slower than a third of the negotiated hold time (RFC 4271 §10).
        wanted
            .min(Duration::from_secs(u64::from(hold_time.seconds()) / 3))
            .max(Duration::from_secs(1))
    };
    let peer_families: Vec<Family> = peer
        .capabilities()
        .filter_map(|c| match c {
            Capability::Multiprotocol { family, .. } => Some(*family),
            _ => None,
        })
        .collect();
    let peer_families = if peer_families.is_empty() {
        vec![Family::IPV4_UNICAST]
    } else {
        peer_families
    };
    let families: Vec<Family> = cfg
        .families
        .iter()
        .copied()
        .filter(|f| peer_families.contains(f))
        .collect();
    if families.is_empty() {
        // RFC 5492 §3: data is the capability we needed.
        let mut data = bytes::BytesMut::new();
        for f in &cfg.families {
            let _ = Capability::multiprotocol(*f).encode(&mut data);
        }
        return Err(notification(
            open_err::UNSUPPORTED_CAPABILITY,
            data.to_vec(),
        ));
    }
    let has = |pred: &dyn Fn(&Capability) -> bool| peer.capabilities().any(pred);
    let extended_next_hop_ipv4 = cfg.extended_next_hop
        && has(&|c| match c {
            Capability::ExtendedNextHop(e) => e.iter().any(|e| {
                e.nlri_afi == Afi::IPV4.0 && e.nlri_safi == 1 && e.next_hop_afi == Afi::IPV6.0
            }),
            _ => false,
        });
    Ok(Negotiated {
        peer_asn,
        peer_router_id: peer.router_id,
        hold_time,
        keepalive,
        families,
        four_octet_as,
        route_refresh: has(&|c| {
            matches!(
                c,
                Capability::RouteRefresh | Capability::Unknown { code: 128, .. }
            )
        }),
        enhanced_route_refresh: has(&|c| matches!(c, Capability::EnhancedRouteRefresh)),
        extended_next_hop_ipv4,
        // We do not offer extended messages: UPDATEs stay within 4096 octets for every peer.
        extended_message: false,
        peer_graceful_restart: peer.capabilities().find_map(|c| match c {
            Capability::GracefulRestart(gr) => Some(gr.clone()),
            _ => None,
        }),
        ibgp,
        peer_capabilities: peer.capabilities().map(Capability::name).collect(),
        peer_bfd_strict: has(&|c| matches!(c, Capability::BfdStrictMode)),
        bfd_strict: cfg.bfd_strict && has(&|c| matches!(c, Capability::BfdStrictMode)),
    })
}
