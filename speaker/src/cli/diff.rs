//! `diff`, pure core: allocations, Node specs and speaker reports in, one verdict per node
//! and prefix out. No kube client, no clock (the caller passes `now`), so it is table-tested.
//!
//! Rows of a node, in this order:
//! - each allocated prefix: `conflict` > `no-speaker` / `speaker-dead` / `stale-status` >
//!   `not-announced` > `source-mismatch` > `ok` (the first that applies is the verdict, the
//!   rest go to `also`);
//! - each prefix the speaker announces that is not allocated to the node:
//!   `announced-not-allocated` (`speaker-dead` or `stale-status` first when the speaker is
//!   dead or its report stale);
//! - each `Node.spec.podCIDRs` prefix that is neither allocated nor announced, when the Node
//!   and IPAM disagree: `source-mismatch`.
//!
//! A prefix counts as announced when every Established session of its family carries it.
//! With no Established session at all it is `not-announced`: a down peer is drift.
//!
//! Whether the speaker runs comes from its Lease ([`super::liveness`]), what it announces from
//! its `NodeBGPStatus`.

use std::collections::{BTreeMap, BTreeSet};

use ipam_watch::source::SourceKind;
use ipnet::IpNet;
use podcidr_api::{PeerReport, SpeakerReport};
use serde::Serialize;
use serde::ser::SerializeMap;

use super::liveness::{LeaseInput, Liveness, SpeakerState, classify};

/// Default for `--stale-after`: two status refreshes (a speaker re-writes an unchanged status
/// every hour; its Lease, not this, says whether it runs).
pub const DEFAULT_STALE_AFTER_SECS: u64 = 2 * podcidr_api::contract::STATUS_REFRESH.as_secs();

/// The verdict of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Allocated and announced to every Established peer of its family.
    Ok,
    /// Allocated, but not announced (to some or all peers).
    NotAnnounced,
    /// Announced by the node's speaker, but IPAM does not allocate it to that node.
    AnnouncedNotAllocated,
    /// `Node.spec.podCIDRs` and IPAM disagree.
    SourceMismatch,
    /// Two nodes' allocations overlap (or the allocator marked the object as conflicting).
    Conflict,
    /// The speaker runs (its Lease is current) but its report is older than
    /// `--stale-after`, or was never written.
    StaleStatus,
    /// The node has an allocation but neither a `NodeBGPStatus` nor a Lease.
    NoSpeaker,
    /// The speaker's Lease expired (or there is none beside its report): it is not running
    /// or cannot reach the API; its report is what it said last.
    SpeakerDead,
}

impl Verdict {
    /// Every verdict, in the order summaries list them.
    pub const ALL: [Verdict; 8] = [
        Self::Ok,
        Self::NotAnnounced,
        Self::AnnouncedNotAllocated,
        Self::SourceMismatch,
        Self::Conflict,
        Self::StaleStatus,
        Self::NoSpeaker,
        Self::SpeakerDead,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::NotAnnounced => "not-announced",
            Self::AnnouncedNotAllocated => "announced-not-allocated",
            Self::SourceMismatch => "source-mismatch",
            Self::Conflict => "conflict",
            Self::StaleStatus => "stale-status",
            Self::NoSpeaker => "no-speaker",
            Self::SpeakerDead => "speaker-dead",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything `diff` knows about one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInput {
    pub name: String,
    /// What IPAM allocated; `None` when there is no IPAM object for the node.
    pub allocated: Option<Vec<IpNet>>,
    /// The allocator marked the allocation `Allocated=False/Conflict`.
    pub allocator_conflict: bool,
    /// `Node.spec.podCIDRs`; `None` when the Node object does not exist.
    pub node_spec: Option<Vec<IpNet>>,
    /// The speaker's published report; `None` when there is none.
    pub speaker: Option<SpeakerReport>,
    /// The speaker's Lease; `None` when there is none.
    pub lease: Option<LeaseInput>,
}

/// The whole cluster, as plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffInput {
    /// Where `allocated` came from (`node-spec` never reports a source mismatch).
    pub source: SourceKind,
    pub nodes: Vec<NodeInput>,
    /// Unix seconds.
    pub now: i64,
    pub stale_after_secs: u64,
}

/// One peer of the node, as seen for one prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerCell {
    pub name: String,
    pub address: String,
    pub state: String,
    /// The peer's advertised routes include the prefix.
    pub announced: bool,
    pub next_hop: Option<String>,
    /// Why the speaker does not offer the prefix to this peer (`no-next-hop`,
    /// `needs-extended-next-hop`, `family-not-carried`), when it says so.
    pub refused: Option<String>,
}

