//! Every shipped example config must load.

use std::path::PathBuf;

use podcidr_config::{Config, SourceConfig};

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples")
}

fn load(name: &str) -> Config {
    let path = examples_dir().join(name);
    Config::load(&path).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()))
}

#[test]
fn every_example_config_validates() {
    let mut seen = 0;
    for entry in std::fs::read_dir(examples_dir()).expect("deploy/examples exists") {
        let path = entry.expect("readable entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            Config::load(&path).unwrap_or_else(|e| panic!("{}:\n{e}", path.display()));
            seen += 1;
        }
    }
    assert!(seen >= 5, "expected at least 5 examples, found {seen}");
}

#[test]
fn examples_cover_every_source_kind() {
    assert_eq!(load("host-scope.yaml").source, SourceConfig::NodeSpec);
    assert_eq!(load("cluster-pool.yaml").source, SourceConfig::IpamCrd);
    assert_eq!(load("cilium.yaml").source, SourceConfig::CiliumNode);
    assert_eq!(
        load("file.yaml").source,
        SourceConfig::File {
            path: "/etc/podcidr-bgp/cidrs/cidrs.yaml".into()
        }
    );
    assert_eq!(load("dual-stack-two-tors.yaml").peers.len(), 6);
}
