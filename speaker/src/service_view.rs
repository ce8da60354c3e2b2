//! How the cluster's objects look to the Service rules, for the two readers that see every
//! node rather than one: `podcidr-bgp diff --services` and the allocator's Events on Services.
//! They must decide as the speakers do, so both read these.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::core::{Selector, SelectorExt};
use podcidr_api::{BGPPeer, SpeakerReport};
use podcidr_services::{NodeDrain, PeerFacts};

/// Whether a node drains its Service routes, as the speaker decides it (its graceful-shutdown
/// period is the speaker's: `diff` shows the end state).
pub fn draining(node: &Node) -> bool {
    let facts = ipam_watch::source::node_facts(node);
    podcidr_services::drain_trigger(NodeDrain {
        deleted: false,
        deleting: facts.deleting,
        taints: &facts.taints,
        annotations: &facts.annotations,
        not_ready: facts.not_ready.as_deref(),
    })
    .is_some()
}

/// The peers of a node: the BGPPeer objects whose `nodeSelector` matches its `labels`; with
/// none (a config file), the peers its report names ([`reported_peers`]).
pub fn peers_of_node(
    labels: &BTreeMap<String, String>,
    peers: &[BGPPeer],
    reported: Vec<String>,
) -> Vec<PeerFacts> {
    let selected: Vec<PeerFacts> = peers
        .iter()
        .filter(|p| {
            p.spec
                .node_selector
                .as_ref()
                .is_none_or(|s| Selector::try_from(s.clone()).is_ok_and(|s| s.matches(labels)))
        })
        .map(|p| PeerFacts {
            name: p.name_any(),
            labels: p.labels().clone(),
        })
        .collect();
    if !selected.is_empty() {
        return selected;
    }
    reported
        .into_iter()
        .map(|name| PeerFacts {
            name,
            labels: BTreeMap::new(),
        })
        .collect()
}

/// The peers a report names: the BGPPeer's name, else the session's.
pub fn reported_peers(report: &SpeakerReport) -> Vec<String> {
    report
        .peers
        .iter()
        .map(|p| p.bgp_peer.clone().unwrap_or_else(|| p.name.clone()))
        .collect()
}