/// Another node's allocation that overlaps this row's prefix.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ConflictRef {
    pub node: String,
    pub prefix: String,
}

/// One output row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffRow {
    pub node: String,
    pub prefix: String,
    pub verdict: Verdict,
    /// Further verdicts that also apply, in precedence order.
    pub also: Vec<Verdict>,
    pub detail: String,
    /// What IPAM allocated to the node.
    pub allocated: Vec<String>,
    /// The Node's `spec.podCIDRs`.
    pub node_spec: Vec<String>,
    /// Peers whose advertised routes include the prefix.
    pub announced_to: Vec<String>,
    pub peers: Vec<PeerCell>,
    /// Age of the speaker report; `None` without a report or a valid `updatedAt`.
    pub status_age_seconds: Option<u64>,
    /// The node's speaker: `live`, `stale`, `dead` or `none` (from its Lease and report).
    pub liveness: Liveness,
    /// Seconds since the speaker last renewed its Lease; `None` without one.
    pub lease_age_seconds: Option<u64>,
    pub conflicts_with: Vec<ConflictRef>,
    /// The node's local AS as its speaker reports it; `None` without a report or while it
    /// cannot be resolved.
    pub local_asn: Option<u32>,
    /// Where it came from (`config`, `label <key>`, `asnOverrides[i]`, …).
    pub local_asn_source: String,
    /// `forwardingGate.mode: report`: why the gate would hold the prefix (it is announced
    /// anyway); `None` when it would not, or the gate enforces or is off.
    pub would_hold: Option<String>,
}

impl DiffRow {
    pub fn is_ok(&self) -> bool {
        self.verdict == Verdict::Ok
    }
}

/// Count of rows per verdict, serialized in [`Verdict::ALL`] order with every key present.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerdictCounts(pub BTreeMap<Verdict, usize>);

impl VerdictCounts {
    pub fn get(&self, v: Verdict) -> usize {
        self.0.get(&v).copied().unwrap_or(0)
    }
}

impl Serialize for VerdictCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(Verdict::ALL.len()))?;
        for v in Verdict::ALL {
            map.serialize_entry(v.as_str(), &self.get(v))?;
        }
        map.end()
    }
}

/// Totals over a set of rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub rows: usize,
    pub nodes: usize,
    /// Rows whose verdict is not `ok`.
    pub problems: usize,
    pub nodes_with_problems: usize,
    pub verdicts: VerdictCounts,
}

pub fn summarize(rows: &[DiffRow]) -> Summary {
    let mut counts = BTreeMap::new();
    for r in rows {
        *counts.entry(r.verdict).or_insert(0) += 1;
    }
    let nodes: BTreeSet<&str> = rows.iter().map(|r| r.node.as_str()).collect();
    let bad: BTreeSet<&str> = rows
        .iter()
        .filter(|r| !r.is_ok())
        .map(|r| r.node.as_str())
        .collect();
    Summary {
        rows: rows.len(),
        nodes: nodes.len(),
        problems: rows.iter().filter(|r| !r.is_ok()).count(),
        nodes_with_problems: bad.len(),
        verdicts: VerdictCounts(counts),
    }
}

pub use crate::text::human_secs;

fn family(p: &IpNet) -> &'static str {
    match p {
        IpNet::V4(_) => "ipv4-unicast",
        IpNet::V6(_) => "ipv6-unicast",
    }
}

fn parse(s: &str) -> Option<IpNet> {
    s.parse::<IpNet>().ok().map(|n| n.trunc())
}

fn strings(v: &[IpNet]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

fn join(v: &[IpNet]) -> String {
    if v.is_empty() {
        "nothing".to_owned()
    } else {
        strings(v).join(",")
    }
}

/// Address range of a prefix as integers, with the family, for overlap checks.
fn range(p: &IpNet) -> (u8, u128, u128) {
    match p {
        IpNet::V4(n) => (
            4,
            u128::from(u32::from(n.network())),
            u128::from(u32::from(n.broadcast())),
        ),
        IpNet::V6(n) => (6, u128::from(n.network()), u128::from(n.broadcast())),
    }
}

fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    let (fa, sa, ea) = range(a);
    let (fb, sb, eb) = range(b);
    fa == fb && sa <= eb && sb <= ea
}

