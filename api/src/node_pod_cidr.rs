//! `NodePodCIDR` (group `podcidr.io`): the pod CIDRs the allocator assigned to one node, and
//! the reasons of its `Allocated` condition.

use super::*;

/// Reasons of the `Allocated` condition on a `NodePodCIDR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllocatedReason {
    /// Every family the node needs has a CIDR (status `True`).
    Allocated,
    /// The allocator has not decided yet (status `Unknown`).
    Pending,
    /// A matching pool exists but has no free block (status `False`).
    PoolExhausted,
    /// No pool selects this node (status `False`).
    NoMatchingPool,
    /// The CIDR is also held by another node; excluded from BGP (status `False`).
    Conflict,
    /// `spec.podCIDRs` holds values that do not parse or are not canonical (status `False`).
    InvalidSpec,
}

impl AllocatedReason {
    /// The `reason` string written to the condition.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allocated => "Allocated",
            Self::Pending => "Pending",
            Self::PoolExhausted => "PoolExhausted",
            Self::NoMatchingPool => "NoMatchingPool",
            Self::Conflict => "Conflict",
            Self::InvalidSpec => "InvalidSpec",
        }
    }

    /// The condition `status` that goes with this reason.
    pub fn status(self) -> &'static str {
        match self {
            Self::Allocated => "True",
            Self::Pending => "Unknown",
            _ => "False",
        }
    }
}

impl std::fmt::Display for AllocatedReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The pod CIDRs the allocator assigned to one node. Name = node name; owned by the Node.
#[allow(clippy::duplicated_attributes)] // see PodCIDRPoolSpec
#[derive(
    CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default, JsonSchema,
)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "podcidr.io",
    version = "v1alpha1",
    kind = "NodePodCIDR",
    plural = "nodepodcidrs",
    shortname = "npc",
    category = "podcidr",
    status = "NodePodCIDRStatus",
    derive = "PartialEq",
    doc = "The pod CIDRs the podcidr-bgp allocator assigned to the node of the same name.",
    printcolumn(
        name = "PodCIDRs",
        type_ = "string",
        json_path = ".spec.podCIDRs",
        description = "allocated pod CIDRs, primary family first"
    ),
    printcolumn(name = "Pool", type_ = "string", json_path = ".spec.pool"),
    printcolumn(
        name = "Allocated",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Allocated\")].reason"
    ),
    printcolumn(
        name = "Mismatch",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"SourceMismatch\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct NodePodCIDRSpec {
    /// Pod CIDRs in canonical form, primary family first. Written only by the allocator.
    #[serde(rename = "podCIDRs", default)]
    #[schemars(schema_with = "schema::cidr_list")]
    pub pod_cidrs: Vec<String>,
    /// Name of the `PodCIDRPool` the CIDRs came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// Observed state of a node's allocation.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePodCIDRStatus {
    /// `Allocated` (reasons Allocated, Pending, PoolExhausted, NoMatchingPool, Conflict,
    /// InvalidSpec) and `SourceMismatch` (the Node's own spec.podCIDRs disagree).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

impl NodePodCIDR {
    /// A `NodePodCIDR` for `node`, named after it and owned by it, so it goes when the Node goes.
    pub fn for_node(node: &Node, spec: NodePodCIDRSpec) -> Self {
        let mut object = Self::new(node.meta().name.as_deref().unwrap_or_default(), spec);
        object.metadata.owner_references = node.owner_ref(&()).map(|r| vec![r]);
        object
    }
}
