//! The wall clock, read in one place for the speaker's loop, its admin endpoint and the CLI.
//! (The core never reads it: times reach the core in events.)

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
