//! Defaults, derived values, node-name and router-id resolution.

use crate::common;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use bgp_proto::{Asn, Family, HoldTime, RouterId};
use common::{valid, with_ibgp_peer, with_peer, with_top};
use podcidr_config::{
    CniPlugin, Community, ConfigError, LargeCommunity, LogFormat, LogLevel, NextHopConfig, PeerAsn,
    SessionType, SourceConfig,
};

#[test]
fn omitted_settings_take_documented_defaults() {
    let config = valid(&with_peer(""));
    assert_eq!(config.node_name, None);
    assert_eq!(config.router_id, None);
    assert_eq!(config.source, SourceConfig::IpamCrd);
    assert_eq!(config.next_hop.ipv4, NextHopConfig::SelfAddress);
    assert_eq!(config.next_hop.ipv6, NextHopConfig::SelfAddress);
    assert_eq!(
        config.admin.listen,
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9180)
    );
    assert!(config.status.publish);
    assert_eq!(config.status.min_interval, Duration::from_secs(5));
    assert_eq!(config.log.format, LogFormat::Text);
    assert_eq!(config.log.level, LogLevel::Info);
    assert_eq!(
        (config.min_prefix_length.ipv4, config.min_prefix_length.ipv6),
        (16, 48)
    );
    assert!(!config.cni.enabled, "cni is off unless asked");
    assert_eq!(
        config.cni.path().to_str(),
        Some("/etc/cni/net.d/10-podcidr-bgp.conflist")
    );
    assert_eq!(config.cni.network_name, "podcidr");
    assert_eq!(config.cni.plugin, CniPlugin::Bridge);
    assert_eq!(config.cni.bridge, "podcidr0");
    assert_eq!((config.cni.mtu, config.cni.data_dir.as_ref()), (None, None));

    let peer = &config.peers[0];
    assert_eq!(peer.port, 179);
    assert_eq!(peer.session_type, Some(SessionType::External));
    assert_eq!(peer.local_address, None);
    assert!(!peer.passive);
    assert!(
        !peer.accept_incoming,
        "an active peer does not listen unless asked"
    );
    assert_eq!(
        peer.families,
        vec![Family::IPV4_UNICAST, Family::IPV6_UNICAST]
    );
    assert_eq!(peer.hold_time.seconds(), 90);
    assert_eq!(peer.keepalive_time, 30);
    assert_eq!(peer.connect_retry.base, Duration::from_secs(1));
    assert_eq!(peer.connect_retry.max, Duration::from_secs(120));
    assert_eq!(peer.password_file, None);
    assert!(!peer.ttl_security);
    assert_eq!(peer.ebgp_multihop, Some(1));
    assert!(peer.graceful_restart.enabled);
    assert_eq!(peer.graceful_restart.restart_time, 120);
    // RFC 9494 is opt-in: no LLGR capability unless configured.
    assert_eq!(peer.graceful_restart.long_lived_stale_time, 0);
    assert!(peer.communities.is_empty() && peer.large_communities.is_empty());
    assert_eq!(
        (peer.med, peer.local_pref, peer.as_path_prepend),
        (None, None, 0)
    );
    assert_eq!(peer.node_selector, None);
}

#[test]
fn keepalive_defaults_to_a_third_of_hold_time() {
    for (hold, keepalive) in [(90, 30), (9, 3), (3, 1), (10, 3), (65535, 21845), (0, 0)] {
        let config = valid(&with_peer(&format!("holdTime: {hold}")));
        assert_eq!(config.peers[0].hold_time, HoldTime::new(hold).unwrap());
        assert_eq!(config.peers[0].keepalive_time, keepalive, "holdTime {hold}");
    }
}

#[test]
fn explicit_keepalive_below_hold_time_is_kept() {
    let config = valid(&with_peer("holdTime: 30, keepaliveTime: 29"));
    assert_eq!(config.peers[0].keepalive_time, 29);
    let config = valid(&with_peer("holdTime: 0, keepaliveTime: 0"));
    assert_eq!(config.peers[0].keepalive_time, 0);
}

#[test]
fn connect_retry_max_default_is_raised_to_base() {
    let config = valid(&with_peer("connectRetry: {base: 300}"));
    assert_eq!(config.peers[0].connect_retry.max, Duration::from_secs(300));
}

