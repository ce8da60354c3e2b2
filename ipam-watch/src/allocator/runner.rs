//! The allocator process: Lease, watches, reconcile passes, statuses, Events, metrics.
//!
//! A process leads at most one term: it waits for the Lease, then LISTs (quorum read) and
//! watches Nodes, `NodePodCIDR`s and `PodCIDRPool`s, and reconciles only once every initial
//! LIST finished (restore before allocate), and again after a 410 Gone only once that
//! relist finished. Passes run on changes (debounced), on retry
//! after failed writes, when a quarantine ends, and every `resync`. Before a pass it waits
//! (bounded) until the watch has shown its own last writes, so it never plans from a cache
//! older than what it wrote. Losing the Lease ends the term with [`RunError::LeaseLost`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event as Publish, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use serde_json::json;
use tokio::sync::watch;

use super::api_client::ApiClients;
use super::kube_store::{self, ExecContext, FIELD_MANAGER, KubeStore};
use super::lease::{Clock, LeaderState, LeaseConfig, LeaseElector, SystemClock};
use super::metrics::{AllocatorMetrics, result_label};
use super::observe::{
    Cache, Ev, PoolEntry, RecordEntry, observed_node, pool_entry, record_entry, rv_of, vacant_node,
    vacant_record, watch_all,
};
use super::pool_sync::{condition_true, render_status, same_status};
use super::throttle::ApiLimits;
use super::{
    Action, Allocator, AllocatorConfig, DEFAULT_POOL, DEFAULT_QUARANTINE_SECS, EXHAUSTED, Family,
    OVERLAPPING, Observed, ObservedNode, PodCidrPool, Reconciler, Timestamp, WriteOutcome,
};
use podcidr_api::{GROUP, NodePodCIDR, PodCIDRPool, PodCIDRPoolStatus, VERSION};

/// How the allocator runs (the binary maps flags onto this).
#[derive(Debug, Clone)]
pub struct AllocatorOptions {
    /// The `default` pool from `--cluster-pool-*` flags (in memory only; no object).
    pub flag_pool: Option<PodCidrPool>,
    /// Families every node needs, primary first.
    pub families: Vec<Family>,
    /// Seconds a released CIDR stays unusable.
    pub quarantine_secs: u64,
    /// Leader election.
    pub lease: LeaseConfig,
    /// Full pass at least this often (quarantine expiry has its own timer).
    pub resync: Duration,
    /// Coalescing delay after a change.
    pub debounce: Duration,
    /// API writes in flight at most.
    pub concurrency: usize,
    /// Client-side rate limit of every API request (`--api-qps`, `--api-burst`).
    pub api: ApiLimits,
    /// Wall clock (Lease timestamps, quarantine).
    pub clock: Arc<dyn Clock>,
    /// Told the leadership as it changes, for work that must have one writer in the cluster
    /// (the configuration objects' status); `Follower` again when [`run`] ends.
    pub leadership: Option<watch::Sender<LeaderState>>,
}

impl AllocatorOptions {
    /// Defaults around a Lease configuration.
    pub fn new(lease: LeaseConfig) -> Self {
        AllocatorOptions {
            flag_pool: None,
            families: vec![Family::V4],
            quarantine_secs: DEFAULT_QUARANTINE_SECS,
            lease,
            resync: Duration::from_secs(60),
            debounce: Duration::from_millis(100),
            concurrency: 16,
            api: ApiLimits::default(),
            clock: Arc::new(SystemClock),
            leadership: None,
        }
    }
}

/// Why [`run`] ended with an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// Leadership ended; restart clean (never reuse state of an earlier term).
    #[error("lost the allocator lease: {0}")]
    LeaseLost(String),
    /// The watch streams ended (they retry with backoff, so this is a bug or a shutdown).
    #[error("the watches ended")]
    WatchEnded,
}

