//! The `NodePodCIDR` store over the real API: the async twin of [`NodePodCidrStore`].
//!
//! The pure trait is synchronous and a tokio worker must not block on I/O, so the loop takes
//! [`Action`]s from [`Reconciler::plan`], performs them here and feeds every outcome back with
//! [`Reconciler::record_outcome`] (see [`execute`]). Mapping of API results:
//! 409 → `Conflict`, 404 → `NotFound`, 504 / client timeout / transport error → `Timeout`
//! (unknown outcome), any other error → `ServerError` (treated as possibly applied).
//!
//! Every write first takes its token of the client-side rate limit ([`WritePath::permit`]);
//! only then are the Lease gate checked and the request timeout started (see [`execute`]).
//!
//! [`NodePodCidrStore`]: super::NodePodCidrStore

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube::Resource;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use super::NodeUid;
use super::api_client::{Permit, WritePath};
use super::reconcile::{Action, ExecReport, ObservedRecord, Reconciler, RecordSpec};
use super::status::{Condition, ConditionStatus};
use super::store::WriteOutcome;
use podcidr_api::{NodePodCIDR, NodePodCIDRSpec};

/// Annotation naming the allocator identity (lease holder) that wrote `spec.podCIDRs`.
pub const ALLOCATED_BY: &str = "podcidr.io/allocated-by";
/// Field manager of every allocator write.
pub const FIELD_MANAGER: &str = "podcidr-bgp-allocator";

/// Result of one API call: the outcome plus what the server returned (if it answered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Outcome as the pure reconciler understands it.
    pub outcome: WriteOutcome,
    /// `metadata.resourceVersion` of the written object (numeric servers only).
    pub resource_version: Option<u64>,
    /// `metadata.uid` of the written object.
    pub uid: Option<String>,
}

impl Written {
    fn failed(outcome: WriteOutcome) -> Self {
        Written {
            outcome,
            resource_version: None,
            uid: None,
        }
    }
}

/// Maps a kube error to a write outcome.
pub fn map_error(e: &kube::Error) -> WriteOutcome {
    match e {
        kube::Error::Api(s) => match s.code {
            409 => WriteOutcome::Conflict,
            404 => WriteOutcome::NotFound,
            504 | 408 => WriteOutcome::Timeout,
            code => WriteOutcome::ServerError(format!("{code} {}: {}", s.reason, s.message)),
        },
        // No answer (connection reset, timeout, TLS): the request may have been applied.
        _ => WriteOutcome::Timeout,
    }
}

/// `NodePodCIDR` writes over the allocator's write path, each bounded by `timeout` (which
/// starts once the write has its token).
#[derive(Clone)]
pub struct KubeStore {
    api: Api<NodePodCIDR>,
    writes: WritePath,
    identity: String,
    timeout: Duration,
}

impl std::fmt::Debug for KubeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeStore")
            .field("identity", &self.identity)
            .field("timeout", &self.timeout)
            .finish()
    }
}

fn object_written(obj: &NodePodCIDR) -> Written {
    Written {
        outcome: WriteOutcome::Ok,
        resource_version: obj
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok()),
        uid: obj.metadata.uid.clone(),
    }
}

