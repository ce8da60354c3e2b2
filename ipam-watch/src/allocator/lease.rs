//! Leader election on a `coordination.k8s.io/v1` Lease (client-go style timing).
//!
//! Expiry is never judged by comparing the holder's `renewTime` with our wall clock: the
//! clocks of two hosts disagree, and a candidate whose clock runs ahead would take a Lease
//! that is still being renewed. Like client-go, a candidate remembers when *it* last saw the
//! Lease record change (holder, times, duration, transitions or `resourceVersion`), on its
//! own monotonic clock, and acquires only when the record has no holder or has not changed
//! for more than `leaseDurationSeconds` since then. A fresh candidate therefore waits one
//! full duration before taking over a Lease whose holder crashed. `renewTime` is still
//! written, for humans and other tools, but never read for the decision.
//!
//! The leader renews every third of the duration with a `resourceVersion`-checked replace.
//! It may write only until `last successful renew (local send time) + 2/3 duration`; a
//! leader that sees another holder, a deleted Lease, or misses that deadline has lost for
//! good (the process restarts clean, never reusing in-memory state from an earlier term).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;

use super::kube_store::{FIELD_MANAGER, timestamp};

/// Default Lease name.
pub const DEFAULT_LEASE_NAME: &str = "podcidr-bgp-allocator";
/// Default Lease duration.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// Clocks, injectable for tests.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Current wall-clock time (timestamps written to the API, quarantine).
    fn now(&self) -> SystemTime;

    /// Local monotonic time: when a candidate observed a Lease record change. Never
    /// compared with another host's time.
    fn monotonic(&self) -> Instant {
        Instant::now()
    }
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// Where the Lease lives and who we are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// `holderIdentity` we write.
    pub identity: String,
    /// `leaseDurationSeconds` (whole seconds, at least 1).
    pub duration: Duration,
}

impl LeaseConfig {
    /// Renew (and candidate retry) period: a third of the duration.
    pub fn renew_period(&self) -> Duration {
        self.duration / 3
    }

    /// How long after a successful renew we may still write.
    pub fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }

    /// Upper bound of one API request, so writes end before a successor can acquire.
    pub fn request_timeout(&self) -> Duration {
        (self.duration / 4).max(Duration::from_secs(1))
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// Leadership as the reconcile loop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderState {
    /// Not (yet) leading.
    Follower,
    /// Leading; writes may start until `valid_until`.
    Leader {
        /// End of the write window (local monotonic time).
        valid_until: Instant,
    },
    /// Was leading and lost; stop.
    Lost(String),
}

impl LeaderState {
    /// True if a write may start now.
    pub fn may_write(&self) -> bool {
        matches!(self, LeaderState::Leader { valid_until } if Instant::now() < *valid_until)
    }
}

/// Result of one election round.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Round {
    Leader(Instant),
    Follower,
    /// Leader whose renew failed transiently; state unchanged.
    Keep,
    Lost(String),
}

/// One candidate.
pub struct LeaseElector {
    api: Api<Lease>,
    cfg: LeaseConfig,
    clock: Arc<dyn Clock>,
    /// Local send time of the last successful acquire/renew while leading.
    renewed: Option<Instant>,
    /// The Lease record as last seen, and since when (candidate side).
    observed: Option<Observation>,
}

impl fmt::Debug for LeaseElector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseElector")
            .field("cfg", &self.cfg)
            .field("renewed", &self.renewed)
            .field("observed", &self.observed)
            .finish()
    }
}

fn micro(t: SystemTime) -> MicroTime {
    MicroTime(timestamp(t))
}

/// The parts of a Lease record whose change shows that someone is writing it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RecordKey {
    resource_version: Option<String>,
    holder: String,
    renew_time: Option<i64>,
    acquire_time: Option<i64>,
    duration_secs: Option<i32>,
    transitions: Option<i32>,
}

impl RecordKey {
    fn of(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        let us = |t: Option<&MicroTime>| t.map(|t| t.0.as_microsecond());
        RecordKey {
            resource_version: lease.metadata.resource_version.clone(),
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default(),
            renew_time: us(spec.and_then(|s| s.renew_time.as_ref())),
            acquire_time: us(spec.and_then(|s| s.acquire_time.as_ref())),
            duration_secs: spec.and_then(|s| s.lease_duration_seconds),
            transitions: spec.and_then(|s| s.lease_transitions),
        }
    }
}

/// What a candidate last saw of the Lease record, and when it first saw it that way (on its
/// own monotonic clock). Expiry is decided from this alone, never from `renewTime`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observation {
    record: RecordKey,
    since: Instant,
}

impl Observation {
    /// Records `lease` as seen at `at`; the timer restarts only if the record changed.
    fn observe(slot: &mut Option<Observation>, lease: &Lease, at: Instant) {
        let record = RecordKey::of(lease);
        if slot.as_ref().is_none_or(|o| o.record != record) {
            *slot = Some(Observation { record, since: at });
        }
    }

