//! The Grafana dashboard of deploy/components/monitoring: it parses, every PromQL expression
//! in it (panel targets and the node variable's query) is accepted by promtool, and every
//! metric an expression names is exported by the binaries: scraped from a running speaker and
//! allocator, not from a list. The component ships it as a ConfigMap Grafana's sidecar loads.

use crate::common;
use integration_tests::skip::Need;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::TempDir;
use common::kustomize::{of_kind, render, with_component};
use common::monitoring::{live_metric_names, promql_metric_names, promtool_accepts, unexported};
use serde_json::Value;

fn dashboard_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/components/monitoring/podcidr-bgp-dashboard.json")
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(dashboard_path()).unwrap();
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Panels, those nested in collapsed rows included.
fn panels(d: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        out.push(p.clone());
        out.extend(p["panels"].as_array().into_iter().flatten().cloned());
    }
    out
}

/// Grafana's variables as PromQL sees them once Grafana has filled them in: the interval
/// variable a duration, template variables a regex (they only appear in `=~` matchers).
fn as_grafana_sends(expr: &str, variables: &[String]) -> String {
    let mut out = expr
        .replace("$__rate_interval", "5m")
        .replace("$__interval", "1m");
    for v in variables {
        out = out
            .replace(&format!("${{{v}}}"), ".*")
            .replace(&format!("${v}"), ".*");
    }
    assert!(!out.contains('$'), "unknown variable in {expr}");
    out
}

/// (where, PromQL) of every target and of the variables' `label_values(<PromQL>, label)`.
fn expressions(d: &Value) -> Vec<(String, String)> {
    let variables: Vec<String> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_owned())
        .collect();
    let mut out = Vec::new();
    for p in panels(d) {
        let title = p["title"].as_str().unwrap_or("?").to_owned();
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{title}: a target without expr"));
            out.push((title.clone(), as_grafana_sends(expr, &variables)));
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        let Some(q) = v["query"]["query"].as_str() else {
            continue;
        };
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.rsplit_once(','))
            .map(|(metric, _)| metric.trim().to_owned())
            .unwrap_or_else(|| panic!("variable query {q} is not label_values(<PromQL>, label)"));
        out.push((format!("variable {}", v["name"]), inner));
    }
    out
}

#[test]
fn dashboard_parses_and_covers_sessions_routes_refusals_mismatches_pools_and_api_cost() {
    let d = dashboard();
    assert!(d["uid"].is_string() && d["title"].is_string());
    let exprs = expressions(&d);
    let names: BTreeSet<String> = exprs
        .iter()
        .flat_map(|(_, e)| promql_metric_names(e))
        .collect();
    for needed in [
        "podcidr_bgp_session_up",               // sessions
        "podcidr_bgp_announced_prefixes",       // routes
        "podcidr_bgp_updates_sent_total",       // announcements and withdrawals
        "podcidr_guard_refused_prefixes",       // refusals
        "podcidr_source_mismatch",              // mismatches
        "podcidr_allocator_pool_capacity",      // pool usage
        "podcidr_allocator_api_requests_total", // API cost: allocator
        "podcidr_api_writes_total",             // API cost: speakers
    ] {
        assert!(names.contains(needed), "no panel shows {needed}: {names:?}");
    }
    // Every panel with targets queries through the dashboard's data source variable.
    for p in panels(&d) {
        if p["targets"].is_array() {
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        }
    }
}

#[test]
fn every_dashboard_expression_is_valid_promql() {
    let dir = TempDir::new("dashboard-promql");
    let exprs = expressions(&dashboard());
    assert!(exprs.len() >= 15, "{exprs:?}");
    promtool_accepts(&dir.0, &exprs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_names_only_metrics_the_binaries_export() {
    let dir = TempDir::new("dashboard-metrics");
    let (_, exported) = live_metric_names(&dir).await;
    let missing = unexported(&expressions(&dashboard()), &exported);
    assert!(
        missing.is_empty(),
        "the dashboard names metrics no binary exports: {missing:?}\nexported: {exported:?}"
    );
}

/// The monitoring component ships the file as it is, labelled for Grafana's sidecar.
#[test]
fn the_monitoring_component_ships_the_dashboard_for_grafanas_sidecar() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("dashboard-kustomize");
    let docs = render(&with_component(&tmp, "monitoring"));
    let maps = of_kind(&docs, "ConfigMap");
    let cm = maps
        .iter()
        .find(|c| c["metadata"]["name"] == "podcidr-bgp-dashboard")
        .expect("the dashboard ConfigMap, without a hash suffix");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(
        cm["data"]["podcidr-bgp-dashboard.json"].as_str(),
        Some(std::fs::read_to_string(dashboard_path()).unwrap().as_str())
    );
}