/// (node index, prefix) → other nodes' overlapping allocations. CIDRs either nest or are
/// disjoint, so one sorted sweep with a stack of enclosing prefixes finds every pair.
fn find_conflicts(nodes: &[NodeInput]) -> BTreeMap<(usize, IpNet), Vec<ConflictRef>> {
    let mut items: Vec<(u8, u128, u128, usize, IpNet)> = nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| {
            n.allocated.iter().flatten().map(move |p| {
                let (f, s, e) = range(p);
                (f, s, e, i, *p)
            })
        })
        .collect();
    items.sort_by_key(|&(f, s, e, i, _)| (f, s, std::cmp::Reverse(e), i));
    let mut out: BTreeMap<(usize, IpNet), Vec<ConflictRef>> = BTreeMap::new();
    let mut stack: Vec<usize> = Vec::new();
    for k in 0..items.len() {
        let (f, s, _, node, prefix) = items[k];
        while let Some(&t) = stack.last() {
            if items[t].0 != f || items[t].2 < s {
                stack.pop();
            } else {
                break;
            }
        }
        for &t in &stack {
            let (.., other, other_prefix) = items[t];
            if other != node {
                out.entry((node, prefix)).or_default().push(ConflictRef {
                    node: nodes[other].name.clone(),
                    prefix: other_prefix.to_string(),
                });
                out.entry((other, other_prefix))
                    .or_default()
                    .push(ConflictRef {
                        node: nodes[node].name.clone(),
                        prefix: prefix.to_string(),
                    });
            }
        }
        stack.push(k);
    }
    for v in out.values_mut() {
        v.sort();
        v.dedup();
    }
    out
}

fn is_established(p: &PeerReport) -> bool {
    p.state == "Established"
}

/// The next hop the peer got for `prefix`. A report lists a bounded number of routes per
/// peer; past that (`routesOmitted`) an Established peer of the family is taken to carry
/// what the speaker announced.
fn route_of<'a>(report: &SpeakerReport, p: &'a PeerReport, prefix: &IpNet) -> Option<&'a str> {
    let listed = p
        .routes
        .iter()
        .find(|r| parse(&r.prefix).as_ref() == Some(prefix))
        .map(|r| r.next_hop.as_str());
    listed.or_else(|| {
        let unlisted = p.routes_omitted > 0
            && is_established(p)
            && carries_family(p, prefix)
            && report
                .announced
                .iter()
                .any(|a| parse(a).as_ref() == Some(prefix));
        unlisted.then_some("(not listed)")
    })
}

/// Whether the peer can carry the prefix's family (unknown families count as yes).
fn carries_family(p: &PeerReport, prefix: &IpNet) -> bool {
    p.families.is_empty() || p.families.iter().any(|f| f == family(prefix))
}

/// Why the speaker does not offer `prefix` to `p`: the prefix's own refusal when the report
/// lists it, else the peer's family without a next hop (the list stops at 256 refusals).
fn refusal_of<'a>(report: &'a SpeakerReport, p: &PeerReport, prefix: &IpNet) -> Option<&'a str> {
    let listed = report.refused.iter().find(|r| {
        r.peer.as_deref() == Some(p.name.as_str()) && parse(&r.cidr).as_ref() == Some(prefix)
    });
    match listed {
        Some(r) => Some(r.reason.as_str()),
        None => p
            .no_next_hop
            .iter()
            .any(|f| f == family(prefix))
            .then_some("no-next-hop"),
    }
}

fn peer_cells(report: &SpeakerReport, prefix: &IpNet) -> Vec<PeerCell> {
    report
        .peers
        .iter()
        .map(|p| {
            let nh = route_of(report, p, prefix);
            PeerCell {
                name: p.name.clone(),
                address: p.address.clone(),
                state: p.state.clone(),
                announced: nh.is_some(),
                next_hop: nh.map(str::to_owned),
                refused: nh
                    .is_none()
                    .then(|| refusal_of(report, p, prefix))
                    .flatten()
                    .map(str::to_owned),
            }
        })
        .collect()
}

