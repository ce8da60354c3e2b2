//! The one way a test says it needs something from the machine: network namespaces, root,
//! BIRD, GoBGP, FRR, kubectl, helm, the real API server, a Go-built tool. Under CI (`CI` set)
//! a missing need fails the test, naming what is missing and how to install it; on a
//! developer machine the test prints one `SKIPPED` line and ends, and the skip is recorded in
//! `target/test-skips.log`, which `scripts/test.sh` counts at the end (and fails on, under CI).
//!
//! A test never returns early on its own: it writes `require!(Need::Bird)` (or
//! `let cp = needs!(ControlPlane::start())` for a fixture that may be unavailable), and the
//! decision is made here.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::INSTALL_HINT;

/// Something a test needs from the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Effective UID 0.
    Root,
    /// `ip netns add` works (root, iproute2, a kernel with namespaces).
    Netns,
    /// BIRD 2: `bird` and `birdc`.
    Bird,
    /// GoBGP: `gobgpd` and `gobgp`.
    Gobgp,
    /// FRR: `/usr/lib/frr/bgpd` and `vtysh`.
    Frr,
    /// The CNI reference plugins Debian ships (`containernetworking-plugins`).
    CniPlugins,
    /// A current kubectl (kustomize v5) on PATH.
    Kubectl,
    /// A program on PATH (`ping`, `iptables`, `setpriv`, ...).
    Bin(&'static str),
    /// A tool `scripts/install-test-deps.sh` builds under `target/test-tools/` (helm, glua,
    /// kube-apiserver, etcd): its path relative to that directory.
    TestTool(&'static str),
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Need::Root => f.write_str("root"),
            Need::Netns => f.write_str("network namespaces (`ip netns add`, as root)"),
            Need::Bird => f.write_str("BIRD 2 (`bird`, `birdc`)"),
            Need::Gobgp => f.write_str("GoBGP (`gobgpd`, `gobgp`)"),
            Need::Frr => f.write_str("FRR (`/usr/lib/frr/bgpd`, `vtysh`)"),
            Need::CniPlugins => write!(
                f,
                "the CNI reference plugins in {}",
                crate::cni::DEBIAN_CNI_BIN_DIR
            ),
            Need::Kubectl => f.write_str("kubectl (kustomize v5) on PATH"),
            Need::Bin(b) => write!(f, "`{b}` on PATH"),
            Need::TestTool(p) => write!(f, "target/test-tools/{p}"),
        }
    }
}

impl Need {
    /// True when the machine has it.
    pub fn present(self) -> bool {
        match self {
            // SAFETY: geteuid(2) cannot fail and touches no memory.
            Need::Root => (unsafe { libc::geteuid() }) == 0,
            Need::Netns => netns_works(),
            Need::Bird => crate::bird_available(),
            Need::Gobgp => crate::gobgp_available(),
            Need::Frr => crate::frr::frr_available(),
            Need::CniPlugins => crate::cni::cni_plugins_available(),
            Need::Kubectl => crate::kustomize::kubectl_works(),
            Need::Bin(b) => crate::netns::which(b),
            Need::TestTool(p) => test_tools_dir().join(p).exists(),
        }
    }
}

/// The `target/test-tools` directory `scripts/install-test-deps.sh` fills.
pub fn test_tools_dir() -> PathBuf {
    workspace_root().join("target/test-tools")
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Where skips are recorded for `scripts/test.sh` to count.
pub fn skip_log() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join("test-skips.log")
}

fn netns_works() -> bool {
    static PROBE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let name = format!(
        "pcprobe{}x{}",
        std::process::id() % 100_000,
        PROBE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let ok = Command::new("ip")
        .args(["netns", "add", &name])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
    }
    ok
}

/// The one decision: under CI a panic naming `what`; elsewhere one `SKIPPED` line, a record in
/// [`skip_log`], and `None`, which the test turns into its end (`needs!`, `require!`).
pub fn unavailable<T>(what: impl fmt::Display) -> Option<T> {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    match decide(std::env::var_os("CI").is_some(), test, &what.to_string()) {
        Decision::Fail(msg) => panic!("{msg}"),
        Decision::Skip { line, record } => {
            eprintln!("{line}");
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(skip_log())
            {
                // One short line per write: appends from parallel processes do not interleave.
                let _ = writeln!(f, "{record}");
            }
            None
        }
    }
}

/// What [`unavailable`] does, decided apart from the process's environment.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Fail(String),
    Skip { line: String, record: String },
}

fn decide(ci: bool, test: &str, what: &str) -> Decision {
    if ci {
        Decision::Fail(format!(
            "{test}: needs {what}, which is missing under CI; {INSTALL_HINT}"
        ))
    } else {
        Decision::Skip {
            line: format!("SKIPPED {test}: needs {what}; {INSTALL_HINT}"),
            record: format!("{test}: {what}"),
        }
    }
}

/// `Some(())` when every need is present, else [`unavailable`] naming the missing ones.
pub fn require(needs: &[Need]) -> Option<()> {
    let missing: Vec<String> = needs
        .iter()
        .filter(|n| !n.present())
        .map(ToString::to_string)
        .collect();
    if missing.is_empty() {
        Some(())
    } else {
        unavailable(missing.join(", "))
    }
}

/// Ends the test (skip, or a panic under CI) unless the machine has every listed [`Need`]:
/// `require!(Need::Netns, Need::Bird);`. Works in a test and in a fixture returning `Option`.
#[macro_export]
macro_rules! require {
    ($($need:expr),+ $(,)?) => {
        if $crate::skip::require(&[$($need),+]).is_none() {
            return ::core::default::Default::default();
        }
    };
}

/// Unwraps a fixture that may be unavailable (it returned `None` through
/// [`unavailable`]), else ends the test: `let cp = needs!(ControlPlane::start());`.
#[macro_export]
macro_rules! needs {
    ($fixture:expr) => {
        match $fixture {
            ::core::option::Option::Some(v) => v,
            ::core::option::Option::None => return ::core::default::Default::default(),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_need_is_not_reported() {
        // `sh` is on every machine this suite runs on (the harness itself shells out).
        assert!(Need::Bin("sh").present());
        assert_eq!(require(&[Need::Bin("sh")]), Some(()));
    }

    #[test]
    fn a_missing_need_is_seen_as_missing() {
        assert!(!Need::Bin("podcidr-no-such-tool-on-any-machine").present());
        assert!(!Need::TestTool("no-such-tool/bin").present());
    }

    #[test]
    fn under_ci_a_missing_need_fails_naming_it() {
        let Decision::Fail(msg) = decide(true, "netns::bfd", "BIRD 2 (`bird`, `birdc`)") else {
            panic!("under CI a missing need must fail the test");
        };
        assert!(
            msg.contains("netns::bfd") && msg.contains("BIRD 2"),
            "{msg}"
        );
        assert!(msg.contains("install-test-deps.sh"), "{msg}");
    }

    #[test]
    fn elsewhere_a_missing_need_skips_with_one_line_and_a_record() {
        let Decision::Skip { line, record } = decide(false, "netns::bfd", "root") else {
            panic!("outside CI a missing need skips");
        };
        assert!(line.starts_with("SKIPPED netns::bfd: needs root"), "{line}");
        assert!(!line.contains('\n'));
        assert_eq!(record, "netns::bfd: root");
    }
}
