//! `peers[i]`: one BGP neighbor, checked against the local AS and the source kind.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use bgp_proto::{Asn, Family, HoldTime};

use crate::community::{Community, LargeCommunity};
use crate::error::{Errors, quoted, show};
use crate::fields::{is_unicast, parse_path, seconds};
use crate::model::{
    BfdAuthConfig, BfdAuthType, BfdConfig, ConnectRetry, DEFAULT_CONNECT_RETRY_BASE,
    DEFAULT_CONNECT_RETRY_MAX, DEFAULT_HOLD_TIME, DEFAULT_PORT, GracefulRestartConfig, IBGP_TTL,
    PeerAddress, PeerAsn, PeerConfig, SessionType,
};
use crate::peer_endpoint::parse_endpoint;
use crate::selector::{is_dns_label, parse_selector};
use crate::tree::{Lookup, Node, Obj, boolean, node};

const PEER_KEYS: &[&str] = &[
    "name",
    "address",
    "port",
    "asn",
    "addressFamily",
    "allowedAsns",
    "localAddress",
    "passive",
    "acceptIncoming",
    "families",
    "holdTime",
    "keepaliveTime",
    "connectRetry",
    "passwordFile",
    "ttlSecurity",
    "ebgpMultihop",
    "gracefulRestart",
    "bfd",
    "communities",
    "largeCommunities",
    "med",
    "localPref",
    "asPathPrepend",
    "nodeSelector",
    "interface",
    "peerAddress",
    "extendedNextHop",
];

const HOLD_TIME_RULE: &str = "0 or 3..65535";
const MAX_PREPEND: u64 = 10;
/// Longest backoff step we accept, in seconds.
const MAX_CONNECT_RETRY: u64 = 3600;

/// What a peer is checked against; `None` where the top-level value itself was invalid.
#[derive(Debug)]
pub(crate) struct PeerContext {
    pub(crate) local_asn: Option<Asn>,
    pub(crate) file_source: Option<bool>,
}

/// A peer, and where it was written (for the cross-peer checks).
#[derive(Debug)]
pub(crate) struct ParsedPeer {
    pub(crate) path: String,
    pub(crate) peer: PeerConfig,
}

impl From<ParsedPeer> for PeerConfig {
    fn from(p: ParsedPeer) -> Self {
        p.peer
    }
}

