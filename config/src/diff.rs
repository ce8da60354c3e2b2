//! Reload: what differs between the running config and a newly loaded one.

use crate::model::{Config, PeerConfig};

/// Peers by name, sorted by what the speaker must do with them.
///
/// Filter both configs with [`Config::for_node`] (or `Config::resolve_for_node`, which also
/// puts the node's AS in `asn`) first, so that a peer which stops (or starts)
/// matching this node shows up as removed (or added).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerChanges {
    /// New names: start a session.
    pub added: Vec<String>,
    /// Names gone from the new config: stop the session (Cease).
    pub removed: Vec<String>,
    /// A session-affecting setting differs: reset the session with the new settings.
    pub changed: Vec<String>,
    /// Only route attributes, reconnect backoff, node selection or BFD differ: apply
    /// without a reset (re-announce the routes with the new attributes; BFD timers change
    /// with a Poll Sequence, RFC 5880 §6.8.3, and BFD starts or stops next to the session).
    pub updated: Vec<String>,
    pub unchanged: Vec<String>,
    /// Which non-peer settings differ.
    pub settings: SettingsChanges,
}

impl PeerChanges {
    /// Nothing to do at all.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.updated.is_empty()
            && !self.settings.any()
    }
}

/// Non-peer settings that differ; each `true` is something the speaker must re-apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SettingsChanges {
    /// Local `asn` or `routerId`: both go into every OPEN, so every kept peer is in `changed`.
    pub identity: bool,
    /// `nodeName`: a different Node to watch.
    pub node_name: bool,
    /// `source`: restart the pod-CIDR source.
    pub source: bool,
    /// `allowedPrefixes`: re-run the announce guard.
    pub allowed_prefixes: bool,
    /// `nextHop`: re-announce every route.
    pub next_hop: bool,
    /// `admin.listen`: rebind the admin endpoint.
    pub admin: bool,
    /// `status`: publishing switched or its interval changed.
    pub status: bool,
    /// `log`: format or level.
    pub log: bool,
    /// `cni`: the conflist is rewritten (enabled, where, or what it holds).
    pub cni: bool,
    /// `forwardingGate`: what is held is decided again (no session resets).
    pub forwarding_gate: bool,
    /// `egress`: the node's default route is decided again (no session resets).
    pub egress: bool,
}

impl SettingsChanges {
    pub fn any(&self) -> bool {
        let SettingsChanges {
            identity,
            node_name,
            source,
            allowed_prefixes,
            next_hop,
            admin,
            status,
            log,
            cni,
            forwarding_gate,
            egress,
        } = *self;
        identity
            || node_name
            || source
            || allowed_prefixes
            || next_hop
            || admin
            || status
            || log
            || cni
            || forwarding_gate
            || egress
    }

    /// Routes must be recomputed and re-announced to every peer.
    pub fn routes_affected(&self) -> bool {
        self.source
            || self.allowed_prefixes
            || self.next_hop
            || self.node_name
            || self.forwarding_gate
    }
}

/// Compares peers by name; see [`PeerChanges`] for what each list means.
pub fn diff_peers(old: &Config, new: &Config) -> PeerChanges {
    let settings = SettingsChanges {
        identity: old.asn != new.asn || old.router_id != new.router_id,
        node_name: old.node_name != new.node_name,
        source: old.source != new.source,
        allowed_prefixes: old.allowed_prefixes != new.allowed_prefixes
            || old.min_prefix_length != new.min_prefix_length,
        next_hop: old.next_hop != new.next_hop,
        admin: old.admin != new.admin,
        status: old.status != new.status,
        log: old.log != new.log,
        cni: old.cni != new.cni,
        forwarding_gate: old.forwarding_gate != new.forwarding_gate,
        egress: old.egress != new.egress,
    };
    let mut changes = PeerChanges {
        settings,
        ..PeerChanges::default()
    };
    for peer in &new.peers {
        let name = peer.name.clone();
        match old.peers.iter().find(|p| p.name == peer.name) {
            None => changes.added.push(name),
            Some(before) if settings.identity || session_differs(before, peer) => {
                changes.changed.push(name);
            }
            Some(before) if before != peer => changes.updated.push(name),
            Some(_) => changes.unchanged.push(name),
        }
    }
    changes.removed = old
        .peers
        .iter()
        .filter(|p| !new.peers.iter().any(|n| n.name == p.name))
        .map(|p| p.name.clone())
        .collect();
    changes
}

/// Settings that go into the transport or the OPEN, or that the FSM runs with.
/// Destructured so a new field cannot be forgotten here. Of `bfd` only strict mode: it is a
/// capability in the OPEN, while BFD itself runs beside BGP's session and changes in place.
/// `families` as a set: their order changes no session.
fn session_differs(a: &PeerConfig, b: &PeerConfig) -> bool {
    let PeerConfig {
        name: _,
        address,
        port,
        asn,
        session_type,
        local_address,
        passive,
        accept_incoming,
        families,
        hold_time,
        keepalive_time,
        connect_retry: _,
        password_file,
        ttl_security,
        ebgp_multihop,
        graceful_restart,
        bfd,
        communities: _,
        large_communities: _,
        med: _,
        local_pref: _,
        as_path_prepend: _,
        node_selector: _,
        extended_next_hop,
    } = a;
    *address != b.address
        || *extended_next_hop != b.extended_next_hop
        || *port != b.port
        || *asn != b.asn
        || *session_type != b.session_type
        || *local_address != b.local_address
        || *passive != b.passive
        || *accept_incoming != b.accept_incoming
        || !same_set(families, &b.families)
        || *hold_time != b.hold_time
        || *keepalive_time != b.keepalive_time
        || *password_file != b.password_file
        || *ttl_security != b.ttl_security
        || *ebgp_multihop != b.ebgp_multihop
        || *graceful_restart != b.graceful_restart
        || bfd_strict(bfd) != bfd_strict(&b.bfd)
}

/// What the OPEN says: capability 74 only with BFD on (draft-ietf-idr-bgp-bfd-strict-mode §3).
fn bfd_strict(bfd: &Option<crate::BfdConfig>) -> bool {
    bfd.as_ref().is_some_and(|b| b.strict)
}

fn same_set<T: PartialEq>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x)) && b.iter().all(|x| a.contains(x))
}