#[test]
fn ibgp_peer_uses_ttl_255_and_may_set_local_pref() {
    let config = valid(&with_ibgp_peer("localPref: 200"));
    let peer = &config.peers[0];
    assert!(peer.is_ibgp());
    assert_eq!(peer.ebgp_multihop, None);
    assert_eq!(peer.ttl_security().send_ttl(), 255);
    assert_eq!(peer.local_pref, Some(200));
}

#[test]
fn ebgp_ttl_follows_multihop_and_gtsm_sends_255() {
    let multihop = valid(&with_peer("ebgpMultihop: 3"));
    assert_eq!(multihop.peers[0].ttl_security().send_ttl(), 3);
    assert_eq!(multihop.peers[0].ttl_security().min_ttl(), 0);
    let gtsm = valid(&with_peer("ttlSecurity: true"));
    assert_eq!(gtsm.peers[0].ttl_security().send_ttl(), 255);
    // RFC 5082 as the issue specifies it: accept TTL 254 and up.
    assert_eq!(gtsm.peers[0].ttl_security().min_ttl(), 254);
}

#[test]
fn four_octet_asn_and_route_attributes_are_typed() {
    let yaml = with_peer(
        "asn: 4200000002, communities: [\"65000:100\", no-export], \
         largeCommunities: [\"4200000001:1:1\"], med: 4294967295, asPathPrepend: 10",
    )
    .replace("asn: 65000, ", "");
    let peer = &valid(&yaml).peers[0];
    assert_eq!(peer.asn, PeerAsn::Fixed(Asn(4_200_000_002)));
    assert_eq!(
        peer.communities,
        vec![Community::new(65000, 100), Community::NO_EXPORT]
    );
    assert_eq!(peer.large_communities[0].to_array(), [4_200_000_001, 1, 1]);
    assert_eq!(
        peer.large_communities[0],
        "4200000001:1:1".parse::<LargeCommunity>().unwrap()
    );
    assert_eq!(peer.med, Some(u32::MAX));
    assert_eq!(peer.as_path_prepend, 10);
}

#[test]
fn next_hop_accepts_keywords_and_family_addresses() {
    let config = valid(&with_top("nextHop: {ipv4: node, ipv6: \"2001:db8::10\"}"));
    assert_eq!(config.next_hop.ipv4, NextHopConfig::Node);
    assert_eq!(
        config.next_hop.ipv6,
        NextHopConfig::Address("2001:db8::10".parse::<Ipv6Addr>().unwrap())
    );
}

#[test]
fn file_source_needs_no_allowed_prefixes() {
    let config = valid(
        "asn: 65001\nsource: {kind: file, path: /etc/cidrs.yaml}\npeers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n",
    );
    assert!(config.allowed_prefixes.is_empty());
    assert!(config.source.is_file());
}

#[test]
fn null_values_count_as_unset() {
    let config = valid(&with_peer("holdTime: null, port: ~"));
    assert_eq!(config.peers[0].port, 179);
    assert_eq!(config.peers[0].hold_time.seconds(), 90);
}

fn resolve(config_name: Option<&str>, flag: Option<&str>, env: Option<&str>) -> String {
    let mut config = valid(&with_peer(""));
    config.node_name = config_name.map(str::to_owned);
    match config.resolve_node_name(flag.map(str::to_owned), env.map(str::to_owned)) {
        Ok(name) => name,
        Err(e) => e.to_string(),
    }
}

#[test]
fn node_name_prefers_config_then_flag_then_env() {
    assert_eq!(resolve(Some("a"), Some("b"), Some("c")), "a");
    assert_eq!(resolve(None, Some("b"), Some("c")), "b");
    assert_eq!(resolve(None, None, Some("c")), "c");
    assert_eq!(resolve(None, Some(""), Some("c")), "c");
}

#[test]
fn node_name_unset_is_an_error() {
    assert_eq!(
        resolve(None, None, None),
        "nodeName: not set (use nodeName, --node-name or $NODE_NAME)"
    );
    assert_eq!(
        resolve(None, None, Some("")),
        "nodeName: not set (use nodeName, --node-name or $NODE_NAME)"
    );
}

