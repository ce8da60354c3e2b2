//! The quick tier: pure tests that need nothing installed and no API server: in-process
//! code, loopback sockets inside this process, and the built `podcidr-bgp` binary. Run it with
//! `scripts/test.sh quick`; each module is one former test file, tests keep their names.
//!
//! Crate: `config`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "common/mod.rs"]
mod common;

#[path = "quick/contract.rs"]
mod contract;
#[path = "quick/defaults.rs"]
mod defaults;
#[path = "quick/diff_peers.rs"]
mod diff_peers;
#[path = "quick/examples.rs"]
mod examples;
#[path = "quick/interface_peers.rs"]
mod interface_peers;
#[path = "quick/invalid_configs.rs"]
mod invalid_configs;
#[path = "quick/load.rs"]
mod load;
#[path = "quick/local_asn.rs"]
mod local_asn;
#[path = "quick/md5_key.rs"]
mod md5_key;
#[path = "quick/peer_auto.rs"]
mod peer_auto;
