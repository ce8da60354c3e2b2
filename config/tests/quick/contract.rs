//! The full key set from the issue, every key present.

use podcidr_config::Config;

const CONTRACT: &str = r#"
nodeName: node-a
asn: 4200000001
routerId: 192.0.2.10
source:
  kind: ipam-crd
allowedPrefixes: [10.0.0.0/8, fd00::/8]
nextHop: {ipv4: self, ipv6: self}
peers:
  - name: tor1
    address: 192.0.2.1
    port: 179
    asn: 65000
    localAddress: 192.0.2.10
    passive: false
    families: [ipv4-unicast, ipv6-unicast]
    holdTime: 90
    keepaliveTime: 30
    connectRetry: {base: 1, max: 120}
    passwordFile: /etc/podcidr/secrets/tor1
    ttlSecurity: false
    ebgpMultihop: 1
    gracefulRestart: {enabled: true, restartTime: 120}
    communities: ["65000:100"]
    largeCommunities: ["4200000001:1:1"]
    med: 10
    localPref: 100
    asPathPrepend: 0
    nodeSelector: {matchLabels: {rack: r1}}
admin:
  listen: 127.0.0.1:9180
status:
  publish: true
  minInterval: 5
log: {format: text, level: info}
"#;

#[test]
fn contract_example_rejects_local_pref_for_its_ebgp_peer() {
    let err = Config::from_yaml_str(CONTRACT).unwrap_err();
    assert_eq!(
        err.to_string(),
        "peers[0].localPref: 100 is not allowed (LOCAL_PREF is iBGP only, and peer asn 65000 differs from local asn 4200000001)"
    );
}

#[test]
fn contract_example_without_local_pref_validates() {
    let config = Config::from_yaml_str(&CONTRACT.replace("    localPref: 100\n", ""))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.node_name.as_deref(), Some("node-a"));
    assert_eq!(
        config.peers[0].password_file.as_deref(),
        Some("/etc/podcidr/secrets/tor1".as_ref())
    );
    assert!(config.peers[0].node_selector.is_some());
}
