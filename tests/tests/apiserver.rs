//! The apiserver tier: a real kube-apiserver with etcd, built from their Go modules at the
//! oldest and newest Kubernetes the README supports (`scripts/kube-versions.env`), for what the
//! API server decides: schemas, CEL, admission policy, RBAC, watch, server-side apply. Run it
//! with `scripts/test.sh apiserver`.
//!
//! Crate: `tests`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "apiserver/control_plane.rs"]
mod control_plane;
