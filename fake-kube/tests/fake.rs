//! The fake-API tier: tests against the in-process fake Kubernetes API (`fake-kube`), which
//! also injects faults and records requests. Nothing to install. Run it with
//! `scripts/test.sh fake`; each module is one former test file, tests keep their names.
//!
//! Crate: `fake-kube`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "common/mod.rs"]
mod common;

#[path = "fake/apply.rs"]
mod apply;
#[path = "fake/crud.rs"]
mod crud;
#[path = "fake/events.rs"]
mod events;
#[path = "fake/faults.rs"]
mod faults;
#[path = "fake/server.rs"]
mod server;
#[path = "fake/traffic.rs"]
mod traffic;
#[path = "fake/watch.rs"]
mod watch;
