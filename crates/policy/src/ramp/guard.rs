//! The ramp's error-rate guard: a rolling window of time buckets.

use crate::Nanos;
use serde::{Deserialize, Serialize};

/// Error-rate guard parameters.
///
/// The window is a ring of `buckets` equal time slices, as in Hystrix's rolling
/// statistics (`metrics.rollingStats`): old slices are recycled rather than
/// old samples being stored, so memory is fixed and nothing is allocated after
/// construction. The minimum volume mirrors Hystrix's `requestVolumeThreshold`
/// (default 20): two errors in the first three requests after a step are noise,
/// not a breach.
///
/// Defaults: `window` 60 s (Flagger's analysis `interval` of 1 m), `buckets` 6
/// (10 s slices), `error_rate_threshold` 0.05, `min_requests` 20.
/// The 5% threshold is an assumption, not a published number: a quarter of the
/// ≈20% error rate seen at the incident's peak, and far above a healthy
/// service's background error rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ErrorGuardConfig {
    /// Length of the rolling window. Default 60 s.
    pub window: Nanos,
    /// Slices the window is divided into; the window slides one slice at a time. Default 6.
    pub buckets: u32,
    /// Error rate strictly above which the guard is breached. Default 0.05.
    pub error_rate_threshold: f64,
    /// Outcomes needed in the window before the rate is trusted. Default 20.
    pub min_requests: u32,
}

impl Default for ErrorGuardConfig {
    fn default() -> Self {
        ErrorGuardConfig {
            window: 60 * crate::Nanos::SECOND,
            buckets: 6,
            error_rate_threshold: 0.05,
            min_requests: 20,
        }
    }
}

/// Largest accepted `buckets`; each costs 24 bytes and a scan per decision.
pub const MAX_BUCKETS: u32 = 3600;

#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// Absolute slice number (`now / width`); `u64::MAX` marks a never-used bucket.
    slot: u64,
    ok: u64,
    errors: u64,
}

const EMPTY: Bucket = Bucket {
    slot: u64::MAX,
    ok: 0,
    errors: 0,
};

/// Outcome counts in a rolling time window.
#[derive(Clone, Debug)]
pub(crate) struct ErrorGuard {
    width: Nanos,
    threshold: f64,
    min_requests: u64,
    buckets: Box<[Bucket]>,
}

impl ErrorGuard {
    /// Assumes a validated config (`buckets ≥ 1`, `window ≥ buckets`).
    pub(crate) fn new(config: &ErrorGuardConfig) -> Self {
        ErrorGuard {
            width: (config.window / u64::from(config.buckets)).max(Nanos::NANOSECOND),
            threshold: config.error_rate_threshold,
            min_requests: u64::from(config.min_requests),
            buckets: vec![EMPTY; config.buckets as usize].into_boxed_slice(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.buckets.fill(EMPTY);
    }

    /// `now` must not go backwards (the ramp clamps it).
    pub(crate) fn record(&mut self, now: Nanos, ok: u64, errors: u64) {
        let slot = now / self.width;
        let n = self.buckets.len() as u64;
        let b = &mut self.buckets[(slot % n) as usize];
        if b.slot != slot {
            *b = Bucket {
                slot,
                ok: 0,
                errors: 0,
            };
        }
        b.ok = b.ok.saturating_add(ok);
        b.errors = b.errors.saturating_add(errors);
    }

    /// (successes, errors) in the slices `(now/width − buckets, now/width]`.
    pub(crate) fn counts(&self, now: Nanos) -> (u64, u64) {
        let current = now / self.width;
        let n = self.buckets.len() as u64;
        self.buckets
            .iter()
            .filter(|b| b.slot <= current && b.slot + n > current)
            .fold((0, 0), |(ok, err), b| (ok + b.ok, err + b.errors))
    }

    /// The window's error rate, once `min_requests` outcomes are in it.
    pub(crate) fn error_rate(&self, now: Nanos) -> Option<f64> {
        let (ok, errors) = self.counts(now);
        let total = ok + errors;
        (total >= self.min_requests && total > 0).then(|| errors as f64 / total as f64)
    }

    /// When the window next slides past a slice that holds outcomes (the
    /// rate can change then without a new outcome), if any does.
    pub(crate) fn next_slide(&self, now: Nanos) -> Option<Nanos> {
        let current = now / self.width;
        let n = self.buckets.len() as u64;
        self.buckets
            .iter()
            .filter(|b| b.slot != u64::MAX && b.slot <= current && b.slot + n > current)
            .filter(|b| b.ok + b.errors > 0)
            .map(|b| self.width.saturating_mul(b.slot + n))
            .min()
    }

    pub(crate) fn breached(&self, now: Nanos) -> bool {
        self.error_rate(now).is_some_and(|r| r > self.threshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;

    #[test]
    fn window_slides_by_whole_buckets() {
        // 60 s in 6 buckets of 10 s; min 1 request.
        let config = ErrorGuardConfig {
            min_requests: 1,
            ..ErrorGuardConfig::default()
        };
        let mut g = ErrorGuard::new(&config);
        g.record(Nanos::from_secs(5), 9, 1); // slot 0
        g.record(Nanos::from_secs(15), 10, 0); // slot 1
        assert_eq!(g.counts(Nanos::from_secs(15)), (19, 1));
        // At 59.9 s the window is slots 0..=5: both still in.
        assert_eq!(
            g.error_rate(Nanos::from_secs(60) - Nanos::NANOSECOND),
            Some(1.0 / 20.0)
        );
        // At 60 s (slot 6) slot 0 falls out.
        assert_eq!(g.counts(Nanos::from_secs(60)), (10, 0));
        // At 70 s slot 1 falls out too.
        assert_eq!(g.error_rate(Nanos::from_secs(70)), None);
    }

    #[test]
    fn recycled_bucket_forgets_its_old_slice() {
        let config = ErrorGuardConfig {
            min_requests: 1,
            ..ErrorGuardConfig::default()
        };
        let mut g = ErrorGuard::new(&config);
        g.record(Nanos::from_secs(1), 0, 50); // slot 0, ring index 0
        g.record(Nanos::from_secs(61), 5, 0); // slot 6, ring index 0 again
        assert_eq!(g.counts(Nanos::from_secs(61)), (5, 0));
    }

    #[test]
    fn breach_needs_volume_and_a_rate_strictly_above_threshold() {
        let mut g = ErrorGuard::new(&ErrorGuardConfig::default());
        // 19 requests all failing: below min_requests 20.
        g.record(Nanos::ZERO, 0, 19);
        assert!(!g.breached(Nanos::ZERO));
        let mut g = ErrorGuard::new(&ErrorGuardConfig::default());
        // 1 error in 20 = 0.05: not above 0.05.
        g.record(Nanos::ZERO, 19, 1);
        assert!(!g.breached(Nanos::ZERO));
        // 2 in 21 ≈ 0.095 > 0.05.
        g.record(Nanos::ZERO, 0, 1);
        assert!(g.breached(Nanos::ZERO));
    }
}
