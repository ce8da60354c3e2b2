//! Allocator metrics (Prometheus text format) and the health flags behind `/livez`, `/readyz`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::unix_now;

use tokio::sync::watch;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::cidr::Family as AddressFamily;
use super::status::PoolStatus;
use super::store::WriteOutcome;

/// `{pool, family}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// Pool name.
    pub pool: String,
    /// `ipv4` / `ipv6`.
    pub family: String,
}

/// `{kind, result}` of an API write.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `create`, `patch_spec`, `status`, `pool_status`, `event`.
    pub kind: String,
    /// `ok`, `conflict`, `not_found`, `timeout`, `server_error`.
    pub result: String,
}

/// `{code}` of a response that asked us to slow down.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    /// HTTP status code (`429`, `503`).
    pub code: String,
}

/// `{kind, reason}` of the configuration objects' `Accepted` condition.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConfigObjectLabels {
    /// `BGPSpeakerConfig` or `BGPPeer`.
    pub kind: String,
    /// `Valid`, `Invalid`, `Conflict`, `SecretNotFound`.
    pub reason: String,
}

/// `{kind, state}` of the configuration objects' rollouts (`status.rollout.state`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutLabels {
    /// `BGPSpeakerConfig` or `BGPPeer`.
    pub kind: String,
    /// `Progressing` or `Stalled`.
    pub state: String,
}

/// `{reason}` of the Events on Services (`BGPAnnounced`, `BGPWithdrawn`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServiceEventLabels {
    pub reason: String,
}

/// Labels of `podcidr_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildInfoLabels {
    pub version: String,
    pub commit: String,
}

/// Metrics plus liveness/readiness of one allocator process.
#[derive(Debug)]
pub struct AllocatorMetrics {
    registry: Registry,
    /// Node blocks per pool and family.
    pub pool_capacity: Family<PoolLabels, Gauge>,
    /// Allocated node blocks.
    pub pool_allocated: Family<PoolLabels, Gauge>,
    /// Free node blocks.
    pub pool_free: Family<PoolLabels, Gauge>,
    /// Quarantined node blocks.
    pub pool_quarantined: Family<PoolLabels, Gauge>,
    /// Nodes whose CIDR overlaps another node's.
    pub conflicts: Gauge,
    /// Nodes without a complete allocation.
    pub pending_nodes: Gauge,
    /// API writes by kind and result.
    pub writes: Family<WriteLabels, Counter>,
    /// 1 while holding the lease.
    pub leader: Gauge,
    /// Reconcile passes run.
    pub passes: Counter,
    /// `podcidr_build_info{version,commit}`; the binary sets it ([`Self::set_build_info`]).
    pub build_info: Family<BuildInfoLabels, Gauge>,
    /// API requests sent (every attempt, reads and writes, the Lease included).
    pub api_requests: Counter,
    /// Retries after server pushback (429, 503 with `Retry-After`), by code.
    pub api_throttled: Family<CodeLabels, Counter>,
    /// Seconds requests waited for a token of the client-side bucket.
    pub api_wait_seconds: Counter<f64, AtomicU64>,
    /// Configuration objects by kind and `Accepted` reason (the leader's last count).
    pub config_objects: Family<ConfigObjectLabels, Gauge>,
    /// Configuration objects whose session-resetting edit rolls out in waves, by kind and
    /// state (`Progressing`, `Stalled`; 0 when none).
    pub config_rollouts: Family<RolloutLabels, Gauge>,
    /// Objects an earlier release installed that this one no longer needs and that widen
    /// what they grant (the upgrade removes them; operator guide, Upgrade).
    pub leftover_objects: Gauge,
    /// Events written on Services when their announcement first starts or fully stops.
    pub service_events: Family<ServiceEventLabels, Counter>,
    /// Such transitions not written because of the rate bound.
    pub service_events_suppressed: Counter,
    passes_seen: watch::Sender<u64>,
    ready: AtomicBool,
    heartbeat: AtomicU64,
}

