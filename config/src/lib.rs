//! Configuration schema for the podcidr-bgp speaker: parse YAML into a generic tree, then
//! validate it into a typed [`Config`]. Every error names its field path and the bad value
//! (`peers[1].holdTime: 2 is not allowed (0 or 3..65535)`), and all errors are reported at
//! once. The schema is documented in `docs/config.md`.
//!
//! ```
//! use podcidr_config::Config;
//!
//! let yaml = "asn: 65001\nallowedPrefixes: [10.244.0.0/16]\npeers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, holdTime: 2}\n";
//! let err = Config::from_yaml_str(yaml).unwrap_err();
//! assert_eq!(err.to_string(), "peers[0].holdTime: 2 is not allowed (0 or 3..65535)");
//!
//! let config = Config::from_yaml_str(&yaml.replace("holdTime: 2", "holdTime: 9")).unwrap();
//! assert_eq!(config.peers[0].keepalive_time, 3);
//! ```

mod cni;
mod community;
mod diff;
mod egress;
mod error;
mod fields;
mod forwarding;
mod local_asn;
mod md5;
mod model;
mod next_hop_check;
mod peer;
mod peer_auto;
mod peer_endpoint;
mod selector;
mod tree;
mod validate;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use bgp_proto::RouterId;

pub use cni::{
    CniConfig, CniPlugin, DEFAULT_CNI_BRIDGE, DEFAULT_CNI_CONF_DIR, DEFAULT_CNI_FILE_NAME,
    DEFAULT_CNI_NETWORK_NAME,
};
pub use community::{Community, LargeCommunity};
pub use diff::{PeerChanges, SettingsChanges, diff_peers};
pub use egress::EgressConfig;
pub use error::{ConfigError, ConfigErrors};
pub use fields::parse_seconds;
pub use forwarding::{
    DEFAULT_WITHDRAW_HOLD_DOWN, ForwardingGateConfig, GateMode, MAX_WITHDRAW_HOLD_DOWN,
};
pub use local_asn::{AsnOrigin, NodeAsnError, NodeMeta, ResolvedAsn};
pub use md5::{
    BFD_KEY_MAX_LEN, BfdKeyBytesError, BfdKeyError, MD5_KEY_FILE_MAX_LEN, Md5KeyBytesError,
    Md5KeyError, bfd_key_from_bytes, load_bfd_key, load_md5_key, md5_key_from_bytes,
};
pub use model::*;
pub use next_hop_check::NextHopGap;
pub use selector::{LabelSelector, LabelSelectorRequirement, SelectorOperator};

use crate::error::Errors;
use crate::selector::is_dns_subdomain;
use crate::validate::NODE_NAME_RULE;

/// Bound on the config file read: a mistaken path (a log, a device) is an error, not an
/// unbounded read.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

