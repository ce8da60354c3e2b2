//! BFD over UDP (RFC 5880, 5881): the driver that runs `bgp_proto::bfd::BfdSession` in a
//! task, and the UDP transport with the single-hop TTL 255 check.

pub mod driver;
pub mod drops;
pub mod route;
pub mod runtime;
pub mod udp;