fn states(peers: &[&PeerReport]) -> String {
    peers
        .iter()
        .map(|p| match &p.last_error {
            Some(e) if !is_established(p) => format!("{} {} ({e})", p.name, p.state),
            _ => format!("{} {}", p.name, p.state),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why an allocated prefix is not announced, or `None` when it is.
fn announce_problem(report: &SpeakerReport, prefix: &IpNet) -> Option<String> {
    let all: Vec<&PeerReport> = report.peers.iter().collect();
    let est: Vec<&PeerReport> = all.iter().copied().filter(|p| is_established(p)).collect();
    let fam: Vec<&PeerReport> = est
        .iter()
        .copied()
        .filter(|p| carries_family(p, prefix))
        .collect();
    let missing: Vec<&PeerReport> = fam
        .iter()
        .copied()
        .filter(|p| route_of(report, p, prefix).is_none())
        .collect();
    if !fam.is_empty() && missing.is_empty() {
        return None;
    }
    let in_set = report
        .announced
        .iter()
        .any(|a| parse(a).as_ref() == Some(prefix));
    if !in_set {
        let refused = report
            .refused
            .iter()
            .find(|r| r.peer.is_none() && parse(&r.cidr).as_ref() == Some(prefix));
        let held = report
            .held
            .iter()
            .find(|h| parse(&h.cidr).as_ref() == Some(prefix));
        let speaker_has: Vec<IpNet> = report.allocated.iter().filter_map(|a| parse(a)).collect();
        return Some(match (refused, held) {
            (Some(r), _) => format!("refused by the speaker's announce guard ({})", r.reason),
            (None, Some(h)) => format!(
                "held by the speaker's forwarding gate ({}): the node cannot deliver to it yet",
                h.reason
            ),
            (None, None) if !report.source_ready => {
                "the speaker's source is not synced yet".to_owned()
            }
            (None, None) if !speaker_has.contains(prefix) => format!(
                "the speaker's source ({}) says {}",
                if report.source.is_empty() {
                    "?"
                } else {
                    &report.source
                },
                join(&speaker_has)
            ),
            (None, None) => "not in the speaker's announced set".to_owned(),
        });
    }
    if let Some(why) = local_asn_problem(report) {
        return Some(why);
    }
    if all.is_empty() {
        return Some("no BGP peers configured for this node".to_owned());
    }
    if est.is_empty() {
        return Some(format!("no Established session: {}", states(&all)));
    }
    if fam.is_empty() {
        let mut why = format!("no Established session carries {}", family(prefix));
        let no_hop: Vec<&str> = (all.iter())
            .filter(|p| p.no_next_hop.iter().any(|f| f == family(prefix)))
            .map(|p| p.name.as_str())
            .collect();
        if !no_hop.is_empty() {
            why.push_str(&format!("; no next hop for it on {}", no_hop.join(", ")));
        }
        return Some(why);
    }
    let names: Vec<String> = missing
        .iter()
        .map(|p| match refusal_of(report, p, prefix) {
            Some(r) => format!("{} (refused: {r})", p.name),
            None => p.name.clone(),
        })
        .collect();
    Some(format!("missing on Established {}", names.join(", ")))
}

/// The speaker's `LocalASN` condition when it says no session can run on the node.
fn local_asn_problem(report: &SpeakerReport) -> Option<String> {
    report
        .conditions
        .iter()
        .find(|c| c.type_ == "LocalASN" && c.status == "False" && c.reason != "NodeNotSeen")
        .map(|c| {
            format!(
                "the node's local AS cannot be used ({}): {}",
                c.reason, c.message
            )
        })
}

/// A per-node AS (not the one `asn` number) is worth a word on every row.
fn local_asn_note(report: &SpeakerReport) -> Option<String> {
    let asn = report.local_asn?;
    let source = report.local_asn_source.as_str();
    (!source.is_empty() && source != "config").then(|| format!("local AS {asn} from {source}"))
}

/// Why a gate in `mode: report` would hold `prefix`.
fn would_hold<'a>(report: &'a SpeakerReport, prefix: &IpNet) -> Option<&'a str> {
    report
        .would_hold
        .iter()
        .find(|h| parse(&h.cidr).as_ref() == Some(prefix))
        .map(|h| h.reason.as_str())
}

fn announced_note(report: &SpeakerReport, prefix: &IpNet) -> String {
    let to: Vec<&str> = report
        .peers
        .iter()
        .filter(|p| route_of(report, p, prefix).is_some())
        .map(|p| p.name.as_str())
        .collect();
    let down: Vec<&PeerReport> = report.peers.iter().filter(|p| !is_established(p)).collect();
    let mut s = format!("announced to {}", to.join(", "));
    if let Some(asn) = local_asn_note(report) {
        s.push_str(&format!(" as {asn}"));
    }
    if !down.is_empty() {
        s.push_str(&format!("; not Established: {}", states(&down)));
    }
    if let Some(why) = would_hold(report, prefix) {
        s.push_str(&format!(
            "; the forwarding gate (mode report) would hold it ({why})"
        ));
    }
    s
}

/// Every row for the cluster, nodes sorted by name.
pub fn diff(input: &DiffInput) -> Vec<DiffRow> {
    let conflicts = find_conflicts(&input.nodes);
    let mut order: Vec<usize> = (0..input.nodes.len()).collect();
    order.sort_by(|&a, &b| input.nodes[a].name.cmp(&input.nodes[b].name));
    let mut rows = Vec::new();
    for i in order {
        node_rows(input, i, &conflicts, &mut rows);
    }
    rows
}

fn node_rows(
    input: &DiffInput,
    i: usize,
    conflicts: &BTreeMap<(usize, IpNet), Vec<ConflictRef>>,
    rows: &mut Vec<DiffRow>,
) {
    let node = NodeDiff::new(input, i, conflicts);
    node.allocated_rows(rows);
    let extra = node.announced_not_allocated(rows);
    node.node_spec_only_rows(&extra, rows);
}

/// One node's facts, worked out once for all its rows.
struct NodeDiff<'a> {
    input: &'a DiffInput,
    i: usize,
    n: &'a NodeInput,
    conflicts: &'a BTreeMap<(usize, IpNet), Vec<ConflictRef>>,
    allocated: Vec<IpNet>,
    node_spec: Vec<IpNet>,
    /// The Node's own `spec.podCIDRs` disagree with what the source allocated.
    mismatch: bool,
    mismatch_note: String,
    report: Option<&'a SpeakerReport>,
    speaker: SpeakerState,
    /// The speaker-derived verdicts cannot be trusted: this one goes first.
    doubt: Option<(Verdict, String)>,
}

