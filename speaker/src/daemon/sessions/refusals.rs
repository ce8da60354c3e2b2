//! The log of connections a BGP listener refuses (a source that is no configured peer):
//! anything that reaches the node may connect, so each refusal cannot be a WARN line. The
//! first refusal of a period is logged with its source; the rest of the period are counted
//! and said with the next line (or when the period ends), with how many sources they came
//! from. No clock inside: the caller passes the time.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// One WARN line per period at most.
pub(super) const PERIOD: Duration = Duration::from_secs(10);
/// Distinct sources remembered per period (the count goes on past it).
const SOURCES: usize = 1024;

/// What to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RefusalLine {
    /// A refusal, and how many were not logged since the last line.
    Refused {
        from: IpAddr,
        suppressed: u64,
        sources: usize,
    },
    /// The period ended with refusals that were not logged.
    Suppressed { count: u64, sources: usize },
}

#[derive(Debug, Default)]
pub(super) struct RefusalLog {
    logged_at: Option<Instant>,
    suppressed: u64,
    sources: BTreeSet<IpAddr>,
}

impl RefusalLog {
    /// A connection from `from` was refused at `now`: the line to log, if any.
    pub(super) fn refused(&mut self, now: Instant, from: IpAddr) -> Option<RefusalLine> {
        let due = self
            .logged_at
            .is_none_or(|t| now.saturating_duration_since(t) >= PERIOD);
        if !due {
            self.suppressed += 1;
            if self.sources.len() < SOURCES {
                self.sources.insert(from);
            }
            return None;
        }
        self.logged_at = Some(now);
        let line = RefusalLine::Refused {
            from,
            suppressed: self.suppressed,
            sources: self.sources.len(),
        };
        self.suppressed = 0;
        self.sources.clear();
        Some(line)
    }

    /// At `now`, with no refusal: the count of a period that ended unsaid, if any.
    pub(super) fn flush(&mut self, now: Instant) -> Option<RefusalLine> {
        let ended = self
            .logged_at
            .is_some_and(|t| now.saturating_duration_since(t) >= PERIOD);
        if !ended || self.suppressed == 0 {
            return None;
        }
        let line = RefusalLine::Suppressed {
            count: self.suppressed,
            sources: self.sources.len(),
        };
        self.logged_at = Some(now);
        self.suppressed = 0;
        self.sources.clear();
        Some(line)
    }
}

/// Logs `line` at WARN.
pub(super) fn log(line: RefusalLine) {
    match line {
        RefusalLine::Refused {
            from,
            suppressed: 0,
            ..
        } => {
            tracing::warn!(%from, "connection from an unconfigured address refused");
        }
        RefusalLine::Refused {
            from,
            suppressed,
            sources,
        } => {
            tracing::warn!(%from, suppressed, sources, "connection from an unconfigured address refused ({suppressed} more refused since the last line, from {sources} addresses, not logged one by one)");
        }
        RefusalLine::Suppressed { count, sources } => {
            tracing::warn!(
                suppressed = count,
                sources,
                "{count} connections from unconfigured addresses refused (from {sources} addresses), not logged one by one"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([198, 18, 0, n])
    }

    /// A flood from any host that reaches the node is one line per period, with the count.
    #[test]
    fn a_refusal_flood_is_one_line_per_period_with_what_was_suppressed() {
        let t0 = Instant::now();
        let mut log = RefusalLog::default();
        assert_eq!(
            log.refused(t0, ip(1)),
            Some(RefusalLine::Refused {
                from: ip(1),
                suppressed: 0,
                sources: 0
            })
        );
        let lines = (0..10_000u32)
            .filter_map(|i| {
                let at = t0 + Duration::from_millis(u64::from(i) % 9_000);
                log.refused(at, ip(u8::try_from(i % 7).unwrap() + 2))
            })
            .count();
        assert_eq!(lines, 0, "within the period nothing more is logged");
        assert_eq!(log.flush(t0 + Duration::from_secs(9)), None);
        assert_eq!(
            log.refused(t0 + PERIOD, ip(9)),
            Some(RefusalLine::Refused {
                from: ip(9),
                suppressed: 10_000,
                sources: 7
            })
        );
    }

    #[test]
    fn refusals_that_stop_are_counted_when_the_period_ends() {
        let t0 = Instant::now();
        let mut log = RefusalLog::default();
        log.refused(t0, ip(1));
        log.refused(t0 + Duration::from_secs(1), ip(2));
        log.refused(t0 + Duration::from_secs(2), ip(2));
        assert_eq!(
            log.flush(t0 + PERIOD),
            Some(RefusalLine::Suppressed {
                count: 2,
                sources: 1
            })
        );
        assert_eq!(log.flush(t0 + PERIOD * 3), None, "said once");
    }
}
