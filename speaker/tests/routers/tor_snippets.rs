//! The router configurations of docs/tor.md marked `<!-- tested: NAME -->` run as written
//! against `podcidr-bgp speaker`: BIRD 2 and FRR's bgpd on loopback, only the documentation
//! addresses moved (ToR 192.0.2.1, node 192.0.2.10, rack 192.0.2.0/24 → 127.x addresses),
//! plus `multihop` and `strict bind` for BIRD (`lo` is never directly connected for BIRD, and
//! several routers share port 179 here).
//! Each must accept exactly the pod CIDRs of both families and refuse a prefix its filter
//! excludes (a /25 and a /80 inside the pools), with MD5 and GTSM on where the snippet has
//! them.

use crate::common;
use integration_tests::skip::Need;

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use common::TempDir;
use common::speaker::{Peer, Speaker};
use integration_tests::frr::Frr;
use integration_tests::{Bird, BirdConfig, RouteQuery, net};
use ipnet::IpNet;

const T: Duration = Duration::from_secs(30);

/// What the speaker announces: two prefixes the snippets' filters accept, two they refuse.
const ANNOUNCED: &[&str] = &[
    "10.5.113.0/24",
    "fd00:5:0:7::/64",
    "10.5.114.0/25",
    "fd00:5:0:8::/80",
];
const ACCEPTED_V4: &str = "10.5.113.0/24";
const ACCEPTED_V6: &str = "fd00:5:0:7::/64";

/// The fenced block after `<!-- tested: NAME -->` in docs/tor.md.
fn snippet(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tor.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let marker = format!("<!-- tested: {name} -->");
    let after = doc
        .split_once(&marker)
        .unwrap_or_else(|| panic!("docs/tor.md has no {marker}"))
        .1;
    let body = after
        .trim_start()
        .strip_prefix("```")
        .and_then(|s| s.split_once('\n'))
        .unwrap_or_else(|| panic!("{marker} is not followed by a fenced block"))
        .1;
    body.split_once("\n```")
        .unwrap_or_else(|| panic!("{marker}: unterminated block"))
        .0
        .to_owned()
}

/// Loopback addresses standing in for the documentation ones.
struct Addrs {
    tor: Ipv4Addr,
    node: Ipv4Addr,
}

impl Addrs {
    fn new() -> Addrs {
        Addrs {
            tor: net::alloc_v4(),
            node: net::alloc_v4(),
        }
    }

    /// The snippet with its addresses moved; the node's /24 stands in for the rack.
    fn apply(&self, text: &str) -> String {
        let [a, b, c, _] = self.node.octets();
        text.replace("192.0.2.10", &self.node.to_string())
            .replace("192.0.2.0/24", &format!("{a}.{b}.{c}.0/24"))
            .replace("192.0.2.1", &self.tor.to_string())
    }
}

fn set(v: &[&str]) -> BTreeSet<IpNet> {
    v.iter().map(|s| s.parse().unwrap()).collect()
}

/// Starts a speaker peering with `tor:179` from `node`, with MD5 when the snippet has a
/// password and GTSM when it has TTL security.
fn speaker(tag: &str, addrs: &Addrs, snippet: &str, ipv4_next_hop: &str) -> Speaker {
    let dir = TempDir::new(tag);
    let mut extra = String::new();
    if snippet.contains("change-me") {
        let key = dir.path("tor.key");
        std::fs::write(&key, "change-me").unwrap();
        extra.push_str(&format!("    passwordFile: {}\n", key.display()));
    }
    if snippet.contains("ttl security on") || snippet.contains("ttl-security hops 1") {
        extra.push_str("    ttlSecurity: true\n");
    }
    let top = format!(
        "allowedPrefixes: [10.5.112.0/21, \"fd00:5::/48\"]\n\
         nextHop: {{ipv4: {ipv4_next_hop}, ipv6: \"2001:db8::10\"}}\n"
    );
    let peer = Peer {
        name: "tor",
        address: IpAddr::V4(addrs.tor),
        port: 179,
        asn: 65000,
        local: IpAddr::V4(addrs.node),
        extra,
    };
    Speaker::start(dir, ANNOUNCED, &top, &[peer], &[])
}

/// The speaker sent all four prefixes (so the router saw the ones it must refuse); else
/// panics with the router's side of the story.
fn sent_everything(s: &Speaker, router: impl FnOnce() -> String) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sent = rt.block_on(common::poll(T, || async {
        let v = s.peers().await?;
        let p = v["peers"].as_array()?.iter().find(|p| p["name"] == "tor")?;
        let n: u64 = p["prefixesSent"]
            .as_object()?
            .values()
            .filter_map(serde_json::Value::as_u64)
            .sum();
        (p["state"] == "Established" && n == 4).then_some(())
    }));
    assert!(
        sent.is_some(),
        "the speaker never sent all four prefixes\n{}\n{}\n{:?}",
        router(),
        s.proc.log(),
        rt.block_on(s.peers())
    );
}

