//! Pod-CIDR sources and the cluster-pool allocator. No BGP in here.
//!
//! - [`allocator`]: the pure cluster-pool allocator core and its reconciler logic (no kube types).
//!
//! The custom resources it reads and writes (`PodCIDRPool`, `NodePodCIDR`) are in `podcidr-api`
//! with every other kind of the project.
//! - [`source`]: where a node's pod CIDRs come from (`node-spec`, `ipam-crd`, `cilium-node`, `file`).

pub mod allocator;
pub mod clock;
pub mod source;