#[test]
fn node_name_from_environment_is_validated_too() {
    assert_eq!(
        resolve(None, None, Some("Node A")),
        "$NODE_NAME: \"Node A\" is not a valid node name (a DNS subdomain: lowercase a-z, 0-9, '-' and '.', up to 253)"
    );
    let config = valid(&with_peer(""));
    assert!(matches!(
        config.resolve_node_name(Some("x_y".into()), None),
        Err(ConfigError::Field { path, .. }) if path == "--node-name"
    ));
}

#[test]
fn router_id_prefers_config_then_node_ipv4_then_session() {
    let id = |s: &str| RouterId::new(s.parse().unwrap()).unwrap();
    let node_ips: Vec<IpAddr> = vec!["2001:db8::5".parse().unwrap(), "192.0.2.5".parse().unwrap()];
    let session = Some("198.51.100.7".parse().unwrap());

    let configured = valid(&with_top("routerId: 192.0.2.10"));
    assert_eq!(
        configured.resolve_router_id(&node_ips, session),
        Some(id("192.0.2.10"))
    );
    let derived = valid(&with_peer(""));
    assert_eq!(
        derived.resolve_router_id(&node_ips, session),
        Some(id("192.0.2.5"))
    );
    assert_eq!(
        derived.resolve_router_id(&node_ips[..1], session),
        Some(id("198.51.100.7"))
    );
    assert_eq!(derived.resolve_router_id(&node_ips[..1], None), None);
}

#[test]
fn node_selector_limits_peers_to_matching_nodes() {
    let yaml = "asn: 65001
allowedPrefixes: [10.0.0.0/8]
peers:
  - {name: everywhere, address: 192.0.2.1, asn: 65000}
  - {name: rack1, address: 192.0.2.2, asn: 65000, nodeSelector: {matchLabels: {rack: r1}}}
  - name: not-control-plane
    address: 192.0.2.3
    asn: 65000
    nodeSelector:
      matchExpressions:
        - {key: node-role.kubernetes.io/control-plane, operator: DoesNotExist}
";
    let config = valid(yaml);
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    };
    let names = |l: BTreeMap<String, String>| -> Vec<String> {
        config
            .for_node(&l)
            .peers
            .into_iter()
            .map(|p| p.name)
            .collect()
    };
    assert_eq!(
        names(labels(&[("rack", "r1")])),
        ["everywhere", "rack1", "not-control-plane"]
    );
    assert_eq!(
        names(labels(&[
            ("rack", "r2"),
            ("node-role.kubernetes.io/control-plane", "")
        ])),
        ["everywhere"]
    );
}

#[test]
fn cni_keys_are_read_as_written() {
    let config = valid(&with_top(
        "cni: {enabled: true, confDir: /host/etc/cni/net.d, fileName: 05-pods.conflist, networkName: pods.v1, plugin: ptp, bridge: br0, mtu: 9000, dataDir: /var/lib/podcidr/cni}",
    ));
    let cni = &config.cni;
    assert!(cni.enabled);
    assert_eq!(
        cni.path().to_str(),
        Some("/host/etc/cni/net.d/05-pods.conflist")
    );
    assert_eq!(cni.network_name, "pods.v1");
    assert_eq!(cni.plugin, CniPlugin::Ptp);
    assert_eq!(cni.bridge, "br0");
    assert_eq!(cni.mtu, Some(9000));
    assert_eq!(
        cni.data_dir.as_deref().and_then(|p| p.to_str()),
        Some("/var/lib/podcidr/cni")
    );
}

#[test]
fn admin_metrics_listen_is_off_unless_set() {
    assert_eq!(valid(&with_peer("")).admin.metrics_listen, None);
    let config = valid(&with_top("admin: {metricsListen: \"0.0.0.0:9182\"}"));
    assert_eq!(
        config.admin.metrics_listen,
        Some("0.0.0.0:9182".parse().unwrap())
    );
}

#[test]
fn duration_keys_take_seconds_or_a_unit() {
    let config = valid(&format!(
        "{}status: {{minInterval: 1m}}\n",
        with_peer(
            "holdTime: 3m, keepaliveTime: 60s, connectRetry: {base: 2s, max: 2m}, gracefulRestart: {restartTime: 1h, longLivedStaleTime: 24h}"
        )
    ));
    let p = &config.peers[0];
    assert_eq!(p.hold_time.seconds(), 180);
    assert_eq!(p.keepalive_time, 60);
    assert_eq!(p.connect_retry.base, Duration::from_secs(2));
    assert_eq!(p.connect_retry.max, Duration::from_secs(120));
    assert_eq!(p.graceful_restart.restart_time, 3600);
    assert_eq!(p.graceful_restart.long_lived_stale_time, 86_400);
    assert_eq!(config.status.min_interval, Duration::from_secs(60));
    assert_eq!(podcidr_config::parse_seconds("90"), Ok(90));
}

