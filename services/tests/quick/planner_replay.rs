//! The incremental [`Planner`] against the whole-plan function: after any sequence of changes
//! (Services, endpoints, advertisements, peers, the node's labels, drain and datapath answers)
//! it holds exactly what `plan` gives for the final inputs, probe targets and counts included.
//! Services share addresses and aggregates, so routes merged from several Services are
//! covered.

use std::collections::BTreeMap;
use std::sync::Arc;

use podcidr_api::BGPAdvertisementSpec;
use podcidr_services::{
    Advertisement, Drain, Endpoints, NodeFacts, PeerFacts, Planner, ServiceFacts, ServiceKey, plan,
    probe_targets,
};
use proptest::prelude::*;
use serde_json::json;

fn ads() -> Vec<Advertisement> {
    let specs = [
        (
            "lb",
            json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                      "allowedPrefixes": ["198.51.100.0/24"], "communities": ["64512:1"]}),
        ),
        (
            "agg",
            json!({"serviceSelector": {"matchLabels": {"tier": "web"}},
                       "addresses": ["LoadBalancerIP", "ExternalIP"], "aggregationLengthIPv4": 28,
                       "allowedPrefixes": ["198.51.100.0/24", "203.0.113.0/24"],
                       "localPref": 200, "peers": {"matchLabels": {"role": "tor"}}}),
        ),
        (
            "gated",
            json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                         "allowedPrefixes": ["198.51.100.0/25"], "origin": "Incomplete",
                         "healthCheckGate": {"holdDown": "3s"},
                         "nodeSelector": {"matchLabels": {"rack": "r1"}}}),
        ),
        (
            "cip",
            json!({"serviceSelector": {"matchLabels": {"tier": "db"}},
                       "addresses": ["ClusterIP"], "allowedPrefixes": ["10.96.0.0/16"]}),
        ),
    ];
    specs
        .into_iter()
        .map(|(name, spec)| {
            let spec: BGPAdvertisementSpec = serde_json::from_value(spec).unwrap();
            Advertisement::from_spec(name, &spec).unwrap()
        })
        .collect()
}

const NAMES: [&str; 3] = ["a", "b", "c"];
const LB_IPS: [&str; 4] = [
    "198.51.100.7",
    "198.51.100.8",
    "198.51.100.200",
    "203.0.113.9",
];

fn service(name: usize, local: bool, lb: usize, tier: bool, hc: bool) -> ServiceFacts {
    let policy = if local { "Local" } else { "Cluster" };
    let mut spec = json!({"type": "LoadBalancer", "clusterIP": format!("10.96.0.{}", name + 1),
                          "externalTrafficPolicy": policy, "internalTrafficPolicy": policy,
                          "externalIPs": [LB_IPS[(lb + 1) % LB_IPS.len()]]});
    if hc {
        spec["healthCheckNodePort"] = json!(30000 + name);
    }
    let svc = serde_json::from_value(json!({
        "metadata": {"name": NAMES[name], "namespace": "shop",
                     "labels": {"tier": if tier { "web" } else { "db" }}},
        "spec": spec,
        "status": {"loadBalancer": {"ingress": [{"ip": LB_IPS[lb]}]}}
    }))
    .unwrap();
    ServiceFacts::from_service(&svc).unwrap()
}

#[derive(Debug, Clone)]
enum Change {
    Upsert {
        name: usize,
        local: bool,
        lb: usize,
        tier: bool,
        hc: bool,
        counts: [u32; 4],
    },
    Remove(usize),
    Ads(Vec<bool>),
    Peers(bool, bool),
    Node {
        r1: bool,
        excluded: bool,
        drain: u8,
    },
    Datapath(usize, Option<bool>),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        6 => (0..NAMES.len(), any::<bool>(), 0..LB_IPS.len(), any::<bool>(), any::<bool>(),
              proptest::array::uniform4(0u32..2))
            .prop_map(|(name, local, lb, tier, hc, counts)| Change::Upsert { name, local, lb, tier, hc, counts }),
        2 => (0..NAMES.len()).prop_map(Change::Remove),
        1 => proptest::collection::vec(any::<bool>(), 4).prop_map(Change::Ads),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(a, b)| Change::Peers(a, b)),
        1 => (any::<bool>(), any::<bool>(), 0u8..3).prop_map(|(r1, excluded, drain)| Change::Node { r1, excluded, drain }),
        4 => (0..NAMES.len(), proptest::option::of(any::<bool>())).prop_map(|(n, a)| Change::Datapath(n, a)),
    ]
}

