//! The quick tier: pure tests that need nothing installed and no API server: in-process
//! code, loopback sockets inside this process, and the built `podcidr-bgp` binary. Run it with
//! `scripts/test.sh quick`; each module is one former test file, tests keep their names.
//!
//! Crate: `ipam-watch`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "common/mod.rs"]
mod common;

#[path = "quick/allocator_props.rs"]
mod allocator_props;
#[path = "quick/allocator_regressions.rs"]
mod allocator_regressions;
#[path = "quick/source_file.rs"]
mod source_file;
#[path = "quick/source_requests.rs"]
mod source_requests;
#[path = "quick/source_stream.rs"]
mod source_stream;
