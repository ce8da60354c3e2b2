//! A ToR namespace running BIRD and a node namespace running the speaker, joined by a veth
//! pair with link-local addresses only (ToR `tv` fe80::1, node `eth1` fe80::2): the shape of
//! the unnumbered and link-local BFD tests.

use std::path::Path;
use std::process::{Command, Stdio};

use integration_tests::netns::{Netns, ip};

use super::{BIN, Proc, TempDir};

/// Adds `<tag>-tor` and `<tag>-node` to `ns` and links them; returns (tor, node).
pub fn link_local_pair(ns: &mut Netns, tag: &str) -> (String, String) {
    let (tor, node) = (format!("{tag}-tor"), format!("{tag}-node"));
    ns.add(&tor);
    ns.add(&node);
    ip(&[
        "-n", &tor, "link", "add", "tv", "type", "veth", "peer", "name", "eth1", "netns", &node,
    ]);
    for (n, dev, ll) in [(&tor, "tv", "fe80::1/64"), (&node, "eth1", "fe80::2/64")] {
        // No kernel-generated link-local address: exactly the one we choose.
        ip(&["-n", n, "link", "set", "dev", dev, "addrgenmode", "none"]);
        ip(&["-n", n, "addr", "add", ll, "dev", dev, "nodad"]);
        ip(&["-n", n, "link", "set", dev, "up"]);
    }
    (tor, node)
}

/// BIRD in `ns` with `conf` (written to `dir`); returns it and its control socket.
pub fn spawn_bird(ns: &str, dir: &TempDir, conf: &str) -> (Proc, String) {
    let path = dir.path("bird.conf");
    std::fs::write(&path, conf).unwrap();
    let sock = dir.path("bird.sock").display().to_string();
    let log = dir.path("bird.out");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", ns, "bird", "-f", "-c"])
        .arg(&path)
        .args(["-s", &sock])
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .unwrap();
    (Proc { child, log }, sock)
}

/// `ip netns exec NS podcidr-bgp speaker --final --config CFG`, logging to `log`.
pub fn spawn_speaker(ns: &str, cfg: &Path, log: &Path) -> Proc {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, BIN, "speaker", "--final", "--config"])
        .arg(cfg);
    Proc::spawn_command(cmd, log)
}
