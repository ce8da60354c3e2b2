//! The validated, typed configuration.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use std::num::NonZeroU8;

use bgp_proto::session::ttl::TtlSecurity;
use bgp_proto::{Asn, Family, HoldTime, RouterId};
use ipnet::IpNet;

use crate::community::{Community, LargeCommunity};
use crate::selector::LabelSelector;

pub const DEFAULT_PORT: u16 = 179;
pub const DEFAULT_HOLD_TIME: u16 = 90;
pub const DEFAULT_CONNECT_RETRY_BASE: Duration = Duration::from_secs(1);
pub const DEFAULT_CONNECT_RETRY_MAX: Duration = Duration::from_secs(120);
pub const DEFAULT_RESTART_TIME: u16 = 120;
pub const DEFAULT_ADMIN_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9180);
pub const DEFAULT_STATUS_MIN_INTERVAL: Duration = Duration::from_secs(5);
/// IP TTL of an iBGP session: iBGP peers are routinely several hops away.
pub const IBGP_TTL: u8 = 255;
/// Linux `TCP_MD5SIG_MAXKEYLEN`.
pub const MD5_KEY_MAX_LEN: usize = 80;

/// A validated speaker config. Build with [`Config::from_yaml_str`] or [`Config::load`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// As written; resolve with [`Config::resolve_node_name`].
    pub node_name: Option<String>,
    /// The local AS: the number written, or (for a node-derived ASN) the `default`, else
    /// `Asn(0)`. [`Config::resolve_for_node`] returns a config where it is the node's.
    pub asn: Asn,
    /// Where the local AS comes from (`asn: N`, `asn: {fromNodeLabel: …}`, …).
    pub local_asn: LocalAsn,
    /// `asnOverrides`: per-node local AS by node selector, first match wins.
    pub asn_overrides: Vec<AsnOverride>,
    /// `gracefulShutdown`: RFC 8326 on a final stop and while the Node is cordoned.
    pub graceful_shutdown: GracefulShutdownConfig,
    /// As written; `None` means derive it (see [`Config::resolve_router_id`]).
    pub router_id: Option<RouterId>,
    pub source: SourceConfig,
    /// The announce guard: only prefixes inside one of these are announced.
    pub allowed_prefixes: Vec<IpNet>,
    /// The announce guard refuses prefixes shorter than this, per family.
    pub min_prefix_length: MinPrefixLength,
    pub next_hop: NextHops,
    pub peers: Vec<PeerConfig>,
    pub admin: AdminConfig,
    pub status: StatusConfig,
    pub log: LogConfig,
    /// The node's CNI conflist, written from the announced CIDRs (off by default).
    pub cni: crate::cni::CniConfig,
    /// `forwardingGate`: hold a CIDR back until the node can deliver to it (off by default).
    pub forwarding_gate: crate::forwarding::ForwardingGateConfig,
    /// `egress`: the node's default route follows its sessions (off by default).
    pub egress: crate::egress::EgressConfig,
}

/// `asn`: a number, or read from the node's own Node object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LocalAsn {
    Fixed(Asn),
    /// `{fromNodeLabel: key}` / `{fromNodeAnnotation: key}`, with an optional `default`
    /// used when the Node has no such key.
    FromNode {
        field: NodeField,
        key: String,
        default: Option<Asn>,
    },
}

/// Which map of the Node's metadata a per-node value is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeField {
    Label,
    Annotation,
}

impl NodeField {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeField::Label => "label",
            NodeField::Annotation => "annotation",
        }
    }
}

/// `asnOverrides[i]`: nodes matching `nodeSelector` use `asn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsnOverride {
    pub node_selector: LabelSelector,
    pub asn: Asn,
}

pub const DEFAULT_GRACEFUL_SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// The pod's `terminationGracePeriodSeconds` is 30 (deploy/speaker): the wait must leave
/// time for the Cease and the exit.
pub const MAX_GRACEFUL_SHUTDOWN_WAIT: u64 = 300;

