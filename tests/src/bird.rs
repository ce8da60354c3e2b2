//! BIRD 2 as a test peer: config builder, process ownership, control-socket queries.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ipnet::IpNet;

pub use crate::bird_config::{
    BirdConfig, BirdNeighbor, DEFAULT_V4_NEXT_HOP, DEFAULT_V6_NEXT_HOP, Export, KernelConfig,
    StaticRoute,
};
use crate::bird_parse::{self, BirdRoute, ProtocolInfo};
use crate::process::{Daemon, WorkDir, tail};
use crate::{TestPeerAddr, assert_bird, find_bin, wait_for};

/// Which routes [`Bird::routes`] asks for.
#[derive(Debug, Clone, Default)]
pub struct RouteQuery {
    pub protocol: Option<String>,
    pub table: Option<String>,
    pub prefix: Option<IpNet>,
}

impl RouteQuery {
    /// Every table.
    pub fn all() -> RouteQuery {
        RouteQuery::default()
    }
    /// Routes from one protocol, all tables.
    pub fn protocol(name: &str) -> RouteQuery {
        RouteQuery {
            protocol: Some(name.to_owned()),
            ..Default::default()
        }
    }
    /// `master4` or `master6`.
    pub fn table(mut self, table: &str) -> Self {
        self.table = Some(table.to_owned());
        self
    }
    pub fn prefix(mut self, p: IpNet) -> Self {
        self.prefix = Some(p);
        self
    }
    fn command(&self) -> String {
        let mut c = "show route".to_owned();
        if let Some(p) = self.prefix {
            let _ = write!(c, " {p}");
        }
        if let Some(t) = &self.table {
            let _ = write!(c, " table {t}");
        }
        if let Some(p) = &self.protocol {
            let _ = write!(c, " protocol {p}");
        }
        c.push_str(" all");
        c
    }
}

/// A running BIRD owned by the test: stopped on drop (by PID), temp dir removed.
#[derive(Debug)]
pub struct Bird {
    daemon: Daemon,
    config: BirdConfig,
    socket: PathBuf,
    log: PathBuf,
    // Last: dropped after the daemon has stopped.
    dir: WorkDir,
}

impl Bird {
    /// Writes the config, starts `bird -f` and waits (≤10 s) until it answers on its socket.
    pub fn start(config: BirdConfig) -> Bird {
        assert_bird();
        let dir = WorkDir::new("bird");
        let conf = dir.file("bird.conf");
        let socket = dir.file("bird.ctl");
        let log = dir.file("bird.log");
        std::fs::write(&conf, config.render(&log)).expect("writing bird.conf");
        let bird = find_bin("bird").expect("bird binary");
        // -f: stay in the foreground, so the child PID is BIRD's own.
        let mut cmd = match &config.netns {
            Some(ns) => {
                let mut c = Command::new(find_bin("ip").expect("ip binary"));
                c.args(["netns", "exec", ns]).arg(bird);
                c
            }
            None => Command::new(bird),
        };
        cmd.arg("-f").arg("-c").arg(&conf).arg("-s").arg(&socket);
        cmd.arg("-P").arg(dir.file("bird.pid"));
        let daemon = Daemon::spawn("bird", cmd, &dir.file("bird.out"));
        let mut b = Bird {
            daemon,
            config,
            socket,
            log,
            dir,
        };
        let ready = wait_for(Duration::from_secs(10), || {
            !b.daemon.is_running() || control(&b.socket, "show status").is_ok()
        });
        if !ready || !b.daemon.is_running() {
            panic!(
                "BIRD did not start (config {}):\n{}\n--- config ---\n{}",
                conf.display(),
                tail(&b.dir.file("bird.out"), 20),
                std::fs::read_to_string(&conf).unwrap_or_default()
            );
        }
        b
    }

    pub fn config(&self) -> &BirdConfig {
        &self.config
    }

    /// Where a speaker configured as neighbour `name` should connect.
    pub fn peer_addr(&self, name: &str) -> TestPeerAddr {
        self.config.peer_addr(name)
    }

    pub fn pid(&self) -> u32 {
        self.daemon.pid()
    }

