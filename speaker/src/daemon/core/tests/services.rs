//! Service routes in the core, in simulated time: the datapath gate's hold-down and a drain's
//! RFC 8326 period are counted on the core's clock (its ticks), so they are proved here
//! exactly, with no wall-clock wait.

use std::collections::BTreeMap;
use std::sync::Arc;

use bgp_proto::session::RouteAttributes;
use podcidr_api::BGPAdvertisementSpec;
use podcidr_config::Community;
use podcidr_services::{
    Advertisement, Advertisements, Changes, Endpoints, ServiceFacts, ServiceKey,
};
use serde_json::json;

use super::*;

const VIP: &str = "198.51.100.7/32";

fn advertisement(spec: serde_json::Value) -> Advertisement {
    let spec: BGPAdvertisementSpec = serde_json::from_value(spec).unwrap();
    Advertisement::from_spec("lb", &spec).unwrap()
}

fn local_service() -> Arc<ServiceFacts> {
    let svc = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                 "healthCheckNodePort": 30123},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}
    }))
    .unwrap();
    Arc::new(ServiceFacts::from_service(&svc).unwrap())
}

fn key() -> ServiceKey {
    ServiceKey {
        namespace: "shop".into(),
        name: "web".into(),
    }
}

/// The watch's first word: one advertisement, the Service with a ready endpoint here and
/// `elsewhere` ready ones on other nodes.
fn listed(ad: Advertisement, elsewhere: u32) -> Event {
    let endpoints = Endpoints {
        local_ready: 1,
        remote_ready: elsewhere,
        ..Endpoints::default()
    };
    Event::Services(Changes {
        advertisements: Some(Advertisements {
            read: vec![ad],
            refused: BTreeMap::new(),
        }),
        peer_labels: Some(BTreeMap::new()),
        services: BTreeMap::from([(key(), Some((local_service(), endpoints)))]),
    })
}

/// The core with sessions and its pod CIDR, at monotonic time 0.
fn api_core() -> Core {
    let mut core = Core::with_lookup(api_config("", PEERS), "node-a".into(), true, lookup);
    core.start();
    core.handle(ready(&["198.19.1.0/24"]));
    // The Node seen: the sessions start (the local AS may come from it).
    let ev = core.node_seen(NodeFacts::default());
    core.handle(ev);
    core
}

/// What the last route push to tor1 says of the VIP: `None` if there was no push.
fn vip_to_tor1(out: &[Effect]) -> Option<Option<Arc<RouteAttributes>>> {
    out.iter().rev().find_map(|e| match e {
        Effect::SetRoutes { name, routes } if name == "tor1" => {
            Some(routes.get(&VIP.parse().unwrap()).cloned())
        }
        _ => None,
    })
}

fn probes(answer: Result<(), String>) -> Event {
    Event::ServiceProbes(BTreeMap::from([(key(), answer)]))
}

#[test]
fn datapath_gate_announces_after_the_hold_down_and_withdraws_when_the_proxy_stops_serving() {
    let mut core = api_core();
    let gated = advertisement(
        json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                                     "allowedPrefixes": ["198.51.100.0/24"],
                                     "healthCheckGate": {"holdDown": "5s"}}),
    );
    let out = core.handle(listed(gated, 0));
    assert!(
        out.iter()
            .any(|e| matches!(e, Effect::ProbeServices(t) if t.services == [(key(), 30123)])),
        "the proxy is probed on the healthCheckNodePort: {out:?}"
    );
    assert_eq!(vip_to_tor1(&out), None, "not probed yet: nothing announced");
    tick(&mut core, 10);
    // The proxy reports a local endpoint at t = 10 s: held down until t = 15 s.
    let out = core.handle(probes(Ok(())));
    assert_eq!(vip_to_tor1(&out), None);
    assert_eq!(
        vip_to_tor1(&tick(&mut core, 14)),
        None,
        "4 s of 5: still held"
    );
    let out = tick(&mut core, 15);
    assert!(
        matches!(vip_to_tor1(&out), Some(Some(_))),
        "announced after the hold-down: {out:?}"
    );
    // The proxy stops serving it: withdrawn at once.
    let out = core.handle(probes(Err("HTTP 503: localEndpoints 0".into())));
    assert_eq!(vip_to_tor1(&out), Some(None));
    // Serving again: a new hold-down, from now.
    tick(&mut core, 20);
    core.handle(probes(Ok(())));
    assert_eq!(vip_to_tor1(&tick(&mut core, 24)), None);
    assert!(matches!(vip_to_tor1(&tick(&mut core, 25)), Some(Some(_))));
}

/// A `Local` Service, served here and on `elsewhere` other nodes, through a drain: what the
/// VIP's route to tor1 is (`None`: withdrawn) during the RFC 8326 period and after it.
fn drained(elsewhere: u32) -> (Option<Arc<RouteAttributes>>, Option<Arc<RouteAttributes>>) {
    let mut core = api_core();
    let ad = advertisement(
        json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                                  "allowedPrefixes": ["198.51.100.0/24"]}),
    );
    let out = core.handle(listed(ad, elsewhere));
    let attrs = vip_to_tor1(&out).flatten().expect("announced");
    assert!(!attrs.communities.contains(&Community::GRACEFUL_SHUTDOWN.0));
    tick(&mut core, 100);
    let drained = NodeFacts {
        taints: vec![podcidr_api::contract::SERVICE_DRAIN_KEY.into()],
        ..NodeFacts::default()
    };
    let ev = core.node_seen(drained);
    let during = vip_to_tor1(&core.handle(ev)).flatten();
    let wait = core.config.graceful_shutdown.wait.as_secs();
    assert!(wait > 1);
    assert_eq!(
        vip_to_tor1(&tick(&mut core, 100 + wait - 1)),
        None,
        "nothing changes before the wait ends"
    );
    let out = tick(&mut core, 100 + wait);
    // The pod CIDR stays whatever happens to the VIP.
    let pods = out.iter().rev().find_map(|e| match e {
        Effect::SetRoutes { name, routes } if name == "tor1" => {
            Some(routes.contains_key(&"198.19.1.0/24".parse().unwrap()))
        }
        _ => None,
    });
    assert_ne!(pods, Some(false), "the pod CIDR is never drained");
    let after = match vip_to_tor1(&out) {
        Some(now) => now,
        None => Some(during.clone().expect("unchanged")),
    };
    (during, after)
}

#[test]
fn drain_marks_service_routes_graceful_shutdown_then_withdraws_after_the_wait_rfc8326() {
    let gs = |a: &Option<Arc<RouteAttributes>>| {
        a.as_ref()
            .map(|a| a.communities.contains(&Community::GRACEFUL_SHUTDOWN.0))
    };
    let (during, after) = drained(1);
    assert_eq!(gs(&during), Some(true), "the period: GRACEFUL_SHUTDOWN");
    assert_eq!(
        after, None,
        "withdrawn after the wait: another node serves it"
    );
    // Served here alone: it stays (withdrawing would black-hole it), still less preferred.
    let (during, after) = drained(0);
    assert_eq!(gs(&during), Some(true));
    assert_eq!(gs(&after), Some(true), "kept, with GRACEFUL_SHUTDOWN");
}
