//! BFD from the right place only, against BIRD 2 in namespaces the test creates: a process
//! on the node (and a pod behind a veth) forging the ToR's address cannot take the session
//! down (RFC 5881 §5: TTL 255 through the peer's interface, checked before queueing), and
//! BFD authentication (RFC 5880 §6.7.4) comes Up with BIRD with each SHA1 type and not with
//! a wrong key. Skipped with a message where namespaces or BIRD are not available.

use crate::common;
use integration_tests::skip::Need;

use std::time::Duration;

use integration_tests::bfd_topology::{BfdTopology, BfdTopologyOptions};
use integration_tests::netns::{Netns, in_ns, link, sysctl};

const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

/// Node and ToR with BFD 100 ms × 3, the speaker's config edited by `edit` and the ToR's by
/// `tor` before the speaker starts; returns once BGP is Established at the ToR.
fn topology(
    case: u32,
    edit: impl FnOnce(String) -> String,
    tor: impl FnOnce(&BfdTopology),
) -> Option<BfdTopology> {
    let tag = format!("pcbfa{}{case}", std::process::id() % 100_000);
    integration_tests::require!(Need::Netns, Need::Bird, Need::Bin("python3"));
    let opts = BfdTopologyOptions::bfd_100ms_x3();
    let mut t = BfdTopology::new(&tag, common::BIN.as_ref(), &opts);
    t.edit_speaker_config(edit);
    tor(&t);
    t.start_speaker();
    let up = t.poll_until(POLL, WAIT, |t| t.tor_bgp_established());
    assert!(up.is_some(), "BGP not up\n{}", t.diagnostics());
    Some(t)
}

/// The ToR's "Since" column for the node, of `show bfd sessions` or `show protocols node1`.
fn since(t: &BfdTopology, cmd: &str, key: &str) -> Option<String> {
    let out = t.birdc(cmd);
    let line = out.lines().find(|l| l.contains(key))?;
    line.split_whitespace().nth(3).map(str::to_owned)
}

/// Learns our discriminator from one of our own packets (AF_PACKET on eth0, as a process
/// with NET_RAW on the node can), then sends, with TTL 255 from the ToR's address: a Down
/// with Your Discriminator 0, a Down with ours, and `count` more Downs as a flood. Prints
/// our discriminator. Args: spoofed source, our address, count, [discriminator].
const SPOOFER: &str = r#"
import socket, struct, sys, time
src, dst, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
disc = int(sys.argv[4]) if len(sys.argv) > 4 else None
if disc is None:
    # ETH_P_ALL: a protocol-specific packet socket does not see outgoing frames.
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind(("eth0", 0))
    s.settimeout(5)
    end = time.time() + 5
    while disc is None and time.time() < end:
        f = s.recv(2048)
        ip = f[14:]
        ihl = (ip[0] & 15) * 4
        udp = ip[ihl:]
        if f[12:14] == b"\x08\x00" and ip[9] == 17 and socket.inet_ntoa(ip[12:16]) == dst \
                and udp[2:4] == b"\x0e\xc8":
            disc = struct.unpack(">I", udp[12:16])[0]
