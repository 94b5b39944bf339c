//! Time-weighted gauges: what the autoscaler and the recording average, and
//! the whole-run Little's-law totals per component.

use stormbreak_policy::Nanos;

/// A time-weighted average of an integer gauge, reset at each read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Avg {
    area: f64,
    last: Nanos,
    since: Nanos,
}

impl Avg {
    /// An average starting at `now`.
    pub(crate) fn starting(now: Nanos) -> Avg {
        Avg {
            area: 0.0,
            last: now,
            since: now,
        }
    }

    /// The gauge is about to change from `level`.
    #[inline]
    pub(crate) fn touch(&mut self, now: Nanos, level: u32) {
        self.area += level as f64 * (now - self.last).as_nanos() as f64;
        self.last = now;
    }

    /// The average since the last read; starts a new period.
    pub(crate) fn take(&mut self, now: Nanos, level: u32) -> f64 {
        self.touch(now, level);
        let span = now.saturating_sub(self.since);
        let v = if span == Nanos::ZERO {
            0.0
        } else {
            self.area / span.as_nanos() as f64
        };
        self.area = 0.0;
        self.since = now;
        v
    }
}

/// Whole-run accounting for Little's law per component: the time integral
/// of attempts present, their total sojourn, and departures.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Little {
    present: u64,
    area: f64,
    last: Nanos,
    sojourn: f64,
    departures: u64,
}

impl Little {
    #[inline]
    pub(crate) fn arrive(&mut self, now: Nanos) {
        self.advance(now);
        self.present += 1;
    }

    #[inline]
    pub(crate) fn depart(&mut self, now: Nanos, sojourn: Nanos) {
        self.advance(now);
        self.present -= 1;
        self.sojourn += sojourn.as_nanos() as f64;
        self.departures += 1;
    }

    /// Attempts present now.
    #[inline]
    pub(crate) fn present(&self) -> u64 {
        self.present
    }

    /// The run's totals at its end, `end`.
    pub(crate) fn totals(&mut self, end: Nanos) -> crate::record::LittleTotals {
        self.advance(end);
        let secs = end.as_nanos() as f64 / 1e9;
        crate::record::LittleTotals {
            mean_in_system: if end == Nanos::ZERO {
                0.0
            } else {
                self.area / end.as_nanos() as f64
            },
            throughput_per_s: self.departures as f64 / secs,
            mean_sojourn_s: if self.departures == 0 {
                0.0
            } else {
                self.sojourn / self.departures as f64 / 1e9
            },
        }
    }

    #[inline]
    fn advance(&mut self, now: Nanos) {
        self.area += self.present as f64 * (now - self.last).as_nanos() as f64;
        self.last = now;
    }
}
