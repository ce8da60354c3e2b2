//! The node's CNI network configuration, pure: the conflist the standard plugins read
//! (`bridge` or `ptp` with `host-local` IPAM over exactly the announced pod CIDRs), and what
//! the core knows about writing it. The file itself is written by `cni_io`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use podcidr_config::{CniConfig, CniPlugin};
use serde_json::{Value, json};

use super::guard::Guarded;

/// A failed write is retried this long after the failure (or at once when the content
/// changes).
pub const RETRY_AFTER: Duration = Duration::from_secs(10);

/// The file on disk is compared with what it should hold this often (a write happens only
/// if it differs): a conflist deleted or overwritten by hand, or by another installer, comes
/// back without a restart.
pub const RECHECK_AFTER: Duration = Duration::from_secs(60);

/// CNI spec version of the conflist; the reference plugins support it from v1.0.0.
pub const CNI_VERSION: &str = "1.0.0";

/// The conflist for `cidrs` (one host-local range set per family), or `None` when there is
/// no CIDR to hand out.
pub fn conflist(cfg: &CniConfig, cidrs: &[IpNet]) -> Option<String> {
    let range = |net: &IpNet| json!({ "subnet": net.trunc().to_string() });
    let v4: Vec<Value> = cidrs
        .iter()
        .filter(|n| matches!(n, IpNet::V4(_)))
        .map(range)
        .collect();
    let v6: Vec<Value> = cidrs
        .iter()
        .filter(|n| matches!(n, IpNet::V6(_)))
        .map(range)
        .collect();
    let mut ranges = Vec::new();
    let mut routes = Vec::new();
    if !v4.is_empty() {
        ranges.push(Value::Array(v4));
        routes.push(json!({ "dst": "0.0.0.0/0" }));
    }
    if !v6.is_empty() {
        ranges.push(Value::Array(v6));
        routes.push(json!({ "dst": "::/0" }));
    }
    if ranges.is_empty() {
        return None;
    }
    let mut ipam = json!({ "type": "host-local", "ranges": ranges, "routes": routes });
    if let Some(dir) = &cfg.data_dir {
        ipam["dataDir"] = json!(dir.display().to_string());
    }
    // Routed pods: the routers learn the node's CIDRs, so no masquerading.
    let mut plugin = match cfg.plugin {
        CniPlugin::Bridge => json!({
            "type": "bridge",
            "bridge": cfg.bridge,
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
        }),
        CniPlugin::Ptp => json!({ "type": "ptp", "ipMasq": false }),
    };
    if let Some(mtu) = cfg.mtu {
        plugin["mtu"] = json!(mtu);
    }
    plugin["ipam"] = ipam;
    let doc = json!({
        "cniVersion": CNI_VERSION,
        "name": cfg.network_name,
        "plugins": [plugin],
    });
    // Serialising a `Value` cannot fail.
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    Some(text)
}

/// The conflist to write: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniFile {
    pub path: PathBuf,
    pub content: Arc<str>,
}

/// How the node's conflist stands, for the `CNIConfigured` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniCondition {
    pub ok: bool,
    pub reason: &'static str,
    pub message: String,
}

/// What the core knows about the conflist.
#[derive(Debug, Default, Clone)]
pub struct CniState {
    /// Last file written (or found identical on disk), and when.
    written: Option<(CniFile, Duration)>,
    in_flight: Option<CniFile>,
    /// Last failure: the file, the error and the monotonic time.
    failed: Option<(CniFile, String, Duration)>,
    now: Duration,
    /// The CIDRs the file in flight and the file last written hand out (the forwarding
    /// gate's view).
    in_flight_cidrs: Vec<IpNet>,
    written_cidrs: Vec<IpNet>,
}

impl CniState {
    pub fn set_now(&mut self, now: Duration) {
        self.now = now;
    }