/// `gracefulShutdown` (RFC 8326).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GracefulShutdownConfig {
    /// On a final stop (`--final`): how long routes carry GRACEFUL_SHUTDOWN before the
    /// Cease; zero sends the Cease at once.
    pub wait: Duration,
    /// Attach GRACEFUL_SHUTDOWN to every route while the Node is unschedulable (cordoned).
    pub on_cordon: bool,
    /// A SIGTERM on a cordoned node is a departure (RFC 8326 wait, then the Cease). Off by
    /// default: a cordon alone (a drain blocked by a PodDisruptionBudget, an investigation)
    /// leaves a node serving, and a pod restart there must not withdraw it.
    pub depart_on_cordon: bool,
}

impl Default for GracefulShutdownConfig {
    fn default() -> Self {
        GracefulShutdownConfig {
            wait: DEFAULT_GRACEFUL_SHUTDOWN_WAIT,
            on_cordon: true,
            depart_on_cordon: false,
        }
    }
}

/// Where the node's pod CIDRs come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SourceConfig {
    /// `Node.spec.podCIDRs` (host-scope IPAM).
    NodeSpec,
    /// Our per-node `NodePodCIDR` resource (cluster-pool IPAM).
    IpamCrd,
    /// `CiliumNode.spec.ipam.podCIDRs`.
    CiliumNode,
    /// A YAML file `{nodes: {<node>: [<cidr>, …]}}`, reloaded on change.
    File { path: PathBuf },
    /// No source: the node is not configured (no configuration object selects it). Never
    /// written in a config; see [`Config::unconfigured`].
    Unconfigured,
}

impl SourceConfig {
    /// The `source.kind` spelling.
    pub fn kind(&self) -> &'static str {
        match self {
            SourceConfig::NodeSpec => "node-spec",
            SourceConfig::IpamCrd => "ipam-crd",
            SourceConfig::CiliumNode => "cilium-node",
            SourceConfig::File { .. } => "file",
            SourceConfig::Unconfigured => "none",
        }
    }

    pub fn is_file(&self) -> bool {
        matches!(self, SourceConfig::File { .. })
    }

    /// Every source but `file` reads the Kubernetes API (`none` exists only with
    /// configuration objects, which read it too). The one place this rule is written: the
    /// speaker's start, its reloads, the source's start and the core's Node watch ask here.
    pub fn needs_api(&self) -> bool {
        !self.is_file()
    }

    /// `Err` when this source cannot run because there is no Kubernetes API.
    pub fn check_api(&self, api: bool) -> Result<(), SourceNeedsApi> {
        if api || !self.needs_api() {
            Ok(())
        } else {
            Err(SourceNeedsApi(self.kind()))
        }
    }
}

/// A source that reads the Kubernetes API, configured where there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("source.kind {0} needs the Kubernetes API")]
pub struct SourceNeedsApi(pub &'static str);

impl fmt::Display for SourceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

/// The next hop announced for one address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NextHopConfig<A> {
    /// `self`: the local address of the BGP session.
    SelfAddress,
    /// `node`: the Node's InternalIP of this family.
    Node,
    /// A fixed address.
    Address(A),
}

impl<A: fmt::Display> fmt::Display for NextHopConfig<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NextHopConfig::SelfAddress => f.write_str("self"),
            NextHopConfig::Node => f.write_str("node"),
            NextHopConfig::Address(a) => a.fmt(f),
        }
    }
}

/// `nextHop`: one setting per family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextHops {
    pub ipv4: NextHopConfig<Ipv4Addr>,
    pub ipv6: NextHopConfig<Ipv6Addr>,
}

impl Default for NextHops {
    fn default() -> Self {
        NextHops {
            ipv4: NextHopConfig::SelfAddress,
            ipv6: NextHopConfig::SelfAddress,
        }
    }
}

