use super::FAMILY;
use super::error::check_limit_range;
use super::{LimitAlgorithm, Sample, truncate_to_limit};
use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Config for [`Gradient2`]; defaults are `Gradient2Limit.Builder`'s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Gradient2Config {
    /// Starting limit. Default 20.
    pub initial_limit: u32,
    /// Floor. Default 20.
    pub min_limit: u32,
    /// Ceiling (`maxConcurrency`). Default 200.
    pub max_concurrency: u32,
    /// Weight of the new estimate, in `(0, 1]`. Default 0.2.
    pub smoothing: f64,
    /// How much the short rtt may exceed the long rtt before the limit
    /// shrinks, `≥ 1`. Default 1.5.
    pub rtt_tolerance: f64,
    /// Samples in the long-term rtt average (`2 / (n + 1)` EMA). Default 600.
    pub long_window: u32,
    /// Headroom added every update (Netflix's `queueSize` default is the
    /// constant 4; the older `GradientLimit` used √limit). Default 4.
    pub queue_size: u32,
}

impl Default for Gradient2Config {
    fn default() -> Self {
        Gradient2Config {
            initial_limit: 20,
            min_limit: 20,
            max_concurrency: 200,
            smoothing: 0.2,
            rtt_tolerance: 1.5,
            long_window: 600,
            queue_size: 4,
        }
    }
}

impl Gradient2Config {
    /// Checks the limit range, `smoothing ∈ (0, 1]`, `rtt_tolerance ≥ 1`
    /// (as `Gradient2Limit.Builder` does) and `long_window ≥ 1`.
    pub fn validate(&self) -> Result<(), FieldError> {
        check_limit_range(
            &[
                "gradient2.min_limit",
                "gradient2.initial_limit",
                "gradient2.max_concurrency",
            ],
            self.min_limit,
            self.initial_limit,
            self.max_concurrency,
        )?;
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return Err(FieldError::new(
                FAMILY,
                "gradient2.smoothing",
                "in (0, 1]",
                self.smoothing,
            ));
        }
        if !(self.rtt_tolerance >= 1.0 && self.rtt_tolerance.is_finite()) {
            return Err(FieldError::new(
                FAMILY,
                "gradient2.rtt_tolerance",
                "a finite number ≥ 1.0",
                self.rtt_tolerance,
            ));
        }
        if self.long_window < 1 {
            return Err(FieldError::new(
                FAMILY,
                "gradient2.long_window",
                "≥ 1",
                self.long_window,
            ));
        }
        Ok(())
    }
}

/// Netflix's `ExpAvgMeasurement`: a plain mean over the first `warmup`
/// samples (so the first few do not start from zero), then an EMA with
/// factor `2 / (window + 1)`.
#[derive(Clone, Debug)]
struct ExpAvg {
    value: f64,
    sum: f64,
    count: u32,
    warmup: u32,
    factor: f64,
}

impl ExpAvg {
    /// Netflix constructs Gradient2's long rtt with a warm-up of 10 samples.
    const WARMUP: u32 = 10;

    fn new(window: u32) -> Self {
        ExpAvg {
            value: 0.0,
            sum: 0.0,
            count: 0,
            warmup: Self::WARMUP,
            factor: 2.0 / (f64::from(window) + 1.0),
        }
    }

    fn add(&mut self, sample: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.sum += sample;
            self.value = self.sum / f64::from(self.count);
        } else {
            self.value = self.value * (1.0 - self.factor) + sample * self.factor;
        }
        self.value
    }
}