/// Runs until `shutdown` resolves (then `Ok`, the Lease released) or the Lease is lost.
///
/// Every request goes through `opts.api`'s rate limit and honours server pushback
/// ([`ApiClients`]); build `client` without kube's retry layer
/// (`kube::Config::default_retry = false`) so that a 429 reaches that layer.
pub async fn run(
    client: Client,
    opts: AllocatorOptions,
    metrics: Arc<AllocatorMetrics>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let api = ApiClients::new(&client, opts.api, &metrics);
    let (tx, mut leader) = watch::channel(LeaderState::Follower);
    let (stop_tx, stop_rx) = watch::channel(false);
    let elector = LeaseElector::new(api.lease.clone(), opts.lease.clone(), opts.clock.clone());
    let lease_task = tokio::spawn(elector.run(tx, stop_rx));
    let forward = opts.leadership.clone().map(|out| {
        let mut rx = leader.clone();
        tokio::spawn(async move {
            loop {
                out.send_replace(rx.borrow_and_update().clone());
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
    });
    metrics.set_ready(true);
    tokio::pin!(shutdown);
    let mut beat = tokio::time::interval(Duration::from_secs(1));
    let became_leader = loop {
        tokio::select! {
            _ = &mut shutdown => break Ok(false),
            changed = leader.changed() => {
                let state = leader.borrow_and_update().clone();
                match (changed, state) {
                    (Err(_), _) => break Err(RunError::LeaseLost("lease loop ended".into())),
                    (_, LeaderState::Leader { .. }) => break Ok(true),
                    (_, LeaderState::Lost(why)) => break Err(RunError::LeaseLost(why)),
                    (_, LeaderState::Follower) => {}
                }
            }
            _ = beat.tick() => metrics.beat(),
        }
    };
    let result = match became_leader {
        Ok(true) => {
            metrics.leader.set(1);
            let mut term = Term::new(&api, &opts, &metrics, leader.clone());
            term.run(&mut leader, &mut shutdown).await
        }
        Ok(false) => Ok(()),
        Err(e) => Err(e),
    };
    metrics.leader.set(0);
    if let (Some(task), Some(out)) = (forward, &opts.leadership) {
        task.abort();
        out.send_replace(LeaderState::Follower);
    }
    stop_tx.send_replace(true);
    let _ = lease_task.await;
    if result.is_ok() {
        LeaseElector::new(api.lease, opts.lease.clone(), opts.clock.clone())
            .release()
            .await;
    }
    if let Err(e) = &result {
        tracing::error!("allocator stopping: {e}");
    }
    result
}

/// Where Events about our cluster-scoped objects live: `kube::runtime::events::Recorder`
/// writes them to `default` (the API accepts Events about a cluster-scoped object only in
/// `default` or `kube-system`).
pub const EVENT_NAMESPACE: &str = "default";

/// Logged while no pool exists and nothing was ever allocated (the shipped Deployment names
/// no pool: the operator writes one).
pub const NO_POOL: &str = "no pod CIDR pool: nothing is allocated until one exists; create a \
    PodCIDRPool (docs/operator-guide.md, Install) or set \
    --cluster-pool-ipv4-cidr / --cluster-pool-ipv6-cidr";

/// Longest Event note the API accepts (bytes).
const NOTE_LIMIT: usize = 1024;
/// Longest `reportingInstance` the API accepts (bytes).
const INSTANCE_LIMIT: usize = 128;

/// Longest wait for the watch to show our own writes before planning anyway.
const CATCH_UP: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// Runs `work`, beating the liveness heartbeat every second until it is done.
async fn beating<T>(metrics: &AllocatorMetrics, work: impl Future<Output = T>) -> T {
    tokio::pin!(work);
    let mut beat = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = beat.tick() => metrics.beat(),
        }
    }
}

/// One leadership term.
struct Term<'a> {
    opts: &'a AllocatorOptions,
    metrics: &'a AllocatorMetrics,
    client: Client,
    store: KubeStore,
    /// events.k8s.io/v1 Events, de-duplicated: a repeat patches the first Event's series.
    recorder: Recorder,
    gate: watch::Receiver<LeaderState>,
    nodes: Cache<ObservedNode>,
    records: Cache<RecordEntry>,
    pools: Cache<PoolEntry>,
    reconciler: Option<Reconciler>,
    applied_pools: Vec<PodCidrPool>,
    written_pool_status: HashMap<String, (PodCIDRPoolStatus, Instant)>,
    /// In-memory pool flags (Exhausted, Overlapping) for pools without an object.
    flag_pool_flags: Option<(bool, bool)>,
    /// "No pool yet" was logged (once per term).
    said_no_pool: bool,
    awaited_rv: u64,
    awaited_since: Instant,
    due: Option<Instant>,
    retry: Option<Instant>,
    backoff: Duration,
    quarantine_wake: Option<Instant>,
    resync_at: Instant,
}

