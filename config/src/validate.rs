//! From the generic YAML tree to a typed [`Config`], collecting every error on the way.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use bgp_proto::{Asn, RouterId};
use ipnet::IpNet;
use serde_json::{Map, Value};

use crate::cni::{CniConfig, parse_cni};
use crate::egress::{EgressConfig, parse_egress};
use crate::error::{Errors, quoted};
use crate::fields::{is_unicast, parse_path, seconds};
use crate::forwarding::{ForwardingGateConfig, parse_forwarding_gate};
use crate::local_asn::{parse_asn_overrides, parse_graceful_shutdown, parse_local_asn};
use crate::model::{
    AdminConfig, Config, GracefulShutdownConfig, LocalAsn, LogConfig, LogFormat, LogLevel,
    MinPrefixLength, NextHopConfig, NextHops, PeerConfig, SourceConfig, StatusConfig,
};
use crate::peer::{PeerContext, check_peer_set, parse_peer};
use crate::selector::is_dns_subdomain;
use crate::tree::{Lookup, Node, Obj, boolean, node};

const TOP_KEYS: &[&str] = &[
    "nodeName",
    "asn",
    "asnOverrides",
    "routerId",
    "source",
    "allowedPrefixes",
    "minPrefixLength",
    "nextHop",
    "peers",
    "admin",
    "status",
    "log",
    "cni",
    "gracefulShutdown",
    "forwardingGate",
    "egress",
];

pub(crate) const NODE_NAME_RULE: &str =
    "is not a valid node name (a DNS subdomain: lowercase a-z, 0-9, '-' and '.', up to 253)";

/// What a document must hold besides the schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Require {
    /// A file runs a speaker: at least one peer. Configuration objects may select no peer
    /// for a node (it then announces nothing).
    pub peers: bool,
}

pub(crate) fn validate(root: &Value, errs: &mut Errors) -> Config {
    validate_with(root, errs, Require { peers: true })
}

