//! Small configs to build test cases from.
#![allow(dead_code)]

use podcidr_config::{Config, ConfigErrors};

/// A valid eBGP config (local AS 65001) with one peer whose extra fields are `peer_fields`,
/// written in flow style: `holdTime: 2, passive: true`.
pub fn with_peer(peer_fields: &str) -> String {
    format!(
        "asn: 65001\nallowedPrefixes: [10.0.0.0/8]\npeers:\n  - {{name: tor1, address: 192.0.2.1, asn: 65000{}}}\n",
        if peer_fields.is_empty() {
            String::new()
        } else {
            format!(", {peer_fields}")
        }
    )
}

/// Like [`with_peer`], for an iBGP peer (peer AS = local AS = 65001).
pub fn with_ibgp_peer(peer_fields: &str) -> String {
    with_peer(peer_fields).replace("asn: 65000", "asn: 65001")
}

/// A valid config with `top` appended at the top level (which must not repeat a key).
pub fn with_top(top: &str) -> String {
    format!("{}{top}\n", with_peer(""))
}

pub fn valid(yaml: &str) -> Config {
    Config::from_yaml_str(yaml).unwrap_or_else(|e| panic!("expected valid:\n{yaml}\ngot:\n{e}"))
}

pub fn invalid(yaml: &str) -> ConfigErrors {
    match Config::from_yaml_str(yaml) {
        Ok(c) => panic!("expected errors for:\n{yaml}\ngot: {c:?}"),
        Err(e) => e,
    }
}
