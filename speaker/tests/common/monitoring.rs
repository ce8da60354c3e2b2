//! What the monitoring component's PromQL may name: metric names scraped from a running
//! speaker and allocator (not a list), PromQL's metric names, and promtool's parser.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig};
use fake_kube::{FakeKube, Gvr};
use serde_json::{Value, json};

use super::{BIN, Proc, TempDir, allocator_args, free_port, http_get, poll};

/// Series Prometheus makes itself for every target, not the binaries.
pub const PER_TARGET: &[&str] = &["up"];

/// Sample names a Prometheus text exposition can hold: counters as `_total`, histograms as
/// `_bucket`/`_sum`/`_count`, summaries with `_sum`/`_count`, plus every sample line's name.
pub fn exported(body: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in body.lines() {
        if let Some(decl) = line.strip_prefix("# TYPE ") {
            let mut w = decl.split_whitespace();
            let (Some(name), Some(kind)) = (w.next(), w.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                "summary" => &["", "_sum", "_count"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_owned());
        }
    }
    names
}

/// The speaker's `/metrics` body and every metric name a speaker and an allocator export: the
/// speaker (file source, CNI on) has one session Established with a route collector (so
/// UPDATEs are counted), one peer that never answers, and a refused CIDR; the allocator runs
/// against a fake API.
pub async fn live_metric_names(dir: &TempDir) -> (String, BTreeSet<String>) {
    let collector = Collector::start(CollectorConfig::new("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    // 10.0.0.0/8 is shorter than minPrefixLength: a guard refusal, so that counter exists.
    std::fs::write(
        dir.path("cidrs.yaml"),
        "nodes:\n  node-a: [198.19.1.0/24, 10.0.0.0/8]\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path("net.d")).unwrap();
    let cfg = dir.path("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "nodeName: node-a\nasn: 65001\nrouterId: 192.0.2.1\n\
             source: {{kind: file, path: {cidrs}}}\n\
             cni: {{enabled: true, confDir: {netd}}}\n\
             peers:\n\
             \x20 - {{name: tor, address: 127.0.0.1, port: {collector}, asn: 65000, ebgpMultihop: 2, gracefulRestart: {{enabled: false}}}}\n\
             \x20 - {{name: tor2, address: 127.0.0.1, port: {silent}, asn: 65000}}\n\
             admin: {{listen: \"127.0.0.1:{admin}\"}}\nstatus: {{publish: false}}\n",
            cidrs = dir.path("cidrs.yaml").display(),
            netd = dir.path("net.d").display(),
            collector = collector.local_addr().port(),
            silent = free_port(),
            admin = free_port(),
        ),
    )
    .unwrap();
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
            && body.contains("podcidr_guard_refused_total{")
            && body.contains("podcidr_bgp_session_up{peer=\"tor\"} 1")
            && body.contains("podcidr_bgp_updates_sent_total{"))
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

    let fake = FakeKube::start().await.unwrap();
    fake.insert(&Gvr::nodes(), json!({"metadata": {"name": "node-a"}}))
        .unwrap();
    // A configuration object, so the leader counts objects by Accepted reason.
    fake.insert(
        &Gvr::new("bgp.podcidr.io/v1beta1", "bgpspeakerconfigs"),
        json!({"apiVersion": "bgp.podcidr.io/v1beta1", "kind": "BGPSpeakerConfig",
               "metadata": {"name": "default", "generation": 1},
               "spec": {"asn": 64512, "source": {"kind": "ipam-crd"},
                        "allowedPrefixes": ["10.20.0.0/16"]}}),
    )
    .unwrap();
    let kc = dir.path("kubeconfig");
    fake.write_kubeconfig(&kc).unwrap();
    let admin = format!("127.0.0.1:{}", free_port());
    let alloc_log = dir.path("allocator.log");
    let out = std::fs::File::create(&alloc_log).unwrap();
    let child = Command::new(BIN)
        .args(allocator_args(&kc, &admin))
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .unwrap();
    let allocator = Proc {
        child,
        log: alloc_log,
    };
    // Pool gauges appear once the leader has reconciled a pass; the write counter once
    // node-a's record is written (a series per kind and result, none before).
    let alloc_body = poll(Duration::from_secs(30), || async {
        let (code, body) = http_get(admin.parse().unwrap(), "/metrics").await?;
        (code == 200
            && body.contains("podcidr_allocator_pool_capacity{")
            && body.contains("podcidr_allocator_writes_total{")
            && body.contains("podcidr_allocator_config_objects{"))
        .then_some(body)
    })
    .await
    .unwrap_or_else(|| panic!("allocator metrics\n{}", allocator.log()));
    names.extend(exported(&alloc_body));
    (body, names)
}

const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "offset", "bool", "inf", "nan", "atan2",
];

/// Index just past the bracket that closes the one at `open` (strings inside skipped).
fn skip_group(b: &[u8], open: usize, close: u8) -> usize {
    let mut i = open + 1;
    while i < b.len() && b[i] != close {
        i = if matches!(b[i], b'"' | b'\'' | b'`') {
            skip_string(b, i)
        } else {
            i + 1
        };
    }
    i + 1
}

/// Index just past the string that starts at `at`.
fn skip_string(b: &[u8], at: usize) -> usize {
    let quote = b[at];
    let mut i = at + 1;
    while i < b.len() && b[i] != quote {
        i += if b[i] == b'\\' && quote != b'`' { 2 } else { 1 };
    }
    i + 1
}

/// The metric names a PromQL expression selects: identifiers that are not functions,
/// aggregations, keywords, label names (in `{}`, `by (...)`, `on (...)`, ...), strings,
/// numbers or durations.
pub fn promql_metric_names(expr: &str) -> BTreeSet<String> {
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if matches!(c, b'"' | b'\'' | b'`') {
            i = skip_string(b, i);
        } else if c == b'{' {
            i = skip_group(b, i, b'}');
        } else if c == b'[' {
            i = skip_group(b, i, b']');
        } else if c == b'#' {
            i = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            // Numbers and durations (`5m` after offset, `1e3`, `0x1f`).
            while i < b.len() && (ident(b[i]) || b[i] == b'.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b':' {
            let start = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            let mut next = i;
            while next < b.len() && b[next].is_ascii_whitespace() {
                next += 1;
            }
            // `sum by (x) (...)`: an aggregation whose modifier comes first.
            let modifier = ["by", "without"].iter().any(|m| {
                expr[next..].starts_with(m) && !b.get(next + m.len()).is_some_and(|&c| ident(c))
            });
            let call = b.get(next) == Some(&b'(') || (modifier && !LABEL_LISTS.contains(&word));
            if LABEL_LISTS.contains(&word) {
                if call {
                    i = skip_group(b, next, b')');
                }
            } else if !call && !KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) {
                out.insert(word.to_owned());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// promtool parses every expression: one recording rule each, `promtool check rules`.
/// `exprs` are (where, PromQL).
pub fn promtool_accepts(dir: &Path, exprs: &[(String, String)]) {
    let rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, (_, e))| json!({"record": format!("check:expr_{i}"), "expr": e}))
        .collect();
    let file = dir.join("exprs.rules.yaml");
    std::fs::write(
        &file,
        json!({"groups": [{"name": "exprs", "rules": rules}]}).to_string(),
    )
    .unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("promtool ({e}): run scripts/install-test-deps.sh"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let listing: Vec<String> = exprs
        .iter()
        .enumerate()
        .map(|(i, (w, e))| format!("expr_{i} ({w}): {e}"))
        .collect();
    assert!(
        out.status.success(),
        "promtool rejects an expression:\n{text}\n{}",
        listing.join("\n")
    );
}

/// Names in `exprs` that neither binary exports (nor Prometheus per target), by where.
pub fn unexported(exprs: &[(String, String)], names: &BTreeSet<String>) -> Vec<String> {
    exprs
        .iter()
        .flat_map(|(w, e)| {
            promql_metric_names(e)
                .into_iter()
                .filter(|n| !names.contains(n) && !PER_TARGET.contains(&n.as_str()))
                .map(move |n| format!("{w}: {n}"))
        })
        .collect()
}