impl<'a> Term<'a> {
    fn new(
        api: &ApiClients,
        opts: &'a AllocatorOptions,
        metrics: &'a AllocatorMetrics,
        gate: watch::Receiver<LeaderState>,
    ) -> Self {
        Term {
            opts,
            metrics,
            store: KubeStore::new(
                &api.writes,
                opts.lease.identity.clone(),
                opts.lease.request_timeout(),
            ),
            recorder: Recorder::new(
                api.main.clone(),
                Reporter {
                    controller: FIELD_MANAGER.into(),
                    instance: Some(truncate(&opts.lease.identity, INSTANCE_LIMIT)),
                },
            ),
            client: api.main.clone(),
            gate,
            nodes: Cache::default(),
            records: Cache::default(),
            pools: Cache::default(),
            reconciler: None,
            applied_pools: Vec::new(),
            written_pool_status: HashMap::new(),
            flag_pool_flags: None,
            said_no_pool: false,
            awaited_rv: 0,
            awaited_since: Instant::now(),
            due: None,
            retry: None,
            backoff: FIRST_BACKOFF,
            quarantine_wake: None,
            resync_at: Instant::now() + opts.resync,
        }
    }

    fn synced(&self) -> bool {
        self.nodes.synced && self.records.synced && self.pools.synced
    }

    /// When the next pass may run (`None`: wait for events).
    fn next_pass(&self) -> Option<Instant> {
        if !self.synced() {
            return None;
        }
        let first = (self.reconciler.is_none() && self.retry.is_none()).then(Instant::now);
        let at = [
            first,
            self.due,
            self.retry,
            self.quarantine_wake,
            Some(self.resync_at),
        ]
        .into_iter()
        .flatten()
        .min()?;
        if self.records.high_water < self.awaited_rv {
            return Some(at.max(self.awaited_since + CATCH_UP));
        }
        Some(at)
    }

    fn on_event(&mut self, ev: Ev) {
        let changed = match ev {
            Ev::Node(e) => match *e {
                Ok(e) => self.nodes.apply(e, observed_node),
                Err(e) => {
                    watch_failed(&mut self.nodes, "Node", &e);
                    false
                }
            },
            Ev::Record(Ok(e)) => self.records.apply(e, record_entry),
            Ev::Pool(Ok(e)) => self.pools.apply(e, pool_entry),
            Ev::Record(Err(e)) => {
                watch_failed(&mut self.records, "NodePodCIDR", &e);
                false
            }
            Ev::Pool(Err(e)) => {
                watch_failed(&mut self.pools, "PodCIDRPool", &e);
                false
            }
        };
        if changed && self.due.is_none() {
            self.due = Some(Instant::now() + self.opts.debounce);
        }
    }

    async fn run(
        &mut self,
        leader: &mut watch::Receiver<LeaderState>,
        shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Result<(), RunError> {
        let mut events = watch_all(&self.client);
        let mut beat = tokio::time::interval(Duration::from_secs(1));
        loop {
            let wake = self
                .next_pass()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = shutdown.as_mut() => return Ok(()),
                changed = leader.changed() => {
                    if changed.is_err() {
                        return Err(RunError::LeaseLost("lease loop ended".into()));
                    }
                    if let LeaderState::Lost(why) = &*leader.borrow_and_update() {
                        return Err(RunError::LeaseLost(why.clone()));
                    }
                }
                ev = events.next() => match ev {
                    Some(ev) => self.on_event(ev),
                    None => return Err(RunError::WatchEnded),
                },
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = beat.tick() => self.metrics.beat(),
            }
            if self.next_pass().is_some_and(|t| t <= Instant::now()) {
                self.pass().await;
            }
        }
    }

    fn pools_now(&self) -> Vec<PodCidrPool> {
        let mut pools: Vec<PodCidrPool> = self.opts.flag_pool.iter().cloned().collect();
        for e in self.pools.items.values() {
            if self.opts.flag_pool.is_some() && e.spec.name == DEFAULT_POOL {
                continue;
            }
            pools.push(e.spec.clone());
        }
        pools
    }

