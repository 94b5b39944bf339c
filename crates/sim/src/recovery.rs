//! When a path degraded and when it recovered, read from its trailing
//! windows: one definition for the replay's per-path table, the per-route
//! recovery tables of `simulate` and `lab`, and `stormbreak probe`'s live
//! timeline, so a predicted and an observed recovery are the same figure.
//!
//! A run is recorded in fixed intervals; at the end of each interval one
//! trailing window (the last `window` intervals, shorter at the run's
//! start) is judged against the SLO: [`WindowState::Good`],
//! [`WindowState::Bad`], or [`WindowState::Unknown`] when the window could
//! not be judged (a live probe saw too few samples, or was asked to pause).
//!
//! * **Degraded at**: the end of the first bad window.
//! * **Recovered at**: the start of the final stretch of good windows,
//!   that is, the start of the first good window after the last window that
//!   was not good (`None` if the path was never bad, or if the last window
//!   is not good). An unknown window is never counted as up.
//! * **Confirmed at** (hysteresis, as Gatus's `success-threshold`): the end
//!   of the `n`-th back-to-back full window of that final stretch, when the
//!   run lasted that long.
//!
//! ```
//! use stormbreak_policy::Nanos;
//! use stormbreak_sim::recovery::{WindowState::*, read};
//! // 10 s intervals, 30 s windows.
//! let states = [Good, Bad, Bad, Bad, Bad, Unknown, Good, Good, Good, Good, Good, Good];
//! let r = read(&states, Nanos::from_secs(10), 3);
//! assert_eq!(r.degraded_at_s, Some(20.0));
//! // The first good window after the unknown one ends at 70 s and spans 30 s.
//! assert_eq!(r.recovered_at_s, Some(40.0));
//! assert_eq!(r.confirmed_at_s(1), Some(70.0));
//! assert_eq!(r.confirmed_at_s(2), Some(100.0));
//! assert_eq!(r.confirmed_at_s(3), None, "the run ended at 120 s");
//! ```

use serde::Serialize;
use stormbreak_policy::Nanos;

/// How one trailing window measured up to its SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowState {
    /// Judged, within the SLO.
    Good,
    /// Judged, outside the SLO.
    Bad,
    /// Not judged: too few samples, or too much of it paused.
    Unknown,
}

/// A path's degradation and recovery, as [`read`] finds them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recovery {
    /// Seconds from the run's start to the end of the first bad window.
    pub degraded_at_s: Option<f64>,
    /// Seconds from the run's start to the start of the final stretch of
    /// good windows (`None`: never bad, or not good at the end).
    pub recovered_at_s: Option<f64>,
    /// Seconds from the run's start to the end of the first window of the
    /// final good stretch, and the run's length, for [`Recovery::confirmed_at_s`].
    first_good_end_s: Option<f64>,
    run_end_s: f64,
    window_s: f64,
}

impl Recovery {
    /// When `n` (≥ 1) back-to-back full windows of the final good stretch
    /// had been seen, or `None` if the run ended first (or never recovered).
    pub fn confirmed_at_s(&self, n: u32) -> Option<f64> {
        let first = self.first_good_end_s?;
        let at = first + f64::from(n.max(1) - 1) * self.window_s;
        (at <= self.run_end_s + 1e-9).then_some(at)
    }
}

/// Reads degradation and recovery from `states`, one per interval of
/// length `interval`, each the state of the trailing window of `window`
/// intervals ending there.
pub fn read(states: &[WindowState], interval: Nanos, window: usize) -> Recovery {
    let iv = interval.max(Nanos::NANOSECOND);
    // The replay's arithmetic, kept exactly (its outputs are compared
    // byte for byte): an interval's end in whole nanoseconds, then seconds.
    let secs = |i: usize| ((i + 1) as u64 * iv).as_nanos() as f64 / 1e9;
    let window_s = (window as u64 * iv).as_nanos() as f64 / 1e9;
    let first_bad = states.iter().position(|&s| s == WindowState::Bad);
    let last_not_good = states.iter().rposition(|&s| s != WindowState::Good);
    let (recovered_at_s, first_good_end_s) = match (first_bad, last_not_good) {
        (None, _) | (_, None) => (None, None),
        (Some(_), Some(i)) if i + 1 >= states.len() => (None, None),
        // The first good window after the last one that was not good
        // covers the `window` before its end: recovery began then.
        (Some(_), Some(i)) => (Some(secs(i + 1) - window_s), Some(secs(i + 1))),
    };
    Recovery {
        degraded_at_s: first_bad.map(secs),
        recovered_at_s,
        first_good_end_s,
        run_end_s: if states.is_empty() {
            0.0
        } else {
            secs(states.len() - 1)
        },
        window_s,
    }
}

#[cfg(test)]
mod tests {
    use super::WindowState::*;
    use super::*;

    const TEN: Nanos = Nanos::from_secs(10);

    #[test]
    fn a_path_never_bad_has_neither_time() {
        let r = read(&[Good, Unknown, Good], TEN, 3);
        assert_eq!((r.degraded_at_s, r.recovered_at_s), (None, None));
        assert_eq!(r.confirmed_at_s(1), None);
        assert_eq!(read(&[], TEN, 3).degraded_at_s, None);
    }

    #[test]
    fn a_path_bad_or_unknown_at_the_end_has_not_recovered() {
        let r = read(&[Good, Bad, Good, Bad], TEN, 1);
        assert_eq!(r.degraded_at_s, Some(20.0));
        assert_eq!(r.recovered_at_s, None);
        let r = read(&[Bad, Good, Unknown], TEN, 1);
        assert_eq!(r.recovered_at_s, None, "unknown is never up");
    }

    #[test]
    fn recovery_starts_at_the_first_good_window_after_the_last_bad_one() {
        // Window of one interval: recovery is the end of the last bad one.
        let r = read(&[Bad, Bad, Good, Bad, Good, Good], TEN, 1);
        assert_eq!(r.degraded_at_s, Some(10.0));
        assert_eq!(r.recovered_at_s, Some(40.0));
        assert_eq!(r.confirmed_at_s(2), Some(60.0));
        assert_eq!(r.confirmed_at_s(0), r.confirmed_at_s(1));
    }
}
