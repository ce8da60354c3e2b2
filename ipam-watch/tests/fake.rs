//! The fake-API tier: tests against the in-process fake Kubernetes API (`fake-kube`), which
//! also injects faults and records requests. Nothing to install. Run it with
//! `scripts/test.sh fake`; each module is one former test file, tests keep their names.
//!
//! Crate: `ipam-watch`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "common/mod.rs"]
mod common;

#[path = "fake/allocator_e2e.rs"]
mod allocator_e2e;
#[path = "fake/allocator_throttle.rs"]
mod allocator_throttle;
#[path = "fake/lease_election.rs"]
mod lease_election;
#[path = "fake/source_fake_api.rs"]
mod source_fake_api;