pub(crate) fn validate_with(root: &Value, errs: &mut Errors, require: Require) -> Config {
    let empty = Map::new();
    let root = match root {
        Value::Null => Obj {
            path: String::new(),
            map: &empty,
        },
        other => match Obj::of(
            Node {
                path: "",
                value: other,
            },
            errs,
        ) {
            Some(obj) => obj,
            None => return placeholder(),
        },
    };
    root.check_keys(TOP_KEYS, errs);

    let node_name = Lookup::of(&root, "nodeName", errs, |n, e| {
        n.parse("a string", e, |s| {
            if is_dns_subdomain(s) {
                Ok(s.to_owned())
            } else {
                Err(NODE_NAME_RULE.to_owned())
            }
        })
    })
    .optional()
    .flatten();
    let source = Lookup::of(&root, "source", errs, parse_source).known(SourceConfig::IpamCrd);
    let local_asn = Lookup::of(&root, "asn", errs, parse_local_asn).required("asn", errs);
    let asn = match &local_asn {
        Some(LocalAsn::Fixed(asn)) => Some(*asn),
        _ => None,
    };
    let asn_overrides = Lookup::of(&root, "asnOverrides", errs, parse_asn_overrides).or(Vec::new());
    if let (Some(true), Some(pair)) = (
        source.as_ref().map(SourceConfig::is_file),
        root.get("asnOverrides"),
    ) {
        errs.not_allowed(
            &pair.0,
            crate::error::show(pair.1),
            "source.kind file has no Node labels to select on",
        );
    }
    if let (Some(true), Some(LocalAsn::FromNode { .. })) =
        (source.as_ref().map(SourceConfig::is_file), &local_asn)
    {
        errs.push(
            "asn",
            "source.kind file has no Node to read the AS from; write a number",
        );
    }
    let graceful_shutdown = Lookup::of(&root, "gracefulShutdown", errs, parse_graceful_shutdown)
        .or(GracefulShutdownConfig::default());
    let router_id = Lookup::of(&root, "routerId", errs, parse_router_id)
        .optional()
        .flatten();
    let allowed_prefixes = parse_allowed_prefixes(&root, source.as_ref(), errs);
    let min_prefix_length = Lookup::of(&root, "minPrefixLength", errs, parse_min_prefix_length)
        .or(MinPrefixLength::default());
    let next_hop = Lookup::of(&root, "nextHop", errs, parse_next_hops).or(NextHops::default());

    // A node-derived AS: peer types are decided per node (Config::resolve_for_node).
    let ctx = PeerContext {
        local_asn: asn,
        file_source: source.as_ref().map(SourceConfig::is_file),
    };
    let mut peers = Vec::new();
    match root.get("peers") {
        None if require.peers => errs.push("peers", "required (at least one peer)"),
        None => {}
        Some(pair) => {
            if let Some(items) = node(&pair).list(errs) {
                if items.is_empty() && require.peers {
                    errs.push("peers", "must not be empty (at least one peer)");
                }
                let valid: Vec<_> = items
                    .iter()
                    .map(|item| parse_peer(node(item), &ctx, errs))
                    .collect();
                check_peer_set(&valid, errs);
                peers = valid.into_iter().flatten().map(PeerConfig::from).collect();
            }
        }
    }

    let admin = Lookup::of(&root, "admin", errs, parse_admin).or(AdminConfig::default());
    let status = Lookup::of(&root, "status", errs, parse_status).or(StatusConfig::default());
    let log = Lookup::of(&root, "log", errs, parse_log).or(LogConfig::default());
    let cni = Lookup::of(&root, "cni", errs, parse_cni).or(CniConfig::default());
    let forwarding_gate = Lookup::of(&root, "forwardingGate", errs, parse_forwarding_gate)
        .or(ForwardingGateConfig::default());
    let egress = Lookup::of(&root, "egress", errs, parse_egress).or(EgressConfig::default());

    let default_asn = match &local_asn {
        Some(LocalAsn::FromNode {
            default: Some(d), ..
        }) => Some(*d),
        _ => asn,
    };
    Config {
        node_name,
        asn: default_asn.unwrap_or(Asn(0)),
        local_asn: local_asn.unwrap_or(LocalAsn::Fixed(Asn(0))),
        asn_overrides,
        graceful_shutdown,
        router_id,
        source: source.unwrap_or(SourceConfig::IpamCrd),
        allowed_prefixes,
        min_prefix_length,
        next_hop,
        peers,
        admin,
        status,
        log,
        cni,
        forwarding_gate,
        egress,
    }
}

/// Stands in when the document is unusable; it is never returned to the caller.
fn placeholder() -> Config {
    Config {
        source: SourceConfig::IpamCrd,
        ..Config::unconfigured()
    }
}

fn parse_router_id(n: Node<'_, '_>, errs: &mut Errors) -> Option<RouterId> {
    let addr = n.parse("an IPv4 address", errs, |s| {
        s.parse::<Ipv4Addr>()
            .map_err(|_| "is not an IPv4 address".to_owned())
    })?;
    let id = RouterId::new(addr);
    if id.is_none() {
        errs.not_allowed(
            n.path,
            quoted(&addr.to_string()),
            "must be non-zero, RFC 6286",
        );
    }
    id
}

