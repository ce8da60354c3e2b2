//! The code of the `podcidr-bgp` binary (`main.rs` parses the command line and calls in),
//! as a library so benchmarks can run its parts in-process: thousands of speakers' watches
//! of the configuration objects cost one process, not thousands.

pub mod allocator_cmd;
pub mod cli;
pub mod config_cmd;
pub mod config_status;
pub mod daemon;
pub mod decode;
#[cfg(feature = "demo")]
pub mod demo;
pub mod flags;
pub mod install;
pub mod leftovers;
pub mod objects;
pub mod process;
pub mod service_events;
pub mod service_view;
pub mod text;
pub mod time;
pub mod watches;
