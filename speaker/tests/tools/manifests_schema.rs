//! Every object deploy/ renders (alone, with each component, moved to another namespace) is
//! valid against the Kubernetes API schema of the oldest version it claims to support, strictly:
//! an unknown or misspelled field fails. The schemas come with `kubernetes-validate` (PyPI;
//! Kubernetes 1.25 to 1.37), installed by scripts/install-test-deps.sh into target/.
//!
//! Minimum version: 1.30, the oldest supported (the ValidatingAdmissionPolicy and the node-name
//! claim it checks), with or without components/no-admission-policy. Kinds no Kubernetes release defines
//! (prometheus-operator's, in components/monitoring) are named below and checked for their
//! apiVersion only.

use crate::common;
use integration_tests::skip::Need;

use std::path::PathBuf;
use std::process::Command;

use common::TempDir;
use common::kustomize::{all_renderings, crds, render};
use serde_json::Value;

const MINIMUM: &str = "1.30.0";

/// Custom resources of other projects a component may render: (apiVersion, kind).
const EXTERNAL_KINDS: &[(&str, &str)] = &[
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
];

fn validator() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/test-tools/kv/bin/kubernetes-validate");
    assert!(
        p.is_file(),
        "{} missing: run scripts/install-test-deps.sh",
        p.display()
    );
    p
}

/// Problems `kubernetes-validate --strict` finds in `docs` against `version`.
fn problems(tmp: &TempDir, name: &str, docs: &[Value], version: &str) -> Vec<String> {
    let file = tmp.path(&format!("{}.yaml", name.replace(['/', ' ', '+'], "_")));
    let text: String = docs.iter().map(|d| format!("---\n{d}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let out = Command::new(validator())
        .args(["--strict", "-k", version])
        .arg(&file)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let mut found: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("ERROR") || l.contains("Couldn't find schema"))
        .map(str::to_owned)
        .collect();
    if !out.status.success() && found.is_empty() {
        found.push(format!("kubernetes-validate failed: {text}"));
    }
    found
}

#[test]
fn rendered_manifests_match_the_api_schema_of_the_minimum_version() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("schema");
    let mut failures = Vec::new();
    let mut renderings = all_renderings(&tmp);
    renderings.push(("deploy/crds/".to_owned(), render(&crds())));
    for (what, docs) in renderings {
        let (external, core): (Vec<Value>, Vec<Value>) = docs.into_iter().partition(|d| {
            EXTERNAL_KINDS
                .iter()
                .any(|(v, k)| d["apiVersion"] == *v && d["kind"] == *k)
        });
        for d in &external {
            assert!(d["metadata"]["name"].is_string(), "{what}: {d}");
        }
        let version = MINIMUM;
        failures.extend(
            problems(&tmp, &what, &core, version)
                .into_iter()
                .map(|p| format!("{what} (Kubernetes {version}): {p}")),
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The check is strict: a misspelled field, or a kind the version lacks, is a failure.
#[test]
fn validator_rejects_a_misspelled_field_and_an_unknown_kind() {
    integration_tests::require!(Need::Kubectl);
    let tmp = TempDir::new("schema-self");
    let (_, docs) = all_renderings(&tmp).remove(0);
    let mut bad = docs.clone();
    let ds = bad.iter_mut().find(|d| d["kind"] == "DaemonSet").unwrap();
    let spec = ds["spec"]["template"]["spec"].as_object_mut().unwrap();
    let v = spec.remove("hostNetwork").unwrap();
    spec.insert("hostNetwrk".into(), v);
    let found = problems(&tmp, "misspelled", &bad, MINIMUM);
    assert!(found.iter().any(|p| p.contains("hostNetwrk")), "{found:?}");
    // The admission policy does not exist before 1.30.
    let found = problems(&tmp, "too-old", &docs, "1.29.0");
    assert!(
        found
            .iter()
            .any(|p| p.contains("ValidatingAdmissionPolicy")),
        "{found:?}"
    );
}