fn parse_source(n: Node<'_, '_>, errs: &mut Errors) -> Option<SourceConfig> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["kind", "path"], errs);
    let kind = Lookup::of(&obj, "kind", errs, |n, e| {
        n.parse("a string", e, |s| match s {
            "node-spec" | "ipam-crd" | "cilium-node" | "file" => Ok(s.to_owned()),
            _ => Err("is not one of node-spec, ipam-crd, cilium-node, file".to_owned()),
        })
    })
    .known("ipam-crd".to_owned())?;
    let path = Lookup::of(&obj, "path", errs, parse_path);
    let path_key = obj.key_path("path");
    match (kind.as_str(), path) {
        ("file", Lookup::Absent) => {
            errs.push(&path_key, "required when source.kind is file");
            None
        }
        ("file", path) => path
            .known(PathBuf::new())
            .map(|path| SourceConfig::File { path }),
        (other, Lookup::Valid(path)) => {
            errs.not_allowed(
                &path_key,
                quoted(&path.display().to_string()),
                &format!("only source.kind file reads a path, not {other}"),
            );
            None
        }
        (_, Lookup::Invalid) => None,
        ("node-spec", Lookup::Absent) => Some(SourceConfig::NodeSpec),
        ("cilium-node", Lookup::Absent) => Some(SourceConfig::CiliumNode),
        (_, Lookup::Absent) => Some(SourceConfig::IpamCrd),
    }
}

fn parse_allowed_prefixes(
    root: &Obj<'_>,
    source: Option<&SourceConfig>,
    errs: &mut Errors,
) -> Vec<IpNet> {
    let needed = |s: &SourceConfig| !s.is_file();
    let why = |s: &SourceConfig| {
        format!(
            "when source.kind is {s} (the announce guard only announces pod CIDRs inside these)"
        )
    };
    let Some(pair) = root.get("allowedPrefixes") else {
        if let Some(s) = source.filter(|s| needed(s)) {
            errs.push("allowedPrefixes", format!("required {}", why(s)));
        }
        return Vec::new();
    };
    let Some(items) = node(&pair).list(errs) else {
        return Vec::new();
    };
    if items.is_empty()
        && let Some(s) = source.filter(|s| needed(s))
    {
        errs.push("allowedPrefixes", format!("must not be empty {}", why(s)));
    }
    let mut seen = HashSet::new();
    let mut prefixes = Vec::new();
    for item in &items {
        let Some(net) = node(item).parse("a CIDR", errs, parse_canonical_cidr) else {
            continue;
        };
        if seen.insert(net) {
            prefixes.push(net);
        } else {
            errs.push(
                &item.0,
                format!("{} is listed twice", quoted(&net.to_string())),
            );
        }
    }
    prefixes
}

/// A CIDR whose host bits are zero: `10.0.0.1/8` is a typo more often than not.
fn parse_canonical_cidr(s: &str) -> Result<IpNet, String> {
    let net: IpNet = s
        .parse()
        .map_err(|_| "is not a CIDR (address/length, e.g. 10.0.0.0/8)".to_owned())?;
    let canonical = net.trunc();
    if canonical != net {
        return Err(format!("has host bits set (did you mean {canonical}?)"));
    }
    Ok(net)
}

fn parse_next_hops(n: Node<'_, '_>, errs: &mut Errors) -> Option<NextHops> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["ipv4", "ipv6"], errs);
    let ipv4 = Lookup::of(&obj, "ipv4", errs, |n, e| {
        next_hop(n, e, "IPv4", |s| s.parse::<Ipv4Addr>().ok())
    });
    let ipv6 = Lookup::of(&obj, "ipv6", errs, |n, e| {
        next_hop(n, e, "IPv6", |s| s.parse::<Ipv6Addr>().ok())
    });
    Some(NextHops {
        ipv4: ipv4.known(NextHopConfig::SelfAddress)?,
        ipv6: ipv6.known(NextHopConfig::SelfAddress)?,
    })
}

