use super::FAMILY;
use super::{LimitAlgorithm, Sample, log10_at_least_one, truncate_to_limit};
use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Config for [`Vegas`]; defaults are `VegasLimit.Builder`'s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VegasConfig {
    /// Starting limit. Default 20.
    pub initial_limit: u32,
    /// Ceiling. Default 1000. (Vegas has no configurable floor: it is 1.)
    pub max_concurrency: u32,
    /// Weight of the new estimate, in `(0, 1]`. Default 1.0 (no smoothing).
    pub smoothing: f64,
    /// Re-probe the no-load rtt every `jitter × probe_multiplier × limit`
    /// samples, jitter uniform in `[0.5, 1)`. Default 30.
    pub probe_multiplier: u32,
}

impl Default for VegasConfig {
    fn default() -> Self {
        VegasConfig {
            initial_limit: 20,
            max_concurrency: 1000,
            smoothing: 1.0,
            probe_multiplier: 30,
        }
    }
}

impl VegasConfig {
    /// Checks `1 ≤ initial_limit ≤ max_concurrency`, `smoothing ∈ (0, 1]`,
    /// `probe_multiplier ≥ 1`.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.max_concurrency < 1 {
            return Err(FieldError::new(
                FAMILY,
                "vegas.max_concurrency",
                "≥ 1",
                self.max_concurrency,
            ));
        }
        if self.initial_limit < 1 || self.initial_limit > self.max_concurrency {
            return Err(FieldError::new(
                FAMILY,
                "vegas.initial_limit",
                "within [1, max_concurrency]",
                self.initial_limit,
            ));
        }
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return Err(FieldError::new(
                FAMILY,
                "vegas.smoothing",
                "in (0, 1]",
                self.smoothing,
            ));
        }
        if self.probe_multiplier < 1 {
            return Err(FieldError::new(
                FAMILY,
                "vegas.probe_multiplier",
                "≥ 1",
                self.probe_multiplier,
            ));
        }
        Ok(())
    }
}

/// Delay-based limit after TCP Vegas: estimate the queue from how much the
/// rtt exceeds the no-load rtt, grow while the queue is short, shrink when long.
///
/// Source: Netflix concurrency-limits `VegasLimit`. With `L` the current
/// estimate and `log(L) = max(1, floor(log10 L))`:
///
/// * `queue = ceil(L × (1 − rtt_noload / rtt))`;
/// * `alpha = 3·log(L)`, `beta = 6·log(L)`, `threshold = log(L)`;
/// * drop ⇒ `L − log(L)`; app-limited (`2 × inflight < L`) ⇒ unchanged;
///   `queue ≤ threshold` ⇒ `L + beta`; `queue < alpha` ⇒ `L + log(L)`;
///   `queue > beta` ⇒ `L − log(L)`; otherwise unchanged;
/// * clamp to `[1, max_concurrency]`, then `L = (1 − s)·L + s·new`.
///
/// `rtt_noload` is the lowest rtt seen; every `jitter × probe_multiplier × L`
/// samples (jitter uniform in `[0.5, 1)`, drawn from the caller's RNG) it is
/// reset to the current sample so a permanently slower backend is learned.
///
/// Defaults: initial 20, max 1000, smoothing 1.0, probe multiplier 30.
///
/// Deviation: Netflix throws on `rtt == 0`; such a sample is ignored here.
#[derive(Clone, Debug)]
pub struct Vegas {
    estimate: f64,
    max_concurrency: u32,
    smoothing: f64,
    probe_multiplier: u32,
    rtt_noload: Nanos,
    probe_count: u64,
    /// Drawn on the first sample (the constructor has no RNG); Netflix draws
    /// it in the constructor from `ThreadLocalRandom`.
    probe_jitter: Option<f64>,
}

impl Vegas {
    /// Builds the limiter after validating `config`.
    pub fn new(config: &VegasConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(Vegas {
            estimate: f64::from(config.initial_limit),
            max_concurrency: config.max_concurrency,
            smoothing: config.smoothing,
            probe_multiplier: config.probe_multiplier,
            rtt_noload: Nanos::ZERO,
            probe_count: 0,
            probe_jitter: None,
        })
    }

