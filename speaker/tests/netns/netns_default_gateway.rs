//! `address: default-gateway` + `asn: auto` in network namespaces this test creates: a node
//! whose default route points at a ToR namespace running BIRD (`neighbor range`) or GoBGP
//! (dynamic neighbors), a node with two ToRs, a gateway change that moves one session
//! while an unrelated one stays up, one of two uplinks lost without touching the other, and
//! BFD on an IPv4 and an IPv6 gateway at once (no localAddress). One speaker config, no
//! peer address or AS in it. Addresses: 198.18.0.0/15 and fd00::/8 only. Skipped where namespaces are not permitted.

use crate::common;
use integration_tests::skip::Need;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Proc, TempDir};
use integration_tests::netns::{Netns, in_ns, ip};

const WAIT: Duration = Duration::from_secs(60);

/// A daemon started with `ip netns exec` (which execs it: the PID is the daemon's),
/// killed by that PID on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_in(ns: &str, cmd: &[&str], log: &Path) -> Child {
    let out = std::fs::File::create(log).unwrap();
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .env("RUST_LOG", "info")
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .unwrap()
}

/// A veth pair between `a` (`a_if`, 198.18.<net>.1/24, fd00:18:<net>::1/64) and `b`
/// (`b_if`, .2 / ::2), created inside the namespaces, both ends up.
fn link(a: &str, a_if: &str, b: &str, b_if: &str, net: u8) {
    ip(&[
        "-n", a, "link", "add", a_if, "type", "veth", "peer", "name", b_if, "netns", b,
    ]);
    for (ns, dev, host) in [(a, a_if, 1), (b, b_if, 2)] {
        let v4 = format!("198.18.{net}.{host}/24");
        let v6 = format!("fd00:18:{net}::{host}/64");
        ip(&["-n", ns, "addr", "add", &v4, "dev", dev]);
        ip(&["-n", ns, "addr", "add", &v6, "dev", dev, "nodad"]);
        ip(&["-n", ns, "link", "set", dev, "up"]);
    }
}

/// BIRD in `ns` accepting any eBGP speaker from the link's subnets (dynamic BGP).
fn start_bird(dir: &TempDir, ns: &str, net: u8, asn: u32) -> (Daemon, String) {
    start_bird_with(dir, ns, net, asn, false)
}

/// [`start_bird`], with `bfd on` in both protocols when `bfd`.
fn start_bird_with(dir: &TempDir, ns: &str, net: u8, asn: u32, bfd: bool) -> (Daemon, String) {
    let conf = dir.path(&format!("bird-{net}.conf"));
    let (bfd_proto, bfd_on) = if bfd {
        (
            "protocol bfd { interface \"*\" { min rx interval 100 ms; min tx interval 100 ms; }; }\n",
            // A BFD Down is an error to BIRD: without this it refuses the node for its
            // default `error wait time` (60 s) after a cut heals.
            " bfd on; error wait time 1, 2;",
        )
    } else {
        ("", "")
    };
    std::fs::write(
        &conf,
        format!(
            "router id 198.18.{net}.1;\nprotocol device {{}}\n{bfd_proto}\
             protocol bgp nodes {{ local 198.18.{net}.1 as {asn};{bfd_on}\n  \
             neighbor range 198.18.{net}.0/24 external; dynamic name \"node\";\n  \
             ipv4 {{ import all; export none; }}; ipv6 {{ import all; export none; }}; }}\n\
             protocol bgp nodes6 {{ local fd00:18:{net}::1 as {asn};{bfd_on}\n  \
             neighbor range fd00:18:{net}::/64 external; dynamic name \"vsix\";\n  \
             ipv4 {{ import all; export none; }}; ipv6 {{ import all; export none; }}; }}\n"
        ),
    )
    .unwrap();
    let sock = dir.path(&format!("bird-{net}.sock")).display().to_string();
    let log = dir.path(&format!("bird-{net}.out"));
    let child = spawn_in(
        ns,
        &["bird", "-f", "-c", conf.to_str().unwrap(), "-s", &sock],
        &log,
    );
    (Daemon(child), sock)
}

