//! The quick tier of `podcidr-services`: the planner's rules, one test per rule, on plain
//! values (no API server, nothing installed). Run with `scripts/test.sh quick`.
//!
//! Crate: `services`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "quick/plan_rules.rs"]
mod plan_rules;

#[path = "quick/planner_replay.rs"]
mod planner_replay;
