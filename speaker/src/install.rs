//! Names the shipped install (deploy/) gives things, which the speaker, the allocator and the
//! CLI agree on without importing each other.

/// Where speakers keep their liveness Leases: the only namespace the shipped speaker Role may
/// write Leases in, and the only one `diff` believes them from (a Lease elsewhere, created by
/// any controller that may write Leases there, could fake a node's liveness).
pub const SPEAKER_LEASE_NAMESPACE: &str = "podcidr-node-lease";
