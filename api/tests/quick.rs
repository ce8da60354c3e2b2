//! The quick tier: pure tests that need nothing installed and no API server: in-process
//! code, loopback sockets inside this process, and the built `podcidr-bgp` binary. Run it with
//! `scripts/test.sh quick`; each module is one former test file, tests keep their names.
//!
//! Crate: `api`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "quick/crds_in_sync.rs"]
mod crds_in_sync;
#[path = "quick/docs_config_keys.rs"]
mod docs_config_keys;
