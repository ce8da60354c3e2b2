//! Whether a Service is announced from at least one node, seen from the whole cluster, and
//! when to say so with an Event. Pure: the allocator's leader feeds it what it watches and a
//! clock reading; no client, no runtime.
//!
//! "Announced" is [`plan`]'s verdict run on each node, with two differences that make it cheap
//! at 5,000 nodes x 10,000 Services:
//!
//! - one Service at a time, with only the advertisements that select it, and early exit:
//!   a Service served nowhere is announced nowhere (no node is asked); a `Local` Service
//!   without aggregation is asked only of the nodes with a local endpoint; the first node
//!   that announces settles it ([`Scan::First`]). The node count in an Event's note is a full
//!   scan ([`Scan::All`]), made only for the Event;
//! - the datapath gate (`healthCheckGate`) is each node's own probe, invisible here: it is
//!   taken to pass wherever the EndpointSlices say a local endpoint is ready (the gate's own
//!   fallback). The Events follow EndpointSlice readiness, not the probes.
//!
//! [`EventBound`] decides, from explicit times, which transitions become Events: a token
//! bucket for the whole cluster and at most one Event per Service per [`SERVICE_WINDOW`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::advertisement::Advertisement;
use crate::endpoints::Endpoints;
use crate::plan::{NodeFacts, PeerFacts, Reason, plan, selects_service};
use crate::service::{ServiceFacts, TrafficPolicy};

/// A Service's endpoints with a count per node, so that each node's [`Endpoints`] is one
/// lookup instead of a pass over the slices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceEndpoints {
    /// Node name -> (ready, serving terminating) endpoints on it.
    per_node: BTreeMap<String, (u32, u32)>,
    ready: u32,
    terminating: u32,
}

/// No node carries this name (`/` is not allowed in one): every endpoint counts as remote.
const NO_NODE: &str = "/";

impl ServiceEndpoints {
    /// The counts of one EndpointSlice, classified as [`Endpoints::from_slices`] does
    /// (KEP-1669), so the two can never read a condition differently.
    pub fn from_slice(slice: &EndpointSlice) -> Self {
        let all = Endpoints::from_slices([slice], NO_NODE);
        let nodes: BTreeSet<&str> = slice
            .endpoints
            .iter()
            .filter_map(|e| e.node_name.as_deref())
            .collect();
        let per_node = nodes
            .into_iter()
            .filter_map(|n| {
                let e = Endpoints::from_slices([slice], n);
                let counts = (e.local_ready, e.local_terminating);
                (counts != (0, 0)).then(|| (n.to_owned(), counts))
            })
            .collect();
        ServiceEndpoints {
            per_node,
            ready: all.remote_ready,
            terminating: all.remote_terminating,
        }
    }

    /// The sum over a Service's slices.
    pub fn sum<'a>(slices: impl IntoIterator<Item = &'a ServiceEndpoints>) -> Self {
        let mut out = ServiceEndpoints::default();
        for s in slices {
            out.ready = out.ready.saturating_add(s.ready);
            out.terminating = out.terminating.saturating_add(s.terminating);
            for (node, (r, t)) in &s.per_node {
                let e = out.per_node.entry(node.clone()).or_default();
                e.0 = e.0.saturating_add(*r);
                e.1 = e.1.saturating_add(*t);
            }
        }
        out
    }

    /// The Service's endpoints as `node` sees them.
    pub fn endpoints(&self, node: &str) -> Endpoints {
        let (local_ready, local_terminating) = self.per_node.get(node).copied().unwrap_or_default();
        Endpoints {
            local_ready,
            local_terminating,
            remote_ready: self.ready.saturating_sub(local_ready),
            remote_terminating: self.terminating.saturating_sub(local_terminating),
        }
    }

    /// The nodes with a ready or serving terminating endpoint.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        self.per_node.keys().map(String::as_str)
    }

    fn served_anywhere(&self) -> bool {
        self.endpoints(NO_NODE).served_anywhere()
    }
}

