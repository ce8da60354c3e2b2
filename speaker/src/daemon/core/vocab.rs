//! The core's vocabulary: the [`Event`]s the loop feeds it and the [`Effect`]s (and typed
//! [`Notice`]s) it returns. Plain data, no behaviour beyond small helpers.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bgp_io::transport::TtlSecurity;
use bgp_proto::session::SessionEvent;
use bgp_proto::session::{BfdInput, RouteSet, SessionConfig, SessionStatus, StopReason};
use ipam_watch::source::DesiredSet;
use ipnet::IpNet;
use podcidr_api::SpeakerReport;
use podcidr_config::{Config, LogConfig, PeerAddress, PeerConfig, SourceConfig};

use super::bfd_gate::GateAction;
use super::cni::CniFile;
use super::errors::{ApiWriteError, CniWriteError, ConfigError, Shared};
use super::gateways::{DefaultRoutes, Unresolved};
use super::guard::GuardRefusal;
use super::kernel::KernelFacts;
use super::report::ReportInputs;
use super::routes::PeerRefusal;
use super::session_setup::{LocalIdentity, session_config};
use crate::objects::NodeConfig;
use bgp_proto::bfd::{BfdState, Diag};

/// What the loop feeds the core.
#[derive(Debug, Clone)]
pub enum Event {
    /// The source's latest full desired set.
    Desired(Arc<DesiredSet>),
    /// A new config file was loaded and validated; `node_name` is its resolved node name,
    /// `kernel` the facts read for it.
    ConfigReloaded {
        config: Box<Config>,
        node_name: String,
        kernel: KernelFacts,
        why: &'static str,
        origin: ConfigOrigin,
    },
    /// The kernel's default routes, neighbours or source addresses changed.
    Kernel(KernelFacts),
    /// A new config file was rejected; the running config stays.
    ConfigRejected {
        why: &'static str,
        error: Shared<ConfigError>,
    },
    /// Something one session reported.
    Session(String, SessionEvent),
    /// Once a second: session snapshots, monotonic time since start and wall-clock seconds.
    Tick {
        now: Duration,
        unix: u64,
        statuses: BTreeMap<String, SessionStatus>,
    },
    /// A status write started at monotonic `at` for `fingerprint` finished.
    Published {
        fingerprint: u64,
        at: Duration,
        result: Result<(), ApiWriteError>,
    },
    /// A renewal of `node`'s Lease started at monotonic `at` (wall clock `unix`) finished.
    LeaseRenewed {
        node: String,
        at: Duration,
        unix: u64,
        result: Result<(), ApiWriteError>,
    },
    /// SIGTERM/SIGINT: stop every session, for graceful restart unless `final_stop`.
    Shutdown { final_stop: bool },
    /// A conflist write finished: `Ok(true)` written, `Ok(false)` already on disk.
    CniWritten {
        file: CniFile,
        result: Result<bool, Shared<CniWriteError>>,
    },
    /// What changed in the Service watch (Services, endpoints, advertisements, peer labels).
    Services(podcidr_services::Changes),
    /// The service proxy's answers on the probed `healthCheckNodePort`s (the datapath gate).
    ServiceProbes(BTreeMap<podcidr_services::ServiceKey, Result<(), String>>),
}

/// The source's CIDRs for this node (0 while it is not synced) and how many of them are in
/// some peer's routes (a host route inside one counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coverage {
    pub source: usize,
    pub announced: usize,
}

/// Where the running config comes from.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ConfigOrigin {
    /// A config file (or an in-process config).
    #[default]
    File,
    /// Configuration objects (`--config-source kubernetes`): which the node runs, at which
    /// generation, and which not; `None` until they are first listed.
    Objects(Option<Arc<NodeConfig>>),
}

impl ConfigOrigin {
    /// Objects are listed and no `BGPSpeakerConfig` selects this node: it announces nothing
    /// on purpose. One that selects it but cannot run here is not that.
    pub fn not_selected(&self) -> bool {
        matches!(self, ConfigOrigin::Objects(Some(c)) if c.config.is_none() && c.cannot_run.is_empty())
    }

    /// Why objects selecting this node cannot run here (none has a last good version).
    pub fn cannot_run(&self) -> Option<String> {
        match self {
            ConfigOrigin::Objects(Some(c)) => c.cannot_run_reason(),
            _ => None,
        }
    }

