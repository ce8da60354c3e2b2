//! A node with two uplinks and real kernel forwarding, for the data-plane bench
//! (tests/benches/dataplane.rs). Five network namespaces the caller's run owns:
//!
//! ```text
//!  client ──eth0── tor1 ──eth0── node ──pod0── pod
//!  (BIRD) ──eth1── tor2 ──eth1──  (podcidr-bgp)
//! ```
//!
//! The speaker announces the pod CIDR to both ToRs (BIRD 2, `protocol kernel` exporting what
//! they learn); the ToRs pass it to the client (BIRD 2, `merge paths on`), whose kernel route
//! to the pod CIDR is an ECMP route over both ToRs. Nothing else routes the pod CIDR, so a
//! ToR that withdraws it drops what still reaches it.
//!
//! Addresses (198.18.0.0/15 only): tor i ↔ node 198.18.1i.0/24, tor i ↔ client
//! 198.18.2i.0/24 (ToR .1), the client's source 198.18.30.1, the pod CIDR 198.19.7.0/24
//! (node .1, pod .2).
//!
//! The way back: the node has an ECMP default route through both ToRs (as DHCP or netplan
//! would give a dual-homed node; hashing on ports), each ToR a static route to the client's
//! address. The pod's replies and the node's own traffic (from 198.19.7.1, an address the
//! fabric routes) take it; [`Direction`] names the streams.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::TempDir;
use crate::bird_parse::{parse_protocols, parse_routes};
use crate::netns::{Netns, in_netns, in_ns, ip, link, route_gateways, sysctl, tcp_listener_in};
use crate::process::stop_child;

pub const POD_CIDR: &str = "198.19.7.0/24";
pub const POD_ADDR: Ipv4Addr = Ipv4Addr::new(198, 19, 7, 2);
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 30, 1);
const POD_PORT: u16 = 5000;
/// The sender's flows: this many source ports, round robin, so ECMP spreads them.
pub const FLOWS: u16 = 64;

#[derive(Debug, Clone)]
pub struct DataplaneOptions {
    /// `bfd: {minTx, minRx, multiplier}` (ms) on both sessions and at both ToRs.
    pub bfd: Option<(u32, u32, u8)>,
    /// BGP hold time on both sides (s).
    pub hold_time: u16,
    /// The speaker's `gracefulRestart.enabled` (the ToRs always help).
    pub graceful_restart: bool,
    /// The speaker's graceful-restart time (s).
    pub restart_time: u16,
    /// `gracefulRestart.longLivedStaleTime` (s) at the speaker and `long lived graceful
    /// restart on` at the ToRs.
    pub llgr: Option<u32>,
    /// The speaker's `egress.followSessions`.
    pub egress: bool,
}

/// Which way a stream goes, and so which routing decides its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client → pod: the client's ECMP route over both ToRs (what BFD repairs).
    ClientToPod,
    /// Pod → client: the node's default route (the pod's replies).
    PodToClient,
    /// Node (198.19.7.1) → client: the node's default route (node-originated traffic).
    NodeToClient,
}

/// The node's address for its own traffic: inside the announced CIDR, so the fabric routes
/// the replies (the node's uplink addresses are not announced).
pub const NODE_ADDR: Ipv4Addr = Ipv4Addr::new(198, 19, 7, 1);

/// How an uplink is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// iptables DROP of everything crossing the link, both ways (at each end's ingress): the
    /// link stays up, only BFD or the hold timer notice.
    Silent,
    /// `ip link set down` on the ToR's port: both ends lose carrier.
    LinkDown,
}

#[derive(Debug)]
pub struct DataplaneTopology {
    pub client: String,
    pub tors: [String; 2],
    pub node: String,
    pub pod: String,
    dir: TempDir,
    birds: Vec<Child>,
    speaker: Option<Child>,
    speaker_bin: PathBuf,
    launches: u32,
    // Last: namespaces go after the processes inside them.
    _ns: Netns,
}

