//! The quick tier: pure tests that need nothing installed and no API server: in-process
//! code, loopback sockets inside this process, and the built `podcidr-bgp` binary. Run it with
//! `scripts/test.sh quick`; each module is one former test file, tests keep their names.
//!
//! Crate: `speaker`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "common/mod.rs"]
mod common;

#[path = "quick/check_advertisements.rs"]
mod check_advertisements;
#[path = "quick/cli_misc.rs"]
mod cli_misc;
#[path = "quick/config_convert.rs"]
mod config_convert;
#[path = "quick/decode_cli.rs"]
mod decode_cli;
#[path = "quick/examples.rs"]
mod examples;
#[path = "quick/logs.rs"]
mod logs;
#[path = "quick/pure_cores.rs"]
mod pure_cores;
#[path = "quick/supply_chain.rs"]
mod supply_chain;
