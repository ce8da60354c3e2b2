//! The quick tier: pure tests that need nothing installed and no API server: in-process
//! code, loopback sockets inside this process, and the built `podcidr-bgp` binary. Run it with
//! `scripts/test.sh quick`; each module is one former test file, tests keep their names.
//!
//! Crate: `bgp-proto`. What each tier needs: docs/architecture.md, "Test tiers".

#[path = "frames/mod.rs"]
mod frames;
#[path = "fsm_harness/mod.rs"]
mod fsm_harness;

#[path = "quick/bfd_auth.rs"]
mod bfd_auth;
#[path = "quick/bfd_packet.rs"]
mod bfd_packet;
#[path = "quick/bfd_session.rs"]
mod bfd_session;
#[path = "quick/errors.rs"]
mod errors;
#[path = "quick/fsm_bfd.rs"]
mod fsm_bfd;
#[path = "quick/fsm_collision.rs"]
mod fsm_collision;
#[path = "quick/fsm_decode.rs"]
mod fsm_decode;
#[path = "quick/fsm_flow.rs"]
mod fsm_flow;
#[path = "quick/fsm_next_hop.rs"]
mod fsm_next_hop;
#[path = "quick/fsm_peer_as.rs"]
mod fsm_peer_as;
#[path = "quick/fsm_props.rs"]
mod fsm_props;
#[path = "quick/fsm_table.rs"]
mod fsm_table;
#[path = "quick/props.rs"]
mod props;
#[path = "quick/regressions.rs"]
mod regressions;
#[path = "quick/vectors.rs"]
mod vectors;