    /// True if nobody validly holds the observed record at `at`: it has no holder, or it
    /// has not changed for more than its `leaseDurationSeconds` (at least `ours`).
    fn expired(&self, at: Instant, ours: Duration) -> bool {
        if self.record.holder.is_empty() {
            return true;
        }
        let theirs = self.record.duration_secs.map_or(Duration::ZERO, |s| {
            Duration::from_secs(u64::try_from(s).unwrap_or(0))
        });
        at.saturating_duration_since(self.since) > theirs.max(ours)
    }
}

impl LeaseElector {
    /// A candidate for `cfg`.
    pub fn new(client: Client, cfg: LeaseConfig, clock: Arc<dyn Clock>) -> Self {
        LeaseElector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            clock,
            renewed: None,
            observed: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    fn pp() -> PostParams {
        PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        }
    }

    async fn bounded<T>(
        &self,
        fut: impl Future<Output = kube::Result<T>>,
    ) -> Option<kube::Result<T>> {
        tokio::time::timeout(self.cfg.request_timeout(), fut)
            .await
            .ok()
    }

    /// What a failed round means: a leader keeps leading until its deadline.
    fn failed(&self, why: String) -> Round {
        match self.renewed {
            Some(t) if t.elapsed() >= self.cfg.renew_deadline() => {
                Round::Lost(format!("could not renew the lease in time: {why}"))
            }
            Some(_) => Round::Keep,
            None => Round::Follower,
        }
    }