/// Waits for the speaker to log the AS it learned from the ToR's OPEN (`asn: auto`), then
/// stops it.
fn learned_as_then_stop(dir: &TempDir, speaker: &mut Proc, asn: u32) {
    let line = format!(
        "peer AS learned from its OPEN (asn: auto) peer=tor-eth0 address=198.18.1.1 asn={asn}"
    );
    wait_until(
        dir,
        "the learned AS in the speaker's log",
        || speaker.log(),
        |l| l.contains(&line),
    );
    speaker.signal(libc::SIGTERM);
    assert!(speaker.wait_exit(Duration::from_secs(20)).is_some());
}

/// `peer`'s session did not flap: BIRD shows the same dynamic protocol, still Established
/// (`before`/`after`: its `show protocols` line), and the speaker never left Established with
/// it. BIRD's `since` column can move by a millisecond without a reset, so it is not compared.
fn assert_no_flap(speaker: &Proc, peer: &str, before: &str, after: &str) {
    let log = speaker.log();
    let name = |l: &str| l.split_whitespace().next().map(str::to_owned);
    assert!(
        name(after) == name(before)
            && after.contains("Established")
            && !log.contains(&format!("peer=\"{peer}\" from=\"Established\"")),
        "{peer}'s session flapped ({before:?} → {after:?}); speaker log:\n{log}"
    );
}

fn birdc(ns: &str, sock: &str, cmd: &str) -> String {
    String::from_utf8_lossy(&in_ns(ns, &["birdc", "-s", sock, cmd]).stdout).into_owned()
}

