//! Client-side API limits, as numbers and decisions (no I/O, no clock: times are arguments).
//!
//! - [`ApiLimits`]: `--api-qps` / `--api-burst`, validated.
//! - [`TokenBucket`]: the bucket every API request passes (GCRA form, exact in `Duration`s,
//!   deterministic): `burst` requests at once, then one per `1 / qps`.
//! - [`pushback`]: whether a response is the server asking us to slow down (429, or 503 with
//!   `Retry-After`), and for how long to wait before the retry.
//!
//! The async side (waiting for a token, the tower service around the kube client) is in
//! [`super::api_client`].

use std::time::{Duration, Instant};

/// Default `--api-qps`: kube-controller-manager's `--kube-api-qps` default, whose node IPAM
/// controller this allocator replaces.
pub const DEFAULT_API_QPS: f64 = 20.0;
/// Default `--api-burst`: kube-controller-manager's `--kube-api-burst` default.
pub const DEFAULT_API_BURST: u32 = 30;
/// Longest wait we accept from a `Retry-After` header (a larger value is cut to this).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Retries of one request after server pushback (client-go's default `maxRetries`); then the
/// last answer goes to the caller.
pub const MAX_PUSHBACK_RETRIES: u32 = 10;
/// First wait after a 429 without `Retry-After` (doubled per retry, up to
/// [`MAX_RETRY_AFTER`]).
pub const FIRST_PUSHBACK_BACKOFF: Duration = Duration::from_secs(1);
/// Longest refill interval (a qps below one request a day is treated as one a day).
const MAX_INTERVAL: Duration = Duration::from_secs(86_400);

/// A bad `--api-qps` / `--api-burst` value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiLimitsError {
    /// Not a finite number above zero.
    #[error("must be a number greater than 0")]
    Qps(f64),
    /// Zero.
    #[error("must be at least 1")]
    Burst(u32),
}

/// Client-side rate limits of the allocator's API requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApiLimits {
    /// Sustained requests per second (refill rate of the bucket).
    pub qps: f64,
    /// Requests that may go out back to back (bucket size).
    pub burst: u32,
}

impl Default for ApiLimits {
    fn default() -> Self {
        ApiLimits {
            qps: DEFAULT_API_QPS,
            burst: DEFAULT_API_BURST,
        }
    }
}

impl ApiLimits {
    /// Validated limits.
    pub fn new(qps: f64, burst: u32) -> Result<Self, ApiLimitsError> {
        let l = ApiLimits { qps, burst };
        l.validate()?;
        Ok(l)
    }

    /// `qps` finite and above 0, `burst` at least 1.
    pub fn validate(&self) -> Result<(), ApiLimitsError> {
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return Err(ApiLimitsError::Qps(self.qps));
        }
        if self.burst == 0 {
            return Err(ApiLimitsError::Burst(self.burst));
        }
        Ok(())
    }

    /// Time between two tokens.
    pub fn interval(&self) -> Duration {
        Duration::try_from_secs_f64(1.0 / self.qps)
            .unwrap_or(MAX_INTERVAL)
            .min(MAX_INTERVAL)
    }
}

/// A token bucket in GCRA form: `tat` ("theoretical arrival time") moves one interval per
/// request; a request may go when `now >= tat - (burst - 1) * interval`.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    interval: Duration,
    tolerance: Duration,
    tat: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub fn new(limits: ApiLimits, now: Instant) -> Self {
        let interval = limits.interval();
        TokenBucket {
            interval,
            tolerance: interval.saturating_mul(limits.burst.max(1) - 1),
            tat: now,
        }
    }

    /// Takes a token (`Ok`) or says how long until one is available (`Err`, nothing taken).
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        let tat = self.tat.max(now);
        match tat.checked_sub(self.tolerance) {
            Some(allowed_at) if allowed_at > now => Err(allowed_at - now),
            _ => {
                self.tat = tat.checked_add(self.interval).unwrap_or(tat);
                Ok(())
            }
        }
    }

    /// Every token is there (nothing taken within the last `burst` intervals).
    pub fn is_full(&self, now: Instant) -> bool {
        self.tat <= now
    }

    /// Server pushback: no token before `until`, and the bucket is empty then (requests
    /// resume at the configured rate, not with a burst).
    pub fn pause_until(&mut self, until: Instant) {
        if let Some(t) = until.checked_add(self.tolerance) {
            self.tat = self.tat.max(t);
        }
    }
}