    async fn round(&mut self) -> Round {
        let sent = Instant::now();
        let now = self.clock.now();
        let me = self.cfg.identity.clone();
        let current = match self.bounded(self.api.get_opt(&self.cfg.name)).await {
            Some(Ok(l)) => l,
            Some(Err(e)) => return self.failed(e.to_string()),
            None => return self.failed("request timed out".into()),
        };
        let Some(mut lease) = current else {
            if self.renewed.is_some() {
                return Round::Lost("the lease was deleted".into());
            }
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(self.cfg.duration_secs()),
                    acquire_time: Some(micro(now)),
                    renew_time: Some(micro(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.bounded(self.api.create(&Self::pp(), &lease)).await {
                Some(Ok(_)) => Round::Leader(sent),
                _ => Round::Follower,
            };
        };
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default();
        let ours = holder == me;
        if !ours && self.renewed.is_some() {
            let by = if holder.is_empty() { "nobody" } else { &holder };
            return Round::Lost(format!("the lease is now held by {by}"));
        }
        // Timed on our own monotonic clock from when we saw this record first: a
        // skewed wall clock (ours or the holder's) cannot shorten the holder's term.
        Observation::observe(&mut self.observed, &lease, self.clock.monotonic());
        let expired = self
            .observed
            .as_ref()
            .is_some_and(|o| o.expired(self.clock.monotonic(), self.cfg.duration));
        if !ours && !expired {
            return Round::Follower;
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if !ours {
            spec.holder_identity = Some(me);
            spec.acquire_time = Some(micro(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        spec.renew_time = Some(micro(now));
        spec.lease_duration_seconds = Some(self.cfg.duration_secs());
        // The object's resourceVersion makes this a compare-and-swap.
        match self
            .bounded(self.api.replace(&self.cfg.name, &Self::pp(), &lease))
            .await
        {
            Some(Ok(_)) => Round::Leader(sent),
            Some(Err(e)) => self.failed(e.to_string()),
            None => self.failed("request timed out".into()),
        }
    }

    /// Runs rounds every renew period, publishing the state, until lost or `stop` fires.
    pub async fn run(mut self, tx: watch::Sender<LeaderState>, mut stop: watch::Receiver<bool>) {
        loop {
            match self.round().await {
                Round::Leader(sent) => {
                    if self.renewed.is_none() {
                        tracing::info!(identity = %self.cfg.identity, lease = %self.cfg.name, "acquired the allocator lease");
                    }
                    self.renewed = Some(sent);
                    tx.send_replace(LeaderState::Leader {
                        valid_until: sent + self.cfg.renew_deadline(),
                    });
                }
                Round::Follower => {
                    tx.send_if_modified(|s| {
                        let changed = *s != LeaderState::Follower;
                        *s = LeaderState::Follower;
                        changed
                    });
                }
                Round::Keep => {}
                Round::Lost(why) => {
                    tracing::error!(identity = %self.cfg.identity, "lost the allocator lease: {why}");
                    tx.send_replace(LeaderState::Lost(why));
                    return;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.renew_period()) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    /// Gives the lease up (best effort) so a successor need not wait for expiry.
    pub async fn release(&self) {
        let Some(Ok(Some(mut lease))) = self.bounded(self.api.get_opt(&self.cfg.name)).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(micro(self.clock.now()));
        if let Some(Err(e)) = self
            .bounded(self.api.replace(&self.cfg.name, &Self::pp(), &lease))
            .await
        {
            tracing::warn!("could not release the lease: {e}");
        }
    }
}

/// `$POD_NAME` (else the hostname) plus a random suffix, so two processes never share one.
pub fn default_identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "allocator".into());
    format!("{base}-{}", random_suffix())
}

/// Eight random hex digits (`fastrand`, seeded per thread from the OS).
fn random_suffix() -> String {
    format!("{:08x}", fastrand::u32(..))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renew_secs: i64, duration: i32, rv: u64) -> Lease {
        let t = k8s_openapi::jiff::Timestamp::from_second(renew_secs).unwrap();
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(rv.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                renew_time: Some(MicroTime(t)),
                lease_duration_seconds: Some(duration),
                ..LeaseSpec::default()
            }),
        }
    }

    const D: Duration = Duration::from_secs(15);

    /// The bug: expiry was `renewTime + duration < candidate's wall clock`, so a candidate
    /// whose clock ran ahead took a Lease that was still being renewed. Now expiry depends
    /// only on when the candidate saw the record change, on its own monotonic clock.
    #[test]
    fn lease_expiry_ignores_clock_skew_and_times_from_observed_change() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut seen = None;
        // The holder's renewTime is far in the past by our wall clock (skew of hours):
        // still valid, because we have only just seen it.
        Observation::observe(&mut seen, &lease(Some("a"), 100, 15, 1), at(0));
        assert!(!seen.as_ref().unwrap().expired(at(0), D));
        // The holder renews every 5 s: however old renewTime looks, never expired.
        for (i, ms) in (5_000..=60_000).step_by(5_000).enumerate() {
            let rv = 2 + i as u64;
            Observation::observe(
                &mut seen,
                &lease(Some("a"), 100 + (ms / 1000) as i64, 15, rv),
                at(ms),
            );
            assert!(!seen.as_ref().unwrap().expired(at(ms + 4_999), D), "{ms}");
        }
        // The holder stops renewing: re-reading the same record does not restart the timer,
        // and the lease expires only after more than the duration since the last change.
        let last = 60_000;
        for ms in [last + 5_000, last + 10_000, last + 15_000] {
            Observation::observe(&mut seen, &lease(Some("a"), 160, 15, 13), at(ms));
            assert!(!seen.as_ref().unwrap().expired(at(ms), D), "{ms}");
        }
        assert!(seen.as_ref().unwrap().expired(at(last + 15_001), D));
        // A change of resourceVersion alone (someone wrote the record) restarts the timer.
        Observation::observe(&mut seen, &lease(Some("a"), 160, 15, 14), at(last + 16_000));
        assert!(!seen.as_ref().unwrap().expired(at(last + 30_000), D));
        assert!(seen.as_ref().unwrap().expired(at(last + 31_001), D));
    }

    #[test]
    fn lease_without_holder_is_free_and_longer_duration_wins() {
        let t0 = Instant::now();
        let mut seen = None;
        Observation::observe(&mut seen, &lease(None, 0, 15, 1), t0);
        assert!(seen.as_ref().unwrap().expired(t0, D), "no holder");
        Observation::observe(&mut seen, &lease(Some(""), 0, 15, 2), t0);
        assert!(seen.as_ref().unwrap().expired(t0, D), "empty holder");
        // The holder's longer duration counts; so does ours when theirs is shorter.
        Observation::observe(&mut seen, &lease(Some("a"), 0, 60, 3), t0);
        assert!(
            !seen
                .as_ref()
                .unwrap()
                .expired(t0 + Duration::from_secs(59), D)
        );
        assert!(
            seen.as_ref()
                .unwrap()
                .expired(t0 + Duration::from_secs(61), D)
        );
        Observation::observe(&mut seen, &lease(Some("a"), 0, 1, 4), t0);
        assert!(
            !seen
                .as_ref()
                .unwrap()
                .expired(t0 + Duration::from_secs(14), D)
        );
    }

    #[test]
    fn timing_and_identity() {
        let cfg = LeaseConfig {
            namespace: "ns".into(),
            name: DEFAULT_LEASE_NAME.into(),
            identity: "x".into(),
            duration: DEFAULT_LEASE_DURATION,
        };
        assert_eq!(cfg.renew_period(), Duration::from_secs(5));
        assert_eq!(cfg.renew_deadline(), Duration::from_secs(10));
        assert!(cfg.request_timeout() <= cfg.duration - cfg.renew_deadline());
        assert_ne!(default_identity(), default_identity());
        let past = LeaderState::Leader {
            valid_until: Instant::now() - Duration::from_millis(1),
        };
        assert!(!past.may_write());
        assert!(!LeaderState::Follower.may_write());
    }
}
