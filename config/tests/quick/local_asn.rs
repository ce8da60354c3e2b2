//! The per-node local AS: `asn` from a label or annotation, `asnOverrides`, and the peer
//! types derived once a node's AS is known.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use bgp_proto::Asn;
use common::{invalid, valid};
use podcidr_config::{AsnOrigin, LocalAsn, NodeField, NodeMeta, SessionType};

const PEERS: &str = "allowedPrefixes: [10.0.0.0/8]
peers:
  - {name: tor1, address: 192.0.2.1, asn: 65000}
  - {name: rr, address: 192.0.2.2, asn: 65101}
";

fn cfg(top: &str) -> String {
    format!("{top}\n{PEERS}")
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

#[test]
fn asn_accepts_a_number_or_a_node_label_or_annotation_with_default() {
    let cases: &[(&str, LocalAsn)] = &[
        ("asn: 65001", LocalAsn::Fixed(Asn(65001))),
        (
            "asn: {fromNodeLabel: example.com/asn}",
            LocalAsn::FromNode {
                field: NodeField::Label,
                key: "example.com/asn".into(),
                default: None,
            },
        ),
        (
            "asn: {fromNodeAnnotation: bgp/asn, default: 65010}",
            LocalAsn::FromNode {
                field: NodeField::Annotation,
                key: "bgp/asn".into(),
                default: Some(Asn(65010)),
            },
        ),
    ];
    for (top, want) in cases {
        assert_eq!(&valid(&cfg(top)).local_asn, want, "{top}");
    }
}

#[test]
fn bad_asn_forms_are_errors_naming_the_field() {
    let cases: &[(&str, &str)] = &[
        (
            "asn: {}",
            "asn: needs fromNodeLabel or fromNodeAnnotation (or write a number)",
        ),
        (
            "asn: {fromNodeLabel: a, fromNodeAnnotation: b}",
            "asn: fromNodeLabel and fromNodeAnnotation cannot both be set",
        ),
        (
            "asn: {fromNodeLabel: a, default: 23456}",
            "asn.default: 23456 is not allowed (AS_TRANS is reserved by RFC 6793)",
        ),
        (
            "asn: {fromNodeLabel: a, default: 0}",
            "asn.default: 0 is not allowed (1..4294967295 except 23456)",
        ),
        ("asn: {fromLabel: a}", "asn.fromLabel: unknown key"),
        (
            "asn: 65001\nasnOverrides: [{asn: 65002}]",
            "asnOverrides[0].nodeSelector: required",
        ),
        (
            "asn: 65001\nasnOverrides: [{nodeSelector: {matchLabels: {rack: r1}}, asn: 23456}]",
            "asnOverrides[0].asn: 23456 is not allowed (AS_TRANS is reserved by RFC 6793)",
        ),
        (
            "asn: 65001\ngracefulShutdown: {wait: 10m}",
            "gracefulShutdown.wait: \"10m\" is not allowed (0..300 seconds)",
        ),
    ];
    for (top, want) in cases {
        let lines = invalid(&cfg(top)).lines();
        assert!(
            lines.iter().any(|l| l.starts_with(want)),
            "{top}: want {want}, got {lines:?}"
        );
    }
}

#[test]
fn file_source_cannot_read_the_asn_from_a_node() {
    let yaml = "asn: {fromNodeLabel: a}\nsource: {kind: file, path: /x}\npeers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n";
    let lines = invalid(yaml).lines();
    assert!(
        lines.iter().any(|l| l.starts_with("asn: source.kind file")),
        "{lines:?}"
    );
}

#[test]
/// 5 s: with 5 s more for the Cease it fits a system-node-critical pod's usual grace at a
/// node shutdown (kubelet's shutdownGracePeriodCriticalPods, commonly 10 s).
fn graceful_shutdown_defaults_to_5s_and_on_cordon_without_departing_on_cordon_rfc8326() {
    let c = valid(&cfg("asn: 65001"));
    assert_eq!(c.graceful_shutdown.wait, Duration::from_secs(5));
    assert!(c.graceful_shutdown.on_cordon);
    assert!(!c.graceful_shutdown.depart_on_cordon);
    let c = valid(&cfg(
        "asn: 65001\ngracefulShutdown: {wait: 0, onCordon: false, departOnCordon: true}",
    ));
    assert_eq!(c.graceful_shutdown.wait, Duration::ZERO);
    assert!(!c.graceful_shutdown.on_cordon);
    assert!(c.graceful_shutdown.depart_on_cordon);
}

#[test]
fn node_asn_comes_from_first_matching_override_then_label_then_default() {
    let c = valid(&cfg("asn: {fromNodeLabel: example.com/asn, default: 65099}
asnOverrides:
  - {nodeSelector: {matchLabels: {rack: r1}}, asn: 65011}
  - {nodeSelector: {matchLabels: {rack: r1, row: a}}, asn: 65012}"));
    let empty = BTreeMap::new();
    type Case<'a> = (&'a [(&'a str, &'a str)], u32, AsnOrigin);
    let cases: &[Case<'_>] = &[
        (
            &[("rack", "r1"), ("row", "a"), ("example.com/asn", "65077")],
            65011,
            AsnOrigin::Override(0),
        ),
        (
            &[("example.com/asn", "65077")],
            65077,
            AsnOrigin::Node(NodeField::Label, "example.com/asn".into()),
        ),
        (
            &[],
            65099,
            AsnOrigin::Default(NodeField::Label, "example.com/asn".into()),
        ),
    ];
    for (labels, asn, origin) in cases {
        let labels = map(labels);
        let r = c
            .resolve_asn(NodeMeta {
                labels: &labels,
                annotations: &empty,
            })
            .unwrap();
        assert_eq!((r.asn, &r.origin), (Asn(*asn), origin), "{labels:?}");
    }
}

#[test]
fn node_label_without_default_or_with_bad_value_is_an_error_naming_label_and_value() {
    let c = valid(&cfg("asn: {fromNodeLabel: example.com/asn}"));
    let empty = BTreeMap::new();
    let cases: &[(&str, &str, &str)] = &[
        (
            "",
            "LocalASNMissing",
            "label \"example.com/asn\": not set on this node (and asn.default is not set)",
        ),
        (
            "abc",
            "LocalASNInvalid",
            "label \"example.com/asn\": \"abc\" is not an AS number (1..4294967295 except 23456)",
        ),
        (
            "0",
            "LocalASNInvalid",
            "label \"example.com/asn\": \"0\" is not an AS number (1..4294967295 except 23456)",
        ),
        (
            "4294967296",
            "LocalASNInvalid",
            "label \"example.com/asn\": \"4294967296\" is not an AS number (1..4294967295 except 23456)",
        ),
        (
            "23456",
            "LocalASNInvalid",
            "label \"example.com/asn\": \"23456\" is not allowed (AS_TRANS 23456 is reserved by RFC 6793)",
        ),
        (
            "-1",
            "LocalASNInvalid",
            "label \"example.com/asn\": \"-1\" is not an AS number (1..4294967295 except 23456)",
        ),
    ];
    for (value, reason, message) in cases {
        let labels = if value.is_empty() {
            map(&[("other", "x")])
        } else {
            map(&[("example.com/asn", value)])
        };
        let e = c
            .resolve_for_node(NodeMeta {
                labels: &labels,
                annotations: &empty,
            })
            .unwrap_err();
        assert_eq!(
            (e.reason, e.message.as_str()),
            (*reason, *message),
            "{value}"
        );
    }
}

#[test]
fn reserved_ranges_are_warned_not_refused_rfc5398_rfc7300() {
    let c = valid(&cfg("asn: {fromNodeAnnotation: bgp/asn}"));
    let empty = BTreeMap::new();
    for (value, warned) in [
        ("64500", true),
        ("65535", true),
        ("65001", false),
        ("4200000001", false),
    ] {
        let ann = map(&[("bgp/asn", value)]);
        let r = c
            .resolve_asn(NodeMeta {
                labels: &empty,
                annotations: &ann,
            })
            .unwrap();
        assert_eq!(r.warning().is_some(), warned, "{value}");
    }
}

#[test]
fn peer_type_is_ibgp_when_peer_asn_equals_the_node_asn_rfc4271_5_1_3() {
    let c = valid(&cfg("asn: {fromNodeLabel: example.com/asn}"));
    let empty = BTreeMap::new();
    for (node_asn, tor1, rr) in [
        ("65000", SessionType::Internal, SessionType::External),
        ("65101", SessionType::External, SessionType::Internal),
        ("65200", SessionType::External, SessionType::External),
    ] {
        let labels = map(&[("example.com/asn", node_asn)]);
        let (node, resolved) = c
            .resolve_for_node(NodeMeta {
                labels: &labels,
                annotations: &empty,
            })
            .unwrap();
        assert_eq!(node.asn.0.to_string(), node_asn);
        assert_eq!(resolved.asn, node.asn);
        let types: Vec<_> = node.peers.iter().map(|p| p.session_type).collect();
        assert_eq!(types, [Some(tor1), Some(rr)], "node AS {node_asn}");
        for p in &node.peers {
            assert_eq!(p.ebgp_multihop.is_none(), p.is_ibgp(), "{}", p.name);
        }
    }
}

#[test]
fn prepend_or_multihop_on_a_peer_that_turns_out_ibgp_is_an_error_on_that_node() {
    let yaml = "asn: {fromNodeLabel: example.com/asn}
allowedPrefixes: [10.0.0.0/8]
peers:
  - {name: tor, address: 192.0.2.1, asn: 65000, asPathPrepend: 2, ebgpMultihop: 3}
";
    let c = valid(yaml);
    let empty = BTreeMap::new();
    let ebgp = map(&[("example.com/asn", "65001")]);
    let (node, _) = c
        .resolve_for_node(NodeMeta {
            labels: &ebgp,
            annotations: &empty,
        })
        .unwrap();
    assert_eq!(node.peers[0].ebgp_multihop, Some(3));
    let ibgp = map(&[("example.com/asn", "65000")]);
    let e = c
        .resolve_for_node(NodeMeta {
            labels: &ibgp,
            annotations: &empty,
        })
        .unwrap_err();
    assert_eq!(e.reason, "PeerTypeConflict");
    assert_eq!(
        e.message,
        "peers[0] (tor).ebgpMultihop: 3 is eBGP only; with local AS 65000 from label example.com/asn this peer is iBGP (TTL 255); \
         peers[0] (tor).asPathPrepend: prepending is eBGP only; with local AS 65000 from label example.com/asn this peer is iBGP"
    );
}

#[test]
fn local_pref_on_a_peer_that_turns_out_ebgp_is_an_error_on_that_node() {
    let yaml = "asn: {fromNodeLabel: example.com/asn}
allowedPrefixes: [10.0.0.0/8]
peers:
  - {name: rr, address: 192.0.2.2, asn: 65101, localPref: 200}
";
    let c = valid(yaml);
    let empty = BTreeMap::new();
    let ok = map(&[("example.com/asn", "65101")]);
    let node = NodeMeta {
        labels: &ok,
        annotations: &empty,
    };
    assert!(c.resolve_for_node(node).is_ok());
    let other = map(&[("example.com/asn", "65102")]);
    let e = c
        .resolve_for_node(NodeMeta {
            labels: &other,
            annotations: &empty,
        })
        .unwrap_err();
    assert_eq!(e.reason, "PeerTypeConflict");
    assert!(
        e.message
            .starts_with("peers[0] (rr).localPref: 200 is iBGP only; with local AS 65102 from label example.com/asn"),
        "{e}"
    );
}
