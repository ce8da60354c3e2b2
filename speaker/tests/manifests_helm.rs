//! The Helm chart (`deploy/helm/podcidr-bgp`) is the kustomize install in another form: its
//! default render equals `kubectl kustomize deploy/` object for object, and each switch in
//! `values.yaml` equals adding the kustomize component of the same name, so the two cannot
//! drift. The only difference allowed is the value of `app.kubernetes.io/managed-by` (`Helm`
//! against `kustomize`). The chart's `crds/` are `deploy/crds/` (checked byte for byte by
//! `ipam-watch/tests/crds_in_sync.rs`), its `files/` the monitoring component's rule file and
//! dashboard. `helm lint` passes, and the chart installs into the newest real API server of
//! the suite (helm built from its Go module by `scripts/install-test-deps.sh`).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::TempDir;
use common::kustomize::*;
use common::real_api::{self, KubeVersion};
use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn chart() -> PathBuf {
    workspace().join("deploy/helm/podcidr-bgp")
}

/// `$PODCIDR_HELM`, else the build `scripts/install-test-deps.sh` links. Outside CI a missing
/// helm skips (saying so); under CI it fails.
fn helm() -> Option<PathBuf> {
    let path = std::env::var_os("PODCIDR_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/test-tools/helm/helm"));
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "helm not found at {}: run scripts/install-test-deps.sh (it builds helm from its Go module)",
        path.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}

