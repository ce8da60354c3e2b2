//! The local AS per node: `asn` as a number, or read from the node's label or annotation,
//! `asnOverrides` by node selector, and the per-node resolution that derives each peer's
//! eBGP/iBGP type once the node's AS is known.

use std::collections::BTreeMap;
use std::fmt;

use bgp_proto::{AS_TRANS, Asn};

use crate::error::{Errors, quoted};
use crate::fields::{ASN_RULE, parse_asn, seconds};
use crate::model::{
    AsnOverride, Config, GracefulShutdownConfig, LocalAsn, MAX_GRACEFUL_SHUTDOWN_WAIT, NodeField,
    SessionType,
};
use crate::selector::{check_label_key, parse_selector};
use crate::tree::{Lookup, Node, Obj, boolean, node};

/// `asn: 65001`, `asn: {fromNodeLabel: key, default: 65001}` or `{fromNodeAnnotation: key}`.
pub(crate) fn parse_local_asn(n: Node<'_, '_>, errs: &mut Errors) -> Option<LocalAsn> {
    if !n.value.is_object() {
        return parse_asn(n, errs).map(LocalAsn::Fixed);
    }
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["fromNodeLabel", "fromNodeAnnotation", "default"], errs);
    let key = |field: &str, errs: &mut Errors| {
        Lookup::of(&obj, field, errs, |n, e| {
            let k = n.str(e)?;
            let before = e.0.len();
            check_label_key(n.path, k, e);
            (e.0.len() == before).then(|| k.to_owned())
        })
    };
    let label = key("fromNodeLabel", errs);
    let annotation = key("fromNodeAnnotation", errs);
    let default = Lookup::of(&obj, "default", errs, parse_asn).optional();
    let (field, key) = match (label, annotation) {
        (Lookup::Valid(k), Lookup::Absent) => (NodeField::Label, k),
        (Lookup::Absent, Lookup::Valid(k)) => (NodeField::Annotation, k),
        (Lookup::Absent, Lookup::Absent) => {
            errs.push(
                n.path,
                "needs fromNodeLabel or fromNodeAnnotation (or write a number)",
            );
            return None;
        }
        (Lookup::Invalid, _) | (_, Lookup::Invalid) => return None,
        (Lookup::Valid(_), Lookup::Valid(_)) => {
            errs.push(
                n.path,
                "fromNodeLabel and fromNodeAnnotation cannot both be set",
            );
            return None;
        }
    };
    Some(LocalAsn::FromNode {
        field,
        key,
        default: default?,
    })
}

/// `asnOverrides: [{nodeSelector: {...}, asn: N}]`.
pub(crate) fn parse_asn_overrides(n: Node<'_, '_>, errs: &mut Errors) -> Option<Vec<AsnOverride>> {
    let items = n.list(errs)?;
    let before = errs.0.len();
    let mut out = Vec::new();
    for item in &items {
        let Some(obj) = Obj::of(node(item), errs) else {
            continue;
        };
        obj.check_keys(&["nodeSelector", "asn"], errs);
        let selector = Lookup::of(&obj, "nodeSelector", errs, parse_selector)
            .required(&obj.key_path("nodeSelector"), errs);
        let asn = Lookup::of(&obj, "asn", errs, parse_asn).required(&obj.key_path("asn"), errs);
        if let (Some(node_selector), Some(asn)) = (selector, asn) {
            out.push(AsnOverride { node_selector, asn });
        }
    }
    (errs.0.len() == before).then_some(out)
}

/// `gracefulShutdown: {wait: 5s, onCordon: true, departOnCordon: false}`.
pub(crate) fn parse_graceful_shutdown(
    n: Node<'_, '_>,
    errs: &mut Errors,
) -> Option<GracefulShutdownConfig> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["wait", "onCordon", "departOnCordon"], errs);
    let defaults = GracefulShutdownConfig::default();
    let rule = format!("0..{MAX_GRACEFUL_SHUTDOWN_WAIT} seconds");
    let wait = Lookup::of(&obj, "wait", errs, |n, e| {
        seconds(n, 0, MAX_GRACEFUL_SHUTDOWN_WAIT, &rule, e)
    })
    .known(defaults.wait.as_secs())?;
    let on_cordon = Lookup::of(&obj, "onCordon", errs, boolean).known(defaults.on_cordon)?;
    let depart_on_cordon =
        Lookup::of(&obj, "departOnCordon", errs, boolean).known(defaults.depart_on_cordon)?;
    Some(GracefulShutdownConfig {
        wait: std::time::Duration::from_secs(wait),
        on_cordon,
        depart_on_cordon,
    })
}

/// Where a node's local AS came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AsnOrigin {
    /// `asn: N`.
    Config,
    /// `asnOverrides[i]`.
    Override(usize),
    /// The Node's label or annotation.
    Node(NodeField, String),
    /// `asn.default`: the Node has no such label or annotation.
    Default(NodeField, String),
}

impl fmt::Display for AsnOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AsnOrigin::Config => f.write_str("config"),
            AsnOrigin::Override(i) => write!(f, "asnOverrides[{i}]"),
            AsnOrigin::Node(field, key) => write!(f, "{} {key}", field.as_str()),
            AsnOrigin::Default(field, key) => write!(f, "default (no {} {key})", field.as_str()),
        }
    }
}

/// The node's local AS and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResolvedAsn {
    pub asn: Asn,
    pub origin: AsnOrigin,
}

impl ResolvedAsn {
    /// Why this AS is unusual (reserved or documentation ranges), if it is.
    pub fn warning(&self) -> Option<String> {
        reserved_range(self.asn.0).map(|why| format!("local AS {} is {why}", self.asn.0))
    }
}

