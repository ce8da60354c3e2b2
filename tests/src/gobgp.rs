//! GoBGP as a test peer: TOML config, process ownership, `gobgp -j` queries.
//!
//! GoBGP silently drops received IPv4 routes whose next hop is in 127/8, so routes sent to
//! it need a next hop such as 198.18.0.1; and it waits 5–9 s before its own outgoing
//! connections, so neighbours default to passive (our speaker connects).

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ipnet::IpNet;
use serde_json::Value;

use crate::process::{Daemon, WorkDir, run_bounded, tail};
use crate::{TestPeerAddr, assert_gobgp, find_bin, net, wait_for};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    fn cli(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
        }
    }
}

/// One `[[neighbors]]` entry.
#[derive(Debug, Clone)]
pub struct GobgpNeighbor {
    pub address: IpAddr,
    pub peer_as: u32,
    /// `transport.config.remote-port` (where GoBGP connects; irrelevant when passive).
    pub remote_port: Option<u16>,
    pub passive: bool,
    /// eBGP multihop TTL (ignored for iBGP and with TTL security).
    pub ebgp_multihop: Option<u8>,
    pub hold_time: u16,
    pub keepalive: u16,
    pub ipv4: bool,
    pub ipv6: bool,
    pub graceful_restart: Option<u32>,
    pub auth_password: Option<String>,
    /// GTSM: `ttl-min = 255`.
    pub ttl_security: bool,
}

impl GobgpNeighbor {
    /// Passive, eBGP multihop 2, hold 90 / keepalive 30, ipv4 + ipv6 unicast.
    pub fn new(address: impl Into<IpAddr>, peer_as: u32) -> GobgpNeighbor {
        GobgpNeighbor {
            address: address.into(),
            peer_as,
            remote_port: None,
            passive: true,
            ebgp_multihop: Some(2),
            hold_time: 90,
            keepalive: 30,
            ipv4: true,
            ipv6: true,
            graceful_restart: None,
            auth_password: None,
            ttl_security: false,
        }
    }
    pub fn remote_port(mut self, port: u16) -> Self {
        self.remote_port = Some(port);
        self
    }
    pub fn passive(mut self, on: bool) -> Self {
        self.passive = on;
        self
    }
    pub fn ebgp_multihop(mut self, ttl: Option<u8>) -> Self {
        self.ebgp_multihop = ttl;
        self
    }
    pub fn timers(mut self, hold: u16, keepalive: u16) -> Self {
        self.hold_time = hold;
        self.keepalive = keepalive;
        self
    }
    pub fn families(mut self, ipv4: bool, ipv6: bool) -> Self {
        self.ipv4 = ipv4;
        self.ipv6 = ipv6;
        self
    }
    pub fn graceful_restart(mut self, restart_time: u32) -> Self {
        self.graceful_restart = Some(restart_time);
        self
    }
    pub fn auth_password(mut self, pw: &str) -> Self {
        self.auth_password = Some(pw.to_owned());
        self
    }
    pub fn ttl_security(mut self, on: bool) -> Self {
        self.ttl_security = on;
        self
    }
}

/// A route GoBGP originates (`gobgp global rib add`) once started.
#[derive(Debug, Clone)]
pub struct GobgpRoute {
    pub prefix: IpNet,
    pub next_hop: IpAddr,
    /// Extra `gobgp global rib add` arguments, e.g. `["community", "65000:1", "med", "5"]`.
    pub args: Vec<String>,
}

impl GobgpRoute {
    pub fn new(prefix: &str, next_hop: impl Into<IpAddr>) -> GobgpRoute {
        let prefix = prefix
            .parse()
            .unwrap_or_else(|e| panic!("bad prefix {prefix:?}: {e}"));
        GobgpRoute {
            prefix,
            next_hop: next_hop.into(),
            args: Vec::new(),
        }
    }
    pub fn arg(mut self, a: &str) -> Self {
        self.args.extend(a.split_whitespace().map(str::to_owned));
        self
    }
}

