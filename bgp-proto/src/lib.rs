//! BGP-4 wire format (RFC 4271 and extensions): messages, path attributes, capabilities,
//! the RFC 7606 error model and framing; the session FSM, OPEN negotiation and the
//! Adj-RIB-Out planner; the BFD packet and session state machine. Pure: no runtime, no
//! sockets, no clock (the drivers around these machines are in `bgp-io`).
//!
//! Decoding never panics: every read is checked ([`reader`]), every failure is a typed
//! [`DecodeError`] that maps to a NOTIFICATION and an RFC 7606 action through
//! [`error::error_handling`]. Encoding is fallible ([`EncodeError`]) and never truncates.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

pub mod bfd;
pub mod builder;
pub mod codec;
mod encode_error;
pub mod error;
pub mod iana;
pub mod message;
pub(crate) mod reader;
pub mod session;
pub mod types;

pub use codec::{CodecError, Framer};
pub use error::{Action, DecodeError, EncodeError, ErrorHandling, error_handling};
pub use message::attribute::{AsPath, AsSegment, AsSegmentType, AttrValue, PathAttribute};
pub use message::capability::{Capability, GrFamily, GracefulRestart, LlgrFamily};
pub use message::notification::{ErrorCode, Notification};
pub use message::open::Open;
pub use message::route_refresh::{RouteRefresh, RouteRefreshSubtype};
pub use message::update::{MpNextHop, MpNlri, Update};
pub use message::{Decoded, Message, WireOptions};
pub use types::{AS_TRANS, Afi, Asn, Family, HoldTime, RouterId, Safi};