/// Gradient limit that compares the latest rtt with a long-term average rtt.
///
/// Source: Netflix concurrency-limits `Gradient2Limit`. Per sample, with `L`
/// the current estimate:
///
/// * `long = EMA_600(rtt)` (mean of the first 10 samples, then factor 2/601);
/// * drift recovery: if `long / rtt > 2`, `long ×= 0.95` (after an overload
///   ends the average would otherwise keep the limit low for minutes);
/// * app-limited (`inflight < L / 2`): unchanged;
/// * `gradient = clamp(rtt_tolerance × long / rtt, 0.5, 1.0)`;
/// * `new = L × gradient + queue_size`, `L = (1 − s)·L + s·new`, clamped to
///   `[min_limit, max_concurrency]`.
///
/// Defaults: initial 20, min 20, max 200, smoothing 0.2, rtt tolerance 1.5,
/// long window 600, queue size 4. Netflix's README deploys it inside a
/// `WindowedLimit` ([`crate::limit::Windowed`]), which feeds one averaged
/// sample per window.
///
/// Deviation: a sample with `rtt == 0` is ignored (Netflix would divide by
/// zero and poison the estimate with NaN).
#[derive(Clone, Debug)]
pub struct Gradient2 {
    estimate: f64,
    min_limit: u32,
    max_concurrency: u32,
    smoothing: f64,
    rtt_tolerance: f64,
    queue_size: f64,
    long_rtt: ExpAvg,
}

impl Gradient2 {
    /// Builds the limiter after validating `config`.
    pub fn new(config: &Gradient2Config) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(Gradient2 {
            estimate: f64::from(config.initial_limit),
            min_limit: config.min_limit,
            max_concurrency: config.max_concurrency,
            smoothing: config.smoothing,
            rtt_tolerance: config.rtt_tolerance,
            queue_size: f64::from(config.queue_size),
            long_rtt: ExpAvg::new(config.long_window),
        })
    }

    /// The long-term rtt average, in nanoseconds (0 before any sample).
    pub fn long_rtt(&self) -> f64 {
        self.long_rtt.value
    }

    /// The unrounded limit estimate.
    pub fn estimate(&self) -> f64 {
        self.estimate
    }
}

impl LimitAlgorithm for Gradient2 {
    fn limit(&self) -> u32 {
        truncate_to_limit(self.estimate)
    }

    fn min_limit(&self) -> u32 {
        self.min_limit
    }

    fn max_limit(&self) -> u32 {
        self.max_concurrency
    }

