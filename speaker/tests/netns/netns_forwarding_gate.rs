//! `forwardingGate` end to end, in network namespaces this test creates: a node namespace
//! behind a ToR namespace running BIRD 2, the speaker in the node with `cni.enabled` and the
//! gate on, and a pod created the way a container runtime creates it (Debian's CNI reference
//! plugins, bridge + host-local, with the conflist the speaker wrote).
//!
//! The node has three CIDRs: 198.19.1.0/24 (the CNI bridge's, routed once the first pod gives
//! the bridge its address), 198.19.2.0/24 (routed from the start on a veth: the
//! control that proves the speaker's announcements reach BIRD) and 198.19.3.0/24 (routed back
//! out of the uplink, towards the ToR: never announced). At the end the config is reloaded
//! with `mode: report`: every CIDR goes out, and the log and `/debug/status` say what the gate
//! would hold. Addresses: 198.18.0.0/15 only.
//! Skipped with a message where namespaces, BIRD or the plugins are not available.

use crate::common;
use integration_tests::skip::Need;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Proc, TempDir};
use integration_tests::cni::{Attachment, CniRuntime};
use integration_tests::netns::{Netns, in_ns, ip, wire};
use integration_tests::wait_for;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);
const BRIDGE_CIDR: &str = "198.19.1.0/24";
const DUMMY_CIDR: &str = "198.19.2.0/24";
const UPLINK_CIDR: &str = "198.19.3.0/24";

fn birdc(tor: &str, sock: &str, cmd: &str) -> String {
    String::from_utf8_lossy(&in_ns(tor, &["birdc", "-s", sock, cmd]).stdout).into_owned()
}

/// The prefixes BIRD imported from the node.
fn at_tor(tor: &str, sock: &str) -> Vec<String> {
    birdc(tor, sock, "show route protocol node1")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with("198.19."))
        .map(str::to_owned)
        .collect()
}

