//! The Helm chart (deploy/helm/podcidr-bgp) is the kustomize install under another tool: its
//! default render is `kubectl kustomize deploy/` object for object, each switch in its
//! values.yaml renders what the kustomize component of the same name does, `helm lint
//! --strict` passes, and its copies (crds/, files/) are byte-identical to deploy/'s files.
//!
//! Objects are compared as sets keyed by (apiVersion, kind, namespace, name), each object as
//! parsed JSON (formatting, comments and key order do not count; list order does). One
//! normalisation and no other: the label `app.kubernetes.io/managed-by`, `kustomize` in one
//! and `Helm` in the other, on each object and on each pod template, is checked to have
//! exactly that value on its side and then left out of the comparison.
//!
//! Needs helm (`$PODCIDR_HELM`, else target/test-tools/helm/helm, which
//! scripts/install-test-deps.sh links) and kubectl (its built-in kustomize). Without them a
//! test is skipped with a message on a developer machine and fails under CI (`CI` set). The
//! byte-identity tests need neither. The last test installs the chart into the newest real API
//! server of the suite and uninstalls it.

use crate::common;
use integration_tests::skip::Need;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::TempDir;
use common::kustomize::*;
use integration_tests::control_plane::KubeVersion;
use serde_json::Value;

/// The release name the docs install under: the `app.kubernetes.io/instance` label deploy/
/// writes.
const RELEASE: &str = "podcidr-bgp";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Each kustomize component under deploy/components/ and the `--set` values that render the
/// same with the chart.
const SWITCHES: &[(&str, &str)] = &[
    ("cni", "cni.enabled=true"),
    ("egress", "egress.enabled=true"),
    ("monitoring", "monitoring.enabled=true"),
    ("no-admission-policy", "admissionPolicy.enabled=false"),
    ("resource-quota", "resourceQuota.enabled=true"),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("speaker/ has a parent")
        .to_path_buf()
}

fn chart() -> PathBuf {
    deploy().join("helm/podcidr-bgp")
}

/// helm: `$PODCIDR_HELM`, else the link scripts/install-test-deps.sh makes; None (a skip,
/// or a panic under CI) without it.
fn helm() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PODCIDR_HELM") {
        return Some(PathBuf::from(p));
    }
    integration_tests::skip::require(&[Need::TestTool("helm/helm")])?;
    Some(workspace_root().join("target/test-tools/helm/helm"))
}

/// helm and kubectl, or None (a skip, or a panic under CI).
fn tools() -> Option<PathBuf> {
    let helm = helm()?;
    integration_tests::skip::require(&[Need::Kubectl])?;
    Some(helm)
}

/// A `helm` command that reads and writes nothing of the user's (config, cache, repositories).
fn helm_cmd(helm: &Path, home: &TempDir) -> Command {
    let mut cmd = Command::new(helm);
    cmd.env("HELM_CONFIG_HOME", home.path("config"))
        .env("HELM_CACHE_HOME", home.path("cache"))
        .env("HELM_DATA_HOME", home.path("data"))
        .env_remove("KUBECONFIG");
    cmd
}