fn run(helm: &Path, args: &[&str]) -> String {
    let out = Command::new(helm).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "helm {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `helm template` as a release named podcidr-bgp (the instance label kustomize writes), for
/// the oldest Kubernetes supported (the chart's kubeVersion; helm assumes an older one).
fn template(helm: &Path, set: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec![
        "template",
        "podcidr-bgp",
        chart.to_str().unwrap(),
        "--kube-version",
        KubeVersion::Oldest.version(),
    ];
    for s in set {
        args.extend(["--set", s]);
    }
    let text = run(helm, &args);
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// Objects by (apiVersion, kind, namespace, name), `managed-by` set aside.
fn by_key(docs: Vec<Value>) -> BTreeMap<(String, String, String, String), Value> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    docs.into_iter()
        .map(|mut d| {
            for pointer in ["/metadata/labels", "/spec/template/metadata/labels"] {
                if let Some(m) = d.pointer_mut(pointer).and_then(Value::as_object_mut) {
                    let by = m.remove("app.kubernetes.io/managed-by");
                    assert!(
                        matches!(
                            by.as_ref().and_then(Value::as_str),
                            Some("Helm" | "kustomize")
                        ),
                        "managed-by {by:?}"
                    );
                }
            }
            let m = &d["metadata"];
            let key = (
                s(&d["apiVersion"]),
                s(&d["kind"]),
                s(&m["namespace"]),
                s(&m["name"]),
            );
            (key, d)
        })
        .collect()
}

fn assert_same(what: &str, helm: Vec<Value>, kustomize: Vec<Value>) {
    let (h, k) = (by_key(helm), by_key(kustomize));
    let only = |a: &BTreeMap<_, Value>, b: &BTreeMap<_, Value>| -> Vec<_> {
        a.keys()
            .filter(|key| !b.contains_key(*key))
            .cloned()
            .collect()
    };
    assert!(
        only(&h, &k).is_empty() && only(&k, &h).is_empty(),
        "{what}: only in the chart {:?}; only in kustomize {:?}",
        only(&h, &k),
        only(&k, &h)
    );
    for (key, object) in &k {
        assert_eq!(
            &h[key], object,
            "{what}: {key:?} differs (left: helm template, right: kubectl kustomize)"
        );
    }
}

#[test]
fn helm_lint_passes() {
    let Some(helm) = helm() else { return };
    let out = run(&helm, &["lint", "--strict", chart().to_str().unwrap()]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
}

#[test]
fn helm_default_render_equals_the_kustomize_install() {
    let Some(helm) = helm() else { return };
    if !have_kubectl() {
        return;
    }
    assert_same(
        "default values vs deploy/",
        template(&helm, &[]),
        render(&deploy()),
    );
}

#[test]
fn each_chart_switch_equals_its_kustomize_component() {
    let Some(helm) = helm() else { return };
    if !have_kubectl() {
        return;
    }
    let tmp = TempDir::new("helm-components");
    let switches = [
        ("monitoring", "monitoring.enabled=true"),
        ("cni", "cni.enabled=true"),
        ("resource-quota", "resourceQuota.enabled=true"),
        ("no-admission-policy", "admissionPolicy.enabled=false"),
    ];
    // Every component has its switch.
    let mut named: Vec<&str> = switches.iter().map(|(c, _)| *c).collect();
    named.sort_unstable();
    assert_eq!(named, components(), "a component without a chart value");
    for (component, set) in switches {
        assert_same(
            &format!("--set {set} vs components/{component}"),
            template(&helm, &[set]),
            render(&with_component(&tmp, component)),
        );
    }
}

#[test]
fn the_charts_files_are_the_monitoring_components() {
    for file in ["prometheusrule.yaml", "podcidr-bgp-dashboard.json"] {
        let ours = std::fs::read(chart().join("files").join(file)).unwrap();
        let theirs = std::fs::read(deploy().join("components/monitoring").join(file)).unwrap();
        assert!(
            ours == theirs,
            "deploy/helm/podcidr-bgp/files/{file} differs from deploy/components/monitoring/{file}: copy it"
        );
    }
}

/// Values an operator sets reach the objects: the image, the pull policy and a flag pool.
#[test]
fn image_and_pool_values_reach_the_workloads() {
    let Some(helm) = helm() else { return };
    let docs = template(
        &helm,
        &[
            "image.repository=registry.example/podcidr-bgp",
            "image.tag=9.9.9",
            "image.pullPolicy=Always",
            "allocator.clusterPool.ipv4Cidr=10.244.0.0/16",
            "allocator.clusterPool.ipv6Cidr=fd00:244::/56",
        ],
    );
    for kind in ["DaemonSet", "Deployment"] {
        let w = docs.iter().find(|d| d["kind"] == kind).unwrap();
        let c = &w["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "registry.example/podcidr-bgp:9.9.9", "{kind}");
        assert_eq!(c["imagePullPolicy"], "Always", "{kind}");
    }
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let args: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for a in [
        "--cluster-pool-ipv4-cidr=10.244.0.0/16",
        "--cluster-pool-ipv4-mask-size=24",
        "--cluster-pool-ipv6-cidr=fd00:244::/56",
        "--cluster-pool-ipv6-mask-size=64",
    ] {
        assert!(args.contains(&a), "{a} in {args:?}");
    }
}

/// `helm install` into a real API server (the newest the suite builds): the CRDs first, then
/// every object, the admission policy included; `helm uninstall` removes the workloads and
/// keeps the CRDs (Helm never deletes crds/), as `kubectl delete -k deploy/` does.
#[test]
fn helm_installs_into_a_real_api_server_and_uninstall_keeps_the_crds() {
    let Some(helm) = helm() else { return };
    let Some(cp) = real_api::control_plane_on(KubeVersion::Newest) else {
        return;
    };
    let kubeconfig = cp.admin().kubeconfig.to_str().unwrap().to_owned();
    let cache = cp.file("helm-cache");
    let cache = cache.to_str().unwrap();
    let helm_as_admin = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kubeconfig", &kubeconfig, "--repository-cache", cache]);
        run(&helm, &all)
    };
    helm_as_admin(&["install", "podcidr-bgp", chart().to_str().unwrap()]);
    cp.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd",
        "--all",
        "--timeout=60s",
    ]);
    let crds = cp.kubectl(&["get", "crd", "-o", "name"]);
    assert_eq!(crds.lines().count(), 5, "{crds}");
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
    let status = helm_as_admin(&["status", "podcidr-bgp", "-o", "json"]);
    assert!(status.contains("\"status\":\"deployed\""), "{status}");
    // No --wait: without a controller-manager the namespaces never finish terminating.
    helm_as_admin(&["uninstall", "podcidr-bgp"]);
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
    assert_eq!(kept.lines().count(), 5, "the CRDs stay: {kept}");
}