pub(crate) fn parse_peer(
    n: Node<'_, '_>,
    ctx: &PeerContext,
    errs: &mut Errors,
) -> Option<ParsedPeer> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(PEER_KEYS, errs);
    let before = errs.0.len();
    let path = |key: &str| obj.key_path(key);

    let name = Lookup::of(&obj, "name", errs, parse_name).required(&path("name"), errs);
    let address = parse_endpoint(&obj, errs);
    let port = Lookup::of(&obj, "port", errs, |n, e| n.int(1, 65535, "1..65535", e))
        .or(u64::from(DEFAULT_PORT));
    let asn = crate::peer_auto::peer_asn(&obj, errs);
    // Outer `None`: unknown (an error was reported); inner `None`: `asn: auto`.
    let session_type = match (&asn, ctx.local_asn) {
        (Some(PeerAsn::Auto(_)), _) => Some(None),
        (Some(PeerAsn::Fixed(peer)), Some(local)) if *peer == local => {
            Some(Some(SessionType::Internal))
        }
        (Some(PeerAsn::Fixed(_)), Some(_)) => Some(Some(SessionType::External)),
        // A node-derived local AS (or an invalid one, already reported): provisional,
        // Config::resolve_for_node decides per node.
        (Some(PeerAsn::Fixed(_)), None) => Some(Some(SessionType::External)),
        _ => None,
    };
    let local_address = Lookup::of(&obj, "localAddress", errs, parse_local_address).or(None);
    if let (Some(local), Some(PeerAddress::Interface { name, .. })) = (local_address, &address) {
        errs.not_allowed(
            &path("localAddress"),
            quoted(&local.to_string()),
            &format!(
                "the source of a session on interface {} is that interface's link-local address",
                quoted(name)
            ),
        );
    }
    if let (Some(local), Some(PeerAddress::DefaultGateway(_))) = (local_address, &address) {
        errs.not_allowed(
            &path("localAddress"),
            quoted(&local.to_string()),
            "with address: default-gateway the local address is the node's own on the \
             gateway's link, one per gateway",
        );
    }
    if let (Some(local), Some(PeerAddress::Fixed(remote))) = (local_address, &address) {
        let remote = *remote;
        if local == remote {
            errs.not_allowed(
                &path("localAddress"),
                quoted(&local.to_string()),
                "equals the peer address",
            );
        } else if local.is_ipv4() != remote.is_ipv4() {
            errs.not_allowed(
                &path("localAddress"),
                quoted(&local.to_string()),
                &format!("must be of the same family as the peer address {remote}"),
            );
        }
    }
    let passive = Lookup::of(&obj, "passive", errs, boolean).or(false);
    let accept_incoming = Lookup::of(&obj, "acceptIncoming", errs, boolean)
        .some()
        .or_none();
    if let Some(PeerAddress::Interface { name, peer: None }) = &address
        && (passive || accept_incoming == Some(true))
    {
        let key = if passive { "passive" } else { "acceptIncoming" };
        errs.not_allowed(
            &path(key),
            true,
            &format!(
                "accepting connections needs the neighbor's address: set peerAddress with interface {}",
                quoted(name)
            ),
        );
    }
    if passive && accept_incoming == Some(false) {
        errs.not_allowed(
            &path("acceptIncoming"),
            false,
            "a passive peer only accepts connections; remove acceptIncoming or passive",
        );
    }
    let families = Lookup::of(&obj, "families", errs, parse_families)
        .or(vec![Family::IPV4_UNICAST, Family::IPV6_UNICAST]);
    let extended_next_hop = Lookup::of(&obj, "extendedNextHop", errs, boolean).or(false);
    if extended_next_hop && !families.contains(&Family::IPV4_UNICAST) {
        errs.not_allowed(
            &path("extendedNextHop"),
            true,
            "extended next hop carries ipv4-unicast routes, and families has no ipv4-unicast",
        );
    }
    let (hold_time, keepalive_time) = parse_timers(&obj, errs);
    let connect_retry =
        Lookup::of(&obj, "connectRetry", errs, parse_connect_retry).or(ConnectRetry::default());
    let password_file = Lookup::of(&obj, "passwordFile", errs, parse_path)
        .some()
        .or_none();
    let ttl_security = Lookup::of(&obj, "ttlSecurity", errs, boolean).or(false);
    let ebgp_multihop = parse_multihop(&obj, session_type.flatten(), ttl_security, errs);
    let graceful_restart = Lookup::of(&obj, "gracefulRestart", errs, parse_graceful_restart)
        .or(GracefulRestartConfig::default());
    let bfd = Lookup::of(&obj, "bfd", errs, parse_bfd).or(None);
    if let (Some(_), Some(hops)) = (&bfd, ebgp_multihop)
        && hops > 1
    {
        errs.push(
            &path("bfd"),
            format!("single-hop BFD (RFC 5881) cannot be combined with ebgpMultihop {hops}"),
        );
    }
    let communities = Lookup::of(&obj, "communities", errs, |n, e| {
        parse_unique_list(n, e, "a community", |s| match s.parse::<Community>()? {
            // RFC 9494 §4.3: only a router keeping a route stale adds it.
            Community::LLGR_STALE => Err("is LLGR_STALE (RFC 9494), which only a router \
                 keeping our route as long-lived stale may add; the speaker never sends it"
                .to_owned()),
            c => Ok(c),
        })
    })
    .or(Vec::new());
    let large_communities = Lookup::of(&obj, "largeCommunities", errs, |n, e| {
        parse_unique_list(n, e, "a large community", |s| s.parse::<LargeCommunity>())
    })
    .or(Vec::new());
    let med = Lookup::of(&obj, "med", errs, parse_u32).or_none();
    let local_pref = Lookup::of(&obj, "localPref", errs, parse_u32).or_none();
    if let (Some(v), Some(Some(SessionType::External)), Some(peer), Some(local)) =
        (local_pref, session_type, &asn, ctx.local_asn)
    {
        errs.not_allowed(
            &path("localPref"),
            v,
            &format!("LOCAL_PREF is iBGP only, and peer asn {peer} differs from local asn {local}"),
        );
    }
    let as_path_prepend = Lookup::of(&obj, "asPathPrepend", errs, |n, e| {
        n.int(0, MAX_PREPEND, "0..10", e)
    })
    .or(0);
    if as_path_prepend > 0 && session_type == Some(Some(SessionType::Internal)) {
        errs.not_allowed(
            &path("asPathPrepend"),
            as_path_prepend,
            "prepending is eBGP only; this peer is iBGP",
        );
    }
    let node_selector = Lookup::of(&obj, "nodeSelector", errs, parse_selector)
        .some()
        .or_none();
    if let (Some(true), Some(pair)) = (ctx.file_source, obj.get("nodeSelector")) {
        errs.not_allowed(
            &pair.0,
            show(pair.1),
            "source.kind file has no Node labels to select on",
        );
    }

    if errs.0.len() != before {
        return None;
    }
    let peer = PeerConfig {
        name: name?,
        address: address?,
        port: u16::try_from(port).ok()?,
        asn: asn?,
        session_type: session_type?,
        local_address,
        passive,
        accept_incoming: passive || accept_incoming.unwrap_or(false),
        families,
        hold_time,
        keepalive_time,
        connect_retry,
        password_file,
        ttl_security,
        ebgp_multihop,
        graceful_restart,
        bfd,
        communities,
        large_communities,
        med,
        local_pref,
        as_path_prepend: u8::try_from(as_path_prepend).ok()?,
        node_selector,
        extended_next_hop,
    };
    Some(ParsedPeer {
        path: obj.path.clone(),
        peer,
    })
}