    /// Objects mode, before the objects are first listed.
    pub fn waiting(&self) -> bool {
        matches!(self, ConfigOrigin::Objects(None))
    }
}

/// Everything a session needs to start: its config and how the FSM runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSetup {
    pub config: PeerConfig,
    /// Seeds the reconnect jitter with the peer name.
    pub node_name: String,
    pub identity: LocalIdentity,
    /// Set the graceful restart R bit in the first OPEN: this process restarted.
    pub restarting: bool,
    /// `None` until the first guarded set exists: the session then sends nothing, not even
    /// End-of-RIB.
    pub routes: Option<Arc<RouteSet>>,
    /// RFC 2545 §3: an interface peer also gets our link-local address on that link.
    pub link_local_next_hop: Option<Ipv6Addr>,
}

/// One passive peer on a listener. The MD5 key is read from `password_file` when the
/// listener is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassiveSpec {
    pub name: String,
    pub address: IpAddr,
    pub password_file: Option<PathBuf>,
    pub ttl: TtlSecurity,
}

/// Listening sockets by local address, each with the peers it accepts.
pub type ListenerLayout = BTreeMap<SocketAddr, Vec<PassiveSpec>>;

/// What the loop carries out, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    StartPeer(Box<PeerSetup>),
    /// Probe these `healthCheckNodePort`s (none: stop probing), and report with
    /// [`Event::ServiceProbes`] when an answer changes.
    ProbeServices(super::services::ProbeTargets),
    /// Keep for the next process on this node (`--state-dir`): the peers Established here.
    KeepEstablished(std::collections::BTreeSet<String>),
    StopPeer {
        name: String,
        reason: StopReason,
    },
    /// Stop with `reason` (the core's choice: Cease/Other Configuration Change for new
    /// session settings, sent as RFC 8538 allows), then start with the new setup.
    ResetPeer {
        setup: Box<PeerSetup>,
        reason: StopReason,
    },
    /// What the BFD session beside it says, for the BGP session (see `bfd_gate`).
    Bfd {
        name: String,
        input: BfdInput,
    },
    /// `bfd` of a running peer changed (reload): new timers go to its BFD session with a
    /// Poll, or BFD starts or stops beside the BGP session; BGP is not reset.
    SetBfd(Box<PeerConfig>),
    /// Reconnect backoff changed; the session is not reset.
    SetConnectRetry {
        name: String,
        base: Duration,
        max: Duration,
    },
    SetRoutes {
        name: String,
        routes: Arc<RouteSet>,
    },
    /// Make the routes of ours in the kernel these (`egress.followSessions`; empty: none).
    SetEgress(super::egress::EgressRoutes),
    /// Make the listeners match: keep sockets whose address stays (their accepted peers and
    /// keys updated in place), bind new ones, close the rest. Never closes before binding.
    SetListeners(ListenerLayout),
    RestartSource {
        source: SourceConfig,
        node: String,
    },
    SetLog(LogConfig),
    /// The source is synced (or the node is selected by no config): `podcidr_source_ready`.
    SetReady(bool),
    /// What `/readyz` answers (see [`super::readiness`]).
    SetReadiness(super::readiness::Readiness),
    /// Hand the admin endpoint what it renders `/debug/*` from.
    ReportInputs(SharedInputs),
    /// Write this report about `node` (off the loop); answer with [`Event::Published`].
    Publish {
        node: String,
        report: Box<SpeakerReport>,
        fingerprint: u64,
        node_uid: Option<String>,
        at: Duration,
    },
    /// Renew the node's Lease (off the loop): holder this process, `renewTime` `unix`,
    /// `leaseDurationSeconds` `duration`, owned by the Node when its UID is known; answer
    /// with [`Event::LeaseRenewed`].
    RenewLease {
        node: String,
        node_uid: Option<String>,
        duration: Duration,
        unix: u64,
        at: Duration,
    },
    /// RFC 8326: routes now carry GRACEFUL_SHUTDOWN; wait this long (or until a second
    /// SIGTERM), then feed [`Event::Shutdown`] again for the Cease.
    GracefulShutdownWait(Duration),
    /// Stop every session concurrently.
    StopAll(Vec<(String, StopReason)>),
    /// Write the node's CNI conflist (off the loop); answer with [`Event::CniWritten`].
    WriteCni(CniFile),
    /// Publish a Kubernetes Event about this node (off the loop, best effort).
    KubeEvent(Box<NodeEvent>),
    Notice(Notice),
}

