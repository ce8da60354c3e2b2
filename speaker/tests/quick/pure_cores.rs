//! The cores stay pure: the speaker's core (`daemon/core/`), the configuration-object decisions
//! (selection, the node's config, rollout waves), the allocator's core, and all of `bgp-proto`
//! (wire format, session and BFD state machines) and `podcidr-services` (Service routes) take inputs and return outputs; `podcidr-api`
//! is types only. A core that reaches for
//! a runtime, a Kubernetes client, a socket, the file system, the clock or the environment
//! fails here, naming the file, the line and what it used; such code belongs in the driver
//! around the core. Tests (`tests/`, `tests.rs`, and what follows `#[cfg(test)]`) may.

use std::path::{Path, PathBuf};

/// What a pure core must not use, with the reason shown on failure.
const FORBIDDEN: &[(&str, &str)] = &[
    ("tokio", "a runtime"),
    (".await", "a runtime"),
    ("async fn", "a runtime"),
    ("futures::executor", "a runtime"),
    ("kube::Api", "a Kubernetes client"),
    ("kube::Client", "a Kubernetes client"),
    ("kube::runtime", "a Kubernetes client"),
    ("kube::api::Api", "a Kubernetes client"),
    ("hyper", "an HTTP client or server"),
    ("tower", "an HTTP client or server"),
    ("TcpStream", "a socket"),
    ("TcpListener", "a socket"),
    ("UdpSocket", "a socket"),
    ("socket2", "a socket"),
    ("libc::", "a system call"),
    ("std::fs", "the file system"),
    ("File::open", "the file system"),
    ("File::create", "the file system"),
    ("Instant::now", "the clock"),
    ("SystemTime::now", "the clock"),
    ("thread::sleep", "the clock"),
    ("std::process", "a process"),
    ("std::env::var", "the environment"),
];

/// Every pure core, as a directory (all its `.rs` files) or one file.
const CORES: &[&str] = &[
    "speaker/src/daemon/core",
    "speaker/src/objects/select.rs",
    "speaker/src/objects/node_config.rs",
    "speaker/src/objects/rollout.rs",
    "speaker/src/objects/key_files.rs",
    "ipam-watch/src/allocator/core.rs",
    // The whole wire/FSM crate: its drivers are in bgp-io.
    "bgp-proto/src",
    // Types only.
    "api/src",
    // Which Service routes a node announces.
    "services/src",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("speaker/ has a parent")
        .to_path_buf()
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        out.push(path.to_path_buf());
        return;
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == "tests" || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        if p.is_dir() || p.extension().is_some_and(|x| x == "rs") {
            rust_files(&p, out);
        }
    }
}

/// `file:line: uses <what> (<pattern>)` for every forbidden use before `#[cfg(test)]`,
/// comments left out.
fn impurities(file: &Path, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let code = code.split("//").next().unwrap_or(code);
        for (pattern, what) in FORBIDDEN {
            if code.contains(pattern) {
                found.push(format!(
                    "{}:{}: uses {what} ({pattern})",
                    file.display(),
                    n + 1
                ));
            }
        }
    }
    found
}

#[test]
fn the_cores_import_no_runtime_client_socket_file_system_or_clock() {
    let root = workspace();
    let mut files = Vec::new();
    for core in CORES {
        let path = root.join(core);
        assert!(
            path.exists(),
            "{core} is listed as a core but does not exist"
        );
        rust_files(&path, &mut files);
    }
    assert!(files.len() > 20, "only {} core files found", files.len());
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("read a core file");
            impurities(f.strip_prefix(&root).unwrap_or(f), &text)
        })
        .collect();
    assert!(found.is_empty(), "impure cores:\n{}", found.join("\n"));
}

#[test]
fn the_purity_check_sees_each_kind_of_impurity() {
    let text = "use tokio::sync::mpsc;\nlet f = std::fs::read(p);\nlet t = Instant::now();\n\
                // tokio in a comment is fine\n#[cfg(test)]\nmod tests { use tokio::time; }\n";
    let found = impurities(Path::new("core/x.rs"), text);
    assert_eq!(
        found,
        [
            "core/x.rs:1: uses a runtime (tokio)",
            "core/x.rs:2: uses the file system (std::fs)",
            "core/x.rs:3: uses the clock (Instant::now)",
        ]
    );
}
