//! IPv6 "unnumbered" peering with BIRD 2 as the ToR, in network namespaces the test creates:
//! the node-ToR link has only link-local addresses (fe80::1 ToR, fe80::2 node). The speaker
//! peers by `interface` + `peerAddress` and, with `extendedNextHop` (RFC 8950), announces an
//! IPv4 pod CIDR with its IPv6 link-local next hop; the ToR's kernel routes it `via inet6`
//! and forwards to the pod. Without the extension on either side nothing IPv4 is sent, and
//! the speaker logs why. Addresses: 198.18.0.0/15, fd00::/8, fe80::/10 on our own veth.
//! Skipped with a message where network namespaces are not permitted.

use crate::common;
use integration_tests::skip::Need;

use std::path::PathBuf;
use std::time::Duration;

use common::link_local::{link_local_pair, spawn_bird, spawn_speaker};
use common::{Proc, TempDir};
use integration_tests::netns::{Netns, in_ns, ip, ping_within};

const POD_V4: &str = "198.18.5.1";
const POD_V6: &str = "fd00:5::1";

fn birdc(ns: &str, sock: &str, cmd: &str) -> String {
    String::from_utf8_lossy(&in_ns(ns, &["birdc", "-s", sock, cmd]).stdout).into_owned()
}

/// Polls `read` until `pred` holds, bounded; panics with the last reading.
fn wait_for(what: &str, read: impl Fn() -> String, pred: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = read();
        if pred(&out) {
            return out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; last:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A ToR namespace running BIRD and a node namespace running the speaker, linked by a veth
/// pair with link-local addresses only. Dropped in reverse: processes, then namespaces.
struct Unnumbered {
    procs: Vec<Proc>,
    tor: String,
    node: String,
    sock: String,
    dir: TempDir,
    _ns: Netns,
}

impl Unnumbered {
    /// `None` (and a SKIPPED line) where namespaces, bird or ping are missing.
    /// `discover`: no `peerAddress`, the speaker finds the ToR in its neighbor table.
    fn start(case: &str, bird_enh: bool, speaker_enh: bool, discover: bool) -> Option<Unnumbered> {
        let tag = format!("pcu{}{case}", std::process::id() % 100_000);
        integration_tests::require!(Need::Netns, Need::Bird, Need::Bin("ping"));
        let mut ns = Netns::default();
        let (tor, node) = link_local_pair(&mut ns, &tag);
        // The ToR's own addresses (sources of its pings) and the node's way back to them.
        ip(&["-n", &tor, "addr", "add", "198.18.0.1/32", "dev", "lo"]);
        ip(&[
            "-n",
            &tor,
            "addr",
            "add",
            "fd00:18::1/128",
            "dev",
            "lo",
            "nodad",
        ]);
        ip(&[
            "-n",
            &node,
            "route",
            "add",
            "198.18.0.1/32",
            "via",
            "inet6",
            "fe80::1",
            "dev",
            "eth1",
        ]);
        ip(&[
            "-n",
            &node,
            "route",
            "add",
            "fd00:18::1/128",
            "via",
            "fe80::1",
            "dev",
            "eth1",
        ]);
        // The node's pods: addresses on its loopback inside its pod CIDRs.
        ip(&[
            "-n",
            &node,
            "addr",
            "add",
            &format!("{POD_V4}/32"),
            "dev",
            "lo",
        ]);
        ip(&[
            "-n",
            &node,
            "addr",
            "add",
            &format!("{POD_V6}/128"),
            "dev",
            "lo",
            "nodad",
        ]);

        let dir = TempDir::new("unnumbered");
        let enh = if bird_enh {
            " extended next hop on;"
        } else {
            ""
        };
        let bird_conf = format!(
            "log \"{}\" all;\nrouter id 198.18.0.1;\nprotocol device {{}}\n\
             protocol kernel k4 {{ ipv4 {{ import none; export all; }}; }}\n\
             protocol kernel k6 {{ ipv6 {{ import none; export all; }}; }}\n\
             protocol bgp node {{ local as 65000; neighbor fe80::2 % 'tv' as 64512; hold time 9;\n  \
             ipv4 {{ import all; export none;{enh} }}; ipv6 {{ import all; export none; }}; }}\n",
            dir.path("bird.log").display()
        );
        let (bird, sock) = spawn_bird(&tor, &dir, &bird_conf);

        let cidrs = dir.path("cidrs.yaml");
        std::fs::write(&cidrs, "nodes:\n  node1: [198.18.5.0/24, fd00:5::/64]\n").unwrap();
        let peer_address = if discover {
            ""
        } else {
            "    peerAddress: \"fe80::1\"\n"
        };
        let cfg = dir.path("speaker.yaml");
        std::fs::write(
            &cfg,
            format!(
                "nodeName: node1\nasn: 64512\nrouterId: 198.18.5.1\n\
                 source: {{kind: file, path: {}}}\n\
                 peers:\n  - name: tor\n    interface: eth1\n{peer_address}    \
                 asn: 65000\n    extendedNextHop: {speaker_enh}\n    holdTime: 9\n    \
                 connectRetry: {{base: 1, max: 2}}\n    gracefulRestart: {{enabled: false}}\n",
                cidrs.display()
            ),
        )
        .unwrap();
        let log: PathBuf = dir.path("speaker.log");
        Some(Unnumbered {
            procs: vec![spawn_speaker(&node, &cfg, &log), bird],
            tor,
            node,
            sock,
            dir,
            _ns: ns,
        })
    }

    fn bird_routes(&self) -> String {
        birdc(&self.tor, &self.sock, "show route all")
    }

    fn wait_bird(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        wait_for(what, || self.bird_routes(), pred)
    }

    fn speaker_log(&self) -> String {
        self.procs[0].log()
    }

    fn diagnostics(&self) -> String {
        format!(
            "speaker log:\n{}\nBIRD log:\n{}\nnode routes:\n{}",
            self.speaker_log(),
            std::fs::read_to_string(self.dir.path("bird.log")).unwrap_or_default(),
            String::from_utf8_lossy(&in_ns(&self.node, &["ip", "-6", "route"]).stdout)
        )
    }
}

impl Drop for Unnumbered {
    fn drop(&mut self) {
        // Processes first (Proc kills its own child by PID), then the namespaces.
        self.procs.clear();
    }
}

#[test]
fn ipv4_pod_cidr_via_ipv6_link_local_next_hop_rfc8950_forwards_from_the_tor() {
    let t = integration_tests::needs!(Unnumbered::start("a", true, true, false));
    let started = std::time::Instant::now();
    let routes = t.wait_bird("both pod CIDRs at the ToR", |r| {
        r.contains("198.18.5.0/24") && r.contains("fd00:5::/64")
    });
    // Informational (not a target): process start to both routes at BIRD.
    eprintln!("routes at BIRD after {:?}", started.elapsed());
    assert!(
        routes.contains("via fe80::2 on tv"),
        "next hops are the node's link-local address on the link:\n{routes}\n{}",
        t.diagnostics()
    );
    // The ToR's kernel forwards IPv4 via the IPv6 next hop (RTA_VIA, Linux >= 5.2).
    let kernel = wait_for(
        "the IPv4 route in the ToR's kernel",
        || {
            String::from_utf8_lossy(
                &in_ns(&t.tor, &["ip", "route", "show", "198.18.5.0/24"]).stdout,
            )
            .into_owned()
        },
        |r| !r.trim().is_empty(),
    );
    eprintln!("BIRD:\n{routes}\nToR kernel: {kernel}");
    assert!(
        kernel.contains("via inet6 fe80::2 dev tv"),
        "kernel route: {kernel}"
    );
    assert!(
        ping_within(&t.tor, POD_V4, Duration::from_secs(10)),
        "ToR cannot reach the IPv4 pod via the IPv6 next hop\n{}",
        t.diagnostics()
    );
    assert!(
        ping_within(&t.tor, POD_V6, Duration::from_secs(10)),
        "ToR cannot reach the IPv6 pod\n{}",
        t.diagnostics()
    );

    // Withdrawal: the IPv4 CIDR leaves the file; its withdrawal (classic withdrawn field,
    // RFC 4760 allows it for AFI 1/SAFI 1) reaches BIRD, the IPv6 route stays.
    std::fs::write(t.dir.path("cidrs.yaml"), "nodes:\n  node1: [fd00:5::/64]\n").unwrap();
    let routes = t.wait_bird("the IPv4 route withdrawn", |r| !r.contains("198.18.5.0/24"));
    assert!(routes.contains("fd00:5::/64"), "{routes}");
}

/// Announcing IPv6 proves the session is up, so the missing IPv4 route is a refusal, not
/// a slow session.
fn assert_only_ipv6_and_logged(t: &Unnumbered, reason: &str) {
    let routes = t.wait_bird("the IPv6 pod CIDR at the ToR", |r| {
        r.contains("fd00:5::/64")
    });
    let log = wait_for(
        "the refusal in the speaker's log",
        || t.speaker_log(),
        |l| l.contains(reason),
    );
    // A family with no usable next hop is said once per peer and family (issue 32), a
    // next hop the session cannot carry once per prefix: either way the line names what.
    let line = log.lines().find(|l| l.contains(reason)).unwrap_or_default();
    assert!(
        line.contains("family=\"ipv4-unicast\"") || line.contains("198.18.5.0/24"),
        "the refusal names the family or the prefix:\n{log}"
    );
    assert!(
        !t.bird_routes().contains("198.18.5.0/24"),
        "no IPv4 route without extended next hop:\n{routes}"
    );
}

#[test]
fn without_extended_next_hop_configured_no_ipv4_is_sent_and_the_reason_is_logged() {
    let t = integration_tests::needs!(Unnumbered::start("b", true, false, false));
    assert_only_ipv6_and_logged(&t, "needs-extended-next-hop");
}

#[test]
fn without_extended_next_hop_negotiated_no_ipv4_is_sent_rfc8950_3() {
    let t = integration_tests::needs!(Unnumbered::start("c", false, true, false));
    assert_only_ipv6_and_logged(&t, "next-hop-family");
}

#[test]
fn without_peer_address_the_tor_is_found_in_the_neighbor_table() {
    let t = integration_tests::needs!(Unnumbered::start("d", true, true, true));
    // BIRD connects to fe80::2 (refused: no listener without peerAddress), which puts
    // fe80::1 in the node's neighbor table; the speaker then connects to it.
    let routes = t.wait_bird("both pod CIDRs at the ToR", |r| {
        r.contains("198.18.5.0/24") && r.contains("fd00:5::/64")
    });
    assert!(
        routes.contains("via fe80::2 on tv"),
        "{routes}\n{}",
        t.diagnostics()
    );
    assert!(
        ping_within(&t.tor, POD_V4, Duration::from_secs(10)),
        "ToR cannot reach the IPv4 pod\n{}",
        t.diagnostics()
    );
}