#[derive(Debug, Clone)]
pub struct GobgpConfig {
    pub asn: u32,
    pub router_id: std::net::Ipv4Addr,
    pub listen_addr: IpAddr,
    pub listen_port: u16,
    pub neighbors: Vec<GobgpNeighbor>,
    pub routes: Vec<GobgpRoute>,
    /// Start with `-r` (graceful-restart restarting: R and F bits set).
    pub restarting: bool,
    /// A whole gobgpd.toml written as is (docs/tor.md's blocks), in place of the rendered
    /// neighbors; it must listen on `listen_addr:listen_port` itself.
    pub raw: Option<String>,
}

impl GobgpConfig {
    /// GoBGP listening on `listen` (own IPv4 address: port 179; `::1`: a free port).
    pub fn new(listen: impl Into<IpAddr>, asn: u32) -> GobgpConfig {
        let listen = listen.into();
        let router_id = match listen {
            IpAddr::V4(a) => a,
            IpAddr::V6(_) => net::alloc_v4(),
        };
        GobgpConfig {
            asn,
            router_id,
            listen_addr: listen,
            listen_port: net::bgp_port_for(listen),
            neighbors: Vec::new(),
            routes: Vec::new(),
            restarting: false,
            raw: None,
        }
    }
    /// `text` as gobgpd.toml, its `[global.config]` given this config's listen address and
    /// port (the line after `router-id`).
    pub fn raw(mut self, text: &str) -> Self {
        let listen = format!(
            "  port = {}\n  local-address-list = [\"{}\"]\n",
            self.listen_port, self.listen_addr
        );
        let (head, tail) = text
            .split_once("  router-id = ")
            .and_then(|(h, t)| Some((h, t.split_once('\n')?)))
            .map(|(h, (id, rest))| (format!("{h}  router-id = {id}\n{listen}"), rest))
            .expect("a gobgpd.toml with a router-id line");
        self.raw = Some(head + tail);
        self
    }
    pub fn port(mut self, port: u16) -> Self {
        self.listen_port = port;
        self
    }
    pub fn neighbor(mut self, n: GobgpNeighbor) -> Self {
        self.neighbors.push(n);
        self
    }
    pub fn route(mut self, r: GobgpRoute) -> Self {
        self.routes.push(r);
        self
    }
    pub fn restarting(mut self, on: bool) -> Self {
        self.restarting = on;
        self
    }

    pub fn peer_addr(&self) -> TestPeerAddr {
        TestPeerAddr {
            addr: self.listen_addr,
            port: self.listen_port,
            asn: self.asn,
        }
    }

    pub fn render(&self) -> String {
        if let Some(raw) = &self.raw {
            return raw.clone();
        }
        let mut c = String::new();
        let _ = writeln!(
            c,
            "[global.config]\n  as = {}\n  router-id = \"{}\"\n  port = {}\n  local-address-list = [\"{}\"]",
            self.asn, self.router_id, self.listen_port, self.listen_addr
        );
        for n in &self.neighbors {
            let _ = writeln!(
                c,
                "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = \"{}\"\n    peer-as = {}",
                n.address, n.peer_as
            );
            if let Some(pw) = &n.auth_password {
                let _ = writeln!(c, "    auth-password = \"{pw}\"");
            }
            let _ = writeln!(
                c,
                "  [neighbors.transport.config]\n    local-address = \"{}\"\n    passive-mode = {}",
                self.listen_addr, n.passive
            );
            if let Some(p) = n.remote_port {
                let _ = writeln!(c, "    remote-port = {p}");
            }
            if n.ttl_security {
                c.push_str(
                    "  [neighbors.ttl-security.config]\n    enabled = true\n    ttl-min = 255\n",
                );
            } else if let Some(ttl) = n.ebgp_multihop.filter(|_| n.peer_as != self.asn) {
                let _ = writeln!(
                    c,
                    "  [neighbors.ebgp-multihop.config]\n    enabled = true\n    multihop-ttl = {ttl}"
                );
            }
            // idle-hold-time-after-reset 1: GoBGP otherwise refuses the peer for 30 s.
            let _ = writeln!(
                c,
                "  [neighbors.timers.config]\n    hold-time = {}\n    keepalive-interval = {}\n    connect-retry = 1\n    idle-hold-time-after-reset = 1",
                n.hold_time, n.keepalive
            );
            if let Some(t) = n.graceful_restart {
                let _ = writeln!(
                    c,
                    "  [neighbors.graceful-restart.config]\n    enabled = true\n    restart-time = {t}"
                );
            }
            for (on, name) in [(n.ipv4, "ipv4-unicast"), (n.ipv6, "ipv6-unicast")] {
                if !on {
                    continue;
                }
                let _ = writeln!(
                    c,
                    "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = \"{name}\""
                );
                if n.graceful_restart.is_some() {
                    c.push_str("    [neighbors.afi-safis.mp-graceful-restart.config]\n      enabled = true\n");
                }
            }
        }
        c
    }
}

