//! The CEL rules (`x-kubernetes-validations`, Kubernetes 1.25+) of the configuration objects:
//! the config file's cross-field rules (config/src/validate.rs, peer.rs, peer_auto.rs,
//! peer_endpoint.rs) with the same meaning, so `kubectl apply` refuses what every speaker
//! would. Rules that need another object (iBGP or eBGP depends on the BGPSpeakerConfig's
//! AS; endpoints unique per node) stay with the readers and the objects' conditions. Older
//! servers drop the key; the readers check everything again. Evaluated in
//! speaker/tests/apiserver/crd_validation_rules.rs.

use serde_json::{Value, json};

/// CEL: the seconds of a duration field (`90`, `"90s"`, `"5m"`, `"1h"`; the schema's
/// pattern admits no other string).
fn seconds(field: &str) -> String {
    format!("(type({field}) == int ? {field} : duration({field}).getSeconds())")
}

fn rule(rule: impl Into<String>, message: &str) -> Value {
    json!({"rule": rule.into(), "message": message})
}

/// `BGPSpeakerConfig.spec`.
pub(super) fn speaker_config() -> Value {
    let file = "(has(self.source) && self.source.kind == 'file')";
    json!([
        rule(
            "has(self.asn) != has(self.asnFrom)",
            "exactly one of asn, asnFrom is required (the local AS: a number, or read from the Node)",
        ),
        rule(
            format!("{file} || (has(self.allowedPrefixes) && size(self.allowedPrefixes) > 0)"),
            "allowedPrefixes is required and non-empty unless source.kind is file (the announce guard only announces pod CIDRs inside these)",
        ),
        rule(
            format!("!{file} || !has(self.asnOverrides)"),
            "asnOverrides is not allowed with source.kind file (no Node labels to select on)",
        ),
        rule(
            format!("!{file} || !has(self.asnFrom)"),
            "asnFrom is not allowed with source.kind file (there is no Node to read it from): set asn",
        ),
        rule(
            "!has(self.routerId) || self.routerId != '0.0.0.0'",
            "routerId must be non-zero (RFC 6286)",
        ),
    ])
}

/// `BGPSpeakerConfig.spec.source`.
pub(super) fn source() -> Value {
    json!([rule(
        "(self.kind == 'file') == has(self.path)",
        "source.path is required when source.kind is file, and only read then",
    )])
}

/// `BGPSpeakerConfig.spec.asnFrom`.
pub(super) fn asn_from() -> Value {
    json!([
        rule(
            "has(self.nodeLabel) != has(self.nodeAnnotation)",
            "asnFrom takes exactly one of nodeLabel, nodeAnnotation",
        ),
        rule(
            "!has(self.default) || self.default != 23456",
            "asnFrom.default 23456 (AS_TRANS) is reserved by RFC 6793",
        ),
    ])
}

/// `BGPSpeakerConfig.spec.asnOverrides[i]`.
pub(super) fn asn_override() -> Value {
    json!([rule(
        "self.asn != 23456",
        "asn 23456 (AS_TRANS) is reserved by RFC 6793",
    )])
}

/// `BGPSpeakerConfig.spec.source.path`: a file under OBJECT_FILE_SOURCE_DIR, no `.`/`..`
/// component, no empty one.
pub(super) fn object_file_source_path() -> Value {
    json!([rule(
        format!(
            "self.startsWith('{dir}') && size(self) > {len} && !self.contains('//') && \
             !self.contains('/./') && !self.contains('/../') && !self.endsWith('/.') && \
             !self.endsWith('/..') && !self.endsWith('/')",
            dir = super::OBJECT_FILE_SOURCE_DIR,
            len = super::OBJECT_FILE_SOURCE_DIR.len()
        ),
        "source.path must be a file under /etc/podcidr-bgp/cidrs/ (no . or .. components)",
    )])
}

/// `BGPSpeakerConfig.spec.gracefulShutdown`.
pub(super) fn graceful_shutdown() -> Value {
    let wait = seconds("self.wait");
    json!([rule(
        format!("!has(self.wait) || {wait} <= 300"),
        "gracefulShutdown.wait is 0..300 seconds",
    )])
}

/// `BGPSpeakerConfig.spec.status`.
pub(super) fn status() -> Value {
    let interval = seconds("self.minInterval");
    json!([rule(
        format!("!has(self.minInterval) || ({interval} >= 1 && {interval} <= 3600)"),
        "status.minInterval is 1..3600 seconds",
    )])
}

