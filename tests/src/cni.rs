//! A minimal CNI runtime (CNI spec 1.0, "Execution of Network Configurations"), as a container
//! runtime drives the plugins: each plugin of a conflist runs with `CNI_COMMAND`,
//! `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`, `CNI_PATH` in its environment and its config on
//! stdin, with `cniVersion` and `name` copied from the list and `prevResult` chained. The plugin
//! processes run in the host's (the node's) network namespace.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where Debian's `containernetworking-plugins` puts the plugins.
pub const DEBIAN_CNI_BIN_DIR: &str = "/usr/lib/cni";

/// True when the reference plugins the tests use are installed.
pub fn cni_plugins_available() -> bool {
    ["bridge", "ptp", "host-local", "loopback"]
        .iter()
        .all(|p| std::path::Path::new(DEBIAN_CNI_BIN_DIR).join(p).is_file())
}

/// One container's attachment: what ADD, CHECK and DEL are called with.
#[derive(Debug, Clone)]
pub struct Attachment {
    /// Namespace (`ip netns` name) the plugins run in: the node.
    pub host_ns: String,
    /// The container's namespace (`ip netns` name).
    pub pod_ns: String,
    pub container_id: String,
    pub ifname: String,
}

#[derive(Debug, Clone)]
pub struct CniRuntime {
    pub bin_dir: PathBuf,
}

impl Default for CniRuntime {
    fn default() -> Self {
        CniRuntime {
            bin_dir: PathBuf::from(DEBIAN_CNI_BIN_DIR),
        }
    }
}

impl CniRuntime {
    /// ADD: the plugins in order, each given the previous one's result; returns the last
    /// result (the one a runtime caches for CHECK and DEL).
    pub fn add(&self, conflist: &Value, a: &Attachment) -> Result<Value, String> {
        let mut prev: Option<Value> = None;
        for plugin in plugins(conflist)? {
            prev = Some(self.exec("ADD", conflist, plugin, a, prev.as_ref())?);
        }
        prev.ok_or_else(|| "the conflist has no plugins".to_owned())
    }

    /// CHECK: the plugins in order, each given the cached ADD result.
    pub fn check(&self, conflist: &Value, a: &Attachment, result: &Value) -> Result<(), String> {
        for plugin in plugins(conflist)? {
            self.exec("CHECK", conflist, plugin, a, Some(result))?;
        }
        Ok(())
    }

    /// DEL: the plugins in reverse order, each given the cached ADD result.
    pub fn del(&self, conflist: &Value, a: &Attachment, result: &Value) -> Result<(), String> {
        for plugin in plugins(conflist)?.iter().rev() {
            self.exec("DEL", conflist, plugin, a, Some(result))?;
        }
        Ok(())
    }

    fn exec(
        &self,
        command: &str,
        conflist: &Value,
        plugin: &Value,
        a: &Attachment,
        prev: Option<&Value>,
    ) -> Result<Value, String> {
        let kind = plugin["type"]
            .as_str()
            .ok_or_else(|| format!("plugin without a type: {plugin}"))?;
        let mut config = plugin.clone();
        config["cniVersion"] = conflist["cniVersion"].clone();
        config["name"] = conflist["name"].clone();
        if let Some(prev) = prev {
            config["prevResult"] = prev.clone();
        }
        let mut child = Command::new("ip")
            .args(["netns", "exec", &a.host_ns])
            .arg(self.bin_dir.join(kind))
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", &a.container_id)
            .env("CNI_NETNS", format!("/var/run/netns/{}", a.pod_ns))
            .env("CNI_IFNAME", &a.ifname)
            .env("CNI_PATH", &self.bin_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{kind}: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(config.to_string().as_bytes())
                .map_err(|e| format!("{kind}: writing its config: {e}"))?;
        }
        // Bounded: a plugin that hangs is killed (it is our child).
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().map_err(|e| e.to_string())?.is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{command} {kind}: no answer within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            // The spec's error object: {"code": N, "msg": "...", "details": "..."}.
            return Err(format!(
                "{command} {kind} failed ({}): {stdout} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        if command != "ADD" {
            return Ok(Value::Null);
        }
        serde_json::from_str(&stdout).map_err(|e| format!("{command} {kind}: {e}: {stdout}"))
    }
}

fn plugins(conflist: &Value) -> Result<&Vec<Value>, String> {
    conflist["plugins"]
        .as_array()
        .ok_or_else(|| format!("not a conflist: {conflist}"))
}

/// The addresses of an ADD result (`ips[].address`, e.g. "198.19.1.2/24").
pub fn result_addresses(result: &Value) -> Vec<ipnet::IpNet> {
    result["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["address"].as_str()?.parse().ok())
        .collect()
}
