//! Counts of discarded BFD datagrams by reason, for the whole process: the control port's
//! checks (before a datagram is queued) and the session's (decoding, authentication). The
//! speaker exports them as `podcidr_bgp_bfd_packets_dropped_total{reason}`; the control
//! port also logs them, at most once per reason per [`LOG_EVERY`].

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Rate limit of the drop log, per reason.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
struct Reason {
    count: u64,
    logged: Option<Instant>,
    since_log: u64,
}

static DROPS: Mutex<BTreeMap<&'static str, Reason>> = Mutex::new(BTreeMap::new());

/// Counts one drop; returns how many drops of `reason` to log now (including this one)
/// when the last log of it is older than [`LOG_EVERY`], else `None`.
pub fn count(reason: &'static str) -> Option<u64> {
    count_n(reason, 1)
}

/// [`count`] for `n` drops at once.
pub fn count_n(reason: &'static str, n: u64) -> Option<u64> {
    let mut all = DROPS.lock().ok()?;
    let r = all.entry(reason).or_default();
    r.count = r.count.saturating_add(n);
    r.since_log = r.since_log.saturating_add(n);
    let now = Instant::now();
    if r.logged.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
        return None;
    }
    r.logged = Some(now);
    Some(std::mem::take(&mut r.since_log))
}

/// Every reason seen and its count since the process started.
pub fn snapshot() -> Vec<(&'static str, u64)> {
    DROPS
        .lock()
        .map(|all| all.iter().map(|(k, v)| (*k, v.count)).collect())
        .unwrap_or_default()
}