/// Polls `probe` until `pred` holds, bounded by [`WAIT`]; on timeout shows the logs in `dir`.
fn wait_until(
    dir: &TempDir,
    what: &str,
    mut probe: impl FnMut() -> String,
    pred: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let out = probe();
        if pred(&out) {
            return out;
        }
        if Instant::now() >= deadline {
            let logs = std::fs::read_dir(dir.path(""))
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| {
                    e.path()
                        .extension()
                        .is_some_and(|x| x == "log" || x == "out")
                })
                .map(|e| {
                    let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                    format!("--- {}\n{text}", e.path().display())
                })
                .collect::<Vec<_>>()
                .join("\n");
            panic!("timed out waiting for {what}:\n{out}\n{logs}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn write_config(dir: &TempDir, peers: &str) -> PathBuf {
    let cidrs = dir.path("cidrs.yaml");
    std::fs::write(&cidrs, "nodes:\n  node1: [198.19.1.0/24, fd00:19:1::/64]\n").unwrap();
    let cfg = dir.path("speaker.yaml");
    std::fs::write(
        &cfg,
        format!(
            "nodeName: node1\nasn: 64512\nrouterId: 198.18.250.1\n\
             source: {{kind: file, path: {}}}\nadmin: {{listen: \"127.0.0.1:0\"}}\n\
             peers:\n{peers}",
            cidrs.display()
        ),
    )
    .unwrap();
    cfg
}

/// The one config every node gets: peer with whatever the default route points at.
const GATEWAY_PEERS: &str = concat!(
    "  - {name: tor, address: default-gateway, asn: auto, allowedAsns: [65000-65100], ",
    "holdTime: 9, connectRetry: {base: 1, max: 2}, gracefulRestart: {enabled: false}}\n",
    "  - {name: tor6, address: default-gateway, addressFamily: ipv6, asn: auto, ",
    "allowedAsns: [65000-65100], holdTime: 9, connectRetry: {base: 1, max: 2}, ",
    "gracefulRestart: {enabled: false}}\n",
);

/// Only the IPv4 `tor` entry of [`GATEWAY_PEERS`].
fn ipv4_gateway_peer() -> String {
    GATEWAY_PEERS.lines().next().unwrap_or_default().to_owned() + "\n"
}

fn start_speaker(dir: &TempDir, node: &str, cfg: &Path) -> Proc {
    let log = dir.path("speaker.log");
    let child = spawn_in(
        node,
        &[
            common::BIN,
            "speaker",
            "--final",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &log,
    );
    Proc { child, log }
}

fn setup() -> Option<(Netns, TempDir)> {
    integration_tests::require!(Need::Netns, Need::Bird);
    Some((Netns::default(), TempDir::new("netns-gw")))
}

/// A node behind one ToR on eth0 with an IPv4 and an IPv6 default route through it.
fn dual_stack_gateway(ns: &mut Netns, tag: &str) -> (String, String) {
    let (node, tor) = (format!("{tag}-node"), format!("{tag}-tor"));
    ns.add(&node);
    ns.add(&tor);
    link(&tor, "to-node", &node, "eth0", 1);
    ip(&["-n", &node, "route", "add", "default", "via", "198.18.1.1"]);
    ip(&[
        "-n",
        &node,
        "-6",
        "route",
        "add",
        "default",
        "via",
        "fd00:18:1::1",
    ]);
    (node, tor)
}

/// A node with two uplinks: eth0 to one ToR (198.18.1.0/24), eth1 to another (198.18.2.0/24).
fn two_uplinks(ns: &mut Netns, tag: &str) -> (String, String, String) {
    let (node, tor1, tor2) = (
        format!("{tag}-node"),
        format!("{tag}-tor1"),
        format!("{tag}-tor2"),
    );
    for n in [&node, &tor1, &tor2] {
        ns.add(n);
    }
    link(&tor1, "to-node", &node, "eth0", 1);
    link(&tor2, "to-node", &node, "eth1", 2);
    (node, tor1, tor2)
}

fn tag(test: u32) -> String {
    format!("pgw{}{test}", std::process::id() % 100_000)
}

#[test]
fn default_gateway_and_asn_auto_peer_with_bird_neighbor_range() {
    let tag = tag(1);
    let (mut ns, dir) = integration_tests::needs!(setup());
    let (node, tor) = dual_stack_gateway(&mut ns, &tag);
    let (_bird, sock) = start_bird(&dir, &tor, 1, 65042);
    let mut speaker = start_speaker(&dir, &node, &write_config(&dir, GATEWAY_PEERS));

    let routes = wait_until(
        &dir,
        "both families at the gateway's BIRD",
        || birdc(&tor, &sock, "show route"),
        |r| r.contains("198.19.1.0/24") && r.contains("fd00:19:1::/64"),
    );
    assert!(
        routes.contains("via 198.18.1.2"),
        "next hop self:\n{routes}"
    );
    // BIRD's dynamic protocols saw our AS; we learned theirs (65042) from the OPEN.
    let protos = birdc(&tor, &sock, "show protocols all");
    assert!(protos.contains("Neighbor AS:      64512"), "{protos}");
    learned_as_then_stop(&dir, &mut speaker, 65042);
}

#[test]
fn asn_auto_refuses_an_as_outside_allowed_asns_with_bad_peer_as() {
    let tag = tag(2);
    let (mut ns, dir) = integration_tests::needs!(setup());
    let (node, tor) = (format!("{tag}-node"), format!("{tag}-tor"));
    ns.add(&node);
    ns.add(&tor);
    link(&tor, "to-node", &node, "eth0", 1);
    ip(&["-n", &node, "route", "add", "default", "via", "198.18.1.1"]);
    // 65200 is outside allowedAsns 65000-65100.
    let (_bird, sock) = start_bird(&dir, &tor, 1, 65200);
    let peers = ipv4_gateway_peer();
    let _speaker = start_speaker(&dir, &node, &write_config(&dir, &peers));
    let protos = wait_until(
        &dir,
        "BIRD to receive Bad Peer AS",
        || birdc(&tor, &sock, "show protocols all"),
        |p| p.contains("Bad peer AS"),
    );
    assert!(!protos.contains("Established"), "{protos}");
    assert!(!birdc(&tor, &sock, "show route").contains("198.19.1.0/24"));
}

/// docs/tor.md's dynamic-neighbor GoBGP block as written (only GoBGP's listen address
/// added): a peer group, the outbound deny; and the guide's claim that GoBGP drops a dynamic
/// neighbor's routes when its session drops even with graceful restart negotiated (the
/// peer group's `graceful-restart` blocks added here), which is why the guide gives a
/// per-node block for rolling restarts.
#[test]
fn default_gateway_peers_with_gobgp_dynamic_neighbors() {
    let tag = tag(3);
    let (mut ns, dir) = integration_tests::needs!(setup());
    integration_tests::require!(Need::Gobgp);
    let (node, tor) = (format!("{tag}-node"), format!("{tag}-tor"));
    ns.add(&node);
    ns.add(&tor);
    link(&tor, "to-node", &node, "eth0", 1);
    ip(&["-n", &node, "route", "add", "default", "via", "198.18.1.1"]);
    let conf = dir.path("gobgpd.toml");
    let block = integration_tests::tor_guide::snippet("gobgp-dynamic-neighbors");
    let edits = [
        (
            "  router-id = \"198.18.1.1\"\n",
            "  local-address-list = [\"198.18.1.1\"]\n",
        ),
        (
            "    peer-as = 64512            # GoBGP needs the nodes' AS here\n",
            "  [peer-groups.graceful-restart.config]\n    enabled = true\n    restart-time = 120\n",
        ),
        (
            "      afi-safi-name = \"ipv4-unicast\"\n",
            "    [peer-groups.afi-safis.mp-graceful-restart.config]\n      enabled = true\n",
        ),
    ];
    let block = edits.iter().fold(block, |b, (after, add)| {
        assert!(
            b.contains(after),
            "{after:?} not in the guide's block:\n{b}"
        );
        b.replacen(after, &format!("{after}{add}"), 1)
    });
    std::fs::write(&conf, block).unwrap();
    let api = "127.0.0.1:50151";
    let _gobgp = Daemon(spawn_in(
        &tor,
        &[
            "gobgpd",
            "-f",
            conf.to_str().unwrap(),
            "--api-hosts",
            api,
            "--pprof-disable",
        ],
        &dir.path("gobgpd.log"),
    ));
    let gobgp = |args: &[&str]| {
        let mut all = vec!["gobgp", "-u", "127.0.0.1", "-p", "50151"];
        all.extend_from_slice(args);
        let out = in_ns(&tor, &all);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let peers = ipv4_gateway_peer();
    let cfg = write_config(&dir, &peers);
    let mut speaker = start_speaker(&dir, &node, &cfg);
    let rib = wait_until(
        &dir,
        "the route at GoBGP",
        || gobgp(&["global", "rib", "-a", "ipv4"]),
        |r| r.contains("198.19.1.0/24"),
    );
    assert!(rib.contains("198.18.1.2"), "next hop self:\n{rib}");
    // The outbound deny: a route in GoBGP's table is not sent to the node.
    gobgp(&["global", "rib", "add", "198.18.200.0/24", "-a", "ipv4"]);
    let rib = gobgp(&["global", "rib", "-a", "ipv4"]);
    assert!(rib.contains("198.18.200.0/24"), "{rib}");
    let adj_out = gobgp(&["neighbor", "198.18.1.2", "adj-out", "-a", "ipv4"]);
    assert!(
        !adj_out.contains("198.18.200.0/24") && !adj_out.contains("198.19.1.0/24"),
        "default-export-policy reject-route sends the node nothing:\n{adj_out}"
    );
    // Graceful restart negotiated for IPv4 with the dynamic neighbor...
    let neighbor: serde_json::Value =
        serde_json::from_str(&gobgp(&["neighbor", "198.18.1.2", "-j"])).unwrap();
    let negotiated = neighbor["afi_safis"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|a| a["mp_graceful_restart"]["state"]["advertised"] == true);
    assert!(negotiated, "{neighbor}");
    // ...and still, the route goes with the session (docs/tor.md, "GoBGP and rolling
    // restarts"). If a GoBGP release keeps it, that paragraph is out of date.
    speaker.signal(libc::SIGKILL);
    assert!(speaker.wait_exit(Duration::from_secs(10)).is_some());
    wait_until(
        &dir,
        "GoBGP dropping the dead speaker's route",
        || gobgp(&["global", "rib", "-a", "ipv4"]),
        |r| !r.contains("198.19.1.0/24"),
    );
    let mut speaker = start_speaker(&dir, &node, &cfg);
    learned_as_then_stop(&dir, &mut speaker, 65010);
}

#[test]
fn two_tors_one_config_one_session_per_next_hop_ecmp_or_metric_with_its_own_local_address() {
    let tag = tag(4);
    let (mut ns, dir) = integration_tests::needs!(setup());
    let (node, tor1, tor2) = two_uplinks(&mut ns, &tag);
    // IPv4: one multipath (ECMP) route, whose second next hop only rtnetlink shows.
    let ecmp = "default nexthop via 198.18.1.1 dev eth0 nexthop via 198.18.2.1 dev eth1";
    let mut args = vec!["-n", node.as_str(), "route", "add"];
    args.extend(ecmp.split(' '));
    ip(&args);
    // IPv6: two default routes of different metrics.
    for (via, dev, metric) in [
        ("fd00:18:1::1", "eth0", "100"),
        ("fd00:18:2::1", "eth1", "200"),
    ] {
        ip(&[
            "-n", &node, "-6", "route", "add", "default", "via", via, "dev", dev, "metric", metric,
        ]);
    }
    let (_b1, sock1) = start_bird(&dir, &tor1, 1, 65001);
    let (_b2, sock2) = start_bird(&dir, &tor2, 2, 65002);
    let mut speaker = start_speaker(&dir, &node, &write_config(&dir, GATEWAY_PEERS));
    for (tor, sock, net) in [(&tor1, &sock1, 1), (&tor2, &sock2, 2)] {
        let routes = wait_until(
            &dir,
            "both ToRs to get both families",
            || birdc(tor, sock, "show route"),
            |r| r.contains("198.19.1.0/24") && r.contains("fd00:19:1::/64"),
        );
        assert!(
            routes.contains(&format!("via 198.18.{net}.2")),
            "ToR {net} gets the node's address on its own link:\n{routes}"
        );
        assert!(
            routes.contains(&format!("via fd00:18:{net}::2")),
            "ToR {net} gets the node's IPv6 address on its own link:\n{routes}"
        );
    }
    let log = speaker.log();
    for name in ["tor-eth0", "tor-eth1", "tor6-eth0", "tor6-eth1"] {
        assert!(log.contains(name), "session {name} in the log:\n{log}");
    }
    speaker.signal(libc::SIGTERM);
    assert!(speaker.wait_exit(Duration::from_secs(20)).is_some());
}

/// `show protocols` line of the dynamic IPv4 session (`node<N>`): name, state and since
/// (second resolution).
fn dynamic_v4_session(ns: &str, sock: &str) -> String {
    birdc(ns, sock, "show protocols")
        .lines()
        .find(|l| {
            l.split_whitespace().next().is_some_and(|n| {
                n.strip_prefix("node")
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_changed_gateway_moves_only_that_session_the_other_peer_does_not_flap() {
    let tag = tag(5);
    let (mut ns, dir) = integration_tests::needs!(setup());
    let (node, tor1, tor2, rr) = (
        format!("{tag}-node"),
        format!("{tag}-tor1"),
        format!("{tag}-tor2"),
        format!("{tag}-rr"),
    );
    for n in [&node, &tor1, &tor2, &rr] {
        ns.add(n);
    }
    link(&tor1, "to-node", &node, "eth0", 1);
    link(&tor2, "to-node", &node, "eth1", 2);
    link(&rr, "to-node", &node, "eth2", 3);
    ip(&["-n", &node, "route", "add", "default", "via", "198.18.1.1"]);
    let (_b1, sock1) = start_bird(&dir, &tor1, 1, 65001);
    let (_b2, sock2) = start_bird(&dir, &tor2, 2, 65002);
    let (_b3, sock3) = start_bird(&dir, &rr, 3, 65003);
    let peers = ipv4_gateway_peer()
        + "  - {name: rr, address: 198.18.3.1, asn: 65003, holdTime: 9, \
           connectRetry: {base: 1, max: 2}, gracefulRestart: {enabled: false}}\n";
    let speaker = start_speaker(&dir, &node, &write_config(&dir, &peers));
    for (n, sock) in [(&tor1, &sock1), (&rr, &sock3)] {
        wait_until(
            &dir,
            "tor1 and rr to get the route",
            || birdc(n, sock, "show route"),
            |r| r.contains("198.19.1.0/24"),
        );
    }
    let rr_before = dynamic_v4_session(&rr, &sock3);
    assert!(rr_before.contains("Established"), "{rr_before}");

    ip(&[
        "-n",
        &node,
        "route",
        "replace",
        "default",
        "via",
        "198.18.2.1",
    ]);
    wait_until(
        &dir,
        "tor2 to get the route",
        || birdc(&tor2, &sock2, "show route"),
        |r| r.contains("198.19.1.0/24") && r.contains("via 198.18.2.2"),
    );
    wait_until(
        &dir,
        "tor1 to lose it",
        || birdc(&tor1, &sock1, "show route"),
        |r| !r.contains("198.19.1.0/24"),
    );
    assert_no_flap(&speaker, "rr", &rr_before, &dynamic_v4_session(&rr, &sock3));
    let log = speaker.log();
    assert!(log.contains("default routes changed"), "{log}");
    // The gateway moved to another interface: tor-eth0 stopped, tor-eth1 started; rr kept.
    assert!(
        log.contains("added=1 removed=1 reset=0"),
        "only tor's session was replaced:\n{log}"
    );

    // No default route at all: the session stops, the log says why, rr stays.
    ip(&["-n", &node, "route", "del", "default"]);
    wait_until(
        &dir,
        "tor2 to lose the route",
        || birdc(&tor2, &sock2, "show route"),
        |r| !r.contains("198.19.1.0/24"),
    );
    wait_until(
        &dir,
        "the reason in the speaker's log",
        || speaker.log(),
        |l| l.contains("peer tor: no default route for ipv4; the session starts when one appears"),
    );
    assert_no_flap(&speaker, "rr", &rr_before, &dynamic_v4_session(&rr, &sock3));
    drop(speaker);
}

#[test]
fn losing_one_of_two_uplinks_leaves_the_other_session_up() {
    let tag = tag(6);
    let (mut ns, dir) = integration_tests::needs!(setup());
    let (node, tor1, tor2) = two_uplinks(&mut ns, &tag);
    // One default route per uplink, as DHCP or networkd installs them.
    for (via, dev, metric) in [("198.18.1.1", "eth0", "100"), ("198.18.2.1", "eth1", "200")] {
        ip(&[
            "-n", &node, "route", "add", "default", "via", via, "dev", dev, "metric", metric,
        ]);
    }
    let (_b1, sock1) = start_bird(&dir, &tor1, 1, 65001);
    let (_b2, sock2) = start_bird(&dir, &tor2, 2, 65002);
    let speaker = start_speaker(&dir, &node, &write_config(&dir, &ipv4_gateway_peer()));
    for (n, sock) in [(&tor1, &sock1), (&tor2, &sock2)] {
        wait_until(
            &dir,
            "both ToRs to get the route",
            || birdc(n, sock, "show route"),
            |r| r.contains("198.19.1.0/24"),
        );
    }
    let tor2_before = dynamic_v4_session(&tor2, &sock2);
    assert!(tor2_before.contains("Established"), "{tor2_before}");

    // eth0's default route goes (its lease ended, say): only tor1's session stops.
    ip(&[
        "-n",
        &node,
        "route",
        "del",
        "default",
        "via",
        "198.18.1.1",
        "dev",
        "eth0",
    ]);
    wait_until(
        &dir,
        "tor1 to lose the route",
        || birdc(&tor1, &sock1, "show route"),
        |r| !r.contains("198.19.1.0/24"),
    );
    // No Cease, no new session.
    let tor2_after = dynamic_v4_session(&tor2, &sock2);
    assert_no_flap(&speaker, "tor-eth1", &tor2_before, &tor2_after);
    assert!(birdc(&tor2, &sock2, "show route").contains("198.19.1.0/24"));
    let log = speaker.log();
    assert!(log.contains("default routes changed"), "{log}");
    drop(speaker);
}

#[test]
fn ipv4_and_ipv6_gateways_both_run_bfd_without_local_address() {
    let tag = tag(7);
    let (mut ns, dir) = integration_tests::needs!(setup());
    let (node, tor) = dual_stack_gateway(&mut ns, &tag);
    let (_bird, sock) = start_bird_with(&dir, &tor, 1, 65042, true);
    // Both default-gateway peers with BFD: neither may set localAddress, so the IPv4
    // session binds 0.0.0.0:3784 and the IPv6 one [::]:3784.
    let peers = GATEWAY_PEERS.replace(
        "gracefulRestart: {enabled: false}}",
        "gracefulRestart: {enabled: false}, bfd: {minTx: 100, minRx: 100}}",
    );
    let speaker = start_speaker(&dir, &node, &write_config(&dir, &peers));
    let sessions = wait_until(
        &dir,
        "BIRD's BFD sessions with both of the node's addresses to be Up",
        || birdc(&tor, &sock, "show bfd sessions"),
        |b| {
            ["198.18.1.2", "fd00:18:1::2"].iter().all(|a| {
                b.lines()
                    .any(|l| l.contains(a) && l.split_whitespace().any(|w| w == "Up"))
            })
        },
    );
    let log = speaker.log();
    assert!(!log.contains("BFD not started"), "{sessions}\n{log}");
    drop(speaker);
}

/// `ip route show proto 179` in `ns` (IPv4): the speaker's own egress routes.
fn egress_routes(ns: &str) -> String {
    String::from_utf8_lossy(&in_ns(ns, &["ip", "route", "show", "proto", "179"]).stdout)
        .into_owned()
}

/// A silent cut of `dev` at the node (carrier stays up): DROP in and out (`-I`), or healed
/// (`-D`).
fn silent_cut(ns: &str, dev: &str, op: &str) {
    for (chain, dir) in [("INPUT", "-i"), ("OUTPUT", "-o")] {
        let out = in_ns(ns, &["iptables", op, chain, dir, dev, "-j", "DROP"]);
        assert!(
            out.status.success(),
            "iptables {op} {chain}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `egress.followSessions` against two BIRD ToRs with BFD and an ECMP default route: a
/// silent cut of one uplink takes its next hop out of the node's egress, healing brings it
/// back, and a SIGKILLed speaker leaves the node with its default route (the next process
/// cleans up).
#[test]
fn egress_leaves_a_silently_cut_uplink_and_sigkill_leaves_a_default_route() {
    let tag = tag(8);
    integration_tests::require!(Need::Bin("iptables"));
    let (mut ns, dir) = integration_tests::needs!(setup());
    let (node, tor1, tor2) = two_uplinks(&mut ns, &tag);
    let ecmp = "default nexthop via 198.18.1.1 dev eth0 nexthop via 198.18.2.1 dev eth1";
    let mut args = vec!["-n", node.as_str(), "route", "add"];
    args.extend(ecmp.split(' '));
    ip(&args);
    let (_b1, sock1) = start_bird_with(&dir, &tor1, 1, 65001, true);
    let (_b2, sock2) = start_bird_with(&dir, &tor2, 2, 65002, true);
    let peers = ipv4_gateway_peer().replace(
        "gracefulRestart: {enabled: false}}",
        "gracefulRestart: {enabled: false}, bfd: {minTx: 100, minRx: 100}}",
    ) + "egress: {followSessions: true}\n";
    let cfg = write_config(&dir, &peers);
    let both_up = |dir: &TempDir| {
        for (tor, sock) in [(&tor1, &sock1), (&tor2, &sock2)] {
            wait_until(
                dir,
                "both ToRs' BFD sessions Up and the route learned",
                || birdc(tor, sock, "show bfd sessions") + &birdc(tor, sock, "show route"),
                |b| {
                    b.contains("198.19.1.0/24")
                        && b.lines().any(|l| {
                            l.contains("198.18.") && l.split_whitespace().any(|w| w == "Up")
                        })
                },
            );
        }
    };
    let mut speaker = start_speaker(&dir, &node, &cfg);
    both_up(&dir);
    assert_eq!(
        egress_routes(&node),
        "",
        "all up: the default route as it is"
    );

    // The rule: a silent cut takes that uplink's next hop out of the node's egress.
    silent_cut(&node, "eth0", "-I");
    let ours = wait_until(
        &dir,
        "the node's egress to leave the cut uplink",
        || egress_routes(&node),
        |r| r.contains("0.0.0.0/1") && r.contains("128.0.0.0/1") && !r.contains("198.18.1.1"),
    );
    assert!(ours.contains("via 198.18.2.1 dev eth1"), "{ours}");
    let get =
        String::from_utf8_lossy(&in_ns(&node, &["ip", "route", "get", "198.19.200.1"]).stdout)
            .into_owned();
    assert!(get.contains("via 198.18.2.1 dev eth1"), "{get}");
    // The node's own default route is untouched: both next hops.
    let default =
        String::from_utf8_lossy(&in_ns(&node, &["ip", "route", "show", "default"]).stdout)
            .into_owned();
    assert!(
        default.contains("198.18.1.1") && default.contains("198.18.2.1"),
        "{default}"
    );
    assert!(speaker.log().contains("left out of the node's egress"));

    // Healing: BFD and BGP come back, the route of ours goes.
    silent_cut(&node, "eth0", "-D");
    wait_until(
        &dir,
        "the route of ours to go",
        || egress_routes(&node),
        str::is_empty,
    );

    // SIGKILL mid-cut: nothing runs to clean up, and the node still has its default route.
    silent_cut(&node, "eth0", "-I");
    wait_until(
        &dir,
        "the node's egress to leave the cut uplink again",
        || egress_routes(&node),
        |r| r.contains("0.0.0.0/1") && !r.contains("198.18.1.1"),
    );
    speaker.signal(libc::SIGKILL);
    assert!(speaker.wait_exit(Duration::from_secs(5)).is_some());
    let default =
        String::from_utf8_lossy(&in_ns(&node, &["ip", "route", "show", "default"]).stdout)
            .into_owned();
    assert!(
        default.contains("198.18.1.1") && default.contains("198.18.2.1"),
        "{default}"
    );
    assert!(
        egress_routes(&node).contains("198.18.2.1"),
        "left as it was"
    );
    // The next process adopts it and, once both sessions are back, removes it.
    silent_cut(&node, "eth0", "-D");
    let _next = start_speaker(&dir, &node, &cfg);
    both_up(&dir);
    wait_until(
        &dir,
        "the next process to remove the route of ours",
        || egress_routes(&node),
        str::is_empty,
    );
}
