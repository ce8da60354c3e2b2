//! Pure extractors: one object → the CIDRs it assigns to its node.

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use kube::api::DynamicObject;
use serde_json::Value;

use super::{InvalidCidr, InvalidReason, NodeCidrs, NodeFacts};
use podcidr_api::{AllocatedReason, NodePodCIDR, condition};

/// Parse CIDR strings, keeping usable ones and reporting the rest. Families come from parsing,
/// never from list position.
pub fn parse_cidrs<'a>(values: impl IntoIterator<Item = &'a str>) -> NodeCidrs {
    let mut out = NodeCidrs::default();
    // A file source may list 100,000 CIDRs, so no scan per value (O(n²)). While the valid
    // ones come in ascending order (as generated lists do) a new one above the last cannot
    // be a duplicate; the first one out of order builds a set of those seen so far.
    let mut seen: Option<std::collections::HashSet<IpNet>> = None;
    for value in values {
        let duplicate = |net: &IpNet| {
            if seen.is_none() && out.valid.last().is_some_and(|last| last >= net) {
                seen = Some(out.valid.iter().copied().collect());
            }
            seen.as_ref().is_some_and(|set| set.contains(net))
        };
        match check(value, duplicate) {
            Ok(net) => {
                if let Some(set) = &mut seen {
                    set.insert(net);
                }
                out.valid.push(net);
            }
            Err(reason) => out.invalid.push(InvalidCidr {
                value: value.to_owned(),
                reason,
            }),
        }
    }
    // Kept for the life of the object: no growth slack (a third more at 100,000).
    out.valid.shrink_to_fit();
    out
}

fn check(value: &str, mut seen: impl FnMut(&IpNet) -> bool) -> Result<IpNet, InvalidReason> {
    let net = match plain_ipv4_net(value) {
        Some(net) => net,
        None => value.parse().map_err(|_| InvalidReason::Unparseable)?,
    };
    if net.prefix_len() == 0 {
        return Err(InvalidReason::DefaultRoute);
    }
    if net.trunc() != net {
        return Err(InvalidReason::HostBitsSet);
    }
    if seen(&net) {
        return Err(InvalidReason::Duplicate);
    }
    Ok(net)
}

/// `a.b.c.d/len` read directly, accepting exactly what `ipnet`'s parser accepts of that
/// shape (octets of 1-3 digits below 256, leading zeros included; a length of 1-2 digits up
/// to 32); `None` for anything else, which `ipnet` then parses. Its combinator parser was
/// half the cost of reading a 100,000-CIDR file.
fn plain_ipv4_net(value: &str) -> Option<IpNet> {
    fn number(digits: &[u8], max_digits: usize, below: u32) -> Option<u32> {
        if digits.is_empty() || digits.len() > max_digits {
            return None;
        }
        let mut n = 0u32;
        for &d in digits {
            if !d.is_ascii_digit() {
                return None;
            }
            n = n * 10 + u32::from(d - b'0');
        }
        (n < below).then_some(n)
    }
    let (addr, len) = value.as_bytes().split_at(value.find('/')?);
    let len = number(len.get(1..)?, 2, 33)?;
    let mut octets = [0u8; 4];
    let mut parts = addr.split(|&b| b == b'.');
    for octet in &mut octets {
        *octet = u8::try_from(number(parts.next()?, 3, 256)?).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    let len = u8::try_from(len).ok()?;
    ipnet::Ipv4Net::new(octets.into(), len).ok().map(IpNet::V4)
}

/// What a speaker reads from its own Node besides CIDRs.
pub fn node_facts(node: &Node) -> NodeFacts {
    use kube::ResourceExt;
    use std::net::IpAddr;
    let internal: Vec<IpAddr> = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .filter_map(|a| a.address.parse().ok())
        .collect();
    NodeFacts {
        uid: node.uid(),
        labels: node.labels().clone(),
        annotations: node.annotations().clone(),
        unschedulable: node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        internal_v4: internal.iter().find_map(|a| match a {
            IpAddr::V4(v) => Some(*v),
            IpAddr::V6(_) => None,
        }),
        internal_v6: internal.iter().find_map(|a| match a {
            IpAddr::V6(v) => Some(*v),
            IpAddr::V4(_) => None,
        }),
        deleting: node.metadata.deletion_timestamp.is_some(),
        deleted: false,
        taints: {
            let mut keys: Vec<String> = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .into_iter()
                .flatten()
                .map(|t| t.key.clone())
                .collect();
            keys.sort();
            keys.dedup();
            keys
        },
        // Only the message while not Ready: heartbeat times never change the facts.
        not_ready: node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "Ready" && c.status != "True")
            .map(|c| c.message.clone().unwrap_or_default()),
    }
}