/// Names and (address, port) pairs must be unique across peers.
pub(crate) fn check_peer_set(peers: &[Option<ParsedPeer>], errs: &mut Errors) {
    let mut names: HashMap<&str, &str> = HashMap::new();
    // By IP alone (the listener tells link-local peers apart without their interface); a
    // discovered neighbor by its interface; a default gateway by its family.
    let mut endpoints: HashMap<(String, u16), &str> = HashMap::new();
    for parsed in peers.iter().flatten() {
        let p = &parsed.peer;
        let first = *names.entry(&p.name).or_insert(&parsed.path);
        if first != parsed.path {
            errs.push(
                &format!("{}.name", parsed.path),
                format!("{} is already used by {first}", quoted(&p.name)),
            );
        }
        let first = *endpoints
            .entry((
                p.address
                    .ip()
                    .map_or_else(|| p.address.to_string(), |ip| ip.to_string()),
                p.port,
            ))
            .or_insert(&parsed.path);
        if first != parsed.path {
            let key = match p.address {
                PeerAddress::Fixed(_) | PeerAddress::DefaultGateway(_) => "address",
                PeerAddress::Interface { peer: Some(_), .. } => "peerAddress",
                PeerAddress::Interface { peer: None, .. } => "interface",
            };
            errs.push(
                &format!("{}.{key}", parsed.path),
                format!(
                    "{} port {} is already used by {first}",
                    quoted(&p.address.to_string()),
                    p.port
                ),
            );
        }
    }
}

