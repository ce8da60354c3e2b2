//! Progressive rollout of edits that reset sessions (`spec.rollout`), pure. An edit that
//! changes what goes into a session (hold time, address, AS, families, MD5 key, ...) resets
//! that session on every node it selects; applied everywhere in the same second it is a
//! fleet-wide blackhole. So a node whose running version would reset sessions takes the new
//! generation only once its wave is admitted; an edit that resets nothing on a node
//! (communities, MED, a prefix list) applies there at once.
//!
//! Who is in which wave needs no list of nodes on any object: each node has a rollout hash
//! (FNV-1a 64 of `<kind>/<name>/<node>`, the same on every speaker and in the controller),
//! and the status controller writes, per wave, the boundary below which nodes are admitted
//! (`status.rollout.hashBelow`), chosen so that wave `i` holds its share of the selected
//! nodes. `canarySelector` nodes are wave 0. The controller admits the next wave once every
//! node of the admitted ones runs the generation with its sessions Established again (those
//! that were before), stops the rollout (`Stalled`) when a wave does not come back within
//! `waveTimeout`, and resumes if it does later. Without a controller (no `status.rollout`)
//! speakers apply every edit at once, as before.
//!
//! Not here: the speaker's own decision whether a version resets sessions (`node_config`,
//! with the config's reload diff) and the watches and writes (`config_status`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podcidr_api::{ObjectGeneration, RolloutSpec, RolloutStatus, SpeakerReport, rollout_state};

use super::ObjectKind;
use super::select::selects;

/// The waves without `spec.rollout.waves`: cumulative shares of the selected nodes. No wave
/// adds more than a quarter of the nodes: with a graceful-restart close the routers keep the
/// routes of a resetting session, but a quarter of a fleet resetting at once is what an
/// operator can still reason about.
pub const DEFAULT_WAVES: [u32; 7] = [1, 5, 10, 25, 50, 75, 100];
/// A wave's nodes have this long to come back without `spec.rollout.waveTimeout`.
pub const DEFAULT_WAVE_TIMEOUT: Duration = Duration::from_secs(600);
/// Nodes named in a stalled rollout's message at most.
const NAMED_NODES: usize = 10;

/// `spec.rollout`, read: the waves as cumulative percentages (ascending, ending at 100).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub canary: bool,
    pub waves: Vec<u32>,
    pub wave_timeout: Duration,
}

impl Plan {
    /// The schema refuses what does not parse; anything else that gets through is left out
    /// (never a reason to apply everywhere at once).
    pub fn of(spec: Option<&RolloutSpec>) -> Plan {
        let mut waves: Vec<u32> = spec
            .map(|s| {
                s.waves
                    .iter()
                    .filter_map(|w| w.strip_suffix('%')?.parse().ok())
                    .filter(|p| (1..=100).contains(p))
                    .collect()
            })
            .unwrap_or_default();
        if waves.is_empty() {
            waves = DEFAULT_WAVES.to_vec();
        }
        waves.sort_unstable();
        waves.dedup();
        if waves.last() != Some(&100) {
            waves.push(100);
        }
        let wave_timeout = spec
            .and_then(|s| s.wave_timeout.as_ref())
            .and_then(|t| match t {
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => {
                    u64::try_from(*n).ok()
                }
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => {
                    podcidr_config::parse_seconds(s).ok()
                }
            })
            .filter(|s| *s > 0)
            .map_or(DEFAULT_WAVE_TIMEOUT, Duration::from_secs);
        Plan {
            canary: spec.is_some_and(|s| s.canary_selector.is_some()),
            waves,
            wave_timeout,
        }
    }

    fn wave_count(&self) -> u32 {
        u32::try_from(self.waves.len()).unwrap_or(u32::MAX) + u32::from(self.canary)
    }

    /// The share of the non-canary nodes wave `w` admits (0 for the canary wave).
    fn share(&self, w: u32) -> u32 {
        let i = if self.canary {
            match w.checked_sub(1) {
                Some(i) => i,
                None => return 0,
            }
        } else {
            w
        };
        usize::try_from(i)
            .ok()
            .and_then(|i| self.waves.get(i))
            .copied()
            .unwrap_or(100)
    }
}

