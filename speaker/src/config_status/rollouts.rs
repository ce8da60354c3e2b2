//! The status writer's part of progressive rollouts: which nodes each object selects, where
//! each is (from its NodeBGPStatus), and the sessions each had Established when a rollout
//! started, so that a session that was already down (a rack whose router rejects) holds no
//! wave. The decisions are [`crate::objects::rollout::step`]'s.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podcidr_api::{
    ConfigObjectStatus, NodeBGPStatus, RolloutStatus, config_condition, rollout_state,
};

use crate::objects::rollout::{self, NodeProgress, Rollout, Step};
use crate::objects::status::{NodeLabels, Verdict};
use crate::objects::{ObjectKind, Objects, select};

type Key = (ObjectKind, String);

/// The nodes each object runs on (its selection, conflicts settled), by object.
pub(super) fn selected<'a>(
    objects: &Objects,
    nodes: &'a [NodeLabels],
) -> BTreeMap<Key, Vec<&'a NodeLabels>> {
    let mut out: BTreeMap<Key, Vec<&NodeLabels>> = BTreeMap::new();
    for n in nodes {
        let s = select(objects, &n.labels);
        if let Some(c) = s.config {
            let key = (ObjectKind::SpeakerConfig, kube::ResourceExt::name_any(c));
            out.entry(key).or_default().push(n);
            for p in s.peers {
                let key = (ObjectKind::Peer, kube::ResourceExt::name_any(p));
                out.entry(key).or_default().push(n);
            }
        }
    }
    out
}

/// Sessions Established per node when each rollout started (in memory: a new leader takes
/// them from what is Established when it first sees the rollout).
#[derive(Default)]
pub(super) struct Rollouts {
    baselines: BTreeMap<(ObjectKind, String, i64), BTreeMap<String, BTreeSet<String>>>,
}

impl Rollouts {
    /// The rollout status to write on `v`'s object and the Event to publish with it, given
    /// the status it has (`previous`).
    pub(super) fn next(
        &mut self,
        objects: &Objects,
        v: &Verdict,
        previous: Option<&ConfigObjectStatus>,
        nodes: &[&NodeLabels],
        reports: &BTreeMap<String, NodeBGPStatus>,
        now: &Time,
    ) -> Step {
        let prev = previous.and_then(|p| p.rollout.as_ref());
        let spec = match v.kind {
            ObjectKind::SpeakerConfig => objects.configs.get(&v.name).map(Rollout::of_config),
            ObjectKind::Peer => objects.peers.get(&v.name).map(Rollout::of_peer),
            // Service routes change by UPDATE, never by a session reset: nothing to roll out.
            ObjectKind::Advertisement => None,
        }
        .and_then(|r| r.spec);
        let generation = v.generation.unwrap_or_default();
        // An invalid generation runs nowhere (speakers keep their last good version): its
        // rollout waits for a valid one.
        if v.reason == config_condition::INVALID {
            return Step {
                status: prev.cloned().unwrap_or_else(|| RolloutStatus {
                    generation,
                    state: rollout_state::COMPLETE.into(),
                    ..RolloutStatus::default()
                }),
                event: None,
            };
        }
        let report = |node: &str| reports.get(node).and_then(|r| r.status.as_ref());
        let key = (v.kind, v.name.clone(), generation);
        // Before the rollout starts (or when a new leader first sees it): what is up now.
        if prev.is_none_or(|p| p.generation != generation) || !self.baselines.contains_key(&key) {
            let baseline = nodes
                .iter()
                .map(|n| {
                    let up = report(&n.name)
                        .map(|r| rollout::established(r, v.kind, &v.name))
                        .unwrap_or_default();
                    (n.name.clone(), up)
                })
                .collect();
            self.baselines
                .retain(|(k, n, _), _| !(*k == v.kind && *n == v.name));
            self.baselines.insert(key.clone(), baseline);
        }
        let empty = BTreeSet::new();
        let baseline = self.baselines.get(&key);
        let progress: Vec<NodeProgress> = nodes
            .iter()
            .map(|n| NodeProgress {
                name: &n.name,
                labels: &n.labels,
                progress: rollout::progress(
                    report(&n.name),
                    v.kind,
                    &v.name,
                    generation,
                    baseline.and_then(|b| b.get(&n.name)).unwrap_or(&empty),
                ),
            })
            .collect();
        let r = Rollout {
            kind: v.kind,
            name: &v.name,
            generation: v.generation,
            spec,
            status: prev,
        };
        let step = rollout::step(&r, &progress, now);
        if step.status.state == rollout_state::COMPLETE {
            self.baselines.remove(&key);
        }
        step
    }

    /// Forgets the baselines of objects that no longer exist.
    pub(super) fn retain(&mut self, objects: &Objects) {
        self.baselines.retain(|(kind, name, _), _| match kind {
            ObjectKind::SpeakerConfig => objects.configs.contains_key(name),
            ObjectKind::Peer => objects.peers.contains_key(name),
            ObjectKind::Advertisement => objects.advertisements.contains_key(name),
        });
    }
}