/// `helm template podcidr-bgp deploy/helm/podcidr-bgp` with `--set` values, for Kubernetes
/// `kube` (a helm built from its Go module assumes 1.20 unless told). Err: helm's stderr.
fn try_template(helm: &Path, kube: &str, sets: &[&str]) -> Result<Vec<Value>, String> {
    let home = TempDir::new("helm-home");
    let mut cmd = helm_cmd(helm, &home);
    cmd.args(["template", RELEASE])
        .arg(chart())
        .args(["--kube-version", kube]);
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    let out = cmd.output().expect("run helm template");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    Ok(serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("helm template {sets:?}: rendered YAML: {e}\n{text}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect())
}

fn template(helm: &Path, sets: &[&str]) -> Vec<Value> {
    try_template(helm, KubeVersion::Oldest.version(), sets)
        .unwrap_or_else(|e| panic!("helm template {sets:?} failed: {e}"))
}

type Key = (String, String, String, String);

fn key(d: &Value) -> Key {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (
        s(&d["apiVersion"]),
        s(&d["kind"]),
        s(&d["metadata"]["namespace"]),
        s(&d["metadata"]["name"]),
    )
}

/// The objects by key. The one normalisation: `app.kubernetes.io/managed-by` in an object's
/// labels and in its pod template's labels must say `manager`, and then says the same on
/// both sides (present where it was, so a missing label still differs). A Namespace must
/// carry `helm.sh/resource-policy: keep` (the user's MD5 Secret is in it).
fn normalised(docs: &[Value], manager: &str, what: &str) -> BTreeMap<Key, Value> {
    let mut out = BTreeMap::new();
    for d in docs {
        let mut d = d.clone();
        let k = key(&d);
        if manager == "Helm" && d["kind"] == "Namespace" {
            assert_eq!(
                d["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
                "{what}: {k:?}: uninstall must keep the namespace (the user's Secret is in it)"
            );
        }
        for labels in ["/metadata/labels", "/spec/template/metadata/labels"] {
            if let Some(map) = d.pointer_mut(labels).and_then(Value::as_object_mut)
                && let Some(v) = map.get_mut(MANAGED_BY)
            {
                assert_eq!(*v, manager, "{what}: {k:?}: {labels}: {MANAGED_BY}");
                *v = Value::from("kustomize or Helm");
            }
        }
        assert!(out.insert(k.clone(), d).is_none(), "{what}: {k:?} twice");
    }
    out
}

/// Where `a` and `b` differ, as JSON pointers with both values.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            let null = Value::Null;
            for k in keys {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                differences(
                    &p,
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}/{i}"), x, y, out);
            }
        }
        _ if a != b => out.push(format!("{path}: kustomize {a}, helm {b}")),
        _ => {}
    }
}

/// The helm render equals the kustomize render, object for object, but for the managed-by
/// label; a failure lists every missing, extra and differing object.
fn assert_same_objects(what: &str, kustomize: &[Value], helm: &[Value]) {
    let k = normalised(kustomize, "kustomize", &format!("{what}, kustomize"));
    let h = normalised(helm, "Helm", &format!("{what}, helm"));
    let mut problems = Vec::new();
    for key in k.keys().filter(|key| !h.contains_key(*key)) {
        problems.push(format!("only kustomize renders {key:?}"));
    }
    for key in h.keys().filter(|key| !k.contains_key(*key)) {
        problems.push(format!("only helm renders {key:?}"));
    }
    for (key, a) in &k {
        if let Some(b) = h.get(key)
            && a != b
        {
            let mut diffs = Vec::new();
            differences("", a, b, &mut diffs);
            problems.push(format!("{key:?} differs:\n  {}", diffs.join("\n  ")));
        }
    }
    assert!(
        problems.is_empty(),
        "{what}: helm template and kubectl kustomize differ:\n{}",
        problems.join("\n")
    );
    assert!(!k.is_empty(), "{what}: nothing rendered");
}

/// The chart's values for a component, as the comparison tests use them.
fn switch(component: &str) -> &'static str {
    SWITCHES
        .iter()
        .find(|(c, _)| *c == component)
        .map(|(_, set)| *set)
        .unwrap_or_else(|| panic!("no chart value for components/{component}"))
}

/// The Namespaces of deploy/crds/: the chart renders them (kept on uninstall), kustomize
/// installs them with the CRDs.
fn namespaces() -> Vec<Value> {
    render(&crds())
        .into_iter()
        .filter(|d| d["kind"] == "Namespace")
        .collect()
}

fn assert_switch_equals_component(component: &str) {
    let helm = integration_tests::needs!(tools());
    let tmp = TempDir::new(&format!("helm-{component}"));
    let mut kustomized = render(&with_component(&tmp, component));
    kustomized.extend(namespaces());
    let helmed = template(&helm, &[switch(component)]);
    assert_same_objects(
        &format!("components/{component} vs --set {}", switch(component)),
        &kustomized,
        &helmed,
    );
}

#[test]
fn helm_chart_lints_clean_with_every_switch() {
    let helm = integration_tests::needs!(helm());
    let all: Vec<&str> = SWITCHES.iter().map(|(_, s)| *s).collect();
    for sets in [vec![], all] {
        let home = TempDir::new("helm-lint");
        let mut cmd = helm_cmd(&helm, &home);
        cmd.args(["lint", "--strict", "--kube-version"])
            .arg(KubeVersion::Oldest.version())
            .arg(chart());
        for s in &sets {
            cmd.arg("--set").arg(s);
        }
        let out = cmd.output().expect("run helm lint");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "helm lint --strict {sets:?}:\n{text}");
        // --strict fails on warnings already; [INFO] (no icon) is advice, not a problem.
        assert!(
            !text.contains("[WARNING]") && !text.contains("[ERROR]"),
            "helm lint {sets:?}:\n{text}"
        );
    }
}