/// One node as the cluster view holds it: the facts `plan` reads (no datapath verdicts, see
/// the module's note) and its peers (the `BGPPeer`s that select it, else those its
/// NodeBGPStatus names, as `diff --services` has it).
#[derive(Debug, Clone, Default)]
pub struct NodeView {
    pub facts: NodeFacts,
    pub peers: Vec<PeerFacts>,
}

/// How far to look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// Stop at the first node that announces: enough to know whether any does.
    First,
    /// Every candidate node: how many announce, and every address announced.
    All,
}

/// The cluster's verdict on one Service.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Announced {
    /// Nodes that announce some address of it (with [`Scan::First`], at most 1).
    pub nodes: usize,
    /// The addresses those nodes announce.
    pub addresses: BTreeSet<IpAddr>,
    /// With `nodes == 0`: why not, the reason most nodes gave.
    pub why_not: Option<String>,
}

impl Announced {
    pub fn anywhere(&self) -> bool {
        self.nodes > 0
    }
}

/// Said when no advertisement selects the Service (none left, or a selector changed).
pub const NOT_SELECTED: &str = "no BGPAdvertisement selects it";
/// Said when advertisements select it but none selects a node.
pub const NO_NODE_SELECTED: &str = "no node is selected by the BGPAdvertisements that select it";

/// Whether (and with [`Scan::All`], from how many nodes and with which addresses) `svc` is
/// announced anywhere. `nodes` by name; the datapath gate is taken to pass where endpoints
/// are ready.
pub fn announced(
    svc: &ServiceFacts,
    endpoints: &ServiceEndpoints,
    advertisements: &[Advertisement],
    nodes: &BTreeMap<String, NodeView>,
    scan: Scan,
) -> Announced {
    let ads: Vec<Advertisement> = advertisements
        .iter()
        .filter(|a| selects_service(a, svc))
        .cloned()
        .collect();
    if ads.is_empty() {
        return not_announced(NOT_SELECTED);
    }
    if !endpoints.served_anywhere() {
        return not_announced(&Reason::NotReady.to_string());
    }
    // Without aggregation, a `Local` address is announced only where it is served (rule 4;
    // a draining node's exception is such a node too): the other nodes need not be asked.
    let local_only = ads.iter().all(|a| {
        a.aggregation_length_ipv4 == 32
            && a.aggregation_length_ipv6 == 128
            && a.addresses.iter().all(|k| {
                let policy = if k.is_external() {
                    svc.external_policy
                } else {
                    svc.internal_policy
                };
                policy == TrafficPolicy::Local
            })
    });
    let candidates: Box<dyn Iterator<Item = &NodeView>> = if local_only {
        Box::new(endpoints.nodes().filter_map(|n| nodes.get(n)))
    } else {
        Box::new(nodes.values())
    };
    let gated = ads.iter().any(|a| a.health_check_gate.is_some());
    let mut out = Announced::default();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut asked = 0usize;
    for node in candidates {
        if !ads.iter().any(|a| a.selects_node(&node.facts.labels)) {
            continue;
        }
        asked += 1;
        let e = endpoints.endpoints(&node.facts.name);
        let p = if gated && e.served_here() {
            // The gate's verdict is the node's; here it follows the EndpointSlice.
            let mut facts = node.facts.clone();
            facts.datapath.insert(svc.key.clone(), Ok(()));
            plan(&facts, &node.peers, &ads, [(svc, &e)])
        } else {
            plan(&node.facts, &node.peers, &ads, [(svc, &e)])
        };
        let mut here = false;
        for row in &p.rows {
            if row.announced.is_empty() {
                if let Some(r) = &row.held {
                    *reasons.entry(r.to_string()).or_default() += 1;
                }
            } else {
                here = true;
                out.addresses.insert(row.address);
            }
        }
        if here {
            out.nodes += 1;
            if scan == Scan::First {
                return out;
            }
        }
    }
    if out.nodes == 0 {
        out.why_not = Some(match reasons.into_iter().max_by_key(|(_, n)| *n) {
            Some((r, _)) => r,
            None if asked == 0 && local_only => Reason::NoLocalEndpoint.to_string(),
            None => NO_NODE_SELECTED.to_owned(),
        });
    }
    out
}

