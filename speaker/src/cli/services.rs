//! `podcidr-bgp diff --services`: per Service address and per node, what should be announced
//! (the speakers' own rules, `podcidr_services::plan`, run here for every node), what each
//! node's speaker reports it sends to which peer (its NodeBGPStatus), and why an address is
//! not announced. Pure: the loader (`load_services`) lists, [`services_diff`] compares.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use podcidr_api::{BGPAdvertisement, BGPPeer, SpeakerReport};
use podcidr_services::{
    Advertisement, Drain, Endpoints, NodeFacts, PeerFacts, ServiceFacts, ServiceKey, plan,
};
use serde::Serialize;

use crate::service_view::{draining, peers_of_node, reported_peers};

/// Everything `diff --services` compares.
#[derive(Debug, Default)]
pub struct ServicesInput {
    pub services: Vec<Service>,
    pub slices: Vec<EndpointSlice>,
    pub advertisements: Vec<BGPAdvertisement>,
    pub nodes: Vec<Node>,
    pub peers: Vec<BGPPeer>,
    /// Each node's published report.
    pub reports: BTreeMap<String, SpeakerReport>,
}

/// How one address on one node compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServiceVerdict {
    /// What should be announced is, to every peer the advertisement selects; or neither.
    Ok,
    /// Should be announced and some selected peer does not get it.
    NotAnnounced,
    /// Announced although the rules say not (a stale speaker, a drain still in its
    /// graceful-shutdown period).
    AnnouncedNotIntended,
    /// The node publishes no report, or a report listing only part of its routes.
    Unknown,
}

impl ServiceVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceVerdict::Ok => "ok",
            ServiceVerdict::NotAnnounced => "not-announced",
            ServiceVerdict::AnnouncedNotIntended => "announced-not-intended",
            ServiceVerdict::Unknown => "unknown",
        }
    }
}

/// One address of one Service under one advertisement, on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceRow {
    pub service: String,
    pub address: String,
    pub kind: &'static str,
    pub advertisement: String,
    pub node: String,
    /// The prefixes that should be announced (empty: none).
    pub should_announce: Vec<String>,
    /// Peers the report shows each of them sent to.
    pub announced_to: Vec<String>,
    /// Why not (or why only the aggregate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The short form of `reason` (`noLocalEndpoint`, `notReady`, `draining`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<&'static str>,
    pub verdict: ServiceVerdict,
}

/// Advertisements that cannot be read: no node announces for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedAdvertisement {
    pub name: String,
    pub problems: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct ServicesReport {
    pub rows: Vec<ServiceRow>,
    pub refused: Vec<RefusedAdvertisement>,
}

impl ServicesReport {
    pub fn problems(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.verdict != ServiceVerdict::Ok)
            .count()
            + self.refused.len()
    }
}

/// Each Service's endpoints as one node sees them.
fn endpoints_for(slices: &[&EndpointSlice], node: &str) -> Endpoints {
    Endpoints::from_slices(slices.iter().copied(), node)
}

/// The peers of a node: the BGPPeer objects that select it; with none (a config file), the
/// peers its report names.
fn peers_of(node: &Node, peers: &[BGPPeer], report: Option<&SpeakerReport>) -> Vec<PeerFacts> {
    peers_of_node(
        node.labels(),
        peers,
        report.map(reported_peers).unwrap_or_default(),
    )
}

/// Prefix → peers (by BGPPeer name, else session name) the report says it is sent to, and
/// whether the report lists every route.
fn on_the_wire(report: &SpeakerReport) -> (BTreeMap<IpNet, BTreeSet<String>>, bool) {
    let mut sent: BTreeMap<IpNet, BTreeSet<String>> = BTreeMap::new();
    let mut complete = true;
    for p in &report.peers {
        complete &= p.routes_omitted == 0;
        let name = p.bgp_peer.clone().unwrap_or_else(|| p.name.clone());
        for r in &p.routes {
            if let Ok(prefix) = r.prefix.parse() {
                sent.entry(prefix).or_default().insert(name.clone());
            }
        }
    }
    (sent, complete)
}

