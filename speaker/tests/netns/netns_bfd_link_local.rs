//! Single-hop BFD over IPv6 link-local sessions against BIRD 2 (`bfd on`), in network
//! namespaces the test creates: a node-ToR veth with link-local addresses only (fe80::1 ToR,
//! fe80::2 node). The BFD sockets are scoped to the interface (RFC 4007 scope id on send,
//! the receive side told apart per interface), sent with hop limit 255 and accepted only
//! with 255 (RFC 5881 §5). Two ways to get there: an `interface` peer, and a
//! `default-gateway` peer whose IPv6 default route BIRD advertises (RA). Pod CIDR
//! fd00:5::/64. Skipped with a message where namespaces, bird or ip6tables are missing.

use crate::common;
use integration_tests::skip::Need;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::link_local::{link_local_pair, spawn_bird, spawn_speaker};
use common::{Proc, TempDir};
use integration_tests::netns::{Netns, in_ns};

const POD_CIDR: &str = "fd00:5::/64";
const WAIT: Duration = Duration::from_secs(30);

struct LinkLocal {
    procs: Vec<Proc>,
    tor: String,
    node: String,
    sock: String,
    _dir: TempDir,
    _ns: Netns,
}

impl LinkLocal {
    /// `peer`: the speaker's peer lines (after `- name: tor`). `radv`: BIRD advertises
    /// itself as the default router on the link.
    fn start(case: &str, peer: &str, radv: bool) -> Option<LinkLocal> {
        let tag = format!("pcbl{}{case}", std::process::id() % 100_000);
        integration_tests::require!(Need::Netns, Need::Bird, Need::Bin("ip6tables"));
        let mut ns = Netns::default();
        let (tor, node) = link_local_pair(&mut ns, &tag);
        let dir = TempDir::new("bfd-link-local");
        let radv = if radv {
            "protocol radv { interface \"tv\" { min ra interval 3; max ra interval 4; }; }\n"
        } else {
            ""
        };
        let bird_conf = format!(
            "log \"{}\" all;\nrouter id 198.18.0.1;\nprotocol device {{}}\n{radv}\
             protocol bfd {{ interface \"*\" {{ min rx interval 100 ms; \
             min tx interval 100 ms; multiplier 3; }}; }}\n\
             protocol bgp node {{ local as 65000; neighbor fe80::2 % 'tv' as 64512; \
             hold time 90; bfd on;\n  ipv6 {{ import all; export none; }}; }}\n",
            dir.path("bird.log").display()
        );
        let (bird, sock) = spawn_bird(&tor, &dir, &bird_conf);
        let cidrs = dir.path("cidrs.yaml");
        std::fs::write(&cidrs, format!("nodes:\n  node1: [{POD_CIDR}]\n")).unwrap();
        let cfg = dir.path("speaker.yaml");
        std::fs::write(
            &cfg,
            format!(
                "nodeName: node1\nasn: 64512\nrouterId: 198.18.5.1\n\
                 source: {{kind: file, path: {}}}\n\
                 peers:\n  - name: tor\n{peer}    asn: 65000\n    holdTime: 90\n    \
                 families: [ipv6-unicast]\n    connectRetry: {{base: 1, max: 2}}\n    \
                 gracefulRestart: {{enabled: false}}\n    \
                 bfd: {{minTx: 100, minRx: 100, multiplier: 3}}\n",
                cidrs.display()
            ),
        )
        .unwrap();
        let log: PathBuf = dir.path("speaker.log");
        Some(LinkLocal {
            procs: vec![spawn_speaker(&node, &cfg, &log), bird],
            tor,
            node,
            sock,
            _dir: dir,
            _ns: ns,
        })
    }

    fn birdc(&self, cmd: &str) -> String {
        String::from_utf8_lossy(&in_ns(&self.tor, &["birdc", "-s", &self.sock, cmd]).stdout)
            .into_owned()
    }

    fn tor_bfd_up(&self) -> bool {
        self.birdc("show bfd sessions")
            .lines()
            .any(|l| l.contains("fe80::2") && l.contains(" Up "))
    }

    fn tor_has_route(&self) -> bool {
        self.birdc("show route").contains(POD_CIDR)
    }

    /// Polls `f` until true, at most `WAIT`.
    fn wait(&self, f: impl Fn(&Self) -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < WAIT {
            if f(self) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    fn diagnostics(&self) -> String {
        format!(
            "BIRD protocols:\n{}\nBIRD bfd:\n{}\nspeaker log:\n{}",
            self.birdc("show protocols all node"),
            self.birdc("show bfd sessions"),
            self.procs[0].log()
        )
    }

    /// Drops the node's traffic on eth1 both ways.
    fn cut_link(&self) {
        for rule in [["INPUT", "-i"], ["OUTPUT", "-o"]] {
            let args = ["ip6tables", "-I", rule[0], rule[1], "eth1", "-j", "DROP"];
            let out = in_ns(&self.node, &args);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Unnumbered peering with BFD: Up at BIRD (which accepts only hop limit 255, as we do),
/// and a cut link takes the route off the ToR through BFD, well inside the 90 s hold time.
#[test]
fn bfd_over_an_interface_session_detects_a_cut_link_rfc5881() {
    let peer = "    interface: eth1\n    peerAddress: \"fe80::1\"\n";
    let t = integration_tests::needs!(LinkLocal::start("1", peer, false));
    assert!(
        t.wait(|t| t.tor_bfd_up() && t.tor_has_route()),
        "no BFD or route at the ToR\n{}",
        t.diagnostics()
    );
    assert!(
        t.procs[0].log().contains("BFD session state"),
        "{}",
        t.diagnostics()
    );
    t.cut_link();
    assert!(
        t.wait(|t| !t.tor_has_route()),
        "route kept\n{}",
        t.diagnostics()
    );
    assert!(
        t.birdc("show protocols all node")
            .contains("BFD session down"),
        "{}",
        t.diagnostics()
    );
}

/// A router-advertised IPv6 default gateway is a link-local interface peer; with `bfd` it
/// runs BFD too (it used to fail at runtime: "BFD not started").
#[test]
fn bfd_runs_with_a_router_advertised_default_gateway_rfc5881() {
    let peer = "    address: default-gateway\n    addressFamily: ipv6\n";
    let t = integration_tests::needs!(LinkLocal::start("2", peer, true));
    assert!(
        t.wait(|t| t.tor_bfd_up() && t.tor_has_route()),
        "no BFD or route at the ToR\n{}",
        t.diagnostics()
    );
    assert!(
        !t.procs[0].log().contains("BFD not started"),
        "{}",
        t.diagnostics()
    );
}