impl<'a> NodeDiff<'a> {
    fn new(
        input: &'a DiffInput,
        i: usize,
        conflicts: &'a BTreeMap<(usize, IpNet), Vec<ConflictRef>>,
    ) -> Self {
        let n = &input.nodes[i];
        let allocated = n.allocated.clone().unwrap_or_default();
        let node_spec = n.node_spec.clone().unwrap_or_default();
        let mismatch = input.source != SourceKind::NodeSpec
            && !node_spec.is_empty()
            && allocated.iter().collect::<BTreeSet<_>>()
                != node_spec.iter().collect::<BTreeSet<_>>();
        let mismatch_note = format!(
            "Node.spec.podCIDRs says {}, IPAM says {}",
            join(&node_spec),
            join(&allocated)
        );
        let report = n.speaker.as_ref();
        let speaker = classify(n.lease.as_ref(), report, input.now, input.stale_after_secs);
        let doubt = match speaker.liveness {
            Liveness::Dead => Some((Verdict::SpeakerDead, speaker.detail.clone())),
            Liveness::Stale => Some((Verdict::StaleStatus, speaker.detail.clone())),
            Liveness::Live | Liveness::None => None,
        };
        NodeDiff {
            input,
            i,
            n,
            conflicts,
            allocated,
            node_spec,
            mismatch,
            mismatch_note,
            report,
            speaker,
            doubt,
        }
    }

    /// A row; `note` trails the verdict reasons (or is the whole detail of an `ok` row).
    fn row(
        &self,
        prefix: &IpNet,
        verdicts: Vec<(Verdict, String)>,
        note: Option<String>,
    ) -> DiffRow {
        let (verdict, also) = match verdicts.split_first() {
            None => (Verdict::Ok, Vec::new()),
            Some(((v, _), rest)) => (*v, rest.iter().map(|(v, _)| *v).collect()),
        };
        let detail = verdicts
            .iter()
            .map(|(_, d)| d.clone())
            .chain(note)
            .collect::<Vec<_>>()
            .join("; ");
        let report = self.report;
        let peers = report.map(|r| peer_cells(r, prefix)).unwrap_or_default();
        DiffRow {
            node: self.n.name.clone(),
            prefix: prefix.to_string(),
            verdict,
            also,
            detail,
            allocated: strings(&self.allocated),
            node_spec: strings(&self.node_spec),
            announced_to: peers
                .iter()
                .filter(|p| p.announced)
                .map(|p| p.name.clone())
                .collect(),
            peers,
            status_age_seconds: self.speaker.status_age,
            liveness: self.speaker.liveness,
            lease_age_seconds: self.speaker.lease_age,
            conflicts_with: self
                .conflicts
                .get(&(self.i, *prefix))
                .cloned()
                .unwrap_or_default(),
            local_asn: report.and_then(|r| r.local_asn),
            local_asn_source: report
                .map(|r| r.local_asn_source.clone())
                .unwrap_or_default(),
            would_hold: report
                .and_then(|r| would_hold(r, prefix))
                .map(str::to_owned),
        }
    }

