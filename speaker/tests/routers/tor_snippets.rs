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
use integration_tests::gobgp::{Family as GobgpFamily, Gobgp, GobgpConfig};
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

use integration_tests::tor_guide::snippet;

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

/// The GoBGP block: filters as the others, and the graceful-restart helper it exists for:
/// a speaker killed with SIGKILL leaves its routes stale at GoBGP, not withdrawn.
fn run_gobgp(name: &str) {
    let addrs = Addrs::new();
    let text = addrs.apply(&snippet(name));
    let gobgp = Gobgp::start(GobgpConfig::new(addrs.tor, 65000).raw(&text));
    // GoBGP treats a loopback (127/8) next hop as invalid: use a routable one.
    let mut s = speaker(name, &addrs, &text, "\"198.18.0.10\"");
    sent_everything(&s, || gobgp.diagnostics());
    let held = |g: &Gobgp, f: GobgpFamily| -> BTreeSet<IpNet> {
        g.rib(f).into_iter().map(|p| p.prefix).collect()
    };
    let both = |g: &Gobgp| {
        held(g, GobgpFamily::Ipv4) == set(&[ACCEPTED_V4])
            && held(g, GobgpFamily::Ipv6) == set(&[ACCEPTED_V6])
    };
    assert!(
        gobgp.wait_until(T, both),
        "GoBGP with the `{name}` snippet holds {:?} and {:?}\n{}\n{}",
        held(&gobgp, GobgpFamily::Ipv4),
        held(&gobgp, GobgpFamily::Ipv6),
        gobgp.diagnostics(),
        s.proc.log()
    );
    s.proc.signal(libc::SIGKILL);
    s.proc.wait_exit(Duration::from_secs(10)).expect("killed");
    let stale = |g: &Gobgp| {
        [GobgpFamily::Ipv4, GobgpFamily::Ipv6]
            .into_iter()
            .all(|f| g.rib(f).iter().all(|p| p.stale) && !g.rib(f).is_empty())
    };
    assert!(
        gobgp.wait_until(T, stale),
        "GoBGP with the `{name}` snippet keeps a killed speaker's routes stale (graceful-restart helper)\n{}",
        gobgp.diagnostics()
    );
}

#[test]
fn every_tested_block_of_the_tor_guide_is_run_here() {
    integration_tests::require!(Need::Bird, Need::Frr);
    let marked = integration_tests::tor_guide::tested_names(&integration_tests::tor_guide::text());
    let run_here = [
        "bird-per-node",
        "bird-range",
        "bird-range-per-node-as",
        "frr-per-node",
        "frr-range",
        "frr-range-per-node-as",
        "gobgp-per-node",
    ];
    // Blocks that need a real link (namespaces) run in the netns tier, by the named test.
    let run_in_netns = [
        // netns_default_gateway.rs: default_gateway_peers_with_gobgp_dynamic_neighbors
        "gobgp-dynamic-neighbors",
    ];
    assert_eq!(
        marked,
        run_here
            .iter()
            .chain(&run_in_netns)
            .map(|s| (*s).to_owned())
            .collect(),
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

/// GoBGP helps a restarting node only where configured; the guide's first GoBGP block had no
/// `graceful-restart`, so a rolling restart withdrew each node's routes at a GoBGP ToR.
#[test]
fn gobgp_one_neighbor_per_node_helps_a_restart_and_filters_both_families_rfc4724() {
    integration_tests::require!(Need::Bird, Need::Frr, Need::Gobgp);
    run_gobgp("gobgp-per-node");
}
