//! Departure or restart at SIGTERM (issue 23 item 4) against a real kube-apiserver:
//! what the server itself does to a Node that is being deleted (a finalizer holds it, the
//! DELETE sets `deletionTimestamp`) or tainted by the cluster autoscaler reaches the speaker
//! through its Node watch with the shipped RBAC (nothing new: the speaker already watches its
//! Node), and its SIGTERM becomes RFC 8326 graceful shutdown, then Cease/Administrative
//! Shutdown, on the wire; with no 403 on the way.

use crate::common;

use std::net::{Ipv4Addr, SocketAddr};

use bgp_io::collector::{Collector, SessionEnd};
use common::real_api::{self, ControlPlane, Identity, WAIT, collector, requests_by, runtime};
use common::{Proc, TempDir, free_port};

const GSHUT: u32 = 0xFFFF_0000;

/// `node`'s speaker with the `node-spec` source, one graceful-restart peer (`tor`) and a
/// one-second RFC 8326 wait.
fn speaker(dir: &TempDir, id: &Identity, node: &str, tor: &Collector) -> Proc {
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = format!(
        "nodeName: {node}\nasn: 64512\nsource: {{kind: node-spec}}\n\
         allowedPrefixes: [10.244.0.0/16]\nnextHop: {{ipv4: node}}\n\
         gracefulShutdown: {{wait: 1s}}\n\
         peers:\n  - {{name: tor1, address: 127.0.0.1, port: {}, asn: 65000, ebgpMultihop: 2, \
         connectRetry: {{base: 1, max: 2}}}}\n\
         admin: {{listen: \"{admin}\"}}\nstatus: {{publish: false}}\n",
        tor.local_addr().port()
    );
    real_api::spawn_speaker(dir, id, node, &config, &format!("{node}.log"))
}

/// Waits for `node`'s route, applies `leave` with kubectl, waits until the speaker has seen
/// it, sends SIGTERM and returns how its session ended.
fn departs(
    rt: &tokio::runtime::Runtime,
    tor: &Collector,
    s: &mut Proc,
    id: Ipv4Addr,
    route: &str,
    leave: impl FnOnce(),
) -> SessionEnd {
    let route: ipnet::IpNet = route.parse().unwrap();
    let up = rt.block_on(tor.wait_for(WAIT, |r| {
        r.get(&id).is_some_and(|t| t.routes.contains_key(&route))
    }));
    assert!(up, "no route\n{}", s.log());
    leave();
    real_api::wait_for(WAIT, "the speaker sees the node leaving", || {
        s.log().contains("a stop now is a departure").then_some(())
    });
    s.signal(libc::SIGTERM);
    let end = rt.block_on(tor.wait_for_end(WAIT, id));
    let end = end.unwrap_or_else(|| panic!("session never ended\n{}", s.log()));
    s.wait_exit(WAIT).expect("the speaker exits");
    assert!(end.routes[&route].communities.contains(&GSHUT), "{end:?}");
    end
}

fn cease_message(end: &SessionEnd) -> String {
    let n = end
        .notification
        .as_ref()
        .expect("a NOTIFICATION: a departure");
    assert_eq!((u8::from(n.code), n.subcode), (6, 2), "{n:?}");
    String::from_utf8_lossy(&n.data[1..]).into_owned()
}

#[test]
fn a_node_being_deleted_or_scaled_down_departs_through_the_real_api() {
    let cp = integration_tests::needs!(real_api::installed_control_plane());
    let rt = runtime();
    let tor = collector(&rt);
    let dir = TempDir::new("real-api-departure");
    cp.create_node("node-a", "198.18.0.10", &["10.244.1.0/24"]);
    cp.create_node("node-b", "198.18.0.11", &["10.244.2.0/24"]);
    let ident = real_api::speaker_identity(&cp, "node-a");
    let ident_b = real_api::speaker_identity(&cp, "node-b");
    // What a cloud controller's finalizer does: the DELETE only marks the Node.
    cp.kubectl(&[
        "patch",
        "node",
        "node-a",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);

    let mut a = speaker(&dir, &ident, "node-a", &tor);
    let end = departs(
        &rt,
        &tor,
        &mut a,
        Ipv4Addr::new(198, 18, 0, 10),
        "10.244.1.0/24",
        || {
            cp.kubectl(&["delete", "node", "node-a", "--wait=false"]);
        },
    );
    assert!(
        cease_message(&end).contains("the Node is being deleted"),
        "{end:?}"
    );

    let mut b = speaker(&dir, &ident_b, "node-b", &tor);
    let end = departs(
        &rt,
        &tor,
        &mut b,
        Ipv4Addr::new(198, 18, 0, 11),
        "10.244.2.0/24",
        || {
            cp.kubectl(&[
                "taint",
                "node",
                "node-b",
                "ToBeDeletedByClusterAutoscaler=1700000000:NoSchedule",
            ]);
        },
    );
    assert!(
        cease_message(&end).contains("ToBeDeletedByClusterAutoscaler"),
        "{end:?}"
    );
    assert_no_refusal(&cp, &ident);
}

/// The departure needs no new permission: the speaker's calls are all answered.
fn assert_no_refusal(cp: &ControlPlane, ident: &Identity) {
    let calls = requests_by(cp, &ident.username);
    assert!(!calls.is_empty());
    for r in &calls {
        assert!(!r.refused_in(&calls), "{r:?}");
    }
}
