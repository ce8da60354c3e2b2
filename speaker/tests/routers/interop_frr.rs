//! FRR's bgpd (Debian's) as the router, for what FRR does and our other daemons do not: RFC
//! 8538, graceful restart with NOTIFICATION support (the N bit; BIRD 2 and GoBGP as run here do
//! not advertise it, and their tests show the RFC 4724 close). On loopback, FRR standalone
//! (`integration_tests::frr`).

use crate::common;
use integration_tests::skip::Need;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use common::TempDir;
use common::speaker::{Peer, Speaker};
use integration_tests::frr::Frr;
use integration_tests::net;
use ipnet::IpNet;

const T: Duration = Duration::from_secs(30);
const OUR_ASN: u32 = 4_200_000_001;
const ROUTE: &str = "10.5.113.0/24";
/// FRR's restart timer for our routes: longer than every wait below, so a route gone within
/// them was withdrawn, not aged out.
const RESTART_TIME: u32 = 120;

fn frr(tor: Ipv4Addr, node: Ipv4Addr) -> Frr {
    let config = format!(
        "router bgp 65000\n bgp router-id {tor}\n no bgp ebgp-requires-policy\n bgp graceful-restart\n \
         bgp log-neighbor-changes\n neighbor {node} remote-as {OUR_ASN}\n neighbor {node} ebgp-multihop 2\n \
         neighbor {node} password change-me\n \
         address-family ipv4 unicast\n  neighbor {node} activate\n exit-address-family\n"
    );
    Frr::start(&config, IpAddr::V4(tor))
}

fn speaker(tor: Ipv4Addr, node: Ipv4Addr) -> Speaker {
    let dir = TempDir::new("interop-frr");
    std::fs::write(dir.path("good.key"), "change-me").unwrap();
    std::fs::write(dir.path("wrong.key"), "not-the-key").unwrap();
    let key = dir.path("good.key");
    let peer = Peer {
        name: "tor",
        address: IpAddr::V4(tor),
        port: 179,
        asn: 65000,
        local: IpAddr::V4(node),
        extra: format!(
            "    passwordFile: {}\n    gracefulRestart: {{enabled: true, restartTime: {RESTART_TIME}}}\n",
            key.display()
        ),
    };
    // FRR drops routes whose next hop is a martian (127/8).
    let top = "allowedPrefixes: [10.5.112.0/21]\nnextHop: {ipv4: \"198.18.0.10\"}\n";
    Speaker::start(dir, &[ROUTE], top, &[peer], &[])
}

fn has_route(frr: &Frr) -> bool {
    let want: IpNet = ROUTE.parse().unwrap();
    frr.prefixes("ipv4").contains(&want)
}

/// Whether FRR holds the route as stale (kept for a graceful restart, RFC 4724 §4.2).
fn stale(frr: &Frr) -> bool {
    frr.json(&format!("show bgp ipv4 unicast {ROUTE} json"))
        .ok()
        .and_then(|v| v["paths"].as_array().cloned())
        .into_iter()
        .flatten()
        .any(|p| p["stale"] == true)
}

/// Issue 30 item 3 with RFC 8538 against FRR, which advertises the N bit: a settings reset
/// sends Cease/Other Configuration Change, and FRR keeps the node's route as stale while the
/// new session cannot come up (here: a wrong MD5 key), as a graceful restart; the right key
/// brings it back; removing the peer is a Hard Reset carrying Peer De-configured, and FRR
/// withdraws at once, long before its restart timer.
#[test]
fn with_the_n_bit_a_reset_keeps_the_route_stale_and_a_removal_withdraws_it_rfc8538() {
    integration_tests::require!(Need::Frr);
    let (tor, node) = (net::alloc_v4(), net::alloc_v4());
    let mut frr = frr(tor, node);
    let s = speaker(tor, node);
    assert!(
        frr.wait_until(T, |f| has_route(f) && f.established() == 1),
        "FRR never learned {ROUTE}\n{}\n{}",
        frr.diagnostics(),
        s.proc.log()
    );
    let config = |s: &Speaker| std::fs::read_to_string(s.dir.path("config.yaml")).unwrap();
    let good = config(&s);
    let reload = |s: &Speaker, text: &str| {
        std::fs::write(s.dir.path("config.yaml"), text).unwrap();
        s.proc.signal(libc::SIGHUP);
    };

    // A new key resets the session, and the new session cannot come up.
    reload(&s, &good.replace("good.key", "wrong.key"));
    let mut never_dropped = true;
    let kept = frr.wait_until(T, |f| {
        never_dropped &= has_route(f);
        stale(f)
    });
    assert!(
        kept && never_dropped,
        "FRR did not keep the route as stale through the reset\n{}\n{}",
        frr.diagnostics(),
        s.proc.log()
    );
    assert!(
        s.proc.log().contains(
            "NOTIFICATION sent peer=\"tor\" notification=Cease/Other Configuration Change"
        ),
        "{}",
        s.proc.log()
    );

    // The right key: the session is back and the route fresh.
    reload(&s, &good);
    assert!(
        frr.wait_until(T, |f| f.established() == 1 && has_route(f) && !stale(f)),
        "{}\n{}",
        frr.diagnostics(),
        s.proc.log()
    );

    // The peer removed from the config (another, which never answers, takes its place: a
    // config has at least one peer): a Hard Reset, and FRR withdraws at once.
    let nobody = net::alloc_v4();
    let removed = good
        .replace("  - name: tor\n", "  - name: elsewhere\n")
        .replace(
            &format!("    address: {tor}\n"),
            &format!("    address: {nobody}\n"),
        );
    assert_ne!(removed, good);
    reload(&s, &removed);
    assert!(
        frr.wait_until(T, |f| !has_route(f)),
        "FRR kept the route after the peer was removed\n{}\n{}",
        frr.diagnostics(),
        s.proc.log()
    );
    // FRR's own words: the Hard Reset, and inside it Peer De-configured (6/3). (A Hard Reset
    // carrying only a subcode, as this speaker first sent it, aborts FRR 8.4's bgpd.)
    assert!(
        frr.wait_until(T, |f| f
            .log()
            .contains("%NOTIFICATION(Hard Reset): received from neighbor")
            && f.log().contains(" 6/3 (Cease/Peer De-configured)")),
        "{}",
        frr.log()
    );
    assert!(frr.is_running(), "bgpd stopped\n{}", frr.log());
}