/// A neighbour as GoBGP reports it (`gobgp neighbor ADDR -j`).
#[derive(Debug, Clone, PartialEq)]
pub struct GobgpNeighborState {
    pub address: Option<IpAddr>,
    pub peer_as: Option<u32>,
    /// "IDLE", "CONNECT", "ACTIVE", "OPENSENT", "OPENCONFIRM", "ESTABLISHED", "UNKNOWN".
    pub state: String,
    pub negotiated_hold_time: Option<u64>,
    /// Per family (ipv4, ipv6): (received, accepted, advertised).
    pub ipv4: (u64, u64, u64),
    pub ipv6: (u64, u64, u64),
    pub raw: Value,
}

impl GobgpNeighborState {
    pub fn is_established(&self) -> bool {
        self.state == "ESTABLISHED"
    }

    /// Parses one neighbour object of `gobgp neighbor -j`.
    pub fn from_json(v: &Value) -> GobgpNeighborState {
        let st = &v["state"];
        // Proto enums come out as numbers here (3.10); accept names too.
        let state = match &st["session_state"] {
            Value::String(s) => s.trim_start_matches("BGP_FSM_").to_uppercase(),
            other => match other.as_u64().unwrap_or(0) {
                1 => "IDLE",
                2 => "CONNECT",
                3 => "ACTIVE",
                4 => "OPENSENT",
                5 => "OPENCONFIRM",
                6 => "ESTABLISHED",
                _ => "UNKNOWN",
            }
            .to_owned(),
        };
        let mut fam = [(0, 0, 0); 2];
        for a in v["afi_safis"].as_array().into_iter().flatten() {
            let s = &a["state"];
            let idx = match s["family"]["afi"].as_u64() {
                Some(1) => 0,
                Some(2) => 1,
                _ => continue,
            };
            let n = |k: &str| s[k].as_u64().unwrap_or(0);
            fam[idx] = (n("received"), n("accepted"), n("advertised"));
        }
        GobgpNeighborState {
            address: st["neighbor_address"].as_str().and_then(|a| a.parse().ok()),
            peer_as: st["peer_asn"].as_u64().map(|a| a as u32),
            state,
            negotiated_hold_time: v["timers"]["state"]["negotiated_hold_time"].as_u64(),
            ipv4: fam[0],
            ipv6: fam[1],
            raw: v.clone(),
        }
    }
}