#[test]
fn bfd_strict_is_off_unless_written_draft_bfd_strict_6() {
    let c = valid(&with_peer("bfd: {}"));
    assert!(!c.peers[0].bfd.clone().unwrap().strict);
    let c = valid(&with_peer("bfd: {strict: true}"));
    assert!(c.peers[0].bfd.clone().unwrap().strict);
}

#[test]
fn bfd_block_defaults_to_300ms_times_3_and_enabled() {
    use podcidr_config::BfdConfig;
    let c = valid(&with_peer("bfd: {}"));
    assert_eq!(
        c.peers[0].bfd,
        Some(BfdConfig {
            min_tx: Duration::from_millis(300),
            min_rx: Duration::from_millis(300),
            multiplier: 3,
            strict: false,
            authentication: None,
        })
    );
    let c = valid(&with_peer("bfd: {minTx: 100, minRx: 150, multiplier: 5}"));
    let b = c.peers[0].bfd.clone().unwrap();
    assert_eq!(
        (b.min_tx, b.min_rx, b.multiplier),
        (Duration::from_millis(100), Duration::from_millis(150), 5)
    );
    assert_eq!(
        valid(&with_peer("bfd: {enabled: false, minTx: 100}")).peers[0].bfd,
        None
    );
    assert_eq!(
        valid(&with_peer("")).peers[0].bfd,
        None,
        "off unless configured"
    );
}

#[test]
fn bfd_authentication_is_read_as_written_rfc5880_6_7_4() {
    use podcidr_config::{BfdAuthConfig, BfdAuthType};
    let c = valid(&with_peer(
        "bfd: {authentication: {type: meticulous-keyed-sha1, keyId: 7, secretFile: /run/k}}",
    ));
    assert_eq!(
        c.peers[0].bfd.as_ref().unwrap().authentication,
        Some(BfdAuthConfig {
            auth_type: BfdAuthType::MeticulousKeyedSha1,
            key_id: 7,
            secret_file: "/run/k".into(),
        })
    );
}

#[test]
fn bfd_key_file_holds_one_to_twenty_bytes_rfc5880_4_4() {
    let dir = std::env::temp_dir().join(format!("bfd-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, body: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let ok = file("ok", b"twenty-bytes-secret!\n");
    assert_eq!(podcidr_config::load_bfd_key(&ok).unwrap().len(), 20);
    let long = podcidr_config::load_bfd_key(file("long", b"twenty-one-byte-secret")).unwrap_err();
    assert!(
        long.to_string().contains("22 bytes, the limit is 20"),
        "{long}"
    );
    assert!(
        !long.to_string().contains("twenty-one"),
        "never the key: {long}"
    );
    assert!(podcidr_config::load_bfd_key(file("empty", b"\n")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One rule, asked by the speaker's start, its reloads, the source's start and the core: every
/// source but `file` reads the Kubernetes API, and without the API it is refused by name.
#[test]
fn only_the_file_source_runs_without_the_kubernetes_api() {
    use podcidr_config::{SourceConfig, SourceNeedsApi};
    let file = SourceConfig::File {
        path: "/etc/podcidr/cidrs.yaml".into(),
    };
    assert!(!file.needs_api());
    assert_eq!(file.check_api(false), Ok(()));
    for (source, kind) in [
        (SourceConfig::NodeSpec, "node-spec"),
        (SourceConfig::IpamCrd, "ipam-crd"),
        (SourceConfig::CiliumNode, "cilium-node"),
    ] {
        assert!(source.needs_api(), "{kind}");
        assert_eq!(source.check_api(true), Ok(()));
        let err = source.check_api(false).unwrap_err();
        assert_eq!(err, SourceNeedsApi(kind));
        assert_eq!(
            err.to_string(),
            format!("source.kind {kind} needs the Kubernetes API")
        );
    }
}