/// Why a Kubernetes Event about this node is raised: its `reason`, a contract operators
/// filter on (`kubectl events --for node/N`), and its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventReason {
    /// A BGP session reached Established (Normal).
    SessionEstablished,
    /// A BGP session left Established (Warning; Normal when we stopped it on purpose).
    SessionDown,
    /// A flapping BFD session holds its BGP session down (Warning, RFC 5882 §3.1).
    BfdHoldDown,
    /// The chosen source and `Node.spec.podCIDRs` began to disagree (Warning).
    SourceMismatch,
    /// They agree again (Normal).
    SourceMismatchResolved,
    /// The announce guard refused a pod CIDR from the source (Warning).
    PodCidrRefused,
    /// The node's local AS cannot be resolved: no session runs (Warning).
    LocalAsnInvalid,
    /// It can again (Normal).
    LocalAsnResolved,
    /// A configuration object runs its last good version here: the current one is not
    /// usable on this node (Warning).
    ConfigObjectLastGood,
    /// A configuration object selecting this node is not applied here (Warning).
    ConfigObjectNotApplied,
    /// Every configuration object selecting this node runs at its current generation again
    /// (Normal).
    ConfigObjectsApplied,
}

impl EventReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EventReason::SessionEstablished => "BGPSessionEstablished",
            EventReason::SessionDown => "BGPSessionDown",
            EventReason::BfdHoldDown => "BFDFlapHoldDown",
            EventReason::SourceMismatch => "PodCIDRSourceMismatch",
            EventReason::SourceMismatchResolved => "PodCIDRSourceMismatchResolved",
            EventReason::PodCidrRefused => "PodCIDRRefused",
            EventReason::LocalAsnInvalid => "LocalASNInvalid",
            EventReason::LocalAsnResolved => "LocalASNResolved",
            EventReason::ConfigObjectLastGood => "BGPConfigLastGood",
            EventReason::ConfigObjectNotApplied => "BGPConfigNotApplied",
            EventReason::ConfigObjectsApplied => "BGPConfigApplied",
        }
    }
}

/// A Kubernetes Event about this node's Node object. Occurrences with the same reason,
/// type and action are one Event whose series counts them, so `action` names the subject
/// (`Peer tor1`, `Announce 10.0.0.0/8`) from a bounded set and never carries free text
/// such as a peer's shutdown message; `note` does (the first occurrence's stays).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEvent {
    pub node: String,
    pub node_uid: Option<String>,
    pub reason: EventReason,
    pub warning: bool,
    pub action: String,
    pub note: String,
}

/// Report inputs shared with the admin endpoint; equal when they are the same value.
#[derive(Debug, Clone)]
pub struct SharedInputs(pub Arc<ReportInputs>);