/// Reserved, not refused: someone's lab may use them on purpose.
fn reserved_range(asn: u32) -> Option<&'static str> {
    match asn {
        64496..=64511 | 65536..=65551 => Some("reserved for documentation (RFC 5398)"),
        65535 | 4_294_967_295 => Some("reserved (RFC 7300)"),
        65552..=131_071 => Some("reserved (IANA)"),
        _ => None,
    }
}

/// The node's local AS cannot be used: no session runs with it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAsnError {
    /// A CamelCase condition reason: `LocalASNMissing`, `LocalASNInvalid`, `PeerTypeConflict`.
    pub reason: &'static str,
    pub message: String,
}

impl fmt::Display for NodeAsnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NodeAsnError {}

/// The Node's metadata a per-node setting reads.
#[derive(Debug, Clone, Copy)]
pub struct NodeMeta<'a> {
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
}

impl Config {
    /// This node's local AS: the first matching `asnOverrides` entry, else `asn`.
    pub fn resolve_asn(&self, node: NodeMeta<'_>) -> Result<ResolvedAsn, NodeAsnError> {
        if let Some((i, o)) = self
            .asn_overrides
            .iter()
            .enumerate()
            .find(|(_, o)| o.node_selector.matches(node.labels))
        {
            return Ok(ResolvedAsn {
                asn: o.asn,
                origin: AsnOrigin::Override(i),
            });
        }
        let (field, key, default) = match &self.local_asn {
            LocalAsn::Fixed(asn) => {
                return Ok(ResolvedAsn {
                    asn: *asn,
                    origin: AsnOrigin::Config,
                });
            }
            LocalAsn::FromNode {
                field,
                key,
                default,
            } => (*field, key, *default),
        };
        let map = match field {
            NodeField::Label => node.labels,
            NodeField::Annotation => node.annotations,
        };
        let what = format!("{} {}", field.as_str(), quoted(key));
        match (map.get(key), default) {
            (Some(v), _) => parse_node_asn(v)
                .map(|asn| ResolvedAsn {
                    asn,
                    origin: AsnOrigin::Node(field, key.clone()),
                })
                .map_err(|rule| NodeAsnError {
                    reason: "LocalASNInvalid",
                    message: format!("{what}: {} {rule}", quoted(v)),
                }),
            (None, Some(asn)) => Ok(ResolvedAsn {
                asn,
                origin: AsnOrigin::Default(field, key.clone()),
            }),
            (None, None) => Err(NodeAsnError {
                reason: "LocalASNMissing",
                message: format!("{what}: not set on this node (and asn.default is not set)"),
            }),
        }
    }

    /// This config as it applies to one node: its local AS resolved into `asn`, only the
    /// peers whose `nodeSelector` matches, each peer's eBGP/iBGP type derived from that AS
    /// and the checks that depend on it (`localPref` is iBGP only, `asPathPrepend` eBGP only).
    pub fn resolve_for_node(
        &self,
        node: NodeMeta<'_>,
    ) -> Result<(Config, ResolvedAsn), NodeAsnError> {
        let resolved = self.resolve_asn(node)?;
        let local = resolved.asn;
        let mut config = self.for_node(node.labels);
        config.asn = local;
        config.local_asn = LocalAsn::Fixed(local);
        config.asn_overrides = Vec::new();
        let mut conflicts = Vec::new();
        for (i, p) in self.peers.iter().enumerate() {
            let Some(peer) = config.peers.iter_mut().find(|q| q.name == p.name) else {
                continue;
            };
            let at = format!("peers[{i}] ({})", peer.name);
            let Some(peer_asn) = peer.asn.fixed() else {
                // `asn: auto`: the OPEN decides the type.
                peer.session_type = None;
                continue;
            };
            if peer_asn == local {
                peer.session_type = Some(SessionType::Internal);
                // 1 is also the default, so only a larger value was surely written.
                if let Some(hops) = peer.ebgp_multihop.filter(|h| *h > 1) {
                    conflicts.push(format!(
                        "{at}.ebgpMultihop: {hops} is eBGP only; with local AS {} from {} this peer is iBGP (TTL 255)",
                        local.0, resolved.origin
                    ));
                }
                peer.ebgp_multihop = None;
                if peer.as_path_prepend > 0 {
                    conflicts.push(format!(
                        "{at}.asPathPrepend: prepending is eBGP only; with local AS {} from {} this peer is iBGP",
                        local.0, resolved.origin
                    ));
                }
            } else {
                peer.session_type = Some(SessionType::External);
                if let Some(v) = peer.local_pref {
                    conflicts.push(format!(
                        "{at}.localPref: {v} is iBGP only; with local AS {} from {} this peer (AS {}) is eBGP",
                        local.0, resolved.origin, peer_asn.0
                    ));
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(NodeAsnError {
                reason: "PeerTypeConflict",
                message: conflicts.join("; "),
            });
        }
        Ok((config, resolved))
    }
}

/// A label or annotation value: decimal digits only, 1..4294967295, not AS_TRANS.
fn parse_node_asn(v: &str) -> Result<Asn, String> {
    let rule = || format!("is not an AS number ({ASN_RULE})");
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(rule());
    }
    match v.parse::<u32>() {
        Ok(0) | Err(_) => Err(rule()),
        Ok(a) if a == u32::from(AS_TRANS) => {
            Err("is not allowed (AS_TRANS 23456 is reserved by RFC 6793)".to_owned())
        }
        Ok(asn) => Ok(Asn(asn)),
    }
}
