//! [`plan`](crate::plan) kept up to date one Service at a time. A speaker holds every Service
//! its advertisements can select (10,000 in a large cluster) while endpoint churn changes a
//! few: re-planning them all per change costs milliseconds of CPU on every node, for each of
//! the cluster's changes. The planner keeps each Service's [`Share`] of the plan and, per
//! (peer, prefix), which Services put it there; a change re-plans that Service and re-merges
//! only the routes it touches. A change of the advertisements, the peers or the node's own
//! facts (labels, drain) re-plans everything; a datapath gate's answer re-plans its Service.
//!
//! It gives exactly what [`plan`](crate::plan) gives for the same inputs (a property test
//! replays random changes against it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;

use crate::advertisement::Advertisement;
use crate::endpoints::Endpoints;
use crate::plan::{Announce, Context, NodeFacts, PeerFacts, Plan, Row, Share, plan_service};
use crate::service::{ServiceFacts, ServiceKey};

/// One node's Service plan, kept current.
#[derive(Debug, Default)]
pub struct Planner {
    ctx: Context,
    peers: Vec<PeerFacts>,
    advertisements: Vec<Advertisement>,
    services: BTreeMap<ServiceKey, (Arc<ServiceFacts>, Endpoints)>,
    shares: BTreeMap<ServiceKey, Share>,
    /// Peer → prefix → the merged attributes: what [`Plan::routes`] holds.
    routes: BTreeMap<String, BTreeMap<IpNet, Announce>>,
    /// (peer, prefix) → the Services whose share announces it.
    contributors: BTreeMap<(String, IpNet), BTreeSet<ServiceKey>>,
    /// Rows announced, rows in all, rows not announced by reason.
    announced: usize,
    rows: usize,
    held: BTreeMap<&'static str, usize>,
    /// Services to probe for the datapath gate, with their `healthCheckNodePort`.
    targets: BTreeMap<ServiceKey, u16>,
    routes_changed: bool,
}

impl Planner {
    pub fn new() -> Self {
        Planner::default()
    }

    /// All the advertisements (those that do not select the node included).
    pub fn set_advertisements(&mut self, advertisements: Vec<Advertisement>) {
        self.advertisements = advertisements;
        self.recontext(self.ctx.node.clone());
    }

    /// The node's peers; a change re-plans everything.
    pub fn set_peers(&mut self, peers: Vec<PeerFacts>) {
        if peers != self.peers {
            self.peers = peers;
            self.recontext(self.ctx.node.clone());
        }
    }

    /// The node's facts. Its name, labels or drain changing re-plans everything; a datapath
    /// answer changing re-plans only its Service.
    pub fn set_node(&mut self, node: NodeFacts) {
        let same_node = node.name == self.ctx.node.name
            && node.labels == self.ctx.node.labels
            && node.drain == self.ctx.node.drain;
        if !same_node {
            self.recontext(node);
            return;
        }
        if node.datapath == self.ctx.node.datapath {
            return;
        }
        let old = std::mem::replace(&mut self.ctx.node.datapath, node.datapath);
        let new = &self.ctx.node.datapath;
        let changed: BTreeSet<ServiceKey> = old
            .iter()
            .filter(|(k, v)| new.get(*k) != Some(*v))
            .chain(new.iter().filter(|(k, v)| old.get(*k) != Some(*v)))
            .map(|(k, _)| k.clone())
            .collect();
        for key in changed {
            self.replan(&key);
        }
    }

    /// A Service added or changed, with its endpoints as seen from this node.
    pub fn upsert(&mut self, service: Arc<ServiceFacts>, endpoints: Endpoints) {
        let key = service.key.clone();
        self.services.insert(key.clone(), (service, endpoints));
        self.replan(&key);
    }

    /// A Service gone (or no longer with an address).
    pub fn remove(&mut self, key: &ServiceKey) {
        if self.services.remove(key).is_some() {
            self.replan(key);
        }
    }

    /// Peer → prefix → attributes.
    pub fn routes(&self) -> &BTreeMap<String, BTreeMap<IpNet, Announce>> {
        &self.routes
    }