fn next_hop<A: Into<IpAddr> + Copy>(
    n: Node<'_, '_>,
    errs: &mut Errors,
    family: &str,
    parse: impl Fn(&str) -> Option<A>,
) -> Option<NextHopConfig<A>> {
    let expected = format!("self, node or an {family} address");
    n.parse(&expected, errs, |s| match s {
        "self" => Ok(NextHopConfig::SelfAddress),
        "node" => Ok(NextHopConfig::Node),
        other => match parse(other) {
            // A link-local address would go out as the global next hop (RFC 2545 §3 keeps
            // link-local in a second field, for peers on that link only).
            Some(a) if is_link_local(a.into()) => Err(
                "is not allowed (a link-local address cannot be the global next hop; use a global or unique local address)"
                    .to_owned(),
            ),
            Some(a) if is_unicast(a.into()) => Ok(NextHopConfig::Address(a)),
            Some(_) => Err(format!("is not allowed (a unicast {family} address)")),
            None => Err(format!("is not {expected}")),
        },
    })
}

/// fe80::/10 (IPv6) and 169.254.0.0/16 (IPv4).
fn is_link_local(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => a.is_link_local(),
        IpAddr::V6(a) => a.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn parse_admin(n: Node<'_, '_>, errs: &mut Errors) -> Option<AdminConfig> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["listen", "metricsListen"], errs);
    let address = |n: Node<'_, '_>, e: &mut Errors| {
        n.parse("a socket address (ip:port)", e, |s| {
            s.parse::<SocketAddr>()
                .map_err(|_| "is not a socket address (ip:port, e.g. 127.0.0.1:9180)".to_owned())
        })
    };
    let listen = Lookup::of(&obj, "listen", errs, address);
    let metrics_listen = Lookup::of(&obj, "metricsListen", errs, address);
    Some(AdminConfig {
        listen: listen.known(AdminConfig::default().listen)?,
        metrics_listen: metrics_listen.optional()?,
    })
}

fn parse_min_prefix_length(n: Node<'_, '_>, errs: &mut Errors) -> Option<MinPrefixLength> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["ipv4", "ipv6"], errs);
    let defaults = MinPrefixLength::default();
    let len = |hi: u64, rule: &'static str| {
        move |n: Node<'_, '_>, e: &mut Errors| {
            n.int(1, hi, rule, e).and_then(|v| u8::try_from(v).ok())
        }
    };
    let ipv4 = Lookup::of(&obj, "ipv4", errs, len(32, "1..32")).optional()?;
    let ipv6 = Lookup::of(&obj, "ipv6", errs, len(128, "1..128")).optional()?;
    Some(MinPrefixLength {
        ipv4: ipv4.unwrap_or(defaults.ipv4),
        ipv6: ipv6.unwrap_or(defaults.ipv6),
    })
}

fn parse_status(n: Node<'_, '_>, errs: &mut Errors) -> Option<StatusConfig> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["publish", "minInterval"], errs);
    let defaults = StatusConfig::default();
    let publish = Lookup::of(&obj, "publish", errs, boolean);
    let min_interval = Lookup::of(&obj, "minInterval", errs, |n, e| {
        seconds(n, 1, 3600, "1..3600 seconds", e)
    });
    Some(StatusConfig {
        publish: publish.known(defaults.publish)?,
        min_interval: min_interval
            .optional()?
            .map_or(defaults.min_interval, Duration::from_secs),
    })
}

fn parse_log(n: Node<'_, '_>, errs: &mut Errors) -> Option<LogConfig> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["format", "level"], errs);
    let format = Lookup::of(&obj, "format", errs, |n, e| {
        n.parse("text or json", e, |s| {
            LogFormat::parse(s).ok_or_else(|| "is not one of text, json".to_owned())
        })
    });
    let level = Lookup::of(&obj, "level", errs, |n, e| {
        n.parse("a log level", e, |s| match s {
            "trace" => Ok(LogLevel::Trace),
            "debug" => Ok(LogLevel::Debug),
            "info" => Ok(LogLevel::Info),
            "warn" => Ok(LogLevel::Warn),
            "error" => Ok(LogLevel::Error),
            _ => Err("is not one of trace, debug, info, warn, error".to_owned()),
        })
    });
    Some(LogConfig {
        format: format.known(LogFormat::default())?,
        level: level.known(LogLevel::default())?,
    })
}
