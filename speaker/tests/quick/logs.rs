//! Logs as a log pipeline reads them: a redirected stderr (a file, a container runtime's
//! pipe) carries no ANSI colour codes, and JSON lines put event fields at the top level.

use crate::common;

use std::time::Duration;

use common::{Proc, TempDir, lone_speaker_config};

/// Runs a speaker (file source, one unreachable peer) until it logs that its admin endpoint
/// is up; returns its log.
fn speaker_log(tag: &str, log_cfg: &str) -> String {
    let dir = TempDir::new(tag);
    let cfg = lone_speaker_config(&dir, &["198.19.1.0/24"], log_cfg);
    let mut p = Proc::spawn(
        &["speaker", "--config", cfg.to_str().unwrap()],
        &dir.path("speaker.log"),
    );
    let up = integration_tests::wait_for(Duration::from_secs(20), || {
        p.log().contains("admin endpoint up")
    });
    p.signal(libc::SIGTERM);
    let _ = p.wait_exit(Duration::from_secs(20));
    let log = p.log();
    assert!(
        up,
        "the speaker never said its admin endpoint is up:\n{log}"
    );
    log
}

#[test]
fn text_log_to_a_file_has_no_colour_codes() {
    let log = speaker_log("logs-text", "");
    assert!(log.contains("admin endpoint up"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "ANSI escape in a redirected log:\n{log}"
    );
}

#[test]
fn json_log_lines_have_their_fields_at_the_top_level() {
    let log = speaker_log("logs-json", "log: {format: json}");
    let line = log
        .lines()
        .find(|l| l.contains("admin endpoint up"))
        .expect("the admin line");
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(v["message"], "admin endpoint up", "{v}");
    assert!(v["listen"].is_string(), "fields at the top level: {v}");
    assert!(v.get("fields").is_none(), "{v}");
    assert!(v["level"].is_string() && v["timestamp"].is_string(), "{v}");
}