/// `node-spec`: `Node.spec.podCIDRs`, or the legacy single `spec.podCIDR` when the list is empty
/// (clusters that predate dual-stack only set the latter).
pub fn desired_from_node(node: &Node) -> NodeCidrs {
    let Some(spec) = &node.spec else {
        return NodeCidrs::default();
    };
    match (&spec.pod_cidrs, &spec.pod_cidr) {
        (Some(list), _) if !list.is_empty() => parse_cidrs(list.iter().map(String::as_str)),
        (_, Some(single)) if !single.is_empty() => parse_cidrs([single.as_str()]),
        _ => NodeCidrs::default(),
    }
}

/// `ipam-crd`: `NodePodCIDR.spec.podCIDRs`. A current `Allocated=False/Conflict` verdict from
/// the allocator excludes every CIDR of the object (it does not say which family clashes); a
/// verdict about an older generation of the spec is ignored.
pub fn desired_from_node_pod_cidr(object: &NodePodCIDR) -> NodeCidrs {
    let mut out = parse_cidrs(object.spec.pod_cidrs.iter().map(String::as_str));
    if marked_conflicting(object) {
        let conflicting = out.valid.drain(..).map(|net| InvalidCidr {
            value: net.to_string(),
            reason: InvalidReason::Conflict,
        });
        out.invalid.splice(0..0, conflicting);
    }
    out
}

fn marked_conflicting(object: &NodePodCIDR) -> bool {
    let generation = object.metadata.generation;
    let conditions = object.status.iter().flat_map(|s| &s.conditions);
    conditions
        .filter(|c| c.type_ == condition::ALLOCATED)
        .filter(|c| c.status == "False" && c.reason == AllocatedReason::Conflict.as_str())
        .any(|c| match (c.observed_generation, generation) {
            (Some(seen), Some(current)) => seen == current,
            _ => true,
        })
}

/// `cilium-node`: `CiliumNode.spec.ipam.podCIDRs`, read untyped so no Cilium types are needed.
/// A non-string entry (or a non-list field) is reported as unparseable rather than dropped.
pub fn desired_from_cilium_node(object: &DynamicObject) -> NodeCidrs {
    match object.data.pointer("/spec/ipam/podCIDRs") {
        None | Some(Value::Null) => NodeCidrs::default(),
        Some(Value::Array(items)) => {
            let mut out = NodeCidrs::default();
            for item in items {
                let parsed = match item {
                    Value::String(s) => parse_cidrs_after(&out.valid, s),
                    other => unparseable(other),
                };
                out.valid.extend(parsed.valid);
                out.invalid.extend(parsed.invalid);
            }
            out
        }
        Some(other) => unparseable(other),
    }
}

/// Parse one value in the context of the ones already accepted (for duplicate detection).
fn parse_cidrs_after(seen: &[IpNet], value: &str) -> NodeCidrs {
    match check(value, |net| seen.contains(net)) {
        Ok(net) => NodeCidrs {
            valid: vec![net],
            invalid: Vec::new(),
        },
        Err(reason) => NodeCidrs {
            valid: Vec::new(),
            invalid: vec![InvalidCidr {
                value: value.to_owned(),
                reason,
            }],
        },
    }
}

