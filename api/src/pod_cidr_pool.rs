//! `PodCIDRPool` (group `podcidr.io`): a cluster pool of pod CIDRs the allocator splits into
//! per-node blocks, and what it reports of their use.

use super::*;

/// A cluster pool of pod CIDRs, split into one block per node and family.
// The lint mistakes repeated `type_ = "…"` inside separate `printcolumn(…)` for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "podcidr.io",
    version = "v1alpha1",
    kind = "PodCIDRPool",
    plural = "podcidrpools",
    shortname = "pcp",
    category = "podcidr",
    status = "PodCIDRPoolStatus",
    derive = "PartialEq",
    doc = "A pool of pod CIDRs that the podcidr-bgp allocator splits into one block per node \
           and family.",
    printcolumn(
        name = "IPv4",
        type_ = "string",
        json_path = ".spec.ipv4.cidrs",
        description = "IPv4 pool CIDRs"
    ),
    printcolumn(
        name = "V4Mask",
        type_ = "integer",
        json_path = ".spec.ipv4.maskSize",
        description = "IPv4 per-node prefix length"
    ),
    printcolumn(
        name = "IPv6",
        type_ = "string",
        json_path = ".spec.ipv6.cidrs",
        description = "IPv6 pool CIDRs"
    ),
    printcolumn(
        name = "V6Mask",
        type_ = "integer",
        json_path = ".spec.ipv6.maskSize",
        description = "IPv6 per-node prefix length"
    ),
    printcolumn(
        name = "V4Free",
        type_ = "integer",
        json_path = ".status.ipv4.free",
        description = "free IPv4 node blocks"
    ),
    printcolumn(
        name = "V6Free",
        type_ = "integer",
        json_path = ".status.ipv6.free",
        description = "free IPv6 node blocks"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Exhausted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Exhausted\")].status",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
// The apiserver rejects the obviously bad pools; the allocator still checks everything else
// (parsing, overlaps) and reports it as a condition.
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.ipv4) || has(self.ipv6)",
    "message": "a pool needs ipv4, ipv6 or both"
}]))]
pub struct PodCIDRPoolSpec {
    /// IPv4 part of the pool; absent for an IPv6-only pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.maskSize <= 32",
        "message": "an IPv4 maskSize is at most 32"
    }, {
        "rule": "self.cidrs.all(c, !c.contains(':'))",
        "message": "ipv4.cidrs holds IPv4 CIDRs only"
    }]))]
    pub ipv4: Option<PoolFamily>,
    /// IPv6 part of the pool; absent for an IPv4-only pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.cidrs.all(c, c.contains(':'))",
        "message": "ipv6.cidrs holds IPv6 CIDRs only"
    }]))]
    pub ipv6: Option<PoolFamily>,
    /// Nodes this pool serves; absent selects every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::label_selector")]
    pub node_selector: Option<LabelSelector>,
}

/// The CIDRs of one address family in a pool and the per-node block size.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolFamily {
    /// Pool CIDRs in canonical form, e.g. `10.5.112.0/21`.
    #[schemars(schema_with = "schema::pool_cidrs")]
    pub cidrs: Vec<String>,
    /// Prefix length of each node's block, e.g. `24` (IPv4) or `64` (IPv6).
    #[schemars(range(min = 1, max = 128))]
    pub mask_size: u8,
}

/// Observed state of a pool, written by the allocator.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodCIDRPoolStatus {
    /// IPv4 block counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<FamilyUsage>,
    /// IPv6 block counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<FamilyUsage>,
    /// `Ready`, `Overlapping`, `Exhausted`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
    /// The pool `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Node-block counts of one family. Counts saturate at `u64::MAX` (an IPv6 /0 split in /64s).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FamilyUsage {
    /// Node blocks the pool holds in total.
    #[serde(default)]
    pub capacity: u64,
    /// Node blocks assigned to live nodes.
    #[serde(default)]
    pub allocated: u64,
    /// Node blocks available now.
    #[serde(default)]
    pub free: u64,
    /// Released blocks still withheld until routers have forgotten them.
    #[serde(default)]
    pub quarantined: u64,
}
