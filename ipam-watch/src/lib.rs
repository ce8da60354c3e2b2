//! Pod-CIDR sources and the cluster-pool allocator.
