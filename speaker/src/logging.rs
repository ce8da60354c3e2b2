//! `tracing` output: text or JSON, level from the config (RUST_LOG overrides). Lives in
//! [`crate::process::logging`], shared by every subcommand; re-exported here for callers of
//! `crate::logging::init`.

#[allow(unused_imports)] // `LogHandle`, `LogReloadError`: for the speaker's reload path.
pub use crate::process::logging::{LogHandle, LogReloadError, init};
