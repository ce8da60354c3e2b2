//! Custom resources: `PodCIDRPool` and `NodePodCIDR` (group `podcidr.io`, version `v1alpha1`).
