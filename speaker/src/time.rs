//! The wall clock, read in one place for the speaker's loop, its admin endpoint and the CLI.
//! (The core never reads it: times reach the core in events.)

pub use ipam_watch::clock::unix_now;