r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
def down(yd):
    # version 1 diag 3, state Down, mult 3, length 24, discriminators, 1 s intervals
    bfd = struct.pack(">BBBBIIIII", 0x23, 0x40, 3, 24, 0x5EED, yd, 10**6, 10**6, 0)
    udp = struct.pack(">HHHH", 49999, 3784, 8 + len(bfd), 0) + bfd
    hdr = struct.pack(">BBHHHBBH4s4s", 0x45, 0xC0, 20 + len(udp), 0, 0, 255, 17, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    return hdr + udp
for yd in [0] + [disc] * (count + 1):
    r.sendto(down(yd), (dst, 0))
print(disc)
"#;

/// Runs [`SPOOFER`] in `ns`; our discriminator.
fn spoof(ns: &str, count: u32, disc: Option<u32>) -> u32 {
    let count = count.to_string();
    let disc = disc.map(|d| d.to_string());
    let mut args = vec![
        "python3",
        "-c",
        SPOOFER,
        "198.18.1.1",
        "198.18.1.2",
        count.as_str(),
    ];
    args.extend(disc.as_deref());
    let out = in_ns(ns, &args);
    assert!(
        out.status.success(),
        "spoofer: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let disc: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_ne!(disc, 0);
    disc
}

/// `podcidr_bgp_bfd_packets_dropped_total{reason}` as the speaker exports it.
fn dropped(t: &BfdTopology, reason: &str) -> u64 {
    let want = format!("podcidr_bgp_bfd_packets_dropped_total{{reason=\"{reason}\"}} ");
    t.metrics()
        .lines()
        .find_map(|l| l.strip_prefix(want.as_str())?.trim().parse().ok())
        .unwrap_or(0)
}

/// The review's attack: a pod with NET_RAW, or any process on the node, sends Downs from
/// the ToR's address. Locally they arrive through the loopback with TTL 255 and skip
/// rp_filter; from a pod, through its veth with rp_filter loose. Both are dropped before
/// the session's queue: BFD and BGP stay Up at the ToR, the routes stay.
#[test]
fn forged_bfd_from_the_node_or_a_pod_does_not_reset_the_session_rfc5881_5() {
    let t = integration_tests::needs!(topology(1, |c| c, |_| {}));
    let bfd_up = t.poll_until(POLL, WAIT, |t| t.tor_bfd_up() && t.tor_has_route());
    assert!(bfd_up.is_some(), "{}", t.diagnostics());
    let before = (
        since(&t, "show bfd sessions", "198.18.1.2"),
        since(&t, "show protocols node1", "node1"),
    );
    // A process in the node's namespace: YD 0, YD ours, and a flood of 5000.
    const FLOOD: u32 = 5000;
    let disc = spoof(&t.node, FLOOD, None);
    let counted = t.poll_until(POLL, WAIT, |t| dropped(t, "kernel") >= u64::from(FLOOD) + 2);
    assert!(counted.is_some(), "{}\n{}", t.metrics(), t.log());
    // A pod behind a veth on the node, rp_filter loose (2).
    let mut ns = Netns::default();
    let pod = format!("{}-pod", t.node);
    ns.add(&pod);
    link(&t.node, "veth-pod", &pod, "eth0", "198.18.9");
    sysctl(&t.node, "net.ipv4.conf.all.rp_filter=2");
    let route = ["ip", "route", "add", "198.18.1.0/24", "via", "198.18.9.1"];
    assert!(in_ns(&pod, &route).status.success());
    spoof(&pod, 100, Some(disc));
    let counted = t.poll_until(POLL, WAIT, |t| dropped(t, "interface") >= 102);
    assert!(counted.is_some(), "{}\n{}", t.metrics(), t.log());
    // Several detection times later: never down, on either side.
    let stayed = t.poll_until(POLL, Duration::from_millis(1500), |t| {
        !t.tor_bfd_up() || t.log().contains("BFD session down")
    });
    assert!(stayed.is_none(), "BFD went down\n{}", t.diagnostics());
    assert!(t.tor_has_route() && t.tor_bgp_established());
    let after = (
        since(&t, "show bfd sessions", "198.18.1.2"),
        since(&t, "show protocols node1", "node1"),
    );
    let same = |a: &Option<String>, b: &Option<String>| match (a, b) {
        (Some(a), Some(b)) => integration_tests::bird_parse::same_since(a, b),
        _ => a == b,
    };
    assert!(
        same(&after.0, &before.0) && same(&after.1, &before.1),
        "a session was reset ({before:?} → {after:?})\n{}",
        t.diagnostics()
    );
}

/// BIRD's `protocol bfd` interface options with authentication.
fn bird_auth(conf: String, line: &str) -> String {
    let start = conf.find("multiplier 3;").expect("BIRD runs BFD") + "multiplier 3;".len();
    let end = start + conf[start..].find(" };").unwrap();
    format!("{}{line}{}", &conf[..start], &conf[end..])
}

/// The speaker's `bfd:` line with `authentication` of `kind` and key file `file`.
fn speaker_auth(conf: String, kind: &str, file: &std::path::Path) -> String {
    conf.replace(
        "multiplier: 3}",
        &format!(
            "multiplier: 3, authentication: {{type: {kind}, keyId: 7, secretFile: {}}}}}",
            file.display()
        ),
    )
}

/// RFC 5880 §6.7.4 against BIRD: the session comes Up with Keyed SHA1 and stays Up across a
/// planned restart (the sequence continues), then (reloaded on both sides) with Meticulous
/// Keyed SHA1, and does not with a wrong key: BIRD's packets fail our digest check and ours
/// fail BIRD's.
#[test]
fn bfd_authentication_comes_up_with_bird_for_each_sha1_type_and_not_with_a_wrong_key_rfc5880_6_7_4()
{
    let mut t = integration_tests::needs!(topology(
        2,
        |c| c,
        |t| {
            std::fs::write(t.path("bfd.key"), "tor-node-bfd\n").unwrap();
            std::fs::write(t.path("wrong.key"), "not-the-key\n").unwrap();
            t.tor_reconfigure(|c| {
                bird_auth(
                    c,
                    " authentication keyed sha1; password \"tor-node-bfd\" { id 7; };",
                )
            });
            t.edit_speaker_config(|c| speaker_auth(c, "keyed-sha1", &t.path("bfd.key")));
        }
    ));
    let up = t.poll_until(POLL, WAIT, |t| t.tor_bfd_up());
    assert!(up.is_some(), "keyed-sha1 not Up\n{}", t.diagnostics());
    assert_eq!(dropped(&t, "auth_digest"), 0, "{}", t.metrics());

    // A planned restart continues Keyed SHA1's sequence (the wall clock's 15 s steps): the
    // ToR's BFD session never leaves Up, its "Since" does not move.
    let since_before = since(&t, "show bfd sessions", "198.18.1.2");
    t.stop_speaker();
    t.start_speaker();
    let resumed = t.poll_until(POLL, WAIT, |t| {
        t.tor_bgp_established() && t.log().contains("BFD session state")
    });
    assert!(resumed.is_some(), "not resumed\n{}", t.diagnostics());
    assert!(t.tor_bfd_up(), "{}", t.diagnostics());
    let since_after = since(&t, "show bfd sessions", "198.18.1.2");
    assert!(
        since_after.is_some()
            && since_after
                .as_deref()
                .zip(since_before.as_deref())
                .is_some_and(|(a, b)| integration_tests::bird_parse::same_since(a, b)),
        "the ToR's BFD session was replaced ({since_before:?} → {since_after:?})\n{}",
        t.diagnostics()
    );
    // And the ToR takes the new process's packets: back to 100 ms × 3 from the handover's
    // stretched timers (BIRD shows the timeout), which only an accepted packet can tell it.
    let fast = t.poll_until(POLL, WAIT, |t| {
        t.birdc("show bfd sessions").contains("0.300")
    });
    assert!(fast.is_some(), "{}", t.diagnostics());

    // Meticulous on both sides: a new BFD session (the speaker reloads within 2 s).
    t.tor_reconfigure(|c| c.replace("keyed sha1;", "meticulous keyed sha1;"));
    t.edit_speaker_config(|c| c.replace("type: keyed-sha1", "type: meticulous-keyed-sha1"));
    let reloaded = t.poll_until(POLL, WAIT, |t| {
        t.log().contains("config reloaded") && t.tor_bfd_up() && t.tor_bgp_established()
    });
    assert!(
        reloaded.is_some(),
        "meticulous-keyed-sha1 not Up\n{}",
        t.diagnostics()
    );
    let stays = t.poll_until(POLL, Duration::from_secs(1), |t| !t.tor_bfd_up());
    assert!(stays.is_none(), "meticulous flapped\n{}", t.diagnostics());

    // A wrong key at our end: never Up, and each side drops the other's packets.
    let digest_before = dropped(&t, "auth_digest");
    let wrong = t.path("wrong.key");
    t.edit_speaker_config(|c| c.replace("bfd.key", wrong.file_name().unwrap().to_str().unwrap()));
    let refused = t.poll_until(POLL, WAIT, |t| {
        dropped(t, "auth_digest") >= digest_before + 3 && !t.tor_bfd_up()
    });
    assert!(refused.is_some(), "{}\n{}", t.metrics(), t.diagnostics());
    let never = t.poll_until(POLL, Duration::from_secs(2), |t| t.tor_bfd_up());
    assert!(never.is_none(), "Up with a wrong key\n{}", t.diagnostics());
}
