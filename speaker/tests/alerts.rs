//! The alerts of deploy/components/monitoring: `promtool check rules` and `promtool test rules`
//! (tests/alerts/alerts.test.yaml: every alert fires where it should and stays quiet where it
//! should not), and every metric an alert names is one the binaries export: scraped from a
//! running speaker's metrics listener and a running allocator. promtool comes with Debian's
//! `prometheus` package (scripts/install-test-deps.sh).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Proc, TempDir, allocator_args, free_port, http_get, lone_speaker_config, poll};
use fake_kube::{FakeKube, Gvr};
use serde_json::{Value, json};

fn rule_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/components/monitoring/prometheusrule.yaml")
}

fn groups() -> Value {
    let text = std::fs::read_to_string(rule_file()).unwrap();
    let doc: Value = serde_saphyr::from_str(&text).unwrap();
    doc["spec"]["groups"].clone()
}

fn alert_names(groups: &Value) -> BTreeSet<String> {
    groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
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

/// Metric names in a Prometheus text exposition: counters as their `_total` samples.
fn exported(body: &str) -> BTreeSet<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (name, kind) = (w.next()?, w.next()?);
            Some(if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_owned()
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_name_only_metrics_the_binaries_export() {
    // A speaker with the metrics listener (file source, a peer that never answers).
    let dir = TempDir::new("alerts-metrics");
    // 10.0.0.0/8 is shorter than minPrefixLength: a guard refusal, so that counter exists.
    std::fs::create_dir_all(dir.path("net.d")).unwrap();
    let cni = format!(
        "cni: {{enabled: true, confDir: {}}}",
        dir.path("net.d").display()
    );
    let cfg = lone_speaker_config(&dir, &["198.19.1.0/24", "10.0.0.0/8"], &cni);
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let speaker = Proc::spawn(
        &[
            "speaker",
            "--config",
            cfg.to_str().unwrap(),
            "--metrics-listen",
            &metrics_addr,
        ],
        &dir.path("speaker.log"),
    );
    let body = poll(Duration::from_secs(30), || async {
        let (code, body) = http_get(metrics_addr.parse().unwrap(), "/metrics").await?;
        // Per-session series appear with the first tick after the session opens.
        (code == 200
            && body.contains("podcidr_cni_config_writes_total{")
            && body.contains("podcidr_bgp_session_up{"))
        .then_some(body)
    })
    .await
    .unwrap_or_else(|| panic!("speaker /metrics\n{}", speaker.log()));
    let mut names = exported(&body);
    // The metrics listener serves nothing else: /debug/* stays on loopback admin.
    let (code, _) = http_get(metrics_addr.parse().unwrap(), "/debug/peers")
        .await
        .expect("answers");
    assert_eq!(code, 404);

    // An allocator against the fake API.
    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), json!({"metadata": {"name": "node-a"}}))
        .unwrap();
    let kc = dir.path("kubeconfig");
    fake.write_kubeconfig(&kc).unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let alloc_log = dir.path("allocator.log");
    let out = std::fs::File::create(&alloc_log).unwrap();
    let child = Command::new(common::BIN)
        .args(allocator_args(&kc, &admin))
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .unwrap();
    let allocator = Proc {
        child,
        log: alloc_log,
    };
    // Pool gauges appear once the leader has reconciled a pass.
    let alloc_body = poll(Duration::from_secs(30), || async {
        let (code, body) = http_get(admin.parse().unwrap(), "/metrics").await?;
        (code == 200 && body.contains("podcidr_allocator_pool_capacity{")).then_some(body)
    })
    .await
    .unwrap_or_else(|| panic!("allocator metrics\n{}", allocator.log()));
    names.extend(exported(&alloc_body));

    let text = std::fs::read_to_string(rule_file()).unwrap();
    let used: BTreeSet<String> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("podcidr_"))
        .map(str::to_owned)
        .collect();
    assert!(used.len() >= 8, "{used:?}");
    let missing: Vec<&String> = used.difference(&names).collect();
    assert!(
        missing.is_empty(),
        "alerts name metrics no binary exports: {missing:?}\nexported: {names:?}"
    );
    for info in ["podcidr_build_info", "podcidr_bgp_peer_info"] {
        assert!(names.contains(info), "{info} missing from {names:?}");
    }
    assert!(body.contains("podcidr_bgp_peer_info{peer=\"tor\",address=\"127.0.0.1\",asn=\"65000\",local_asn=\"65001\"} 1"), "{body}");
}
