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

use serde::{Deserialize, Serialize};
use stormbreak_policy::Nanos;

use crate::record::Recording;

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
        // (At the run's start the window is shorter: never before 0.)
        (Some(_), Some(i)) => (Some((secs(i + 1) - window_s).max(0.0)), Some(secs(i + 1))),
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

/// Per-interval longest job wait over several routes (empty: no job queue).
pub(crate) fn path_job_wait(rec: &Recording, routes: &[&str]) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    for r in routes.iter().filter_map(|name| rec.route(name)) {
        if out.len() < r.job_wait_s.len() {
            out.resize(r.job_wait_s.len(), 0.0);
        }
        for (o, &w) in out.iter_mut().zip(&r.job_wait_s) {
            *o = o.max(w);
        }
    }
    out
}

/// Maximum over trailing windows of `w` intervals, one value per interval.
pub(crate) fn trailing_max(v: &[f64], w: usize) -> Vec<f64> {
    (0..v.len())
        .map(|i| {
            v[i.saturating_sub(w - 1)..=i]
                .iter()
                .copied()
                .fold(0.0, f64::max)
        })
        .collect()
}

/// Per-interval (failed, answered) attempts at the edge over several routes.
pub(crate) fn path_counts(rec: &Recording, routes: &[&str]) -> Vec<(u64, u64)> {
    let n = rec.intervals();
    let mut out = vec![(0, 0); n];
    for r in routes.iter().filter_map(|name| rec.route(name)) {
        for (i, slot) in out.iter_mut().enumerate() {
            let f = r.failed(i);
            slot.0 += f;
            slot.1 += f + r.successes[i];
        }
    }
    out
}

/// Error rate over trailing windows of `w` intervals, one value per interval.
pub(crate) fn trailing_error_rate(counts: &[(u64, u64)], w: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(counts.len());
    let (mut f, mut t) = (0u64, 0u64);
    for i in 0..counts.len() {
        f += counts[i].0;
        t += counts[i].1;
        if i >= w {
            f -= counts[i - w].0;
            t -= counts[i - w].1;
        }
        out.push(if t == 0 { 0.0 } else { f as f64 / t as f64 });
    }
    out
}

/// Recovery of one user path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PathRecovery {
    /// Path (or route) name.
    pub path: String,
    /// Seconds after the scenario's start when its windowed error rate
    /// first exceeded the SLO (5-minute windows in the replay).
    pub degraded_at_s: Option<f64>,
    /// Start of the final stretch in which the windowed error rate stayed
    /// under the SLO (`None` if degraded at the end of the run).
    pub recovered_at_s: Option<f64>,
    /// Worst windowed error rate.
    pub worst_error_rate: f64,
    /// Longest wait of a job for a worker, seconds, for paths behind a job
    /// queue (`workers`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_job_wait_s: Option<f64>,
}

/// What a recorded run's windows are judged by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecordedSlo {
    /// A window is bad above this error rate.
    pub error_rate: f64,
    /// A window is also bad when a job waited longer than this, seconds.
    pub job_wait_s: f64,
}

impl RecordedSlo {
    /// The replay's: 1 % errors ([`crate::replay::SLO_ERROR_RATE`]), a job
    /// waiting 5 minutes ([`crate::replay::SLO_JOB_WAIT_S`]).
    pub const REPLAY: RecordedSlo = RecordedSlo {
        error_rate: crate::replay::SLO_ERROR_RATE,
        job_wait_s: crate::replay::SLO_JOB_WAIT_S,
    };
}

/// Recovery of `routes` of `rec` together, named `name`, over trailing
/// windows of `window` intervals: the replay's per-path table is this
/// over its user paths, the per-route table this over each route.
pub fn recorded(
    rec: &Recording,
    name: &str,
    routes: &[&str],
    window: usize,
    slo: &RecordedSlo,
) -> PathRecovery {
    let iv = rec.interval.max(Nanos::NANOSECOND);
    let e = trailing_error_rate(&path_counts(rec, routes), window);
    let waits = path_job_wait(rec, routes);
    let w = trailing_max(&waits, window);
    let states: Vec<WindowState> = (0..e.len())
        .map(|i| {
            if e[i] > slo.error_rate || w.get(i).is_some_and(|&x| x > slo.job_wait_s) {
                WindowState::Bad
            } else {
                WindowState::Good
            }
        })
        .collect();
    let r = read(&states, iv, window);
    let peak = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    PathRecovery {
        path: name.to_owned(),
        degraded_at_s: r.degraded_at_s,
        recovered_at_s: r.recovered_at_s,
        worst_error_rate: peak(&e),
        worst_job_wait_s: (!waits.is_empty()).then(|| peak(&waits)),
    }
}

/// Schema tag of [`RECOVERY_FILE`].
pub const RECOVERY_SCHEMA: &str = "stormbreak.recovery/1";
/// The per-route recovery table `simulate` and `lab` write.
pub const RECOVERY_FILE: &str = "recovery.json";

/// Every route's recovery in one run, as `recovery.json` holds it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RecoveryTable {
    /// [`RECOVERY_SCHEMA`].
    pub schema: String,
    /// Window length, seconds (the recording's intervals, rounded up).
    pub window_s: f64,
    /// What the windows were judged by.
    pub slo: RecordedSlo,
    /// One row per route, in the recording's order.
    pub routes: Vec<PathRecovery>,
}

/// The per-route table of `rec` over trailing windows of `window`
/// (at least one interval), judged by the replay's SLO.
pub fn route_table(rec: &Recording, window: Nanos) -> RecoveryTable {
    let iv = rec.interval.max(Nanos::NANOSECOND);
    let w = window.div_ceil(iv).max(1) as usize;
    RecoveryTable {
        schema: RECOVERY_SCHEMA.to_owned(),
        window_s: (w as u64 * iv).as_secs_f64(),
        slo: RecordedSlo::REPLAY,
        routes: rec
            .routes
            .iter()
            .map(|r| recorded(rec, &r.name, &[r.name.as_str()], w, &RecordedSlo::REPLAY))
            .collect(),
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
