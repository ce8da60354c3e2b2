//! The speaker's announce core, pure: [`Core::handle`] takes an [`Event`] and returns
//! [`Effect`]s, as `Session::handle` does for one BGP session. It owns what the process knows
//! (the config, the kernel's facts, the Node, the announcement, the sessions, what was
//! published, how the process ends: one sub-state per concept) and decides; the loop in
//! `daemon/run.rs` only moves events in and carries effects out. No I/O, no clock, no tokio:
//! times and the kernel's facts (routes, neighbours, source addresses) come in with the
//! events (`speaker/tests/quick/pure_cores.rs` checks). It is not the place for how anything is
//! done: sockets, API writes and files are the loop's executors'.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::Asn;
use bgp_proto::bfd::BfdEvent;
use bgp_proto::session::SessionEvent;
use bgp_proto::session::{RouteSet, SessionStatus, StopReason};
use ipam_watch::source::DesiredSet;
use ipnet::IpNet;
use podcidr_config::{Config, PeerAddress, PeerConfig, SourceConfig};

use cni::{CniFile, CniState};
use errors::{ApiWriteError, CniWriteError, ConfigError, Shared};
use gateways::Unresolved;
use guard::{GuardPolicy, GuardRefusal, Guarded, guard};
use kernel::{KernelFacts, resolve, resolves_peers};
use node::NodeFacts;
use routes::PeerRefusal;
use session_setup::LocalIdentity;

/// With nothing changed the report is re-written this often (the contract `diff` reads it by).
pub use podcidr_api::contract::STATUS_REFRESH;
/// The node's Lease (`coordination.k8s.io/v1`, named after the node) is renewed this often:
/// one small write per node per minute, 83 writes/s at 5,000 nodes.
pub const LEASE_RENEW: Duration = Duration::from_secs(60);
/// `leaseDurationSeconds`: three missed renewals before `diff` calls the speaker dead.
pub const LEASE_DURATION: Duration = Duration::from_secs(180);
/// A failed renewal is retried after this long (a failed write reaches no etcd).
pub const LEASE_RETRY: Duration = Duration::from_secs(10);

pub use vocab::*;

mod asn;
pub mod bfd_dampening;
pub mod bfd_gate;
pub mod cni;
pub mod departure;
pub mod egress;
pub mod errors;
pub mod forwarding;
pub mod gateways;
mod gating;
mod graceful_shutdown;
pub mod guard;
pub mod kernel;
pub mod node;
mod node_events;
mod offer;
mod origin;
mod peers;
mod publishing;
pub mod readiness;
pub mod refused_now;
mod reload;
pub mod report;
pub mod routes;
pub mod services;
pub mod session_setup;
mod since;
mod vocab;

pub use asn::AsnResolution;

/// The routes offered to one peer and what it refuses (sorted by prefix).
type PeerRoutes = (Arc<RouteSet>, Vec<(IpNet, PeerRefusal)>);

#[derive(Debug, Clone)]
struct Peer {
    config: PeerConfig,
    routes: Option<Arc<RouteSet>>,
    refused: Arc<[(IpNet, PeerRefusal)]>,
    /// Families with prefixes to announce and no usable next hop, as last said.
    no_next_hop: BTreeMap<&'static str, PeerRefusal>,
}

#[derive(Debug, Default, Clone, Copy)]
struct PublishState {
    /// Fingerprint and monotonic time of the last successful write.
    last: Option<(u64, Duration)>,
    /// Monotonic time of the last render (rendering is rate limited too).
    rendered_at: Option<Duration>,
    in_flight: bool,
}

/// The node's Lease: renewed every [`LEASE_RENEW`], one renewal at a time.
#[derive(Debug, Default, Clone, Copy)]
struct LeaseState {
    /// Monotonic time of the last successful renewal.
    renewed: Option<Duration>,
    /// Monotonic time of the last failed renewal.
    failed: Option<Duration>,
    in_flight: bool,
}