/// The owning Node as far as an owner reference needs it.
fn owner_node(name: &str, uid: &NodeUid) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            uid: Some(uid.0.clone()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

impl KubeStore {
    /// A store writing as `identity` (recorded in [`ALLOCATED_BY`]).
    pub fn new(writes: &WritePath, identity: impl Into<String>, timeout: Duration) -> Self {
        KubeStore {
            api: Api::all(writes.client().clone()),
            writes: writes.clone(),
            identity: identity.into(),
            timeout,
        }
    }

    /// Waits for the token of one write (the client-side rate limit).
    pub async fn permit(&self) -> Permit {
        self.writes.permit().await
    }

    async fn call(
        &self,
        _paid: Permit,
        fut: impl Future<Output = kube::Result<NodePodCIDR>>,
    ) -> Written {
        match tokio::time::timeout(self.timeout, fut).await {
            Err(_) => Written::failed(WriteOutcome::Timeout),
            Ok(Err(e)) => Written::failed(map_error(&e)),
            Ok(Ok(obj)) => object_written(&obj),
        }
    }

    /// Creates the record, owned by its Node; `Conflict` if it exists.
    pub async fn create(
        &self,
        paid: Permit,
        name: &str,
        spec: &RecordSpec,
        pool: Option<&str>,
    ) -> Written {
        let node = owner_node(name, &spec.owner_uid);
        let mut obj = NodePodCIDR::for_node(
            &node,
            NodePodCIDRSpec {
                pod_cidrs: spec.pod_cidrs.clone(),
                pool: pool.map(str::to_string),
            },
        );
        obj.metadata.annotations = Some(BTreeMap::from([(
            ALLOCATED_BY.to_string(),
            self.identity.clone(),
        )]));
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        self.call(paid, self.api.create(&pp, &obj)).await
    }

    /// Writes the spec only if the record is still at `resource_version` (merge patch with
    /// `metadata.resourceVersion`: the server answers 409 on mismatch).
    pub async fn patch_spec_if_version(
        &self,
        paid: Permit,
        name: &str,
        resource_version: &str,
        spec: &RecordSpec,
        pool: Option<&str>,
    ) -> Written {
        let owner = owner_node(name, &spec.owner_uid).owner_ref(&());
        let patch = json!({
            "metadata": {
                "resourceVersion": resource_version,
                "ownerReferences": owner.map(|o| vec![o]),
                "annotations": { ALLOCATED_BY: self.identity },
            },
            "spec": { "podCIDRs": spec.pod_cidrs, "pool": pool },
        });
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        self.call(paid, self.api.patch(name, &pp, &Patch::Merge(&patch)))
            .await
    }

    /// Writes the `Allocated` condition through the status subresource, keeping the other
    /// condition types as last observed (a merge patch replaces the whole list).
    pub async fn update_status(
        &self,
        paid: Permit,
        name: &str,
        condition: &Condition,
        observed: &[meta::Condition],
        now: SystemTime,
    ) -> Written {
        let conditions = merge_condition(observed, condition, now);
        let patch = json!({ "status": { "conditions": conditions } });
        let pp = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        self.call(
            paid,
            self.api.patch_status(name, &pp, &Patch::Merge(&patch)),
        )
        .await
    }
}

/// Converts a pure condition, keeping `lastTransitionTime` if the status did not change.
pub fn to_k8s_condition(
    c: &Condition,
    previous: Option<&meta::Condition>,
    now: SystemTime,
) -> meta::Condition {
    let status = c.status.as_str().to_string();
    let last = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => meta::Time(timestamp(now)),
    };
    meta::Condition {
        type_: c.type_.clone(),
        status,
        reason: c.reason.clone(),
        message: c.message.clone(),
        last_transition_time: last,
        observed_generation: None,
    }
}

/// `previous` with the condition of `c`'s type replaced (or appended).
pub fn merge_condition(
    previous: &[meta::Condition],
    c: &Condition,
    now: SystemTime,
) -> Vec<meta::Condition> {
    let old = previous.iter().find(|p| p.type_ == c.type_);
    let new = to_k8s_condition(c, old, now);
    let mut out: Vec<meta::Condition> = previous
        .iter()
        .filter(|p| p.type_ != c.type_)
        .cloned()
        .collect();
    out.push(new);
    out
}

/// A `metav1.Condition` as the pure side sees it (`lastTransitionTime` dropped).
pub fn from_k8s_condition(c: &meta::Condition) -> Condition {
    let status = match c.status.as_str() {
        "True" => ConditionStatus::True,
        "False" => ConditionStatus::False,
        _ => ConditionStatus::Unknown,
    };
    Condition::new(&c.type_, status, &c.reason, c.message.clone())
}

/// Converts a wall-clock time to the API timestamp type.
pub fn timestamp(t: SystemTime) -> k8s_openapi::jiff::Timestamp {
    let micros = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    k8s_openapi::jiff::Timestamp::from_microsecond(micros).unwrap_or_default()
}

/// The record as the reconciler sees it. The owner is the first Node owner reference.
pub fn observed_record(obj: &NodePodCIDR) -> ObservedRecord {
    let owner = obj
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "Node")
        .map(|o| o.uid.clone())
        .unwrap_or_default();
    let allocated = obj
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == podcidr_api::condition::ALLOCATED)
        .map(from_k8s_condition);
    ObservedRecord {
        name: obj.metadata.name.clone().unwrap_or_default(),
        owner_uid: NodeUid(owner),
        pod_cidrs: obj.spec.pod_cidrs.clone(),
        resource_version: obj.metadata.resource_version.clone().unwrap_or_default(),
        allocated,
    }
}

/// What [`execute`] needs besides the reconciler.
#[derive(Debug)]
pub struct ExecContext<'a> {
    /// Conditions of each record as last observed (kept on status writes).
    pub conditions: &'a HashMap<String, Vec<meta::Condition>>,
    /// Wall-clock time for `lastTransitionTime`.
    pub now: SystemTime,
    /// Requests in flight at most.
    pub concurrency: usize,
}