    /// The temp dir holding config, control socket and logs (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn is_running(&mut self) -> bool {
        self.daemon.is_running()
    }

    /// Runs one CLI command over the control socket (5 s timeout); text as birdc prints it.
    pub fn cmd(&self, command: &str) -> Result<String, String> {
        control(&self.socket, command)
    }

    fn cmd_ok(&self, command: &str) -> String {
        self.cmd(command)
            .unwrap_or_else(|e| panic!("birdc {command}: {e}\n{}", self.diagnostics()))
    }

    /// `show protocols all NAME`; panics if the protocol does not exist.
    pub fn protocol(&self, name: &str) -> ProtocolInfo {
        let text = self.cmd_ok(&format!("show protocols all {name}"));
        bird_parse::parse_protocols(&text)
            .into_iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no protocol {name} in:\n{text}"))
    }

    /// `show protocols all`.
    pub fn protocols(&self) -> Vec<ProtocolInfo> {
        bird_parse::parse_protocols(&self.cmd_ok("show protocols all"))
    }

    /// `show route … all`, with `stale` set for routes kept over a neighbour's graceful
    /// restart (channel GR active and the route older than the current session state).
    pub fn routes(&self, q: &RouteQuery) -> Vec<BirdRoute> {
        let mut routes = bird_parse::parse_routes(&self.cmd_ok(&q.command()));
        let mut protos: HashMap<String, Option<ProtocolInfo>> = HashMap::new();
        for r in &mut routes {
            let p = protos.entry(r.from_protocol.clone()).or_insert_with(|| {
                let text = self
                    .cmd(&format!("show protocols all {}", r.from_protocol))
                    .ok()?;
                bird_parse::parse_protocols(&text).into_iter().next()
            });
            let Some(p) = p else { continue };
            let gr = p
                .channels
                .iter()
                .any(|c| c.table == r.table && c.neighbor_gr.is_some());
            // ISO times compare as strings; re-announced routes are newer than the session.
            if gr && r.since < p.since {
                r.stale = true;
            }
        }
        routes
    }

    /// Routes received from neighbour `name`, both tables.
    pub fn routes_from(&self, name: &str) -> Vec<BirdRoute> {
        self.routes(&RouteQuery::protocol(name))
    }

    /// `reload in NAME`: asks the peer for a ROUTE-REFRESH.
    pub fn reload_in(&self, name: &str) {
        self.cmd_ok(&format!("reload in {name}"));
    }

    /// `disable NAME ["message"]` (message sent as RFC 9003 shutdown communication).
    pub fn disable(&self, name: &str, message: Option<&str>) {
        match message {
            Some(m) => self.cmd_ok(&format!("disable {name} \"{}\"", m.replace('"', "'"))),
            None => self.cmd_ok(&format!("disable {name}")),
        };
    }

    pub fn enable(&self, name: &str) {
        self.cmd_ok(&format!("enable {name}"));
    }

    pub fn restart(&self, name: &str) {
        self.cmd_ok(&format!("restart {name}"));
    }

    /// Replaces the config and runs `configure` (BIRD restarts only what changed).
    pub fn reconfigure(&mut self, config: BirdConfig) {
        std::fs::write(self.dir.file("bird.conf"), config.render(&self.log))
            .expect("writing bird.conf");
        let out = self.cmd_ok("configure");
        assert!(out.contains("Reconfigur"), "configure failed: {out}");
        self.config = config;
    }

    /// The log file (`log … all` plus `debug protocols`).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_contains(&self, text: &str) -> bool {
        self.log().contains(text)
    }

    /// SIGSTOP: BIRD stops sending KEEPALIVEs (hold-timer tests). Queries time out meanwhile.
    pub fn stop_signal(&mut self) {
        self.daemon.signal(libc::SIGSTOP);
    }

    pub fn cont_signal(&mut self) {
        self.daemon.signal(libc::SIGCONT);
    }

    /// SIGKILL: a crash without NOTIFICATION (graceful-restart tests). Start a new `Bird`
    /// with the same config to bring it back.
    pub fn kill(&mut self) {
        self.daemon.kill();
    }

    /// Polls `f` (every 25 ms, at most `timeout`).
    pub fn wait_until(&self, timeout: Duration, mut f: impl FnMut(&Bird) -> bool) -> bool {
        wait_for(timeout, || f(self))
    }

    /// Waits for neighbour `name` to be Established; panics with diagnostics otherwise.
    pub fn wait_established(&self, name: &str, timeout: Duration) -> ProtocolInfo {
        let mut last = None;
        let ok = self.wait_until(timeout, |b| {
            let p = b
                .cmd(&format!("show protocols all {name}"))
                .ok()
                .and_then(|t| {
                    bird_parse::parse_protocols(&t)
                        .into_iter()
                        .find(|p| p.name == name)
                });
            let up = p.as_ref().is_some_and(ProtocolInfo::is_established);
            last = p;
            up
        });
        match last {
            Some(p) if ok => p,
            _ => panic!(
                "{name} not Established after {timeout:?}: {last:?}\n{}",
                self.diagnostics()
            ),
        }
    }

    /// Protocol summary and log tail, for failure messages.
    pub fn diagnostics(&self) -> String {
        format!(
            "--- bird {} show protocols ---\n{}\n--- bird.log (tail) ---\n{}\n--- bird.out ---\n{}",
            self.config.local_addr,
            self.cmd("show protocols").unwrap_or_else(|e| e),
            tail(&self.log, 30),
            tail(&self.dir.file("bird.out"), 10)
        )
    }
}

/// One command over BIRD's control socket (what birdc does), bounded by a 5 s timeout so a
/// SIGSTOPped daemon cannot hang the test.
fn control(socket: &Path, command: &str) -> Result<String, String> {
    let timeout = Some(Duration::from_secs(5));
    let s = UnixStream::connect(socket).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(timeout)
        .and_then(|()| s.set_write_timeout(timeout))
        .map_err(|e| e.to_string())?;
    let mut r = BufReader::new(&s);
    let mut reply = String::new();
    r.read_line(&mut reply)
        .map_err(|e| format!("banner: {e}"))?;
    (&s).write_all(format!("{command}\n").as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    reply.clear();
    // A reply ends with a line "NNNN " (code, space).
    loop {
        let mut line = String::new();
        let n = r
            .read_line(&mut line)
            .map_err(|e| format!("{command}: read: {e}"))?;
        if n == 0 {
            return Err(format!("{command}: connection closed"));
        }
        let b = line.as_bytes();
        let last = b.len() >= 5 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b' ';
        reply.push_str(&line);
        if last {
            break;
        }
    }
    bird_parse::socket_reply_to_text(&reply).map_err(|e| format!("{command}: {e}"))
}
