//! Our session over real loopback TCP into the collector: announce, change, withdraw.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use bgp_io::collector::{Collector, CollectorConfig};
use bgp_io::driver::{self, TcpConnector};
use bgp_io::transport::{ConnectOptions, TtlSecurity};
use bgp_proto::session::{RouteAttributes, RouteSet, Session, SessionConfig, StopReason};
use bgp_proto::{Asn, Family, RouterId};
use ipnet::IpNet;
use tokio::sync::watch;

fn set(prefixes: &[&str]) -> Arc<RouteSet> {
    Arc::new(
        prefixes
            .iter()
            .map(|p| {
                let p: IpNet = p.parse().unwrap();
                let nh = if p.addr().is_ipv4() {
                    "192.0.2.10"
                } else {
                    "2001:db8::10"
                };
                (
                    p,
                    Arc::new(RouteAttributes::with_next_hop(nh.parse().unwrap())),
                )
            })
            .collect(),
    )
}

#[tokio::test]
async fn session_announces_changes_and_withdraws_into_the_collector() {
    let collector = Collector::start(CollectorConfig::new("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let id = Ipv4Addr::new(192, 0, 2, 10);
    let cfg = SessionConfig::new(Asn(4_200_000_001), RouterId::new(id).unwrap(), Asn(65000));
    let connector = TcpConnector {
        peer: collector.local_addr(),
        options: ConnectOptions::new(TtlSecurity::IBGP_DEFAULT),
    };
    let (routes, rx) = watch::channel(Some(set(&["198.19.1.0/24", "fd00:19:1::/64"])));
    let task = driver::spawn(Session::new(cfg), connector, None, rx);
    assert!(
        collector
            .wait_for(Duration::from_secs(10), |r| r.get(&id).is_some_and(|t| t
                .routes
                .len()
                == 2
                && t.end_of_rib.contains(&Family::IPV6_UNICAST)))
            .await,
        "{:?}",
        collector.rib()
    );
    let rib = collector.rib();
    assert_eq!(rib[&id].withdrawn, 0);
    let v6 = &rib[&id].routes[&"fd00:19:1::/64".parse::<IpNet>().unwrap()];
    assert_eq!(v6.next_hop, Some("2001:db8::10".parse().unwrap()));
    assert_eq!(v6.as_path, vec![4_200_000_001]);

    routes.send(Some(set(&["198.19.2.0/24"]))).unwrap();
    assert!(
        collector
            .wait_for(Duration::from_secs(10), |r| r.get(&id).is_some_and(|t| t
                .routes
                .keys()
                .eq([&"198.19.2.0/24".parse::<IpNet>().unwrap()])))
            .await
    );
    assert_eq!(
        collector.rib()[&id].withdrawn,
        2,
        "both old prefixes withdrawn"
    );
    task.stop(StopReason::Shutdown("test done".into()));
    task.wait().await;
    assert!(
        collector
            .wait_for(Duration::from_secs(10), |r| r.is_empty())
            .await
    );
}
