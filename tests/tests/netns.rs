//! The netns tier: topologies in network namespaces (root, `ip netns`, veth pairs, the
//! kernel's forwarding), with BIRD as the ToR. Addresses stay inside the namespaces the tests
//! create. Run it with `scripts/test.sh netns` (as root).
//!
//! Crate: `tests`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "netns/bfd_dual_stack.rs"]
mod bfd_dual_stack;