/// eBGP (peer AS differs from ours) or iBGP (same AS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionType {
    External,
    Internal,
}

/// An IP address family, where a setting names one (`addressFamily`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddrFamily {
    Ipv4,
    Ipv6,
}

impl AddrFamily {
    pub fn as_str(self) -> &'static str {
        match self {
            AddrFamily::Ipv4 => "ipv4",
            AddrFamily::Ipv6 => "ipv6",
        }
    }
}

impl fmt::Display for AddrFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `peers[i].address` (or `interface`): where the neighbor is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PeerAddress {
    /// `address`.
    Fixed(IpAddr),
    /// `default-gateway`: the next hop(s) of the node's default route of this family,
    /// resolved by the speaker (one session per next hop).
    DefaultGateway(AddrFamily),
    /// `interface` (+ `peerAddress`): the neighbor's link-local address on that interface
    /// (the "unnumbered" pattern); `None`: discovered from the kernel's neighbor table at
    /// each connect.
    Interface {
        name: String,
        peer: Option<Ipv6Addr>,
    },
}

impl PeerAddress {
    /// The peer's IP address, when known (no scope: pair it with [`Self::interface`]).
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            PeerAddress::Fixed(a) => Some(*a),
            PeerAddress::Interface { peer, .. } => peer.map(IpAddr::V6),
            PeerAddress::DefaultGateway(_) => None,
        }
    }

    /// The address, when it is written in the config (or already resolved from the default
    /// route); `None` for an unresolved `default-gateway` and for an interface peer.
    pub fn fixed(&self) -> Option<IpAddr> {
        match self {
            PeerAddress::Fixed(a) => Some(*a),
            PeerAddress::DefaultGateway(_) | PeerAddress::Interface { .. } => None,
        }
    }

    /// An unresolved `default-gateway`: no session until the speaker resolves it.
    pub fn is_unresolved(&self) -> bool {
        matches!(self, PeerAddress::DefaultGateway(_))
    }

    pub fn is_ipv4(&self) -> bool {
        self.family() == AddrFamily::Ipv4
    }

    pub fn family(&self) -> AddrFamily {
        match self {
            PeerAddress::Fixed(IpAddr::V4(_)) | PeerAddress::DefaultGateway(AddrFamily::Ipv4) => {
                AddrFamily::Ipv4
            }
            PeerAddress::Fixed(IpAddr::V6(_))
            | PeerAddress::DefaultGateway(AddrFamily::Ipv6)
            | PeerAddress::Interface { .. } => AddrFamily::Ipv6,
        }
    }

    /// The interface a link-local peer is reached through.
    pub fn interface(&self) -> Option<&str> {
        match self {
            PeerAddress::Interface { name, .. } => Some(name),
            PeerAddress::Fixed(_) | PeerAddress::DefaultGateway(_) => None,
        }
    }
}

impl fmt::Display for PeerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerAddress::Fixed(a) => a.fmt(f),
            PeerAddress::Interface {
                name,
                peer: Some(p),
            } => write!(f, "{p}%{name}"),
            PeerAddress::Interface { name, peer: None } => write!(f, "%{name}"),
            PeerAddress::DefaultGateway(fam) => write!(f, "default-gateway ({fam})"),
        }
    }
}

/// `peers[i].asn`: a number, or `auto` (learned from the peer's OPEN within `allowedAsns`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PeerAsn {
    Fixed(Asn),
    /// Inclusive ranges, as written (a single AS is a range of one).
    Auto(Vec<RangeInclusive<u32>>),
}

impl PeerAsn {
    pub fn fixed(&self) -> Option<Asn> {
        match self {
            PeerAsn::Fixed(a) => Some(*a),
            PeerAsn::Auto(_) => None,
        }
    }
}

impl fmt::Display for PeerAsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerAsn::Fixed(a) => a.0.fmt(f),
            PeerAsn::Auto(_) => f.write_str("auto"),
        }
    }
}