impl Default for AllocatorMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn gauge_value(v: u128) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// `ipv4` / `ipv6`.
pub fn family_label(f: AddressFamily) -> &'static str {
    match f {
        AddressFamily::V4 => "ipv4",
        AddressFamily::V6 => "ipv6",
    }
}

/// Label value of a write outcome.
pub fn result_label(o: &WriteOutcome) -> &'static str {
    match o {
        WriteOutcome::Ok => "ok",
        WriteOutcome::Conflict => "conflict",
        WriteOutcome::NotFound => "not_found",
        WriteOutcome::Timeout => "timeout",
        WriteOutcome::ServerError(_) => "server_error",
    }
}

impl AllocatorMetrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let m = AllocatorMetrics {
            registry: Registry::default(),
            pool_capacity: Family::default(),
            pool_allocated: Family::default(),
            pool_free: Family::default(),
            pool_quarantined: Family::default(),
            conflicts: Gauge::default(),
            pending_nodes: Gauge::default(),
            writes: Family::default(),
            leader: Gauge::default(),
            passes: Counter::default(),
            build_info: Family::default(),
            api_requests: Counter::default(),
            api_throttled: Family::default(),
            api_wait_seconds: Counter::default(),
            config_objects: Family::default(),
            config_rollouts: Family::default(),
            leftover_objects: Gauge::default(),
            service_events: Family::default(),
            service_events_suppressed: Counter::default(),
            passes_seen: watch::channel(0).0,
            ready: AtomicBool::new(false),
            heartbeat: AtomicU64::new(unix_now()),
        };
        let mut registry = Registry::default();
        let p = "podcidr_allocator";
        registry.register(
            format!("{p}_pool_capacity"),
            "Node blocks in the pool's active CIDRs",
            m.pool_capacity.clone(),
        );
        registry.register(
            format!("{p}_pool_allocated"),
            "Node blocks held by nodes",
            m.pool_allocated.clone(),
        );
        registry.register(
            format!("{p}_pool_free"),
            "Node blocks available now",
            m.pool_free.clone(),
        );
        registry.register(
            format!("{p}_pool_quarantined"),
            "Released node blocks waiting for quarantine to end",
            m.pool_quarantined.clone(),
        );
        registry.register(
            format!("{p}_conflicts"),
            "Nodes whose CIDR overlaps another node's (excluded from BGP)",
            m.conflicts.clone(),
        );
        registry.register(
            format!("{p}_pending_nodes"),
            "Nodes without a complete allocation",
            m.pending_nodes.clone(),
        );
        registry.register(
            format!("{p}_writes"),
            "API writes by kind and result",
            m.writes.clone(),
        );
        registry.register(
            format!("{p}_leader"),
            "1 while this process holds the allocator lease",
            m.leader.clone(),
        );
        registry.register(
            format!("{p}_passes"),
            "Reconcile passes run",
            m.passes.clone(),
        );
        registry.register(
            format!("{p}_api_requests"),
            "API requests sent, every attempt (reads, writes, the Lease)",
            m.api_requests.clone(),
        );
        registry.register(
            format!("{p}_api_throttled"),
            "Requests retried after the API server asked us to slow down (429, 503 with Retry-After)",
            m.api_throttled.clone(),
        );
        // At 0 from the start: `increase()` sees the first pushback, and the series exists
        // for dashboards before any.
        for code in ["429", "503"] {
            let _ = m.api_throttled.get_or_create(&CodeLabels {
                code: code.to_owned(),
            });
        }
        registry.register(
            format!("{p}_api_wait_seconds"),
            "Time requests waited for the client-side rate limit (--api-qps, --api-burst)",
            m.api_wait_seconds.clone(),
        );
        registry.register(
            format!("{p}_config_objects"),
            "BGPSpeakerConfig and BGPPeer objects by kind and Accepted reason (Valid, Invalid, Conflict, SecretNotFound), as the leader last wrote them",
            m.config_objects.clone(),
        );
        registry.register(
            format!("{p}_config_rollouts"),
            "BGPSpeakerConfig and BGPPeer objects whose session-resetting edit rolls out in waves, by kind and state (Progressing, Stalled), as the leader last wrote them",
            m.config_rollouts.clone(),
        );
        registry.register(
            format!("{p}_leftover_objects"),
            "Objects an earlier release installed that this one no longer needs (the allocator logs each with the command that removes it)",
            m.leftover_objects.clone(),
        );
        registry.register(
            format!("{p}_service_events"),
            "Events written on Services by reason: BGPAnnounced (announced from a first node), BGPWithdrawn (from no node any more)",
            m.service_events.clone(),
        );
        // At 0 from the start, as api_throttled: the series exist before the first Event.
        for reason in ["BGPAnnounced", "BGPWithdrawn"] {
            let _ = m.service_events.get_or_create(&ServiceEventLabels {
                reason: reason.to_owned(),
            });
        }
        registry.register(
            format!("{p}_service_events_suppressed"),
            "Service announcement changes not written as Events because of the rate bound (cluster bucket, one per Service per minute)",
            m.service_events_suppressed.clone(),
        );
        registry.register(
            "podcidr_build_info",
            "1, labelled with the version and git commit of this binary",
            m.build_info.clone(),
        );
        AllocatorMetrics { registry, ..m }
    }

    pub fn set_build_info(&self, version: &str, commit: &str) {
        self.build_info
            .get_or_create(&BuildInfoLabels {
                version: version.to_owned(),
                commit: commit.to_owned(),
            })
            .set(1);
    }

    /// Counts a finished reconcile pass.
    pub fn pass_done(&self) {
        let n = self.passes.inc() + 1;
        self.passes_seen.send_replace(n);
    }

    /// Waits until at least `n` passes finished; false on timeout.
    pub async fn wait_for_passes(&self, n: u64, timeout: Duration) -> bool {
        let mut rx = self.passes_seen.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|v| *v >= n))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Adds a wait for the client-side bucket.
    pub fn api_waited(&self, waited: Duration) {
        if !waited.is_zero() {
            self.api_wait_seconds.inc_by(waited.as_secs_f64());
        }
    }

    /// Counts a retry after server pushback.
    pub fn count_throttled(&self, code: u16) {
        self.api_throttled
            .get_or_create(&CodeLabels {
                code: code.to_string(),
            })
            .inc();
    }

    /// Counts one write.
    pub fn count_write(&self, kind: &str, result: &str) {
        self.writes
            .get_or_create(&WriteLabels {
                kind: kind.into(),
                result: result.into(),
            })
            .inc();
    }

    /// Writes of every kind and result made by this process.
    pub fn total_writes(&self) -> u64 {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            return 0;
        }
        text.lines()
            .filter(|l| l.starts_with("podcidr_allocator_writes_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Sets the pool gauges.
    pub fn set_pools(&self, statuses: &[PoolStatus]) {
        // Pools that went away must not linger.
        for f in [
            &self.pool_capacity,
            &self.pool_allocated,
            &self.pool_free,
            &self.pool_quarantined,
        ] {
            f.clear();
        }
        for s in statuses {
            for a in &s.families {
                let l = PoolLabels {
                    pool: s.name.clone(),
                    family: family_label(a.family).into(),
                };
                self.pool_capacity
                    .get_or_create(&l)
                    .set(gauge_value(a.capacity));
                self.pool_allocated
                    .get_or_create(&l)
                    .set(gauge_value(a.allocated));
                self.pool_free.get_or_create(&l).set(gauge_value(a.free));
                self.pool_quarantined
                    .get_or_create(&l)
                    .set(gauge_value(a.quarantined));
            }
        }
    }

    /// Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// Marks the process ready (config valid, lease loop running).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// `/readyz`.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// The main loop is alive.
    pub fn beat(&self) {
        self.heartbeat.store(unix_now(), Ordering::Relaxed);
    }

    /// `/livez`: the main loop ticked within `window_secs`.
    pub fn is_live(&self, window_secs: u64) -> bool {
        unix_now().saturating_sub(self.heartbeat.load(Ordering::Relaxed)) <= window_secs
    }
}