    /// The no-load rtt currently assumed (0 before the first sample).
    pub fn rtt_noload(&self) -> Nanos {
        self.rtt_noload
    }

    /// The unrounded limit estimate.
    pub fn estimate(&self) -> f64 {
        self.estimate
    }

    fn should_probe<R: Rng + ?Sized>(&mut self, rng: &mut R) -> bool {
        let jitter = *self
            .probe_jitter
            .get_or_insert_with(|| rng.random_range(0.5..1.0));
        jitter * f64::from(self.probe_multiplier) * self.estimate <= self.probe_count as f64
    }

    fn next_estimate(&self, sample: Sample) -> Option<f64> {
        let limit = self.estimate;
        let log = f64::from(log10_at_least_one(truncate_to_limit(limit)));
        if sample.dropped {
            return Some(limit - log);
        }
        if 2.0 * f64::from(sample.inflight) < limit {
            return None;
        }
        let queue = (limit
            * (1.0 - self.rtt_noload.as_nanos() as f64 / sample.rtt.as_nanos() as f64))
            .ceil();
        let (alpha, beta, threshold) = (3.0 * log, 6.0 * log, log);
        if queue <= threshold {
            Some(limit + beta)
        } else if queue < alpha {
            Some(limit + log)
        } else if queue > beta {
            Some(limit - log)
        } else {
            None
        }
    }
}

impl LimitAlgorithm for Vegas {
    fn limit(&self) -> u32 {
        truncate_to_limit(self.estimate)
    }

    fn min_limit(&self) -> u32 {
        1
    }

    fn max_limit(&self) -> u32 {
        self.max_concurrency
    }