impl DataplaneTopology {
    /// Namespaces `<tag>-{cl,t1,t2,nd,pd}`, wired, with the three BIRDs running.
    pub fn new(tag: &str, speaker_bin: &Path, o: &DataplaneOptions) -> DataplaneTopology {
        let [client, t1, t2, node, pod] =
            ["cl", "t1", "t2", "nd", "pd"].map(|s| format!("{tag}-{s}"));
        let mut ns = Netns::default();
        for n in [&client, &t1, &t2, &node, &pod] {
            ns.add(n);
        }
        let tors = [t1, t2];
        for (i, tor) in tors.iter().enumerate() {
            let i = i + 1;
            link(
                tor,
                "eth0",
                &node,
                &format!("eth{}", i - 1),
                &format!("198.18.1{i}"),
            );
            link(
                tor,
                "eth1",
                &client,
                &format!("eth{}", i - 1),
                &format!("198.18.2{i}"),
            );
            sysctl(tor, "net.ipv4.ip_forward=1");
        }
        ip(&[
            "-n", &pod, "link", "add", "eth0", "type", "veth", "peer", "name", "pod0", "netns",
            &node,
        ]);
        ip(&["-n", &node, "addr", "add", "198.19.7.1/24", "dev", "pod0"]);
        ip(&["-n", &pod, "addr", "add", "198.19.7.2/24", "dev", "eth0"]);
        ip(&["-n", &node, "link", "set", "pod0", "up"]);
        ip(&["-n", &pod, "link", "set", "eth0", "up"]);
        ip(&["-n", &pod, "route", "add", "default", "via", "198.19.7.1"]);
        sysctl(&node, "net.ipv4.ip_forward=1");
        // The way back (see the module doc): the node's ECMP default route, hashed on ports.
        ip(&[
            "-n",
            &node,
            "route",
            "add",
            "default",
            "nexthop",
            "via",
            "198.18.11.1",
            "dev",
            "eth0",
            "nexthop",
            "via",
            "198.18.12.1",
            "dev",
            "eth1",
        ]);
        sysctl(&node, "net.ipv4.fib_multipath_hash_policy=1");
        for (i, tor) in tors.iter().enumerate() {
            let via = format!("198.18.2{}.2", i + 1);
            ip(&[
                "-n",
                tor,
                "route",
                "add",
                &format!("{CLIENT_ADDR}/32"),
                "via",
                &via,
            ]);
        }
        ip(&[
            "-n",
            &client,
            "addr",
            "add",
            &format!("{CLIENT_ADDR}/32"),
            "dev",
            "lo",
        ]);
        // Hash on ports too, so the sender's flows take both legs.
        sysctl(&client, "net.ipv4.fib_multipath_hash_policy=1");
        // Nothing routes back to the client (the stream is one-way): no reverse-path filter.
        for n in [&tors[0], &tors[1], &node, &pod, &client] {
            sysctl(n, "net.ipv4.conf.all.rp_filter=0");
            sysctl(n, "net.ipv4.conf.default.rp_filter=0");
        }

        let dir = TempDir::new(tag);
        let mut t = DataplaneTopology {
            client,
            tors,
            node,
            pod,
            dir,
            birds: Vec::new(),
            speaker: None,
            speaker_bin: speaker_bin.to_owned(),
            launches: 0,
            _ns: ns,
        };
        t.write_configs(o);
        for (name, ns) in [
            ("tor1", t.tors[0].clone()),
            ("tor2", t.tors[1].clone()),
            ("client", t.client.clone()),
        ] {
            let conf = t.dir.path(&format!("{name}.conf"));
            let check = Command::new("bird").arg("-p").arg("-c").arg(&conf).output();
            let check = check.expect("run bird -p");
            assert!(
                check.status.success(),
                "{name}.conf: {}",
                String::from_utf8_lossy(&check.stderr)
            );
            let child = Command::new("ip")
                .args(["netns", "exec", &ns, "bird", "-f", "-c"])
                .arg(&conf)
                .arg("-s")
                .arg(t.sock(name))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start bird");
            t.birds.push(child);
        }
        t
    }

    fn sock(&self, name: &str) -> PathBuf {
        self.dir.path(&format!("{name}.sock"))
    }

