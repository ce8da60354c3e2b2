//! The fake-API tier: tests against the in-process fake Kubernetes API (`fake-kube`), which
//! also injects faults and records requests. Nothing to install. Run it with
//! `scripts/test.sh fake`; each module is one former test file, tests keep their names.
//!
//! Crate: `speaker`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "common/mod.rs"]
mod common;

#[path = "fake/allocator_cli.rs"]
mod allocator_cli;
#[path = "fake/config_rollout.rs"]
mod config_rollout;
#[path = "fake/demo.rs"]
mod demo;
#[path = "fake/diff_cli.rs"]
mod diff_cli;
#[path = "fake/manifests.rs"]
mod manifests;
#[path = "fake/node_events.rs"]
mod node_events;
#[path = "fake/peers_routes_cli.rs"]
mod peers_routes_cli;
#[path = "fake/rollout_gate.rs"]
mod rollout_gate;
#[path = "fake/service_events.rs"]
mod service_events;
#[path = "fake/service_routes.rs"]
mod service_routes;
#[path = "fake/speaker_api.rs"]
mod speaker_api;
