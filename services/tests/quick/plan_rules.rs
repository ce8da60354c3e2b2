//! One test per rule of `podcidr_services::plan` (the module header lists them).

use std::collections::BTreeMap;

use podcidr_api::BGPAdvertisementSpec;
use podcidr_config::Community;
use podcidr_services::{
    Advertisement, Drain, Endpoints, NodeFacts, Origin, PeerFacts, Plan, Reason, ServiceFacts, plan,
};
use serde_json::{Value, json};

fn ad(name: &str, spec: Value) -> Advertisement {
    let spec: BGPAdvertisementSpec = serde_json::from_value(spec).unwrap();
    Advertisement::from_spec(name, &spec).unwrap()
}

/// LoadBalancer IPs of every Service, 198.51.100.0/24 and 2001:db8:5::/64 allowed.
fn lb_ad() -> Advertisement {
    ad(
        "lb",
        json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
               "allowedPrefixes": ["198.51.100.0/24", "2001:db8:5::/64"]}),
    )
}

fn service(name: &str, spec: Value, lb_ips: &[&str]) -> ServiceFacts {
    let ingress: Vec<Value> = lb_ips.iter().map(|ip| json!({"ip": ip})).collect();
    let svc = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": name}},
        "spec": spec,
        "status": {"loadBalancer": {"ingress": ingress}}
    }))
    .unwrap();
    ServiceFacts::from_service(&svc).unwrap()
}

fn lb(name: &str, policy: &str, ips: &[&str]) -> ServiceFacts {
    service(
        name,
        json!({"type": "LoadBalancer", "clusterIP": "10.96.0.10", "externalTrafficPolicy": policy}),
        ips,
    )
}

fn node(name: &str) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        ..NodeFacts::default()
    }
}

fn tor() -> Vec<PeerFacts> {
    vec![PeerFacts {
        name: "tor".into(),
        labels: BTreeMap::from([("role".into(), "tor".into())]),
    }]
}

fn ready(local: u32, remote: u32) -> Endpoints {
    Endpoints {
        local_ready: local,
        remote_ready: remote,
        ..Endpoints::default()
    }
}

fn run(node: &NodeFacts, ads: &[Advertisement], svcs: &[(ServiceFacts, Endpoints)]) -> Plan {
    plan(node, &tor(), ads, svcs.iter().map(|(s, e)| (s, e)))
}

fn announced(p: &Plan) -> Vec<String> {
    p.routes
        .get("tor")
        .map(|r| r.keys().map(ToString::to_string).collect())
        .unwrap_or_default()
}

fn held(p: &Plan) -> Vec<Option<&'static str>> {
    p.rows
        .iter()
        .map(|r| r.held.as_ref().map(Reason::as_str))
        .collect()
}

#[test]
fn local_service_is_announced_only_from_a_node_with_a_ready_local_endpoint() {
    let svc = lb("web", "Local", &["198.51.100.7"]);
    let here = run(&node("a"), &[lb_ad()], &[(svc.clone(), ready(1, 0))]);
    assert_eq!(announced(&here), ["198.51.100.7/32"]);
    let elsewhere = run(&node("b"), &[lb_ad()], &[(svc, ready(0, 1))]);
    assert!(announced(&elsewhere).is_empty());
    assert_eq!(held(&elsewhere), [Some("noLocalEndpoint")]);
}

#[test]
fn cluster_service_is_announced_everywhere_while_served_and_withdrawn_with_no_endpoint() {
    let svc = lb("web", "Cluster", &["198.51.100.7"]);
    let served = run(&node("b"), &[lb_ad()], &[(svc.clone(), ready(0, 3))]);
    assert_eq!(announced(&served), ["198.51.100.7/32"]);
    let none = run(&node("b"), &[lb_ad()], &[(svc, Endpoints::default())]);
    assert!(announced(&none).is_empty());
    assert_eq!(held(&none), [Some("notReady")]);
}

#[test]
fn ip_mode_proxy_addresses_are_never_announced() {
    let svc = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.8", "ipMode": "Proxy"}]}}
    }))
    .unwrap();
    let svc = ServiceFacts::from_service(&svc).unwrap();
    let p = run(&node("a"), &[lb_ad()], &[(svc, ready(1, 0))]);
    assert!(announced(&p).is_empty());
    assert_eq!(held(&p), [Some("ipModeProxy")]);
}