    /// A recheck of the file on disk or a retry of a failed write is due (nothing to do
    /// otherwise until the announced set or the config changes).
    pub fn due(&self) -> bool {
        if self.in_flight.is_some() {
            return false;
        }
        let since = |at: Duration| self.now.saturating_sub(at);
        self.written
            .as_ref()
            .is_some_and(|(_, at)| since(*at) >= RECHECK_AFTER)
            || self
                .failed
                .as_ref()
                .is_some_and(|(_, _, at)| since(*at) >= RETRY_AFTER)
    }

    /// The file the announced set calls for, if it differs from what is on disk and no
    /// write is in flight. Nothing before the first guarded set, nothing without CIDRs.
    pub fn plan(&mut self, cfg: &CniConfig, guarded: Option<&Guarded>) -> Option<CniFile> {
        let want = wanted(cfg, guarded)?;
        if self.in_flight.is_some() {
            return None;
        }
        if let Some((file, at)) = &self.written
            && *file == want
            && self.now.saturating_sub(*at) < RECHECK_AFTER
        {
            return None;
        }
        if let Some((file, _, at)) = &self.failed
            && *file == want
            && self.now.saturating_sub(*at) < RETRY_AFTER
        {
            return None;
        }
        self.in_flight = Some(want.clone());
        self.in_flight_cidrs = guarded.map(|g| g.announce.clone()).unwrap_or_default();
        Some(want)
    }

    /// A write has finished since the process started (written, or found unchanged, or
    /// failed): until then what is on disk is not known.
    pub fn settled(&self) -> bool {
        self.written.is_some() || self.failed.is_some()
    }

    /// The CIDRs the conflist at `cfg`'s path hands out, as last written.
    pub fn written_cidrs(&self, cfg: &CniConfig) -> &[IpNet] {
        match &self.written {
            Some((f, _)) if f.path == cfg.path() => &self.written_cidrs,
            _ => &[],
        }
    }

    /// A write finished.
    pub fn finished(&mut self, file: CniFile, result: Result<(), String>) {
        let cidrs = if self.in_flight.as_ref() == Some(&file) {
            self.in_flight = None;
            Some(std::mem::take(&mut self.in_flight_cidrs))
        } else {
            None
        };
        match result {
            Ok(()) => {
                self.failed = None;
                if let Some(cidrs) = cidrs {
                    self.written_cidrs = cidrs;
                } else if self.written.as_ref().is_none_or(|(f, _)| *f != file) {
                    // A file not planned here: what it hands out is not known.
                    self.written_cidrs.clear();
                }
                self.written = Some((file, self.now));
            }
            Err(e) => self.failed = Some((file, e, self.now)),
        }
    }

    /// `None` when `cni` is off (no condition at all).
    pub fn condition(&self, cfg: &CniConfig, guarded: Option<&Guarded>) -> Option<CniCondition> {
        if !cfg.enabled {
            return None;
        }
        let path = cfg.path();
        let c = |ok, reason, message: String| {
            Some(CniCondition {
                ok,
                reason,
                message,
            })
        };
        let Some(g) = guarded else {
            return c(
                false,
                "SourceNotReady",
                format!("{} is written once the source is ready", path.display()),
            );
        };
        let Some(want) = wanted(cfg, Some(g)) else {
            return c(
                false,
                "NoPodCIDRs",
                format!(
                    "no pod CIDR is announced; {} keeps its last ranges",
                    path.display()
                ),
            );
        };
        if self.written.as_ref().is_some_and(|(f, _)| *f == want) {
            let cidrs: Vec<String> = g.announce.iter().map(ToString::to_string).collect();
            return c(
                true,
                "Written",
                format!("{} hands out {}", path.display(), cidrs.join(", ")),
            );
        }
        match &self.failed {
            Some((file, e, _)) if *file == want => c(false, "WriteFailed", e.clone()),
            _ => c(
                false,
                "Pending",
                format!("{} is being written", path.display()),
            ),
        }
    }
}

fn wanted(cfg: &CniConfig, guarded: Option<&Guarded>) -> Option<CniFile> {
    if !cfg.enabled {
        return None;
    }
    let content = conflist(cfg, &guarded?.announce)?;
    Some(CniFile {
        path: cfg.path(),
        content: content.into(),
    })
}

#[cfg(test)]
mod tests;
