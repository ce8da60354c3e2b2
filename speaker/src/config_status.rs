//! The status writer of the configuration objects, run by the allocator Deployment: one writer
//! for the cluster (the allocator's leader), not thousands of speakers. It watches the two
//! kinds cluster-wide, the Nodes' metadata (labels) and each Secret a peer names (by name, as
//! the speakers do), works out every object's verdict ([`crate::objects::status`], the rules
//! the speakers run by) and writes `status` (server-side apply, field manager
//! [`MANAGER`]) only where it changed, with an Event when `Accepted` changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ipam_watch::allocator::{AllocatorMetrics, ConfigObjectLabels, LeaderState, RolloutLabels};
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Event as Publish, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use podcidr_api::{
    BGPAdvertisement, BGPPeer, BGPSpeakerConfig, CONFIG_GROUP, CONFIG_VERSION, ConfigObjectStatus,
    NodeBGPStatus, rollout_state,
};
use serde_json::json;
use tokio::sync::{mpsc, watch};

use crate::objects::key_files::peer_key_refs;
use crate::objects::rollout::Step;
use crate::objects::status::{NodeLabels, Verdict, status, verdicts};
use crate::objects::{ObjectKind, Objects};
use crate::text::cut;
use crate::watches::{SecretWatches, Store, watch_all};

mod rollouts;

use rollouts::Rollouts;

/// Field manager of the status writes and `reportingController` of the Events.
pub const MANAGER: &str = "podcidr-bgp-config-status";
/// Changes are folded for this long before a pass: a rollout of many Nodes, or an edit
/// touching several objects, is one pass and one write per object.
const SETTLE: Duration = Duration::from_secs(2);
/// Bound on one write.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Longest Event note the API accepts (bytes).
const NOTE_LIMIT: usize = 1024;

/// Where the Secrets `passwordSecretRef` names live (the speakers' namespace).
#[derive(Debug, Clone)]
pub struct StatusSettings {
    pub secret_namespace: String,
}

/// Runs until `leadership`'s sender is dropped. Writes only while leading.
pub async fn run(
    client: Client,
    settings: StatusSettings,
    mut leadership: watch::Receiver<LeaderState>,
    metrics: Arc<AllocatorMetrics>,
) {
    let all = watcher::Config::default;
    let mut configs = watch_all(Api::<BGPSpeakerConfig>::all(client.clone()), all());
    let mut peers = watch_all(Api::<BGPPeer>::all(client.clone()), all());
    let mut advertisements = watch_all(Api::<BGPAdvertisement>::all(client.clone()), all());
    // Labels are all a Node is needed for: metadata only.
    let mut nodes = watch_all(Api::<PartialObjectMeta<Node>>::all(client.clone()), all());
    // Where each node is in a rollout: which generation it runs, which sessions are up.
    let mut reports = watch_all(Api::<NodeBGPStatus>::all(client.clone()), all());
    let (secret_tx, mut secret_rx) = mpsc::channel(64);
    let mut secrets = SecretWatches::new(
        Api::<crate::watches::secret::Md5Secret>::namespaced(
            client.clone(),
            &settings.secret_namespace,
        ),
        settings.secret_namespace.clone(),
        secret_tx,
    );
    let mut config_store: Store<BGPSpeakerConfig> = Store::new();
    let mut peer_store: Store<BGPPeer> = Store::new();
    let mut ad_store: Store<BGPAdvertisement> = Store::new();
    let mut node_store: Store<PartialObjectMeta<Node>> = Store::new();
    let mut report_store: Store<NodeBGPStatus> = Store::new();
    let writer = Writer::new(client);
    let mut dirty = false;
    // Some rollout is not complete: every tick is a pass (a wave may have come back, or
    // timed out).
    let mut rolling = false;
    let mut settle = tokio::time::interval(SETTLE);
    settle.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            Some(ev) = configs.next() => dirty |= config_store.apply(ev, "BGPSpeakerConfig"),
            Some(ev) = peers.next() => dirty |= peer_store.apply(ev, "BGPPeer"),
            Some(ev) = advertisements.next() => dirty |= ad_store.apply(ev, "BGPAdvertisement"),
            Some(ev) = nodes.next() => {
                // Nodes change often (status, heartbeats); only their labels and their
                // coming and going matter here.
                let relevant = !same_labels(&node_store, &ev);
                dirty |= node_store.apply(ev, "Node") && relevant;
            }
            Some(ev) = secret_rx.recv() => dirty |= secrets.apply(ev),
            Some(ev) = reports.next() => {
                report_store.apply(ev, "NodeBGPStatus");
            }
            r = leadership.changed() => {
                if r.is_err() {
                    return;
                }
                // A new leader writes what it finds, whatever the last one left.
                dirty = true;
            }
            _ = settle.tick() => {
                dirty |= rolling;
                if !(dirty && config_store.ready && peer_store.ready && node_store.ready) {
                    continue;
                }
                let objects = Objects {
                    configs: config_store.objects.clone(),
                    peers: peer_store.objects.clone(),
                    // Not waited for: a cluster without the kind still gets the others'.
                    advertisements: ad_store.objects.clone(),
                    ..Objects::default()
                };
                secrets.want(referenced(&objects));
                if !secrets.known() || !leadership.borrow().may_write() {
                    continue;
                }
                let nodes: Vec<NodeLabels> = node_store
                    .objects
                    .values()
                    .map(|n| NodeLabels {
                        name: n.name_any(),
                        labels: n.labels().clone(),
                    })
                    .collect();
                let vs = verdicts(&objects, &nodes, &|r, key_use| secrets.key(r, key_use).err());
                count(&metrics, &vs);
                let pass = Pass {
                    objects: &objects,
                    verdicts: &vs,
                    selected: rollouts::selected(&objects, &nodes),
                    reports: &report_store.objects,
                };
                // A failed write leaves the pass dirty: the next tick tries again.
                let (ok, active) = writer.write_changed(&pass, &leadership).await;
                dirty = !ok;
                rolling = active;
                count_rollouts(&metrics, &writer);
            }
        }
    }
}

