//! Rendering deploy/ with `kubectl kustomize` (its built-in kustomize v5), alone, with each
//! component, and under overlays.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::TempDir;

/// The repository's deploy/ directory.
pub fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .canonicalize()
        .unwrap()
}

/// deploy/crds/: the CRDs, a kustomization of their own (installed first, removed only on
/// purpose), so that deleting the workloads (deploy/) keeps every IPAM record.
pub fn crds() -> PathBuf {
    deploy().join("crds")
}

/// True when a working kubectl is on PATH. A kubectl that is there but fails is a broken
/// machine, not a skip: that panics. (Debian's kubernetes-client is too old: kustomize v2.)
pub fn kubectl_works() -> bool {
    match Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    {
        Ok(out) if out.status.success() => true,
        Ok(out) => panic!(
            "`kubectl version --client` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => false,
    }
}

pub fn render(dir: &Path) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("rendered YAML of {}: {e}", dir.display()))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// `to` relative to the directory `from` (both absolute): kustomize refuses absolute bases.
pub fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    out.extend(&to[common..]);
    out
}

/// An overlay over deploy/ with `extra` lines (e.g. `namespace: other-ns`).
pub fn overlay(tmp: &TempDir, name: &str, extra: &str) -> PathBuf {
    let dir = tmp.path(name);
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n{extra}\n\
             resources:\n  - {}\n",
            relative(&dir, &deploy()).display()
        ),
    )
    .unwrap();
    dir
}

pub fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// The components under deploy/components/, by directory name.
pub fn components() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(deploy().join("components"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// An overlay over deploy/ with one component.
pub fn with_component(tmp: &TempDir, component: &str) -> PathBuf {
    let dir = tmp.path(&format!("with-{component}"));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let path = relative(&dir, &deploy().join("components").join(component));
    overlay(
        tmp,
        &format!("with-{component}"),
        &format!("components:\n  - {}", path.display()),
    )
}

/// Everything a user can apply: deploy/ alone, with each component, and renamed with a
/// `namePrefix` overlay. (A `namespace:` overlay is refused by kustomize: deploy/ has two
/// namespaces, the workloads' and the speaker Leases'.)
pub fn all_renderings(tmp: &TempDir) -> Vec<(String, Vec<Value>)> {
    let mut out = vec![("deploy/".to_owned(), render(&deploy()))];
    for c in components() {
        out.push((
            format!("deploy/ + components/{c}"),
            render(&with_component(tmp, &c)),
        ));
    }
    out.push((
        "deploy/ with namePrefix acme-".to_owned(),
        render(&overlay(tmp, "prefix", "namePrefix: acme-")),
    ));
    out
}