fn run_bird(name: &str) {
    let addrs = Addrs::new();
    // Loopback adaptations: BIRD never treats `lo` as a directly connected interface (a
    // direct eBGP neighbor on 127.x is "invalid" without `multihop`), and several routers
    // share this host's port 179 (`strict bind`: listen on the own address only).
    let text = addrs.apply(&snippet(name)).replace(
        " as 65000;\n",
        " as 65000;\n  multihop;\n  strict bind on;\n",
    );
    let bird = Bird::start(BirdConfig::new(addrs.tor, 65000).extra(&text));
    let s = speaker(name, &addrs, &text, "self");
    sent_everything(&s, || format!("{}\n{}", bird.diagnostics(), bird.log()));
    let want = set(&[ACCEPTED_V4, ACCEPTED_V6]);
    let got = || -> BTreeSet<IpNet> {
        bird.routes(&RouteQuery::all())
            .into_iter()
            .map(|r| r.prefix)
            .collect()
    };
    assert!(
        bird.wait_until(T, |_| got() == want),
        "BIRD with the `{name}` snippet holds {:?}, want {want:?}\n{}\n{}",
        got(),
        bird.diagnostics(),
        s.proc.log()
    );
}

fn run_frr(name: &str) {
    let addrs = Addrs::new();
    let text = addrs.apply(&snippet(name));
    let frr = Frr::start(&text, IpAddr::V4(addrs.tor));
    // FRR drops routes whose next hop is a martian (127/8): use a routable one.
    let s = speaker(name, &addrs, &text, "\"198.18.0.10\"");
    sent_everything(&s, || frr.diagnostics());
    let done = frr.wait_until(T, |f| {
        f.prefixes("ipv4") == set(&[ACCEPTED_V4]) && f.prefixes("ipv6") == set(&[ACCEPTED_V6])
    });
    assert!(
        done,
        "FRR with the `{name}` snippet holds {:?} and {:?}\n{}\n{}",
        frr.prefixes("ipv4"),
        frr.prefixes("ipv6"),
        frr.diagnostics(),
        s.proc.log()
    );
}

#[test]
fn every_tested_block_of_the_tor_guide_is_run_here() {
    integration_tests::require!(Need::Bird, Need::Frr);
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tor.md")).unwrap();
    let marked: BTreeSet<&str> = doc
        .match_indices("<!-- tested: ")
        .filter_map(|(i, m)| doc[i + m.len()..].split_once(" -->").map(|(n, _)| n))
        .collect();
    assert_eq!(
        marked,
        [
            "bird-per-node",
            "bird-range",
            "bird-range-per-node-as",
            "frr-per-node",
            "frr-range",
            "frr-range-per-node-as",
        ]
        .into(),
        "a block marked tested needs a test below"
    );
}

#[test]
fn bird_one_neighbor_per_node_with_md5_and_gtsm_accepts_both_families() {
    integration_tests::require!(Need::Bird, Need::Frr);
    run_bird("bird-per-node");
}

#[test]
fn bird_neighbor_range_with_md5_and_gtsm_accepts_a_node_of_the_rack() {
    integration_tests::require!(Need::Bird, Need::Frr);
    run_bird("bird-range");
}

/// FRR's `ebgp-requires-policy` discards an eBGP family without an inbound policy: the
/// guide's first FRR snippet had none for IPv6, so IPv6 routes were silently dropped.
#[test]
fn frr_one_neighbor_per_node_accepts_ipv6_under_ebgp_requires_policy() {
    integration_tests::require!(Need::Bird, Need::Frr);
    run_frr("frr-per-node");
}

#[test]
fn frr_listen_range_with_md5_and_gtsm_accepts_a_node_of_the_rack() {
    integration_tests::require!(Need::Bird, Need::Frr);
    run_frr("frr-range");
}

/// Nodes with an AS each: the range takes any external AS, with an import limit.
#[test]
fn bird_neighbor_range_external_with_import_limit_accepts_a_node_with_its_own_as() {
    integration_tests::require!(Need::Bird, Need::Frr);
    run_bird("bird-range-per-node-as");
}

/// `remote-as external`, an explicit outbound deny and maximum-prefix, both families.
#[test]
fn frr_listen_range_remote_as_external_with_outbound_deny_accepts_a_node_with_its_own_as() {
    integration_tests::require!(Need::Bird, Need::Frr);
    run_frr("frr-range-per-node-as");
}
