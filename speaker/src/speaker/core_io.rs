//! The core's vocabulary: the [`Event`]s the loop feeds it and the [`Effect`]s (and typed
//! [`Notice`]s) it returns. Plain data, no behaviour beyond small helpers.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::session::driver::SessionEvent;
use bgp_proto::session::{RouteSet, SessionConfig, SessionStatus, StopReason};
use bgp_proto::transport::TtlSecurity;
use ipam_watch::crd::SpeakerReport;
use ipam_watch::source::DesiredSet;
use ipnet::IpNet;
use podcidr_config::{Config, LogConfig, PeerAddress, PeerConfig, SourceConfig};

use super::cni::CniFile;
use super::guard::GuardRefusal;
use super::node::NodeInfo;
use super::peers::{LocalIdentity, session_config};
use super::report::ReportInputs;
use super::routes::PeerRefusal;

/// What the loop feeds the core.
#[derive(Debug, Clone)]
pub enum Event {
    /// The source's latest full desired set.
    Desired(Arc<DesiredSet>),
    /// This node's Node object changed (labels, addresses, UID).
    Node(NodeInfo),
    /// A new config file was loaded and validated; `node_name` is its resolved node name.
    ConfigReloaded {
        config: Box<Config>,
        node_name: String,
        why: &'static str,
    },
    /// A new config file was rejected; the running config stays.
    ConfigRejected { why: &'static str, errors: String },
    /// Something one session reported.
    Session(String, SessionEvent),
    /// Once a second: session snapshots, monotonic time since start and wall-clock seconds.
    Tick {
        now: Duration,
        unix: u64,
        statuses: BTreeMap<String, SessionStatus>,
    },
    /// A status write finished (`ok`), started at monotonic `at` for `fingerprint`.
    Published {
        fingerprint: u64,
        at: Duration,
        ok: bool,
    },
    /// A renewal of `node`'s Lease started at monotonic `at` finished (`ok`).
    LeaseRenewed {
        node: String,
        at: Duration,
        ok: bool,
    },
    /// Why `default-gateway` peers have no session (`None`: the config has none); the
    /// `PeersResolved` status condition.
    Unresolved(Option<Vec<String>>),
    /// SIGTERM/SIGINT: stop every session, for graceful restart unless `final_stop`.
    Shutdown { final_stop: bool },
    /// A conflist write finished: `Ok(true)` written, `Ok(false)` already on disk.
    CniWritten {
        file: CniFile,
        result: Result<bool, String>,
    },
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
    StopPeer {
        name: String,
        reason: StopReason,
    },
    /// Stop with Cease/Other Configuration Change, then start with the new setup.
    ResetPeer(Box<PeerSetup>),
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
    /// Make the listeners match: keep sockets whose address stays (their accepted peers and
    /// keys updated in place), bind new ones, close the rest. Never closes before binding.
    SetListeners(ListenerLayout),
    /// Watch this Node and restart the source for it.
    WatchNode(String),
    RestartSource {
        source: SourceConfig,
        node: String,
    },
    SetLog(LogConfig),
    SetReady(bool),
    /// Hand the admin endpoint what it renders `/debug/*` from.
    ReportInputs(SharedInputs),
    /// Write this report (off the loop); answer with [`Event::Published`].
    Publish {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventReason {
    /// A BGP session reached Established (Normal).
    SessionEstablished,
    /// A BGP session left Established (Warning; Normal when we stopped it on purpose).
    SessionDown,
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
}

impl EventReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EventReason::SessionEstablished => "BGPSessionEstablished",
            EventReason::SessionDown => "BGPSessionDown",
            EventReason::SourceMismatch => "PodCIDRSourceMismatch",
            EventReason::SourceMismatchResolved => "PodCIDRSourceMismatchResolved",
            EventReason::PodCidrRefused => "PodCIDRRefused",
            EventReason::LocalAsnInvalid => "LocalASNInvalid",
            EventReason::LocalAsnResolved => "LocalASNResolved",
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
    NoRouterId,
    /// The node's local AS, resolved anew (or why it cannot be).
    LocalAsn(super::core::AsnResolution),
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
        errors: String,
    },
    /// A setting that changed and takes effect only after a restart.
    NeedsRestart(&'static str),
    SessionMetrics(Vec<(String, SessionStatus)>),
    Session(String, SessionEvent),
    CniWritten {
        path: PathBuf,
        changed: bool,
    },
    CniFailed {
        path: PathBuf,
        error: String,
    },
}

impl PeerSetup {
    pub fn session_config(&self) -> SessionConfig {
        session_config(self.identity, &self.node_name, &self.config)
    }
}
