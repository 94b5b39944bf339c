//! Per-path, per-interval counts and the state of each trailing SLO
//! window, read into degradation and recovery by the simulator's own
//! definition (`stormbreak_sim::recovery`), so a live run and a simulated
//! one read alike.
//!
//! Sans-IO: the driver closes intervals as time passes
//! ([`Timeline::close_until`]) and records what happened since.
//!
//! A window is **unknown** — never up — when more than half its slots were
//! paused at the target's request, or when it holds fewer probes than its
//! SLO needs to be judged ([`crate::config::Slo::min_samples`]). It is
//! **bad** when its error rate is above the target or its latency quantile
//! is at or above the bound, **good** otherwise.
//!
//! Bounds: one row per path per interval (at most
//! [`crate::config::MAX_INTERVALS`]); each path keeps the probe durations of
//! its current window, 4 bytes each, and a copy while a quantile is read
//! (at most rate × window ≤ [`crate::config::MAX_WINDOW_PROBES`] each).

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use serde::Serialize;
use stormbreak_policy::Nanos;
use stormbreak_sim::recovery::{self, WindowState};

use crate::config::{ProbeConfig, Slo};
use crate::outcome::{Outcome, Reason};

/// Counts of one interval (or one window, summed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Probes that ended.
    pub probes: u64,
    /// Of which failed.
    pub failed: u64,
    /// Of which succeeded only after a retry.
    pub ok_after_retry: u64,
    /// Slots lost to a pause the target asked for.
    pub paused: u64,
    /// Slots skipped because `max_in_flight` probes were out.
    pub skipped: u64,
    /// Failures by [`Reason`], in [`Reason::ALL`] order.
    #[serde(skip)]
    pub reasons: [u64; Reason::ALL.len()],
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.probes += o.probes;
        self.failed += o.failed;
        self.ok_after_retry += o.ok_after_retry;
        self.paused += o.paused;
        self.skipped += o.skipped;
        for (a, b) in self.reasons.iter_mut().zip(o.reasons) {
            *a += b;
        }
    }

    fn sub(&mut self, o: &Counts) {
        self.probes -= o.probes;
        self.failed -= o.failed;
        self.ok_after_retry -= o.ok_after_retry;
        self.paused -= o.paused;
        self.skipped -= o.skipped;
        for (a, b) in self.reasons.iter_mut().zip(o.reasons) {
            *a -= b;
        }
    }

    /// Failed over ended probes (`None` with none).
    pub fn error_rate(&self) -> Option<f64> {
        (self.probes > 0).then(|| self.failed as f64 / self.probes as f64)
    }
}

/// One path's row for one interval.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// End of the interval, seconds from the run's start.
    pub t_s: f64,
    /// What happened in the interval.
    #[serde(flatten)]
    pub interval: Counts,
    /// Probes in the trailing window ending here.
    pub window_probes: u64,
    /// The window's error rate (`None`: no probe ended in it).
    pub window_error_rate: Option<f64>,
    /// The window's median probe duration, milliseconds.
    pub window_p50_ms: Option<f64>,
    /// The window's duration at the SLO's quantile (0.99 without one), milliseconds.
    pub window_quantile_ms: Option<f64>,
    /// How the window measured up.
    pub state: WindowState,
    /// Whether the window spans a whole SLO window (the verdict reads only these).
    pub full: bool,
}

/// The verdict of one path, or of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every full window judged and good.
    Met,
    /// No window bad, but at least one full window not judged.
    Unknown,
    /// At least one window bad.
    Breached,
}

impl Verdict {
    /// The process exit status that says it (k6's 99 for a breach; 3,
    /// Nagios's UNKNOWN, for a verdict the samples could not give).
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Met => 0,
            Verdict::Unknown => 3,
            Verdict::Breached => 99,
        }
    }
}

/// A path's line of the final table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PathReport {
    /// Path name.
    pub path: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// End of the first bad window, seconds from the start.
    pub degraded_at_s: Option<f64>,
    /// Start of the final stretch of good windows.
    pub recovered_at_s: Option<f64>,
    /// When `hysteresis` good windows in a row confirmed the recovery.
    pub confirmed_at_s: Option<f64>,
    /// Worst error rate of a judged window.
    pub worst_error_rate: Option<f64>,
    /// Worst window duration at the SLO's quantile, milliseconds, of a judged window.
    pub worst_quantile_ms: Option<f64>,
    /// Median and 99th percentile of every probe's duration, milliseconds.
    pub p50_ms: Option<f64>,
    /// See `p50_ms`.
    pub p99_ms: Option<f64>,
    /// Totals over the run.
    #[serde(flatten)]
    pub totals: Counts,
    /// Full windows that could not be judged.
    pub unknown_windows: u64,
    /// Failures by reason (only reasons seen).
    pub reasons: std::collections::BTreeMap<&'static str, u64>,
}