fn not_announced(why: &str) -> Announced {
    Announced {
        why_not: Some(why.to_owned()),
        ..Announced::default()
    }
}

/// Events for the whole cluster: sustained rate (per second) ...
pub const EVENTS_PER_SECOND: f64 = 10.0;
/// ... and burst: a mass change (an advertisement deleted, a zone down) writes at most this
/// many at once, then [`EVENTS_PER_SECOND`]; the rest are counted, not written.
pub const EVENT_BURST: f64 = 50.0;
/// At most one Event per Service in this window; a later state waits for its end.
pub const SERVICE_WINDOW: Duration = Duration::from_secs(60);

/// What to do about one Service's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Write the Event for this state now.
    Emit,
    /// The state is the one last said (or a change undone inside the window): nothing.
    Quiet,
    /// Inside the Service's window: asked again at this time ([`EventBound::due`]).
    Wait(Instant),
    /// Not written: the cluster's bucket is empty. Counted; the state counts as said (no
    /// late Event after the burst).
    Suppressed,
}

#[derive(Debug, Clone)]
struct Said {
    announced: bool,
    at: Option<Instant>,
}

/// The rate bound: per Service the state last said and when, the Services waiting for their
/// window to end, and the cluster's token bucket.
#[derive(Debug)]
pub struct EventBound<K> {
    said: HashMap<K, Said>,
    waiting: HashMap<K, Instant>,
    tokens: f64,
    refilled: Option<Instant>,
    /// Transitions that did not become an Event (the bucket, or undone inside a window).
    pub suppressed: u64,
}

impl<K: Clone + Eq + Hash> Default for EventBound<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash> EventBound<K> {
    pub fn new() -> Self {
        EventBound {
            said: HashMap::new(),
            waiting: HashMap::new(),
            tokens: EVENT_BURST,
            refilled: None,
            suppressed: 0,
        }
    }

    /// Records a state without an Event: what a new leader finds is not news.
    pub fn baseline(&mut self, key: K, announced: bool) {
        self.waiting.remove(&key);
        self.said.insert(
            key,
            Said {
                announced,
                at: None,
            },
        );
    }

    /// Forgets a Service (deleted); what it last said is not needed any more.
    pub fn forget(&mut self, key: &K) {
        self.said.remove(key);
        self.waiting.remove(key);
    }

    /// The state last said (or recorded) for `key`.
    pub fn said(&self, key: &K) -> Option<bool> {
        self.said.get(key).map(|s| s.announced)
    }

    /// The Service's state is `announced` at `now`: what to do. On [`Decision::Emit`] the
    /// state counts as said.
    pub fn observe(&mut self, key: &K, announced: bool, now: Instant) -> Decision {
        let (last, at) = match self.said.get(key) {
            Some(s) => (s.announced, s.at),
            None => (false, None),
        };
        if last == announced {
            if self.waiting.remove(key).is_some() {
                // A change and its undoing inside the window: neither is written.
                self.suppressed += 2;
            }
            return Decision::Quiet;
        }
        if let Some(at) = at {
            let due = at + SERVICE_WINDOW;
            if now < due {
                self.waiting.insert(key.clone(), due);
                return Decision::Wait(due);
            }
        }
        self.waiting.remove(key);
        let spent = self.take_token(now);
        self.said.insert(
            key.clone(),
            Said {
                announced,
                at: if spent { Some(now) } else { at },
            },
        );
        if spent {
            Decision::Emit
        } else {
            self.suppressed += 1;
            Decision::Suppressed
        }
    }