#[test]
fn a_node_excluded_from_external_load_balancers_announces_cluster_ips_only() {
    let all = ad(
        "all",
        json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP", "ClusterIP"],
               "allowedPrefixes": ["198.51.100.0/24", "10.96.0.0/16"]}),
    );
    let mut n = node("a");
    n.labels.insert(
        "node.kubernetes.io/exclude-from-external-load-balancers".into(),
        String::new(),
    );
    let p = run(
        &n,
        &[all],
        &[(lb("web", "Cluster", &["198.51.100.7"]), ready(1, 0))],
    );
    assert_eq!(announced(&p), ["10.96.0.10/32"]);
    assert!(held(&p).contains(&Some("excludedNode")));
}

#[test]
fn an_address_outside_the_allow_list_is_refused_and_reported() {
    let p = run(
        &node("a"),
        &[lb_ad()],
        &[(lb("web", "Cluster", &["203.0.113.9"]), ready(1, 0))],
    );
    assert!(announced(&p).is_empty());
    assert_eq!(
        p.rows[0].held,
        Some(Reason::OutsideAllowList("203.0.113.9/32".parse().unwrap()))
    );
}

#[test]
fn an_aggregate_reaching_outside_the_allow_list_is_refused() {
    let wide = ad(
        "wide",
        json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
               "allowedPrefixes": ["198.51.100.0/28"], "aggregationLengthIPv4": 24}),
    );
    let p = run(
        &node("a"),
        &[wide],
        &[(lb("web", "Cluster", &["198.51.100.7"]), ready(1, 0))],
    );
    assert_eq!(held(&p), [Some("outsideAllowList")]);
}

#[test]
fn aggregation_announces_the_aggregate_everywhere_and_local_host_routes_where_served() {
    let agg = ad(
        "agg",
        json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
               "allowedPrefixes": ["198.51.100.0/24"], "aggregationLengthIPv4": 28}),
    );
    let svc = lb("web", "Local", &["198.51.100.7"]);
    let here = run(
        &node("a"),
        std::slice::from_ref(&agg),
        &[(svc.clone(), ready(1, 1))],
    );
    assert_eq!(announced(&here), ["198.51.100.0/28", "198.51.100.7/32"]);
    let there = run(
        &node("c"),
        std::slice::from_ref(&agg),
        &[(svc.clone(), ready(0, 2))],
    );
    assert_eq!(
        announced(&there),
        ["198.51.100.0/28"],
        "the aggregate from every node"
    );
    assert_eq!(
        held(&there),
        [Some("noLocalEndpoint")],
        "says why the host route is not"
    );
    let cluster = run(
        &node("c"),
        &[agg],
        &[(lb("api", "Cluster", &["198.51.100.9"]), ready(0, 2))],
    );
    assert_eq!(
        announced(&cluster),
        ["198.51.100.0/28"],
        "Cluster: the aggregate only"
    );
}

#[test]
fn load_balancer_class_absent_selects_services_without_a_class_and_set_selects_exactly_it() {
    let classed = service(
        "gw",
        json!({"type": "LoadBalancer", "loadBalancerClass": "example.com/gw"}),
        &["198.51.100.20"],
    );
    let plain = lb("web", "Cluster", &["198.51.100.7"]);
    let svcs = [(classed, ready(1, 0)), (plain, ready(1, 0))];
    assert_eq!(
        announced(&run(&node("a"), &[lb_ad()], &svcs)),
        ["198.51.100.7/32"]
    );
    let mut for_class = lb_ad();
    for_class.load_balancer_class = Some("example.com/gw".into());
    assert_eq!(
        announced(&run(&node("a"), &[for_class], &svcs)),
        ["198.51.100.20/32"]
    );
}

#[test]
fn an_absent_service_selector_selects_none_and_virtual_labels_select_by_name() {
    let none = ad(
        "none",
        json!({"addresses": ["LoadBalancerIP"], "allowedPrefixes": ["198.51.100.0/24"]}),
    );
    let svcs = [
        (lb("web", "Cluster", &["198.51.100.7"]), ready(1, 0)),
        (lb("db", "Cluster", &["198.51.100.8"]), ready(1, 0)),
    ];
    let p = run(&node("a"), &[none], &svcs);
    assert!(announced(&p).is_empty() && p.rows.is_empty());
    let by_name = ad(
        "web-only",
        json!({"serviceSelector": {"matchLabels": {"podcidr.io/service-name": "web",
                                                    "podcidr.io/service-namespace": "shop"}},
               "addresses": ["LoadBalancerIP"], "allowedPrefixes": ["198.51.100.0/24"]}),
    );
    assert_eq!(
        announced(&run(&node("a"), &[by_name], &svcs)),
        ["198.51.100.7/32"]
    );
}

