//! The quick tier: pure tests that need nothing installed and no API server: in-process
//! code, loopback sockets inside this process, and the built `podcidr-bgp` binary. Run it with
//! `scripts/test.sh quick`; each module is one former test file, tests keep their names.
//!
//! Crate: `bgp-io`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "driver_harness/mod.rs"]
mod driver_harness;
#[path = "../../bgp-proto/tests/frames/mod.rs"]
mod frames;

#[path = "quick/bfd_driver.rs"]
mod bfd_driver;
#[path = "quick/bfd_peer_replaced.rs"]
mod bfd_peer_replaced;
#[path = "quick/bfd_udp_admit.rs"]
mod bfd_udp_admit;
#[path = "quick/codec.rs"]
mod codec;
#[path = "quick/collector.rs"]
mod collector;
#[path = "quick/driver.rs"]
mod driver;
#[path = "quick/driver_bfd.rs"]
mod driver_bfd;
#[path = "quick/driver_collision.rs"]
mod driver_collision;
#[path = "quick/driver_limits.rs"]
mod driver_limits;
#[path = "quick/transport.rs"]
mod transport;