    async fn pass(&mut self) {
        if !self.gate.borrow().may_write() {
            // Renewal is late: plan nothing, look again shortly (or stop when lost).
            self.due = None;
            self.retry = Some(Instant::now() + Duration::from_millis(500));
            return;
        }
        self.due = None;
        self.retry = None;
        self.resync_at = Instant::now() + self.opts.resync;
        let now_sys = self.opts.clock.now();
        let now = Timestamp(
            now_sys
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        );
        let pools = self.pools_now();
        // A fresh install whose operator has not named a pool yet writes nothing: no record,
        // no Event, until the flags or a PodCIDRPool say where CIDRs come from. (Once records
        // exist, removing every pool is a drain and the records' conditions say so.)
        if pools.is_empty() && self.records.items.is_empty() {
            if !self.said_no_pool {
                tracing::warn!("{NO_POOL}");
                self.said_no_pool = true;
            }
            return;
        }
        if self.reconciler.is_none()
            && self.opts.flag_pool.is_some()
            && self.pools.items.contains_key(DEFAULT_POOL)
        {
            tracing::warn!(
                "PodCIDRPool \"default\" is ignored: the --cluster-pool-* flags define it"
            );
        }
        let cfg = AllocatorConfig {
            families: self.opts.families.clone(),
            quarantine_secs: self.opts.quarantine_secs,
        };
        let rec = self
            .reconciler
            .get_or_insert_with(|| Reconciler::new(Allocator::new(cfg, pools.clone())));
        if pools != self.applied_pools {
            rec.allocator_mut().set_pools(pools.clone());
            self.applied_pools = pools;
        }
        // The caches lend their contents to the pass instead of copying them: at 50,000
        // nodes a copy is tens of MB (labels) on every pass.
        let obs = Observed {
            nodes: self.nodes.lend(|n| std::mem::replace(n, vacant_node())),
            records: self
                .records
                .lend(|r| std::mem::replace(&mut r.observed, vacant_record())),
            complete: true,
            leader: self.gate.borrow().may_write(),
        };
        let actions = rec.plan(&obs, now);
        self.nodes.give_back(obs.nodes, |n, v| *n = v);
        self.records.give_back(obs.records, |r, v| r.observed = v);
        // Reservations count as allocated: publish before the writes land.
        self.metrics.set_pools(&rec.allocator().pool_statuses());
        let planned = actions.len();
        // Conditions of the records whose status is written (kept on the merge patch).
        let conditions: HashMap<String, Vec<meta::Condition>> = actions
            .iter()
            .filter(|a| matches!(a, Action::UpdateStatus { .. }))
            .filter_map(|a| {
                let r = self.records.items.get(a.name())?;
                (!r.conditions.is_empty()).then(|| (a.name().to_owned(), r.conditions.clone()))
            })
            .collect();
        let ctx = ExecContext {
            conditions: &conditions,
            now: now_sys,
            concurrency: self.opts.concurrency,
        };
        let gate = &self.gate;
        let may_write = || gate.borrow().may_write();
        // At --api-qps a pass with many writes runs for minutes: the loop is alive meanwhile
        // (every write is bounded by its token wait plus the request timeout).
        let (report, executed) = beating(
            self.metrics,
            kube_store::execute(&self.store, rec, actions, &ctx, &may_write),
        )
        .await;
        let mut failed = !report.skipped.is_empty();
        for e in &executed {
            let kind = match e.action {
                Action::CreateRecord { .. } => "create",
                Action::PatchSpec { .. } => "patch_spec",
                Action::UpdateStatus { .. } => "status",
            };
            self.metrics
                .count_write(kind, result_label(&e.written.outcome));
            match &e.written.outcome {
                WriteOutcome::Ok => {
                    if let Some(rv) = e.written.resource_version
                        && rv > self.awaited_rv
                    {
                        self.awaited_rv = rv;
                        self.awaited_since = Instant::now();
                    }
                }
                other => {
                    failed = true;
                    tracing::warn!(record = e.action.name(), "write failed: {other:?}");
                }
            }
        }
        if planned > 0 {
            tracing::info!(
                planned,
                written = report.writes(),
                skipped = report.skipped.len(),
                "reconcile pass"
            );
        }
        self.refetch_unknown(&executed).await;
        self.node_events(&executed).await;
        self.sync_pools(now_sys).await;
        self.update_gauges();
        if failed {
            self.retry = Some(Instant::now() + self.backoff);
            self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        } else {
            self.backoff = FIRST_BACKOFF;
        }
        self.metrics.pass_done();
    }

