//! The routers tier: real BGP daemons (BIRD 2, GoBGP, FRR, from Debian) peering with us on
//! loopback. Run it with `scripts/test.sh routers`; each module is one former test file.
//!
//! Crate: `speaker`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "common/mod.rs"]
mod common;

#[path = "routers/chaos.rs"]
mod chaos;
#[path = "routers/cni_conf_dir.rs"]
mod cni_conf_dir;
#[path = "routers/graceful_shutdown_bird.rs"]
mod graceful_shutdown_bird;
#[path = "routers/interop_bird.rs"]
mod interop_bird;
#[path = "routers/interop_frr.rs"]
mod interop_frr;
#[path = "routers/interop_gobgp.rs"]
mod interop_gobgp;
#[path = "routers/llgr_bird.rs"]
mod llgr_bird;
#[path = "routers/node_asn_bird.rs"]
mod node_asn_bird;
#[path = "routers/readiness_bird.rs"]
mod readiness_bird;
#[path = "routers/tor_snippets.rs"]
mod tor_snippets;