impl PartialEq for SharedInputs {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Log lines and metric changes, typed so tests can assert them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// What is refused now, per reason (every reason, zeros included); sent when it changes.
    RefusedNow([(&'static str, usize); 8]),
    /// The source's CIDRs for this node and how many of them some peer is offered.
    Coverage(Coverage),
    /// Service addresses this node announces, and those it holds back by reason
    /// (`podcidr_services::Reason::as_str`; `diff --services` says which); sent when the
    /// counts change.
    ServiceRoutes {
        announced: usize,
        held: usize,
        held_by_reason: BTreeMap<&'static str, usize>,
    },
    /// A `BGPAdvertisement` that cannot be read (its status says so too); sent when its
    /// problems change.
    AdvertisementRefused {
        name: String,
        problems: String,
    },
    /// Peers the rollout gate excuses although they answer: never Established on this node.
    ExcusedPeers(Vec<String>),
    GuardRefused {
        cidr: String,
        reason: GuardRefusal,
    },
    PeerRefused {
        peer: String,
        prefix: IpNet,
        reason: PeerRefusal,
    },
    Mismatch(Option<String>),
    /// The forwarding gate holds an announced CIDR back (Warning), or with a new reason;
    /// `enforced: false` (`mode: report`): it would, and announces it anyway.
    ForwardingHeld {
        cidr: IpNet,
        reason: super::forwarding::HoldReason,
        enforced: bool,
    },
    /// The node can deliver to a held CIDR again: it is announced.
    ForwardingReleased {
        cidr: IpNet,
        enforced: bool,
    },
    /// An announced CIDR the gate would hold stays announced for `hold_down`
    /// (`forwardingGate.withdrawHoldDown`) in case its route comes back.
    ForwardingWithdrawDeferred {
        cidr: IpNet,
        reason: super::forwarding::HoldReason,
        hold_down: Duration,
    },
    /// What the gate holds now (`enforced`) or would hold (`mode: report`), per family and
    /// reason (zeros included); sent when it changes.
    HeldNow {
        counts: Box<super::forwarding::HeldCounts>,
        enforced: bool,
    },
    /// A peer carries a family with pod CIDRs to announce and no usable next hop for it
    /// (`Some(reason)`), or has one again (`None`): once per peer and family, not per prefix.
    NoNextHop {
        peer: String,
        family: &'static str,
        reason: Option<PeerRefusal>,
    },
    NoRouterId,
    /// The node's egress (`egress.followSessions`): the routes of ours and the default-route
    /// next hops left out; sent when that changes.
    Egress(super::egress::EgressDecision),
    /// The node's default routes changed (the gateways of `default-gateway` peers).
    DefaultRoutesChanged(DefaultRoutes),
    /// A peer the kernel cannot resolve yet (no default route, no neighbour).
    PeerUnresolved(Unresolved),
    /// The node's local AS, resolved anew (or why it cannot be).
    LocalAsn(super::AsnResolution),
    /// A graceful-restart session waits for the source before it opens (at most `at_most`
    /// after the process started).
    PeerHeld {
        peer: String,
        at_most: Duration,
    },
    /// A session (re)started; the peer's identity for `podcidr_bgp_peer_info`.
    PeerStarted {
        peer: String,
        address: PeerAddress,
        asn: u32,
        local_asn: u32,
    },
    /// An `asn: auto` peer's OPEN named its AS (first time, or a different one).
    PeerAsLearned {
        peer: String,
        address: PeerAddress,
        asn: u32,
        local_asn: u32,
    },
    PeerStopped {
        peer: String,
        why: &'static str,
    },
    ReloadApplied {
        why: &'static str,
        added: usize,
        removed: usize,
        reset: usize,
        updated: usize,
    },
    ReloadRejected {
        why: &'static str,
        error: Shared<ConfigError>,
    },
    /// The configuration objects the node runs, as counts for metrics; `new` lists what is
    /// newly running a last good version or newly not applied, for the log.
    ConfigObjects {
        applied: usize,
        last_good: usize,
        not_applied: usize,
        cannot_run: usize,
        new: Vec<String>,
    },
    /// A status write finished (`unix`: when it started, wall clock).
    StatusWritten {
        unix: u64,
        result: Result<(), ApiWriteError>,
    },
    /// A Lease renewal finished (`unix`: the `renewTime` it wrote).
    LeaseRenewed {
        unix: u64,
        result: Result<(), ApiWriteError>,
    },
    /// A setting that changed and takes effect only after a restart.
    NeedsRestart(&'static str),
    /// What a stop would be now changed: a departure, and why, or a restart (`None`).
    Departure(Option<super::departure::Departure>),
    /// The first shutdown signal: a departure (RFC 8326 wait, then Cease) and why, or a
    /// graceful-restart close (`None`).
    Stopping(Option<super::departure::Departure>),
    SessionMetrics(Vec<(String, SessionStatus)>),
    /// A BFD session changed state, and what the gate did with its BGP session.
    /// The peer's BFD session could not start; BGP runs without it.
    BfdUnavailable {
        peer: String,
        error: String,
    },
    BfdStateChanged {
        peer: String,
        from: BfdState,
        to: BfdState,
        diag: Diag,
        gate: Option<GateAction>,
    },
    /// The peer's BFD flaps: its BGP session stays down for `hold` after the reset
    /// (`bfd_dampening`), until wall-clock `until_unix`; `flaps`: failures remembered.
    BfdHeldDown {
        peer: String,
        hold: Duration,
        flaps: u32,
        until_unix: u64,
    },
    Session(String, SessionEvent),
    CniWritten {
        path: PathBuf,
        changed: bool,
    },
    CniFailed {
        path: PathBuf,
        error: Shared<CniWriteError>,
    },
}

impl PeerSetup {
    pub fn session_config(&self) -> SessionConfig {
        SessionConfig {
            link_local_next_hop: self.link_local_next_hop,
            ..session_config(self.identity, &self.node_name, &self.config)
        }
    }
}