    fn on_sample<R: Rng + ?Sized>(&mut self, _now: Nanos, sample: Sample, rng: &mut R) {
        if sample.rtt == Nanos::ZERO {
            return;
        }
        self.probe_count += 1;
        if self.should_probe(rng) {
            self.probe_jitter = Some(rng.random_range(0.5..1.0));
            self.probe_count = 0;
            self.rtt_noload = sample.rtt;
            return;
        }
        if self.rtt_noload == Nanos::ZERO || sample.rtt < self.rtt_noload {
            self.rtt_noload = sample.rtt;
            return;
        }
        if let Some(next) = self.next_estimate(sample) {
            let clamped = next.clamp(1.0, f64::from(self.max_concurrency));
            self.estimate = (1.0 - self.smoothing) * self.estimate + self.smoothing * clamped;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    /// A Vegas at limit 20 whose no-load rtt is already 10 ms.
    fn primed(config: VegasConfig) -> (Vegas, Pcg64Mcg) {
        let mut v = Vegas::new(&config).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let first = Sample {
            rtt: Nanos::from_millis(10),
            inflight: 1,
            dropped: false,
        };
        v.on_sample(Nanos::ZERO, first, &mut rng);
        assert_eq!(v.rtt_noload(), Nanos::from_millis(10));
        (v, rng)
    }

    fn step(v: &mut Vegas, rng: &mut Pcg64Mcg, rtt: Nanos, inflight: u32, dropped: bool) {
        let sample = Sample {
            rtt,
            inflight,
            dropped,
        };
        v.on_sample(Nanos::ZERO, sample, rng);
    }

    #[test]
    fn no_queue_grows_by_beta() {
        let (mut v, mut rng) = primed(VegasConfig::default());
        // queue = ceil(20 × (1 − 10/10)) = 0 ≤ threshold 1 ⇒ 20 + beta (6·1) = 26
        step(&mut v, &mut rng, Nanos::from_millis(10), 20, false);
        assert_eq!(v.limit(), 26);
    }

    #[test]
    fn small_queue_grows_by_log() {
        let (mut v, mut rng) = primed(VegasConfig::default());
        // queue = ceil(20 × (1 − 10/11)) = ceil(1.82) = 2; 1 < 2 < alpha 3 ⇒ 20 + 1
        step(&mut v, &mut rng, Nanos::from_millis(11), 20, false);
        assert_eq!(v.limit(), 21);
    }

    #[test]
    fn queue_between_alpha_and_beta_holds() {
        let (mut v, mut rng) = primed(VegasConfig::default());
        // queue = ceil(20 × (1 − 10/12)) = ceil(3.33) = 4, 3 ≤ 4 ≤ 6 ⇒ unchanged
        step(&mut v, &mut rng, Nanos::from_millis(12), 20, false);
        assert_eq!(v.estimate(), 20.0);
    }

    #[test]
    fn long_queue_shrinks_by_log() {
        let (mut v, mut rng) = primed(VegasConfig::default());
        // queue = ceil(20 × (1 − 10/20)) = 10 > beta 6 ⇒ 20 − 1 = 19
        step(&mut v, &mut rng, Nanos::from_millis(20), 20, false);
        assert_eq!(v.limit(), 19);
    }

    #[test]
    fn thresholds_scale_with_log10_of_the_limit() {
        let (mut v, mut rng) = primed(VegasConfig {
            initial_limit: 200,
            ..VegasConfig::default()
        });
        // L = 200, log = 2: alpha 6, beta 12, threshold 2.
        // queue = ceil(200 × (1 − 10/10.1)) = ceil(1.98) = 2 ≤ 2 ⇒ 200 + 12 = 212
        step(&mut v, &mut rng, Nanos::from_micros(10100), 200, false);
        assert_eq!(v.limit(), 212);
    }

    #[test]
    fn drop_shrinks_even_when_app_limited() {
        let (mut v, mut rng) = primed(VegasConfig::default());
        step(&mut v, &mut rng, Nanos::from_millis(10), 1, true);
        assert_eq!(v.limit(), 19); // 20 − log10(20) = 19
    }

    #[test]
    fn app_limited_samples_do_not_grow() {
        let (mut v, mut rng) = primed(VegasConfig::default());
        step(&mut v, &mut rng, Nanos::from_millis(10), 9, false); // 2 × 9 = 18 < 20
        assert_eq!(v.estimate(), 20.0);
    }

    #[test]
    fn lower_rtt_only_updates_noload() {
        let (mut v, mut rng) = primed(VegasConfig::default());
        step(&mut v, &mut rng, Nanos::from_millis(5), 20, false);
        assert_eq!(v.rtt_noload(), Nanos::from_millis(5));
        assert_eq!(v.estimate(), 20.0);
    }

    #[test]
    fn smoothing_blends_old_and_new() {
        let (mut v, mut rng) = primed(VegasConfig {
            smoothing: 0.5,
            ..VegasConfig::default()
        });
        // new = 26 (see no_queue_grows_by_beta); 0.5 × 20 + 0.5 × 26 = 23
        step(&mut v, &mut rng, Nanos::from_millis(10), 20, false);
        assert_eq!(v.estimate(), 23.0);
    }

    #[test]
    fn probe_resets_noload_between_half_and_full_period() {
        let (mut v, mut rng) = primed(VegasConfig::default());
        // App-limited samples keep L = 20, so the probe fires after
        // jitter × 30 × 20 samples, jitter ∈ [0.5, 1): between 300 and 600.
        // The priming sample counted as 1.
        for _ in 1..299 {
            step(&mut v, &mut rng, Nanos::from_millis(20), 1, false);
        }
        assert_eq!(
            v.rtt_noload(),
            Nanos::from_millis(10),
            "no probe before 300 samples"
        );
        for _ in 299..600 {
            step(&mut v, &mut rng, Nanos::from_millis(20), 1, false);
        }
        assert_eq!(
            v.rtt_noload(),
            Nanos::from_millis(20),
            "probe must have fired by 600 samples"
        );
    }

    #[test]
    fn zero_rtt_is_ignored() {
        let (mut v, mut rng) = primed(VegasConfig::default());
        step(&mut v, &mut rng, Nanos::ZERO, 20, true);
        assert_eq!(v.rtt_noload(), Nanos::from_millis(10));
        assert_eq!(v.estimate(), 20.0);
    }

    #[test]
    fn validation_names_fields() {
        let bad = VegasConfig {
            smoothing: 0.0,
            ..VegasConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "limit: vegas.smoothing must be in (0, 1], got 0"
        );
        let bad = VegasConfig {
            initial_limit: 2000,
            ..VegasConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field(), "vegas.initial_limit");
    }
}