/// A node's place in an object's rollout (FNV-1a 64).
pub fn rollout_hash(kind: ObjectKind, name: &str, node: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{kind}/{name}/{node}").bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// What an object's `spec.rollout` and `status.rollout` say about one node.
#[derive(Debug, Clone, Copy)]
pub struct Rollout<'a> {
    pub kind: ObjectKind,
    pub name: &'a str,
    pub generation: Option<i64>,
    pub spec: Option<&'a RolloutSpec>,
    pub status: Option<&'a RolloutStatus>,
}

impl<'a> Rollout<'a> {
    /// What a `BGPSpeakerConfig` says about its rollout.
    pub fn of_config(c: &'a podcidr_api::BGPSpeakerConfig) -> Self {
        Rollout {
            kind: ObjectKind::SpeakerConfig,
            name: c.metadata.name.as_deref().unwrap_or_default(),
            generation: c.metadata.generation,
            spec: c.spec.rollout.as_ref(),
            status: c.status.as_ref().and_then(|s| s.rollout.as_ref()),
        }
    }

    /// What a `BGPPeer` says about its rollout.
    pub fn of_peer(p: &'a podcidr_api::BGPPeer) -> Self {
        Rollout {
            kind: ObjectKind::Peer,
            name: p.metadata.name.as_deref().unwrap_or_default(),
            generation: p.metadata.generation,
            spec: p.spec.rollout.as_ref(),
            status: p.status.as_ref().and_then(|s| s.rollout.as_ref()),
        }
    }
}

impl Rollout<'_> {
    fn canary(&self, labels: &BTreeMap<String, String>) -> bool {
        self.spec
            .and_then(|s| s.canary_selector.as_ref())
            .is_some_and(|sel| selects(Some(sel), labels).unwrap_or(false))
    }

    fn in_waves(&self, st: &RolloutStatus, node: &str, labels: &BTreeMap<String, String>) -> bool {
        let below = st
            .hash_below
            .as_deref()
            .and_then(|b| b.parse::<u64>().ok())
            .unwrap_or(0);
        self.canary(labels) || rollout_hash(self.kind, self.name, node) < below
    }

    /// May the node take this generation now, where it would reset sessions? `Err`: why it
    /// keeps the version it runs.
    pub fn admits(&self, node: &str, labels: &BTreeMap<String, String>) -> Result<(), String> {
        // No controller writes rollouts: every edit applies at once, as before.
        let Some(st) = self.status else {
            return Ok(());
        };
        let generation = self.generation.unwrap_or_default();
        if st.generation != generation {
            return Err(format!(
                "generation {generation} resets sessions here: waiting for its rollout to start (the status controller's rollout is at generation {})",
                st.generation
            ));
        }
        if st.state == rollout_state::COMPLETE || self.in_waves(st, node, labels) {
            return Ok(());
        }
        let stalled = if st.state == rollout_state::STALLED {
            " (the rollout is stalled)"
        } else {
            ""
        };
        Err(format!(
            "generation {generation} resets sessions here: waiting for this node's rollout wave (wave {} of the rollout is admitted{stalled})",
            st.wave
        ))
    }
}

/// Where one selected node is in the current wave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Runs the generation, with its sessions Established again.
    Done,
    /// Not yet, and why.
    Pending(String),
    /// No speaker reports for it (none runs there yet): it takes whatever is admitted when
    /// one starts, and does not hold the rollout.
    Silent,
}

/// The entry of a node's report for the object.
fn entry<'a>(
    report: &'a SpeakerReport,
    kind: ObjectKind,
    name: &str,
) -> Option<&'a ObjectGeneration> {
    let c = report.config.as_ref()?;
    match kind {
        ObjectKind::SpeakerConfig => c.speaker_config.as_ref().filter(|g| g.name == name),
        ObjectKind::Peer => c.peers.iter().find(|g| g.name == name),
        ObjectKind::Advertisement => None,
    }
}

/// The object's sessions on a node: every peer for a config, its own for a peer.
fn sessions<'a>(
    report: &'a SpeakerReport,
    kind: ObjectKind,
    name: &'a str,
) -> impl Iterator<Item = &'a podcidr_api::PeerReport> + 'a {
    report.peers.iter().filter(move |p| match kind {
        ObjectKind::SpeakerConfig => true,
        ObjectKind::Peer => p.bgp_peer.as_deref() == Some(name),
        ObjectKind::Advertisement => false,
    })
}