    /// The Services whose window has ended by `now` (ask [`Self::observe`] again with their
    /// state).
    pub fn due(&self, now: Instant) -> Vec<K> {
        self.waiting
            .iter()
            .filter(|(_, due)| **due <= now)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The earliest end of a window some Service waits for.
    pub fn next_due(&self) -> Option<Instant> {
        self.waiting.values().min().copied()
    }

    fn take_token(&mut self, now: Instant) -> bool {
        if let Some(then) = self.refilled {
            let gained = now.saturating_duration_since(then).as_secs_f64() * EVENTS_PER_SECOND;
            self.tokens = (self.tokens + gained).min(EVENT_BURST);
        }
        self.refilled = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advertisement::Advertisement;
    use crate::plan::Drain;
    use crate::service::ServiceKey;
    use crate::{EXCLUDE_FROM_EXTERNAL_LB_LABEL, SERVICE_NAME_LABEL};
    use podcidr_api::BGPAdvertisementSpec;
    use serde_json::json;

    fn ad(extra: serde_json::Value) -> Advertisement {
        let mut spec = json!({"serviceSelector": {}, "addresses": ["LoadBalancerIP"],
                              "allowedPrefixes": ["198.51.100.0/24"]});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let spec: BGPAdvertisementSpec = serde_json::from_value(spec).unwrap();
        Advertisement::from_spec("lb", &spec).unwrap()
    }

    fn svc(policy: TrafficPolicy) -> ServiceFacts {
        ServiceFacts {
            key: ServiceKey {
                namespace: "shop".into(),
                name: "web".into(),
            },
            labels: [(SERVICE_NAME_LABEL.to_owned(), "web".to_owned())].into(),
            load_balancer_ips: vec![("198.51.100.7".parse().unwrap(), false)],
            is_load_balancer: true,
            external_policy: policy,
            ..ServiceFacts::default()
        }
    }

    fn node(name: &str) -> NodeView {
        NodeView {
            facts: NodeFacts {
                name: name.into(),
                ..NodeFacts::default()
            },
            peers: vec![PeerFacts {
                name: "tor".into(),
                labels: BTreeMap::new(),
            }],
        }
    }

    fn nodes(names: &[&str]) -> BTreeMap<String, NodeView> {
        names.iter().map(|n| ((*n).to_owned(), node(n))).collect()
    }

    /// Ready (`true`) or not-ready endpoints on the named nodes, in one slice.
    fn endpoints(eps: &[(&str, bool)]) -> ServiceEndpoints {
        let eps: Vec<_> = eps
            .iter()
            .map(|(n, ready)| json!({"addresses": ["10.244.1.5"], "nodeName": n,
                                     "conditions": {"ready": ready, "serving": ready, "terminating": false}}))
            .collect();
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "shop",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "endpoints": eps
        }))
        .unwrap();
        ServiceEndpoints::from_slice(&slice)
    }

    #[test]
    fn first_start_a_ready_endpoint_announces_a_cluster_service_from_every_node() {
        let s = svc(TrafficPolicy::Cluster);
        let n = nodes(&["a", "b", "c"]);
        let ads = [ad(json!({}))];
        let none = announced(&s, &endpoints(&[("a", false)]), &ads, &n, Scan::All);
        assert!(!none.anywhere());
        assert_eq!(none.why_not.as_deref(), Some("no ready endpoint anywhere"));
        let ready = endpoints(&[("a", true)]);
        let all = announced(&s, &ready, &ads, &n, Scan::All);
        assert_eq!(all.nodes, 3);
        assert_eq!(
            all.addresses,
            ["198.51.100.7".parse::<IpAddr>().unwrap()].into()
        );
        let first = announced(&s, &ready, &ads, &n, Scan::First);
        assert_eq!(first.nodes, 1, "the first node that announces settles it");
    }

    #[test]
    fn full_stop_no_endpoint_anywhere_withdraws_from_every_node_and_says_why() {
        let s = svc(TrafficPolicy::Cluster);
        let gone = announced(
            &s,
            &ServiceEndpoints::default(),
            &[ad(json!({}))],
            &nodes(&["a", "b"]),
            Scan::All,
        );
        assert_eq!(gone.nodes, 0);
        assert_eq!(gone.why_not.as_deref(), Some("no ready endpoint anywhere"));
        let unselected = announced(
            &s,
            &endpoints(&[("a", true)]),
            &[ad(
                json!({"serviceSelector": {"matchLabels": {"app": "other"}}}),
            )],
            &nodes(&["a"]),
            Scan::All,
        );
        assert_eq!(unselected.why_not.as_deref(), Some(NOT_SELECTED));
    }

    #[test]
    fn local_only_where_endpoints_are_and_not_from_nodes_the_cluster_does_not_know() {
        let s = svc(TrafficPolicy::Local);
        let ads = [ad(json!({}))];
        let eps = endpoints(&[("b", true), ("c", false)]);
        let a = announced(&s, &eps, &ads, &nodes(&["a", "b", "c"]), Scan::All);
        assert_eq!(a.nodes, 1, "only b has a ready local endpoint");
        // The endpoint's node is not (yet) a known Node: nothing announces it.
        let a = announced(&s, &eps, &ads, &nodes(&["a", "c"]), Scan::All);
        assert!(!a.anywhere());
        // With aggregation the aggregate goes out from every node while served anywhere.
        let agg = [ad(json!({"aggregationLengthIPv4": 24}))];
        let a = announced(&s, &eps, &agg, &nodes(&["a", "b", "c"]), Scan::All);
        assert_eq!(a.nodes, 3);
    }

    #[test]
    fn excluded_nodes_announce_no_load_balancer_address() {
        let s = svc(TrafficPolicy::Cluster);
        let mut n = nodes(&["a", "b"]);
        for v in n.values_mut() {
            v.facts
                .labels
                .insert(EXCLUDE_FROM_EXTERNAL_LB_LABEL.into(), String::new());
        }
        let eps = endpoints(&[("a", true)]);
        let a = announced(&s, &eps, &[ad(json!({}))], &n, Scan::All);
        assert!(!a.anywhere());
        assert_eq!(a.why_not, Some(Reason::ExcludedNode.to_string()));
        n.get_mut("b").unwrap().facts.labels.clear();
        assert_eq!(
            announced(&s, &eps, &[ad(json!({}))], &n, Scan::All).nodes,
            1
        );
    }

    #[test]
    fn draining_nodes_withdraw_unless_the_last_local_server() {
        let mut n = nodes(&["a", "b"]);
        for v in n.values_mut() {
            v.facts.drain = Drain::Withdrawn;
        }
        let ads = [ad(json!({}))];
        let cluster = svc(TrafficPolicy::Cluster);
        let eps = endpoints(&[("a", true)]);
        let a = announced(&cluster, &eps, &ads, &n, Scan::All);
        assert!(!a.anywhere(), "every node drains");
        assert_eq!(a.why_not, Some(Reason::Draining.to_string()));
        // `Local`, served only on draining a: a keeps it (withdrawing would black-hole it).
        let local = svc(TrafficPolicy::Local);
        assert_eq!(announced(&local, &eps, &ads, &n, Scan::All).nodes, 1);
    }

    #[test]
    fn no_peer_selected_means_not_announced() {
        let s = svc(TrafficPolicy::Cluster);
        let ads = [ad(json!({"peers": {"matchLabels": {"role": "edge"}}}))];
        let a = announced(
            &s,
            &endpoints(&[("a", true)]),
            &ads,
            &nodes(&["a"]),
            Scan::All,
        );
        assert_eq!(a.why_not, Some(Reason::NoPeer.to_string()));
        let mut n = nodes(&["a"]);
        n.get_mut("a").unwrap().peers.clear();
        let a = announced(
            &s,
            &endpoints(&[("a", true)]),
            &[ad(json!({}))],
            &n,
            Scan::All,
        );
        assert!(!a.anywhere(), "a node without peers announces nothing");
    }

    #[test]
    fn the_datapath_gate_follows_endpoint_slice_readiness() {
        let mut s = svc(TrafficPolicy::Local);
        s.health_check_node_port = Some(32000);
        let ads = [ad(json!({"healthCheckGate": {}}))];
        let a = announced(
            &s,
            &endpoints(&[("a", true)]),
            &ads,
            &nodes(&["a"]),
            Scan::All,
        );
        assert_eq!(a.nodes, 1);
    }

    #[test]
    fn agrees_with_plan_run_on_every_node() {
        // The shortcuts (selection first, Local candidates) give plan's answer.
        let ads = [
            ad(json!({})),
            ad(json!({"addresses": ["ClusterIP"], "allowedPrefixes": ["10.96.0.0/16"]})),
        ];
        let n = nodes(&["a", "b", "c"]);
        for policy in [TrafficPolicy::Cluster, TrafficPolicy::Local] {
            let mut s = svc(policy);
            s.cluster_ips = vec!["10.96.0.10".parse().unwrap()];
            s.internal_policy = TrafficPolicy::Local;
            let eps = endpoints(&[("b", true), ("c", false)]);
            let by_plan = n
                .values()
                .filter(|v| {
                    let e = eps.endpoints(&v.facts.name);
                    let p = plan(&v.facts, &v.peers, &ads, [(&s, &e)]);
                    p.rows.iter().any(|r| !r.announced.is_empty())
                })
                .count();
            assert_eq!(
                announced(&s, &eps, &ads, &n, Scan::All).nodes,
                by_plan,
                "{policy:?}"
            );
        }
    }

    #[test]
    fn per_node_counts_match_endpoints_from_slices() {
        let eps = endpoints(&[("a", true), ("a", true), ("b", false), ("c", true)]);
        let two = ServiceEndpoints::sum([&eps, &endpoints(&[("b", true)])]);
        let e = two.endpoints("b");
        assert_eq!((e.local_ready, e.remote_ready), (1, 3));
        assert_eq!(two.nodes().collect::<Vec<_>>(), ["a", "b", "c"]);
    }

    fn at(t0: Instant, secs: u64) -> Instant {
        t0 + Duration::from_secs(secs)
    }

    #[test]
    fn a_new_leader_says_nothing_about_what_it_finds() {
        let t0 = Instant::now();
        let mut b = EventBound::new();
        b.baseline("web", true);
        assert_eq!(b.observe(&"web", true, t0), Decision::Quiet);
        assert_eq!(b.observe(&"web", false, t0), Decision::Emit);
    }

    #[test]
    fn one_event_per_service_per_minute_and_the_latest_state_after_it() {
        let t0 = Instant::now();
        let mut b = EventBound::new();
        assert_eq!(b.observe(&"web", true, t0), Decision::Emit);
        assert_eq!(
            b.observe(&"web", false, at(t0, 10)),
            Decision::Wait(at(t0, 60))
        );
        assert!(b.due(at(t0, 59)).is_empty());
        assert_eq!(b.next_due(), Some(at(t0, 60)));
        assert_eq!(b.due(at(t0, 60)), ["web"]);
        assert_eq!(b.observe(&"web", false, at(t0, 60)), Decision::Emit);
        assert_eq!(b.said(&"web"), Some(false));
        assert_eq!(b.next_due(), None);
        assert_eq!(b.suppressed, 0);
    }

    #[test]
    fn a_start_and_stop_inside_the_window_emits_nothing_and_is_counted() {
        let t0 = Instant::now();
        let mut b = EventBound::new();
        b.baseline("web", false);
        assert_eq!(b.observe(&"web", true, t0), Decision::Emit);
        assert!(matches!(
            b.observe(&"web", false, at(t0, 5)),
            Decision::Wait(_)
        ));
        assert_eq!(b.observe(&"web", true, at(t0, 6)), Decision::Quiet);
        assert!(b.due(at(t0, 61)).is_empty(), "nothing left to say");
        assert_eq!(b.suppressed, 2);
    }

    #[test]
    fn the_cluster_bucket_bounds_a_mass_change_and_refills() {
        let t0 = Instant::now();
        let mut b = EventBound::new();
        let burst = EVENT_BURST as usize;
        let emitted = (0..burst + 20)
            .filter(|i| b.observe(i, true, t0) == Decision::Emit)
            .count();
        assert_eq!(emitted, burst);
        assert_eq!(b.suppressed, 20);
        assert_eq!(b.said(&(burst + 1)), Some(true), "no late Event");
        // One second later: EVENTS_PER_SECOND more.
        let later = (1000..1000 + burst)
            .filter(|i| b.observe(i, true, at(t0, 1)) == Decision::Emit)
            .count();
        assert_eq!(later, EVENTS_PER_SECOND as usize);
    }
}
