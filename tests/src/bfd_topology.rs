//! One node and its ToR in network namespaces the caller's run owns: BIRD 2 as the ToR
//! (`protocol bfd`, `bfd on` on the BGP session, graceful restart on), our speaker in the
//! node's namespace. Shared by speaker/tests/netns/netns_bfd.rs and the bfd_detection bench.
//!
//! Addresses: 198.18.1.0/24 on the link, the node's pod CIDR 198.19.1.0/24.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::TempDir;
use crate::netns::{Netns, in_ns, wire};
use crate::process::stop_child;

/// [`BfdTopology::hold_tor_bfd`]'s rules: drop the ToR's BFD packets, count the node's.
const HOLD_TOR_BFD: [&[&str]; 2] = [
    &[
        "INPUT", "-i", "eth0", "-p", "udp", "--dport", "3784", "-j", "DROP",
    ],
    &["OUTPUT", "-o", "eth0", "-p", "udp", "--dport", "3784"],
];

/// A scripted BFD peer (Python, RFC 5880 packets, 100 ms × 3 once Up, 1 s while not) that
/// replays what FRR 10.3's bfdd does when BGP reaches Established: once `argv[3]` exists and
/// the session is Up, the old session's last packet is Down with diag 3 (Neighbor Signaled
/// Session Down) and Your Discriminator 0, then a new session (a new discriminator) starts
/// 0.95 s later with Down/Your Discriminator 0 and comes Up with us. It answers Polls with
/// Final, ignores packets for the replaced discriminator and runs until killed.
const FRR_REPLACING_BFD_PEER: &str = r#"
import os, select, socket, struct, sys, time
me, node, trigger = sys.argv[1], sys.argv[2], sys.argv[3]
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind((me, 3784))
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tx.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 255)
tx.bind((me, 49999))
DOWN, INIT, UP = 1, 2, 3
disc, ours, state, replaced = 0xA001, 0, DOWN, False
def send(diag=0, final=False):
    flags = (state << 6) | (0x10 if final else 0)
    iv = 100000 if state == UP else 1000000
    pkt = struct.pack("!BBBBIIIII", (1 << 5) | diag, flags, 3, 24, disc, ours, iv, 100000, 0)
    tx.sendto(pkt, (node, 3784))
next_tx = time.monotonic()
while True:
    now = time.monotonic()
    r, _, _ = select.select([rx], [], [], max(0.0, min(next_tx - now, 0.02)))
    if r:
        data = rx.recv(64)
        flags, my, your = data[1], *struct.unpack("!II", data[4:12])
        theirs, poll = flags >> 6, bool(flags & 0x20)
        if your == 0 or your == disc:
            ours = my
            if state == DOWN and theirs == DOWN:
                state = INIT
                send()
            elif state == DOWN and theirs == INIT or state == INIT and theirs in (INIT, UP):
                state = UP
                send()
                next_tx = time.monotonic() + 0.1
            if poll:
                send(final=True)
    if not replaced and state == UP and os.path.exists(trigger):
        state, ours = DOWN, 0
        send(diag=3)
        disc, replaced = 0xB002, True
        next_tx = time.monotonic() + 0.95
        continue
    if time.monotonic() >= next_tx:
        send()
        next_tx = time.monotonic() + (0.1 if state == UP else 1.0)
"#;

/// The node's pod CIDR, as BIRD shows it.
pub const POD_CIDR: &str = "198.19.1.0/24";

#[derive(Debug, Clone)]
pub struct BfdTopologyOptions {
    /// `bfd: {minTx, minRx, multiplier}` of the speaker (ms); `None`: no BFD anywhere.
    pub bfd: Option<(u32, u32, u8)>,
    /// BGP hold time on both sides (s).
    pub hold_time: u16,
    /// Speaker's graceful-restart time (s).
    pub restart_time: u16,
}