fn parse_name(n: Node<'_, '_>, errs: &mut Errors) -> Option<String> {
    let name = n.parse("a string", errs, |s| Ok(s.to_owned()))?;
    if name.is_empty() {
        errs.push(n.path, "must not be empty");
        return None;
    }
    if !is_dns_label(&name) {
        errs.push(
            n.path,
            format!(
                "{} is not a valid peer name (1..63 of a-z, 0-9 and '-', \
                 starting and ending alphanumeric)",
                quoted(&name)
            ),
        );
        return None;
    }
    Some(name)
}

fn parse_ip(n: Node<'_, '_>, errs: &mut Errors) -> Option<IpAddr> {
    n.parse("an IP address", errs, |s| {
        s.parse::<IpAddr>()
            .map_err(|_| "is not an IP address".to_owned())
    })
}

fn parse_local_address(n: Node<'_, '_>, errs: &mut Errors) -> Option<Option<IpAddr>> {
    let addr = parse_ip(n, errs)?;
    if !is_unicast(addr) {
        errs.not_allowed(n.path, quoted(&addr.to_string()), "a unicast address");
        return None;
    }
    Some(Some(addr))
}

fn parse_families(n: Node<'_, '_>, errs: &mut Errors) -> Option<Vec<Family>> {
    let families = parse_unique_list(n, errs, "an address family", |s| match s {
        "ipv4-unicast" => Ok(Family::IPV4_UNICAST),
        "ipv6-unicast" => Ok(Family::IPV6_UNICAST),
        _ => Err("is not one of ipv4-unicast, ipv6-unicast".to_owned()),
    })?;
    if families.is_empty() {
        errs.push(n.path, "must not be empty (ipv4-unicast, ipv6-unicast)");
        return None;
    }
    Some(families)
}

/// A list of distinct strings parsed by `parse` (see [`Node::parse`]); `what` names one item.
fn parse_unique_list<T: PartialEq>(
    n: Node<'_, '_>,
    errs: &mut Errors,
    what: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Option<Vec<T>> {
    let items = n.list(errs)?;
    let before = errs.0.len();
    let mut out: Vec<T> = Vec::new();
    for item in &items {
        let Some(v) = node(item).parse(what, errs, &parse) else {
            continue;
        };
        if out.contains(&v) {
            errs.push(&item.0, format!("{} is listed twice", show(item.1)));
        } else {
            out.push(v);
        }
    }
    (errs.0.len() == before).then_some(out)
}

fn parse_u32(n: Node<'_, '_>, errs: &mut Errors) -> Option<Option<u32>> {
    let v = n.int(0, u64::from(u32::MAX), "0..4294967295", errs)?;
    u32::try_from(v).ok().map(Some)
}

/// holdTime (default 90) and keepaliveTime (default holdTime / 3).
fn parse_timers(obj: &Obj<'_>, errs: &mut Errors) -> (HoldTime, u16) {
    let hold = Lookup::of(obj, "holdTime", errs, |n, e| {
        let v = seconds(n, 0, 65535, HOLD_TIME_RULE, e)?;
        let hold = u16::try_from(v).ok().and_then(HoldTime::new);
        if hold.is_none() {
            e.not_allowed(n.path, v, HOLD_TIME_RULE);
        }
        hold
    })
    .known(HoldTime::new(DEFAULT_HOLD_TIME).unwrap_or(HoldTime::DISABLED));
    let keepalive = Lookup::of(obj, "keepaliveTime", errs, |n, e| {
        seconds(n, 0, 65535, "0..65535", e)
    })
    .some();
    let Some(hold) = hold else {
        return (HoldTime::DISABLED, 0);
    };
    let seconds = hold.seconds();
    let keepalive = match keepalive {
        Lookup::Absent => seconds / 3,
        Lookup::Invalid => 0,
        Lookup::Valid(None) => 0,
        Lookup::Valid(Some(k)) => {
            let path = obj.key_path("keepaliveTime");
            if seconds == 0 && k != 0 {
                errs.not_allowed(&path, k, "must be 0 when holdTime is 0");
            } else if seconds > 0 && (k == 0 || k >= u64::from(seconds)) {
                let rule = format!("1..{}, below holdTime {seconds}", seconds - 1);
                errs.not_allowed(&path, k, &rule);
            }
            u16::try_from(k).unwrap_or(0)
        }
    };
    (hold, keepalive)
}

fn parse_connect_retry(n: Node<'_, '_>, errs: &mut Errors) -> Option<ConnectRetry> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["base", "max"], errs);
    let rule = "1..3600 seconds";
    let base = Lookup::of(&obj, "base", errs, |n, e| {
        seconds(n, 1, MAX_CONNECT_RETRY, rule, e)
    })
    .known(DEFAULT_CONNECT_RETRY_BASE.as_secs())?;
    let max = match Lookup::of(&obj, "max", errs, |n, e| {
        seconds(n, 1, MAX_CONNECT_RETRY, rule, e)
    }) {
        Lookup::Absent => base.max(DEFAULT_CONNECT_RETRY_MAX.as_secs()),
        Lookup::Invalid => return None,
        Lookup::Valid(max) if max < base => {
            errs.not_allowed(&obj.key_path("max"), max, &format!("at least base, {base}"));
            return None;
        }
        Lookup::Valid(max) => max,
    };
    Some(ConnectRetry {
        base: Duration::from_secs(base),
        max: Duration::from_secs(max),
    })
}

