//! The alerts of deploy/components/monitoring: `promtool check rules` and `promtool test rules`
//! (tests/alerts/alerts.test.yaml: every alert fires where it should and stays quiet where it
//! should not), every alert has a runbook section in docs/runbooks.md, and every metric an
//! alert names is one the binaries export: scraped from a running speaker's metrics listener
//! and a running allocator. promtool comes with Debian's `prometheus` package
//! (scripts/install-test-deps.sh).

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::TempDir;
use common::monitoring::{live_metric_names, promql_metric_names, unexported};
use serde_json::{Value, json};

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn groups() -> Value {
    let text = std::fs::read_to_string(repo_file(
        "deploy/components/monitoring/prometheusrule.yaml",
    ))
    .unwrap();
    let doc: Value = serde_saphyr::from_str(&text).unwrap();
    doc["spec"]["groups"].clone()
}

fn rules(groups: &Value) -> Vec<Value> {
    groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .collect()
}

fn alert_names(groups: &Value) -> BTreeSet<String> {
    rules(groups)
        .iter()
        .filter_map(|r| r["alert"].as_str().map(str::to_owned))
        .collect()
}

fn promtool(dir: &Path, args: &[&str]) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("promtool ({e}): run scripts/install-test-deps.sh"));
    assert!(
        out.status.success(),
        "promtool {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_alert_is_valid_and_unit_tested_firing_and_quiet() {
    let dir = TempDir::new("alerts");
    let groups = groups();
    // The PrometheusRule's spec.groups is exactly a rule file (JSON is YAML).
    std::fs::write(
        dir.path("rules.yaml"),
        json!({ "groups": groups }).to_string(),
    )
    .unwrap();
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/alerts/alerts.test.yaml");
    std::fs::copy(&tests, dir.path("alerts.test.yaml")).unwrap();
    promtool(&dir.0, &["check", "rules", "rules.yaml"]);
    promtool(&dir.0, &["test", "rules", "alerts.test.yaml"]);

    let test_doc: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&tests).unwrap()).unwrap();
    let tested: BTreeSet<String> = test_doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().into_iter().flatten())
        .filter_map(|a| a["alertname"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(tested, alert_names(&groups), "every alert has a unit test");
    assert!(alert_names(&groups).len() >= 8);
}

/// GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `repository` of the workspace Cargo.toml: where the docs the alerts link to live.
fn repository() -> String {
    let text = std::fs::read_to_string(repo_file("Cargo.toml")).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("repository = "))
        .expect("workspace Cargo.toml names its repository");
    line.trim_matches('"').to_owned()
}

#[test]
fn every_alert_links_its_own_runbook_section_and_every_section_is_an_alert() {
    let runbooks = std::fs::read_to_string(repo_file("docs/runbooks.md")).unwrap();
    let sections: BTreeSet<String> = runbooks
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.trim().to_owned())
        .collect();
    let anchors: BTreeSet<String> = sections.iter().map(|s| anchor(s)).collect();
    let base = format!("{}/blob/main/docs/runbooks.md#", repository());
    let groups = groups();
    for rule in rules(&groups) {
        let Some(name) = rule["alert"].as_str() else {
            continue;
        };
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} has no runbook_url"));
        let fragment = url
            .strip_prefix(&base)
            .unwrap_or_else(|| panic!("{name}: runbook_url {url} is not under {base}"));
        assert!(
            anchors.contains(fragment),
            "{name}: #{fragment} is no section of docs/runbooks.md ({anchors:?})"
        );
        assert_eq!(fragment, anchor(name), "{name} links its own section");
    }
    let alerts = alert_names(&groups);
    let stale: Vec<&String> = sections
        .iter()
        .filter(|s| s.starts_with("Podcidr") && !alerts.contains(*s))
        .collect();
    assert!(stale.is_empty(), "runbooks of no alert: {stale:?}");
    for alert in &alerts {
        assert!(
            sections.contains(alert),
            "docs/runbooks.md has no ## {alert}"
        );
    }
}

#[test]
fn promql_metric_names_skip_functions_keywords_labels_and_durations() {
    let names = promql_metric_names(
        r#"count by (address) (a_info and on (instance, peer) (b_up{job="x", le=~"y}"} == 0)) > 0
           or sum without (pod) (rate(c_total[5m] offset 1h)) * on (node) group_left (address) d
           or histogram_quantile(0.9, sum by (le) (rate(e_bucket{x='a\'b'}[$__rate_interval])))
           or absent(up) or vector(1) / 1e3 or time() - f:recorded"#,
    );
    let expected: BTreeSet<String> = [
        "a_info",
        "b_up",
        "c_total",
        "d",
        "e_bucket",
        "up",
        "f:recorded",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(names, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_name_only_metrics_the_binaries_export() {
    let dir = TempDir::new("alerts-metrics");
    let (body, names) = live_metric_names(&dir).await;
    let exprs: Vec<(String, String)> = rules(&groups())
        .iter()
        .map(|r| {
            (
                r["alert"].as_str().unwrap_or("record").to_owned(),
                r["expr"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let used: BTreeSet<String> = exprs
        .iter()
        .flat_map(|(_, e)| promql_metric_names(e))
        .collect();
    assert!(used.len() >= 10, "{used:?}");
    let missing = unexported(&exprs, &names);
    assert!(
        missing.is_empty(),
        "alerts name metrics no binary exports: {missing:?}\nexported: {names:?}"
    );
    for info in [
        "podcidr_build_info",
        "podcidr_bgp_peer_info",
        "podcidr_guard_refused_prefixes",
    ] {
        assert!(names.contains(info), "{info} missing from {names:?}");
    }
    assert!(body.contains("podcidr_bgp_peer_info{peer=\"tor\",address=\"127.0.0.1\",asn=\"65000\",local_asn=\"65001\"} 1"), "{body}");
    // 10.0.0.0/8 is refused now, and the gauge says so (the alert's input).
    assert!(
        body.contains("podcidr_guard_refused_prefixes{reason=\"shorter-than-minimum\"} 1\n"),
        "{body}"
    );
}

/// `up{job="..."}` in the alerts is the job the speaker's PodMonitor sets.
#[test]
fn the_speaker_down_alerts_use_the_job_the_pod_monitor_sets() {
    let text = std::fs::read_to_string(repo_file("deploy/components/monitoring/podmonitors.yaml"))
        .unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let speaker = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "podcidr-bgp-speaker")
        .unwrap();
    let relabel = &speaker["spec"]["podMetricsEndpoints"][0]["relabelings"];
    let set = |target: &str| {
        relabel
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["targetLabel"] == target)
            .cloned()
    };
    let job = set("job").expect("job relabeling");
    let job = job["replacement"].as_str().unwrap();
    let node = set("node").expect("node relabeling");
    assert_eq!(
        node["sourceLabels"],
        json!(["__meta_kubernetes_pod_node_name"])
    );
    let up = format!("up{{job=\"{job}\"}}");
    let with_up: Vec<String> = rules(&groups())
        .iter()
        .filter(|r| promql_metric_names(r["expr"].as_str().unwrap()).contains("up"))
        .map(|r| r["expr"].as_str().unwrap().to_owned())
        .collect();
    assert!(with_up.len() >= 2, "{with_up:?}");
    for expr in with_up {
        assert!(expr.contains(&up), "{expr} does not select {up}");
    }
}
