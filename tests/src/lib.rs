//! Real-router test fixtures: BIRD 2 and GoBGP started as BGP peers on loopback.
//!
//! Each daemon gets its own `127.x.y.z` address (see [`net`]), its own temp dir (removed on
//! drop) and is stopped by PID on drop. Queries report what the router itself sees:
//! [`Bird::protocol`], [`Bird::routes`], [`Gobgp::neighbor`], [`Gobgp::rib`].
//!
//! ```no_run
//! use integration_tests::{Bird, BirdConfig, BirdNeighbor, StaticRoute, net};
//! use std::time::Duration;
//!
//! let ours = net::alloc_v4(); // the address our speaker binds
//! let bird = Bird::start(
//!     BirdConfig::new(net::alloc_v4(), 65001)
//!         .neighbor(BirdNeighbor::new("spk", ours, 65000).passive(true).graceful_restart(30))
//!         .static_route(StaticRoute::new("198.51.100.0/24").community(65001, 7)),
//! );
//! let peer = bird.peer_addr("spk"); // where our speaker connects: addr, port, AS
//! // ... start the speaker against `peer` from `ours` ...
//! bird.wait_established("spk", Duration::from_secs(10));
//! let routes = bird.routes(&integration_tests::RouteQuery::protocol("spk"));
//! # let _ = (peer, routes);
//! ```

pub mod bfd_topology;
pub mod bird;
pub mod bird_config;
pub mod bird_parse;
pub mod cni;
pub mod control_plane;
pub mod dataplane_topology;
pub mod frr;
pub mod gobgp;
pub mod kustomize;
pub mod loss;
pub mod net;
pub mod netns;
mod process;
pub mod skip;
pub mod stress;
pub mod tor_guide;
pub use process::stop_child;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use bird::{Bird, BirdConfig, BirdNeighbor, Export, KernelConfig, RouteQuery, StaticRoute};
pub use bird_parse::{BirdRoute, ChannelInfo, ProtocolInfo};
pub use gobgp::{
    Family, Gobgp, GobgpConfig, GobgpNeighbor, GobgpNeighborState, GobgpPath, GobgpRoute,
};

pub(crate) const INSTALL_HINT: &str =
    "run `scripts/install-test-deps.sh` (as root) to install bird2, gobgpd and frr";

/// Where our speaker should connect to reach a test peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestPeerAddr {
    pub addr: IpAddr,
    pub port: u16,
    /// The peer's own AS number.
    pub asn: u32,
}

impl TestPeerAddr {
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.addr, self.port)
    }
}

/// Looks a binary up in `PATH` and the usual sbin dirs (a non-login `PATH` may lack them).
pub(crate) fn find_bin(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(
            [
                "/usr/sbin",
                "/usr/bin",
                "/sbin",
                "/bin",
                "/usr/local/sbin",
                "/usr/local/bin",
            ]
            .iter()
            .map(PathBuf::from),
        )
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// True when `bird` and `birdc` are installed.
/// The shipped build of `podcidr-bgp` (profile.dist) the bench binaries run by default
/// (`$CARGO_TARGET_DIR/dist/podcidr-bgp`, else `target/dist/podcidr-bgp`).
pub fn dist_binary() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("target"))
        .join("dist/podcidr-bgp")
}

pub fn bird_available() -> bool {
    find_bin("bird").is_some() && find_bin("birdc").is_some()
}

/// True when `gobgpd` and `gobgp` are installed.
pub fn gobgp_available() -> bool {
    find_bin("gobgpd").is_some() && find_bin("gobgp").is_some()
}

/// For a fixture that starts BIRD: a test reaching it without `require!(Need::Bird)` fails
/// here, naming the install script, rather than passing without BIRD.
pub fn assert_bird() {
    assert!(
        bird_available(),
        "BIRD 2 (`bird`, `birdc`) not found: {INSTALL_HINT}"
    );
}

/// As [`assert_bird`], for GoBGP.
pub fn assert_gobgp() {
    assert!(
        gobgp_available(),
        "GoBGP (`gobgpd`, `gobgp`) not found: {INSTALL_HINT}"
    );
}

/// Polls `f` every 25 ms until it returns true or `timeout` passes; returns the last result.
/// The timeout is an upper bound for a slow CI machine, not a claim about speed.
pub fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A fresh temp dir (unique per call in this process), removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("podcidr-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A relative path taken from the workspace root: `cargo bench` runs a bench in its package's
/// directory, while docs paths are given from the root.
pub fn workspace_path(path: &std::path::Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_owned();
    }
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| path.to_owned(), |root| root.join(path))
}

/// Replaces what stands between the markers `begin` and `end` of the file at `path` (relative
/// paths from the workspace root) with `body`: how the benches write their tables into
/// docs/benchmarks.md.
pub fn write_docs_section(
    path: &std::path::Path,
    begin: &str,
    end: &str,
    body: &str,
) -> Result<(), String> {
    let path = workspace_path(path);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (Some(a), Some(b)) = (text.find(begin), text.find(end)) else {
        return Err(format!("{}: no {begin} … {end} markers", path.display()));
    };
    let new = format!("{}{begin}\n{body}{}", &text[..a], &text[b..]);
    std::fs::write(&path, new).map_err(|e| format!("{}: {e}", path.display()))
}