fn key(name: usize) -> ServiceKey {
    ServiceKey {
        namespace: "shop".into(),
        name: NAMES[name].into(),
    }
}

/// The inputs as the whole-plan function takes them.
#[derive(Default)]
struct World {
    ads: Vec<Advertisement>,
    peers: Vec<PeerFacts>,
    node: NodeFacts,
    services: BTreeMap<ServiceKey, (ServiceFacts, Endpoints)>,
}

impl World {
    fn apply(&mut self, planner: &mut Planner, c: Change) {
        match c {
            Change::Upsert {
                name,
                local,
                lb,
                tier,
                hc,
                counts,
            } => {
                let svc = service(name, local, lb, tier, hc);
                let [
                    local_ready,
                    local_terminating,
                    remote_ready,
                    remote_terminating,
                ] = counts;
                let e = Endpoints {
                    local_ready,
                    local_terminating,
                    remote_ready,
                    remote_terminating,
                };
                planner.upsert(Arc::new(svc.clone()), e);
                self.services.insert(key(name), (svc, e));
            }
            Change::Remove(name) => {
                planner.remove(&key(name));
                self.services.remove(&key(name));
            }
            Change::Ads(pick) => {
                self.ads = ads()
                    .into_iter()
                    .zip(pick)
                    .filter(|(_, p)| *p)
                    .map(|(a, _)| a)
                    .collect();
                planner.set_advertisements(self.ads.clone());
            }
            Change::Peers(tor, other) => {
                let mut peers = Vec::new();
                if tor {
                    peers.push(PeerFacts {
                        name: "tor".into(),
                        labels: [("role".into(), "tor".into())].into(),
                    });
                }
                if other {
                    peers.push(PeerFacts {
                        name: "rr".into(),
                        labels: BTreeMap::new(),
                    });
                }
                self.peers = peers.clone();
                planner.set_peers(peers);
            }
            Change::Node {
                r1,
                excluded,
                drain,
            } => {
                self.node.name = "node-1".into();
                self.node.labels.clear();
                if r1 {
                    self.node.labels.insert("rack".into(), "r1".into());
                }
                if excluded {
                    self.node.labels.insert(
                        podcidr_services::EXCLUDE_FROM_EXTERNAL_LB_LABEL.into(),
                        String::new(),
                    );
                }
                self.node.drain =
                    [Drain::No, Drain::Announcing, Drain::Withdrawn][usize::from(drain)];
                planner.set_node(self.node.clone());
            }
            Change::Datapath(name, answer) => {
                match answer {
                    None => self.node.datapath.remove(&key(name)),
                    Some(true) => self.node.datapath.insert(key(name), Ok(())),
                    Some(false) => self.node.datapath.insert(key(name), Err("503".into())),
                };
                planner.set_node(self.node.clone());
            }
        }
    }
}

proptest! {
    #[test]
    fn incremental_planner_holds_what_the_whole_plan_gives(changes in proptest::collection::vec(change(), 1..40)) {
        let mut world = World::default();
        let mut planner = Planner::new();
        // Every advertisement and peer, on a node the gated one selects: the changes then
        // take things away as often as they add them.
        let start = [Change::Ads(vec![true; 4]), Change::Peers(true, true),
                     Change::Node { r1: true, excluded: false, drain: 0 }];
        for c in start {
            world.apply(&mut planner, c);
        }
        planner.take_routes_changed();
        let mut routes_before = planner.routes().clone();
        for c in changes {
            world.apply(&mut planner, c);
            let services = || world.services.values().map(|(s, e)| (s, e));
            let whole = plan(&world.node, &world.peers, &world.ads, services());
            prop_assert_eq!(planner.to_plan(), whole.clone());
            prop_assert_eq!(planner.counts(), whole.counts());
            prop_assert_eq!(planner.held_by_reason(), &whole.held_by_reason());
            prop_assert_eq!(planner.probe_targets(), probe_targets(&world.node, &world.ads, services()));
            // The change flag says exactly whether the routes moved.
            let changed = planner.take_routes_changed();
            prop_assert_eq!(changed, *planner.routes() != routes_before);
            routes_before = planner.routes().clone();
        }
    }
}