    fn on_sample<R: Rng + ?Sized>(&mut self, _now: Nanos, sample: Sample, _rng: &mut R) {
        if sample.rtt == Nanos::ZERO {
            return;
        }
        let short = sample.rtt.as_nanos() as f64;
        let long = self.long_rtt.add(short);
        if long / short > 2.0 {
            self.long_rtt.value *= 0.95;
        }
        if f64::from(sample.inflight) < self.estimate / 2.0 {
            return;
        }
        // Uses `long` from before the drift correction, as Netflix does.
        let gradient = (self.rtt_tolerance * long / short).clamp(0.5, 1.0);
        let proposed = self.estimate * gradient + self.queue_size;
        let smoothed = self.estimate * (1.0 - self.smoothing) + proposed * self.smoothing;
        self.estimate = smoothed.clamp(f64::from(self.min_limit), f64::from(self.max_concurrency));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn gradient2(min: u32, initial: u32) -> Gradient2 {
        Gradient2::new(&Gradient2Config {
            min_limit: min,
            initial_limit: initial,
            ..Gradient2Config::default()
        })
        .unwrap()
    }

    fn step(g: &mut Gradient2, rtt: Nanos, inflight: u32) {
        let mut rng = Pcg64Mcg::seed_from_u64(0);
        let sample = Sample {
            rtt,
            inflight,
            dropped: false,
        };
        g.on_sample(Nanos::ZERO, sample, &mut rng);
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn steady_rtt_grows_by_smoothed_queue_size() {
        let mut g = gradient2(1, 100);
        // gradient = clamp(1.5 × 10/10) = 1; new = 100 + 4; 0.8·100 + 0.2·104 = 100.8
        step(&mut g, Nanos::from_millis(10), 100);
        assert!(close(g.estimate(), 100.8), "{}", g.estimate());
    }

    #[test]
    fn rtt_spike_applies_half_gradient_floor() {
        let mut g = gradient2(1, 100);
        for _ in 0..10 {
            step(&mut g, Nanos::from_millis(10), 200); // warm-up: each +0.8, long = 10 ms
        }
        assert!(close(g.estimate(), 108.0));
        // long = 10 + (100 − 10)·2/601 = 10.29950 ms;
        // gradient = 1.5 × 10.2995 / 100 = 0.154 → clamped to 0.5;
        // new = 108 × 0.5 + 4 = 58; 0.8·108 + 0.2·58 = 86.4 + 11.6 = 98
        step(&mut g, Nanos::from_millis(100), 200);
        assert!(close(g.estimate(), 98.0), "{}", g.estimate());
        assert!(
            close(g.long_rtt(), 10_299_500.831_946_756),
            "{}",
            g.long_rtt()
        );
    }

    #[test]
    fn gradient_between_bounds_is_proportional() {
        let mut g = gradient2(1, 100);
        for _ in 0..10 {
            step(&mut g, Nanos::from_millis(10), 200);
        }
        // long = 10 + (20 − 10)·2/601 = 10.033278 ms;
        // gradient = 1.5 × 10.033278 / 20 = 0.752496;
        // new = 108 × 0.752496 + 4 = 85.269; 0.8·108 + 0.2·85.269 = 103.454
        step(&mut g, Nanos::from_millis(20), 200);
        let long = 10.0 + 10.0 * 2.0 / 601.0;
        let expected = 0.8 * 108.0 + 0.2 * (108.0 * 1.5 * long / 20.0 + 4.0);
        assert!(close(g.estimate(), expected), "{}", g.estimate());
        assert!((g.estimate() - 103.454).abs() < 1e-3);
    }

    #[test]
    fn drift_recovery_decays_long_rtt() {
        let mut g = gradient2(1, 100);
        for _ in 0..10 {
            step(&mut g, Nanos::from_millis(100), 200); // long = 100 ms
        }
        // long = 100 − 90·2/601 = 99.70050 ms; long / 10 > 2 ⇒ × 0.95 = 94.71547 ms
        step(&mut g, Nanos::from_millis(10), 200);
        let expected = (100.0e6 - 90.0e6 * 2.0 / 601.0) * 0.95;
        assert!(close(g.long_rtt(), expected), "{}", g.long_rtt());
        assert!((g.long_rtt() - 94_715_474.2).abs() < 1.0);
    }

    #[test]
    fn app_limited_still_tracks_rtt_but_holds_limit() {
        let mut g = gradient2(1, 100);
        step(&mut g, Nanos::from_millis(10), 49); // 49 < 100 / 2
        assert_eq!(g.estimate(), 100.0);
        assert!(close(g.long_rtt(), 10e6));
    }

    #[test]
    fn never_below_min_limit() {
        let mut g = gradient2(20, 20);
        for _ in 0..10 {
            step(&mut g, Nanos::from_millis(10), 20); // warm-up: long = 10 ms, L = 28
        }
        // Each slow sample: g = 0.5, L = 0.8·L + 0.2·(0.5·L + 4) = 0.9·L + 0.8,
        // whose fixed point 8 lies below the floor.
        for _ in 0..100 {
            step(&mut g, Nanos::from_millis(1000), 20);
        }
        assert_eq!(g.limit(), 20);
    }

    #[test]
    fn validation_names_fields() {
        let bad = Gradient2Config {
            rtt_tolerance: 0.9,
            ..Gradient2Config::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "limit: gradient2.rtt_tolerance must be a finite number ≥ 1.0, got 0.9"
        );
        let bad = Gradient2Config {
            long_window: 0,
            ..Gradient2Config::default()
        };
        assert_eq!(bad.validate().unwrap_err().field(), "gradient2.long_window");
    }
}
