//! The `NodePodCIDR` record as both sides see it: what the [`Reconciler`] observes and
//! wants written, and what a [`NodePodCidrStore`] stores. Re-exported from `reconcile`.
//!
//! [`Reconciler`]: super::Reconciler
//! [`NodePodCidrStore`]: super::NodePodCidrStore

use super::cidr::NodeUid;
use super::status::Condition;

/// A `NodePodCIDR` record as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedRecord {
    /// Record name (= node name).
    pub name: String,
    /// UID of the owning Node.
    pub owner_uid: NodeUid,
    /// `spec.podCIDRs`, unparsed.
    pub pod_cidrs: Vec<String>,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// The `Allocated` condition, if any.
    pub allocated: Option<Condition>,
}

/// Desired spec of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSpec {
    /// Owner reference target (Node UID).
    pub owner_uid: NodeUid,
    /// Canonical CIDR strings, primary family first.
    pub pod_cidrs: Vec<String>,
}
