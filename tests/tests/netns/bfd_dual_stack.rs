//! Single-hop BFD on both families without a local address (RFC 5881 §4): the IPv4 and
//! IPv6 control ports bind the wildcard of their family on port 3784 in one process, and
//! each receives its own family's packets. Inside a namespace the test creates, so the
//! wildcard port is never opened on the host.

use integration_tests::skip::Need;
use std::net::IpAddr;
use std::time::Duration;

use bgp_io::bfd::driver::BfdTransport;
use bgp_io::bfd::udp::UdpTransport;
use integration_tests::netns::{Netns, in_netns};

#[test]
fn ipv4_and_ipv6_bfd_without_local_address_both_bind_port_3784_rfc5881_4() {
    let tag = format!("pcbfdds{}", std::process::id() % 100_000);
    integration_tests::require!(Need::Netns);
    let mut ns = Netns::default();
    ns.add(&tag);
    let result = in_netns(&tag, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let v4: IpAddr = "127.0.0.1".parse().unwrap();
            let v6: IpAddr = "::1".parse().unwrap();
            // Both orders conflict without IPV6_V6ONLY; IPv4 first is what the speaker does
            // for `tor` before `tor6`.
            let mut t4 = UdpTransport::bind(None, v4).map_err(|e| format!("IPv4: {e}"))?;
            let mut t6 = UdpTransport::bind(None, v6).map_err(|e| format!("IPv6: {e}"))?;
            // Each session's peer is its own loopback address: what it sends comes back to
            // it through its family's control port.
            for (family, t, from) in [("IPv4", &mut t4, v4), ("IPv6", &mut t6, v6)] {
                let class = t.traffic_class().map_err(|e| format!("{family}: {e}"))?;
                assert_eq!(class, 0xC0, "{family}: DSCP CS6");
                t.send(family.as_bytes())
                    .await
                    .map_err(|e| format!("{family} send: {e}"))?;
                let d = tokio::time::timeout(Duration::from_secs(5), t.recv())
                    .await
                    .map_err(|_| format!("{family}: nothing received on port 3784"))?
                    .map_err(|e| format!("{family} recv: {e}"))?;
                assert_eq!(d.payload, family.as_bytes(), "{family}");
                assert_eq!(d.from, from, "{family}");
                assert_eq!(d.ttl, Some(255), "{family}: sent with TTL 255 (GTSM)");
            }
            Ok::<_, String>(())
        })
    })
    .expect("enter the namespace");
    if let Err(e) = result {
        panic!("dual-stack BFD on wildcard addresses: {e}");
    }
}
