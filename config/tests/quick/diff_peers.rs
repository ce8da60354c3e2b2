//! Reload: which peers to add, remove, reset or update in place.

use crate::common;

use common::valid;
use podcidr_config::{Config, PeerChanges, diff_peers};

fn config(peers: &[&str], top: &str) -> Config {
    let mut yaml = format!("asn: 65001\nallowedPrefixes: [10.0.0.0/8]\n{top}peers:\n");
    for peer in peers {
        yaml.push_str(&format!("  - {{{peer}}}\n"));
    }
    valid(&yaml)
}

const TOR1: &str = "name: tor1, address: 192.0.2.1, asn: 65000";
const TOR2: &str = "name: tor2, address: 192.0.2.2, asn: 65000";

fn names(list: &[String]) -> Vec<&str> {
    list.iter().map(String::as_str).collect()
}

#[test]
fn identical_configs_have_no_changes() {
    let a = config(&[TOR1, TOR2], "");
    let changes = diff_peers(&a, &a.clone());
    assert!(changes.is_empty());
    assert_eq!(names(&changes.unchanged), ["tor1", "tor2"]);
}

#[test]
fn peers_are_keyed_by_name() {
    let old = config(&[TOR1, TOR2], "");
    let new = config(&[TOR2, "name: tor3, address: 192.0.2.3, asn: 65000"], "");
    let changes = diff_peers(&old, &new);
    assert_eq!(names(&changes.added), ["tor3"]);
    assert_eq!(names(&changes.removed), ["tor1"]);
    assert_eq!(names(&changes.unchanged), ["tor2"]);
    assert!(changes.changed.is_empty());
}

#[test]
fn session_settings_reset_only_that_peer() {
    let old = config(&[TOR1, TOR2], "");
    for setting in [
        "holdTime: 30",
        "port: 1179",
        "families: [ipv4-unicast]",
        "passwordFile: /etc/key",
        "ttlSecurity: true",
        "ebgpMultihop: 2",
        "gracefulRestart: {enabled: false}",
        "passive: true",
        "localAddress: 192.0.2.10",
    ] {
        let new = config(&[&format!("{TOR1}, {setting}"), TOR2], "");
        let changes = diff_peers(&old, &new);
        assert_eq!(names(&changes.changed), ["tor1"], "{setting}");
        assert_eq!(names(&changes.unchanged), ["tor2"], "{setting}");
    }
}

#[test]
fn route_attributes_update_without_reset() {
    let old = config(&[TOR1], "");
    for setting in [
        "communities: [no-export]",
        "largeCommunities: [\"1:2:3\"]",
        "med: 5",
        "asPathPrepend: 1",
        "connectRetry: {base: 2}",
        "nodeSelector: {matchLabels: {rack: r1}}",
    ] {
        let new = config(&[&format!("{TOR1}, {setting}")], "");
        let changes = diff_peers(&old, &new);
        assert_eq!(names(&changes.updated), ["tor1"], "{setting}");
        assert!(changes.changed.is_empty(), "{setting}");
    }
}

/// RFC 5880 §6.8.3: BFD timers change while Up with a Poll Sequence, so no BGP reset; BFD
/// on or off runs beside the session and resets nothing either.
#[test]
fn bfd_changes_update_without_reset_rfc5880_6_8_3() {
    let with = |b: &str| config(&[&format!("{TOR1}, bfd: {b}"), TOR2], "");
    let rows = [
        (with("{minTx: 100}"), with("{minTx: 300}")),
        (with("{minRx: 100}"), with("{minRx: 200}")),
        (with("{multiplier: 3}"), with("{multiplier: 5}")),
        (config(&[TOR1, TOR2], ""), with("{}")),
        (with("{}"), config(&[TOR1, TOR2], "")),
    ];
    for (old, new) in rows {
        let changes = diff_peers(&old, &new);
        assert_eq!(names(&changes.updated), ["tor1"], "{:?}", new.peers[0].bfd);
        assert!(changes.changed.is_empty(), "{:?}", new.peers[0].bfd);
        assert_eq!(names(&changes.unchanged), ["tor2"]);
    }
}

#[test]
fn families_reordered_is_no_change() {
    let fam = |f: &str| config(&[&format!("{TOR1}, families: [{f}]")], "");
    let changes = diff_peers(
        &fam("ipv4-unicast, ipv6-unicast"),
        &fam("ipv6-unicast, ipv4-unicast"),
    );
    assert!(changes.changed.is_empty());
    let changes = diff_peers(&fam("ipv4-unicast, ipv6-unicast"), &fam("ipv4-unicast"));
    assert_eq!(names(&changes.changed), ["tor1"]);
}

#[test]
fn peer_address_change_under_same_name_is_a_reset() {
    let old = config(&[TOR1], "");
    let new = config(&["name: tor1, address: 192.0.2.9, asn: 65000"], "");
    assert_eq!(names(&diff_peers(&old, &new).changed), ["tor1"]);
}

#[test]
fn local_asn_or_router_id_change_resets_every_peer() {
    let old = config(&[TOR1, TOR2], "");
    let new = config(&[TOR1, TOR2], "routerId: 192.0.2.10\n");
    let changes = diff_peers(&old, &new);
    assert!(changes.settings.identity);
    assert_eq!(names(&changes.changed), ["tor1", "tor2"]);
}

#[test]
fn non_peer_settings_are_reported() {
    let old = config(&[TOR1], "");
    let new = valid(
        "asn: 65001\nallowedPrefixes: [10.0.0.0/16]\nsource: {kind: node-spec}\n\
         nextHop: {ipv4: node}\nlog: {level: debug}\npeers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000}\n",
    );
    let PeerChanges {
        settings,
        unchanged,
        ..
    } = diff_peers(&old, &new);
    assert!(settings.source && settings.allowed_prefixes && settings.next_hop && settings.log);
    assert!(settings.routes_affected());
    assert!(!settings.identity && !settings.admin && !settings.status && !settings.node_name);
    assert!(!settings.cni);
    assert_eq!(names(&unchanged), ["tor1"]);
}

#[test]
fn a_cni_change_is_a_setting_that_resets_no_peer() {
    let old = config(&[TOR1], "");
    let new = config(&[TOR1], "cni: {enabled: true}\n");
    let changes = diff_peers(&old, &new);
    assert!(changes.settings.cni && changes.settings.any());
    assert!(!changes.settings.routes_affected());
    assert_eq!(names(&changes.unchanged), ["tor1"]);
}
