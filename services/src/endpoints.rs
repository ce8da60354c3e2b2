//! Which of a Service's endpoints serve traffic, chosen as kube-proxy chooses (KEP-1669,
//! `discovery.k8s.io/v1`): ready endpoints; serving-but-terminating ones only when no ready
//! one exists. A speaker keeps only these counts per Service, not the slices.

use k8s_openapi::api::discovery::v1::EndpointSlice;

/// Counts of one Service's endpoints, from all its EndpointSlices, seen from one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// Ready endpoints on this node.
    pub local_ready: u32,
    /// Serving, terminating endpoints on this node.
    pub local_terminating: u32,
    /// Ready endpoints on other nodes.
    pub remote_ready: u32,
    /// Serving, terminating endpoints on other nodes.
    pub remote_terminating: u32,
}

/// Where a Service can be served, seen from one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Serving {
    pub anywhere: bool,
    pub here: bool,
    pub elsewhere: bool,
}

impl Endpoints {
    /// Counts the endpoints of `slices` (one Service's) as seen from `node`. An endpoint
    /// without `nodeName` counts as remote: it cannot be shown to be here.
    pub fn from_slices<'a>(
        slices: impl IntoIterator<Item = &'a EndpointSlice>,
        node: &str,
    ) -> Self {
        let mut e = Endpoints::default();
        for ep in slices.into_iter().flat_map(|s| s.endpoints.iter()) {
            let c = ep.conditions.as_ref();
            // KEP-1669: a nil `ready` is true; `serving` defaults to `ready`; `terminating`
            // defaults to false.
            let ready = c.and_then(|c| c.ready).unwrap_or(true);
            let serving = c.and_then(|c| c.serving).unwrap_or(ready);
            let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
            let local = ep.node_name.as_deref() == Some(node);
            let slot = match (local, ready && !terminating, serving && terminating) {
                (true, true, _) => &mut e.local_ready,
                (true, false, true) => &mut e.local_terminating,
                (false, true, _) => &mut e.remote_ready,
                (false, false, true) => &mut e.remote_terminating,
                (_, false, false) => continue,
            };
            *slot = slot.saturating_add(1);
        }
        e
    }

    /// `other`'s counts added (one more EndpointSlice of the Service).
    pub fn add(&mut self, other: &Endpoints) {
        self.local_ready = self.local_ready.saturating_add(other.local_ready);
        self.local_terminating = self
            .local_terminating
            .saturating_add(other.local_terminating);
        self.remote_ready = self.remote_ready.saturating_add(other.remote_ready);
        self.remote_terminating = self
            .remote_terminating
            .saturating_add(other.remote_terminating);
    }

    /// `other`'s counts taken away (an EndpointSlice changed or gone).
    pub fn subtract(&mut self, other: &Endpoints) {
        self.local_ready = self.local_ready.saturating_sub(other.local_ready);
        self.local_terminating = self
            .local_terminating
            .saturating_sub(other.local_terminating);
        self.remote_ready = self.remote_ready.saturating_sub(other.remote_ready);
        self.remote_terminating = self
            .remote_terminating
            .saturating_sub(other.remote_terminating);
    }

    /// All a plan reads of the counts: two counts with the same `Serving` plan alike, so a
    /// speaker passes on an endpoint change only when this changes.
    pub fn serving(&self) -> Serving {
        Serving {
            anywhere: self.served_anywhere(),
            here: self.served_here(),
            elsewhere: self.served_elsewhere(),
        }
    }

    /// Some endpoint anywhere is ready.
    pub fn ready_anywhere(&self) -> bool {
        self.local_ready > 0 || self.remote_ready > 0
    }

    /// The Service can be served at all: a ready endpoint, or, with none ready anywhere, a
    /// serving terminating one (kube-proxy's fallback, which lets the last pods drain).
    pub fn served_anywhere(&self) -> bool {
        self.ready_anywhere() || self.local_terminating > 0 || self.remote_terminating > 0
    }

    /// This node can serve a `Local` Service: a ready local endpoint, or a serving
    /// terminating one while no endpoint anywhere is ready. So a terminating last pod keeps
    /// its node's route until another node has a ready one.
    pub fn served_here(&self) -> bool {
        self.local_ready > 0 || (!self.ready_anywhere() && self.local_terminating > 0)
    }

    /// Another node can serve a `Local` Service (what lets a draining node withdraw).
    pub fn served_elsewhere(&self) -> bool {
        self.remote_ready > 0 || (!self.ready_anywhere() && self.remote_terminating > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": "web-abc", "namespace": "shop",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": endpoints
        }))
        .unwrap()
    }

    fn ep(node: &str, ready: bool, serving: bool, terminating: bool) -> serde_json::Value {
        json!({"addresses": ["10.244.1.5"], "nodeName": node,
               "conditions": {"ready": ready, "serving": serving, "terminating": terminating}})
    }

    #[test]
    fn a_new_pod_that_is_not_ready_serves_nothing_kep_1669() {
        let e = Endpoints::from_slices([&slice(json!([ep("a", false, false, false)]))], "a");
        assert!(!e.served_here() && !e.served_anywhere());
    }

    #[test]
    fn a_terminating_last_pod_keeps_its_node_until_another_node_is_ready_kep_1669() {
        let draining = slice(json!([
            ep("a", false, true, true),
            ep("b", false, false, false)
        ]));
        let e = Endpoints::from_slices([&draining], "a");
        assert!(
            e.served_here(),
            "no ready endpoint anywhere: the terminating one serves"
        );
        let ready_elsewhere = slice(json!([
            ep("a", false, true, true),
            ep("b", true, true, false)
        ]));
        let e = Endpoints::from_slices([&ready_elsewhere], "a");
        assert!(
            !e.served_here(),
            "b is ready: a's terminating pod no longer counts"
        );
        assert!(e.served_elsewhere());
    }

    #[test]
    fn absent_conditions_mean_ready_and_an_endpoint_without_a_node_is_not_local() {
        let s = slice(
            json!([{"addresses": ["10.244.1.5"]}, {"addresses": ["10.244.1.6"], "nodeName": "a"}]),
        );
        let e = Endpoints::from_slices([&s], "a");
        assert_eq!((e.local_ready, e.remote_ready), (1, 1));
    }

    #[test]
    fn counts_add_up_over_several_slices() {
        let one = slice(json!([ep("a", true, true, false)]));
        let two = slice(json!([
            ep("a", true, true, false),
            ep("c", true, true, false)
        ]));
        let e = Endpoints::from_slices([&one, &two], "a");
        assert_eq!((e.local_ready, e.remote_ready), (2, 1));
    }
}