    /// After a spec write with an unknown or conflicting outcome, reads the record (quorum
    /// GET) so the next pass waits until the watch shows at least that version.
    async fn refetch_unknown(&mut self, executed: &[kube_store::Executed]) {
        let api: Api<NodePodCIDR> = Api::all(self.client.clone());
        let names: Vec<&str> = executed
            .iter()
            .filter(|e| e.action.spec().is_some())
            .filter(|e| !matches!(e.written.outcome, WriteOutcome::Ok | WriteOutcome::NotFound))
            .map(|e| e.action.name())
            .take(64)
            .collect();
        for name in names {
            let got =
                tokio::time::timeout(self.opts.lease.request_timeout(), api.get_opt(name)).await;
            if let Ok(Ok(Some(obj))) = got {
                let rv = rv_of(&obj);
                if rv > self.awaited_rv {
                    self.awaited_rv = rv;
                    self.awaited_since = Instant::now();
                }
            }
        }
    }

    /// One Warning Event per node condition that turned into a failure (transitions only:
    /// the status write itself happens only on change).
    async fn node_events(&self, executed: &[kube_store::Executed]) {
        for e in executed {
            let Action::UpdateStatus { name, condition } = &e.action else {
                continue;
            };
            let reason = match condition.reason.as_str() {
                "PoolExhausted" | "NoMatchingPool" => "PodCIDRAllocationFailed",
                "Conflict" => "PodCIDRConflict",
                "InvalidSpec" => "PodCIDRInvalidSpec",
                _ => continue,
            };
            if e.written.outcome != WriteOutcome::Ok {
                continue;
            }
            let uid = e
                .written
                .uid
                .clone()
                .or_else(|| self.records.items.get(name).and_then(|r| r.uid.clone()));
            self.event("NodePodCIDR", name, uid, reason, &condition.message)
                .await;
        }
    }