const ESTABLISHED: &str = "Established";

/// The object's sessions Established on a node: what must be again after its wave (a peer
/// down before the edit, such as a rack whose router rejects, holds no rollout).
pub fn established(report: &SpeakerReport, kind: ObjectKind, name: &str) -> BTreeSet<String> {
    sessions(report, kind, name)
        .filter(|p| p.state == ESTABLISHED)
        .map(|p| p.name.clone())
        .collect()
}

/// Where a node is, from its report: it runs `generation` of the object, and each session
/// in `baseline` (Established when the rollout started) is Established now.
pub fn progress(
    report: Option<&SpeakerReport>,
    kind: ObjectKind,
    name: &str,
    generation: i64,
    baseline: &BTreeSet<String>,
) -> Progress {
    let Some(report) = report else {
        return Progress::Silent;
    };
    let Some(e) = entry(report, kind, name) else {
        let why = report
            .config
            .iter()
            .flat_map(|c| &c.not_applied)
            .find(|n| n.name == name && n.kind == kind.as_str())
            .map_or_else(
                || "does not run it".to_owned(),
                |n| format!("does not run it: {}", n.reason),
            );
        return Progress::Pending(why);
    };
    if e.generation != Some(generation) {
        let g = e
            .generation
            .map_or_else(|| "?".to_owned(), |g| g.to_string());
        return Progress::Pending(format!("runs generation {g}"));
    }
    let down: Vec<String> = sessions(report, kind, name)
        .filter(|p| p.state != ESTABLISHED && baseline.contains(&p.name))
        .map(|p| format!("{} {}", p.name, p.state))
        .collect();
    if down.is_empty() {
        Progress::Done
    } else {
        Progress::Pending(format!("not Established again: {}", down.join(", ")))
    }
}

/// One selected node, as the controller sees it.
#[derive(Debug, Clone)]
pub struct NodeProgress<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub progress: Progress,
}

/// What the controller does next: the status to write, and what to say in an Event.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub status: RolloutStatus,
    pub event: Option<RolloutEvent>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

/// The boundary of wave `w`'s share among the non-canary nodes, and how many are in.
fn boundary(r: &Rollout, plan: &Plan, w: u32, nodes: &[NodeProgress]) -> (u64, u32) {
    let mut hashes: Vec<u64> = nodes
        .iter()
        .filter(|n| !r.canary(n.labels))
        .map(|n| rollout_hash(r.kind, r.name, n.name))
        .collect();
    hashes.sort_unstable();
    let canaries = nodes.len() - hashes.len();
    let share = u64::from(plan.share(w));
    let total = u64::try_from(hashes.len()).unwrap_or(u64::MAX);
    let mut take = (total * share).div_ceil(100);
    if share > 0 && total > 0 {
        take = take.max(1);
    }
    let below = usize::try_from(take)
        .ok()
        .and_then(|t| hashes.get(t).copied())
        .unwrap_or(u64::MAX);
    let admitted = usize::try_from(take)
        .unwrap_or(usize::MAX)
        .min(hashes.len())
        + canaries;
    (below, u32::try_from(admitted).unwrap_or(u32::MAX))
}

fn wave_status(
    r: &Rollout,
    plan: &Plan,
    w: u32,
    nodes: &[NodeProgress],
    now: &Time,
) -> RolloutStatus {
    let (below, admitted) = boundary(r, plan, w, nodes);
    RolloutStatus {
        generation: r.generation.unwrap_or_default(),
        state: rollout_state::PROGRESSING.into(),
        wave: w,
        hash_below: Some(below.to_string()),
        nodes_admitted: admitted,
        nodes_selected: u32::try_from(nodes.len()).unwrap_or(u32::MAX),
        wave_started_at: Some(now.0.to_string()),
        message: None,
    }
}

fn describe_wave(plan: &Plan, w: u32) -> String {
    if plan.canary && w == 0 {
        "the canaries (canarySelector)".to_owned()
    } else {
        format!("{}% of the selected nodes", plan.share(w))
    }
}

