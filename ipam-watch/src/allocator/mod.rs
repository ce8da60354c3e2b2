//! Cluster-pool allocator: pure core (no kube, no tokio, no clock).
