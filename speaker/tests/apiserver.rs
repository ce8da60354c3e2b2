//! The apiserver tier: a real kube-apiserver with etcd, built from their Go modules at the
//! oldest and newest Kubernetes the README supports (`scripts/kube-versions.env`), for what the
//! API server decides: schemas, CEL, admission policy, RBAC, watch, server-side apply. Run it
//! with `scripts/test.sh apiserver`.
//!
//! Crate: `speaker`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "common/mod.rs"]
mod common;

#[path = "apiserver/crd_validation_rules.rs"]
mod crd_validation_rules;
#[path = "apiserver/real_api_admission.rs"]
mod real_api_admission;
#[path = "apiserver/real_api_allocator.rs"]
mod real_api_allocator;
#[path = "apiserver/real_api_crds.rs"]
mod real_api_crds;
#[path = "apiserver/real_api_departure.rs"]
mod real_api_departure;
#[path = "apiserver/real_api_faults.rs"]
mod real_api_faults;
#[path = "apiserver/real_api_install.rs"]
mod real_api_install;
#[path = "apiserver/real_api_last_good.rs"]
mod real_api_last_good;
#[path = "apiserver/real_api_objects.rs"]
mod real_api_objects;
#[path = "apiserver/real_api_speaker.rs"]
mod real_api_speaker;