    /// What the source allocated: conflicts, the speaker's doubt, whether it is announced,
    /// and whether the Node agrees.
    fn allocated_rows(&self, rows: &mut Vec<DiffRow>) {
        for prefix in &self.allocated {
            let mut v = Vec::new();
            if let Some(others) = self.conflicts.get(&(self.i, *prefix)) {
                let list: Vec<String> = others
                    .iter()
                    .map(|c| format!("{} {}", c.node, c.prefix))
                    .collect();
                v.push((Verdict::Conflict, format!("overlaps {}", list.join(", "))));
            } else if self.n.allocator_conflict {
                v.push((
                    Verdict::Conflict,
                    "the allocator marked it Allocated=False/Conflict".to_owned(),
                ));
            }
            v.extend(self.doubt.clone());
            match self.report {
                None if self.doubt.is_none() => v.push((
                    Verdict::NoSpeaker,
                    "no NodeBGPStatus and no Lease for this node (speaker not running, or \
                     status.publish is false)"
                        .to_owned(),
                )),
                None => {}
                Some(r) => {
                    if let Some(why) = announce_problem(r, prefix) {
                        v.push((Verdict::NotAnnounced, why));
                    }
                }
            }
            if self.mismatch && !self.node_spec.contains(prefix) {
                v.push((Verdict::SourceMismatch, self.mismatch_note.clone()));
            }
            let fine = v.iter().all(|(k, _)| *k != Verdict::NotAnnounced);
            let note = self
                .report
                .filter(|_| fine && self.doubt.is_none())
                .map(|r| announced_note(r, prefix));
            rows.push(self.row(prefix, v, note));
        }
    }

    /// What the speaker announces that the source did not allocate to this node (whose it
    /// is, if another node's); returns those prefixes.
    fn announced_not_allocated(&self, rows: &mut Vec<DiffRow>) -> BTreeSet<IpNet> {
        let mut extra: BTreeSet<IpNet> = BTreeSet::new();
        if let Some(r) = self.report {
            extra.extend(r.announced.iter().filter_map(|a| parse(a)));
            extra.extend(
                r.peers
                    .iter()
                    .flat_map(|p| &p.routes)
                    .filter_map(|rt| parse(&rt.prefix)),
            );
        }
        extra.retain(|p| !self.allocated.contains(p));
        // With `node-spec` the "IPAM" view is the Node itself.
        let ipam = if self.input.source == SourceKind::NodeSpec {
            "Node.spec.podCIDRs"
        } else {
            "IPAM"
        };
        for prefix in &extra {
            let mut v: Vec<(Verdict, String)> = self.doubt.iter().cloned().collect();
            let owners: Vec<String> = self
                .input
                .nodes
                .iter()
                .filter(|o| o.name != self.n.name)
                .filter(|o| o.allocated.iter().flatten().any(|q| overlaps(q, prefix)))
                .map(|o| o.name.clone())
                .collect();
            let mut why = format!(
                "the speaker announces it; {ipam} allocates {}",
                join(&self.allocated)
            );
            if !owners.is_empty() {
                why.push_str(&format!(" (it belongs to {})", owners.join(", ")));
            }
            v.push((Verdict::AnnouncedNotAllocated, why));
            if self.mismatch && self.node_spec.contains(prefix) {
                v.push((Verdict::SourceMismatch, self.mismatch_note.clone()));
            }
            rows.push(self.row(prefix, v, None));
        }
        extra
    }

    /// What only the Node's `spec.podCIDRs` names (the classic mismatch).
    fn node_spec_only_rows(&self, extra: &BTreeSet<IpNet>, rows: &mut Vec<DiffRow>) {
        if !self.mismatch {
            return;
        }
        for prefix in self
            .node_spec
            .iter()
            .filter(|p| !self.allocated.contains(p) && !extra.contains(p))
        {
            rows.push(self.row(
                prefix,
                vec![(Verdict::SourceMismatch, self.mismatch_note.clone())],
                None,
            ));
        }
    }
}

#[cfg(test)]
mod tests;
