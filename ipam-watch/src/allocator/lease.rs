//! Leader election on a `coordination.k8s.io/v1` Lease (client-go style timing).
//!
//! Acquire when the Lease is absent, has no holder, or is expired
//! (`renewTime + leaseDurationSeconds < now`); renew every third of the duration with a
//! `resourceVersion`-checked replace. A leader may write only until
//! `last successful renew (local send time) + 2/3 duration`; a leader that sees another
//! holder, a deleted Lease, or misses that deadline has lost for good (the process restarts
//! clean, never reusing in-memory state from an earlier term).

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

/// Wall clock, injectable for tests.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Current wall-clock time.
    fn now(&self) -> SystemTime;
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
}

impl fmt::Debug for LeaseElector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseElector")
            .field("cfg", &self.cfg)
            .field("renewed", &self.renewed)
            .finish()
    }
}

fn micro(t: SystemTime) -> MicroTime {
    MicroTime(timestamp(t))
}

/// True if nobody validly holds `lease` at `now`.
fn expired(lease: &Lease, now: SystemTime, default: Duration) -> bool {
    let Some(spec) = &lease.spec else { return true };
    if spec.holder_identity.as_deref().unwrap_or("").is_empty() {
        return true;
    }
    let Some(renew) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let secs = spec
        .lease_duration_seconds
        .map_or(default.as_secs(), |s| u64::try_from(s.max(0)).unwrap_or(0));
    let renew_us = renew.0.as_microsecond();
    let now_us = timestamp(now).as_microsecond();
    let dur_us = i64::try_from(secs).unwrap_or(i64::MAX / 2_000_000) * 1_000_000;
    renew_us.saturating_add(dur_us) < now_us
}

impl LeaseElector {
    /// A candidate for `cfg`.
    pub fn new(client: Client, cfg: LeaseConfig, clock: Arc<dyn Clock>) -> Self {
        LeaseElector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            clock,
            renewed: None,
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
        if !ours && !expired(&lease, now, self.cfg.duration) {
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

/// Eight hex digits from a xorshift seeded by time, pid and a call counter.
fn random_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut x =
        nanos ^ (u64::from(std::process::id()) << 32) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x |= 1;
    for _ in 0..8 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    format!("{:08x}", x as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renew_secs: i64, duration: i32) -> Lease {
        let t = k8s_openapi::jiff::Timestamp::from_second(renew_secs).unwrap();
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                renew_time: Some(MicroTime(t)),
                lease_duration_seconds: Some(duration),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn expiry_uses_renew_time_plus_duration() {
        let at = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let d = Duration::from_secs(15);
        assert!(!expired(&lease(Some("a"), 100, 15), at(110), d));
        assert!(!expired(&lease(Some("a"), 100, 15), at(115), d));
        assert!(expired(&lease(Some("a"), 100, 15), at(116), d));
        assert!(expired(&lease(None, 100, 15), at(101), d), "no holder");
        assert!(
            expired(&lease(Some(""), 100, 15), at(101), d),
            "empty holder"
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
