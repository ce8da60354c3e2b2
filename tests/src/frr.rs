//! FRR's `bgpd` as a test peer, standalone: no zebra (`-Z`), nothing installed in the kernel
//! (`-n`), listening only on its own loopback address, queried through `vtysh` on a private
//! vty socket directory. Started from a config text, so documented snippets run as written.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ipnet::IpNet;
use serde_json::Value;

use crate::process::{Daemon, WorkDir, run_bounded, tail};
use crate::{INSTALL_HINT, wait_for};

const BGPD: &str = "/usr/lib/frr/bgpd";

/// True when FRR's `bgpd` and `vtysh` are installed.
pub fn frr_available() -> bool {
    std::path::Path::new(BGPD).is_file() && crate::find_bin("vtysh").is_some()
}

/// For a fixture that starts FRR: fails, naming the install script, when FRR is missing.
pub fn assert_frr() {
    assert!(
        frr_available(),
        "FRR (`/usr/lib/frr/bgpd`, `vtysh`) not found: {INSTALL_HINT}"
    );
}

/// A running `bgpd` owned by the test: stopped on drop (by PID), temp dir removed.
#[derive(Debug)]
pub struct Frr {
    daemon: Daemon,
    vty_dir: PathBuf,
    log: PathBuf,
    config: String,
    // Last: dropped after the daemon has stopped.
    dir: WorkDir,
}

impl Frr {
    /// Writes `config` (FRR's integrated config syntax), starts `bgpd` listening on
    /// `listen:179` and waits (≤10 s) until `vtysh` reaches it.
    pub fn start(config: &str, listen: IpAddr) -> Frr {
        assert_frr();
        let dir = WorkDir::new("frr");
        let conf = dir.file("bgpd.conf");
        let log = dir.file("bgpd.log");
        let vty_dir = dir.path().to_owned();
        std::fs::write(&conf, format!("hostname tor\n{config}\n")).expect("writing bgpd.conf");
        let mut cmd = Command::new(BGPD);
        cmd.arg("-f").arg(&conf);
        cmd.arg("-i").arg(dir.file("bgpd.pid"));
        cmd.arg("--vty_socket").arg(&vty_dir);
        cmd.arg("-z").arg(dir.file("zserv.api"));
        // No zebra, no kernel routes, no user switch, no TCP vty port.
        cmd.args(["-Z", "-n", "-S", "-P", "0", "-p", "179"]);
        cmd.arg("-l").arg(listen.to_string());
        cmd.arg("--log").arg(format!("file:{}", log.display()));
        let daemon = Daemon::spawn("bgpd", cmd, &dir.file("bgpd.out"));
        let mut f = Frr {
            daemon,
            vty_dir,
            log,
            config: config.to_owned(),
            dir,
        };
        let ready = wait_for(Duration::from_secs(10), || {
            !f.daemon.is_running() || f.vtysh("show version").is_ok()
        });
        if !ready || !f.daemon.is_running() {
            panic!(
                "bgpd did not start:\n{}\n--- config ---\n{config}",
                tail(&f.dir.file("bgpd.out"), 20)
            );
        }
        f
    }

    /// One `vtysh -c` command against this bgpd.
    pub fn vtysh(&self, command: &str) -> Result<String, String> {
        let mut cmd = Command::new(crate::find_bin("vtysh").ok_or("no vtysh")?);
        cmd.arg("--vty_socket")
            .arg(&self.vty_dir)
            .args(["-d", "bgpd", "-c", command]);
        let out = run_bounded(cmd, Duration::from_secs(10))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "vtysh -c {command:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    pub fn json(&self, command: &str) -> Result<Value, String> {
        let text = self.vtysh(command)?;
        serde_json::from_str(&text).map_err(|e| format!("{command}: {e}: {text}"))
    }

    /// The prefixes in the BGP table of `family` (`ipv4` or `ipv6`): what the import policy
    /// accepted.
    pub fn prefixes(&self, family: &str) -> BTreeSet<IpNet> {
        self.json(&format!("show bgp {family} unicast json"))
            .ok()
            .and_then(|v| v["routes"].as_object().cloned())
            .map(|routes| routes.keys().filter_map(|k| k.parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Established sessions (`show bgp summary`), over all families.
    pub fn established(&self) -> usize {
        let Ok(v) = self.json("show bgp summary json") else {
            return 0;
        };
        let peers: BTreeSet<String> = ["ipv4Unicast", "ipv6Unicast"]
            .iter()
            .filter_map(|f| v[*f]["peers"].as_object())
            .flatten()
            .filter(|(_, p)| p["state"] == "Established")
            .map(|(k, _)| k.clone())
            .collect();
        peers.len()
    }

    /// Whether bgpd still runs (a message it cannot parse may abort it).
    pub fn is_running(&mut self) -> bool {
        self.daemon.is_running()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Config, summary and log tail, for assertion messages.
    pub fn diagnostics(&self) -> String {
        format!(
            "--- config ---\n{}\n--- show bgp summary ---\n{}\n--- bgpd.log (tail) ---\n{}",
            self.config,
            self.vtysh("show bgp summary").unwrap_or_else(|e| e),
            tail(&self.log, 30)
        )
    }

    pub fn wait_until(&self, timeout: Duration, mut f: impl FnMut(&Frr) -> bool) -> bool {
        wait_for(timeout, || f(self))
    }
}