#[test]
fn the_datapath_gate_holds_a_local_route_until_the_proxy_serves_it() {
    let svc = service(
        "web",
        json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": 32001}),
        &["198.51.100.7"],
    );
    let mut gated = lb_ad();
    gated.health_check_gate = Some(std::time::Duration::from_secs(5));
    let mut n = node("a");
    let p = run(
        &n,
        std::slice::from_ref(&gated),
        &[(svc.clone(), ready(1, 0))],
    );
    assert!(announced(&p).is_empty());
    assert_eq!(
        p.rows[0].held,
        Some(Reason::DatapathNotReady("not probed yet".into()))
    );
    n.datapath = BTreeMap::from([(svc.key.clone(), Err("HTTP 503, localEndpoints 0".into()))]);
    let p = run(
        &n,
        std::slice::from_ref(&gated),
        &[(svc.clone(), ready(1, 0))],
    );
    assert_eq!(
        p.rows[0].held,
        Some(Reason::DatapathNotReady(
            "HTTP 503, localEndpoints 0".into()
        ))
    );
    n.datapath = BTreeMap::from([(svc.key.clone(), Ok(()))]);
    let p = run(
        &n,
        std::slice::from_ref(&gated),
        &[(svc.clone(), ready(1, 0))],
    );
    assert_eq!(announced(&p), ["198.51.100.7/32"]);
    // Without the gate the same node announces on EndpointSlice readiness alone.
    n.datapath = BTreeMap::new();
    assert_eq!(
        announced(&run(&n, &[lb_ad()], &[(svc, ready(1, 0))])),
        ["198.51.100.7/32"]
    );
    // The gate is for Local only: a Cluster Service is served by every node's proxy rules.
    let c = lb("api", "Cluster", &["198.51.100.9"]);
    assert_eq!(
        announced(&run(&n, &[gated.clone()], &[(c, ready(0, 1))])),
        ["198.51.100.9/32"]
    );
    // A Local Service without a healthCheckNodePort cannot pass the gate, and says so.
    let bare = lb("bare", "Local", &["198.51.100.10"]);
    let p = run(&n, &[gated], &[(bare, ready(1, 0))]);
    assert!(
        matches!(&p.rows[0].held, Some(Reason::DatapathNotReady(w)) if w.contains("no healthCheckNodePort"))
    );
}

#[test]
fn drain_marks_routes_graceful_shutdown_then_withdraws_them_rfc8326() {
    let svc = lb("web", "Cluster", &["198.51.100.7"]);
    let mut n = node("a");
    n.drain = Drain::Announcing;
    let p = run(&n, &[lb_ad()], &[(svc.clone(), ready(1, 1))]);
    let attrs = &p.routes["tor"][&"198.51.100.7/32".parse::<ipnet::IpNet>().unwrap()];
    assert!(attrs.communities.contains(&Community::GRACEFUL_SHUTDOWN));
    n.drain = Drain::Withdrawn;
    let p = run(&n, &[lb_ad()], &[(svc, ready(1, 1))]);
    assert!(announced(&p).is_empty());
    assert_eq!(held(&p), [Some("draining")]);
}

#[test]
fn a_draining_node_keeps_a_local_service_it_alone_serves_until_another_node_can() {
    let svc = lb("web", "Local", &["198.51.100.7"]);
    let mut n = node("a");
    n.drain = Drain::Withdrawn;
    let alone = run(&n, &[lb_ad()], &[(svc.clone(), ready(1, 0))]);
    assert_eq!(announced(&alone), ["198.51.100.7/32"]);
    let attrs = &alone.routes["tor"][&"198.51.100.7/32".parse::<ipnet::IpNet>().unwrap()];
    assert!(
        attrs.communities.contains(&Community::GRACEFUL_SHUTDOWN),
        "what a draining node keeps stays less preferred"
    );
    let not_yet = Endpoints {
        local_ready: 1,
        remote_terminating: 1,
        ..Endpoints::default()
    };
    assert_eq!(
        announced(&run(&n, &[lb_ad()], &[(svc.clone(), not_yet)])),
        ["198.51.100.7/32"],
        "a terminating pod elsewhere does not serve while this one is ready"
    );
    assert!(announced(&run(&n, &[lb_ad()], &[(svc, ready(1, 1))])).is_empty());
}

#[test]
fn the_peers_selector_chooses_the_sessions_and_none_matching_is_reported() {
    let mut only_spine = lb_ad();
    only_spine.peers =
        Some(
            kube_core::Selector::try_from(
                serde_json::from_value::<
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
                >(json!({"matchLabels": {"role": "spine"}}))
                .unwrap(),
            )
            .unwrap(),
        );
    let p = run(
        &node("a"),
        &[only_spine],
        &[(lb("web", "Cluster", &["198.51.100.7"]), ready(1, 0))],
    );
    assert!(p.routes.is_empty());
    assert_eq!(held(&p), [Some("noPeer")]);
}

