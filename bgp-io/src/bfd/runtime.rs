//! The process's BFD runtime: one OS thread of its own running a current-thread tokio
//! runtime, where every BFD session task and every control port's receive task run.
//!
//! A detection time is a few hundred milliseconds; the speaker's shared runtime also
//! serialises JSON, answers the admin API and reconciles watches, and a long poll there
//! (or a runtime starved of its workers) would delay BFD's transmit timer and its reading
//! of the peer's packets until *our* session declared Down and told the ToR so: an outage
//! made by node load (RFC 5880 §6.8.4). On its own thread, only the OS scheduler stands
//! between BFD and its timers. Events still reach their owners over channels, which do not
//! care which runtime the sender runs on.

use std::io;
use std::sync::OnceLock;

use tokio::runtime::Handle;

/// Name of the thread (`top -H`, `/proc/PID/task/*/comm`).
pub const THREAD_NAME: &str = "bfd";

static RUNTIME: OnceLock<Result<Handle, String>> = OnceLock::new();

/// The BFD runtime, started on first use; it lives as long as the process. Sockets must be
/// created inside it (`Handle::enter`) so their readiness is polled by its reactor.
pub fn handle() -> io::Result<Handle> {
    RUNTIME
        .get_or_init(start)
        .clone()
        .map_err(|e| io::Error::other(format!("BFD runtime: {e}")))
}

fn start() -> Result<Handle, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let handle = rt.handle().clone();
    std::thread::Builder::new()
        .name(THREAD_NAME.to_owned())
        // Never returns: the runtime serves BFD for the life of the process.
        .spawn(move || rt.block_on(std::future::pending::<()>()))
        .map_err(|e| format!("thread: {e}"))?;
    Ok(handle)
}