/// One BGP neighbor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    pub name: String,
    pub address: PeerAddress,
    pub port: u16,
    pub asn: PeerAsn,
    /// Derived from `asn` and the local AS: `None` with `asn: auto` (the OPEN decides);
    /// provisional (External) while the local AS is node-derived
    /// ([`Config::resolve_for_node`] derives it per node).
    pub session_type: Option<SessionType>,
    pub local_address: Option<IpAddr>,
    /// Wait for the peer to connect; never connect out.
    pub passive: bool,
    /// Listen for the peer's connections too (always true when `passive`); when both sides
    /// connect at once, RFC 4271 §6.8 collision resolution keeps one connection.
    pub accept_incoming: bool,
    /// Non-empty, no duplicates, in the order written.
    pub families: Vec<Family>,
    pub hold_time: HoldTime,
    /// Seconds; 0 exactly when `hold_time` is 0, else below it.
    pub keepalive_time: u16,
    pub connect_retry: ConnectRetry,
    pub password_file: Option<PathBuf>,
    /// GTSM (RFC 5082) for a directly connected peer: send TTL 255, accept only TTL 255.
    pub ttl_security: bool,
    /// Hops allowed for eBGP (1 = directly connected); `None` for iBGP, which uses [`IBGP_TTL`].
    pub ebgp_multihop: Option<u8>,
    pub graceful_restart: GracefulRestartConfig,
    /// Single-hop BFD (RFC 5880/5881) next to the session; `None` when off.
    pub bfd: Option<BfdConfig>,
    pub communities: Vec<Community>,
    pub large_communities: Vec<LargeCommunity>,
    pub med: Option<u32>,
    /// iBGP only.
    pub local_pref: Option<u32>,
    /// eBGP only: extra copies of the local AS.
    pub as_path_prepend: u8,
    /// `None`: the peer applies to every node.
    pub node_selector: Option<LabelSelector>,
    /// RFC 8950: offer IPv4 unicast with an IPv6 next hop (`extendedNextHop`).
    pub extended_next_hop: bool,
}

impl PeerConfig {
    /// Known iBGP from the config (with `asn: auto` the session's OPEN decides).
    pub fn is_ibgp(&self) -> bool {
        self.session_type == Some(SessionType::Internal)
    }

    /// The TTL policy of the session's socket (one source of truth: `bgp_proto::session::ttl`):
    /// GTSM sends 255 and requires 254 (RFC 5082); otherwise the multihop TTL for eBGP and
    /// 255 for iBGP.
    pub fn ttl_security(&self) -> TtlSecurity {
        if self.ttl_security {
            return TtlSecurity::Gtsm;
        }
        let ttl = self.ebgp_multihop.unwrap_or(IBGP_TTL);
        NonZeroU8::new(ttl).map_or(TtlSecurity::Gtsm, TtlSecurity::Ttl)
    }

    pub fn applies_to(&self, node_labels: &BTreeMap<String, String>) -> bool {
        self.node_selector
            .as_ref()
            .is_none_or(|s| s.matches(node_labels))
    }
}

/// Reconnect backoff: exponential from `base` up to `max`, with jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectRetry {
    pub base: Duration,
    pub max: Duration,
}

impl Default for ConnectRetry {
    fn default() -> Self {
        ConnectRetry {
            base: DEFAULT_CONNECT_RETRY_BASE,
            max: DEFAULT_CONNECT_RETRY_MAX,
        }
    }
}

/// Graceful restart (RFC 4724).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GracefulRestartConfig {
    pub enabled: bool,
    /// Seconds, 0..=4095 (a 12-bit field in the capability).
    pub restart_time: u16,
    /// RFC 9494 Long-lived Stale Time, seconds 0..=16777215 (24 bits); 0 = off.
    pub long_lived_stale_time: u32,
}