#[test]
fn helm_default_render_equals_the_kustomize_install() {
    let helm = integration_tests::needs!(tools());
    let mut kustomized = render(&deploy());
    kustomized.extend(namespaces());
    // The same objects for every Kubernetes the suite supports (nothing in the chart depends
    // on the version, beyond refusing those before 1.30).
    for version in KubeVersion::ALL {
        let helmed = try_template(&helm, version.version(), &[])
            .unwrap_or_else(|e| panic!("helm template for {}: {e}", version.version()));
        assert_same_objects(
            &format!(
                "deploy/ vs the chart's defaults, Kubernetes {}",
                version.version()
            ),
            &kustomized,
            &helmed,
        );
    }
}

#[test]
fn helm_monitoring_value_equals_the_monitoring_component() {
    assert_switch_equals_component("monitoring");
}

#[test]
fn helm_admission_policy_off_equals_the_no_admission_policy_component() {
    assert_switch_equals_component("no-admission-policy");
}

#[test]
fn helm_cni_value_equals_the_cni_component() {
    assert_switch_equals_component("cni");
}

#[test]
fn helm_resource_quota_value_equals_the_resource_quota_component() {
    assert_switch_equals_component("resource-quota");
}

/// A component added to deploy/components/ needs its chart value (and a line in SWITCHES).
#[test]
fn every_kustomize_component_has_a_helm_value() {
    let mut mapped: Vec<String> = SWITCHES.iter().map(|(c, _)| (*c).to_owned()).collect();
    mapped.sort();
    assert_eq!(components(), mapped, "deploy/components/ vs SWITCHES");
}

/// The chart's crds/ are deploy/crds/'s CRD files, byte for byte: Helm installs them as they
/// are, so they cannot drift from what `kubectl apply -k deploy/crds` installs.
#[test]
fn helm_crds_are_deploy_crds_byte_for_byte() {
    let names = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            // The namespaces are templates in the chart (kept on uninstall), not crds/.
            .filter(|n| n != "kustomization.yaml" && n != "namespaces.yaml")
            .collect();
        v.sort();
        v
    };
    let ours = crds();
    let theirs = chart().join("crds");
    let files = names(&ours);
    assert_eq!(files.len(), 6, "deploy/crds/: {files:?}");
    assert_eq!(
        names(&theirs),
        files,
        "{} vs deploy/crds/",
        theirs.display()
    );
    for f in &files {
        assert!(
            std::fs::read(ours.join(f)).unwrap() == std::fs::read(theirs.join(f)).unwrap(),
            "{}/{f} differs from deploy/crds/{f}: copy it (cp deploy/crds/*.podcidr.io.yaml {}/)",
            theirs.display(),
            theirs.display()
        );
    }
}

/// The alert rules and the dashboard the chart emits as data are the monitoring component's
/// files, byte for byte (the render comparison checks them too, with monitoring on).
#[test]
fn helm_monitoring_files_are_the_components_byte_for_byte() {
    let component = deploy().join("components/monitoring");
    for f in ["prometheusrule.yaml", "podcidr-bgp-dashboard.json"] {
        let ours = std::fs::read(component.join(f)).unwrap();
        let theirs = std::fs::read(chart().join("files").join(f))
            .unwrap_or_else(|e| panic!("{}/files/{f}: {e}", chart().display()));
        assert!(
            ours == theirs,
            "{}/files/{f} differs from deploy/components/monitoring/{f}: copy it",
            chart().display()
        );
    }
}

/// Chart.yaml's kubeVersion: Kubernetes before 1.30 (no admissionregistration.k8s.io/v1
/// policies, no node-name claim in tokens) is refused at render time, 1.30 is not.
#[test]
fn helm_chart_refuses_kubernetes_before_1_30() {
    let helm = integration_tests::needs!(helm());
    let refused = try_template(&helm, "1.29.15", &[]).expect_err("1.29 refused");
    assert!(refused.contains("kubeVersion"), "{refused}");
    try_template(&helm, "1.30.0", &[]).expect("1.30.0 accepted");
}

