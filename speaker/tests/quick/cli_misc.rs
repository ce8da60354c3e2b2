//! The binary's own plumbing as a user meets it: `--version` and shell completion.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_podcidr-bgp");

fn stdout(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let v = stdout(&["--version"]);
    // "podcidr-bgp 0.1.0 (commit 0123456789ab, built 2026-11-24)"
    let rest = v
        .trim()
        .strip_prefix(&format!(
            "podcidr-bgp {} (commit ",
            env!("CARGO_PKG_VERSION")
        ))
        .unwrap_or_else(|| panic!("{v}"));
    let (commit, date) = rest
        .strip_suffix(')')
        .and_then(|r| r.split_once(", built "))
        .unwrap_or_else(|| panic!("{v}"));
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{v}"
    );
    let parts: Vec<&str> = date.split('-').collect();
    assert_eq!(
        parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
        [4, 2, 2],
        "{v}"
    );
    assert!(date.chars().all(|c| c.is_ascii_digit() || c == '-'), "{v}");
}

#[test]
fn bash_completion_loads_and_knows_the_subcommands() {
    let script = stdout(&["completion", "bash"]);
    assert!(
        script.contains("diff") && script.contains("peers"),
        "{script}"
    );
    let out = Command::new("bash")
        .args(["-c", "source /dev/stdin && complete -p podcidr-bgp"])
        .stdin(file_with(&script))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("podcidr-bgp"),
        "{out:?}"
    );
}

#[test]
fn zsh_and_fish_completions_cover_the_subcommands() {
    for shell in ["zsh", "fish"] {
        let script = stdout(&["completion", shell]);
        for sub in [
            "speaker",
            "allocator",
            "diff",
            "peers",
            "routes",
            "decode",
            "completion",
        ] {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
    }
}

/// A file holding `text`, opened for reading (unlinked at once: only the handle remains).
fn file_with(text: &str) -> std::fs::File {
    let path = std::env::temp_dir().join(format!("podcidr-completion-{}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    f
}