/// eBGP hop limit (default 1); rejected for iBGP and together with GTSM beyond one hop.
fn parse_multihop(
    obj: &Obj<'_>,
    session_type: Option<SessionType>,
    ttl_security: bool,
    errs: &mut Errors,
) -> Option<u8> {
    let hops = Lookup::of(obj, "ebgpMultihop", errs, |n, e| n.int(1, 255, "1..255", e));
    let path = obj.key_path("ebgpMultihop");
    match (hops, session_type) {
        (Lookup::Valid(h), Some(SessionType::Internal)) => {
            errs.not_allowed(
                &path,
                h,
                &format!("eBGP only; iBGP sessions always use TTL {IBGP_TTL}"),
            );
            None
        }
        (Lookup::Valid(h), _) if ttl_security && h > 1 => {
            errs.not_allowed(
                &path,
                h,
                "ttlSecurity and ebgpMultihop above 1 cannot be combined, as in FRR",
            );
            None
        }
        (_, Some(SessionType::Internal)) => None,
        (hops, _) => u8::try_from(hops.or(1)).ok(),
    }
}

fn parse_graceful_restart(n: Node<'_, '_>, errs: &mut Errors) -> Option<GracefulRestartConfig> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["enabled", "restartTime", "longLivedStaleTime"], errs);
    let defaults = GracefulRestartConfig::default();
    let enabled = Lookup::of(&obj, "enabled", errs, boolean).known(defaults.enabled)?;
    let restart_time = Lookup::of(&obj, "restartTime", errs, |n, e| {
        seconds(n, 0, 4095, "0..4095, a 12-bit field in RFC 4724", e)
    })
    .known(u64::from(defaults.restart_time))?;
    let long_lived_stale_time = Lookup::of(&obj, "longLivedStaleTime", errs, |n, e| {
        seconds(
            n,
            0,
            16_777_215,
            "0..16777215, a 24-bit field in RFC 9494",
            e,
        )
    })
    .known(u64::from(defaults.long_lived_stale_time))?;
    // RFC 9494 §3: a receiver ignores LLGR without the graceful restart capability.
    if !enabled && long_lived_stale_time > 0 {
        errs.not_allowed(
            &obj.key_path("longLivedStaleTime"),
            long_lived_stale_time,
            "needs gracefulRestart.enabled: RFC 9494 rides on the graceful restart capability",
        );
        return None;
    }
    Some(GracefulRestartConfig {
        enabled,
        restart_time: u16::try_from(restart_time).ok()?,
        long_lived_stale_time: u32::try_from(long_lived_stale_time).ok()?,
    })
}

