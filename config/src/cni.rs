//! `cni`: the node's CNI network configuration, written by the speaker from the pod CIDRs it
//! announces (cluster-pool mode with the standard `bridge`/`ptp` + `host-local` plugins).

use std::path::PathBuf;

use crate::error::Errors;
use crate::fields::parse_path;
use crate::tree::{Lookup, Node, Obj, boolean};

pub const DEFAULT_CNI_CONF_DIR: &str = "/etc/cni/net.d";
pub const DEFAULT_CNI_FILE_NAME: &str = "10-podcidr-bgp.conflist";
pub const DEFAULT_CNI_NETWORK_NAME: &str = "podcidr";
pub const DEFAULT_CNI_BRIDGE: &str = "podcidr0";

/// The main plugin of the written conflist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CniPlugin {
    /// Pods on one Linux bridge whose address is the gateway of each range.
    #[default]
    Bridge,
    /// A point-to-point veth per pod, host routes instead of a bridge.
    Ptp,
}

impl CniPlugin {
    /// The plugin's `type`, which is also its binary name in the CNI bin dir.
    pub fn as_str(self) -> &'static str {
        match self {
            CniPlugin::Bridge => "bridge",
            CniPlugin::Ptp => "ptp",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CniConfig {
    /// Off by default: a cluster whose CNI brings its own IPAM is never touched.
    pub enabled: bool,
    pub conf_dir: PathBuf,
    /// Ends with `.conflist`.
    pub file_name: String,
    /// The network `name` (also host-local's lease subdirectory).
    pub network_name: String,
    pub plugin: CniPlugin,
    /// Bridge device name (`plugin: bridge`).
    pub bridge: String,
    pub mtu: Option<u16>,
    /// host-local's lease directory; `None` is host-local's own default.
    pub data_dir: Option<PathBuf>,
}

impl Default for CniConfig {
    fn default() -> Self {
        CniConfig {
            enabled: false,
            conf_dir: PathBuf::from(DEFAULT_CNI_CONF_DIR),
            file_name: DEFAULT_CNI_FILE_NAME.to_owned(),
            network_name: DEFAULT_CNI_NETWORK_NAME.to_owned(),
            plugin: CniPlugin::Bridge,
            bridge: DEFAULT_CNI_BRIDGE.to_owned(),
            mtu: None,
            data_dir: None,
        }
    }
}

impl CniConfig {
    /// Where the conflist goes.
    pub fn path(&self) -> PathBuf {
        self.conf_dir.join(&self.file_name)
    }
}

const KEYS: &[&str] = &[
    "enabled",
    "confDir",
    "fileName",
    "networkName",
    "plugin",
    "bridge",
    "mtu",
    "dataDir",
];

pub(crate) fn parse_cni(n: Node<'_, '_>, errs: &mut Errors) -> Option<CniConfig> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(KEYS, errs);
    let d = CniConfig::default();
    let enabled = Lookup::of(&obj, "enabled", errs, boolean).known(d.enabled);
    let conf_dir = Lookup::of(&obj, "confDir", errs, absolute_path).known(d.conf_dir);
    let file_name = Lookup::of(&obj, "fileName", errs, |n, e| {
        n.parse("a file name", e, check_file_name)
    })
    .known(d.file_name);
    let network_name = Lookup::of(&obj, "networkName", errs, |n, e| {
        n.parse("a CNI network name", e, check_network_name)
    })
    .known(d.network_name);
    let plugin = Lookup::of(&obj, "plugin", errs, |n, e| {
        n.parse("bridge or ptp", e, |s| match s {
            "bridge" => Ok(CniPlugin::Bridge),
            "ptp" => Ok(CniPlugin::Ptp),
            _ => Err("is not one of bridge, ptp".to_owned()),
        })
    })
    .known(d.plugin);
    let bridge = Lookup::of(&obj, "bridge", errs, |n, e| {
        n.parse("an interface name", e, check_interface_name)
    })
    .known(d.bridge);
    let mtu = Lookup::of(&obj, "mtu", errs, |n, e| {
        n.int(576, 65535, "576..65535", e)
            .and_then(|v| u16::try_from(v).ok())
    })
    .optional();
    let data_dir = Lookup::of(&obj, "dataDir", errs, absolute_path).optional();
    Some(CniConfig {
        enabled: enabled?,
        conf_dir: conf_dir?,
        file_name: file_name?,
        network_name: network_name?,
        plugin: plugin?,
        bridge: bridge?,
        mtu: mtu?,
        data_dir: data_dir?,
    })
}

/// The speaker writes on the host: a relative path would depend on its working directory.
fn absolute_path(n: Node<'_, '_>, errs: &mut Errors) -> Option<PathBuf> {
    let path = parse_path(n, errs)?;
    if path.is_absolute() {
        Some(path)
    } else {
        errs.push(n.path, "must be an absolute path");
        None
    }
}

/// Runtimes load `*.conf`, `*.conflist` and `*.json` from the dir in name order; ours must be
/// a conflist, a plain name in that dir.
fn check_file_name(s: &str) -> Result<String, String> {
    let stem = s.strip_suffix(".conflist").unwrap_or_default();
    if stem.is_empty() || s.contains('/') || s.starts_with('.') || s.len() > 255 {
        return Err(
            "is not a file name ending in .conflist (no '/', not hidden, e.g. 10-podcidr-bgp.conflist)"
                .to_owned(),
        );
    }
    Ok(s.to_owned())
}

/// CNI spec 1.0: `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`.
fn check_network_name(s: &str) -> Result<String, String> {
    let mut chars = s.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
        Ok(s.to_owned())
    } else {
        Err("is not a CNI network name (letters, digits, '_', '.', '-'; starting with a letter or digit)".to_owned())
    }
}

/// Linux: at most 15 bytes (IFNAMSIZ - 1), no '/', ':' or whitespace, not "." or "..".
fn check_interface_name(s: &str) -> Result<String, String> {
    let bad = s.is_empty()
        || s.len() > 15
        || s == "."
        || s == ".."
        || s.chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
    if bad {
        Err("is not a Linux interface name (1..15 characters, no '/', ':' or spaces)".to_owned())
    } else {
        Ok(s.to_owned())
    }
}
