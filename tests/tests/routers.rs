//! The routers tier: real BGP daemons (BIRD 2, GoBGP, FRR, from Debian) peering with us on
//! loopback. Run it with `scripts/test.sh routers`; each module is one former test file.
//!
//! Crate: `tests`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "routers/harness.rs"]
mod harness;