/// The seconds form of `Retry-After` (`"3"`); the HTTP-date form is not used by
/// kube-apiserver and counts as absent.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// How long to wait before retrying a request whose `attempt`-th try (0-based) was answered
/// with `status` and `retry_after`; `None`: hand the answer to the caller.
///
/// - 429 Too Many Requests: the server did not process the request (API Priority and
///   Fairness, max-in-flight). Wait `Retry-After` (at most [`MAX_RETRY_AFTER`]), or without
///   the header 1 s, 2 s, 4 s, … (at most [`MAX_RETRY_AFTER`]).
/// - 503 Service Unavailable *with* `Retry-After`: the server asks us to come back later.
///   Without the header it is an ordinary failure for the caller to handle.
/// - Anything else, or after [`MAX_PUSHBACK_RETRIES`] retries: `None`.
pub fn pushback(status: u16, retry_after: Option<&str>, attempt: u32) -> Option<Duration> {
    if attempt >= MAX_PUSHBACK_RETRIES {
        return None;
    }
    let server = retry_after.and_then(parse_retry_after);
    let wait = match (status, server) {
        (429, Some(d)) | (503, Some(d)) => d,
        (429, None) => FIRST_PUSHBACK_BACKOFF.saturating_mul(1 << attempt.min(16)),
        _ => return None,
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn bucket(qps: f64, burst: u32) -> (TokenBucket, Instant) {
        let t0 = Instant::now();
        (
            TokenBucket::new(ApiLimits::new(qps, burst).unwrap(), t0),
            t0,
        )
    }

    #[test]
    fn limits_are_validated() {
        assert_eq!(ApiLimits::default(), ApiLimits::new(20.0, 30).unwrap());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(ApiLimits::new(bad, 1), Err(ApiLimitsError::Qps(_))),
                "{bad}"
            );
        }
        assert_eq!(ApiLimits::new(1.0, 0), Err(ApiLimitsError::Burst(0)));
        assert_eq!(ApiLimits::new(0.5, 1).unwrap().interval(), 2000 * MS);
        assert_eq!(ApiLimits::new(1e-12, 1).unwrap().interval(), MAX_INTERVAL);
    }

    #[test]
    fn burst_then_one_per_interval() {
        let (mut b, t0) = bucket(20.0, 30);
        for i in 0..30 {
            assert_eq!(b.try_take(t0), Ok(()), "request {i} of the burst");
        }
        assert_eq!(b.try_take(t0), Err(50 * MS));
        assert_eq!(b.try_take(t0 + 20 * MS), Err(30 * MS), "nothing was taken");
        assert_eq!(b.try_take(t0 + 50 * MS), Ok(()));
        assert_eq!(b.try_take(t0 + 50 * MS), Err(50 * MS));
        // Idle time refills the bucket, but never beyond the burst.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..30 {
            assert_eq!(b.try_take(later), Ok(()));
        }
        assert!(b.try_take(later).is_err());
    }

    #[test]
    fn n_requests_take_n_minus_burst_intervals() {
        // The relation the scale benchmark shows: time = (requests - burst) / qps.
        let (mut b, t0) = bucket(100.0, 10);
        let mut now = t0;
        for _ in 0..1000 {
            while let Err(wait) = b.try_take(now) {
                now += wait;
            }
        }
        assert_eq!(now - t0, Duration::from_millis(990 * 10));
    }

    #[test]
    fn a_pause_holds_every_request_and_empties_the_bucket() {
        let (mut b, t0) = bucket(10.0, 5);
        b.pause_until(t0 + Duration::from_secs(2));
        assert_eq!(b.try_take(t0), Err(Duration::from_secs(2)));
        let resume = t0 + Duration::from_secs(2);
        assert_eq!(b.try_take(resume), Ok(()));
        assert_eq!(b.try_take(resume), Err(100 * MS), "no burst after a pause");
        // A pause that ends before the next token changes nothing.
        let mut c = b.clone();
        c.pause_until(t0);
        assert_eq!(c.try_take(resume), Err(100 * MS));
    }

    #[test]
    fn pushback_honours_retry_after_with_a_cap() {
        let s = Duration::from_secs;
        assert_eq!(pushback(429, Some("3"), 0), Some(s(3)));
        assert_eq!(pushback(429, Some(" 0 "), 0), Some(s(0)));
        assert_eq!(pushback(429, Some("3600"), 0), Some(MAX_RETRY_AFTER));
        assert_eq!(pushback(503, Some("2"), 4), Some(s(2)));
        // 429 without (or with an unreadable) Retry-After: doubling backoff, capped.
        assert_eq!(pushback(429, None, 0), Some(s(1)));
        assert_eq!(pushback(429, Some("soon"), 2), Some(s(4)));
        assert_eq!(pushback(429, None, 9), Some(MAX_RETRY_AFTER));
        // Not pushback: a 503 without Retry-After, other codes, retries used up.
        assert_eq!(pushback(503, None, 0), None);
        assert_eq!(pushback(500, Some("1"), 0), None);
        assert_eq!(pushback(200, Some("1"), 0), None);
        assert_eq!(pushback(409, None, 0), None);
        assert_eq!(pushback(429, Some("1"), MAX_PUSHBACK_RETRIES), None);
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            None,
            "HTTP-date form"
        );
    }
}
