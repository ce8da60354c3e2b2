//! Packet loss of a paced UDP stream, from what was sent and what arrived (pure: the
//! data-plane bench feeds it send times and received sequence numbers).

/// What one run lost.
#[derive(Debug, Clone, PartialEq)]
pub struct LossReport {
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    /// `lost × interval`: the time the stream was dark, counted in packets.
    pub lost_ms: f64,
    /// From the send time of the first lost packet to that of the last, plus one interval:
    /// how long something was lost. Larger than `lost_ms` when only some flows (one ECMP
    /// leg) lost packets. 0 without loss.
    pub window_ms: f64,
    /// Groups of losses separated by more than `EPISODE_GAP_NS` without any.
    pub episodes: u32,
    /// Lost packets sent before `event_ns` (the warm-up): a harness or set-up problem.
    pub lost_before_event: u64,
}

/// Losses further apart than this are separate episodes.
pub const EPISODE_GAP_NS: u64 = 100_000_000;

/// `sent_at[seq]`: send time (ns from the stream's start) of packet `seq`; `received`:
/// the sequence numbers that arrived (any order, duplicates allowed); `interval_ns`: the
/// pacing; `event_ns`: when the scenario's fault happened (same clock).
pub fn analyse(sent_at: &[u64], received: &[u64], interval_ns: u64, event_ns: u64) -> LossReport {
    let mut got = vec![false; sent_at.len()];
    for &s in received {
        if let Some(g) = usize::try_from(s).ok().and_then(|i| got.get_mut(i)) {
            *g = true;
        }
    }
    let mut lost = 0u64;
    let mut before = 0u64;
    let mut first: Option<u64> = None;
    let mut last: Option<u64> = None;
    let mut episodes = 0u32;
    for (seq, &at) in sent_at.iter().enumerate() {
        if got[seq] {
            continue;
        }
        lost += 1;
        if at < event_ns {
            before += 1;
        }
        if last.is_none_or(|l| at.saturating_sub(l) > EPISODE_GAP_NS) {
            episodes += 1;
        }
        first.get_or_insert(at);
        last = Some(at);
    }
    let received = got.iter().filter(|g| **g).count() as u64;
    let ms = |ns: u64| ns as f64 / 1e6;
    LossReport {
        sent: sent_at.len() as u64,
        received,
        lost,
        lost_ms: ms(lost * interval_ns),
        window_ms: match (first, last) {
            (Some(f), Some(l)) => ms(l - f + interval_ns),
            _ => 0.0,
        },
        episodes,
        lost_before_event: before,
    }
}

/// The median (mean of the two middle values for an even count) and the maximum of `v`;
/// `None` when empty.
pub fn median_max(v: &[f64]) -> Option<(f64, f64)> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let max = *s.last()?;
    let mid = if n.is_multiple_of(2) {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    } else {
        s[n / 2]
    };
    Some((mid, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn paced(n: u64) -> Vec<u64> {
        (0..n).map(|i| i * MS).collect()
    }

    #[test]
    fn nothing_lost_is_zero_everywhere() {
        let r = analyse(&paced(100), &(0..100).collect::<Vec<_>>(), MS, 10 * MS);
        assert_eq!(
            (r.lost, r.lost_ms, r.window_ms, r.episodes),
            (0, 0.0, 0.0, 0)
        );
        assert_eq!(r.received, 100);
    }

    #[test]
    fn a_dark_stretch_counts_packets_times_interval_and_its_span() {
        // 40..60 never arrive: 20 packets, 20 ms, one episode.
        let rx: Vec<u64> = (0..40).chain(60..100).collect();
        let r = analyse(&paced(100), &rx, MS, 30 * MS);
        assert_eq!((r.lost, r.episodes, r.lost_before_event), (20, 1, 0));
        assert_eq!((r.lost_ms, r.window_ms), (20.0, 20.0));
    }

    #[test]
    fn one_dead_leg_of_two_loses_half_the_packets_over_the_whole_window() {
        // Every odd packet (the flows hashed to the dead leg) lost for 100 ms.
        let rx: Vec<u64> = (0..1000)
            .filter(|s| !(200..300).contains(s) || s % 2 == 0)
            .collect();
        let r = analyse(&paced(1000), &rx, MS, 150 * MS);
        assert_eq!(r.lost, 50);
        assert_eq!(r.lost_ms, 50.0);
        assert_eq!(r.window_ms, 99.0);
        assert_eq!(r.episodes, 1);
    }

    #[test]
    fn losses_far_apart_are_separate_episodes_and_warm_up_losses_are_flagged() {
        let rx: Vec<u64> = (0..1000).filter(|s| ![5, 500, 501].contains(s)).collect();
        let r = analyse(&paced(1000), &rx, MS, 100 * MS);
        assert_eq!((r.lost, r.episodes, r.lost_before_event), (3, 2, 1));
    }

    #[test]
    fn duplicates_and_unknown_sequence_numbers_do_not_count_as_received() {
        let r = analyse(&paced(4), &[0, 0, 1, 1, 99], MS, 0);
        assert_eq!((r.received, r.lost), (2, 2));
    }

    #[test]
    fn median_is_the_middle_or_the_mean_of_the_two_middles_and_max_the_largest() {
        assert_eq!(median_max(&[3.0, 1.0, 2.0]), Some((2.0, 3.0)));
        assert_eq!(median_max(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 4.0)));
        assert_eq!(median_max(&[]), None);
    }
}
