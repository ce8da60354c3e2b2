//! The netns tier: topologies in network namespaces (root, `ip netns`, veth pairs, the
//! kernel's forwarding), with BIRD as the ToR. Addresses stay inside the namespaces the tests
//! create. Run it with `scripts/test.sh netns` (as root).
//!
//! Crate: `speaker`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "common/mod.rs"]
mod common;

#[path = "netns/netns_bfd.rs"]
mod netns_bfd;
#[path = "netns/netns_bfd_auth.rs"]
mod netns_bfd_auth;
#[path = "netns/netns_bfd_link_local.rs"]
mod netns_bfd_link_local;
#[path = "netns/netns_cni.rs"]
mod netns_cni;
#[path = "netns/netns_default_gateway.rs"]
mod netns_default_gateway;
#[path = "netns/netns_forwarding_gate.rs"]
mod netns_forwarding_gate;
#[path = "netns/netns_service_vip.rs"]
mod netns_service_vip;
#[path = "netns/netns_topology.rs"]
mod netns_topology;
#[path = "netns/netns_unnumbered.rs"]
mod netns_unnumbered;
#[path = "netns/run_model.rs"]
mod run_model;
