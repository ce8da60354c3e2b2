//! BFD flap dampening, pure: how long BGP stays down after a BFD failure, from the peer's
//! recent failures (RFC 5882 §3.1, hiding rapid Up/Down/Up transitions from the client;
//! modelled on RFC 4271 §8.1.1 DampPeerOscillations, whose IdleHoldTimer the BGP session
//! runs: `bgp_proto::session::BfdInput::HoldDown`).
//!
//! A lossy optic that drops a detection time's worth of packets now and then would
//! otherwise reset BGP at every flap, and each reset withdraws and re-announces the node's
//! CIDRs across the fabric. The rules:
//!
//! - the first failure after a quiet period holds nothing: BGP reconnects at once (a single
//!   cut or ToR reboot recovers as fast as before);
//! - each further failure doubles the hold-down, from [`HOLD_DOWN_BASE`] up to
//!   [`HOLD_DOWN_MAX`];
//! - each [`STABLE_PERIOD`] without a failure forgets one of them, so the hold-down halves;
//! - a hold-down is a timer, never a wait for BFD: BGP comes back when it ends, whatever BFD
//!   does (the stranded session the gate must never make), and one running is not extended.

use std::time::Duration;

/// The hold-down after the second failure within [`STABLE_PERIOD`]s of each other.
pub const HOLD_DOWN_BASE: Duration = Duration::from_secs(5);
/// The longest hold-down: a flapping path still gets BGP back at least this often.
pub const HOLD_DOWN_MAX: Duration = Duration::from_secs(120);
/// Without a failure for this long, one remembered failure is forgotten.
pub const STABLE_PERIOD: Duration = Duration::from_secs(300);

/// Failures remembered at most: enough for [`HOLD_DOWN_MAX`]; more would only make the
/// decay back to zero slower.
const MAX_FLAPS: u32 = 2 + (HOLD_DOWN_MAX.as_secs() / HOLD_DOWN_BASE.as_secs()).ilog2() + 1;

/// One peer's recent BFD failures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flaps {
    /// Failures remembered (after decay, as of `last`).
    count: u32,
    /// Monotonic time of the last failure.
    last: Option<Duration>,
    /// Monotonic time the last hold-down ends.
    held_until: Option<Duration>,
}

impl Flaps {
    /// A BFD failure (Up → Down) at `now`: the hold-down BGP waits before it reconnects,
    /// or `None` for none: the first failure after a quiet period, or one while a hold-down
    /// runs (counted, but the running hold-down is not extended).
    pub fn failed(&mut self, now: Duration) -> Option<Duration> {
        self.count = (self.remembered(now) + 1).min(MAX_FLAPS);
        self.last = Some(now);
        let hold = hold_down(self.count);
        if hold.is_zero() || self.held_until(now).is_some() {
            return None;
        }
        self.held_until = Some(now + hold);
        Some(hold)
    }

    /// When the running hold-down ends (`None`: none runs at `now`).
    pub fn held_until(&self, now: Duration) -> Option<Duration> {
        self.held_until.filter(|&until| now < until)
    }

    /// Failures still remembered at `now`.
    pub fn remembered(&self, now: Duration) -> u32 {
        let Some(last) = self.last else { return 0 };
        let quiet = now.saturating_sub(last).as_secs() / STABLE_PERIOD.as_secs();
        self.count
            .saturating_sub(u32::try_from(quiet).unwrap_or(u32::MAX))
    }
}

/// The hold-down after the `n`th remembered failure.
pub fn hold_down(n: u32) -> Duration {
    let Some(doublings) = n.checked_sub(2) else {
        return Duration::ZERO;
    };
    HOLD_DOWN_BASE
        .checked_mul(2u32.saturating_pow(doublings))
        .unwrap_or(HOLD_DOWN_MAX)
        .min(HOLD_DOWN_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    /// The hold-down of each failure at `times` (seconds), 0 for none.
    fn holds(f: &mut Flaps, times: impl IntoIterator<Item = u64>) -> Vec<u64> {
        times
            .into_iter()
            .map(|t| {
                f.failed(S * u32::try_from(t).unwrap())
                    .map_or(0, |h| h.as_secs())
            })
            .collect()
    }

    #[test]
    fn first_failure_after_a_quiet_period_holds_nothing_rfc5882_3_1() {
        let mut f = Flaps::default();
        assert_eq!(f.failed(100 * S), None);
        // A whole quiet period later, it is a first failure again.
        assert_eq!(f.failed(100 * S + STABLE_PERIOD), None);
    }

    #[test]
    fn flaps_grow_the_hold_down_exponentially_up_to_its_bound_rfc5882_3_1() {
        // One flap every 200 s (each after the hold-down before it ended).
        let mut f = Flaps::default();
        let got = holds(&mut f, (0..10).map(|i| 200 * i));
        assert_eq!(got, [0, 5, 10, 20, 40, 80, 120, 120, 120, 120]);
    }

    #[test]
    fn a_running_hold_down_is_never_extended_rfc5882_3_1() {
        // Flaps every 2 s: each hold-down runs to its end; the flaps during it count.
        let mut f = Flaps::default();
        let got = holds(&mut f, (0..12).map(|i| 2 * i));
        assert_eq!(got, [0, 5, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(f.held_until(8 * S), Some(48 * S));
        assert_eq!(f.held_until(48 * S), None);
    }

    #[test]
    fn hold_down_decays_after_stable_periods_rfc5882_3_1() {
        let mut f = Flaps::default();
        let mut t = Duration::ZERO;
        for _ in 0..20 {
            f.failed(t);
            t += 200 * S;
        }
        assert_eq!(hold_down(f.remembered(t)), HOLD_DOWN_MAX);
        // Each stable period forgets one failure: the next hold-down shrinks step by step.
        let next = |mut f: Flaps, at| f.failed(at);
        assert_eq!(next(f, t + STABLE_PERIOD), Some(HOLD_DOWN_MAX));
        assert_eq!(next(f, t + 2 * STABLE_PERIOD), Some(80 * S));
        assert_eq!(next(f, t + 3 * STABLE_PERIOD), Some(40 * S));
        // Stable long enough, and every failure is forgotten.
        assert_eq!(f.remembered(t + 10 * STABLE_PERIOD), 0);
        assert_eq!(next(f, t + 10 * STABLE_PERIOD), None);
    }

    #[test]
    fn never_stranded_every_hold_down_is_bounded_and_ends_rfc5882_3_1() {
        // Failures at any spacing, however many: each hold-down is a finite timer no longer
        // than the bound, so BGP gets back at least every HOLD_DOWN_MAX.
        for spacing in [0, 1, 7, 60, 119, 121, 299, 301, 3600] {
            let mut f = Flaps::default();
            for i in 0..1000u32 {
                let now = S * (spacing * i);
                if let Some(h) = f.failed(now) {
                    assert!(h <= HOLD_DOWN_MAX, "spacing {spacing}: {h:?}");
                }
                let until = f.held_until(now).unwrap_or(now);
                assert!(until <= now + HOLD_DOWN_MAX, "spacing {spacing}");
            }
        }
        assert_eq!(hold_down(u32::MAX), HOLD_DOWN_MAX);
    }
}
