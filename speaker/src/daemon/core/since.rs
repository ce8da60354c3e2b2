//! The start of a period that the core times from its ticks (a drain's graceful-shutdown
//! wait, a gate's hold-down): shared by the Service datapath gate and the forwarding gate.

use std::time::Duration;

/// The start of a period (a drain's graceful-shutdown wait, a gate's hold-down). The core's
/// clock is the last tick's, up to a tick behind an event that arrives between ticks: a period
/// starting at such an event counts from the next tick, so it lasts at least what was asked
/// (at most a tick more), never up to a tick less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Since {
    NextTick,
    At(Duration),
}

impl Since {
    /// On a tick: a period that started since the last one starts now.
    pub(super) fn stamp(&mut self, now: Duration) {
        if *self == Since::NextTick {
            *self = Since::At(now);
        }
    }

    /// Whether `period` has passed by `now`.
    pub(super) fn over(self, now: Duration, period: Duration) -> bool {
        match self {
            Since::NextTick => false,
            Since::At(t) => now.saturating_sub(t) >= period,
        }
    }
}
