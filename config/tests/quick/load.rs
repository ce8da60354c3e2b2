//! `Config::load` and error formatting.

use podcidr_config::{Config, ConfigError};

#[test]
fn load_reports_unreadable_file_with_its_path() {
    let err = Config::load("/nonexistent/podcidr.yaml").unwrap_err();
    assert_eq!(err.len(), 1);
    assert!(matches!(err.errors()[0], ConfigError::Io { .. }));
    assert!(
        err.to_string()
            .starts_with("/nonexistent/podcidr.yaml: cannot read config: ")
    );
}

#[test]
fn oversized_config_file_is_refused_before_parsing_it() {
    let path = std::env::temp_dir().join(format!("podcidr-big-config-{}.yaml", std::process::id()));
    let line = "# padding\n";
    let lines = usize::try_from(podcidr_config::MAX_CONFIG_BYTES).unwrap() / line.len() + 1;
    std::fs::write(&path, format!("asn: 65001\n{}", line.repeat(lines))).unwrap();
    let err = Config::load(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(err.errors()[0], ConfigError::Io { .. }));
    assert!(
        err.to_string()
            .ends_with("cannot read config: larger than 4 MiB (a ConfigMap holds at most 1 MiB)"),
        "{err}"
    );
}

#[test]
fn syntax_error_carries_line_and_column() {
    let err = Config::from_yaml_str("asn: 65001\npeers:\n  - name: [\n").unwrap_err();
    match &err.errors()[0] {
        ConfigError::Syntax { line, column, .. } => assert_eq!((*line, *column), (3, 11)),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn errors_display_one_per_line() {
    let err = Config::from_yaml_str("asn: 0\nbogus: 1\n").unwrap_err();
    assert_eq!(
        err.lines(),
        [
            "bogus: unknown key",
            "asn: 0 is not allowed (1..4294967295 except 23456)",
            "allowedPrefixes: required when source.kind is ipam-crd (the announce guard only announces pod CIDRs inside these)",
            "peers: required (at least one peer)",
        ]
    );
    assert_eq!(err.to_string(), err.lines().join("\n"));
    assert_eq!(err.errors()[1].path(), Some("asn"));
}

#[test]
fn empty_document_reports_required_keys() {
    let err = Config::from_yaml_str("# nothing yet\n").unwrap_err();
    assert_eq!(
        err.lines(),
        [
            "asn: required",
            "allowedPrefixes: required when source.kind is ipam-crd (the announce guard only announces pod CIDRs inside these)",
            "peers: required (at least one peer)",
        ]
    );
}

#[test]
fn config_is_a_single_yaml_document() {
    let err = Config::from_yaml_str("asn: 65001\n---\nasn: 65002\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 3, column 1: the config must be a single YAML document"
    );
}

#[test]
fn yaml_merge_keys_share_peer_settings() {
    let yaml = "asn: 65001
allowedPrefixes: [10.0.0.0/8]
peers:
  - &tor {name: tor1, address: 192.0.2.1, asn: 65000, holdTime: 9}
  - <<: *tor
    name: tor2
    address: 192.0.2.2
";
    let config = Config::from_yaml_str(yaml).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.peers[1].hold_time.seconds(), 9);
    assert_eq!(config.peers[1].name, "tor2");
}