fn container<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(docs, kind);
    assert_eq!(found.len(), 1, "one {kind}");
    let w: &'a Value = found[0];
    &w["spec"]["template"]["spec"]["containers"][0]
}

fn args(c: &Value) -> Vec<&str> {
    c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// allocator.clusterPool becomes the allocator's --cluster-pool-* flags (a mask size only
/// with CIDRs of its family) and changes nothing else; by default there are none.
#[test]
fn helm_cluster_pool_values_are_the_allocators_pool_flags() {
    let helm = integration_tests::needs!(helm());
    let plain = template(&helm, &[]);
    assert!(
        !args(container(&plain, "Deployment"))
            .iter()
            .any(|a| a.starts_with("--cluster-pool")),
        "no pool from flags by default: PodCIDRPool objects"
    );
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["allocator.clusterPool.ipv4Cidrs={10.244.0.0/16,10.245.0.0/16}"],
            &[
                "--cluster-pool-ipv4-cidr=10.244.0.0/16,10.245.0.0/16",
                "--cluster-pool-ipv4-mask-size=24",
            ],
        ),
        (
            // One CIDR as a plain string, as `--set` gives it.
            &[
                "allocator.clusterPool.ipv6Cidrs=fd00:10:244::/56",
                "allocator.clusterPool.ipv6MaskSize=80",
            ],
            &[
                "--cluster-pool-ipv6-cidr=fd00:10:244::/56",
                "--cluster-pool-ipv6-mask-size=80",
            ],
        ),
        (
            &[
                "allocator.clusterPool.ipv4Cidrs={10.244.0.0/16}",
                "allocator.clusterPool.ipv4MaskSize=26",
                "allocator.clusterPool.ipv6Cidrs={fd00:10:244::/56}",
            ],
            &[
                "--cluster-pool-ipv4-cidr=10.244.0.0/16",
                "--cluster-pool-ipv4-mask-size=26",
                "--cluster-pool-ipv6-cidr=fd00:10:244::/56",
                "--cluster-pool-ipv6-mask-size=64",
            ],
        ),
    ];
    for (sets, flags) in cases {
        let docs = template(&helm, sets);
        let got: Vec<&str> = args(container(&docs, "Deployment"))
            .into_iter()
            .filter(|a| a.starts_with("--cluster-pool"))
            .collect();
        assert_eq!(got, flags, "{sets:?}");
        // Nothing but the allocator's args changed.
        let mut expected = plain.clone();
        let mut with_pool = docs;
        for d in expected.iter_mut().chain(with_pool.iter_mut()) {
            if d["kind"] == "Deployment" {
                d["spec"]["template"]["spec"]["containers"][0]["args"] = Value::Null;
            }
        }
        assert_eq!(expected, with_pool, "{sets:?}");
    }
}

/// image.* sets both workloads' image (one binary); pullPolicy appears only when set.
#[test]
fn helm_image_values_set_both_workloads() {
    let helm = integration_tests::needs!(helm());
    let plain = template(&helm, &[]);
    let version = env!("CARGO_PKG_VERSION");
    for kind in ["DaemonSet", "Deployment"] {
        let c = container(&plain, kind);
        assert_eq!(
            c["image"],
            format!("ghcr.io/podcidr-bgp/podcidr-bgp:{version}"),
            "{kind}: the chart's appVersion"
        );
        assert!(c.get("imagePullPolicy").is_none(), "{kind}: {c}");
    }
    let set = template(
        &helm,
        &[
            "image.repository=registry.example/podcidr-bgp",
            "image.tag=0.2.0-rc.1",
            "image.pullPolicy=Always",
        ],
    );
    for kind in ["DaemonSet", "Deployment"] {
        let c = container(&set, kind);
        assert_eq!(
            c["image"], "registry.example/podcidr-bgp:0.2.0-rc.1",
            "{kind}"
        );
        assert_eq!(c["imagePullPolicy"], "Always", "{kind}");
    }
}