    fn write_configs(&self, o: &DataplaneOptions) {
        let (bfd_proto, bfd_on) = match o.bfd {
            Some((tx, rx, m)) => (
                format!(
                    "protocol bfd {{ interface \"eth0\" {{ min rx interval {rx} ms; \
                     min tx interval {tx} ms; multiplier {m}; }}; }}\n"
                ),
                "  bfd on;\n",
            ),
            None => (String::new(), ""),
        };
        let llgr = match o.llgr {
            Some(s) => format!("  long lived graceful restart on;\n  long lived stale time {s};\n"),
            None => String::new(),
        };
        for i in 1..=2 {
            let conf = format!(
                "log \"{log}\" all;\nrouter id 198.18.1{i}.1;\n\
                 protocol device {{ scan time 1; }}\n\
                 protocol kernel {{ ipv4 {{ import none; export all; }}; }}\n{bfd_proto}\
                 protocol bgp node {{\n  local 198.18.1{i}.1 as 6500{i};\n  \
                 neighbor 198.18.1{i}.2 as 64512;\n  hold time {hold};\n  \
                 graceful restart on;\n{llgr}{bfd_on}  error wait time 1, 5;\n  \
                 ipv4 {{ import all; export none; }};\n}}\n\
                 protocol bgp uplink {{\n  local 198.18.2{i}.1 as 6500{i};\n  \
                 neighbor 198.18.2{i}.2 as 65100;\n  connect delay time 1;\n  \
                 error wait time 1, 5;\n  graceful restart on;\n  \
                 long lived graceful restart aware;\n  \
                 ipv4 {{ import none; export all; }};\n}}\n",
                log = self.dir.path(&format!("tor{i}.log")).display(),
                hold = o.hold_time,
            );
            std::fs::write(self.dir.path(&format!("tor{i}.conf")), conf).unwrap();
        }
        let mut client = format!(
            "log \"{}\" all;\nrouter id {CLIENT_ADDR};\nprotocol device {{ scan time 1; }}\n\
             protocol kernel {{ merge paths on; ipv4 {{ import none; \
             export filter {{ krt_prefsrc = {CLIENT_ADDR}; accept; }}; }}; }}\n",
            self.dir.path("client.log").display()
        );
        for i in 1..=2 {
            client.push_str(&format!(
                "protocol bgp tor{i} {{\n  local 198.18.2{i}.2 as 65100;\n  \
                 neighbor 198.18.2{i}.1 as 6500{i};\n  connect delay time 1;\n  \
                 error wait time 1, 5;\n  graceful restart aware;\n  \
                 long lived graceful restart aware;\n  \
                 ipv4 {{ import all; export none; }};\n}}\n"
            ));
        }
        std::fs::write(self.dir.path("client.conf"), client).unwrap();

        std::fs::write(
            self.dir.path("cidrs.yaml"),
            format!("nodes:\n  node1: [{POD_CIDR}]\n"),
        )
        .unwrap();
        let bfd = o
            .bfd
            .map(|(tx, rx, m)| format!("    bfd: {{minTx: {tx}, minRx: {rx}, multiplier: {m}}}\n"))
            .unwrap_or_default();
        let llgr = o
            .llgr
            .map(|s| format!(", longLivedStaleTime: {s}"))
            .unwrap_or_default();
        let mut conf = format!(
            "nodeName: node1\nasn: 64512\nrouterId: 198.18.11.2\n\
             source: {{kind: file, path: {}}}\nadmin: {{listen: 127.0.0.1:9180}}\n{}peers:\n",
            self.dir.path("cidrs.yaml").display(),
            if o.egress {
                "egress: {followSessions: true}\n"
            } else {
                ""
            }
        );
        for i in 1..=2 {
            conf.push_str(&format!(
                "  - name: tor{i}\n    address: 198.18.1{i}.1\n    asn: 6500{i}\n    \
                 holdTime: {}\n    families: [ipv4-unicast]\n    \
                 connectRetry: {{base: 1, max: 2}}\n    \
                 gracefulRestart: {{enabled: {}, restartTime: {}{llgr}}}\n{bfd}",
                o.hold_time, o.graceful_restart, o.restart_time
            ));
        }
        std::fs::write(self.dir.path("speaker.yaml"), conf).unwrap();
    }