/// The controller's next step for an object's rollout, given every node the object's
/// current generation selects (`nodes`) and where each is.
pub fn step(r: &Rollout, nodes: &[NodeProgress], now: &Time) -> Step {
    let plan = Plan::of(r.spec);
    let generation = r.generation.unwrap_or_default();
    let complete = |message: Option<String>| RolloutStatus {
        generation,
        state: rollout_state::COMPLETE.into(),
        wave: plan.wave_count().saturating_sub(1),
        hash_below: None,
        nodes_admitted: u32::try_from(nodes.len()).unwrap_or(u32::MAX),
        nodes_selected: u32::try_from(nodes.len()).unwrap_or(u32::MAX),
        wave_started_at: None,
        message,
    };
    let prev = match r.status {
        // First sight (a new object, or a controller new to it): nothing runs an older
        // version this controller could roll out from.
        None => {
            return Step {
                status: complete(None),
                event: None,
            };
        }
        Some(p) if p.generation != generation => {
            let status = wave_status(r, &plan, 0, nodes, now);
            let note = format!(
                "generation {generation}: nodes where it resets sessions take it in {} waves; wave 0: {} ({} nodes)",
                plan.wave_count(),
                describe_wave(&plan, 0),
                status.nodes_admitted
            );
            return Step {
                status,
                event: Some(RolloutEvent {
                    warning: false,
                    reason: "RolloutStarted",
                    note,
                }),
            };
        }
        Some(p) if p.state == rollout_state::COMPLETE => {
            return Step {
                status: p.clone(),
                event: None,
            };
        }
        Some(p) => p,
    };
    let pending: Vec<(&str, &str)> = nodes
        .iter()
        .filter(|n| r.in_waves(prev, n.name, n.labels))
        .filter_map(|n| match &n.progress {
            Progress::Pending(why) => Some((n.name, why.as_str())),
            Progress::Done | Progress::Silent => None,
        })
        .collect();
    if pending.is_empty() {
        let next = prev.wave + 1;
        if next >= plan.wave_count() {
            return Step {
                status: complete(None),
                event: Some(RolloutEvent {
                    warning: false,
                    reason: "RolloutComplete",
                    note: format!(
                        "generation {generation} runs on every selected node that reports"
                    ),
                }),
            };
        }
        let status = wave_status(r, &plan, next, nodes, now);
        let note = format!(
            "generation {generation}: wave {} came back; wave {next}: {} ({} nodes)",
            prev.wave,
            describe_wave(&plan, next),
            status.nodes_admitted
        );
        return Step {
            status,
            event: Some(RolloutEvent {
                warning: false,
                reason: "RolloutWave",
                note,
            }),
        };
    }
    let started = prev
        .wave_started_at
        .as_deref()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .unwrap_or(now.0);
    let waited = now.0.duration_since(started);
    let overdue = waited.as_secs_f64() >= plan.wave_timeout.as_secs_f64();
    if prev.state == rollout_state::STALLED || !overdue {
        return Step {
            status: prev.clone(),
            event: None,
        };
    }
    let named: Vec<String> = pending
        .iter()
        .take(NAMED_NODES)
        .map(|(n, why)| format!("{n}: {why}"))
        .collect();
    let more = pending.len().saturating_sub(NAMED_NODES);
    let more = if more > 0 {
        format!("; and {more} more")
    } else {
        String::new()
    };
    let message = format!(
        "wave {} ({}): {} of {} admitted nodes did not run generation {generation} with their sessions Established again within {}s; the other nodes stay on the version they run. Fix them, or edit the object again (rollout.waves: [\"100%\"] applies at once): {}{more}",
        prev.wave,
        describe_wave(&plan, prev.wave),
        pending.len(),
        prev.nodes_admitted,
        plan.wave_timeout.as_secs(),
        named.join("; ")
    );
    let status = RolloutStatus {
        state: rollout_state::STALLED.into(),
        message: Some(message.clone()),
        ..prev.clone()
    };
    Step {
        status,
        event: Some(RolloutEvent {
            warning: true,
            reason: "RolloutStalled",
            note: message,
        }),
    }
}

#[cfg(test)]
mod tests;
