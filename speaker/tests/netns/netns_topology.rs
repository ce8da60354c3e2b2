//! A real forwarding topology in network namespaces the test creates: a ToR running BIRD with
//! a kernel protocol, three nodes each running `podcidr-bgp speaker` with pod addresses on
//! their loopback. After announcement the ToR reaches every pod over IPv4 and IPv6; taking
//! one node down removes only its routes. Addresses: 198.18.0.0/15 and fd00::/8 only.
//! Skipped with a message where network namespaces are not permitted.

use crate::common;
use integration_tests::skip::Need;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Proc, TempDir};
use integration_tests::netns::{Netns, in_ns, ip, ping, wire};

fn birdc(ns: &str, sock: &str, cmd: &str) -> String {
    String::from_utf8_lossy(&in_ns(ns, &["birdc", "-s", sock, cmd]).stdout).into_owned()
}

/// BIRD is another process: poll its control socket, bounded.
fn wait_bird(ns: &str, sock: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = birdc(ns, sock, "show route");
        if pred(&out) {
            return out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; BIRD routes:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn tor_reaches_every_pod_and_losing_a_node_removes_only_its_routes() {
    let tag = format!("pcb{}", std::process::id() % 100_000);
    integration_tests::require!(Need::Netns, Need::Bird, Need::Bin("ping"));
    let tor = format!("{tag}-tor");
    let nodes: Vec<String> = (1..=3).map(|i| format!("{tag}-n{i}")).collect();
    let mut ns = Netns::default();
    ns.add(&tor);
    in_ns(
        &tor,
        &[
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
            "net.ipv6.conf.all.forwarding=1",
        ],
    );
    let dir = TempDir::new("netns");
    let mut speakers = Vec::new();
    let mut bird_conf = format!(
        "log \"{}\" all;\nrouter id 198.18.0.1;\nprotocol device {{}}\n\
         protocol kernel k4 {{ ipv4 {{ import none; export all; }}; }}\n\
         protocol kernel k6 {{ ipv6 {{ import none; export all; }}; }}\n",
        dir.path("bird.log").display()
    );
    for (i, node) in nodes.iter().enumerate() {
        let i = i + 1;
        ns.add(node);
        wire(&tor, node, i);
        // The node's pods: addresses on its loopback inside its pod CIDRs.
        ip(&[
            "-n",
            node,
            "addr",
            "add",
            &format!("198.19.{i}.1/32"),
            "dev",
            "lo",
        ]);
        ip(&[
            "-n",
            node,
            "addr",
            "add",
            &format!("fd00:19:{i}::1/128"),
            "dev",
            "lo",
            "nodad",
        ]);
        bird_conf.push_str(&format!(
            "protocol bgp node{i} {{ local 198.18.{i}.1 as 65000; neighbor 198.18.{i}.2 as 64512;\n  \
             ipv4 {{ import all; export none; }}; ipv6 {{ import all; export none; }}; }}\n"
        ));
        let cidrs = dir.path(&format!("cidrs{i}.yaml"));
        std::fs::write(
            &cidrs,
            format!("nodes:\n  node{i}: [198.19.{i}.0/24, fd00:19:{i}::/64]\n"),
        )
        .unwrap();
        let cfg = dir.path(&format!("speaker{i}.yaml"));
        std::fs::write(
            &cfg,
            format!(
                "nodeName: node{i}\nasn: 64512\ngracefulShutdown: {{wait: 0}}\nrouterId: 198.18.{i}.2\n\
                 source: {{kind: file, path: {}}}\n\
                 nextHop: {{ipv4: self, ipv6: \"fd00:18:{i}::2\"}}\n\
                 peers:\n  - name: tor\n    address: 198.18.{i}.1\n    asn: 65000\n    holdTime: 9\n    \
                 connectRetry: {{base: 1, max: 2}}\n    gracefulRestart: {{enabled: false}}\n",
                cidrs.display()
            ),
        )
        .unwrap();
        speakers.push((node.clone(), cfg, dir.path(&format!("speaker{i}.log"))));
    }
    let conf = dir.path("bird.conf");
    std::fs::write(&conf, bird_conf).unwrap();
    let sock = dir.path("bird.sock").display().to_string();
    let mut bird = Command::new("ip")
        .args([
            "netns",
            "exec",
            &tor,
            "bird",
            "-f",
            "-c",
            conf.to_str().unwrap(),
            "-s",
            &sock,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut procs: Vec<Proc> = speakers
        .iter()
        .map(|(ns, cfg, log)| {
            // `ip netns exec NS podcidr-bgp …`: the speaker runs inside the node's namespace.
            let mut cmd = Command::new("ip");
            cmd.args([
                "netns",
                "exec",
                ns,
                common::BIN,
                "speaker",
                "--final",
                "--config",
            ])
            .arg(cfg);
            Proc::spawn_command(cmd, log)
        })
        .collect();

    let routes = wait_bird(&tor, &sock, "six pod routes", |out| {
        (1..=3).all(|i| {
            out.contains(&format!("198.19.{i}.0/24")) && out.contains(&format!("fd00:19:{i}::/64"))
        })
    });
    assert!(
        routes.contains("via 198.18.2.2"),
        "IPv4 next hop is the node's address:\n{routes}"
    );
    assert!(
        routes.contains("via fd00:18:2::2"),
        "IPv6 next hop is a real IPv6 address:\n{routes}"
    );
    for i in 1..=3 {
        assert!(
            ping(&tor, &format!("198.19.{i}.1")),
            "ToR cannot reach node{i}'s pod over IPv4"
        );
        assert!(
            ping(&tor, &format!("fd00:19:{i}::1")),
            "ToR cannot reach node{i}'s pod over IPv6"
        );
    }

    // Take node2 down: its speaker stops with Cease, the ToR withdraws only node2's routes.
    procs[1].signal(libc::SIGTERM);
    assert!(
        procs[1].wait_exit(Duration::from_secs(20)).is_some(),
        "speaker exits on SIGTERM"
    );
    let routes = wait_bird(&tor, &sock, "node2's routes withdrawn", |out| {
        !out.contains("198.19.2.0/24")
    });
    assert!(!routes.contains("fd00:19:2::/64"), "{routes}");
    for i in [1, 3] {
        assert!(routes.contains(&format!("198.19.{i}.0/24")), "{routes}");
        assert!(
            ping(&tor, &format!("198.19.{i}.1")),
            "node{i}'s pods stay reachable over IPv4"
        );
        assert!(
            ping(&tor, &format!("fd00:19:{i}::1")),
            "node{i}'s pods stay reachable over IPv6"
        );
    }
    assert!(!ping(&tor, "198.19.2.1"), "node2's pods are gone");
    let log = std::fs::read_to_string(dir.path("bird.log")).unwrap_or_default();
    assert!(
        log.contains("Administrative shutdown") || log.contains("podcidr-bgp speaker stopping"),
        "BIRD logged our Cease:\n{log}"
    );
    let _ = bird.kill();
    let _ = bird.wait();
    drop(procs);
}