#[test]
fn two_advertisements_of_one_route_merge_communities_and_keep_origin_incomplete() {
    let a = ad(
        "a",
        json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
               "allowedPrefixes": ["198.51.100.0/24"], "communities": ["65000:1"], "localPref": 100}),
    );
    let b = ad(
        "b",
        json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"], "origin": "Incomplete",
               "allowedPrefixes": ["198.51.100.0/24"], "communities": ["65000:2"], "localPref": 200}),
    );
    let p = run(
        &node("a"),
        &[a, b],
        &[(lb("web", "Cluster", &["198.51.100.7"]), ready(1, 0))],
    );
    let attrs = &p.routes["tor"][&"198.51.100.7/32".parse::<ipnet::IpNet>().unwrap()];
    assert_eq!(
        attrs.communities,
        ["65000:1".parse().unwrap(), "65000:2".parse().unwrap()]
    );
    assert_eq!(attrs.local_pref, Some(200));
    assert_eq!(attrs.origin, Origin::Incomplete);
    assert_eq!(attrs.advertisements, ["a", "b"]);
    assert_eq!(p.rows.len(), 2, "one row per advertisement, for diff");
}

#[test]
fn dual_stack_services_announce_both_families() {
    let svc = lb("web", "Cluster", &["198.51.100.7", "2001:db8:5::7"]);
    let p = run(&node("a"), &[lb_ad()], &[(svc, ready(1, 0))]);
    assert_eq!(announced(&p), ["198.51.100.7/32", "2001:db8:5::7/128"]);
}

#[test]
fn migration_annotations_are_read_as_load_balancer_addresses() {
    let svc = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop",
                     "annotations": {"lbipam.cilium.io/ips": "198.51.100.30"}},
        "spec": {"type": "LoadBalancer"}
    }))
    .unwrap();
    let svc = ServiceFacts::from_service(&svc).unwrap();
    let p = run(&node("a"), &[lb_ad()], &[(svc, ready(1, 0))]);
    assert_eq!(announced(&p), ["198.51.100.30/32"]);
}

#[test]
fn drain_triggers_are_the_drain_key_deletion_removal_taints_and_kubelet_shutdown_never_cordon() {
    use podcidr_services::{NodeDrain, drain_trigger};
    let none = BTreeMap::new();
    let node = |taints: &'static [&str], not_ready: Option<&'static str>| {
        let taints: Vec<String> = taints.iter().map(|t| t.to_string()).collect();
        (taints, not_ready)
    };
    let decide = |(taints, not_ready): (Vec<String>, Option<&str>), deleting: bool| {
        drain_trigger(NodeDrain {
            deleted: false,
            deleting,
            taints: &taints,
            annotations: &none,
            not_ready,
        })
    };
    // A cordon (its taint) and a NotReady for another cause are not drains.
    assert_eq!(
        decide(node(&["node.kubernetes.io/unschedulable"], None), false),
        None
    );
    assert_eq!(
        decide(node(&[], Some("container runtime is down")), false),
        None
    );
    for drains in [
        decide(node(&["podcidr.io/drain-services"], None), false),
        decide(node(&["ToBeDeletedByClusterAutoscaler"], None), false),
        decide(
            node(&[], Some("[PLEG is not healthy, node is shutting down]")),
            false,
        ),
        decide(node(&[], None), true),
    ] {
        assert!(drains.is_some());
    }
    let annotated = BTreeMap::from([("podcidr.io/drain-services".to_owned(), "true".to_owned())]);
    let by_annotation = drain_trigger(NodeDrain {
        deleted: false,
        deleting: false,
        taints: &[],
        annotations: &annotated,
        not_ready: None,
    });
    assert_eq!(
        by_annotation.as_deref(),
        Some("the Node has podcidr.io/drain-services")
    );
}

#[test]
fn every_reason_code_is_listed_for_the_metrics() {
    let net: ipnet::IpNet = "198.51.100.0/24".parse().unwrap();
    let all = [
        Reason::ProxyMode,
        Reason::ExcludedNode,
        Reason::OutsideAllowList(net),
        Reason::NotReady,
        Reason::NoLocalEndpoint,
        Reason::DatapathNotReady(String::new()),
        Reason::Draining,
        Reason::NoPeer,
    ];
    let codes: Vec<&str> = all.iter().map(Reason::as_str).collect();
    assert_eq!(codes, Reason::CODES);
}
