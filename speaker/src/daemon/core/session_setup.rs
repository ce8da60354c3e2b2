//! How a peer's config becomes a BGP session's config: the local identity every session
//! shares, timers, families, graceful restart and the reconnect jitter seed.

use std::time::Duration;

use bgp_proto::session::{GracefulRestartConfig, SessionConfig};
use bgp_proto::{Asn, RouterId};
use podcidr_config::{PeerAsn, PeerConfig};

/// Identity shared by every session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalIdentity {
    pub asn: Asn,
    pub router_id: RouterId,
}

pub fn session_config(identity: LocalIdentity, node: &str, p: &PeerConfig) -> SessionConfig {
    let keepalive =
        (!p.hold_time.is_disabled()).then(|| Duration::from_secs(p.keepalive_time.into()));
    // Different speakers retry at different moments even with equal settings.
    let seed = node
        .bytes()
        .chain(p.name.bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
    SessionConfig {
        local_asn: identity.asn,
        router_id: identity.router_id,
        peer_asn: p.asn.fixed().unwrap_or(Asn(0)),
        peer_asn_ranges: match &p.asn {
            PeerAsn::Fixed(_) => None,
            PeerAsn::Auto(ranges) => Some(ranges.clone()),
        },
        hold_time: p.hold_time,
        keepalive,
        families: p.families.clone(),
        passive: p.passive,
        connect_retry_base: p.connect_retry.base,
        connect_retry_max: p.connect_retry.max,
        graceful_restart: p.graceful_restart.enabled.then_some(GracefulRestartConfig {
            restart_time: p.graceful_restart.restart_time,
            preserve_forwarding: true,
            long_lived_stale_time: p.graceful_restart.long_lived_stale_time,
        }),
        jitter_seed: seed,
        extended_next_hop: p.extended_next_hop,
        // BfdStrictEnabled means nothing without BFD (draft-ietf-idr-bgp-bfd-strict-mode §3).
        bfd_strict: p.bfd.as_ref().is_some_and(|b| b.strict),
        ..SessionConfig::new(identity.asn, identity.router_id, Asn(0))
    }
}
