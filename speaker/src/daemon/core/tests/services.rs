//! Service routes in the core: the periods it measures (a drain's graceful-shutdown wait, the
//! datapath gate's hold-down) on its own clock, which is the last tick's. Found on the wire
//! (`speaker/tests/netns/netns_service_vip.rs`): a drain that began between two ticks was
//! timed from the earlier one, so 65535:0 was on the wire up to a second less than
//! `gracefulShutdown.wait` (2.6 s of 3 s), and with `wait: 1` almost not at all.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ipam_watch::source::DesiredSet;
use podcidr_api::BGPAdvertisementSpec;
use podcidr_config::Config;
use podcidr_services::{Advertisement, Endpoints, Inputs, ServiceFacts, ServiceKey};
use serde_json::{Value, json};

use super::super::services::DRAIN_KEY;
use super::*;

const VIP: &str = "198.51.100.7/32";

fn core(top: &str) -> Core {
    let c = Config::from_yaml_str(&format!(
        "asn: 65010\nrouterId: 192.0.2.10\nsource: {{kind: ipam-crd}}\n\
         allowedPrefixes: [198.19.0.0/16]\n{top}\n\
         peers:\n  - {{name: tor1, address: 192.0.2.1, asn: 65000}}\n"
    ))
    .unwrap();
    let mut core = Core::with_lookup(c, "node-a".into(), true, lookup);
    core.start();
    core.handle(Event::Desired(Arc::new(DesiredSet {
        ready: true,
        cidrs: vec![net("198.19.1.0/24")],
        ..DesiredSet::default()
    })));
    core.handle(core.node_seen(NodeFacts::default()));
    core
}

/// The one Service, with `spec` extra fields, behind the advertisement `ad`.
fn services(ad: Value, spec: Value, endpoints: Endpoints) -> Event {
    let ad: BGPAdvertisementSpec = serde_json::from_value(ad).unwrap();
    let mut svc = json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10"},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}
    });
    for (k, v) in spec.as_object().into_iter().flatten() {
        svc["spec"][k] = v.clone();
    }
    let svc = ServiceFacts::from_service(&serde_json::from_value(svc).unwrap()).unwrap();
    Event::Services(Arc::new(Inputs {
        synced: true,
        advertisements: vec![Advertisement::from_spec("lb", &ad).unwrap()],
        services: vec![(Arc::new(svc), endpoints)],
        ..Inputs::default()
    }))
}

fn lb_ad(extra: Value) -> Value {
    let mut ad = json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                        "allowedPrefixes": ["198.51.100.0/24"]});
    for (k, v) in extra.as_object().into_iter().flatten() {
        ad[k] = v.clone();
    }
    ad
}

fn ticked(core: &mut Core, millis: u64) {
    core.handle(Event::Tick {
        now: Duration::from_millis(millis),
        unix: 1_700_000_000 + millis / 1000,
        statuses: BTreeMap::new(),
    });
}

/// (announced, with GRACEFUL_SHUTDOWN) for the Service's address to tor1.
fn vip(core: &Core) -> (bool, bool) {
    let plan = core.services.plan();
    (
        plan.routes
            .get("tor1")
            .is_some_and(|r| r.contains_key(&net(VIP))),
        plan.graceful_shutdown,
    )
}

#[test]
fn a_drain_that_starts_between_ticks_carries_graceful_shutdown_for_the_whole_wait_rfc8326() {
    let mut core = core("gracefulShutdown: {wait: 3}");
    ticked(&mut core, 10_000);
    let ready_elsewhere = Endpoints {
        remote_ready: 1,
        ..Endpoints::default()
    };
    core.handle(services(
        lb_ad(json!({})),
        json!({"externalTrafficPolicy": "Cluster"}),
        ready_elsewhere,
    ));
    assert_eq!(vip(&core), (true, false), "{:?}", core.services.plan());

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

#[test]
fn the_datapath_gate_holds_a_route_for_the_whole_hold_down_when_the_proxy_answers_between_ticks() {
    let mut core = core("");
    ticked(&mut core, 10_000);
    let here = Endpoints {
        local_ready: 1,
        ..Endpoints::default()
    };
    core.handle(services(
        lb_ad(json!({"healthCheckGate": {"holdDown": 2}})),
        json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 30080}),
        here,
    ));
    assert_eq!(vip(&core), (false, false), "not probed yet");

    // The proxy first says it serves the Service at 10.9 s; the core's clock says 10 s.
    let key = ServiceKey {
        namespace: "shop".into(),
        name: "web".into(),
    };
    core.handle(Event::ServiceProbes(BTreeMap::from([(key, Ok(()))])));
    // 12 s is only 1.1 s after the first good answer: still held.
    for t in [11_000, 12_000] {
        ticked(&mut core, t);
        assert_eq!(vip(&core), (false, false), "at {t} ms");
    }
    ticked(&mut core, 13_000);
    assert_eq!(vip(&core), (true, false), "announced after the hold-down");
}
