//! Structured status: conditions, per-node outcomes, per-pool accounting.

use super::cidr::Family;

/// Condition status, as in `metav1.Condition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// Not known.
    Unknown,
}

impl ConditionStatus {
    /// API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// A structured condition (the kube side adds `lastTransitionTime` / `observedGeneration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// Condition type, e.g. `Allocated`, `Ready`, `Overlapping`, `Exhausted`.
    pub type_: String,
    /// True / False / Unknown.
    pub status: ConditionStatus,
    /// CamelCase reason.
    pub reason: String,
    /// Human message; deterministic so that unchanged state means no write.
    pub message: String,
}

impl Condition {
    /// Builds a condition.
    pub fn new(
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

// Condition types and reasons are the API's (one definition, in `podcidr_api`).
pub use podcidr_api::AllocatedReason;
pub use podcidr_api::condition::{ALLOCATED, EXHAUSTED, OVERLAPPING, READY};

/// Outcome of one node's reconcile step, rendered into its `Allocated` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOutcome {
    /// Why.
    pub reason: AllocatedReason,
    /// Details.
    pub message: String,
}

impl NodeOutcome {
    /// The `Allocated` condition for this outcome.
    pub fn condition(&self) -> Condition {
        let status = if self.reason == AllocatedReason::Allocated {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        Condition::new(
            ALLOCATED,
            status,
            self.reason.as_str(),
            self.message.clone(),
        )
    }
}

/// Accounting of one family of one pool, in node-size slots.
///
/// `capacity == allocated + free + quarantined + blocked` always holds. `draining` counts
/// allocations attributed to this pool that lie outside its current CIDRs (after a shrink):
/// they stay owned and block reuse, but are outside `capacity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyAccounting {
    /// Family.
    pub family: Family,
    /// Node mask size.
    pub mask_size: u8,
    /// Slots in the pool's active CIDRs.
    pub capacity: u128,
    /// Slots held by nodes at the pool mask (confirmed or reserved).
    pub allocated: u128,
    /// Slots that can be allocated now.
    pub free: u128,
    /// Released slots waiting for quarantine to expire.
    pub quarantined: u128,
    /// Slots covered by allocations not at the pool mask (foreign or older masks).
    pub blocked: u128,
    /// Allocations of this pool outside its active CIDRs.
    pub draining: u128,
}

/// Status of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStatus {
    /// Pool name.
    pub name: String,
    /// Per-family accounting (families the pool defines).
    pub families: Vec<FamilyAccounting>,
    /// `Ready`, `Overlapping`, `Exhausted`.
    pub conditions: Vec<Condition>,
}

impl PoolStatus {
    /// Condition by type.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Accounting of one family.
    pub fn family(&self, f: Family) -> Option<&FamilyAccounting> {
        self.families.iter().find(|a| a.family == f)
    }
}