struct PathLine {
    name: String,
    slo: Slo,
    min_samples: u64,
    window: usize,
    current: Counts,
    current_latency: Vec<u32>,
    ring: VecDeque<(Counts, Vec<u32>)>,
    in_window: Counts,
    scratch: Vec<u32>,
    total: Counts,
    all_latency: Histogram<u64>,
    rows: Vec<Row>,
    states: Vec<WindowState>,
}

/// The run's timeline, every path.
pub struct Timeline {
    interval: Nanos,
    closed: u64,
    hysteresis: u32,
    paths: Vec<PathLine>,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl Timeline {
    /// An empty timeline for `config`'s paths.
    pub fn new(config: &ProbeConfig) -> Timeline {
        let iv = config.run.interval;
        Timeline {
            interval: iv,
            closed: 0,
            hysteresis: config.run.hysteresis,
            paths: config
                .paths
                .iter()
                .map(|p| PathLine {
                    name: p.name.clone(),
                    slo: p.slo,
                    min_samples: p.slo.min_samples(),
                    window: (p.slo.window / iv).max(1) as usize,
                    current: Counts::default(),
                    current_latency: Vec::new(),
                    ring: VecDeque::new(),
                    in_window: Counts::default(),
                    scratch: Vec::new(),
                    total: Counts::default(),
                    // 1 µs to an hour, two significant digits.
                    all_latency: Histogram::new_with_bounds(1, 3_600_000_000, 2)
                        .expect("valid bounds"),
                    rows: Vec::new(),
                    states: Vec::new(),
                })
                .collect(),
        }
    }

    /// The interval length.
    pub fn interval(&self) -> Nanos {
        self.interval
    }

    /// Intervals closed so far.
    pub fn closed(&self) -> u64 {
        self.closed
    }

    /// End of the interval events go into now.
    pub fn open_interval_end(&self) -> Nanos {
        self.interval * (self.closed + 1)
    }

    /// Records a probe that ended.
    pub fn record(&mut self, o: &Outcome) {
        let p = &mut self.paths[o.path];
        let us = o.latency().as_nanos() / 1_000;
        p.current.probes += 1;
        if let Some(r) = o.reason {
            p.current.failed += 1;
            p.current.reasons[r.index()] += 1;
        } else if o.ok_after_retry() {
            p.current.ok_after_retry += 1;
        }
        p.current_latency.push(us.min(u64::from(u32::MAX)) as u32);
        p.all_latency.saturating_record(us.max(1));
    }

    /// Records a slot lost to a pause.
    pub fn record_paused(&mut self, path: usize) {
        self.paths[path].current.paused += 1;
    }

    /// Records a slot skipped for the in-flight cap.
    pub fn record_skipped(&mut self, path: usize) {
        self.paths[path].current.skipped += 1;
    }

    /// Closes every interval that ends at or before `now`; returns how many.
    pub fn close_until(&mut self, now: Nanos) -> u64 {
        let mut n = 0;
        while self.open_interval_end() <= now {
            self.close_one();
            n += 1;
        }
        n
    }

    fn close_one(&mut self) {
        self.closed += 1;
        let t_s = (self.interval * self.closed).as_secs_f64();
        let index = self.closed as usize;
        for p in &mut self.paths {
            let counts = std::mem::take(&mut p.current);
            let latency = std::mem::take(&mut p.current_latency);
            p.total.add(&counts);
            p.in_window.add(&counts);
            p.ring.push_back((counts, latency));
            if p.ring.len() > p.window {
                let (old, mut lat) = p.ring.pop_front().expect("longer than the window");
                p.in_window.sub(&old);
                lat.clear();
                // Reuse the buffer for the next interval.
                if p.current_latency.capacity() == 0 {
                    p.current_latency = lat;
                }
            }
            let w = p.in_window;
            p.scratch.clear();
            for (_, l) in &p.ring {
                p.scratch.extend_from_slice(l);
            }
            let q = p.slo.latency.map_or(0.99, |l| l.quantile);
            let p50 = quantile(&mut p.scratch, 0.5);
            let pq = quantile(&mut p.scratch, q);
            let slots = w.probes + w.paused + w.skipped;
            let state = if 2 * w.paused > slots || w.probes < p.min_samples {
                WindowState::Unknown
            } else {
                let errors_bad = w.error_rate().unwrap_or(0.0) > p.slo.error_rate;
                let latency_bad = p
                    .slo
                    .latency
                    .is_some_and(|l| pq.is_some_and(|v| v >= l.under.as_nanos() / 1_000));
                if errors_bad || latency_bad {
                    WindowState::Bad
                } else {
                    WindowState::Good
                }
            };
            p.states.push(state);
            p.rows.push(Row {
                t_s,
                interval: counts,
                window_probes: w.probes,
                window_error_rate: w.error_rate(),
                window_p50_ms: p50.map(ms),
                window_quantile_ms: pq.map(ms),
                state,
                full: index >= p.window,
            });
        }
    }

    /// Each path's rows so far.
    pub fn rows(&self) -> impl Iterator<Item = (&str, &[Row])> {
        self.paths
            .iter()
            .map(|p| (p.name.as_str(), p.rows.as_slice()))
    }

    /// The latest row of each path (`None` before the first interval closes).
    pub fn latest(&self) -> impl Iterator<Item = (&str, Option<&Row>)> {
        self.paths.iter().map(|p| (p.name.as_str(), p.rows.last()))
    }

    /// Every path's line of the final table, as of the intervals closed.
    pub fn reports(&self) -> Vec<PathReport> {
        self.paths
            .iter()
            .map(|p| {
                let r = recovery::read(&p.states, self.interval, p.window);
                let bad = p.states.contains(&WindowState::Bad);
                let unknown_windows = p
                    .rows
                    .iter()
                    .filter(|r| r.full && r.state == WindowState::Unknown)
                    .count() as u64;
                let full = p.rows.iter().filter(|r| r.full).count();
                let verdict = if bad {
                    Verdict::Breached
                } else if unknown_windows > 0 || full == 0 {
                    Verdict::Unknown
                } else {
                    Verdict::Met
                };
                let judged = || p.rows.iter().filter(|r| r.state != WindowState::Unknown);
                let worst = |f: fn(&Row) -> Option<f64>| {
                    judged()
                        .filter_map(f)
                        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
                };
                let hq = |q: f64| {
                    (!p.all_latency.is_empty()).then(|| ms(p.all_latency.value_at_quantile(q)))
                };
                PathReport {
                    path: p.name.clone(),
                    verdict,
                    degraded_at_s: r.degraded_at_s,
                    recovered_at_s: r.recovered_at_s,
                    confirmed_at_s: r.confirmed_at_s(self.hysteresis),
                    worst_error_rate: worst(|r| r.window_error_rate),
                    worst_quantile_ms: worst(|r| r.window_quantile_ms),
                    p50_ms: hq(0.5),
                    p99_ms: hq(0.99),
                    totals: p.total,
                    unknown_windows,
                    reasons: Reason::ALL
                        .iter()
                        .filter(|r| p.total.reasons[r.index()] > 0)
                        .map(|r| (r.label(), p.total.reasons[r.index()]))
                        .collect(),
                }
            })
            .collect()
    }
}

/// The run's verdict: a breach anywhere wins over unknown, as k6's does.
pub fn overall(reports: &[PathReport]) -> Verdict {
    reports
        .iter()
        .map(|r| r.verdict)
        .max()
        .unwrap_or(Verdict::Unknown)
}

/// The `q` quantile of `v` (nearest rank), reordering `v`.
fn quantile(v: &mut [u32], q: f64) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    let (_, x, _) = v.select_nth_unstable(rank);
    Some(u64::from(*x))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> ProbeConfig {
        let text = format!(
            "[probe]\nrate = \"10/s\"\nduration = \"60s\"\ninterval = \"1s\"\nhysteresis = 2\n\
             [[path]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/\"\n\
             slo = {{ error_rate = 0.1, window = \"3s\" {extra} }}\n"
        );
        ProbeConfig::parse("t.toml", &text).unwrap()
    }

