//! BGP and BFD over sockets, around `bgp-proto`'s pure state machines: the `tokio_util`
//! codec ([`BgpCodec`]), the session driver ([`driver`]: one task per peer running the FSM,
//! a reader and a writer with the send hold timer), the BFD driver and its UDP transport
//! ([`bfd`]), TCP connect and listen with TCP MD5, GTSM and DSCP ([`transport`]), and a
//! passive route collector ([`collector`]) that plays a router in tests, the demo and the
//! benchmarks.
//!
//! What happens on the wire is decided in `bgp-proto` (no runtime there); this crate moves
//! bytes and time.

pub mod bfd;
pub mod codec;
pub mod collector;
pub mod driver;
pub mod transport;

pub use bgp_proto::codec::CodecError;
pub use codec::BgpCodec;
