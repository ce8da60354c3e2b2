//! Supply chain, checked with what works offline (issue 31 item 6; cargo-deny's advisory
//! database needs the network): every crate in the build is under a license on the
//! allowlist, the crates built in two versions are exactly the known ones (a new duplicate
//! fails here, to be folded or added with a reason), the shipped build (`--no-default-features`,
//! as the Dockerfile builds it) carries no in-process fake API server, and the image does not
//! run as root by default.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn cargo(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The packages of the build for this platform, by name: versions and license expressions.
fn packages() -> BTreeMap<String, BTreeMap<String, String>> {
    let text = cargo(&[
        "metadata",
        "--format-version",
        "1",
        "--locked",
        "--filter-platform",
        "x86_64-unknown-linux-gnu",
    ]);
    let m: Value = serde_json::from_str(&text).unwrap();
    let ids: BTreeSet<&str> = m["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for p in m["packages"].as_array().unwrap() {
        if !ids.contains(p["id"].as_str().unwrap_or_default()) {
            continue;
        }
        out.entry(p["name"].as_str().unwrap().to_owned())
            .or_default()
            .insert(
                p["version"].as_str().unwrap().to_owned(),
                p["license"].as_str().unwrap_or("").to_owned(),
            );
    }
    out
}

/// Licenses any dependency may use: permissive ones, compatible with shipping one static
/// binary under Apache-2.0.
const ALLOWED: &[&str] = &[
    "MIT",
    "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "Zlib",
    "Unicode-3.0",
    "Unlicense",
];

/// Whether an SPDX expression (or the old `A/B` form) is satisfiable from the allowlist:
/// every `AND` term has one allowed alternative.
fn allowed(expr: &str) -> bool {
    let e = expr.replace(['(', ')'], " ").replace('/', " OR ");
    !e.trim().is_empty()
        && e.split(" AND ").all(|term| {
            term.split(" OR ")
                .map(str::trim)
                .any(|alt| ALLOWED.contains(&alt))
        })
}

#[test]
fn every_crate_in_the_build_is_under_an_allowed_license() {
    let bad: Vec<String> = packages()
        .into_iter()
        .flat_map(|(name, versions)| {
            versions
                .into_iter()
                .filter(|(_, l)| !allowed(l))
                .map(move |(v, l)| format!("{name} {v}: {l:?}"))
        })
        .collect();
    assert!(bad.is_empty(), "licenses outside the allowlist: {bad:#?}");
    assert!(!allowed("GPL-3.0") && !allowed("") && allowed("(MIT OR Apache-2.0) AND Unicode-3.0"));
}

/// The crates built twice, each for a reason outside this workspace (two major versions in
/// the ecosystem at once). Folding one removes it here; a new one fails until it is folded
/// or listed with its reason.
const KNOWN_DUPLICATES: &[(&str, &str)] = &[
    (
        "base64",
        "k8s-openapi 0.29 uses 0.22, kube-client 5 and pem 4 use 0.23",
    ),
    (
        "getrandom",
        "ring (rustls) uses 0.2, ahash (kube-runtime) 0.3, tempfile (proptest) 0.4",
    ),
    (
        "hashbrown",
        "kube-runtime uses 0.16, indexmap (serde_json) 0.17",
    ),
    (
        "syn",
        "clap_derive and darling use syn 3, async-stream and derive_more syn 2",
    ),
];

#[test]
fn only_the_known_crates_are_built_in_two_versions() {
    let dups: BTreeSet<String> = packages()
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(n, _)| n)
        .collect();
    let known: BTreeSet<String> = KNOWN_DUPLICATES
        .iter()
        .map(|(n, _)| (*n).to_owned())
        .collect();
    assert_eq!(dups, known, "crates built in more than one version");
}

/// The binary the image ships (`--no-default-features`) has no in-process fake API server:
/// the speaker and the allocator cannot reach it.
#[test]
fn the_shipped_build_has_no_fake_api_server() {
    let tree = |extra: &[&str]| {
        let mut args = vec![
            "tree",
            "-p",
            "podcidr-bgp",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--locked",
        ];
        args.extend_from_slice(extra);
        cargo(&args)
    };
    assert!(
        tree(&[]).lines().any(|l| l.starts_with("fake-kube ")),
        "the default build (the demo) has it"
    );
    let shipped = tree(&["--no-default-features"]);
    assert!(
        !shipped.lines().any(|l| l.starts_with("fake-kube ")),
        "{shipped}"
    );
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    assert!(
        dockerfile.contains("--no-default-features"),
        "the image builds without the demo"
    );
}

/// The image's default user is not root (the speaker DaemonSet asks for uid 0 itself).
#[test]
fn the_image_does_not_run_as_root_by_default() {
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let user = dockerfile
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("USER "))
        .expect("a USER line");
    assert_eq!(user.trim(), "65532:65532");
}