impl Default for GracefulRestartConfig {
    fn default() -> Self {
        GracefulRestartConfig {
            enabled: true,
            restart_time: DEFAULT_RESTART_TIME,
            long_lived_stale_time: 0,
        }
    }
}

/// `bfd.authentication.type` (RFC 5880 §6.7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BfdAuthType {
    /// `keyed-sha1` (Auth Type 4).
    KeyedSha1,
    /// `meticulous-keyed-sha1` (Auth Type 5).
    MeticulousKeyedSha1,
}

/// `bfd.authentication`: the key is read from `secret_file` when the BFD session starts
/// (and by `--check-config`); it is never in the config or the logs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BfdAuthConfig {
    pub auth_type: BfdAuthType,
    /// Auth Key ID, 0..255 (the peer's must be the same).
    pub key_id: u8,
    pub secret_file: std::path::PathBuf,
}

/// `bfd`: intervals in milliseconds as written; the wire carries microseconds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BfdConfig {
    /// Desired minimum transmit interval while Up.
    pub min_tx: Duration,
    /// Required minimum receive interval.
    pub min_rx: Duration,
    /// Detection multiplier sent to the peer (the peer's detection time is this × the
    /// agreed interval).
    pub multiplier: u8,
    /// BFD strict mode (draft-ietf-idr-bgp-bfd-strict-mode): advertised in the OPEN; when
    /// the peer advertises it too, BGP waits for BFD Up.
    pub strict: bool,
    /// Authentication of every BFD packet (RFC 5880 §6.7); `None`: none.
    pub authentication: Option<BfdAuthConfig>,
}

/// 300 ms × 3: under a second to detect, and tolerant of a busy node.
pub const DEFAULT_BFD_INTERVAL: Duration = Duration::from_millis(300);
pub const DEFAULT_BFD_MULTIPLIER: u8 = 3;

impl Default for BfdConfig {
    fn default() -> Self {
        BfdConfig {
            min_tx: DEFAULT_BFD_INTERVAL,
            min_rx: DEFAULT_BFD_INTERVAL,
            multiplier: DEFAULT_BFD_MULTIPLIER,
            strict: false,
            authentication: None,
        }
    }
}

/// `minPrefixLength`: no node announces anything this wide, whatever `allowedPrefixes`
/// says (`0.0.0.0/1` + `128.0.0.0/1` would be a default route in two halves).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MinPrefixLength {
    pub ipv4: u8,
    pub ipv6: u8,
}

pub const DEFAULT_MIN_PREFIX_LENGTH_V4: u8 = 16;
pub const DEFAULT_MIN_PREFIX_LENGTH_V6: u8 = 48;

impl Default for MinPrefixLength {
    fn default() -> Self {
        MinPrefixLength {
            ipv4: DEFAULT_MIN_PREFIX_LENGTH_V4,
            ipv6: DEFAULT_MIN_PREFIX_LENGTH_V6,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AdminConfig {
    pub listen: SocketAddr,
    /// A second listener serving only `/metrics`, for Prometheus (the node's address); the
    /// `/debug/*` pages stay on `listen`.
    pub metrics_listen: Option<SocketAddr>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: DEFAULT_ADMIN_LISTEN,
            metrics_listen: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusConfig {
    pub publish: bool,
    pub min_interval: Duration,
}

impl Default for StatusConfig {
    fn default() -> Self {
        StatusConfig {
            publish: true,
            min_interval: DEFAULT_STATUS_MIN_INTERVAL,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl LogFormat {
    /// `text` or `json`, as `log.format` and the allocator's `--log-format` spell it.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "text" => Some(LogFormat::Text),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum LogLevel {
    Trace,
    Debug,
    #[default]
    Info,
    Warn,
    Error,
}

impl LogLevel {
    /// The spelling used in the config, which is also a `tracing` filter directive.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LogConfig {
    pub format: LogFormat,
    pub level: LogLevel,
}