    /// `speaker --check-config` on the generated config: its error text if rejected.
    pub fn check_config(&self) -> Result<(), String> {
        let out = Command::new(&self.speaker_bin)
            .args(["speaker", "--check-config", "--config"])
            .arg(self.dir.path("speaker.yaml"))
            .output()
            .map_err(|e| format!("{}: {e}", self.speaker_bin.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Starts the speaker (without `--final`: SIGTERM means a graceful restart).
    pub fn start_speaker(&mut self) {
        self.launches += 1;
        let child = crate::netns::spawn_speaker_in(
            &self.node,
            &self.speaker_bin,
            &self.dir.path("speaker.yaml"),
            &self.speaker_log(self.launches),
        );
        self.speaker = Some(child);
    }

    fn speaker_log(&self, launch: u32) -> PathBuf {
        self.dir.path(&format!("speaker{launch}.log"))
    }

    /// The exit status if the current speaker has exited.
    pub fn speaker_exited(&mut self) -> Option<std::process::ExitStatus> {
        self.speaker.as_mut()?.try_wait().ok().flatten()
    }

    /// SIGTERM and wait (bounded): a planned restart.
    pub fn stop_speaker(&mut self) {
        if let Some(mut c) = self.speaker.take() {
            stop_child(&mut c, Duration::from_secs(15));
        }
    }

    /// SIGKILL: the speaker crashes.
    pub fn kill_speaker(&mut self) {
        if let Some(mut c) = self.speaker.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Cuts uplink `i` (0 or 1). Silent: first the node drops what comes from the ToR (the
    /// client's packets on that leg go dark), then the ToR drops what comes from the node (its
    /// BFD and BGP); ingress only, so no sender sees an error. LinkDown: the ToR's port.
    pub fn cut(&self, i: usize, how: Cut) {
        match how {
            Cut::LinkDown => ip(&["-n", &self.tors[i], "link", "set", "eth0", "down"]),
            Cut::Silent => {
                iptables_drop(&self.node, &format!("eth{i}"), 'I');
                iptables_drop(&self.tors[i], "eth0", 'I');
            }
        }
    }

    pub fn heal(&self, i: usize, how: Cut) {
        match how {
            Cut::LinkDown => ip(&["-n", &self.tors[i], "link", "set", "eth0", "up"]),
            Cut::Silent => {
                iptables_drop(&self.tors[i], "eth0", 'D');
                iptables_drop(&self.node, &format!("eth{i}"), 'D');
            }
        }
    }

    fn birdc(&self, i: usize, cmd: &str) -> String {
        let (ns, name) = match i {
            0 | 1 => (&self.tors[i], format!("tor{}", i + 1)),
            _ => (&self.client, "client".to_owned()),
        };
        let sock = self.sock(&name).display().to_string();
        String::from_utf8_lossy(&in_ns(ns, &["birdc", "-s", &sock, cmd]).stdout).into_owned()
    }

    /// What ToR `i` thinks of the node: its session and its route.
    pub fn tor_view(&self, i: usize, bfd: bool) -> TorView {
        let protos = parse_protocols(&self.birdc(i, "show protocols all node"));
        let p = protos.iter().find(|p| p.name == "node");
        let routes = parse_routes(&self.birdc(i, &format!("show route {POD_CIDR} all")));
        let r = routes.iter().find(|r| r.prefix.to_string() == POD_CIDR);
        TorView {
            established: p.is_some_and(|p| p.is_established()),
            gr_active: p.is_some_and(|p| p.gr_active),
            route: r.is_some(),
            llgr_stale: r.is_some_and(|r| r.llgr_stale),
            bfd_up: !bfd
                || self
                    .birdc(i, "show bfd sessions")
                    .lines()
                    .any(|l| l.contains(&format!("198.18.1{}.2", i + 1)) && l.contains(" Up ")),
        }
    }

    /// True while ToR `i` has the pod CIDR (one `birdc` call: the cheap poll for cuts).
    pub fn tor_has_route(&self, i: usize) -> bool {
        self.birdc(i, &format!("show route {POD_CIDR}"))
            .contains(POD_CIDR)
    }

    /// How many next hops the client's kernel route to the pod CIDR has (0: none).
    pub fn client_legs(&self) -> usize {
        route_gateways(&self.client, POD_CIDR).len()
    }

    /// Packets ToR `i` has sent to the node (its port's tx counter).
    pub fn tor_tx_packets(&self, i: usize) -> u64 {
        let out = in_ns(&self.tors[i], &["ip", "-s", "-j", "link", "show", "eth0"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v.pointer("/0/stats64/tx/packets")
            .and_then(|p| p.as_u64())
            .unwrap_or(0)
    }

    /// BIRD's logs, the client's routes and the speaker's log, for failure messages.
    pub fn diagnostics(&self) -> String {
        let mut s = String::new();
        for i in 0..2 {
            s += &format!(
                "--- tor{}:\n{}\n{}\n{}\n",
                i + 1,
                self.birdc(i, "show protocols all node"),
                self.birdc(i, "show route all"),
                std::fs::read_to_string(self.dir.path(&format!("tor{}.log", i + 1)))
                    .unwrap_or_default()
            );
        }
        s += &format!(
            "--- client:\n{}\n{}\n",
            self.birdc(2, "show protocols"),
            String::from_utf8_lossy(&in_ns(&self.client, &["ip", "route"]).stdout)
        );
        s + "--- speaker:\n"
            + &std::fs::read_to_string(self.speaker_log(self.launches)).unwrap_or_default()
    }

    /// Starts a receiver in the pod and a sender in the client sending `pps` packets/s.
    pub fn start_stream(&self, pps: u32) -> std::io::Result<Stream> {
        self.start_stream_towards(Direction::ClientToPod, pps)
    }

    /// A stream of `pps` packets/s over [`FLOWS`] flows in direction `d`.
    pub fn start_stream_towards(&self, d: Direction, pps: u32) -> std::io::Result<Stream> {
        let (from_ns, from, to_ns, to, port) = match d {
            Direction::ClientToPod => (&self.client, CLIENT_ADDR, &self.pod, POD_ADDR, POD_PORT),
            Direction::PodToClient => {
                (&self.pod, POD_ADDR, &self.client, CLIENT_ADDR, POD_PORT + 1)
            }
            Direction::NodeToClient => (
                &self.node,
                NODE_ADDR,
                &self.client,
                CLIENT_ADDR,
                POD_PORT + 2,
            ),
        };
        let rx = in_netns(to_ns, move || UdpSocket::bind(SocketAddr::from((to, port))))??;
        let txs = in_netns(from_ns, move || {
            (0..FLOWS)
                .map(|f| UdpSocket::bind(SocketAddr::from((from, 40_000 + f))))
                .collect::<std::io::Result<Vec<_>>>()
        })??;
        Ok(Stream::start(rx, txs, pps, SocketAddr::from((to, port))))
    }
}

/// The TCP echo port in the pod.
const ECHO_PORT: u16 = 5010;

impl DataplaneTopology {
    /// `conns` TCP connections from the client (198.18.30.1, the route's source) to the pod,
    /// each sending 8 bytes every `period` that the pod echoes: the application's view of a
    /// cut, both directions of the connection at once (see [`Echo::finish`]).
    pub fn start_echo(&self, conns: usize, period: Duration) -> std::io::Result<Echo> {
        use std::io::{Read, Write};
        let listener = tcp_listener_in(&self.pod, SocketAddr::from((POD_ADDR, ECHO_PORT)))?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let server = std::thread::spawn(move || {
            let mut workers = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let Ok((mut c, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let s = s.clone();
                workers.push(std::thread::spawn(move || {
                    let _ = c.set_nonblocking(false);
                    let _ = c.set_nodelay(true);
                    let _ = c.set_read_timeout(Some(Duration::from_millis(50)));
                    let mut buf = [0u8; 8];
                    while !s.load(Ordering::Relaxed) {
                        match c.read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => {
                                let _ = c.write_all(&buf[..n]);
                            }
                            Err(_) => {}
                        }
                    }
                }));
            }
            for w in workers {
                let _ = w.join();
            }
        });
        let dest = SocketAddr::from((POD_ADDR, ECHO_PORT));
        let streams = in_netns(&self.client, move || {
            (0..conns)
                .map(|_| std::net::TcpStream::connect_timeout(&dest, Duration::from_secs(2)))
                .collect::<std::io::Result<Vec<_>>>()
        })??;
        let start = Instant::now();
        let mut clients = Vec::new();
        for c in streams {
            c.set_nodelay(true)?;
            c.set_read_timeout(Some(Duration::from_millis(20)))?;
            let mut w = c.try_clone()?;
            let s = stop.clone();
            let writer = std::thread::spawn(move || {
                let mut n = 0u32;
                while !s.load(Ordering::Relaxed) {
                    n += 1;
                    let due = start + period * n;
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let _ = w.write_all(&u64::from(n).to_be_bytes());
                }
            });
            let s = stop.clone();
            let mut r = c;
            clients.push(std::thread::spawn(move || {
                let mut last = Instant::now();
                let mut longest = Duration::ZERO;
                let mut buf = [0u8; 64];
                while !s.load(Ordering::Relaxed) {
                    if let Ok(n) = r.read(&mut buf)
                        && n > 0
                    {
                        let now = Instant::now();
                        longest = longest.max(now - last);
                        last = now;
                    }
                }
                // A connection still stalled at the end: the stall lasted until then.
                longest = longest.max(last.elapsed());
                let _ = writer.join();
                longest
            }));
        }
        Ok(Echo {
            stop,
            clients,
            server: Some(server),
        })
    }
}

/// Running TCP echo connections ([`DataplaneTopology::start_echo`]).
#[derive(Debug)]
pub struct Echo {
    stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<Duration>>,
    server: Option<JoinHandle<()>>,
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Echo {
    /// Per connection, the longest time between two echoes arriving at the client (or from
    /// the last one to the end): a stall in either direction of the connection, plus what
    /// TCP's retransmission backoff adds after the path is back.
    pub fn finish(mut self) -> Vec<Duration> {
        self.stop.store(true, Ordering::Relaxed);
        let out = std::mem::take(&mut self.clients)
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        if let Some(s) = self.server.take() {
            let _ = s.join();
        }
        out
    }
}

/// Inserts (`op` 'I') or deletes ('D') DROP rules for everything arriving on `dev` in `ns`,
/// delivered or routed, in one `iptables-restore` transaction.
fn iptables_drop(ns: &str, dev: &str, op: char) {
    use std::io::Write as _;
    let rules =
        format!("*filter\n-{op} INPUT -i {dev} -j DROP\n-{op} FORWARD -i {dev} -j DROP\nCOMMIT\n");
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "iptables-restore", "--noflush"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run iptables-restore");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() || op == 'D',
        "iptables-restore in {ns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for DataplaneTopology {
    fn drop(&mut self) {
        self.kill_speaker();
        for b in &mut self.birds {
            stop_child(b, Duration::from_secs(5));
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TorView {
    pub established: bool,
    pub gr_active: bool,
    pub route: bool,
    pub llgr_stale: bool,
    /// True without BFD.
    pub bfd_up: bool,
}

impl TorView {
    /// Session up, route fresh, BFD (if any) Up.
    pub fn healthy(&self) -> bool {
        self.established && !self.gr_active && self.route && !self.llgr_stale && self.bfd_up
    }
}

/// A paced UDP stream: packet `seq` carries `seq` (8 bytes, big endian), sent from flow
/// `seq % FLOWS`.
#[derive(Debug)]
pub struct Stream {
    stop: Arc<AtomicBool>,
    pub start: Instant,
    pub interval: Duration,
    sender: Option<JoinHandle<Vec<u64>>>,
    receiver: Option<JoinHandle<Vec<u64>>>,
}

/// A stream dropped unfinished (a failed run) stops its threads, which would otherwise keep
/// its sockets, and so its namespaces, alive.
impl Drop for Stream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What a stream sent and received.
#[derive(Debug)]
pub struct StreamResult {
    /// Send time of each packet, ns from `Stream::start`.
    pub sent_at: Vec<u64>,
    pub received: Vec<u64>,
}

impl Stream {
    fn start(rx: UdpSocket, txs: Vec<UdpSocket>, pps: u32, dest: SocketAddr) -> Stream {
        let stop = Arc::new(AtomicBool::new(false));
        let interval = Duration::from_secs(1) / pps.max(1);
        let start = Instant::now();
        let s = stop.clone();
        let sender = std::thread::spawn(move || {
            let mut sent_at = Vec::new();
            let mut seq = 0u64;
            while !s.load(Ordering::Relaxed) {
                let due = start + interval * u32::try_from(seq).unwrap_or(u32::MAX);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                sent_at.push(start.elapsed().as_nanos() as u64);
                // A failed send (no route at all) is a lost packet like any other.
                let _ = txs[(seq % u64::from(FLOWS)) as usize].send_to(&seq.to_be_bytes(), dest);
                seq += 1;
            }
            sent_at
        });
        let s = stop.clone();
        rx.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let receiver = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 64];
            let mut drain_until: Option<Instant> = None;
            loop {
                if let Ok((n, _)) = rx.recv_from(&mut buf)
                    && n >= 8
                {
                    got.push(u64::from_be_bytes(buf[..8].try_into().unwrap()));
                }
                // After the stop, what is still in flight gets 200 ms.
                if s.load(Ordering::Relaxed) {
                    let until =
                        *drain_until.get_or_insert(Instant::now() + Duration::from_millis(200));
                    if Instant::now() >= until {
                        return got;
                    }
                }
            }
        });
        Stream {
            stop,
            start,
            interval,
            sender: Some(sender),
            receiver: Some(receiver),
        }
    }

    /// ns since the stream started (the clock of `sent_at`).
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub fn finish(mut self) -> StreamResult {
        self.stop.store(true, Ordering::Relaxed);
        let join = |h: Option<JoinHandle<Vec<u64>>>| h.map(|h| h.join().expect("stream thread"));
        StreamResult {
            sent_at: join(self.sender.take()).unwrap_or_default(),
            received: join(self.receiver.take()).unwrap_or_default(),
        }
    }
}