/// RBAC reads an empty resourceNames as "every name": the chart refuses an empty list of MD5
/// Secret names instead of granting every Secret of podcidr-system to every node.
#[test]
fn helm_refuses_an_empty_md5_secret_list() {
    let helm = integration_tests::needs!(helm());
    for set in ["speaker.md5SecretNames=null", "speaker.md5SecretNames={}"] {
        let e = try_template(&helm, KubeVersion::Oldest.version(), &[set])
            .expect_err("an empty list is refused");
        assert!(e.contains("md5SecretNames"), "{set}: {e}");
    }
    let docs = template(
        &helm,
        &["speaker.md5SecretNames={podcidr-bgp-md5,tor-keys}"],
    );
    let role = docs
        .iter()
        .find(|d| d["kind"] == "Role" && d["metadata"]["name"] == "podcidr-bgp-speaker-md5")
        .expect("the MD5 Role");
    assert_eq!(
        role["rules"][0]["resourceNames"],
        serde_json::json!(["podcidr-bgp-md5", "tor-keys"])
    );
}

/// `helm install` into a real API server (the newest the suite builds): the CRDs first, then
/// every object, the admission policy included; `helm uninstall` removes the workloads and
/// keeps the CRDs (Helm never deletes crds/) and the namespaces with the user's MD5 Secret
/// (`helm.sh/resource-policy: keep`), as `kubectl delete -k deploy/` does.
#[test]
fn helm_installs_into_a_real_api_server_and_uninstall_keeps_the_crds() {
    let helm = integration_tests::needs!(helm());
    let cp = integration_tests::needs!(common::real_api::control_plane_on(KubeVersion::Newest));
    let home = TempDir::new("helm-install-home");
    let as_admin = |args: &[&str]| {
        let out = helm_cmd(&helm, &home)
            .args(args)
            .arg("--kubeconfig")
            .arg(&cp.admin().kubeconfig)
            .output()
            .expect("run helm");
        assert!(
            out.status.success(),
            "helm {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let chart = chart();
    as_admin(&["install", RELEASE, chart.to_str().unwrap()]);
    cp.wait_crds_established();
    let crds = cp.kubectl(&["get", "crd", "-o", "name"]);
    assert_eq!(crds.lines().count(), 6, "{crds}");
    for (kind, name, ns) in [
        ("daemonset", "podcidr-bgp-speaker", "podcidr-system"),
        ("deployment", "podcidr-bgp-allocator", "podcidr-system"),
        (
            "validatingadmissionpolicy",
            "podcidr-bgp-speaker-own-status",
            "",
        ),
        (
            "validatingadmissionpolicybinding",
            "podcidr-bgp-speaker-own-status",
            "",
        ),
    ] {
        let mut args = vec!["get", kind, name, "-o", "name"];
        if !ns.is_empty() {
            args.extend(["-n", ns]);
        }
        cp.kubectl(&args);
    }
    let status = as_admin(&["status", RELEASE, "-o", "json"]);
    assert!(status.contains("\"status\":\"deployed\""), "{status}");
    // The key the operator creates (docs: Install), which an uninstall must not take.
    cp.kubectl(&[
        "create",
        "secret",
        "generic",
        "podcidr-bgp-md5",
        "-n",
        "podcidr-system",
        "--from-literal=tor1=change-me",
    ]);
    // No --wait: without a controller-manager the namespaces never finish terminating.
    as_admin(&["uninstall", RELEASE]);
    assert!(
        cp.kubectl_as(
            cp.admin(),
            &[
                "get",
                "daemonset",
                "podcidr-bgp-speaker",
                "-n",
                "podcidr-system"
            ]
        )
        .is_err(),
        "the workloads are gone"
    );
    let kept = cp.kubectl(&["get", "crd", "-o", "name"]);
    assert_eq!(kept.lines().count(), 6, "the CRDs stay: {kept}");
    // And the namespaces, with the user's MD5 Secret in podcidr-system.
    for ns in ["podcidr-system", "podcidr-node-lease"] {
        let phase = cp.kubectl(&["get", "namespace", ns, "-o", "jsonpath={.status.phase}"]);
        assert_eq!(phase, "Active", "{ns} is kept");
    }
    cp.kubectl(&[
        "get",
        "secret",
        "podcidr-bgp-md5",
        "-n",
        "podcidr-system",
        "-o",
        "name",
    ]);
}