pub fn services_diff(input: &ServicesInput) -> ServicesReport {
    let mut report = ServicesReport::default();
    let mut ads = Vec::new();
    for a in &input.advertisements {
        match Advertisement::from_spec(&a.name_any(), &a.spec) {
            Ok(ad) => ads.push(ad),
            Err(problems) => report.refused.push(RefusedAdvertisement {
                name: a.name_any(),
                problems,
            }),
        }
    }
    let services: Vec<Arc<ServiceFacts>> = input
        .services
        .iter()
        .filter_map(ServiceFacts::from_service)
        .map(Arc::new)
        .collect();
    let mut slices: BTreeMap<ServiceKey, Vec<&EndpointSlice>> = BTreeMap::new();
    for s in &input.slices {
        if let Some(name) = s.labels().get("kubernetes.io/service-name") {
            let key = ServiceKey {
                namespace: s.namespace().unwrap_or_default(),
                name: name.clone(),
            };
            slices.entry(key).or_default().push(s);
        }
    }
    for node in &input.nodes {
        let name = node.name_any();
        let speaker = input.reports.get(&name);
        let facts = NodeFacts {
            name: name.clone(),
            labels: node.labels().clone(),
            drain: if draining(node) {
                Drain::Withdrawn
            } else {
                Drain::No
            },
            datapath: Default::default(),
        };
        let peers = peers_of(node, &input.peers, speaker);
        let endpoints: Vec<(&ServiceFacts, Endpoints)> = services
            .iter()
            .map(|s| {
                let e = endpoints_for(slices.get(&s.key).map_or(&[][..], Vec::as_slice), &name);
                (&**s, e)
            })
            .collect();
        let plan = plan(&facts, &peers, &ads, endpoints.iter().map(|(s, e)| (*s, e)));
        let (sent, complete) = speaker.map(on_the_wire).unwrap_or_default();
        for row in plan.rows {
            let announced_to: BTreeSet<String> = row
                .announced
                .iter()
                .chain(std::iter::once(&IpNet::from(row.address)))
                .filter_map(|p| sent.get(p))
                .flatten()
                .cloned()
                .collect();
            let every_prefix_sent = row.announced.iter().all(|p| {
                row.peers
                    .iter()
                    .all(|peer| sent.get(p).is_some_and(|s| s.contains(peer)))
            });
            let verdict = match (speaker, complete) {
                (None, _) => ServiceVerdict::Unknown,
                (Some(_), _) if !row.announced.is_empty() && every_prefix_sent => {
                    ServiceVerdict::Ok
                }
                (Some(_), false) => ServiceVerdict::Unknown,
                (Some(_), true) if !row.announced.is_empty() => ServiceVerdict::NotAnnounced,
                (Some(_), true) if sent.contains_key(&IpNet::from(row.address)) => {
                    ServiceVerdict::AnnouncedNotIntended
                }
                (Some(_), true) => ServiceVerdict::Ok,
            };
            report.rows.push(ServiceRow {
                service: row.service.to_string(),
                address: row.address.to_string(),
                kind: row.kind.as_str(),
                advertisement: row.advertisement,
                node: name.clone(),
                should_announce: row.announced.iter().map(ToString::to_string).collect(),
                announced_to: announced_to.into_iter().collect(),
                reason: row.held.as_ref().map(ToString::to_string),
                reason_code: row.held.as_ref().map(|r| r.as_str()),
                verdict,
            });
        }
    }
    report
}

/// The table: one row per (Service address, advertisement, node).
pub fn render_table(report: &ServicesReport, only_problems: bool) -> String {
    let mut out = String::new();
    for r in &report.refused {
        out.push_str(&format!(
            "BGPAdvertisement {} is not applied: {}\n",
            r.name,
            r.problems.join("; ")
        ));
    }
    let header = [
        "SERVICE",
        "ADDRESS",
        "NODE",
        "ADVERTISEMENT",
        "VERDICT",
        "PEERS",
        "WHY NOT",
    ];
    let rows: Vec<[String; 7]> = report
        .rows
        .iter()
        .filter(|r| !only_problems || r.verdict != ServiceVerdict::Ok)
        .map(|r| {
            [
                r.service.clone(),
                r.address.clone(),
                r.node.clone(),
                r.advertisement.clone(),
                r.verdict.as_str().to_owned(),
                if r.announced_to.is_empty() {
                    "-".to_owned()
                } else {
                    r.announced_to.join(",")
                },
                r.reason.clone().unwrap_or_else(|| "-".to_owned()),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                l.push_str(&format!("{cell:<w$}  "));
            }
        }
        l.trim_end().to_owned() + "\n"
    };
    out.push_str(&line(&header));
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        out.push_str(&line(&cells));
    }
    let problems = report.problems();
    out.push_str(&format!(
        "{} rows, {problems} problem{}\n",
        report.rows.len(),
        if problems == 1 { "" } else { "s" }
    ));
    out
}
