//! Network namespaces a test creates (and deletes on drop), commands run inside them, and a
//! TCP listener created inside one for a server that runs in this process.
//!
//! Addresses inside namespaces: 198.18.0.0/15 and fd00::/8 only.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Namespaces deleted (`ip netns del`) on drop, in reverse order of creation.
#[derive(Debug, Default)]
pub struct Netns {
    names: Vec<String>,
}

impl Netns {
    /// Creates `name` with its loopback up.
    pub fn add(&mut self, name: &str) {
        ip(&["netns", "add", name]);
        self.names.push(name.to_owned());
        ip(&["-n", name, "link", "set", "lo", "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in self.names.iter().rev() {
            let _ = Command::new("ip")
                .args(["netns", "del", n])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Links `node` to `tor` with a veth pair created inside the namespaces (nothing appears in
/// the root namespace): `to-n<i>` on the ToR with 198.18.<i>.1/24 and fd00:18:<i>::1/64,
/// `eth0` on the node with .2 and ::2, both up.
pub fn wire(tor: &str, node: &str, i: usize) {
    let tor_if = format!("to-n{i}");
    ip(&[
        "-n", tor, "link", "add", &tor_if, "type", "veth", "peer", "name", "eth0", "netns", node,
    ]);
    for (ns, dev, host) in [(tor, tor_if.as_str(), 1), (node, "eth0", 2)] {
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("198.18.{i}.{host}/24"),
            "dev",
            dev,
        ]);
        let v6 = format!("fd00:18:{i}::{host}/64");
        ip(&["-n", ns, "addr", "add", &v6, "dev", dev, "nodad"]);
        ip(&["-n", ns, "link", "set", dev, "up"]);
    }
}

/// Node `i` behind `tor`: its namespace, [`wire`]d to the ToR, its default route via the
/// ToR's end (198.18.<i>.1).
pub fn node_behind(ns: &mut Netns, tor: &str, node: &str, i: usize) {
    ns.add(node);
    wire(tor, node, i);
    let via = format!("198.18.{i}.1");
    ip(&["-n", node, "route", "add", "default", "via", &via]);
}

/// A veth pair `a_if` in `a` ↔ `b_if` in `b`, addresses `.1` and `.2` of `net` (a /24, given
/// as its first three octets), up.
pub fn link(a: &str, a_if: &str, b: &str, b_if: &str, net: &str) {
    ip(&[
        "-n", a, "link", "add", a_if, "type", "veth", "peer", "name", b_if, "netns", b,
    ]);
    for (ns, dev, host) in [(a, a_if, 1), (b, b_if, 2)] {
        let addr = format!("{net}.{host}/24");
        ip(&["-n", ns, "addr", "add", &addr, "dev", dev]);
        ip(&["-n", ns, "link", "set", dev, "up"]);
    }
}

/// `sysctl -w KEY=VALUE` inside `ns`, which must succeed.
pub fn sysctl(ns: &str, kv: &str) {
    let out = in_ns(ns, &["sysctl", "-q", "-w", kv]);
    assert!(out.status.success(), "sysctl {kv} in {ns}");
}

/// The gateways of the kernel's route to `prefix` in `ns`: one per ECMP leg, empty without a
/// route.
pub fn route_gateways(ns: &str, prefix: &str) -> Vec<std::net::IpAddr> {
    let out = in_ns(ns, &["ip", "-j", "route", "show", prefix]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let Some(r) = v.as_array().and_then(|a| a.first()) else {
        return Vec::new();
    };
    let gateway = |h: &serde_json::Value| h.get("gateway")?.as_str()?.parse().ok();
    match r.get("nexthops").and_then(|n| n.as_array()) {
        Some(hops) => hops.iter().filter_map(gateway).collect(),
        None => gateway(r).into_iter().collect(),
    }
}

/// `ip ARGS…`, which must succeed.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `cmd` inside namespace `ns` (`ip netns exec`).
pub fn in_ns(ns: &str, cmd: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .expect("run ip netns exec")
}

/// True when this process may create namespaces and `bins` are installed.
/// `ip netns exec NS BIN speaker --config CONFIG`, stdout and stderr to `log`. No `--final`:
/// SIGTERM is then a graceful restart.
pub fn spawn_speaker_in(
    ns: &str,
    bin: &std::path::Path,
    config: &std::path::Path,
    log: &std::path::Path,
) -> std::process::Child {
    let out = File::create(log).unwrap();
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(bin)
        .args(["speaker", "--config"])
        .arg(config)
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .expect("start the speaker")
}

pub fn netns_permitted(probe: &str, bins: &[&str]) -> bool {
    let ok = Command::new("ip")
        .args(["netns", "add", probe])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let _ = Command::new("ip").args(["netns", "del", probe]).status();
    }
    ok && bins.iter().all(|b| which(b))
}

pub fn which(bin: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One ping (2 s) from namespace `ns`.
pub fn ping(ns: &str, addr: &str) -> bool {
    let mut args = vec!["ping", "-c", "1", "-W", "2"];
    if addr.contains(':') {
        args.insert(1, "-6");
    }
    args.push(addr);
    in_ns(ns, &args).status.success()
}

/// Pings until one answers, at most `timeout` (addresses can take a moment: IPv6 DAD, a
/// route just installed).
pub fn ping_within(ns: &str, addr: &str, timeout: Duration) -> bool {
    crate::wait_for(timeout, || ping(ns, addr))
}

/// A TCP listener bound to `addr` inside namespace `ns`, usable from this process: a socket
/// stays in the namespace it was created in. Created on a short-lived thread that enters the
/// namespace (setns(2) changes only the calling thread).
pub fn tcp_listener_in(ns: &str, addr: SocketAddr) -> std::io::Result<TcpListener> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let f = File::open(&path)?;
        // SAFETY: setns(2) with a namespace fd we own; it affects this thread only.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        TcpListener::bind(addr)
    })
    .join()
    .map_err(|_| std::io::Error::other("the setns thread panicked"))?
}

/// `f` run on a short-lived thread inside namespace `ns`: sockets it creates stay there.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<T> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = File::open(&path)?;
        // SAFETY: setns(2) with a namespace fd we own; it affects this thread only.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(f())
    })
    .join()
    .map_err(|_| std::io::Error::other("the setns thread panicked"))?
}