impl Config {
    /// Parses and validates a config document.
    pub fn from_yaml_str(text: &str) -> Result<Config, ConfigErrors> {
        let mut options = serde_saphyr::Options::default();
        options.with_snippet = false;
        let root: serde_json::Value =
            serde_saphyr::from_str_with_options(text, options).map_err(syntax_error)?;
        let mut errs = Errors::default();
        let config = validate::validate(&root, &mut errs);
        if errs.0.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors::new(errs.0))
        }
    }

    /// A node that no configuration object selects: no source, no peer, nothing announced;
    /// the process (its status and Lease) goes on.
    pub fn unconfigured() -> Config {
        Config {
            node_name: None,
            asn: bgp_proto::Asn(0),
            local_asn: LocalAsn::Fixed(bgp_proto::Asn(0)),
            asn_overrides: Vec::new(),
            graceful_shutdown: GracefulShutdownConfig::default(),
            router_id: None,
            source: SourceConfig::Unconfigured,
            allowed_prefixes: Vec::new(),
            min_prefix_length: MinPrefixLength::default(),
            next_hop: NextHops::default(),
            peers: Vec::new(),
            admin: AdminConfig::default(),
            status: StatusConfig::default(),
            log: LogConfig::default(),
            cni: CniConfig::default(),
            forwarding_gate: ForwardingGateConfig::default(),
            egress: EgressConfig::default(),
        }
    }

    /// Validates a config document assembled from configuration objects (already parsed
    /// JSON): the same rules as a file, except that it may have no peer.
    pub fn from_objects_document(root: &serde_json::Value) -> Result<Config, ConfigErrors> {
        let mut errs = Errors::default();
        let config = validate::validate_with(root, &mut errs, validate::Require { peers: false });
        if errs.0.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors::new(errs.0))
        }
    }

    /// Reads and validates the config file at `path` (at most [`MAX_CONFIG_BYTES`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigErrors> {
        use std::io::Read;
        let path = path.as_ref();
        let io_err = |message: String| ConfigError::Io {
            file: path.to_owned(),
            message,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_CONFIG_BYTES + 1).read_to_string(&mut text))
            .map_err(|e| io_err(format!("cannot read config: {e}")))?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(io_err(format!(
                "cannot read config: larger than {} MiB (a ConfigMap holds at most 1 MiB)",
                MAX_CONFIG_BYTES >> 20
            ))
            .into());
        }
        Config::from_yaml_str(&text)
    }

    /// The node this speaker runs for: `nodeName`, else `--node-name` (`flag`), else
    /// `$NODE_NAME` (`env`). Empty values count as unset.
    pub fn resolve_node_name(
        &self,
        flag: Option<String>,
        env: Option<String>,
    ) -> Result<String, ConfigError> {
        let candidates = [
            ("nodeName", self.node_name.clone()),
            ("--node-name", flag),
            ("$NODE_NAME", env),
        ];
        let (origin, name) = candidates
            .into_iter()
            .find_map(|(origin, v)| v.filter(|s| !s.is_empty()).map(|s| (origin, s)))
            .ok_or_else(|| {
                ConfigError::field(
                    "nodeName",
                    "not set (use nodeName, --node-name or $NODE_NAME)",
                )
            })?;
        if !is_dns_subdomain(&name) {
            return Err(ConfigError::field(
                origin,
                format!("{} {NODE_NAME_RULE}", error::quoted(&name)),
            ));
        }
        Ok(name)
    }

    /// `routerId`, else the node's first IPv4 InternalIP, else the session's local IPv4.
    pub fn resolve_router_id(
        &self,
        node_internal_ips: &[IpAddr],
        session_local: Option<IpAddr>,
    ) -> Option<RouterId> {
        let v4 = |a: &IpAddr| match a {
            IpAddr::V4(v4) => RouterId::new(*v4),
            IpAddr::V6(_) => None,
        };
        self.router_id
            .or_else(|| node_internal_ips.iter().find_map(v4))
            .or_else(|| session_local.as_ref().and_then(v4))
    }

    /// This config with only the peers whose `nodeSelector` matches `node_labels`.
    pub fn for_node(&self, node_labels: &BTreeMap<String, String>) -> Config {
        Config {
            peers: self
                .peers
                .iter()
                .filter(|p| p.applies_to(node_labels))
                .cloned()
                .collect(),
            ..self.clone()
        }
    }

    pub fn peer(&self, name: &str) -> Option<&PeerConfig> {
        self.peers.iter().find(|p| p.name == name)
    }
}

/// A YAML error with its position; the position and parser-API advice are dropped from
/// the message text.
fn syntax_error(e: serde_saphyr::Error) -> ConfigError {
    let mut text = e.to_string();
    if text.starts_with("multiple YAML documents") {
        text = "the config must be a single YAML document".to_owned();
    }
    if let Some(start) = text.find(", set DuplicateKeyPolicy") {
        let end = text[start..]
            .find(" at line ")
            .map_or(text.len(), |i| start + i);
        text.replace_range(start..end, "");
    }
    match e.location() {
        Some(loc) => {
            let suffix = format!(" at line {}, column {}", loc.line(), loc.column());
            ConfigError::Syntax {
                line: loc.line(),
                column: loc.column(),
                message: text.strip_suffix(&suffix).unwrap_or(&text).to_owned(),
            }
        }
        None => ConfigError::Syntax {
            line: 0,
            column: 0,
            message: text,
        },
    }
}