    fn outcome(at_ms: u64, ok: bool, latency_ms: u64) -> Outcome {
        Outcome {
            path: 0,
            due: Nanos::from_millis(at_ms),
            sent: Nanos::from_millis(at_ms),
            done: Nanos::from_millis(at_ms + latency_ms),
            status: Some(if ok { 200 } else { 500 }),
            reason: (!ok).then_some(Reason::Status),
            retry_after: None,
            attempts: 1,
        }
    }

    /// Ten probes a second, `bad` of them failed, for `secs` seconds from `from`.
    fn feed(t: &mut Timeline, from: u64, secs: u64, bad: u64) {
        for s in from..from + secs {
            for k in 0..10 {
                let at = s * 1000 + k * 100;
                t.close_until(Nanos::from_millis(at));
                t.record(&outcome(at, k >= bad, 5));
            }
        }
        t.close_until(Nanos::from_secs(from + secs));
    }

    #[test]
    fn windows_are_judged_against_the_error_target() {
        let mut t = Timeline::new(&config(""));
        feed(&mut t, 0, 5, 0);
        feed(&mut t, 5, 5, 5);
        feed(&mut t, 10, 10, 0);
        let r = &t.reports()[0];
        assert_eq!(r.verdict, Verdict::Breached);
        // The first window holding a failed second ends at 6 s.
        assert_eq!(r.degraded_at_s, Some(6.0));
        // The last bad window ends at 12 s (it holds second 10's failures);
        // the next, good, spans 10 to 13 s.
        assert_eq!(r.recovered_at_s, Some(10.0));
        assert_eq!(r.confirmed_at_s, Some(16.0), "two 3 s windows");
        assert_eq!(r.worst_error_rate, Some(0.5));
        assert_eq!(r.totals.probes, 200);
        assert_eq!(r.reasons.get("status"), Some(&25));
        assert_eq!(overall(&t.reports()), Verdict::Breached);
    }