/// Whether `ev` updates a known Node without changing its labels.
fn same_labels(
    store: &Store<PartialObjectMeta<Node>>,
    ev: &Result<watcher::Event<PartialObjectMeta<Node>>, watcher::Error>,
) -> bool {
    match ev {
        Ok(watcher::Event::Apply(n)) => store
            .objects
            .get(&n.name_any())
            .is_some_and(|old| old.labels() == n.labels()),
        _ => false,
    }
}

/// Every Secret any peer names: the writer reports on every object, not one node's.
fn referenced(objects: &Objects) -> BTreeSet<String> {
    objects
        .peers
        .values()
        .flat_map(|p| peer_key_refs(&p.spec))
        .map(|(_, r)| r.name.clone())
        .collect()
}

fn count(metrics: &AllocatorMetrics, vs: &[Verdict]) {
    let mut counts: BTreeMap<(ObjectKind, &str), i64> = BTreeMap::new();
    for v in vs {
        *counts.entry((v.kind, v.reason)).or_default() += 1;
    }
    metrics.config_objects.clear();
    for ((kind, reason), n) in counts {
        metrics
            .config_objects
            .get_or_create(&ConfigObjectLabels {
                kind: kind.as_str().into(),
                reason: reason.into(),
            })
            .set(n);
    }
}

/// What one pass writes from.
struct Pass<'a> {
    objects: &'a Objects,
    verdicts: &'a [Verdict],
    selected: BTreeMap<(ObjectKind, String), Vec<&'a NodeLabels>>,
    reports: &'a BTreeMap<String, NodeBGPStatus>,
}

