//! Service routes in the core, in simulated time: the datapath gate's hold-down and a drain's
//! RFC 8326 period are counted on the core's clock, which is the last tick's, so they are
//! proved here exactly, with no wall-clock wait. Found on the wire
//! (`speaker/tests/netns/netns_service_vip.rs`): a drain that began between two ticks was
//! timed from the earlier one, so 65535:0 was on the wire up to a second less than
//! `gracefulShutdown.wait` (2.6 s of 3 s), and with `wait: 1` almost not at all.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bgp_proto::session::RouteAttributes;
use podcidr_api::BGPAdvertisementSpec;
use podcidr_config::Community;
use podcidr_services::{
    Advertisement, Advertisements, Changes, Endpoints, ServiceFacts, ServiceKey,
};
use serde_json::{Value, json};

use super::super::services::DRAIN_KEY;
use super::*;

const VIP: &str = "198.51.100.7/32";

fn key() -> ServiceKey {
    ServiceKey {
        namespace: "shop".into(),
        name: "web".into(),
    }
}

/// `lb`'s advertisement: LoadBalancer IPs of every Service, with `extra` spec fields.
fn lb_ad(extra: Value) -> Value {
    let mut ad = json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                        "allowedPrefixes": ["198.51.100.0/24"]});
    for (k, v) in extra.as_object().into_iter().flatten() {
        ad[k] = v.clone();
    }
    ad
}

/// The watch's word: the advertisement `ad` and the one Service `shop/web` (its `spec` with
/// `extra` fields) with endpoints `e`.
fn one_service(ad: Value, extra: Value, e: Endpoints) -> Event {
    let ad: BGPAdvertisementSpec = serde_json::from_value(ad).unwrap();
    let mut svc = json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10"},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        svc["spec"][k] = v.clone();
    }
    let svc = ServiceFacts::from_service(&serde_json::from_value(svc).unwrap()).unwrap();
    Event::Services(Changes {
        advertisements: Some(Advertisements {
            read: vec![Advertisement::from_spec("lb", &ad).unwrap()],
            refused: BTreeMap::new(),
        }),
        peer_labels: Some(BTreeMap::new()),
        services: BTreeMap::from([(key(), Some((Arc::new(svc), e)))]),
    })
}

fn local() -> Value {
    json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 30123})
}

fn served(here: u32, elsewhere: u32) -> Endpoints {
    Endpoints {
        local_ready: here,
        remote_ready: elsewhere,
        ..Endpoints::default()
    }
}

/// The core with sessions and its pod CIDR, at monotonic time 0, with `extra` top-level
/// configuration.
fn api_core(extra: &str) -> Core {
    let mut core = Core::with_lookup(api_config(extra, PEERS), "node-a".into(), true, lookup);
    core.start();
    core.handle(ready(&["198.19.1.0/24"]));
    // The Node seen: the sessions start (the local AS may come from it).
    let ev = core.node_seen(NodeFacts::default());
    core.handle(ev);
    core
}