/// The floor of `bfd.minTx` / `bfd.minRx` (ms). Our BFD runs in userspace on its own thread
/// (`bgp_io::bfd::runtime`), scheduled like any process: below 50 ms a node under CPU
/// pressure misses its own transmit timer, and a ToR that detects us in a few intervals
/// flushes the node's routes for a false failure (docs/benchmarks.md, BFD under load).
pub const BFD_MIN_INTERVAL_MS: u64 = 50;

/// Interval bounds in milliseconds: [`BFD_MIN_INTERVAL_MS`] up to a minute, far past any
/// BGP hold time, where BFD stops making sense.
const BFD_INTERVAL_RULE: &str =
    "50..60000 milliseconds: below 50 ms userspace BFD on a busy node misses its own timers";

/// `bfd: {enabled, minTx, minRx, multiplier, strict, authentication}`; the block's presence
/// turns BFD on unless `enabled: false`.
fn parse_bfd(n: Node<'_, '_>, errs: &mut Errors) -> Option<Option<BfdConfig>> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(
        &[
            "enabled",
            "minTx",
            "minRx",
            "multiplier",
            "strict",
            "authentication",
        ],
        errs,
    );
    let d = BfdConfig::default();
    let ms = |key: &str, errs: &mut Errors, default: Duration| {
        Lookup::of(&obj, key, errs, |n, e| {
            n.int(BFD_MIN_INTERVAL_MS, 60_000, BFD_INTERVAL_RULE, e)
        })
        .known(u64::try_from(default.as_millis()).unwrap_or(u64::MAX))
        .map(Duration::from_millis)
    };
    let enabled = Lookup::of(&obj, "enabled", errs, boolean).known(true);
    let min_tx = ms("minTx", errs, d.min_tx);
    let min_rx = ms("minRx", errs, d.min_rx);
    let multiplier = Lookup::of(&obj, "multiplier", errs, |n, e| n.int(1, 255, "1..255", e))
        .known(u64::from(d.multiplier));
    let strict = Lookup::of(&obj, "strict", errs, boolean).known(d.strict);
    let authentication = Lookup::of(&obj, "authentication", errs, parse_bfd_auth).optional();
    let cfg = BfdConfig {
        min_tx: min_tx?,
        min_rx: min_rx?,
        multiplier: u8::try_from(multiplier?).ok()?,
        strict: strict?,
        authentication: authentication?,
    };
    Some(enabled?.then_some(cfg))
}

/// `bfd.authentication: {type, keyId, secretFile}` (RFC 5880 §6.7.4); every key required.
fn parse_bfd_auth(n: Node<'_, '_>, errs: &mut Errors) -> Option<BfdAuthConfig> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["type", "keyId", "secretFile"], errs);
    let sub = |key: &str| obj.key_path(key);
    let auth_type = Lookup::of(&obj, "type", errs, |n, e| {
        n.parse("keyed-sha1 or meticulous-keyed-sha1", e, |s| match s {
            "keyed-sha1" => Ok(BfdAuthType::KeyedSha1),
            "meticulous-keyed-sha1" => Ok(BfdAuthType::MeticulousKeyedSha1),
            _ => Err(
                "is not keyed-sha1 or meticulous-keyed-sha1 (the other RFC 5880 types \
                 are not supported)"
                    .to_owned(),
            ),
        })
    })
    .required(&sub("type"), errs);
    let key_id = Lookup::of(&obj, "keyId", errs, |n, e| n.int(0, 255, "0..255", e))
        .required(&sub("keyId"), errs);
    let secret_file =
        Lookup::of(&obj, "secretFile", errs, parse_path).required(&sub("secretFile"), errs);
    Some(BfdAuthConfig {
        auth_type: auth_type?,
        key_id: u8::try_from(key_id?).ok()?,
        secret_file: secret_file?,
    })
}