/// `podcidr_allocator_config_rollouts`: the rollouts of the statuses last written.
fn count_rollouts(metrics: &AllocatorMetrics, writer: &Writer) {
    let Ok(written) = writer.written.lock() else {
        return;
    };
    for kind in [ObjectKind::SpeakerConfig, ObjectKind::Peer] {
        for state in [rollout_state::PROGRESSING, rollout_state::STALLED] {
            let n = written
                .iter()
                .filter(|((k, _), (_, s))| {
                    *k == kind && s.rollout.as_ref().is_some_and(|r| r.state == state)
                })
                .count();
            metrics
                .config_rollouts
                .get_or_create(&RolloutLabels {
                    kind: kind.as_str().into(),
                    state: state.into(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
}

struct Writer {
    configs: Api<BGPSpeakerConfig>,
    peers: Api<BGPPeer>,
    advertisements: Api<BGPAdvertisement>,
    recorder: Recorder,
    /// What this process last wrote on each object, at which generation: its own watch may
    /// not have delivered the write yet (5,000 speakers' watches are served first), and a
    /// pass in between must not write the same status again, a watch event to every speaker.
    written: std::sync::Mutex<BTreeMap<(ObjectKind, String), Written>>,
    rollouts: std::sync::Mutex<Rollouts>,
}

/// A status this process wrote, and the generation it describes.
type Written = (Option<i64>, ConfigObjectStatus);

impl Writer {
    fn new(client: Client) -> Self {
        let reporter = Reporter {
            controller: MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Writer {
            configs: Api::all(client.clone()),
            peers: Api::all(client.clone()),
            advertisements: Api::all(client.clone()),
            recorder: Recorder::new(client, reporter),
            written: std::sync::Mutex::default(),
            rollouts: std::sync::Mutex::default(),
        }
    }

    /// Writes each status that differs from the object's; whether every write went through,
    /// and whether some rollout is not complete.
    async fn write_changed(
        &self,
        pass: &Pass<'_>,
        leadership: &watch::Receiver<LeaderState>,
    ) -> (bool, bool) {
        let objects = pass.objects;
        let mut ok = true;
        let mut active = false;
        if let Ok(mut r) = self.rollouts.lock() {
            r.retain(objects);
        }
        if let Ok(mut w) = self.written.lock() {
            w.retain(|(kind, name), _| match kind {
                ObjectKind::SpeakerConfig => objects.configs.contains_key(name),
                ObjectKind::Peer => objects.peers.contains_key(name),
                ObjectKind::Advertisement => objects.advertisements.contains_key(name),
            });
        }
        for v in pass.verdicts {
            let (previous, reference) = match v.kind {
                ObjectKind::SpeakerConfig => match objects.configs.get(&v.name) {
                    Some(o) => (o.status.as_ref(), regarding(o)),
                    None => continue,
                },
                ObjectKind::Peer => match objects.peers.get(&v.name) {
                    Some(o) => (o.status.as_ref(), regarding(o)),
                    None => continue,
                },
                ObjectKind::Advertisement => match objects.advertisements.get(&v.name) {
                    Some(o) => (o.status.as_ref(), regarding(o)),
                    None => continue,
                },
            };
            // Our own last write of this generation is newer than what the watch shows, or
            // the same: it is what this status replaces.
            let key = (v.kind, v.name.clone());
            let mine = self.written.lock().ok().and_then(|w| {
                w.get(&key)
                    .filter(|(g, _)| *g == v.generation)
                    .map(|(_, s)| s.clone())
            });
            let previous = mine.as_ref().or(previous);
            let now = Time(k8s_openapi::jiff::Timestamp::now());
            let key_nodes = pass.selected.get(&key).map_or(&[][..], Vec::as_slice);
            let step = match self.rollouts.lock() {
                Ok(mut r) => r.next(objects, v, previous, key_nodes, pass.reports, &now),
                Err(_) => continue,
            };
            active |= step.status.state != rollout_state::COMPLETE;
            let next = status(v, previous, Some(&step.status), now);
            if previous == Some(&next) {
                continue;
            }
            if !leadership.borrow().may_write() {
                return (false, active);
            }
            match self.write(v, &next).await {
                Ok(()) => {
                    if let Ok(mut w) = self.written.lock() {
                        w.insert(key, (v.generation, next.clone()));
                    }
                    tracing::info!(kind = %v.kind, name = %v.name, reason = v.reason, message = %v.message, "configuration object status written");
                    if accepted(previous) != Some(v.accepted()) {
                        self.event(v, reference.clone()).await;
                    }
                    self.rollout_event(v, &step, reference).await;
                }
                Err(e) => {
                    tracing::warn!(kind = %v.kind, name = %v.name, error = %e, "writing a configuration object's status failed; retrying");
                    ok = false;
                }
            }
        }
        (ok, active)
    }

    /// The Event of a rollout's step (started, next wave, complete, stalled).
    async fn rollout_event(&self, v: &Verdict, step: &Step, regarding: ObjectReference) {
        let Some(e) = &step.event else {
            return;
        };
        tracing::info!(kind = %v.kind, name = %v.name, reason = e.reason, note = %e.note, "rollout");
        let publish = Publish {
            type_: if e.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: e.reason.into(),
            note: Some(cut(&e.note, NOTE_LIMIT)),
            action: "Rollout".into(),
            secondary: None,
        };
        self.publish(v, &publish, &regarding).await;
    }

    async fn write(&self, v: &Verdict, next: &ConfigObjectStatus) -> Result<(), String> {
        let body = json!({
            "apiVersion": format!("{CONFIG_GROUP}/{CONFIG_VERSION}"),
            "kind": v.kind.as_str(),
            "status": next,
        });
        let params = PatchParams::apply(MANAGER).force();
        let patch = Patch::Apply(&body);
        let sent = async {
            match v.kind {
                ObjectKind::SpeakerConfig => self
                    .configs
                    .patch_status(&v.name, &params, &patch)
                    .await
                    .map(|_| ()),
                ObjectKind::Peer => self
                    .peers
                    .patch_status(&v.name, &params, &patch)
                    .await
                    .map(|_| ()),
                ObjectKind::Advertisement => self
                    .advertisements
                    .patch_status(&v.name, &params, &patch)
                    .await
                    .map(|_| ()),
            }
        };
        match tokio::time::timeout(TIMEOUT, sent).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err("timed out".into()),
        }
    }

    /// An Event on the object when it becomes (un)accepted: `kubectl describe` shows it.
    async fn event(&self, v: &Verdict, regarding: ObjectReference) {
        let publish = Publish {
            type_: if v.accepted() {
                EventType::Normal
            } else {
                EventType::Warning
            },
            reason: v.reason.into(),
            note: Some(cut(&v.message, NOTE_LIMIT)),
            action: "Validate".into(),
            secondary: None,
        };
        self.publish(v, &publish, &regarding).await;
    }

    async fn publish(&self, v: &Verdict, publish: &Publish, regarding: &ObjectReference) {
        match tokio::time::timeout(TIMEOUT, self.recorder.publish(publish, regarding)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(kind = %v.kind, name = %v.name, error = %e, "Event not published")
            }
            Err(_) => {
                tracing::warn!(kind = %v.kind, name = %v.name, "publishing an Event timed out")
            }
        }
    }
}

/// The object an Event regards: cluster-scoped, so no namespace (the Event itself lives in
/// `default`; the API refuses one whose object names another namespace, even "").
fn regarding<K: Resource<DynamicType = ()>>(o: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: o.meta().name.clone(),
        uid: o.meta().uid.clone(),
        ..ObjectReference::default()
    }
}

fn accepted(s: Option<&ConfigObjectStatus>) -> Option<bool> {
    s?.conditions
        .iter()
        .find(|c| c.type_ == podcidr_api::config_condition::ACCEPTED)
        .map(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use watcher::Event;

    fn node(name: &str, rv: &str, labels: &[(&str, &str)]) -> PartialObjectMeta<Node> {
        let mut n = PartialObjectMeta::<Node>::default();
        n.metadata.name = Some(name.into());
        n.metadata.resource_version = Some(rv.into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        n
    }

    /// A heartbeat-driven Node update is no reason for a pass; a label change, a new Node or
    /// a deleted one is.
    #[test]
    fn only_label_changes_and_node_churn_call_for_a_pass() {
        let mut store = Store::new();
        store.apply(Ok(Event::Init), "Node");
        store.apply(
            Ok(Event::InitApply(node("a", "1", &[("rack", "r1")]))),
            "Node",
        );
        assert!(store.apply(Ok(Event::InitDone), "Node"));
        let same = Ok(Event::Apply(node("a", "2", &[("rack", "r1")])));
        assert!(same_labels(&store, &same));
        let relabelled = Ok(Event::Apply(node("a", "3", &[("rack", "r2")])));
        assert!(!same_labels(&store, &relabelled));
        let new = Ok(Event::Apply(node("b", "4", &[("rack", "r1")])));
        assert!(!same_labels(&store, &new));
        let gone = Ok(Event::Delete(node("a", "5", &[("rack", "r1")])));
        assert!(!same_labels(&store, &gone));
    }
}