/// One executed call.
#[derive(Debug, Clone)]
pub struct Executed {
    /// The action.
    pub action: Action,
    /// What the server said.
    pub written: Written,
}

/// Performs `actions` (one node's actions in order, nodes concurrently) and feeds every
/// outcome back into `reconciler`. Each call waits for its token first; `may_write` (the
/// lease gate) is checked after that, right before the call: once it says no, the remaining
/// calls are skipped.
pub async fn execute(
    store: &KubeStore,
    reconciler: &mut Reconciler,
    actions: Vec<Action>,
    ctx: &ExecContext<'_>,
    may_write: &(dyn Fn() -> bool + Sync),
) -> (ExecReport, Vec<Executed>) {
    // Per record: its actions in order, each with the pool its CIDRs come from.
    type Group = (String, Vec<(Action, Option<String>)>);
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for a in actions {
        let pool = a.spec().and_then(|s| {
            s.pod_cidrs
                .iter()
                .filter_map(|c| super::PodCidr::parse(c).ok())
                .find_map(|c| reconciler.allocator().pool_of(&c).map(str::to_string))
        });
        let i = *index.entry(a.name().to_string()).or_insert_with(|| {
            groups.push((a.name().to_string(), Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push((a, pool));
    }
    let results: Vec<(Vec<Executed>, Vec<Action>)> = futures::stream::iter(groups)
        .map(|(name, group)| async move {
            let mut done = Vec::new();
            let mut skipped = Vec::new();
            let mut failed = false;
            for (a, pool) in group {
                if (failed && matches!(a, Action::UpdateStatus { .. })) || !may_write() {
                    skipped.push(a);
                    continue;
                }
                let paid = store.permit().await;
                if !may_write() {
                    skipped.push(a);
                    continue;
                }
                let written = match &a {
                    Action::CreateRecord { spec, .. } => {
                        store.create(paid, &name, spec, pool.as_deref()).await
                    }
                    Action::PatchSpec {
                        resource_version,
                        spec,
                        ..
                    } => {
                        store
                            .patch_spec_if_version(
                                paid,
                                &name,
                                resource_version,
                                spec,
                                pool.as_deref(),
                            )
                            .await
                    }
                    Action::UpdateStatus { condition, .. } => {
                        let observed = ctx.conditions.get(&name).map_or(&[][..], Vec::as_slice);
                        store
                            .update_status(paid, &name, condition, observed, ctx.now)
                            .await
                    }
                };
                if a.spec().is_some() && written.outcome != WriteOutcome::Ok {
                    failed = true;
                }
                done.push(Executed { action: a, written });
            }
            (done, skipped)
        })
        .buffered(ctx.concurrency.max(1))
        .collect()
        .await;
    let mut report = ExecReport::default();
    let mut executed = Vec::new();
    for (done, skipped) in results {
        for e in done {
            reconciler.record_outcome(&e.action, &e.written.outcome);
            report
                .outcomes
                .push((e.action.clone(), e.written.outcome.clone()));
            executed.push(e);
        }
        report.skipped.extend(skipped);
    }
    (report, executed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_map_to_outcomes() {
        let api = |code: u16| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..kube::core::Status::default()
            }))
        };
        assert_eq!(map_error(&api(409)), WriteOutcome::Conflict);
        assert_eq!(map_error(&api(404)), WriteOutcome::NotFound);
        assert_eq!(map_error(&api(504)), WriteOutcome::Timeout);
        assert!(matches!(map_error(&api(500)), WriteOutcome::ServerError(_)));
        assert!(matches!(map_error(&api(503)), WriteOutcome::ServerError(_)));
    }

    #[test]
    fn condition_keeps_transition_time_when_status_is_unchanged() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let t1 = t0 + Duration::from_secs(60);
        let c = Condition::new("Allocated", ConditionStatus::True, "Allocated", "x");
        let first = merge_condition(&[], &c, t0);
        let other = meta::Condition {
            type_: "SourceMismatch".into(),
            ..first[0].clone()
        };
        let prev = vec![other, first[0].clone()];
        let c2 = Condition::new("Allocated", ConditionStatus::True, "Allocated", "y");
        let second = merge_condition(&prev, &c2, t1);
        assert_eq!(second.len(), 2, "other condition types are kept");
        assert_eq!(
            second[1].last_transition_time,
            first[0].last_transition_time
        );
        let c3 = Condition::new("Allocated", ConditionStatus::False, "PoolExhausted", "z");
        let third = merge_condition(&second, &c3, t1);
        assert_eq!(third[1].last_transition_time, meta::Time(timestamp(t1)));
        assert_eq!(from_k8s_condition(&third[1]), c3);
    }
}