/// A path from `gobgp global rib -j` or `neighbor ADDR adj-in -j`.
#[derive(Debug, Clone, PartialEq)]
pub struct GobgpPath {
    pub prefix: IpNet,
    /// NEXT_HOP (type 3) or MP_REACH_NLRI's next hop (type 14).
    pub next_hop: Option<IpAddr>,
    /// 0 IGP, 1 EGP, 2 INCOMPLETE.
    pub origin: Option<u64>,
    pub as_path: Vec<u32>,
    pub med: Option<u32>,
    pub local_pref: Option<u32>,
    pub communities: Vec<(u16, u16)>,
    pub large_communities: Vec<(u32, u32, u32)>,
    pub best: bool,
    pub stale: bool,
    pub neighbor_ip: Option<IpAddr>,
    pub raw: Value,
}

/// Parses `gobgp … rib -j` output: `{"prefix": [path, …], …}`; empty output is no paths.
pub fn parse_rib_json(text: &str) -> Result<Vec<GobgpPath>, String> {
    let text = text.trim();
    if text.is_empty() || text == "null" {
        return Ok(Vec::new());
    }
    let v: Value = serde_json::from_str(text).map_err(|e| format!("{e}: {text}"))?;
    let mut out = Vec::new();
    for (prefix, paths) in v.as_object().into_iter().flatten() {
        let Ok(prefix) = prefix.parse::<IpNet>() else {
            continue;
        };
        for p in paths.as_array().into_iter().flatten() {
            out.push(parse_path(prefix, p));
        }
    }
    Ok(out)
}

