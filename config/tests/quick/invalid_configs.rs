//! Invalid configs and the exact errors they produce, one row per rule.

use crate::common;

use common::{invalid, with_ibgp_peer, with_peer, with_top};

const TWO_PEERS: &str = "asn: 65001
allowedPrefixes: [10.0.0.0/8]
peers:
  - {name: tor1, address: 192.0.2.1, asn: 65000}
  - {name: tor2, address: 192.0.2.2, asn: 65000, holdTime: 2}
";

/// `(rule, yaml, expected error lines)`.
fn table() -> Vec<(&'static str, String, &'static str)> {
    let file_source = |peer: &str| {
        format!(
            "asn: 65001\nsource: {{kind: file, path: /etc/cidrs.yaml}}\npeers:\n  - {{name: tor1, address: 192.0.2.1, asn: 65000, {peer}}}\n"
        )
    };
    let base = |top: &str, allowed: &str| {
        format!("{top}\n{allowed}\npeers:\n  - {{name: tor1, address: 192.0.2.1, asn: 65000}}\n")
    };
    vec![
        // hold time (RFC 4271 §4.2)
        (
            "hold_time_1_or_2",
            TWO_PEERS.to_owned(),
            "peers[1].holdTime: 2 is not allowed (0 or 3..65535)",
        ),
        (
            "hold_time_over_16_bits",
            with_peer("holdTime: 70000"),
            "peers[0].holdTime: 70000 is not allowed (0 or 3..65535)",
        ),
        (
            "hold_time_whole_seconds",
            with_peer("holdTime: 90.5"),
            "peers[0].holdTime: 90.5 is not a whole number",
        ),
        (
            "keepalive_below_hold",
            with_peer("holdTime: 90, keepaliveTime: 90"),
            "peers[0].keepaliveTime: 90 is not allowed (1..89, below holdTime 90)",
        ),
        (
            "keepalive_zero_with_hold",
            with_peer("keepaliveTime: 0"),
            "peers[0].keepaliveTime: 0 is not allowed (1..89, below holdTime 90)",
        ),
        (
            "keepalive_zero_when_hold_zero",
            with_peer("holdTime: 0, keepaliveTime: 30"),
            "peers[0].keepaliveTime: 30 is not allowed (must be 0 when holdTime is 0)",
        ),
        // unknown keys and wrong types
        (
            "unknown_key_suggests_near_miss",
            with_peer("holdtime: 90"),
            "peers[0].holdtime: unknown key (did you mean holdTime?)",
        ),
        (
            "unknown_top_level_key",
            with_top("frobnicate: 1"),
            "frobnicate: unknown key",
        ),
        (
            "unknown_top_level_key_near_miss",
            with_top("allowedPrefix: []"),
            "allowedPrefix: unknown key (did you mean allowedPrefixes?)",
        ),
        (
            "unknown_key_small_mapping_lists_keys",
            with_top("log: {fmt: json}"),
            "log.fmt: unknown key (expected one of format, level)",
        ),
        (
            "asn_not_a_number",
            base("asn: abc", "allowedPrefixes: [10.0.0.0/8]"),
            "asn: \"abc\" is not a number",
        ),
        (
            "asn_quoted_number",
            base("asn: \"65001\"", "allowedPrefixes: [10.0.0.0/8]"),
            "asn: \"65001\" is not a number (remove the quotes)",
        ),
        (
            "bool_wrong_type",
            with_peer("passive: \"true\""),
            "peers[0].passive: \"true\" is not a boolean (true or false)",
        ),
        (
            "accept_incoming_false_on_a_passive_peer",
            with_peer("passive: true, acceptIncoming: false"),
            "peers[0].acceptIncoming: false is not allowed (a passive peer only accepts connections; remove acceptIncoming or passive)",
        ),
        (
            "peers_not_a_list",
            "asn: 65001\nallowedPrefixes: [10.0.0.0/8]\npeers: {tor1: {}}\n".to_owned(),
            "peers: {\"tor1\":{}} is not a list",
        ),
        (
            "document_not_a_mapping",
            "- asn\n".to_owned(),
            "(top level): [\"asn\"] is not a mapping",
        ),
        // YAML syntax
        (
            "yaml_syntax_error_has_position",
            "asn: 65001\npeers: [\n".to_owned(),
            "line 2, column 8: unclosed bracket '['",
        ),
        (
            "yaml_duplicate_key",
            "asn: 65001\nasn: 65002\n".to_owned(),
            "line 2, column 1: duplicate mapping key: asn",
        ),
        // AS numbers (RFC 6793)
        (
            "asn_required",
            base("", "allowedPrefixes: [10.0.0.0/8]"),
            "asn: required",
        ),
        (
            "asn_zero",
            base("asn: 0", "allowedPrefixes: [10.0.0.0/8]"),
            "asn: 0 is not allowed (1..4294967295 except 23456)",
        ),
        (
            "asn_over_32_bits",
            base("asn: 4294967296", "allowedPrefixes: [10.0.0.0/8]"),
            "asn: 4294967296 is not allowed (1..4294967295 except 23456)",
        ),
        (
            "asn_as_trans_local",
            base("asn: 23456", "allowedPrefixes: [10.0.0.0/8]"),
            "asn: 23456 is not allowed (AS_TRANS is reserved by RFC 6793)",
        ),
        (
            "asn_as_trans_peer",
            with_peer("asn: 23456").replace("asn: 65000, ", ""),
            "peers[0].asn: 23456 is not allowed (AS_TRANS is reserved by RFC 6793)",
        ),
        // router id (RFC 6286)
        (
            "router_id_non_zero",
            with_top("routerId: 0.0.0.0"),
            "routerId: \"0.0.0.0\" is not allowed (must be non-zero, RFC 6286)",
        ),
        (
            "router_id_ipv4",
            with_top("routerId: 2001:db8::1"),
            "routerId: \"2001:db8::1\" is not an IPv4 address",
        ),
        (
            "node_name_dns_subdomain",
            with_top("nodeName: Node_A"),
            "nodeName: \"Node_A\" is not a valid node name (a DNS subdomain: lowercase a-z, 0-9, '-' and '.', up to 253)",
        ),
        // peer identity
        (
            "peers_required",
            "asn: 65001\nallowedPrefixes: [10.0.0.0/8]\n".to_owned(),
            "peers: required (at least one peer)",
        ),
        (
            "peers_non_empty",
            "asn: 65001\nallowedPrefixes: [10.0.0.0/8]\npeers: []\n".to_owned(),
            "peers: must not be empty (at least one peer)",
        ),
        (
            "peer_address_required",
            "asn: 65001\nallowedPrefixes: [10.0.0.0/8]\npeers:\n  - {name: tor1, asn: 65000}\n"
                .to_owned(),
            "peers[0].address: required",
        ),
        (
            "peer_name_non_empty",
            with_peer("name: \"\"").replace("name: tor1, ", ""),
            "peers[0].name: must not be empty",
        ),
        (
            "peer_name_dns_label",
            with_peer("name: Tor_1").replace("name: tor1, ", ""),
            "peers[0].name: \"Tor_1\" is not a valid peer name (1..63 of a-z, 0-9 and '-', starting and ending alphanumeric)",
        ),
        (
            "peer_names_unique",
            TWO_PEERS
                .replace("tor2", "tor1")
                .replace(", holdTime: 2", ""),
            "peers[1].name: \"tor1\" is already used by peers[0]",
        ),
        (
            "peer_duplicates_name_the_first_use",
            format!("{TWO_PEERS}  - {{name: tor1, address: 192.0.2.1, asn: 65000}}\n")
                .replace(", holdTime: 2", ""),
            "peers[2].name: \"tor1\" is already used by peers[0]\n\
             peers[2].address: \"192.0.2.1\" port 179 is already used by peers[0]",
        ),
        (
            "peer_endpoints_unique",
            TWO_PEERS
                .replace("192.0.2.2", "192.0.2.1")
                .replace(", holdTime: 2", ""),
            "peers[1].address: \"192.0.2.1\" port 179 is already used by peers[0]",
        ),
        (
            "peer_address_unicast",
            with_peer("address: 224.0.0.5").replace("address: 192.0.2.1, ", ""),
            "peers[0].address: \"224.0.0.5\" is not allowed (a unicast address)",
        ),
        (
            "peer_address_not_link_local",
            with_peer("address: \"fe80::1\"").replace("address: 192.0.2.1, ", ""),
            "peers[0].address: \"fe80::1\" is not allowed (a link-local peer needs its interface: use interface and peerAddress instead)",
        ),
        // address: default-gateway, asn: auto
        (
            "address_family_only_with_default_gateway",
            with_peer("addressFamily: ipv6"),
            "peers[0].addressFamily: \"ipv6\" is not allowed (only with address: default-gateway; 192.0.2.1 has its own family)",
        ),
        (
            "address_family_spelling",
            with_peer("addressFamily: inet6").replace("192.0.2.1", "default-gateway"),
            "peers[0].addressFamily: \"inet6\" is not one of ipv4, ipv6",
        ),
        (
            "address_neither_ip_nor_default_gateway",
            with_peer("").replace("192.0.2.1", "default-gw"),
            "peers[0].address: \"default-gw\" is not an IP address or default-gateway",
        ),
        (
            "default_gateway_has_no_local_address",
            with_peer("localAddress: 192.0.2.9").replace("192.0.2.1", "default-gateway"),
            "peers[0].localAddress: \"192.0.2.9\" is not allowed (with address: default-gateway the local address is the node's own on the gateway's link, one per gateway)",
        ),
        (
            "default_gateway_once_per_family_and_port",
            TWO_PEERS
                .replace("192.0.2.1", "default-gateway")
                .replace("192.0.2.2", "default-gateway")
                .replace(", holdTime: 2", ""),
            "peers[1].address: \"default-gateway (ipv4)\" port 179 is already used by peers[0]",
        ),
        (
            "asn_number_or_auto",
            with_peer("").replace("asn: 65000", "asn: automatic"),
            "peers[0].asn: \"automatic\" is not an AS number or auto",
        ),
        (
            "asn_auto_needs_allowed_asns",
            with_peer("").replace("asn: 65000", "asn: auto"),
            "peers[0].allowedAsns: required with asn: auto (the AS numbers or ranges a peer may have, e.g. [65000-65100, 64512])",
        ),
        (
            "allowed_asns_only_with_auto",
            with_peer("allowedAsns: [65000]"),
            "peers[0].allowedAsns: only with asn: auto; this peer's asn is 65000",
        ),
        (
            "allowed_asns_not_empty",
            with_peer("allowedAsns: []").replace("asn: 65000", "asn: auto"),
            "peers[0].allowedAsns: must not be empty (an AS number 1..4294967295 or a range like \"65000-65100\")",
        ),
        (
            "allowed_asns_range_ordered",
            with_peer("allowedAsns: [65100-65000]").replace("asn: 65000", "asn: auto"),
            "peers[0].allowedAsns[0]: \"65100-65000\" is an empty range (65100 is above 65000)",
        ),
        (
            "allowed_asns_no_as_zero_rfc7607",
            with_peer("allowedAsns: [\"0-10\"]").replace("asn: 65000", "asn: auto"),
            "peers[0].allowedAsns[0]: \"0-10\" has AS 0, which is reserved (RFC 7607)",
        ),
        (
            "allowed_asns_no_as_trans_rfc6793",
            with_peer("allowedAsns: [23456]").replace("asn: 65000", "asn: auto"),
            "peers[0].allowedAsns[0]: 23456 is not allowed (AS_TRANS is reserved by RFC 6793)",
        ),
        (
            "allowed_asns_not_words",
            with_peer("allowedAsns: [\"65000-x\"]").replace("asn: 65000", "asn: auto"),
            "peers[0].allowedAsns[0]: \"65000-x\" is not an AS number 1..4294967295 or a range like \"65000-65100\"",
        ),
        (
            "port_range",
            with_peer("port: 0"),
            "peers[0].port: 0 is not allowed (1..65535)",
        ),
        (
            "local_address_differs_from_peer",
            with_peer("localAddress: 192.0.2.1"),
            "peers[0].localAddress: \"192.0.2.1\" is not allowed (equals the peer address)",
        ),
        (
            "local_address_same_family",
            with_peer("localAddress: \"2001:db8::10\""),
            "peers[0].localAddress: \"2001:db8::10\" is not allowed (must be of the same family as the peer address 192.0.2.1)",
        ),
        // families
        (
            "families_non_empty",
            with_peer("families: []"),
            "peers[0].families: must not be empty (ipv4-unicast, ipv6-unicast)",
        ),
        (
            "families_unique",
            with_peer("families: [ipv4-unicast, ipv4-unicast]"),
            "peers[0].families[1]: \"ipv4-unicast\" is listed twice",
        ),
        (
            "families_known",
            with_peer("families: [l2vpn-evpn]"),
            "peers[0].families[0]: \"l2vpn-evpn\" is not one of ipv4-unicast, ipv6-unicast",
        ),
        // timers and transport
        (
            "connect_retry_base_at_least_1",
            with_peer("connectRetry: {base: 0}"),
            "peers[0].connectRetry.base: 0 is not allowed (1..3600 seconds)",
        ),
        (
            "connect_retry_max_at_least_base",
            with_peer("connectRetry: {base: 10, max: 5}"),
            "peers[0].connectRetry.max: 5 is not allowed (at least base, 10)",
        ),
        (
            "password_file_non_empty",
            with_peer("passwordFile: \"\""),
            "peers[0].passwordFile: must not be empty",
        ),
        (
            "ttl_security_excludes_multihop",
            with_peer("ttlSecurity: true, ebgpMultihop: 2"),
            "peers[0].ebgpMultihop: 2 is not allowed (ttlSecurity and ebgpMultihop above 1 cannot be combined, as in FRR)",
        ),
        (
            "ebgp_multihop_range",
            with_peer("ebgpMultihop: 0"),
            "peers[0].ebgpMultihop: 0 is not allowed (1..255)",
        ),
        (
            "ebgp_multihop_not_for_ibgp",
            with_ibgp_peer("ebgpMultihop: 2"),
            "peers[0].ebgpMultihop: 2 is not allowed (eBGP only; iBGP sessions always use TTL 255)",
        ),
        (
            "graceful_restart_time_12_bits",
            with_peer("gracefulRestart: {restartTime: 5000}"),
            "peers[0].gracefulRestart.restartTime: 5000 is not allowed (0..4095, a 12-bit field in RFC 4724)",
        ),
        (
            "long_lived_stale_time_24_bits_rfc9494_3",
            with_peer("gracefulRestart: {longLivedStaleTime: 16777216}"),
            "peers[0].gracefulRestart.longLivedStaleTime: 16777216 is not allowed (0..16777215, a 24-bit field in RFC 9494)",
        ),
        (
            "long_lived_stale_time_needs_graceful_restart_rfc9494_3",
            with_peer("gracefulRestart: {enabled: false, longLivedStaleTime: 60}"),
            "peers[0].gracefulRestart.longLivedStaleTime: 60 is not allowed (needs gracefulRestart.enabled: RFC 9494 rides on the graceful restart capability)",
        ),
        // BFD (RFC 5880/5881)
        (
            "bfd_min_tx_below_the_userspace_floor_of_50ms",
            with_peer("bfd: {minTx: 49}"),
            "peers[0].bfd.minTx: 49 is not allowed (50..60000 milliseconds: below 50 ms userspace BFD on a busy node misses its own timers)",
        ),
        (
            "bfd_min_rx_below_the_userspace_floor_of_50ms",
            with_peer("bfd: {minRx: 10}"),
            "peers[0].bfd.minRx: 10 is not allowed (50..60000 milliseconds: below 50 ms userspace BFD on a busy node misses its own timers)",
        ),
        (
            "bfd_min_rx_at_most_a_minute",
            with_peer("bfd: {minRx: 60001}"),
            "peers[0].bfd.minRx: 60001 is not allowed (50..60000 milliseconds: below 50 ms userspace BFD on a busy node misses its own timers)",
        ),
        (
            "bfd_multiplier_nonzero_rfc5880_6_8_6",
            with_peer("bfd: {multiplier: 0}"),
            "peers[0].bfd.multiplier: 0 is not allowed (1..255)",
        ),
        (
            "bfd_multiplier_8_bits",
            with_peer("bfd: {multiplier: 256}"),
            "peers[0].bfd.multiplier: 256 is not allowed (1..255)",
        ),
        (
            "bfd_strict_is_a_boolean",
            with_peer("bfd: {strict: \"yes\"}"),
            "peers[0].bfd.strict: \"yes\" is not a boolean (true or false)",
        ),
        (
            "bfd_unknown_key",
            with_peer("bfd: {minTX: 100}"),
            "peers[0].bfd.minTX: unknown key (did you mean minTx?)",
        ),
        (
            "bfd_single_hop_only_rfc5881",
            with_peer("ebgpMultihop: 2, bfd: {enabled: true}"),
            "peers[0].bfd: single-hop BFD (RFC 5881) cannot be combined with ebgpMultihop 2",
        ),
        (
            "bfd_authentication_type_sha1_only_rfc5880_6_7",
            with_peer("bfd: {authentication: {type: keyed-md5, keyId: 1, secretFile: /k}}"),
            "peers[0].bfd.authentication.type: \"keyed-md5\" is not keyed-sha1 or meticulous-keyed-sha1 (the other RFC 5880 types are not supported)",
        ),
        (
            "bfd_authentication_key_id_8_bits_rfc5880_4_1",
            with_peer("bfd: {authentication: {type: keyed-sha1, keyId: 256, secretFile: /k}}"),
            "peers[0].bfd.authentication.keyId: 256 is not allowed (0..255)",
        ),
        (
            "bfd_authentication_needs_a_secret_file",
            with_peer("bfd: {authentication: {type: keyed-sha1, keyId: 1}}"),
            "peers[0].bfd.authentication.secretFile: required",
        ),
        (
            "bfd_authentication_unknown_key",
            with_peer(
                "bfd: {authentication: {type: keyed-sha1, keyId: 1, secretFile: /k, password: x}}",
            ),
            "peers[0].bfd.authentication.password: unknown key (expected one of type, keyId, secretFile)",
        ),
        // route attributes
        (
            "local_pref_ibgp_only",
            with_peer("localPref: 100"),
            "peers[0].localPref: 100 is not allowed (LOCAL_PREF is iBGP only, and peer asn 65000 differs from local asn 65001)",
        ),
        (
            "med_unsigned",
            with_peer("med: -1"),
            "peers[0].med: -1 is not allowed (0..4294967295)",
        ),
        (
            "med_32_bits",
            with_peer("med: 4294967296"),
            "peers[0].med: 4294967296 is not allowed (0..4294967295)",
        ),
        (
            "as_path_prepend_range",
            with_peer("asPathPrepend: 11"),
            "peers[0].asPathPrepend: 11 is not allowed (0..10)",
        ),
        (
            "as_path_prepend_ebgp_only",
            with_ibgp_peer("asPathPrepend: 2"),
            "peers[0].asPathPrepend: 2 is not allowed (prepending is eBGP only; this peer is iBGP)",
        ),
        (
            "community_halves_16_bit",
            with_peer("communities: [\"65536:1\"]"),
            "peers[0].communities[0]: \"65536:1\" is not a community (A:B with A and B in 0..65535, or no-export, no-advertise, no-export-subconfed, no-llgr)",
        ),
        (
            "llgr_stale_is_never_announced_rfc9494_4_3",
            with_peer("communities: [\"65535:6\"]"),
            "peers[0].communities[0]: \"65535:6\" is LLGR_STALE (RFC 9494), which only a router keeping our route as long-lived stale may add; the speaker never sends it",
        ),
        (
            "community_unique",
            with_peer("communities: [no-export, no-export]"),
            "peers[0].communities[1]: \"no-export\" is listed twice",
        ),
        (
            "large_community_three_parts",
            with_peer("largeCommunities: [\"1:2\"]"),
            "peers[0].largeCommunities[0]: \"1:2\" is not a large community (A:B:C, each in 0..4294967295)",
        ),
        // node selector
        (
            "node_selector_not_in_file_mode",
            file_source("nodeSelector: {matchLabels: {rack: r1}}"),
            "peers[0].nodeSelector: {\"matchLabels\":{\"rack\":\"r1\"}} is not allowed (source.kind file has no Node labels to select on)",
        ),
        (
            "node_selector_operator_known",
            with_peer(
                "nodeSelector: {matchExpressions: [{key: rack, operator: Equals, values: [r1]}]}",
            ),
            "peers[0].nodeSelector.matchExpressions[0].operator: \"Equals\" is not one of In, NotIn, Exists, DoesNotExist",
        ),
        (
            "node_selector_in_needs_values",
            with_peer("nodeSelector: {matchExpressions: [{key: rack, operator: In}]}"),
            "peers[0].nodeSelector.matchExpressions[0].values: required and non-empty for In",
        ),
        (
            "node_selector_exists_takes_no_values",
            with_peer(
                "nodeSelector: {matchExpressions: [{key: rack, operator: Exists, values: [r1]}]}",
            ),
            "peers[0].nodeSelector.matchExpressions[0].values: must be empty for Exists",
        ),
        (
            "node_selector_label_value_string",
            with_peer("nodeSelector: {matchLabels: {rack: 1}}"),
            "peers[0].nodeSelector.matchLabels.rack: 1 is not a string (quote it: \"1\")",
        ),
        (
            "node_selector_label_key_syntax",
            with_peer("nodeSelector: {matchLabels: {\"-rack\": r1}}"),
            "peers[0].nodeSelector.matchLabels[\"-rack\"]: \"-rack\" is not a valid label key ([prefix/]name; name up to 63 of a-z, A-Z, 0-9, '-', '_', '.', starting and ending alphanumeric)",
        ),
        // source and announce guard
        (
            "source_kind_known",
            with_top("source: {kind: crd}"),
            "source.kind: \"crd\" is not one of node-spec, ipam-crd, cilium-node, file",
        ),
        (
            "source_path_required_for_file",
            with_top("source: {kind: file}"),
            "source.path: required when source.kind is file",
        ),
        (
            "source_path_only_for_file",
            with_top("source: {kind: ipam-crd, path: /etc/cidrs.yaml}"),
            "source.path: \"/etc/cidrs.yaml\" is not allowed (only source.kind file reads a path, not ipam-crd)",
        ),
        (
            "allowed_prefixes_required",
            base("asn: 65001", ""),
            "allowedPrefixes: required when source.kind is ipam-crd (the announce guard only announces pod CIDRs inside these)",
        ),
        (
            "allowed_prefixes_non_empty",
            base(
                "asn: 65001\nsource: {kind: node-spec}",
                "allowedPrefixes: []",
            ),
            "allowedPrefixes: must not be empty when source.kind is node-spec (the announce guard only announces pod CIDRs inside these)",
        ),
        (
            "allowed_prefixes_canonical",
            base("asn: 65001", "allowedPrefixes: [10.0.0.1/8]"),
            "allowedPrefixes[0]: \"10.0.0.1/8\" has host bits set (did you mean 10.0.0.0/8?)",
        ),
        (
            "allowed_prefixes_are_cidrs",
            base("asn: 65001", "allowedPrefixes: [10.0.0.0]"),
            "allowedPrefixes[0]: \"10.0.0.0\" is not a CIDR (address/length, e.g. 10.0.0.0/8)",
        ),
        (
            "allowed_prefixes_unique",
            base(
                "asn: 65001",
                "allowedPrefixes: [10.0.0.0/8, \"fd00::/8\", 10.0.0.0/8]",
            ),
            "allowedPrefixes[2]: \"10.0.0.0/8\" is listed twice",
        ),
        (
            "next_hop_family",
            with_top("nextHop: {ipv4: \"2001:db8::1\"}"),
            "nextHop.ipv4: \"2001:db8::1\" is not self, node or an IPv4 address",
        ),
        (
            "next_hop_keyword",
            with_top("nextHop: {ipv6: me}"),
            "nextHop.ipv6: \"me\" is not self, node or an IPv6 address",
        ),
        (
            "next_hop_unicast",
            with_top("nextHop: {ipv4: 0.0.0.0}"),
            "nextHop.ipv4: \"0.0.0.0\" is not allowed (a unicast IPv4 address)",
        ),
        (
            "min_prefix_length_ipv4_in_range",
            with_top("minPrefixLength: {ipv4: 33}"),
            "minPrefixLength.ipv4: 33 is not allowed (1..32)",
        ),
        (
            "min_prefix_length_ipv6_at_least_1",
            with_top("minPrefixLength: {ipv6: 0}"),
            "minPrefixLength.ipv6: 0 is not allowed (1..128)",
        ),
        (
            "min_prefix_length_known_keys",
            with_top("minPrefixLength: {v4: 8}"),
            "minPrefixLength.v4: unknown key (expected one of ipv4, ipv6)",
        ),
        // admin, status, log
        (
            "admin_listen_socket_address",
            with_top("admin: {listen: \"localhost:9180\"}"),
            "admin.listen: \"localhost:9180\" is not a socket address (ip:port, e.g. 127.0.0.1:9180)",
        ),
        (
            "status_min_interval_at_least_1",
            with_top("status: {minInterval: 0}"),
            "status.minInterval: 0 is not allowed (1..3600 seconds)",
        ),
        (
            "log_format_known",
            with_top("log: {format: xml}"),
            "log.format: \"xml\" is not one of text, json",
        ),
        (
            "log_level_known",
            with_top("log: {level: verbose}"),
            "log.level: \"verbose\" is not one of trace, debug, info, warn, error",
        ),
        // next hop (RFC 2545 §3: the global next hop field carries a global address)
        (
            "next_hop_ipv6_not_link_local",
            with_top("nextHop: {ipv6: \"fe80::1\"}"),
            "nextHop.ipv6: \"fe80::1\" is not allowed (a link-local address cannot be the global next hop; use a global or unique local address)",
        ),
        (
            "next_hop_ipv4_not_link_local",
            with_top("nextHop: {ipv4: 169.254.0.1}"),
            "nextHop.ipv4: \"169.254.0.1\" is not allowed (a link-local address cannot be the global next hop; use a global or unique local address)",
        ),
        (
            "admin_metrics_listen_is_a_socket_address",
            with_top("admin: {metricsListen: 9182}"),
            "admin.metricsListen: 9182 is not a socket address (ip:port)",
        ),
        // durations: seconds, or a string with one unit (s, m, h)
        (
            "duration_unknown_unit",
            with_peer("holdTime: 90x"),
            "peers[0].holdTime: \"90x\": unknown unit \"x\" (use s, m or h)",
        ),
        (
            "duration_with_unit_out_of_range",
            with_top("status: {minInterval: 2h}"),
            "status.minInterval: \"2h\" is not allowed (1..3600 seconds)",
        ),
        (
            "duration_hold_time_rule_applies_to_units",
            with_peer("holdTime: 2s"),
            "peers[0].holdTime: 2 is not allowed (0 or 3..65535)",
        ),
        // cni
        (
            "cni_conf_dir_absolute",
            with_top("cni: {enabled: true, confDir: etc/cni/net.d}"),
            "cni.confDir: must be an absolute path",
        ),
        (
            "cni_file_name_is_a_conflist",
            with_top("cni: {fileName: podcidr.conf}"),
            "cni.fileName: \"podcidr.conf\" is not a file name ending in .conflist (no '/', not hidden, e.g. 10-podcidr-bgp.conflist)",
        ),
        (
            "cni_file_name_no_slash",
            with_top("cni: {fileName: ../x.conflist}"),
            "cni.fileName: \"../x.conflist\" is not a file name ending in .conflist (no '/', not hidden, e.g. 10-podcidr-bgp.conflist)",
        ),
        (
            "cni_network_name_spec_1_0",
            with_top("cni: {networkName: -pods}"),
            "cni.networkName: \"-pods\" is not a CNI network name (letters, digits, '_', '.', '-'; starting with a letter or digit)",
        ),
        (
            "cni_plugin_known",
            with_top("cni: {plugin: macvlan}"),
            "cni.plugin: \"macvlan\" is not one of bridge, ptp",
        ),
        (
            "cni_bridge_ifnamsiz",
            with_top("cni: {bridge: podcidr-bridge-0001}"),
            "cni.bridge: \"podcidr-bridge-0001\" is not a Linux interface name (1..15 characters, no '/', ':' or spaces)",
        ),
        (
            "cni_mtu_range",
            with_top("cni: {mtu: 100}"),
            "cni.mtu: 100 is not allowed (576..65535)",
        ),
        (
            "cni_data_dir_absolute",
            with_top("cni: {dataDir: leases}"),
            "cni.dataDir: must be an absolute path",
        ),
        (
            "cni_unknown_key",
            with_top("cni: {enable: true}"),
            "cni.enable: unknown key (did you mean enabled?)",
        ),
        // all errors at once, in schema order
        (
            "all_errors_are_collected",
            format!(
                "{}frobnicate: 1\n",
                with_peer("port: 0, holdTime: 2, med: x")
            ),
            "frobnicate: unknown key\npeers[0].port: 0 is not allowed (1..65535)\npeers[0].holdTime: 2 is not allowed (0 or 3..65535)\npeers[0].med: \"x\" is not a number",
        ),
    ]
}

#[test]
fn invalid_configs_report_exact_errors() {
    let mut failures = Vec::new();
    for (rule, yaml, expected) in table() {
        let got = invalid(&yaml).to_string();
        if got != expected {
            failures.push(format!(
                "{rule}:\n  expected: {expected}\n  got:      {got}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn invalid_table_has_one_row_per_rule() {
    let rows = table();
    assert!(rows.len() >= 30);
    let mut rules: Vec<_> = rows.iter().map(|r| r.0).collect();
    rules.sort_unstable();
    rules.dedup();
    assert_eq!(rules.len(), rows.len(), "duplicate rule names");
}

#[test]
fn every_field_error_names_its_path() {
    for (rule, yaml, _) in table() {
        for error in invalid(&yaml).errors() {
            let line = error.to_string();
            assert!(
                line.contains(": ") && !line.starts_with(": "),
                "{rule}: {line}"
            );
        }
    }
}
