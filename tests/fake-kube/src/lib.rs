//! In-process fake Kubernetes API server (issue: pod-CIDR sources).