    #[test]
    fn a_window_too_thin_to_judge_is_unknown_and_never_up() {
        // A 99 % target needs 100 probes per window; 3 s at 10/s has 30.
        let text = "[probe]\nrate = \"10/s\"\nduration = \"60s\"\ninterval = \"1s\"\n\
             [[path]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/\"\n\
             slo = { error_rate = 0.01, window = \"3s\" }\n";
        let c = ProbeConfig::parse("t.toml", text).unwrap();
        assert_eq!(c.sample_warnings().len(), 1, "{:?}", c.sample_warnings());
        let mut t = Timeline::new(&c);
        feed(&mut t, 0, 10, 0);
        let r = &t.reports()[0];
        assert_eq!(r.verdict, Verdict::Unknown);
        assert_eq!(r.unknown_windows, 8);
    }

    #[test]
    fn a_mostly_paused_window_is_unknown() {
        let mut t = Timeline::new(&config(""));
        feed(&mut t, 0, 3, 0);
        for s in 3..6 {
            for _ in 0..10 {
                t.record_paused(0);
            }
            t.close_until(Nanos::from_secs(s + 1));
        }
        feed(&mut t, 6, 3, 0);
        let r = &t.reports()[0];
        assert_eq!(r.verdict, Verdict::Unknown);
        assert_eq!(r.totals.paused, 30);
        assert_eq!(r.degraded_at_s, None, "unknown is not bad");
    }

    #[test]
    fn a_window_mostly_paused_is_unknown_even_with_enough_probes() {
        // 10 probes a second judge a 3 s window (10 needed); then a second
        // with 30 paused slots beside its 10 probes (the window: 30 of 60
        // slots paused, not more than half), then one with 40 (70 of 100).
        let mut t = Timeline::new(&config(""));
        feed(&mut t, 0, 3, 0);
        for _ in 0..30 {
            t.record_paused(0);
        }
        feed(&mut t, 3, 1, 0);
        for _ in 0..40 {
            t.record_paused(0);
        }
        feed(&mut t, 4, 1, 0);
        let rows = &t.rows().next().unwrap().1;
        assert_eq!(rows[3].window_probes, 30);
        assert_eq!(rows[3].state, WindowState::Good, "30 of 60 paused: judged");
        assert_eq!(rows[4].window_probes, 30);
        assert_eq!(
            rows[4].state,
            WindowState::Unknown,
            "70 of 100 paused: unknown"
        );
    }

    #[test]
    fn the_latency_objective_judges_the_window_quantile() {
        let mut t = Timeline::new(&config(", latency = { quantile = 0.9, under = \"50ms\" }"));
        feed(&mut t, 0, 3, 0);
        // One second of 100 ms answers: 10 of 30 in the window, over 10 %.
        for k in 0..10 {
            let at = 3000 + k * 100;
            t.close_until(Nanos::from_millis(at));
            t.record(&outcome(at, true, 100));
        }
        feed(&mut t, 4, 3, 0);
        let r = &t.reports()[0];
        assert_eq!(r.verdict, Verdict::Breached);
        assert_eq!(r.degraded_at_s, Some(4.0));
        assert_eq!(r.worst_quantile_ms, Some(100.0));
        assert_eq!(r.worst_error_rate, Some(0.0));
    }

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let mut v = vec![5, 1, 4, 2, 3];
        assert_eq!(quantile(&mut v, 0.5), Some(3));
        assert_eq!(quantile(&mut v, 0.99), Some(5));
        assert_eq!(quantile(&mut v, 0.01), Some(1));
        assert_eq!(quantile(&mut [], 0.5), None);
    }

    #[test]
    fn exit_codes_are_k6_and_nagios_ones() {
        assert_eq!(Verdict::Met.exit_code(), 0);
        assert_eq!(Verdict::Breached.exit_code(), 99);
        assert_eq!(Verdict::Unknown.exit_code(), 3);
        assert_eq!(overall(&[]), Verdict::Unknown);
    }
}