fn unparseable(value: &Value) -> NodeCidrs {
    NodeCidrs {
        valid: Vec::new(),
        invalid: vec![InvalidCidr {
            value: value.to_string(),
            reason: InvalidReason::Unparseable,
        }],
    }
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;
    use proptest::prelude::*;

    /// Strings near `a.b.c.d/len`: digits, dots, slashes, leading zeros, too many digits,
    /// and a few IPv6 and garbage characters.
    fn near_ipv4() -> impl Strategy<Value = String> {
        prop_oneof![
            (any::<[u8; 4]>(), 0u8..=40)
                .prop_map(|(o, l)| format!("{}.{}.{}.{}/{l}", o[0], o[1], o[2], o[3])),
            "[0-9]{1,4}(\\.[0-9]{1,4}){2,4}/[0-9]{0,3}",
            "[0-9./:a-f+ x-]{0,20}",
            "0{0,2}[0-9]{1,3}\\.0{0,2}[0-9]{1,3}\\.0[0-9]{1,2}\\.[0-9]{1,3}/0{0,2}[0-9]{1,2}",
        ]
    }

    /// A list of values from a few addresses, in any order, repeated, some not CIDRs.
    fn cidr_lists() -> impl Strategy<Value = Vec<String>> {
        let value = prop_oneof![
            (0u8..6, 22u8..=26).prop_map(|(c, l)| format!("10.0.{c}.0/{l}")),
            (0u8..6, 22u8..=26).prop_map(|(c, l)| format!("10.0.{c}.64/{l}")),
            (0u16..6).prop_map(|c| format!("fd00:{c}::/64")),
            Just("0.0.0.0/0".to_owned()),
            Just("x".to_owned()),
        ];
        prop::collection::vec(value, 0..24)
    }

    /// The reference: the duplicate check as a scan of the values accepted so far.
    fn parse_cidrs_by_scan(values: &[String]) -> NodeCidrs {
        let mut out = NodeCidrs::default();
        for value in values {
            let parsed = parse_cidrs_after(&out.valid, value);
            out.valid.extend(parsed.valid);
            out.invalid.extend(parsed.invalid);
        }
        out
    }

    proptest! {
        /// The direct IPv4 reader never disagrees with `ipnet`: what it reads, `ipnet` reads
        /// to the same network; what it leaves, `ipnet` decides.
        #[test]
        fn plain_ipv4_reads_what_ipnet_reads(value in near_ipv4()) {
            if let Some(net) = plain_ipv4_net(&value) {
                prop_assert_eq!(Ok(net), value.parse::<IpNet>(), "{}", value);
            }
        }

        /// Sorted or not, with duplicates anywhere, the ascending-order shortcut finds the
        /// duplicates a scan finds, and keeps the same order and reasons.
        #[test]
        fn duplicates_found_as_a_scan_finds_them(mut values in cidr_lists(), sort in any::<bool>()) {
            if sort {
                values.sort_by_key(|v| v.parse::<IpNet>().ok());
            }
            let fast = parse_cidrs(values.iter().map(String::as_str));
            prop_assert_eq!(fast, parse_cidrs_by_scan(&values));
        }
    }

    /// Every canonical IPv4 CIDR takes the direct path, so the 100,000-CIDR file does.
    #[test]
    fn canonical_ipv4_cidrs_take_the_direct_path() {
        for value in [
            "10.0.0.0/26",
            "255.255.255.255/32",
            "0.0.0.0/0",
            "1.2.3.4/9",
        ] {
            assert_eq!(
                plain_ipv4_net(value),
                Some(value.parse().unwrap()),
                "{value}"
            );
        }
        for value in [
            "10.0.0.0/33",
            "256.0.0.0/8",
            "10.0.0/8",
            "10.0.0.0.0/8",
            "::/0",
        ] {
            assert_eq!(plain_ipv4_net(value), None, "{value}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;
    use kube::api::{ApiResource, ObjectMeta};
    use podcidr_api::NodePodCIDRSpec;
    use serde_json::json;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn node(pod_cidrs: Option<&[&str]>, pod_cidr: Option<&str>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("node-a".into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                pod_cidrs: pod_cidrs.map(|l| l.iter().map(|s| s.to_string()).collect()),
                pod_cidr: pod_cidr.map(str::to_owned),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn invalid(value: &str, reason: InvalidReason) -> InvalidCidr {
        InvalidCidr {
            value: value.into(),
            reason,
        }
    }

    #[test]
    fn node_ipv4_only() {
        let got = desired_from_node(&node(Some(&["10.5.112.0/24"]), None));
        assert_eq!(got.valid, vec![net("10.5.112.0/24")]);
        assert!(got.invalid.is_empty());
    }

    #[test]
    fn node_ipv6_only() {
        let got = desired_from_node(&node(Some(&["fd00:5::/64"]), None));
        assert_eq!(got.valid, vec![net("fd00:5::/64")]);
    }

    #[test]
    fn node_dual_stack_keeps_object_order_whatever_the_family() {
        let v6_first = desired_from_node(&node(Some(&["fd00:5::/64", "10.5.112.0/24"]), None));
        assert_eq!(
            v6_first.valid,
            vec![net("fd00:5::/64"), net("10.5.112.0/24")]
        );
        assert!(v6_first.invalid.is_empty(), "family by position is no rule");
    }

    #[test]
    fn node_falls_back_to_legacy_pod_cidr() {
        let legacy = desired_from_node(&node(None, Some("10.5.113.0/24")));
        assert_eq!(legacy.valid, vec![net("10.5.113.0/24")]);
        let empty_list = desired_from_node(&node(Some(&[]), Some("10.5.113.0/24")));
        assert_eq!(empty_list.valid, vec![net("10.5.113.0/24")]);
    }

    #[test]
    fn node_prefers_pod_cidrs_over_legacy_field() {
        let got = desired_from_node(&node(Some(&["10.5.112.0/24"]), Some("10.9.9.0/24")));
        assert_eq!(got.valid, vec![net("10.5.112.0/24")]);
    }

    #[test]
    fn node_without_spec_or_cidrs_is_empty() {
        assert_eq!(desired_from_node(&Node::default()), NodeCidrs::default());
        assert_eq!(desired_from_node(&node(None, None)), NodeCidrs::default());
        assert_eq!(
            desired_from_node(&node(None, Some(""))),
            NodeCidrs::default()
        );
    }

    #[test]
    fn garbage_is_reported_and_excluded() {
        let got = desired_from_node(&node(
            Some(&[
                "bogus",
                "10.5.112.0/24",
                "10.0.0.1",
                "10.0.0.0/33",
                " 10.1.0.0/24",
            ]),
            None,
        ));
        assert_eq!(got.valid, vec![net("10.5.112.0/24")]);
        let reasons: Vec<_> = got.invalid.iter().map(|i| i.reason).collect();
        assert_eq!(reasons, vec![InvalidReason::Unparseable; 4]);
        assert_eq!(got.invalid[0].value, "bogus");
    }

    #[test]
    fn host_bits_set_is_reported_and_excluded() {
        let got = parse_cidrs(["10.5.112.1/24", "fd00:5::1/64"]);
        assert!(got.valid.is_empty());
        assert_eq!(
            got.invalid,
            vec![
                invalid("10.5.112.1/24", InvalidReason::HostBitsSet),
                invalid("fd00:5::1/64", InvalidReason::HostBitsSet),
            ]
        );
    }

    #[test]
    fn default_route_is_never_a_pod_cidr() {
        let got = parse_cidrs(["0.0.0.0/0", "::/0", "10.0.0.0/8"]);
        assert_eq!(got.valid, vec![net("10.0.0.0/8")]);
        assert_eq!(
            got.invalid,
            vec![
                invalid("0.0.0.0/0", InvalidReason::DefaultRoute),
                invalid("::/0", InvalidReason::DefaultRoute),
            ]
        );
    }

    #[test]
    fn duplicates_are_reported_once_kept() {
        let got = parse_cidrs(["10.5.112.0/24", "fd00::/64", "10.5.112.0/24", "fd00:0::/64"]);
        assert_eq!(got.valid, vec![net("10.5.112.0/24"), net("fd00::/64")]);
        assert_eq!(
            got.invalid,
            vec![
                invalid("10.5.112.0/24", InvalidReason::Duplicate),
                invalid("fd00:0::/64", InvalidReason::Duplicate),
            ]
        );
    }

    #[test]
    fn node_pod_cidr_object() {
        let object = NodePodCIDR::new(
            "node-a",
            NodePodCIDRSpec {
                pod_cidrs: vec!["10.5.113.0/24".into(), "fd00:5:1::/64".into(), "x".into()],
                pool: Some("default".into()),
            },
        );
        let got = desired_from_node_pod_cidr(&object);
        assert_eq!(got.valid, vec![net("10.5.113.0/24"), net("fd00:5:1::/64")]);
        assert_eq!(got.invalid, vec![invalid("x", InvalidReason::Unparseable)]);
    }

    fn conflicted(observed: Option<i64>, generation: Option<i64>) -> NodePodCIDR {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
        use podcidr_api::NodePodCIDRStatus;
        let mut object = NodePodCIDR::new(
            "node-a",
            NodePodCIDRSpec {
                pod_cidrs: vec!["10.5.113.0/24".into(), "fd00:5:1::/64".into()],
                pool: None,
            },
        );
        object.metadata.generation = generation;
        object.status = Some(NodePodCIDRStatus {
            conditions: vec![Condition {
                type_: "Allocated".into(),
                status: "False".into(),
                reason: "Conflict".into(),
                message: "10.5.113.0/24 is also held by node-b".into(),
                observed_generation: observed,
                last_transition_time: Time(Default::default()),
            }],
        });
        object
    }

    #[test]
    fn allocator_conflict_verdict_excludes_every_cidr() {
        let got = desired_from_node_pod_cidr(&conflicted(Some(3), Some(3)));
        assert!(got.valid.is_empty());
        assert_eq!(
            got.invalid,
            vec![
                invalid("10.5.113.0/24", InvalidReason::Conflict),
                invalid("fd00:5:1::/64", InvalidReason::Conflict),
            ]
        );
        let unversioned = desired_from_node_pod_cidr(&conflicted(None, Some(3)));
        assert!(unversioned.valid.is_empty());
    }

    #[test]
    fn stale_conflict_verdict_is_ignored() {
        let got = desired_from_node_pod_cidr(&conflicted(Some(2), Some(3)));
        assert_eq!(got.valid, vec![net("10.5.113.0/24"), net("fd00:5:1::/64")]);
        assert!(got.invalid.is_empty());
    }

    fn cilium_node(spec: serde_json::Value) -> DynamicObject {
        let resource = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("cilium.io", "v2", "CiliumNode"),
            "ciliumnodes",
        );
        DynamicObject::new("node-a", &resource).data(json!({ "spec": spec }))
    }

    #[test]
    fn cilium_node_pod_cidrs() {
        let object = cilium_node(json!({
            "ipam": { "podCIDRs": ["10.5.113.0/24", "fd00:5:1::/64"] }
        }));
        let got = desired_from_cilium_node(&object);
        assert_eq!(got.valid, vec![net("10.5.113.0/24"), net("fd00:5:1::/64")]);
    }

    #[test]
    fn cilium_node_without_ipam_is_empty() {
        assert_eq!(
            desired_from_cilium_node(&cilium_node(json!({}))),
            NodeCidrs::default()
        );
        let null = cilium_node(json!({ "ipam": { "podCIDRs": null } }));
        assert_eq!(desired_from_cilium_node(&null), NodeCidrs::default());
    }

    #[test]
    fn cilium_node_malformed_entries_are_reported() {
        let object = cilium_node(json!({
            "ipam": { "podCIDRs": [42, "10.5.113.0/24", "10.5.113.0/24", "10.5.114.7/24"] }
        }));
        let got = desired_from_cilium_node(&object);
        assert_eq!(got.valid, vec![net("10.5.113.0/24")]);
        assert_eq!(
            got.invalid,
            vec![
                invalid("42", InvalidReason::Unparseable),
                invalid("10.5.113.0/24", InvalidReason::Duplicate),
                invalid("10.5.114.7/24", InvalidReason::HostBitsSet),
            ]
        );
        let not_a_list = cilium_node(json!({ "ipam": { "podCIDRs": "10.5.113.0/24" } }));
        assert_eq!(
            desired_from_cilium_node(&not_a_list).invalid,
            vec![invalid("\"10.5.113.0/24\"", InvalidReason::Unparseable)]
        );
    }
}