impl BfdTopologyOptions {
    /// The netns tests' rig: BFD 100 ms × 3 on both sides, hold time 90 s (so only BFD
    /// detects a cut), graceful restart 120 s.
    pub fn bfd_100ms_x3() -> Self {
        BfdTopologyOptions {
            bfd: Some((100, 100, 3)),
            hold_time: 90,
            restart_time: 120,
        }
    }
}

#[derive(Debug)]
pub struct BfdTopology {
    pub tor: String,
    pub node: String,
    dir: TempDir,
    sock: String,
    bird: Child,
    speaker: Option<Child>,
    speaker_bin: PathBuf,
    launches: u32,
    // Last: namespaces go after the processes inside them.
    _ns: Netns,
}

impl BfdTopology {
    /// Namespaces `<tag>-tor` and `<tag>-n1`, wired, with BIRD running in the ToR.
    pub fn new(tag: &str, speaker_bin: &Path, o: &BfdTopologyOptions) -> BfdTopology {
        Self::with_tor_bgp(tag, speaker_bin, o, "")
    }

    /// [`BfdTopology::new`] with `extra` in BIRD's `protocol bgp` block (e.g.
    /// `long lived graceful restart on;`).
    pub fn with_tor_bgp(
        tag: &str,
        speaker_bin: &Path,
        o: &BfdTopologyOptions,
        extra: &str,
    ) -> BfdTopology {
        let tor = format!("{tag}-tor");
        let node = format!("{tag}-n1");
        let mut ns = Netns::default();
        ns.add(&tor);
        ns.add(&node);
        wire(&tor, &node, 1);
        let dir = TempDir::new(tag);
        let (bfd_proto, bfd_on) = match o.bfd {
            Some((tx, rx, mult)) => (
                format!(
                    "protocol bfd {{ interface \"*\" {{ min rx interval {rx} ms; \
                     min tx interval {tx} ms; multiplier {mult}; }}; }}\n"
                ),
                " bfd on;",
            ),
            None => (String::new(), ""),
        };
        let conf = format!(
            "log \"{log}\" all;\nrouter id 198.18.0.1;\nprotocol device {{}}\n{bfd_proto}\
             protocol bgp node1 {{ local 198.18.1.1 as 65000; neighbor 198.18.1.2 as 64512;\n  \
             hold time {hold}; graceful restart on;{bfd_on} {extra}\n  \
             error wait time 1, 5;\n  \
             ipv4 {{ import all; export none; }}; }}\n",
            log = dir.path("bird.log").display(),
            hold = o.hold_time,
        );
        std::fs::write(dir.path("bird.conf"), conf).unwrap();
        std::fs::write(
            dir.path("cidrs.yaml"),
            format!("nodes:\n  node1: [{POD_CIDR}]\n"),
        )
        .unwrap();
        let bfd_line = o
            .bfd
            .map(|(tx, rx, m)| format!("    bfd: {{minTx: {tx}, minRx: {rx}, multiplier: {m}}}\n"))
            .unwrap_or_default();
        std::fs::write(
            dir.path("speaker.yaml"),
            format!(
                "nodeName: node1\nasn: 64512\nrouterId: 198.18.1.2\n\
                 source: {{kind: file, path: {}}}\nadmin: {{listen: 127.0.0.1:9180}}\n\
                 peers:\n  - name: tor\n    address: 198.18.1.1\n    asn: 65000\n    \
                 holdTime: {}\n    families: [ipv4-unicast]\n    connectRetry: {{base: 1, max: 2}}\n    \
                 gracefulRestart: {{enabled: true, restartTime: {}}}\n{bfd_line}",
                dir.path("cidrs.yaml").display(),
                o.hold_time,
                o.restart_time,
            ),
        )
        .unwrap();
        let sock = dir.path("bird.sock").display().to_string();
        let bird = Command::new("ip")
            .args(["netns", "exec", &tor, "bird", "-f", "-c"])
            .arg(dir.path("bird.conf"))
            .args(["-s", &sock])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        BfdTopology {
            tor,
            node,
            dir,
            sock,
            bird,
            speaker: None,
            speaker_bin: speaker_bin.to_owned(),
            launches: 0,
            _ns: ns,
        }
    }