    /// Every row, sorted as [`Plan::rows`] is.
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.shares.values().flat_map(|s| s.rows.iter())
    }

    /// Rows announced, and rows held.
    pub fn counts(&self) -> (usize, usize) {
        (self.announced, self.rows - self.announced)
    }

    /// Rows not announced, by [`crate::Reason::as_str`].
    pub fn held_by_reason(&self) -> &BTreeMap<&'static str, usize> {
        &self.held
    }

    /// What [`crate::probe_targets`] gives: the Services to probe and the longest hold-down.
    pub fn probe_targets(&self) -> (Vec<(ServiceKey, u16)>, Duration) {
        let targets = self.targets.iter().map(|(k, p)| (k.clone(), *p)).collect();
        (targets, self.ctx.hold)
    }

    pub fn hold_down(&self) -> Duration {
        self.ctx.hold
    }

    /// Whether the routes changed since the last call.
    pub fn take_routes_changed(&mut self) -> bool {
        std::mem::take(&mut self.routes_changed)
    }

    /// The whole plan, as [`crate::plan`] gives it.
    pub fn to_plan(&self) -> Plan {
        Plan {
            routes: self.routes.clone(),
            rows: self.rows().cloned().collect(),
            graceful_shutdown: self.ctx.node.drain != crate::Drain::No,
        }
    }

    /// A new context: every Service planned again.
    fn recontext(&mut self, node: NodeFacts) {
        self.ctx = Context::new(node, &self.peers, &self.advertisements);
        let keys: Vec<ServiceKey> = self
            .shares
            .keys()
            .chain(self.services.keys())
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        for key in keys {
            self.replan(&key);
        }
    }

    /// Plans one Service again and folds the difference into the routes and counts.
    fn replan(&mut self, key: &ServiceKey) {
        let new = match self.services.get(key) {
            Some((svc, endpoints)) => plan_service(&self.ctx, svc, endpoints),
            None => Share::default(),
        };
        let old = self.shares.remove(key).unwrap_or_default();
        if old == new {
            if !new.rows.is_empty() || new.probe.is_some() {
                self.shares.insert(key.clone(), new);
            }
            return;
        }
        self.announced = self.announced + new.announced() - old.announced();
        self.rows = self.rows + new.rows.len() - old.rows.len();
        for reason in old.held() {
            if let Some(n) = self.held.get_mut(reason) {
                *n -= 1;
                if *n == 0 {
                    self.held.remove(reason);
                }
            }
        }
        for reason in new.held() {
            *self.held.entry(reason).or_default() += 1;
        }
        if old.probe != new.probe {
            match new.probe {
                Some(port) => self.targets.insert(key.clone(), port),
                None => self.targets.remove(key),
            };
        }
        let touched: BTreeSet<(String, IpNet)> = old
            .routes
            .keys()
            .chain(new.routes.keys())
            .cloned()
            .collect();
        for route in old.routes.keys().filter(|r| !new.routes.contains_key(*r)) {
            if let Some(set) = self.contributors.get_mut(route) {
                set.remove(key);
                if set.is_empty() {
                    self.contributors.remove(route);
                }
            }
        }
        for route in new.routes.keys() {
            self.contributors
                .entry(route.clone())
                .or_default()
                .insert(key.clone());
        }
        if !new.rows.is_empty() || new.probe.is_some() {
            self.shares.insert(key.clone(), new);
        }
        for route in touched {
            self.remerge(route);
        }
    }

    /// One (peer, prefix): its attributes merged again from the Services that announce it.
    fn remerge(&mut self, (peer, prefix): (String, IpNet)) {
        let merged = self
            .contributors
            .get(&(peer.clone(), prefix))
            .into_iter()
            .flatten()
            .filter_map(|k| self.shares.get(k))
            .filter_map(|s| s.routes.get(&(peer.clone(), prefix)))
            .cloned()
            .reduce(|mut a, b| {
                a.merge(b);
                a
            });
        let current = self.routes.get(&peer).and_then(|r| r.get(&prefix));
        if current == merged.as_ref() {
            return;
        }
        self.routes_changed = true;
        match merged {
            Some(a) => {
                self.routes.entry(peer).or_default().insert(prefix, a);
            }
            None => {
                if let Some(r) = self.routes.get_mut(&peer) {
                    r.remove(&prefix);
                    if r.is_empty() {
                        self.routes.remove(&peer);
                    }
                }
            }
        }
    }
}
