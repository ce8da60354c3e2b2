//! Reconnect backoff: exponential growth capped at `max`, with jitter so that many speakers
//! that lost the same router do not reconnect in lockstep. No clock inside: it hands out
//! durations and the caller sleeps.

use std::time::Duration;

/// How the delay is spread below the exponential ceiling `min(max, base * 2^n)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Jitter {
    /// "Full jitter": uniform in `[0, ceiling)`. Best spread; the default.
    #[default]
    Full,
    /// RFC 4271 §10: the ceiling times a factor uniform in `[0.75, 1.0)`. Never much shorter
    /// than the ceiling, at the cost of less spread.
    Rfc4271,
}

/// Exponential backoff with jitter. The ceiling doubles per [`next_delay`](Self::next_delay)
/// from `base` up to `max`; [`reset`](Self::reset) after a session got established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    /// Ceiling of the first delay.
    pub base: Duration,
    /// Upper bound of every delay.
    pub max: Duration,
    /// How the delay is spread below the ceiling.
    pub jitter: Jitter,
    attempt: u32,
}

impl Backoff {
    /// Full-jitter backoff from `base` up to `max`.
    #[must_use]
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            jitter: Jitter::Full,
            attempt: 0,
        }
    }

    /// The same backoff with another jitter.
    #[must_use]
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// Delays handed out since the last reset.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// The un-jittered bound of the next delay: `min(max, base * 2^attempts)`.
    #[must_use]
    pub fn ceiling(&self) -> Duration {
        // 2^31 doublings overflow any useful base anyway; checked_mul caps the rest.
        let factor = 1u32 << self.attempt.min(31);
        self.base
            .checked_mul(factor)
            .map_or(self.max, |d| d.min(self.max))
    }

    /// The next delay, using `random` (any uniformly distributed u64, e.g. from
    /// [`JitterRng`]) for the jitter. Never exceeds `max`.
    pub fn next_delay(&mut self, random: u64) -> Duration {
        let ceiling = nanos(self.ceiling());
        self.attempt = self.attempt.saturating_add(1);
        let delay = match self.jitter {
            Jitter::Full => scale(ceiling, random),
            Jitter::Rfc4271 => {
                let quarter = ceiling / 4;
                ceiling - quarter + scale(quarter, random)
            }
        };
        Duration::from_nanos(delay)
    }

    /// Back to `base` (after a successful session).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// `value * random / 2^64`, i.e. uniform in `[0, value)` for uniform `random`.
fn scale(value: u64, random: u64) -> u64 {
    let scaled = (u128::from(value) * u128::from(random)) >> 64;
    // < value, so it fits.
    u64::try_from(scaled).unwrap_or(value)
}

/// Nanoseconds, saturating at about 584 years.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The jitter generator: `fastrand`'s seeded wyrand (deterministic, not cryptographic; no
/// I/O, so the FSM stays pure). Seed it per peer (e.g. from the peer address and the process
/// start time) so speakers diverge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitterRng(fastrand::Rng);

impl JitterRng {
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(fastrand::Rng::with_seed(seed))
    }

    /// The next pseudo-random value.
    pub fn next_u64(&mut self) -> u64 {
        self.0.u64(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_secs(1);
    const MAX: Duration = Duration::from_secs(60);

    #[test]
    fn backoff_ceiling_doubles_until_max_then_stays() {
        let mut b = Backoff::new(BASE, MAX);
        let mut ceilings = Vec::new();
        for _ in 0..10 {
            ceilings.push(b.ceiling().as_secs());
            b.next_delay(0);
        }
        assert_eq!(ceilings, [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]);
        // Far past 2^31 attempts' worth of doubling: still capped, no overflow.
        for _ in 0..100 {
            b.next_delay(u64::MAX);
        }
        assert_eq!(b.ceiling(), MAX);
    }

    #[test]
    fn backoff_never_exceeds_max_with_either_jitter() {
        for jitter in [Jitter::Full, Jitter::Rfc4271] {
            let mut b = Backoff::new(BASE, MAX).with_jitter(jitter);
            let mut rng = JitterRng::new(42);
            for _ in 0..1000 {
                let ceiling = b.ceiling();
                let d = b.next_delay(rng.next_u64());
                assert!(d <= ceiling && d <= MAX, "{jitter:?}: {d:?} > {ceiling:?}");
            }
            assert!(b.next_delay(u64::MAX) <= MAX);
        }
    }

    #[test]
    fn full_jitter_spans_zero_to_ceiling() {
        let mut b = Backoff::new(BASE, MAX);
        assert_eq!(b.next_delay(0), Duration::ZERO);
        b.reset();
        let d = b.next_delay(u64::MAX);
        assert!(d < BASE && d > BASE.mul_f64(0.999), "{d:?}");
        b.reset();
        let half = b.next_delay(1 << 63);
        assert_eq!(half, BASE / 2);
    }

    #[test]
    fn rfc4271_jitter_stays_within_three_quarters_and_one_rfc4271_s10() {
        let mut b = Backoff::new(BASE * 4, MAX).with_jitter(Jitter::Rfc4271);
        assert_eq!(b.next_delay(0), Duration::from_secs(3));
        b.reset();
        let d = b.next_delay(u64::MAX);
        assert!(d < BASE * 4 && d >= Duration::from_secs(3), "{d:?}");
    }

    #[test]
    fn backoff_delays_grow_on_average_until_max() {
        // Mean of many full-jitter runs per attempt is ceiling/2: rising, then flat at max/2.
        let mut rng = JitterRng::new(7);
        let runs = 2000u32;
        let mut sums = vec![Duration::ZERO; 9];
        for _ in 0..runs {
            let mut b = Backoff::new(BASE, MAX);
            for sum in &mut sums {
                *sum += b.next_delay(rng.next_u64());
            }
        }
        let means: Vec<f64> = sums.iter().map(|s| (*s / runs).as_secs_f64()).collect();
        for pair in means.windows(2).take(6) {
            assert!(pair[1] > pair[0], "{means:?}");
        }
        for mean in &means[6..] {
            assert!((mean - 30.0).abs() < 2.0, "{means:?}");
        }
    }

    #[test]
    fn backoff_reset_returns_to_base() {
        let mut b = Backoff::new(BASE, MAX);
        for _ in 0..8 {
            b.next_delay(1);
        }
        assert_eq!(b.attempts(), 8);
        b.reset();
        assert_eq!(b.attempts(), 0);
        assert_eq!(b.ceiling(), BASE);
        assert!(b.next_delay(u64::MAX) < BASE);
    }

    #[test]
    fn base_above_max_is_capped_at_max() {
        let mut b = Backoff::new(MAX * 2, MAX);
        assert_eq!(b.ceiling(), MAX);
        assert!(b.next_delay(u64::MAX) <= MAX);
    }

    #[test]
    fn jitter_rng_is_deterministic_per_seed_even_zero() {
        let a: Vec<u64> = {
            let mut r = JitterRng::new(1);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let mut r = JitterRng::new(1);
        assert_eq!(a, (0..4).map(|_| r.next_u64()).collect::<Vec<_>>());
        let mut z = JitterRng::new(0);
        assert_ne!(z.next_u64(), 0);
    }
}
