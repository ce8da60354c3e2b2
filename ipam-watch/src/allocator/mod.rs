//! Cluster-pool allocator: pure core (no kube, no tokio, no clock; time is a [`Timestamp`]).
//!
//! Rules (each guards against a public allocator bug; see `tests/allocator_regressions.rs`):
//! - per pool CIDR a [`FreeRuns`] interval map: lowest free slot first, O(log runs), no cap on
//!   the split (an IPv6 /32 into /64s is one run when empty);
//! - every held CIDR has owners (node UIDs); release is owner-checked; published CIDRs are
//!   quarantined for [`DEFAULT_QUARANTINE_SECS`] before reuse; a reservation whose write
//!   never left us (definite failure) goes straight back;
//! - no allocation before every record is restored ([`Allocator::mark_restored`]);
//! - a CIDR overlapping another node's is a conflict for all of them: reported, not
//!   announced, never absorbed or moved;
//! - families by parsing; dual-stack allocation is all-or-nothing per step;
//! - overlapping pool CIDRs are rejected with `Overlapping` (the pool sorting first by name
//!   keeps the space, so a restart decides the same way); removed CIDRs drain: holders keep
//!   them, they block reuse and are reported ([`Allocator::draining`], pool `draining`);
//! - the [`Reconciler`] turns observed state into [`Action`]s for a [`NodePodCidrStore`]:
//!   spec writes are a create or a patch conditioned on `resourceVersion` (used to fill an
//!   empty record, add a missing family, or take over the record of a previous node with the
//!   same name); unknown outcomes keep the reservation; status is written only on change;
//!   nothing is deleted.
//!
//! Restart: state is a function of (records, pools). Quarantine lives in memory; records of
//! gone nodes are re-quarantined from the restart time, but a CIDR whose record was already
//! garbage-collected is reusable at once after a restart.

mod accounting;
pub mod api_client;
mod cidr;
mod core;
mod free_runs;
pub mod kube_store;
pub mod lease;
mod metrics;
mod observe;
mod pool;
pub mod pool_sync;
mod prefix_set;
mod reconcile;
mod record;
mod runner;
mod selector;
mod status;
mod store;
pub mod throttle;

pub use self::accounting::{ActiveRange, Announcement, Draining};
pub use self::cidr::{CidrError, Family, NodeUid, PodCidr, Timestamp};
pub use self::core::{
    AllocError, Allocator, AllocatorConfig, DEFAULT_QUARANTINE_SECS, Held, HeldState, NodeEntry,
    OccupyOutcome, ReleaseOutcome,
};
pub use self::free_runs::FreeRuns;
pub use self::pool::{DEFAULT_POOL, FamilyPoolSpec, PodCidrPool};
pub use self::reconcile::{
    Action, ExecReport, Observed, ObservedNode, ObservedRecord, Reconciler, RecordSpec,
};
pub use self::selector::NodeSelector;
pub use self::status::{
    ALLOCATED, AllocatedReason, Condition, ConditionStatus, EXHAUSTED, FamilyAccounting,
    NodeOutcome, OVERLAPPING, PoolStatus, READY,
};
pub use self::store::{FakeStore, Fault, NodePodCidrStore, WriteOutcome};

// The process around the pure core (kube, tokio, clock): see `runner`.
pub use self::api_client::ApiClients;
pub use self::lease::{Clock, LeaderState, LeaseConfig, SystemClock};
pub use self::metrics::{AllocatorMetrics, ConfigObjectLabels, RolloutLabels, ServiceEventLabels};
pub use self::runner::{AllocatorOptions, EVENT_NAMESPACE, NO_POOL, RunError, run};
pub use self::throttle::{ApiLimits, ApiLimitsError, DEFAULT_API_BURST, DEFAULT_API_QPS};
