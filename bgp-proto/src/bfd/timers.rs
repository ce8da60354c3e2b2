//! Timer arithmetic of planned stops, pure: the stretched detection time of a handover
//! (RFC 5882 §4.3) and how long AdminDown is repeated (RFC 5880 §6.8.16).

use std::time::Duration;

/// The largest Detect Mult the field holds.
pub const MAX_DETECT_MULT: u8 = 255;

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// What a handover announces: Desired Min TX and Detect Mult such that the peer's
/// detection time (our multiplier × the slower of that interval and `floor`, the peer's
/// Required Min RX and our configured Desired Min TX) is at least `window` and as close
/// to it as the fields allow. The multiplier stays within `configured..=255` and is as
/// large as possible, which keeps the interval nearest the configured one. A window that
/// the configured timers already cover changes nothing.
pub fn handover_timers(window: Duration, floor: Duration, configured: u8) -> (Duration, u8) {
    let configured = configured.max(1);
    let (w, f) = (micros(window), micros(floor).max(1));
    if u64::from(configured).saturating_mul(f) >= w {
        return (floor, configured);
    }
    // configured × f < w, so w / f ≥ configured.
    let mult = (w / f).min(u64::from(MAX_DETECT_MULT));
    let interval = w.div_ceil(mult).max(f);
    let mult = u8::try_from(mult).unwrap_or(MAX_DETECT_MULT);
    // The wire field is 32 bits of microseconds.
    let interval = interval.min(u64::from(u32::MAX));
    (Duration::from_micros(interval), mult)
}

/// How many AdminDown packets a planned stop sends, one per `interval`: enough to span the
/// peer's detection time of us (`detect_mult` × `interval`, RFC 5880 §6.8.16 "for at least
/// a Detection Time"), so a lost packet cannot turn the stop into a timeout; but no longer
/// than `limit`, since a stop must end. At least one.
pub fn admin_down_packets(interval: Duration, detect_mult: u8, limit: Duration) -> usize {
    let interval = micros(interval).max(1);
    let spans = u64::from(detect_mult).min(micros(limit) / interval);
    usize::try_from(spans).unwrap_or(usize::MAX) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn handover_detection_time_is_the_restart_window_rfc5882_4_3() {
        let s = Duration::from_secs;
        // (window, floor, configured mult) → (interval, mult)
        let rows = [
            // 120 s at 300 ms: 255 × 470.589 ms, 195 µs over.
            ((s(120), ms(300), 3), (Duration::from_micros(470_589), 255)),
            // 60 s at 300 ms: under 255 × 300 ms (76.5 s), so the multiplier gives.
            ((s(60), ms(300), 3), (ms(300), 200)),
            // 10 s at 300 ms: 33 × 303.031 ms.
            ((s(10), ms(300), 3), (Duration::from_micros(303_031), 33)),
            // 25.5 s at 100 ms: exactly 255 × 100 ms.
            ((ms(25_500), ms(100), 3), (ms(100), 255)),
            // The configured detection time is already longer: nothing changes.
            ((s(1), ms(300), 5), (ms(300), 5)),
            ((ms(900), ms(300), 3), (ms(300), 3)),
            // The peer's slow Required Min RX is the floor.
            ((s(120), s(1), 3), (s(1), 120)),
            // A multiplier of 0 is treated as 1.
            ((s(2), ms(300), 0), (Duration::from_micros(333_334), 6)),
            // The longest restart time (4095 s) at the longest interval (60 s).
            ((s(4095), s(60), 3), (Duration::from_micros(60_220_589), 68)),
        ];
        for ((window, floor, mult), want) in rows {
            let got = handover_timers(window, floor, mult);
            assert_eq!(got, want, "window {window:?} floor {floor:?} mult {mult}");
            let detect = got.0 * u32::from(got.1);
            assert!(detect >= window, "{detect:?} < {window:?}");
            assert!(got.1 >= mult, "never below the configured multiplier");
            assert!(got.0 >= floor, "never faster than the floor");
        }
    }

    #[test]
    fn handover_detection_time_bounds_hold_for_every_window_rfc5882_4_3() {
        for secs in 1..=4095u64 {
            let window = Duration::from_secs(secs);
            for (floor, mult) in [(ms(10), 1), (ms(100), 3), (ms(300), 3), (s60(), 255)] {
                let (interval, m) = handover_timers(window, floor, mult);
                let detect = interval * u32::from(m);
                let normal = floor * u32::from(mult);
                // At least the window; over it only by the µs rounding, or because the
                // longest stretch (255 × floor) or the normal detection time is longer.
                assert!(detect >= window);
                let exact = detect - window < Duration::from_micros(u64::from(m));
                assert!(
                    exact || interval == floor,
                    "{window:?} {floor:?}×{mult}: {interval:?}×{m}"
                );
                assert!(detect <= window.max(normal) + Duration::from_micros(255));
            }
        }
    }

    fn s60() -> Duration {
        Duration::from_secs(60)
    }

    #[test]
    fn admin_down_spans_a_detection_time_rfc5880_6_8_16() {
        let limit = Duration::from_secs(3);
        // (interval, multiplier) → packets
        let rows = [
            ((ms(300), 3), 4),
            ((ms(100), 3), 4),
            ((ms(100), 10), 11),
            ((ms(50), 1), 2),
            // Bounded: 3 s of 300 ms gaps.
            ((ms(300), 50), 11),
            ((ms(300), 255), 11),
            // An interval over the limit still sends once.
            ((s60(), 3), 1),
        ];
        for ((interval, mult), want) in rows {
            let n = admin_down_packets(interval, mult, limit);
            assert_eq!(n, want, "{interval:?} × {mult}");
            let span = interval * u32::try_from(n - 1).unwrap();
            assert!(span <= limit);
            assert!(span >= (interval * u32::from(mult)).min(limit.saturating_sub(interval)));
        }
    }
}
