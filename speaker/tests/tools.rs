//! The tools tier: deploy/ rendered and checked by the tools operators run (kubectl's
//! kustomize, helm, promtool, Argo CD's Lua VM), which `scripts/install-test-deps.sh` builds or
//! installs. No API server. Run it with `scripts/test.sh tools`.
//!
//! Crate: `speaker`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "common/mod.rs"]
mod common;

#[path = "tools/admission_policy.rs"]
mod admission_policy;
#[path = "tools/alerts.rs"]
mod alerts;
#[path = "tools/argocd_health.rs"]
mod argocd_health;
#[path = "tools/dashboard.rs"]
mod dashboard;
#[path = "tools/manifests_helm.rs"]
mod manifests_helm;
#[path = "tools/manifests_install.rs"]
mod manifests_install;
#[path = "tools/manifests_kustomize.rs"]
mod manifests_kustomize;
#[path = "tools/manifests_rendered.rs"]
mod manifests_rendered;
#[path = "tools/manifests_schema.rs"]
mod manifests_schema;