impl LeaseState {
    fn due(&self, now: Duration, owner_changed: bool) -> bool {
        let since = |t: Option<Duration>| t.map(|t| now.saturating_sub(t));
        !self.in_flight
            && since(self.failed).is_none_or(|a| a >= LEASE_RETRY)
            && (owner_changed || since(self.renewed).is_none_or(|a| a >= LEASE_RENEW))
    }
}

/// The Node this process speaks for, as far as it is known.
#[derive(Debug)]
struct NodeState {
    name: String,
    /// The Node as last seen; `None` until then. File mode has no Node to wait for: known at
    /// once, without facts.
    facts: Option<NodeFacts>,
    /// `facts` describes the Node of the name before a rename (until the new one is seen).
    renamed: bool,
    /// The node's local AS, once the Node is known.
    asn: Option<AsnResolution>,
    /// Local AS and router ID the sessions run with.
    identity: Option<LocalIdentity>,
}

/// What is announced: the source's set, what the guard let through, what the forwarding
/// gate holds back, and what was last said about refusals and coverage.
#[derive(Debug)]
struct AnnounceState {
    desired: Arc<DesiredSet>,
    /// The first guarded set; `None` until the source is ready once.
    guarded: Option<Arc<Guarded>>,
    /// What the forwarding gate holds back now (sorted by CIDR; empty when it is off); with
    /// `mode: report`, what it would hold.
    fwd_held: Arc<Vec<forwarding::Held>>,
    /// `fwd_held` was decided by an enforcing gate (a mode change re-sends the gauges).
    fwd_enforced: bool,
    /// What the gate let through at its last decision (the hold-down applies only to these).
    fwd_released: BTreeSet<IpNet>,
    /// Let-through CIDRs the gate would hold now, waiting out `withdrawHoldDown`.
    fwd_deferred: BTreeMap<IpNet, since::Since>,
    refusals_seen: BTreeSet<(String, GuardRefusal)>,
    /// The counts last sent as [`Notice::RefusedNow`].
    refused_now: [(&'static str, usize); 8],
    /// What was last said of the source's CIDRs and how many of them are announced.
    coverage: Coverage,
    /// What `coverage` was counted from: the source's set and each peer's routes, held so
    /// that pointer equality means "unchanged". Counting walks the whole set; most events
    /// (session states, ticks) change neither input.
    coverage_of: Option<(Arc<DesiredSet>, Vec<Arc<RouteSet>>)>,
    mismatch_seen: Option<String>,
}

/// The peers and their sessions, as the core runs them.
#[derive(Debug)]
struct Sessions {
    peers: BTreeMap<String, Peer>,
    /// Sessions started before this flips are the process's first: they set the R bit.
    started_once: bool,
    /// Graceful-restart peers not started yet: the process restarted and has no routes to
    /// send (see [`Core::holds_for_routes`]). Started with the R bit once released.
    held: BTreeSet<String>,
    listeners: ListenerLayout,
    /// Each session's status as last ticked.
    statuses: BTreeMap<String, SessionStatus>,
    /// Each peer's recent BFD failures (`bfd_dampening`); kept across session restarts.
    bfd_flaps: BTreeMap<String, bfd_dampening::Flaps>,
}

/// What is published to the API: the `NodeBGPStatus`, the Lease, and their outcomes.
#[derive(Debug, Default)]
struct Publishing {
    publish: PublishState,
    lease: LeaseState,
    /// The Node UID the Lease was last renewed with (its owner reference).
    lease_owner: Option<String>,
    /// Why the last Lease renewal failed (`None` once one succeeds).
    lease_error: Option<ApiWriteError>,
    /// When each status condition last changed (for `lastTransitionTime`).
    transitions: Arc<report::Transitions>,
}

/// How this process ends: a restart or a departure, and the RFC 8326 wait before it.
#[derive(Debug, Default)]
struct DepartureState {
    stopping: bool,
    /// A final stop is waiting with GRACEFUL_SHUTDOWN on every route (RFC 8326).
    final_wait: bool,
    /// What a stop would be, as last logged (`None`: a restart).
    seen: Option<departure::Departure>,
    /// What the first shutdown decided (`Some(None)`: a restart).
    decided: Option<Option<departure::Departure>>,
}

/// The core's state, grouped by concept: each group is read and written by the files of its
/// concept (`asn.rs` and `node.rs` the node, `guard.rs`/`offer.rs`/`forwarding.rs` the
/// announcement, `peers.rs`/`reload.rs` the sessions, `publishing.rs` and `report.rs` the
/// publishing, `departure.rs`/`graceful_shutdown.rs` the end).
#[derive(Debug)]
pub struct Core {
    /// The config as the operator wrote it.
    written: Config,
    /// `written` with every kernel-resolved peer resolved (see [`kernel::resolve`]): what
    /// runs.
    config: Config,
    /// Where the config comes from (a file, or configuration objects and which).
    origin: ConfigOrigin,
    /// Why the last config reload was rejected (`None` once one is applied).
    config_rejected: Option<Shared<ConfigError>>,
    /// Peers the kernel could not resolve (`None`: the config has no such peer).
    unresolved: Option<Vec<Unresolved>>,
    /// What the kernel said last: default routes, neighbours, source addresses, routes.
    kernel: KernelFacts,
    node: NodeState,
    announce: AnnounceState,
    sessions: Sessions,
    publishing: Publishing,
    departure: DepartureState,
    cni: CniState,
    /// Service routes (`BGPAdvertisement`s).
    services: services::ServiceState,
    /// The node's egress (`egress.followSessions`).
    egress: egress::EgressState,
    gate: readiness::GateState,
    /// `--ready-peer-grace` (see [`readiness`]).
    ready_grace: Duration,
    /// The API is reachable: status can be published.
    api: bool,
    /// Monotonic time since the process started (from [`Event::Tick`]).
    now: Duration,
    /// Wall-clock seconds at the last tick.
    unix: u64,
}

impl Core {
    /// `written` as the operator wrote it; `kernel` the facts read for it. `api`: a
    /// Kubernetes client exists (status publishing, Node watch). Without it the Node counts
    /// as known at once (file mode).
    pub fn new(written: Config, node_name: String, api: bool, kernel: KernelFacts) -> Self {
        let node = (!watches_node(api, &written)).then(NodeFacts::default);
        let (config, problems) = resolve(&written, &kernel, &[]);
        let unresolved = resolves_peers(&written).then_some(problems);
        // The route of ours a previous process left: the kernel has it now.
        let egress = egress::EgressState {
            adopted: kernel.egress.clone(),
            asked: Some(kernel.egress.clone()),
            ..Default::default()
        };
        Core {
            written,
            config,
            origin: ConfigOrigin::File,
            config_rejected: None,
            unresolved,
            kernel,
            node: NodeState {
                name: node_name,
                facts: node,
                renamed: false,
                asn: None,
                identity: None,
            },
            announce: AnnounceState {
                desired: Arc::new(DesiredSet::default()),
                guarded: None,
                fwd_held: Arc::default(),
                fwd_enforced: true,
                fwd_released: BTreeSet::new(),
                fwd_deferred: BTreeMap::new(),
                refusals_seen: BTreeSet::new(),
                refused_now: refused_now::count([], []),
                coverage: Coverage::default(),
                coverage_of: None,
                mismatch_seen: None,
            },
            sessions: Sessions {
                peers: BTreeMap::new(),
                started_once: false,
                held: BTreeSet::new(),
                listeners: ListenerLayout::new(),
                statuses: BTreeMap::new(),
                bfd_flaps: BTreeMap::new(),
            },
            publishing: Publishing::default(),
            departure: DepartureState::default(),
            cni: CniState::default(),
            services: services::ServiceState::default(),
            egress,
            gate: readiness::GateState::default(),
            ready_grace: readiness::DEFAULT_READY_PEER_GRACE,
            api,
            now: Duration::ZERO,
            unix: 0,
        }
    }

    /// How long a peer that says nothing holds readiness back (`--ready-peer-grace`).
    /// The peers Established on this node before this process (`--state-dir`).
    pub fn with_established_before(mut self, peers: std::collections::BTreeSet<String>) -> Self {
        self.gate.before = peers;
        self
    }

    pub fn with_ready_grace(mut self, grace: Duration) -> Self {
        self.ready_grace = grace;
        self
    }

    /// A core whose config comes from configuration objects (`origin`), not a file.
    pub fn with_origin(mut self, origin: ConfigOrigin) -> Self {
        self.origin = origin;
        self
    }

    /// The core has stopped every session: the process can end.
    pub fn stopped(&self) -> bool {
        self.departure.stopping
    }

    pub fn node_name(&self) -> &str {
        &self.node.name
    }

    /// The first effects after start: with no Node to wait for, sessions start now.
    pub fn start(&mut self) -> Vec<Effect> {
        let mut out = Vec::new();
        for p in self.unresolved.iter().flatten() {
            out.push(Effect::Notice(Notice::PeerUnresolved(p.clone())));
        }
        if self.node.facts.is_some() {
            self.reconcile_peers(&mut out);
        }
        self.note_refused(&mut out);
        out
    }

    /// [`Notice::RefusedNow`] when what is refused changed.
    fn note_refused(&mut self, out: &mut Vec<Effect>) {
        let guard = self
            .announce
            .guarded
            .iter()
            .flat_map(|g| g.refused.iter())
            .map(|r| r.reason);
        let peers = self
            .sessions
            .peers
            .values()
            .flat_map(|p| p.refused.iter())
            .map(|r| r.1);
        let now = refused_now::count(guard, peers);
        if now != self.announce.refused_now {
            self.announce.refused_now = now;
            out.push(Effect::Notice(Notice::RefusedNow(now)));
        }
    }

    /// [`Notice::Coverage`] when the source's CIDRs or how many of them are offered to a
    /// peer changed: a node whose source has CIDRs and that announces none of them is the
    /// failure no per-peer series shows (its peers are gone, not down).
    fn note_coverage(&mut self, out: &mut Vec<Effect>) {
        let desired = &self.announce.desired;
        let routes: Vec<Arc<RouteSet>> = (self.sessions.peers.values())
            .filter_map(|p| p.routes.clone())
            .collect();
        let unchanged = self.announce.coverage_of.as_ref().is_some_and(|(d, r)| {
            Arc::ptr_eq(d, desired)
                && r.len() == routes.len()
                && r.iter().zip(&routes).all(|(a, b)| Arc::ptr_eq(a, b))
        });
        if unchanged {
            return;
        }
        let source = if desired.ready {
            &desired.cidrs[..]
        } else {
            &[]
        };
        // One cursor per peer: a source list in order (the usual case) is one walk of
        // each set, not a binary search per CIDR.
        let mut cursors: Vec<_> = routes.iter().map(|r| r.within_cursor()).collect();
        let announced = source
            .iter()
            .filter(|cidr| cursors.iter_mut().any(|c| c.any_within(cidr)))
            .count();
        drop(cursors);
        self.announce.coverage_of = Some((Arc::clone(desired), routes));
        let now = Coverage {
            source: source.len(),
            announced,
        };
        if now != self.announce.coverage {
            self.announce.coverage = now;
            out.push(Effect::Notice(Notice::Coverage(now)));
        }
    }

    /// After every input: what is refused now, readiness and what a stop would be, from the
    /// state it left.
    fn follow_up(&mut self, out: &mut Vec<Effect>) {
        if self.departure.stopping {
            return;
        }
        self.note_refused(out);
        self.note_coverage(out);
        self.update_readiness(out);
        self.note_departure(out);
        self.reconcile_egress(out);
    }

    /// The Node's facts (empty before it is seen).
    fn node(&self) -> &NodeFacts {
        self.node.facts.as_ref().unwrap_or(&node::UNKNOWN)
    }

    pub fn handle(&mut self, event: Event) -> Vec<Effect> {
        let mut out = self.handle_event(event);
        self.follow_up(&mut out);
        out
    }

    fn handle_event(&mut self, event: Event) -> Vec<Effect> {
        let mut out = Vec::new();
        if self.departure.stopping {
            return out;
        }
        match event {
            Event::Desired(d) => self.on_desired(&mut out, d),
            Event::ConfigReloaded {
                config,
                node_name,
                kernel,
                why,
                origin,
            } => {
                self.kernel = kernel;
                self.written = *config;
                self.resolve_and_apply(&mut out, node_name, why);
                self.set_origin(&mut out, origin);
            }
            Event::Kernel(kernel) => self.on_kernel(&mut out, kernel),
            Event::ConfigRejected { why, error } => {
                self.config_rejected = Some(error.clone());
                out.push(Effect::Notice(Notice::ReloadRejected { why, error }));
            }
            Event::Session(peer, ev) => {
                if !self.sessions.peers.contains_key(&peer) {
                    return out;
                }
                match ev {
                    SessionEvent::Bfd(BfdEvent::StateChanged {
                        from,
                        to,
                        diag,
                        remote_state,
                    }) => {
                        self.egress_bfd_changed(&peer, from, to, remote_state);
                        self.bfd_state_changed(&mut out, &peer, (from, to, diag, remote_state));
                        return out;
                    }
                    SessionEvent::Bfd(BfdEvent::StartFailed(error)) => {
                        self.bfd_unavailable(&mut out, &peer, error);
                        return out;
                    }
                    _ => {}
                }
                self.egress_session_changed(&peer, &ev);
                self.session_event(&mut out, &peer, &ev);
                out.push(Effect::Notice(Notice::Session(peer, ev)));
            }
            Event::Tick {
                now,
                unix,
                statuses,
            } => self.on_tick(&mut out, now, unix, statuses),
            Event::Published {
                fingerprint,
                at,
                result,
            } => {
                self.publishing.publish.in_flight = false;
                if result.is_ok() {
                    self.publishing.publish.last = Some((fingerprint, at));
                }
                out.push(Effect::Notice(Notice::StatusWritten {
                    unix: self.unix,
                    result,
                }));
            }
            Event::LeaseRenewed {
                node,
                at,
                unix,
                result,
            } => {
                self.publishing.lease.in_flight = false;
                if node != self.node.name {
                    // The old node's Lease, from before a rename: it expires on its own.
                    return out;
                }
                match &result {
                    Ok(()) => self.publishing.lease.renewed = Some(at),
                    Err(_) => {
                        self.publishing.lease.failed = Some(at);
                        // Not written: the owner reference is not there either.
                        self.publishing.lease_owner = None;
                    }
                }
                self.publishing.lease_error = result.as_ref().err().cloned();
                out.push(Effect::Notice(Notice::LeaseRenewed { unix, result }));
            }
            Event::CniWritten { file, result } => self.on_cni_written(&mut out, file, result),
            Event::Services(inputs) => self.on_services(&mut out, inputs),
            Event::ServiceProbes(answers) => self.on_service_probes(&mut out, answers),
            Event::Shutdown { final_stop } => self.shutdown(&mut out, final_stop),
        }
        out
    }

    /// A new set from the source: its CIDRs and, from the same watch, the Node's facts. One
    /// update runs the pipeline once, whatever changed.
    fn on_desired(&mut self, out: &mut Vec<Effect>, desired: Arc<DesiredSet>) {
        out.push(Effect::SetReady(self.ready(&desired)));
        // A set without facts (the Node not seen yet, a file source) keeps what is known.
        let node_changed = match &desired.node {
            Some(f) if self.node.facts.as_ref() != Some(f) => {
                self.node.facts = Some(f.clone());
                self.node.renamed = false;
                true
            }
            _ => false,
        };
        let mismatch = desired
            .mismatch
            .as_ref()
            .map(|m| format!("{:?} vs Node.spec.podCIDRs {:?}", m.chosen, m.node_spec));
        if mismatch != self.announce.mismatch_seen {
            out.push(Effect::Notice(Notice::Mismatch(mismatch.clone())));
            self.mismatch_event(out, &mismatch);
            self.announce.mismatch_seen = mismatch;
        }
        self.announce.desired = desired;
        if node_changed {
            self.reconcile_peers(out);
        }
        if !self.regard(out) && node_changed {
            // Not ready: the last guarded set stays, with the Node's new attributes.
            self.push_routes(out);
        }
    }

    /// Re-runs the guard on the current desired set; a set that is not ready changes nothing
    /// (the last guarded set stays announced): `false` then.
    fn regard(&mut self, out: &mut Vec<Effect>) -> bool {
        let Some(g) = guard(
            &self.announce.desired,
            &GuardPolicy::from_config(&self.config),
        ) else {
            return false;
        };
        let now: BTreeSet<(String, GuardRefusal)> = g
            .refused
            .iter()
            .map(|r| (r.value.clone(), r.reason))
            .collect();
        let new: Vec<&(String, GuardRefusal)> =
            now.difference(&self.announce.refusals_seen).collect();
        for (cidr, reason) in &new {
            out.push(Effect::Notice(Notice::GuardRefused {
                cidr: cidr.clone(),
                reason: *reason,
            }));
        }
        self.refusal_events(out, &new);
        self.announce.refusals_seen = now;
        // The same verdict keeps its Arc: peers' routes are rebuilt only when it changes.
        if self.announce.guarded.as_deref() != Some(&g) {
            self.announce.guarded = Some(Arc::new(g));
        }
        self.regate(out);
        self.push_routes(out);
        self.release_held(out);
        self.plan_cni(out);
        true
    }

    /// The conflist follows the guarded set: pods get addresses only from announced CIDRs.
    fn plan_cni(&mut self, out: &mut Vec<Effect>) {
        if let Some(file) = self
            .cni
            .plan(&self.config.cni, self.announce.guarded.as_deref())
        {
            out.push(Effect::WriteCni(file));
        }
    }

    fn on_cni_written(
        &mut self,
        out: &mut Vec<Effect>,
        file: CniFile,
        result: Result<bool, Shared<CniWriteError>>,
    ) {
        let path = file.path.clone();
        out.push(Effect::Notice(match &result {
            Ok(changed) => Notice::CniWritten {
                path,
                changed: *changed,
            },
            Err(error) => Notice::CniFailed {
                path,
                error: error.clone(),
            },
        }));
        let pending = self.gate_pending();
        self.cni
            .finished(file, result.map(|_| ()).map_err(|e| e.to_string()));
        if self.regate(out) || pending {
            self.push_routes(out);
            self.release_held(out);
        }
        self.plan_cni(out);
    }

    /// `routerId`, else the Node's IPv4 InternalIP, else the local IPv4 towards the first
    /// IPv4 peer.
    fn resolve_identity(&self, asn: Asn) -> Option<LocalIdentity> {
        let session_local = self
            .config
            .peers
            .iter()
            .find(|p| p.address.fixed().is_some_and(|a| a.is_ipv4()))
            .and_then(|p| {
                p.local_address
                    .filter(IpAddr::is_ipv4)
                    .or_else(|| self.kernel.source(&p.address))
            });
        let router_id = self
            .config
            .resolve_router_id(&node::internal_ips(self.node()), session_local)?;
        Some(LocalIdentity { asn, router_id })
    }

    fn setup(&self, cfg: &PeerConfig, identity: LocalIdentity, restarting: bool) -> PeerSetup {
        PeerSetup {
            config: cfg.clone(),
            node_name: self.node.name.clone(),
            identity,
            restarting: restarting && cfg.graceful_restart.enabled,
            routes: self.routes_for(cfg).map(|(set, _)| set),
            link_local_next_hop: self.link_local_source(&cfg.address),
        }
    }

    /// Our link-local address on an interface peer's link, as the kernel picks it.
    fn link_local_source(&self, address: &PeerAddress) -> Option<Ipv6Addr> {
        address.interface()?;
        match self.kernel.source(address)? {
            IpAddr::V6(a) if a.is_unicast_link_local() => Some(a),
            _ => None,
        }
    }

    /// Resolves the written config with the kernel facts and applies the result.
    fn resolve_and_apply(&mut self, out: &mut Vec<Effect>, node_name: String, why: &'static str) {
        self.config_rejected = None;
        let (resolved, problems) = resolve(&self.written, &self.kernel, &self.config.peers);
        self.note_unresolved(out, problems);
        self.apply_config(out, resolved, node_name, why);
    }

    /// New kernel facts: a changed resolution is applied as a reload of the written config
    /// (only the peers it changes reset); changed source addresses rebuild the identity and
    /// every route (next hops).
    fn on_kernel(&mut self, out: &mut Vec<Effect>, mut kernel: KernelFacts) {
        if kernel.routes_unread {
            kernel.routes = self.kernel.routes.clone();
        }
        if self.config.egress.follow_sessions {
            // Before the comparison: a failed write leaves the facts as they were.
            self.egress_read(&kernel.egress);
        }
        if kernel == self.kernel {
            return;
        }
        if kernel.default_routes != self.kernel.default_routes {
            out.push(Effect::Notice(Notice::DefaultRoutesChanged(
                kernel.default_routes.clone(),
            )));
        }
        self.kernel = kernel;
        let (resolved, problems) = resolve(&self.written, &self.kernel, &self.config.peers);
        self.note_unresolved(out, problems);
        if resolved != self.config {
            self.apply_config(
                out,
                resolved,
                self.node.name.clone(),
                "default route changed",
            );
        } else if self.node.facts.is_some() {
            self.reconcile_peers(out);
            self.push_routes(out);
        }
        // A new routing table alone (the forwarding gate's input).
        if self.regate(out) {
            self.push_routes(out);
        }
    }

    /// Records which peers the kernel cannot resolve; a new one is a warning.
    fn note_unresolved(&mut self, out: &mut Vec<Effect>, problems: Vec<Unresolved>) {
        let now = resolves_peers(&self.written).then_some(problems);
        for p in now.iter().flatten() {
            if !self.unresolved.iter().flatten().any(|q| q == p) {
                out.push(Effect::Notice(Notice::PeerUnresolved(p.clone())));
            }
        }
        self.unresolved = now;
    }

    fn on_tick(
        &mut self,
        out: &mut Vec<Effect>,
        now: Duration,
        unix: u64,
        statuses: BTreeMap<String, SessionStatus>,
    ) {
        self.learned_asns(out, &statuses);
        self.gate.observe(&statuses);
        self.sessions.statuses = statuses;
        self.now = now;
        self.unix = unix;
        if !self.sessions.held.is_empty() {
            self.release_held(out);
        }
        self.cni.set_now(now);
        self.gate_tick(out);
        self.services_tick(out);
        // The conflist is rendered when its inputs change, and otherwise only when the file
        // on disk is due for a recheck (or a failed write for a retry).
        if self.cni.due() {
            self.plan_cni(out);
        }
        out.push(Effect::Notice(Notice::SessionMetrics(
            self.sessions
                .statuses
                .iter()
                .map(|(n, s)| (n.clone(), s.clone()))
                .collect(),
        )));
        let inputs = Arc::new(self.report_inputs());
        out.push(Effect::ReportInputs(SharedInputs(Arc::clone(&inputs))));
        self.maybe_renew_lease(out, now, unix);
        self.maybe_publish(out, &inputs, now, unix);
    }
}

/// How long [`Core::holds_for_routes`] waits at most: half the advertised restart time.
fn hold_bound(cfg: &PeerConfig) -> Duration {
    Duration::from_secs(u64::from(cfg.graceful_restart.restart_time) / 2)
}

fn peer_started(cfg: &PeerConfig, identity: LocalIdentity) -> Effect {
    Effect::Notice(Notice::PeerStarted {
        peer: cfg.name.clone(),
        address: cfg.address.clone(),
        // 0 until an `asn: auto` peer's OPEN tells.
        asn: cfg.asn.fixed().map_or(0, |a| a.0),
        local_asn: identity.asn.0,
    })
}

/// The Node is watched when there is an API and the source is not a file (file mode has no
/// Node to wait for).
pub fn watches_node(api: bool, config: &Config) -> bool {
    api && config.source.needs_api()
}

#[cfg(test)]
mod tests;
