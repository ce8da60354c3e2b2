//! Which source address the kernel would use towards a peer: a routing lookup through a
//! connected UDP socket (nothing is sent).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6, UdpSocket};

use podcidr_config::PeerAddress;

/// The source address towards a peer: [`route_source`], scoped to the interface for an
/// interface peer (its link-local address there; towards all-nodes multicast while the
/// neighbor is unknown).
pub fn peer_source(peer: &PeerAddress) -> Option<IpAddr> {
    match peer {
        PeerAddress::Fixed(dst) => route_source(*dst),
        PeerAddress::Interface { name, peer } => {
            let index = bgp_io::transport::interface_index(name).ok()?;
            let dst = peer.unwrap_or(Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1));
            source_towards(SocketAddrV6::new(dst, 179, 0, index).into())
        }
        // Resolved before any session starts (`default_route::resolve_peers`).
        PeerAddress::DefaultGateway(_) => None,
    }
}

/// The source address the kernel would use towards `dst` (a routing lookup; UDP `connect`
/// sends nothing).
pub fn route_source(dst: IpAddr) -> Option<IpAddr> {
    source_towards(SocketAddr::new(dst, 179))
}

fn source_towards(dst: SocketAddr) -> Option<IpAddr> {
    let bind: SocketAddr = match dst {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(bind).ok()?;
    sock.connect(dst).ok()?;
    sock.local_addr()
        .ok()
        .map(|a| a.ip())
        .filter(|ip| !ip.is_unspecified())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_interface_has_no_source_address() {
        let missing = PeerAddress::Interface {
            name: "podcidr-none0".into(),
            peer: None,
        };
        assert_eq!(peer_source(&missing), None);
    }

    #[test]
    fn route_source_of_loopback_is_loopback() {
        assert_eq!(
            route_source("127.0.0.1".parse().unwrap()),
            Some("127.0.0.1".parse().unwrap())
        );
    }
}
