//! Temp dirs and child daemons owned by a fixture: stopped by PID, never by name.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A unique directory under `std::env::temp_dir()`, removed on drop.
/// Set `PODCIDR_KEEP_TEST_DIRS=1` to keep it for inspection.
#[derive(Debug)]
pub(crate) struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    pub(crate) fn new(kind: &str) -> WorkDir {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        // Short names: BIRD's control socket path must fit in sun_path (108 bytes).
        let path = std::env::temp_dir().join(format!("pcb-{kind}-{}-{seq}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("creating temp dir {}: {e}", path.display()));
        WorkDir { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::env::var_os("PODCIDR_KEEP_TEST_DIRS").is_some_and(|v| v == "1") {
            eprintln!("kept test dir {}", self.path.display());
            return;
        }
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// A daemon we spawned. Dropping it stops it: SIGCONT, SIGTERM, bounded wait, SIGKILL.
#[derive(Debug)]
pub(crate) struct Daemon {
    name: String,
    child: Child,
    exited: bool,
}

impl Daemon {
    /// Spawns `cmd` with stdout and stderr appended to `log`.
    pub(crate) fn spawn(name: &str, mut cmd: Command, log: &Path) -> Daemon {
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("opening {}: {e}", log.display()));
        let err = out.try_clone().expect("dup log file");
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {name} ({cmd:?}): {e}"));
        Daemon {
            name: name.to_owned(),
            child,
            exited: false,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the process has not exited (reaps it if it has).
    pub(crate) fn is_running(&mut self) -> bool {
        if !self.exited && matches!(self.child.try_wait(), Ok(Some(_))) {
            self.exited = true;
        }
        !self.exited
    }

    pub(crate) fn signal(&mut self, sig: libc::c_int) {
        // Only while unreaped, so the PID cannot belong to anyone else.
        if self.is_running() {
            // SAFETY: kill(2) has no memory-safety preconditions; the PID is our live child.
            unsafe { libc::kill(self.pid() as libc::pid_t, sig) };
        }
    }

    /// Waits up to `timeout` for the process to exit.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> bool {
        crate::wait_for(timeout, || !self.is_running())
    }

    /// SIGKILL without any grace (simulates a crash: no NOTIFICATION is sent).
    pub(crate) fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        if !self.wait_exit(Duration::from_secs(5)) {
            eprintln!("{} ({}) survived SIGKILL for 5 s", self.name, self.pid());
        }
    }

    pub(crate) fn stop(&mut self) {
        if !self.is_running() {
            return;
        }
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        if !self.wait_exit(Duration::from_secs(5)) {
            eprintln!(
                "{} ({}) ignored SIGTERM for 5 s, killing",
                self.name,
                self.pid()
            );
            self.kill();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs a short-lived command with a bounded wall time; kills it (our child) on timeout.
pub(crate) fn run_bounded(mut cmd: Command, timeout: Duration) -> Result<Output, String> {
    use std::io::Read;
    let desc = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawning {desc}: {e}"))?;
    let mut so = child.stdout.take().expect("piped stdout");
    let mut se = child.stderr.take().expect("piped stderr");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = so.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = se.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{desc} did not finish within {timeout:?}"));
            }
            Err(e) => return Err(format!("waiting for {desc}: {e}")),
        }
    };
    Ok(Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    })
}

/// The last `n` lines of a log file, for failure messages.
pub(crate) fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Stops a child we spawned, by PID: SIGTERM (so it can release a Lease or send its Cease),
/// then SIGKILL if it is still running after `grace`.
pub fn stop_child(child: &mut Child, grace: Duration) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on the PID of a child we own and have not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}