fn parse_path(prefix: IpNet, p: &Value) -> GobgpPath {
    let mut path = GobgpPath {
        prefix,
        next_hop: None,
        origin: None,
        as_path: Vec::new(),
        med: None,
        local_pref: None,
        communities: Vec::new(),
        large_communities: Vec::new(),
        best: p["best"].as_bool().unwrap_or(false),
        stale: p["stale"].as_bool().unwrap_or(false),
        neighbor_ip: p["neighbor-ip"].as_str().and_then(|a| a.parse().ok()),
        raw: p.clone(),
    };
    let u32_of = |v: &Value| v.as_u64().map(|n| n as u32);
    for a in p["attrs"].as_array().into_iter().flatten() {
        match a["type"].as_u64() {
            Some(1) => path.origin = a["value"].as_u64(),
            Some(2) => {
                for seg in a["as_paths"].as_array().into_iter().flatten() {
                    path.as_path.extend(
                        seg["asns"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(u32_of),
                    );
                }
            }
            // NEXT_HOP wins over MP_REACH_NLRI's next hop.
            Some(t @ (3 | 14)) if t == 3 || path.next_hop.is_none() => {
                path.next_hop = a["nexthop"].as_str().and_then(|n| n.parse().ok());
            }
            Some(4) => path.med = u32_of(&a["metric"]),
            Some(5) => path.local_pref = u32_of(&a["value"]),
            Some(8) => {
                path.communities = a["communities"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.as_u64())
                    .map(|c| ((c >> 16) as u16, c as u16))
                    .collect();
            }
            Some(32) => {
                path.large_communities = a["value"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|l| {
                        Some((
                            u32_of(&l["ASN"])?,
                            u32_of(&l["LocalData1"])?,
                            u32_of(&l["LocalData2"])?,
                        ))
                    })
                    .collect();
            }
            _ => {}
        }
    }
    path
}

/// A running gobgpd owned by the test: stopped on drop (by PID), temp dir removed.
#[derive(Debug)]
pub struct Gobgp {
    daemon: Daemon,
    config: GobgpConfig,
    api_port: u16,
    log: PathBuf,
    conf: PathBuf,
    // Last: dropped after the daemon has stopped.
    dir: WorkDir,
}

impl Gobgp {
    /// Writes the config, starts gobgpd, waits (≤15 s) for its API, adds `config.routes`.
    pub fn start(config: GobgpConfig) -> Gobgp {
        assert_gobgp();
        let dir = WorkDir::new("gobgp");
        let conf = dir.file("gobgpd.toml");
        std::fs::write(&conf, config.render()).expect("writing gobgpd.toml");
        let log = dir.file("gobgpd.log");
        let api_port = net::free_port(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        let daemon = Self::spawn(&config, &conf, &log, api_port);
        let mut g = Gobgp {
            daemon,
            config,
            api_port,
            log,
            conf,
            dir,
        };
        g.wait_api();
        for r in g.config.routes.clone() {
            g.add_route(&r);
        }
        g
    }

    fn spawn(
        config: &GobgpConfig,
        conf: &std::path::Path,
        log: &std::path::Path,
        api: u16,
    ) -> Daemon {
        let mut cmd = Command::new(find_bin("gobgpd").expect("gobgpd binary"));
        cmd.arg("-f")
            .arg(conf)
            .args(["-t", "toml", "--pprof-disable"]);
        cmd.arg("--api-hosts").arg(format!("127.0.0.1:{api}"));
        if config.restarting {
            cmd.arg("-r");
        }
        Daemon::spawn("gobgpd", cmd, log)
    }

    fn wait_api(&mut self) {
        let port = self.api_port;
        let daemon = &mut self.daemon;
        let ok = wait_for(Duration::from_secs(15), || {
            !daemon.is_running() || cli(port, &["global", "-j"]).is_ok()
        });
        if !ok || !self.daemon.is_running() {
            panic!(
                "gobgpd did not start:\n{}\n--- config ---\n{}",
                tail(&self.log, 20),
                std::fs::read_to_string(&self.conf).unwrap_or_default()
            );
        }
    }

    /// Kills gobgpd (SIGKILL, no NOTIFICATION) and starts it again from the same config,
    /// with `-r` if `restarting`; the temp dir and API port are kept.
    pub fn crash_and_restart(&mut self, restarting: bool) {
        self.daemon.kill();
        self.config.restarting = restarting;
        self.daemon = Self::spawn(&self.config, &self.conf, &self.log, self.api_port);
        self.wait_api();
        for r in self.config.routes.clone() {
            self.add_route(&r);
        }
    }

    pub fn config(&self) -> &GobgpConfig {
        &self.config
    }

    /// Where our speaker should connect (GoBGP's listen address and port, its AS).
    pub fn peer_addr(&self) -> TestPeerAddr {
        self.config.peer_addr()
    }

    pub fn pid(&self) -> u32 {
        self.daemon.pid()
    }

    /// The temp dir holding config, control socket and logs (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn api_port(&self) -> u16 {
        self.api_port
    }

    pub fn is_running(&mut self) -> bool {
        self.daemon.is_running()
    }

    /// Runs `gobgp -p PORT ARGS…` (10 s bound); stdout on success.
    pub fn cli(&self, args: &[&str]) -> Result<String, String> {
        cli(self.api_port, args)
    }

    fn cli_ok(&self, args: &[&str]) -> String {
        self.cli(args)
            .unwrap_or_else(|e| panic!("gobgp {args:?}: {e}\n{}", self.diagnostics()))
    }

    /// The neighbour's state, or None if GoBGP does not know it.
    pub fn neighbor(&self, addr: IpAddr) -> Option<GobgpNeighborState> {
        let text = self.cli(&["neighbor", &addr.to_string(), "-j"]).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        Some(GobgpNeighborState::from_json(&v))
    }

    pub fn neighbors(&self) -> Vec<GobgpNeighborState> {
        let text = self.cli_ok(&["neighbor", "-j"]);
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        v.as_array()
            .into_iter()
            .flatten()
            .map(GobgpNeighborState::from_json)
            .collect()
    }

    /// `global rib -a FAMILY -j`: GoBGP's Loc-RIB.
    pub fn rib(&self, family: Family) -> Vec<GobgpPath> {
        let text = self.cli_ok(&["global", "rib", "-a", family.cli(), "-j"]);
        parse_rib_json(&text).unwrap_or_else(|e| panic!("gobgp rib: {e}"))
    }

    /// `neighbor ADDR adj-in -a FAMILY -j`: what the neighbour sent, before policy.
    pub fn adj_in(&self, addr: IpAddr, family: Family) -> Vec<GobgpPath> {
        let text = self.cli_ok(&[
            "neighbor",
            &addr.to_string(),
            "adj-in",
            "-a",
            family.cli(),
            "-j",
        ]);
        parse_rib_json(&text).unwrap_or_else(|e| panic!("gobgp adj-in: {e}"))
    }

    /// `neighbor ADDR adj-out -a FAMILY -j`: what GoBGP sends the neighbour.
    pub fn adj_out(&self, addr: IpAddr, family: Family) -> Vec<GobgpPath> {
        let text = self.cli_ok(&[
            "neighbor",
            &addr.to_string(),
            "adj-out",
            "-a",
            family.cli(),
            "-j",
        ]);
        parse_rib_json(&text).unwrap_or_else(|e| panic!("gobgp adj-out: {e}"))
    }

    /// `global rib add` (~20 ms per call: for bulk, use GoBGP's gRPC stream instead).
    pub fn add_route(&self, r: &GobgpRoute) {
        let fam = if r.prefix.addr().is_ipv4() {
            "ipv4"
        } else {
            "ipv6"
        };
        let (p, nh) = (r.prefix.to_string(), r.next_hop.to_string());
        let mut args = vec!["global", "rib", "add", "-a", fam, &p, "nexthop", &nh];
        args.extend(r.args.iter().map(String::as_str));
        self.cli_ok(&args);
    }

    pub fn del_route(&self, prefix: IpNet) {
        let fam = if prefix.addr().is_ipv4() {
            "ipv4"
        } else {
            "ipv6"
        };
        self.cli_ok(&["global", "rib", "del", "-a", fam, &prefix.to_string()]);
    }

    /// `neighbor ADDR enable|disable|reset|softresetin|softresetout|shutdown …`.
    pub fn neighbor_cmd(&self, addr: IpAddr, args: &[&str]) {
        let a = addr.to_string();
        let mut all = vec!["neighbor", a.as_str()];
        all.extend_from_slice(args);
        self.cli_ok(&all);
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_contains(&self, text: &str) -> bool {
        self.log().contains(text)
    }

    pub fn stop_signal(&mut self) {
        self.daemon.signal(libc::SIGSTOP);
    }

    pub fn cont_signal(&mut self) {
        self.daemon.signal(libc::SIGCONT);
    }

    pub fn wait_until(&self, timeout: Duration, mut f: impl FnMut(&Gobgp) -> bool) -> bool {
        wait_for(timeout, || f(self))
    }

    /// Waits for `addr` to be ESTABLISHED; panics with diagnostics otherwise.
    pub fn wait_established(&self, addr: IpAddr, timeout: Duration) -> GobgpNeighborState {
        let mut last = None;
        let ok = self.wait_until(timeout, |g| {
            last = g.neighbor(addr);
            last.as_ref()
                .is_some_and(GobgpNeighborState::is_established)
        });
        match last {
            Some(n) if ok => n,
            _ => panic!(
                "GoBGP neighbour {addr} not ESTABLISHED after {timeout:?}: {:?}\n{}",
                last.map(|n| n.state),
                self.diagnostics()
            ),
        }
    }

    pub fn diagnostics(&self) -> String {
        format!(
            "--- gobgp neighbor ---\n{}\n--- gobgpd.log (tail) ---\n{}",
            self.cli(&["neighbor"]).unwrap_or_else(|e| e),
            tail(&self.log, 30)
        )
    }
}

fn cli(port: u16, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new(find_bin("gobgp").ok_or("gobgp binary not found")?);
    cmd.arg("-p").arg(port.to_string()).args(args);
    let out = run_bounded(cmd, Duration::from_secs(10))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

#[cfg(test)]
#[path = "gobgp_tests.rs"]
mod tests;