/// `BGPPeer.spec`.
pub(super) fn peer() -> Value {
    let hold = seconds("self.holdTime");
    let keepalive = seconds("self.keepaliveTime");
    let flag = |f: &str| format!("(has(self.{f}) && self.{f})");
    let (passive, accept, ttl, enh) = (
        flag("passive"),
        flag("acceptIncoming"),
        flag("ttlSecurity"),
        flag("extendedNextHop"),
    );
    let bfd_on = "(has(self.bfd) && !(has(self.bfd.enabled) && !self.bfd.enabled))";
    let gateway = "(has(self.address) && self.address == 'default-gateway')";
    json!([
        rule(
            "has(self.address) != has(self.interface)",
            "exactly one of address, interface: a peer is at an address (or default-gateway) or the neighbor on an interface",
        ),
        rule(
            "!has(self.peerAddress) || has(self.interface)",
            "peerAddress names the neighbor on an interface: set interface too, or use address",
        ),
        rule(
            format!("!has(self.addressFamily) || {gateway}"),
            "addressFamily is only allowed with address: default-gateway",
        ),
        rule(
            format!("!has(self.localAddress) || (has(self.address) && !{gateway})"),
            "localAddress is not allowed with interface (the source is its link-local address) or with address: default-gateway (the node's own address on each gateway's link)",
        ),
        rule(
            format!(
                "!has(self.localAddress) || !has(self.address) || {gateway} || \
                 (self.localAddress != self.address && self.localAddress.contains(':') == self.address.contains(':'))"
            ),
            "localAddress must differ from address and be of its family",
        ),
        rule(
            "type(self.asn) == string || self.asn != 23456",
            "asn 23456 (AS_TRANS) is reserved by RFC 6793",
        ),
        rule(
            "(type(self.asn) == string) == has(self.allowedAsns)",
            "allowedAsns is required with asn: auto, and only allowed with it",
        ),
        rule(
            format!("!(has(self.interface) && !has(self.peerAddress)) || !({passive} || {accept})"),
            "passive and acceptIncoming need the neighbor's address: set peerAddress with interface",
        ),
        rule(
            format!("!({passive} && has(self.acceptIncoming) && !self.acceptIncoming)"),
            "a passive peer only accepts connections: remove acceptIncoming or passive",
        ),
        rule(
            format!("!{enh} || !has(self.families) || 'ipv4-unicast' in self.families"),
            "extendedNextHop carries ipv4-unicast routes, and families has no ipv4-unicast",
        ),
        rule(
            format!("!has(self.holdTime) || {hold} == 0 || ({hold} >= 3 && {hold} <= 65535)"),
            "holdTime is 0 or 3..65535 seconds (RFC 4271 4.2)",
        ),
        rule(
            format!(
                "!has(self.keepaliveTime) || (has(self.holdTime) && {hold} == 0 ? {keepalive} == 0 : \
                 ({keepalive} >= 1 && {keepalive} < (has(self.holdTime) ? {hold} : 90)))"
            ),
            "keepaliveTime is 1 second up to below holdTime (default 90), and 0 when holdTime is 0",
        ),
        rule(
            format!("!({ttl} && has(self.ebgpMultihop) && self.ebgpMultihop > 1)"),
            "ttlSecurity and ebgpMultihop above 1 cannot be combined, as in FRR",
        ),
        rule(
            format!("!{bfd_on} || !has(self.ebgpMultihop) || self.ebgpMultihop <= 1"),
            "single-hop BFD (RFC 5881) cannot be combined with ebgpMultihop above 1",
        ),
    ])
}

/// `BGPPeer.spec.connectRetry`.
pub(super) fn connect_retry() -> Value {
    let (base, max) = (seconds("self.base"), seconds("self.max"));
    json!([
        rule(
            format!(
                "(!has(self.base) || ({base} >= 1 && {base} <= 3600)) && \
                 (!has(self.max) || ({max} >= 1 && {max} <= 3600))"
            ),
            "connectRetry.base and connectRetry.max are 1..3600 seconds",
        ),
        rule(
            format!("!has(self.max) || {max} >= (has(self.base) ? {base} : 1)"),
            "connectRetry.max is at least connectRetry.base",
        ),
    ])
}

/// `BGPPeer.spec.gracefulRestart`.
pub(super) fn graceful_restart() -> Value {
    let restart = seconds("self.restartTime");
    let llst = seconds("self.longLivedStaleTime");
    json!([
        rule(
            format!("!has(self.restartTime) || {restart} <= 4095"),
            "gracefulRestart.restartTime is 0..4095 seconds (a 12-bit field in RFC 4724)",
        ),
        rule(
            format!("!has(self.longLivedStaleTime) || {llst} <= 16777215"),
            "gracefulRestart.longLivedStaleTime is 0..16777215 seconds (a 24-bit field in RFC 9494)",
        ),
        rule(
            format!(
                "!has(self.longLivedStaleTime) || {llst} == 0 || !has(self.enabled) || self.enabled"
            ),
            "gracefulRestart.longLivedStaleTime needs gracefulRestart.enabled (RFC 9494 rides on the graceful restart capability)",
        ),
    ])
}
