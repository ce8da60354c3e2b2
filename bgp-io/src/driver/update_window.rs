//! RFC 7606 errors in received UPDATEs, summarised for logs and events: a peer that sends
//! malformed UPDATEs in a loop must not turn each one into a log line.

use std::collections::BTreeMap;
use std::time::Duration;

use bgp_proto::error::DecodeError;
use tokio::time::Instant;

/// At most one `SessionEvent::UpdateErrors` per session per interval: the first error is
/// reported at once, later ones summed up at the end of the interval.
pub const UPDATE_ERROR_EVENT_INTERVAL: Duration = Duration::from_secs(10);

/// What one event reports: errors per [`DecodeError::kind`] since the last event, and the
/// first one's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Summary {
    pub counts: BTreeMap<&'static str, u64>,
    pub example: String,
}

#[derive(Debug, Default)]
pub(super) struct UpdateErrorWindow {
    counts: BTreeMap<&'static str, u64>,
    example: Option<String>,
    /// End of the current window; `None`: the next error is reported at once.
    deadline: Option<Instant>,
}

impl UpdateErrorWindow {
    /// Counts `errors`; returns a summary to report now when no window is open.
    pub fn record(&mut self, errors: &[DecodeError], now: Instant) -> Option<Summary> {
        for e in errors {
            *self.counts.entry(e.kind()).or_default() += 1;
            if self.example.is_none() {
                self.example = Some(e.to_string());
            }
        }
        if self.deadline.is_some() {
            return None;
        }
        let summary = self.take();
        if summary.is_some() {
            self.deadline = Some(now + UPDATE_ERROR_EVENT_INTERVAL);
        }
        summary
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The window ended: what it collected, if anything. Only a non-empty window opens the
    /// next one, so a quiet peer's next error is again reported at once.
    pub fn expire(&mut self, now: Instant) -> Option<Summary> {
        let summary = self.take();
        self.deadline = summary.is_some().then(|| now + UPDATE_ERROR_EVENT_INTERVAL);
        summary
    }

    fn take(&mut self) -> Option<Summary> {
        if self.counts.is_empty() {
            return None;
        }
        Some(Summary {
            counts: std::mem::take(&mut self.counts),
            example: self.example.take().unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn missing_origin() -> DecodeError {
        DecodeError::MissingWellKnownAttribute { type_code: 1 }
    }

    #[test]
    fn first_error_at_once_then_one_summary_per_interval() {
        let t0 = Instant::now();
        let mut w = UpdateErrorWindow::default();
        let first = w.record(&[missing_origin()], t0).unwrap();
        assert_eq!(first.counts.get("missing-well-known-attribute"), Some(&1));
        assert_eq!(first.example, missing_origin().to_string());
        for _ in 0..999 {
            assert_eq!(w.record(&[missing_origin()], t0), None);
        }
        assert_eq!(w.deadline(), Some(t0 + UPDATE_ERROR_EVENT_INTERVAL));
        let later = w.expire(t0 + UPDATE_ERROR_EVENT_INTERVAL).unwrap();
        assert_eq!(later.counts.get("missing-well-known-attribute"), Some(&999));
        // A quiet window closes; the next error is reported at once again.
        let t1 = t0 + 2 * UPDATE_ERROR_EVENT_INTERVAL;
        assert_eq!(w.expire(t1), None);
        assert_eq!(w.deadline(), None);
        assert!(w.record(&[missing_origin()], t1).is_some());
    }
}