#[test]
fn gated_cidr_is_announced_once_the_cni_bridge_routes_it_and_withdrawn_when_the_route_goes() {
    let tag = format!("fg{}", std::process::id() % 100_000);
    integration_tests::require!(Need::Netns, Need::Bird, Need::CniPlugins);
    let dir = TempDir::new("netns-forwarding-gate");
    let (tor, node, pod) = (
        format!("{tag}-tor"),
        format!("{tag}-node"),
        format!("{tag}-pod"),
    );
    let mut ns = Netns::default();
    ns.add(&tor);
    ns.add(&node);
    ns.add(&pod);
    wire(&tor, &node, 1);
    ip(&["-n", &node, "route", "add", "default", "via", "198.18.1.1"]);
    ip(&[
        "-n", &node, "link", "add", "pods-v0", "type", "veth", "peer", "name", "pods-v1",
    ]);
    ip(&[
        "-n",
        &node,
        "addr",
        "add",
        "198.19.2.1/24",
        "dev",
        "pods-v0",
    ]);
    for dev in ["pods-v0", "pods-v1"] {
        ip(&["-n", &node, "link", "set", dev, "up"]);
    }
    ip(&[
        "-n",
        &node,
        "route",
        "add",
        UPLINK_CIDR,
        "via",
        "198.18.1.1",
        "dev",
        "eth0",
    ]);

    let bird_conf = dir.path("bird.conf");
    std::fs::write(
        &bird_conf,
        "router id 198.18.1.1;\nprotocol device { scan time 1; }\n\
         protocol bgp node1 { local 198.18.1.1 as 65000; neighbor 198.18.1.2 as 64512;\n  \
         ipv4 { import all; export none; }; }\n",
    )
    .unwrap();
    let sock = dir.path("bird.sock").display().to_string();
    let mut bird_cmd = Command::new("ip");
    bird_cmd
        .args(["netns", "exec", &tor, "bird", "-f", "-c"])
        .arg(&bird_conf)
        .args(["-s", &sock]);
    let _bird = Proc::spawn_command(bird_cmd, &dir.path("bird.log"));

    let cidrs = dir.path("cidrs.yaml");
    std::fs::write(
        &cidrs,
        format!("nodes:\n  node1: [{BRIDGE_CIDR}, {DUMMY_CIDR}, {UPLINK_CIDR}]\n"),
    )
    .unwrap();
    let cni_dir = dir.path("cni");
    std::fs::create_dir_all(cni_dir.join("net.d")).unwrap();
    let cfg = dir.path("speaker.yaml");
    // The admin port is the node namespace's own loopback. `withdrawHoldDown: 0`: the
    // withdrawals below measure the gate's reaction, not its hold-down (core tests cover that).
    let config = |gate: &str| {
        format!(
            "nodeName: node1\nasn: 64512\nrouterId: 198.18.1.2\n\
             source: {{kind: file, path: {cidrs}}}\nadmin: {{listen: \"127.0.0.1:9180\"}}\n\
             peers:\n  - {{name: tor, address: 198.18.1.1, asn: 65000, holdTime: 9, \
             connectRetry: {{base: 1, max: 2}}, gracefulRestart: {{enabled: false}}}}\n\
             cni: {{enabled: true, confDir: {d}/net.d, dataDir: {d}/leases}}\n\
             forwardingGate: {{enabled: true, withdrawHoldDown: 0{gate}}}\n",
            cidrs = cidrs.display(),
            d = cni_dir.display(),
        )
    };
    std::fs::write(&cfg, config("")).unwrap();
    let mut speaker_cmd = Command::new("ip");
    speaker_cmd
        .args(["netns", "exec", &node, common::BIN, "speaker", "--final"])
        .arg("--config")
        .arg(&cfg);
    let speaker = Proc::spawn_command(speaker_cmd, &dir.path("speaker.log"));
    let diagnostics = |what: &str| {
        format!(
            "{what}\nToR: {:?}\nspeaker log:\n{}\nBIRD:\n{}",
            at_tor(&tor, &sock),
            speaker.log(),
            birdc(&tor, &sock, "show protocols all node1")
        )
    };

    // The control goes out; in the same decision the other two are held, with their reasons.
    assert!(
        wait_for(WAIT, || at_tor(&tor, &sock)
            .contains(&DUMMY_CIDR.to_owned())),
        "{}",
        diagnostics("the routed CIDR reaches the ToR")
    );
    assert!(
        wait_for(WAIT, || {
            let log = speaker.log();
            log.contains(&format!("cidr={BRIDGE_CIDR} reason=\"no-route\""))
                && log.contains(&format!("cidr={UPLINK_CIDR} reason=\"via-uplink\""))
        }),
        "{}",
        diagnostics("the speaker logs what it holds and why")
    );
    assert_eq!(
        at_tor(&tor, &sock),
        [DUMMY_CIDR],
        "{}",
        diagnostics("only the routed CIDR is announced")
    );

    // A pod, created as a runtime creates it: the bridge gets 198.19.1.1/24 and its route.
    let conflist_path = cni_dir.join("net.d/10-podcidr-bgp.conflist");
    let conflist: Value =
        serde_json::from_str(&std::fs::read_to_string(&conflist_path).unwrap()).unwrap();
    let attachment = Attachment {
        host_ns: node.clone(),
        pod_ns: pod.clone(),
        container_id: format!("{tag}-c1"),
        ifname: "eth0".into(),
    };
    let cni = CniRuntime::default();
    let result = cni
        .add(&conflist, &attachment)
        .unwrap_or_else(|e| panic!("ADD: {e}"));
    let added = Instant::now();
    assert!(
        wait_for(WAIT, || at_tor(&tor, &sock)
            .contains(&BRIDGE_CIDR.to_owned())),
        "{}",
        diagnostics("the bridge's CIDR is announced once the pod is up")
    );
    eprintln!(
        "bridge CIDR at the ToR {} ms after the CNI ADD returned",
        added.elapsed().as_millis()
    );
    assert!(
        speaker
            .log()
            .contains(&format!("forwarding gate released a pod CIDR: the node can deliver to it, announcing cidr={BRIDGE_CIDR}")),
        "{}",
        diagnostics("the release is logged")
    );
    assert!(!at_tor(&tor, &sock).contains(&UPLINK_CIDR.to_owned()));

    // The bridge loses its address: the route goes, and so does the announcement.
    ip(&[
        "-n",
        &node,
        "addr",
        "del",
        "198.19.1.1/24",
        "dev",
        "podcidr0",
    ]);
    let removed = Instant::now();
    assert!(
        wait_for(WAIT, || !at_tor(&tor, &sock)
            .contains(&BRIDGE_CIDR.to_owned())),
        "{}",
        diagnostics("withdrawn when the bridge's route goes")
    );
    eprintln!(
        "bridge CIDR withdrawn at the ToR {} ms after its address was removed",
        removed.elapsed().as_millis()
    );
    assert!(at_tor(&tor, &sock).contains(&DUMMY_CIDR.to_owned()));

    // It comes back; then the whole bridge is deleted (IPv4 flushes the device's routes
    // without a route notification of their own).
    ip(&[
        "-n",
        &node,
        "addr",
        "add",
        "198.19.1.1/24",
        "dev",
        "podcidr0",
    ]);
    assert!(
        wait_for(WAIT, || at_tor(&tor, &sock)
            .contains(&BRIDGE_CIDR.to_owned())),
        "{}",
        diagnostics("re-announced when the route comes back")
    );
    ip(&["-n", &node, "link", "del", "podcidr0"]);
    let deleted = Instant::now();
    assert!(
        wait_for(WAIT, || !at_tor(&tor, &sock)
            .contains(&BRIDGE_CIDR.to_owned())),
        "{}",
        diagnostics("withdrawn when the bridge is deleted")
    );
    eprintln!(
        "bridge CIDR withdrawn at the ToR {} ms after the bridge was deleted",
        deleted.elapsed().as_millis()
    );
    assert_eq!(at_tor(&tor, &sock), [DUMMY_CIDR]);
    let _ = cni.del(&conflist, &attachment, &result);

    // Review 2 F8, `mode: report` by reload: the same verdicts (the bridge's CIDR without a
    // route, the other looping out of the uplink), reported, and nothing withheld.
    std::fs::write(&cfg, config(", mode: report")).unwrap();
    speaker.signal(libc::SIGHUP);
    assert!(
        wait_for(WAIT, || at_tor(&tor, &sock).len() == 3),
        "{}",
        diagnostics("report mode announces every CIDR")
    );
    let log = speaker.log();
    for (cidr, reason) in [(BRIDGE_CIDR, "no-route"), (UPLINK_CIDR, "via-uplink")] {
        assert!(
            log.contains(&format!(
                "forwarding gate (mode report) would hold this pod CIDR back; announced anyway cidr={cidr} reason=\"{reason}\""
            )),
            "{}",
            diagnostics("report mode logs what it would hold")
        );
    }
    // The admin endpoint renders what the last 1 s tick handed it.
    let mut status = Value::Null;
    wait_for(WAIT, || {
        status = admin_status(&node)["status"].clone();
        !status["wouldHold"].is_null()
    });
    assert_eq!(
        status["wouldHold"],
        serde_json::json!([
            {"cidr": BRIDGE_CIDR, "reason": "no-route"},
            {"cidr": UPLINK_CIDR, "reason": "via-uplink"}
        ]),
        "{status}"
    );
    assert!(status.get("held").is_none(), "{status}");
    let cond = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "ForwardingHeld"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&cond["status"], &cond["reason"]),
        (&Value::from("False"), &Value::from("WouldHold")),
        "{cond}"
    );
}

/// The speaker's `/debug/status` from inside the node namespace (bash's `/dev/tcp`: no HTTP
/// client to install).
fn admin_status(node: &str) -> Value {
    let out = in_ns(
        node,
        &[
            "bash",
            "-c",
            "exec 3<>/dev/tcp/127.0.0.1/9180 && printf 'GET /debug/status HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n' >&3 && cat <&3",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("/debug/status: {e}: {text}"))
}