    /// A file in the topology's directory (key files, scripts).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path(name)
    }

    /// Edits BIRD's config and reconfigures it (`birdc configure`).
    pub fn tor_reconfigure(&self, f: impl FnOnce(String) -> String) {
        let path = self.dir.path("bird.conf");
        let conf = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, f(conf)).unwrap();
        // Just after start BIRD may not have opened its control socket yet: retry, bounded.
        let mut out = String::new();
        let done = self.poll_until(Duration::from_millis(50), Duration::from_secs(10), |t| {
            out = t.birdc("configure");
            out.contains("Reconfigur")
        });
        assert!(done.is_some(), "birdc configure: {out}");
    }

    /// Rewrites the speaker's config file (read at its next start).
    pub fn edit_speaker_config(&self, f: impl FnOnce(String) -> String) {
        let path = self.dir.path("speaker.yaml");
        let conf = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, f(conf)).unwrap();
    }

    /// Starts the speaker (without `--final`: SIGTERM means a graceful restart).
    /// The running speaker's PID (its CPU time is in `/proc/PID/stat`).
    pub fn speaker_pid(&self) -> Option<u32> {
        self.speaker.as_ref().map(Child::id)
    }

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

    /// Rewrites the speaker's `bfd:` line (ms, ms, multiplier); the running speaker
    /// reloads the changed file (it checks every 2 s).
    pub fn set_speaker_bfd(&self, (tx, rx, m): (u32, u32, u8)) {
        let path = self.dir.path("speaker.yaml");
        let yaml = std::fs::read_to_string(&path).unwrap();
        let start = yaml.find("    bfd: ").expect("the speaker runs BFD");
        let end = start + yaml[start..].find('\n').unwrap();
        let line = format!("    bfd: {{minTx: {tx}, minRx: {rx}, multiplier: {m}}}");
        let new = format!("{}{line}{}", &yaml[..start], &yaml[end..]);
        std::fs::write(&path, new).unwrap();
    }

    pub fn speaker_log(&self, launch: u32) -> PathBuf {
        self.dir.path(&format!("speaker{launch}.log"))
    }

    /// The current speaker's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.speaker_log(self.launches)).unwrap_or_default()
    }

    /// SIGTERM and wait: a planned restart (graceful restart, BFD handover).
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

    /// Drops everything on the node's link to the ToR (`eth0`), both ways; the node's
    /// loopback (its admin port) keeps working.
    pub fn cut_link(&self) {
        for rule in [["INPUT", "-i"], ["OUTPUT", "-o"]] {
            let args = ["iptables", "-I", rule[0], rule[1], "eth0", "-j", "DROP"];
            let out = in_ns(&self.node, &args);
            assert!(
                out.status.success(),
                "iptables: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// Holds back the BFD packets the ToR sends to the node (at the node: a ToR that sends
    /// slower than anything the node does), and counts the node's BFD packets to the ToR
    /// from now on.
    pub fn hold_tor_bfd(&self) {
        for rule in HOLD_TOR_BFD {
            let mut args = vec!["iptables", "-I"];
            args.extend_from_slice(rule);
            let out = in_ns(&self.node, &args);
            assert!(
                out.status.success(),
                "iptables: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// Ends [`BfdTopology::hold_tor_bfd`]: how many BFD packets the node sent meanwhile.
    pub fn release_tor_bfd(&self) -> u64 {
        let list = in_ns(&self.node, &["iptables", "-L", "OUTPUT", "-v", "-x", "-n"]);
        let list = String::from_utf8_lossy(&list.stdout).into_owned();
        for rule in HOLD_TOR_BFD {
            let mut args = vec!["iptables", "-D"];
            args.extend_from_slice(rule);
            let _ = in_ns(&self.node, &args);
        }
        // The counting rule: "pkts bytes target prot ... udp dpt:3784" with no target.
        list.lines()
            .find(|l| l.contains("dpt:3784"))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .expect("the counting rule")
    }

    pub fn heal_link(&self) {
        for rule in [["INPUT", "-i"], ["OUTPUT", "-o"]] {
            let args = ["iptables", "-D", rule[0], rule[1], "eth0", "-j", "DROP"];
            let _ = in_ns(&self.node, &args);
        }
    }

    /// The speaker's `/metrics` (admin port 127.0.0.1:9180 in the node's namespace).
    pub fn metrics(&self) -> String {
        let get = "import sys, urllib.request; \
                   sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())";
        let out = in_ns(
            &self.node,
            &["python3", "-c", get, "http://127.0.0.1:9180/metrics"],
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `podcidr-bgp peers -o json` against the speaker's admin endpoint, in the node's
    /// namespace.
    pub fn peers_json(&self) -> String {
        let bin = self.speaker_bin.display().to_string();
        let args = [
            bin.as_str(),
            "peers",
            "--admin",
            "http://127.0.0.1:9180",
            "-o",
            "json",
        ];
        String::from_utf8_lossy(&in_ns(&self.node, &args).stdout).into_owned()
    }

    /// The ToR's operator removes `bfd on` and reconfigures: BIRD keeps the BGP session and
    /// frees its BFD session without sending AdminDown, so the node's BFD times out.
    pub fn tor_reconfigure_without_bfd(&self) {
        let path = self.dir.path("bird.conf");
        let conf = std::fs::read_to_string(&path).unwrap();
        assert!(conf.contains(" bfd on;"), "BFD is not on at the ToR");
        std::fs::write(&path, conf.replace(" bfd on;", "")).unwrap();
        let out = self.birdc("configure");
        assert!(out.contains("Reconfigur"), "birdc configure: {out}");
    }

    /// Starts [`FRR_REPLACING_BFD_PEER`] in the ToR's namespace (BIRD must run no BFD there):
    /// it replaces its session once `trigger` exists. The caller stops it.
    pub fn spawn_frr_replacing_bfd_peer(&self, trigger: &Path) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.tor, "python3", "-c"])
            .arg(FRR_REPLACING_BFD_PEER)
            .args(["198.18.1.1", "198.18.1.2"])
            .arg(trigger)
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    }

    pub fn birdc(&self, cmd: &str) -> String {
        String::from_utf8_lossy(&in_ns(&self.tor, &["birdc", "-s", &self.sock, cmd]).stdout)
            .into_owned()
    }

    /// True while BIRD has the node's pod CIDR in its table (stale or not).
    pub fn tor_has_route(&self) -> bool {
        self.birdc("show route").contains(POD_CIDR)
    }

    pub fn tor_bfd_up(&self) -> bool {
        self.birdc("show bfd sessions")
            .lines()
            .any(|l| l.contains("198.18.1.2") && l.contains(" Up "))
    }

    pub fn tor_bgp_established(&self) -> bool {
        self.birdc("show protocols node1").contains("Established")
    }

    /// Polls `f` every `poll` until true, at most `timeout`; the time it took.
    pub fn poll_until(
        &self,
        poll: Duration,
        timeout: Duration,
        mut f: impl FnMut(&Self) -> bool,
    ) -> Option<Duration> {
        let start = Instant::now();
        loop {
            if f(self) {
                return Some(start.elapsed());
            }
            if start.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(poll);
        }
    }

    /// BIRD's log and the speaker's, for failure messages.
    pub fn diagnostics(&self) -> String {
        format!(
            "BIRD protocols:\n{}\nBIRD bfd:\n{}\nBIRD log:\n{}\nspeaker log:\n{}",
            self.birdc("show protocols all node1"),
            self.birdc("show bfd sessions"),
            std::fs::read_to_string(self.dir.path("bird.log")).unwrap_or_default(),
            self.log()
        )
    }
}

impl Drop for BfdTopology {
    fn drop(&mut self) {
        self.kill_speaker();
        stop_child(&mut self.bird, Duration::from_secs(5));
    }
}