    /// Writes changed pool statuses and raises Events on Exhausted/Overlapping transitions.
    async fn sync_pools(&mut self, now: SystemTime) {
        let Some(rec) = &self.reconciler else { return };
        let statuses = rec.allocator().pool_statuses();
        self.metrics.set_pools(&statuses);
        let api: Api<PodCIDRPool> = Api::all(self.client.clone());
        for ps in statuses {
            let flagged = |t: &str| ps.condition(t).is_some_and(|c| c.status.as_str() == "True");
            let (exhausted, overlapping) = (flagged(EXHAUSTED), flagged(OVERLAPPING));
            let is_flag_pool = self.opts.flag_pool.is_some() && ps.name == DEFAULT_POOL;
            let entry = if is_flag_pool {
                None
            } else {
                self.pools.items.get(&ps.name).cloned()
            };
            let Some(entry) = entry else {
                if is_flag_pool {
                    let before = self.flag_pool_flags.replace((exhausted, overlapping));
                    if let Some((was_ex, was_ov)) = before {
                        self.pool_events(&ps, None, was_ex, was_ov, exhausted, overlapping)
                            .await;
                    }
                }
                continue;
            };
            let current = entry.status.as_ref();
            // Our last write counts until the watch shows it (bounded, in case it never does).
            let written = self
                .written_pool_status
                .get(&ps.name)
                .filter(|(_, at)| at.elapsed() < CATCH_UP)
                .filter(|(w, _)| current.is_none_or(|c| !same_status(c, w)))
                .map(|(w, _)| w.clone());
            let previous = written.clone().or(entry.status.clone());
            let desired = render_status(&ps, previous.as_ref(), entry.generation, now);
            if previous.as_ref().is_some_and(|p| same_status(p, &desired)) {
                continue;
            }
            if !self.gate.borrow().may_write() {
                return;
            }
            let patch = json!({ "status": {
                "ipv4": desired.ipv4,
                "ipv6": desired.ipv6,
                "conditions": desired.conditions,
                "observedGeneration": desired.observed_generation,
            }});
            let pp = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            };
            let res = tokio::time::timeout(
                self.opts.lease.request_timeout(),
                api.patch_status(&ps.name, &pp, &Patch::Merge(&patch)),
            )
            .await;
            let outcome = match res {
                Err(_) => WriteOutcome::Timeout,
                Ok(Err(e)) => kube_store::map_error(&e),
                Ok(Ok(_)) => WriteOutcome::Ok,
            };
            self.metrics
                .count_write("pool_status", result_label(&outcome));
            if outcome != WriteOutcome::Ok {
                tracing::warn!(pool = %ps.name, "pool status write failed: {outcome:?}");
                self.retry.get_or_insert(Instant::now() + self.backoff);
                continue;
            }
            let (was_ex, was_ov) = (
                condition_true(previous.as_ref(), EXHAUSTED),
                condition_true(previous.as_ref(), OVERLAPPING),
            );
            self.written_pool_status
                .insert(ps.name.clone(), (desired, Instant::now()));
            self.pool_events(&ps, entry.uid, was_ex, was_ov, exhausted, overlapping)
                .await;
        }
    }

    async fn pool_events(
        &self,
        ps: &super::PoolStatus,
        uid: Option<String>,
        was_exhausted: bool,
        was_overlapping: bool,
        exhausted: bool,
        overlapping: bool,
    ) {
        let message = |t: &str| {
            ps.condition(t)
                .map(|c| c.message.clone())
                .unwrap_or_default()
        };
        if exhausted && !was_exhausted {
            self.event(
                "PodCIDRPool",
                &ps.name,
                uid.clone(),
                "PoolExhausted",
                &message(EXHAUSTED),
            )
            .await;
        }
        if overlapping && !was_overlapping {
            self.event(
                "PodCIDRPool",
                &ps.name,
                uid,
                "PoolOverlapping",
                &message(OVERLAPPING),
            )
            .await;
        }
    }

    /// Publishes a Warning Event (best effort; only while leading) through the Recorder:
    /// events.k8s.io/v1 in [`EVENT_NAMESPACE`], and a repeat about the same object with the
    /// same reason within the Recorder's cache window patches the first Event's series
    /// instead of creating another object. A failure is logged and counted, never fatal.
    async fn event(
        &self,
        kind: &str,
        name: &str,
        uid: Option<String>,
        reason: &str,
        message: &str,
    ) {
        if !self.gate.borrow().may_write() {
            return;
        }
        tracing::warn!(kind, name, reason, "{message}");
        let regarding = ObjectReference {
            api_version: Some(format!("{GROUP}/{VERSION}")),
            kind: Some(kind.into()),
            name: Some(name.into()),
            uid,
            ..ObjectReference::default()
        };
        let event = Publish {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(truncate(message, NOTE_LIMIT)),
            action: "Allocate".into(),
            secondary: None,
        };
        let res = tokio::time::timeout(
            self.opts.lease.request_timeout(),
            self.recorder.publish(&event, &regarding),
        )
        .await;
        let outcome = match res {
            Err(_) => WriteOutcome::Timeout,
            Ok(Err(e)) => kube_store::map_error(&e),
            Ok(Ok(())) => WriteOutcome::Ok,
        };
        if outcome != WriteOutcome::Ok {
            tracing::warn!(kind, name, "could not publish the Event: {outcome:?}");
        }
        self.metrics.count_write("event", result_label(&outcome));
    }

    fn update_gauges(&mut self) {
        let Some(rec) = &self.reconciler else { return };
        let a = rec.allocator();
        let need = self.opts.families.len();
        let (mut conflicts, mut pending) = (0i64, 0i64);
        for n in self.nodes.items.values() {
            match a.node(&n.uid) {
                Some(e) => {
                    if e.held.iter().any(|h| a.is_conflicted(&h.cidr)) {
                        conflicts += 1;
                    }
                    if e.held.len() < need {
                        pending += 1;
                    }
                }
                None => pending += 1,
            }
        }
        self.metrics.conflicts.set(conflicts);
        self.metrics.pending_nodes.set(pending);
        let secs_now = self
            .opts
            .clock
            .now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        self.quarantine_wake = a.quarantined().iter().map(|(_, t)| t.0).min().map(|until| {
            let left = Duration::from_secs(until).saturating_sub(secs_now);
            Instant::now() + left + Duration::from_millis(20)
        });
    }
}

/// At most `limit` bytes of `text`, cut at a character boundary.
/// Logs a watch error. One that makes the watcher relist (410 Gone) stops the passes until
/// the relist is complete: planning from a cache that missed events hands out CIDRs that
/// records written meanwhile hold.
fn watch_failed<V>(cache: &mut Cache<V>, kind: &str, e: &watcher::Error) {
    if cache.watch_failed(e) {
        tracing::warn!(
            kind,
            "watch error, relisting; no pass until the relist is complete: {e}"
        );
    } else {
        tracing::warn!(kind, "watch error (retrying with backoff): {e}");
    }
}

fn truncate(text: &str, limit: usize) -> String {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
