//! Bidirectional Forwarding Detection for single-hop IP (RFC 5880, RFC 5881): the Control
//! packet codec, the pure session state machine, and a thin tokio UDP driver.
//!
//! Supported: asynchronous mode, Poll/Final for parameter changes, §6.8.7 jitter, TTL 255
//! on send and the GTSM check on receive. Not supported (documented in docs/bgp.md):
//! demand mode, echo, authentication (packets with the A bit are discarded).

pub mod driver;
pub mod packet;
pub mod session;
pub mod udp;

pub use packet::{BfdState, ControlPacket, Diag, PacketEncodeError, PacketError};
pub use session::{BfdInput, BfdOutput, BfdSession, BfdSessionConfig, BfdTimer};
