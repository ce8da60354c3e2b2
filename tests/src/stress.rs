//! CPU saturation for benchmarks: `stress-ng --cpu N` run inside a namespace (the node's),
//! stopped by its PID when dropped. `stress-ng` is not installed by
//! `scripts/install-test-deps.sh`: only the benchmarks' `--stress` option uses it, and it
//! says so when it is missing (`apt-get install stress-ng`).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Every run is bounded by stress-ng's own timeout too, should this process die first.
const LIMIT: &str = "3600s";

/// Why `--stress` cannot run here, if it cannot.
pub fn unavailable() -> Option<String> {
    crate::find_bin("stress-ng")
        .is_none()
        .then(|| "--stress needs stress-ng (apt-get install stress-ng); not found in PATH".into())
}

/// The CPUs of this machine (what `--cpu 0` saturates).
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The 1-, 5- and 15-minute load averages, as `/proc/loadavg` says them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// `stress-ng --cpu workers` (0: one per CPU) in namespace `ns` until dropped.
#[derive(Debug)]
pub struct CpuStress {
    child: Child,
}

impl CpuStress {
    pub fn start(ns: &str, workers: usize) -> Result<CpuStress, String> {
        if let Some(why) = unavailable() {
            return Err(why);
        }
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "stress-ng", "--cpu"])
            .arg(workers.to_string())
            .args(["--cpu-method", "matrixprod", "--timeout", LIMIT, "--quiet"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("stress-ng in {ns}: {e}"))?;
        Ok(CpuStress { child })
    }
}

impl Drop for CpuStress {
    fn drop(&mut self) {
        // `ip netns exec` execs stress-ng, so this PID is stress-ng's; on SIGTERM it stops
        // its workers itself.
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