/// A tick at `millis` of monotonic time.
fn ticked(core: &mut Core, millis: u64) -> Vec<Effect> {
    core.handle(Event::Tick {
        now: Duration::from_millis(millis),
        unix: 1_700_000_000 + millis / 1000,
        statuses: BTreeMap::new(),
    })
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

/// (announced, with GRACEFUL_SHUTDOWN) for the VIP to tor1, from the plan.
fn vip(core: &Core) -> (bool, bool) {
    let routes = core.services.planner().routes();
    let route = routes
        .get("tor1")
        .and_then(|r| r.get(&VIP.parse().unwrap()));
    let gs = route.is_some_and(|a| a.communities.contains(&Community::GRACEFUL_SHUTDOWN));
    (route.is_some(), gs)
}

fn probes(answer: Result<(), String>) -> Event {
    Event::ServiceProbes(BTreeMap::from([(key(), answer)]))
}

#[test]
fn datapath_gate_announces_after_the_hold_down_and_withdraws_when_the_proxy_stops_serving() {
    let mut core = api_core("");
    let gated = lb_ad(json!({"healthCheckGate": {"holdDown": "5s"}}));
    let out = core.handle(one_service(gated, local(), served(1, 0)));
    assert!(
        out.iter()
            .any(|e| matches!(e, Effect::ProbeServices(t) if t.services == [(key(), 30123)])),
        "the proxy is probed on the healthCheckNodePort: {out:?}"
    );
    assert_eq!(vip_to_tor1(&out), None, "not probed yet: nothing announced");
    ticked(&mut core, 10_000);
    // The proxy reports a local endpoint after the 10 s tick: held down from the next tick
    // (11 s) until 16 s.
    let out = core.handle(probes(Ok(())));
    assert_eq!(vip_to_tor1(&out), None);
    for t in 11..=15 {
        assert_eq!(
            vip_to_tor1(&ticked(&mut core, t * 1000)),
            None,
            "held at {t} s"
        );
    }
    let out = ticked(&mut core, 16_000);
    assert!(
        matches!(vip_to_tor1(&out), Some(Some(_))),
        "announced after the hold-down: {out:?}"
    );
    // The proxy stops serving it: withdrawn at once.
    let out = core.handle(probes(Err("HTTP 503: localEndpoints 0".into())));
    assert_eq!(vip_to_tor1(&out), Some(None));
    // Serving again: a new hold-down, from the next tick.
    ticked(&mut core, 20_000);
    core.handle(probes(Ok(())));
    for t in 21..=25 {
        let out = ticked(&mut core, t * 1000);
        assert_eq!(vip_to_tor1(&out), None, "held again at {t} s");
    }
    assert!(matches!(
        vip_to_tor1(&ticked(&mut core, 26_000)),
        Some(Some(_))
    ));
}

#[test]
fn the_datapath_gate_holds_a_route_for_the_whole_hold_down_when_the_proxy_answers_between_ticks() {
    let mut core = api_core("");
    ticked(&mut core, 10_000);
    let gated = lb_ad(json!({"healthCheckGate": {"holdDown": 2}}));
    core.handle(one_service(gated, local(), served(1, 0)));
    assert_eq!(vip(&core), (false, false), "not probed yet");
    // The proxy first says it serves the Service at 10.9 s; the core's clock says 10 s.
    core.handle(probes(Ok(())));
    // 12 s is only 1.1 s after the first good answer: still held.
    for t in [11_000, 12_000] {
        ticked(&mut core, t);
        assert_eq!(vip(&core), (false, false), "at {t} ms");
    }
    ticked(&mut core, 13_000);
    assert_eq!(vip(&core), (true, false), "announced after the hold-down");
}

#[test]
fn a_drain_that_starts_between_ticks_carries_graceful_shutdown_for_the_whole_wait_rfc8326() {
    let mut core = api_core("gracefulShutdown: {wait: 3}");
    ticked(&mut core, 10_000);
    let cluster = json!({"externalTrafficPolicy": "Cluster"});
    core.handle(one_service(lb_ad(json!({})), cluster, served(0, 1)));
    assert_eq!(vip(&core), (true, false));
    // The drain annotation arrives at 10.9 s; the core's clock still says 10 s.
    let drained = core.node_seen(NodeFacts {
        annotations: BTreeMap::from([(DRAIN_KEY.to_owned(), "true".to_owned())]),
        ..NodeFacts::default()
    });
    core.handle(drained);
    assert_eq!(vip(&core), (true, true), "65535:0 at once");
    // 13 s is only 2.1 s after the drain began: still announced, still marked.
    for t in [11_000, 12_000, 13_000] {
        ticked(&mut core, t);
        assert_eq!(vip(&core), (true, true), "at {t} ms");
    }
    ticked(&mut core, 14_000);
    assert_eq!(vip(&core), (false, false), "withdrawn after the wait");
}

/// A `Local` Service, served here and on `elsewhere` other nodes, through a drain by taint:
/// the VIP's route to tor1 (`None`: withdrawn) during the RFC 8326 period and after it; the
/// pod CIDR stays throughout.
fn drained(elsewhere: u32) -> (Option<Arc<RouteAttributes>>, Option<Arc<RouteAttributes>>) {
    let mut core = api_core("gracefulShutdown: {wait: 3}");
    let out = core.handle(one_service(lb_ad(json!({})), local(), served(1, elsewhere)));
    let attrs = vip_to_tor1(&out).flatten().expect("announced");
    assert!(!attrs.communities.contains(&Community::GRACEFUL_SHUTDOWN.0));
    ticked(&mut core, 100_000);
    let drained = NodeFacts {
        taints: vec![DRAIN_KEY.into()],
        ..NodeFacts::default()
    };
    let ev = core.node_seen(drained);
    let during = vip_to_tor1(&core.handle(ev)).flatten();
    // The period starts on the next tick (101 s) and lasts the 3 s wait.
    for t in 101..=103 {
        let out = ticked(&mut core, t * 1000);
        assert_eq!(
            vip_to_tor1(&out),
            None,
            "no change before the wait ends ({t} s)"
        );
    }
    let out = ticked(&mut core, 104_000);
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

#[test]
fn a_dual_stack_service_announces_each_family_only_on_the_sessions_that_carry_it() {
    let peers = "peers:\n  - {name: tor1, address: 192.0.2.1, asn: 65000, families: [ipv4-unicast]}\n  \
                 - {name: tor2, address: 192.0.2.2, asn: 65000, families: [ipv4-unicast, ipv6-unicast]}\n";
    let config = api_config("nextHop: {ipv6: \"2001:db8::10\"}", peers);
    let mut core = Core::with_lookup(config, "node-a".into(), true, lookup);
    core.start();
    core.handle(ready(&["198.19.1.0/24"]));
    let ev = core.node_seen(NodeFacts::default());
    core.handle(ev);
    let ad = lb_ad(json!({"allowedPrefixes": ["198.51.100.0/24", "2001:db8:5::/64"]}));
    let svc = json!({"externalTrafficPolicy": "Cluster", "ipFamilies": ["IPv4", "IPv6"]});
    let mut event = one_service(ad, svc, served(0, 1));
    // The second family's address, as a dual-stack load balancer reports it.
    if let Event::Services(c) = &mut event {
        for (facts, _) in c.services.values_mut().flatten() {
            Arc::make_mut(facts)
                .load_balancer_ips
                .push(("2001:db8:5::7".parse().unwrap(), false));
        }
    }
    let out = core.handle(event);
    let sent = |peer: &str| -> Vec<String> {
        out.iter()
            .rev()
            .find_map(|e| match e {
                Effect::SetRoutes { name, routes } if name == peer => Some(
                    routes
                        .iter()
                        .map(|(p, _)| p.to_string())
                        .filter(|p| !p.starts_with("198.19."))
                        .collect(),
                ),
                _ => None,
            })
            .unwrap_or_default()
    };
    assert_eq!(sent("tor1"), ["198.51.100.7/32"], "IPv4 only");
    assert_eq!(sent("tor2"), ["198.51.100.7/32", "2001:db8:5::7/128"]);
}
