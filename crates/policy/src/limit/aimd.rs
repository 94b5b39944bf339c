use super::FAMILY;
use super::error::check_limit_range;
use super::{LimitAlgorithm, Sample, truncate_to_limit};
use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Config for [`Aimd`]; defaults are `AIMDLimit.Builder`'s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AimdConfig {
    /// Starting limit. Default 20.
    pub initial_limit: u32,
    /// Floor. Default 20 (so with all defaults a drop at 20 stays at 20).
    pub min_limit: u32,
    /// Ceiling. Default 200.
    pub max_limit: u32,
    /// Multiplier applied on a drop, in `[0.5, 1.0)`. Default 0.9.
    pub backoff_ratio: f64,
    /// A sample slower than this counts as a drop. Default 5 s.
    pub timeout: Nanos,
}

impl Default for AimdConfig {
    fn default() -> Self {
        AimdConfig {
            initial_limit: 20,
            min_limit: 20,
            max_limit: 200,
            backoff_ratio: 0.9,
            timeout: Nanos::from_secs(5),
        }
    }
}

impl AimdConfig {
    /// Checks the ranges `AIMDLimit.Builder` enforces, plus a sane limit range.
    pub fn validate(&self) -> Result<(), FieldError> {
        check_limit_range(
            &["aimd.min_limit", "aimd.initial_limit", "aimd.max_limit"],
            self.min_limit,
            self.initial_limit,
            self.max_limit,
        )?;
        if !(self.backoff_ratio >= 0.5 && self.backoff_ratio < 1.0) {
            return Err(FieldError::new(
                FAMILY,
                "aimd.backoff_ratio",
                "in [0.5, 1.0)",
                self.backoff_ratio,
            ));
        }
        if self.timeout == Nanos::ZERO {
            return Err(FieldError::new(FAMILY, "aimd.timeout", "> 0", "0"));
        }
        Ok(())
    }
}

/// Loss-based additive-increase / multiplicative-decrease limit.
///
/// Source: Netflix concurrency-limits `AIMDLimit`. Per sample:
///
/// * drop, or `rtt > timeout`: `limit = floor(limit × backoff_ratio)`;
/// * otherwise, if `2 × inflight ≥ limit` (the limit is actually being
///   used): `limit = limit + 1`;
/// * then clamp to `[min_limit, max_limit]`.
///
/// Defaults: initial 20, min 20, max 200, backoff 0.9, timeout 5 s.
///
/// ```
/// use stormbreak_policy::limit::{Aimd, AimdConfig, LimitAlgorithm, Sample};
/// use stormbreak_policy::Nanos;
/// use rand::SeedableRng;
/// let mut aimd = Aimd::new(&AimdConfig { min_limit: 1, ..AimdConfig::default() }).unwrap();
/// let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(0);
/// aimd.on_sample(Nanos::ZERO, Sample { rtt: Nanos::from_millis(1), inflight: 20, dropped: true }, &mut rng);
/// assert_eq!(aimd.limit(), 18); // floor(20 × 0.9)
/// ```
#[derive(Clone, Debug)]
pub struct Aimd {
    limit: u32,
    min_limit: u32,
    max_limit: u32,
    backoff_ratio: f64,
    timeout: Nanos,
}

impl Aimd {
    /// Builds the limiter after validating `config`.
    pub fn new(config: &AimdConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(Aimd {
            limit: config.initial_limit,
            min_limit: config.min_limit,
            max_limit: config.max_limit,
            backoff_ratio: config.backoff_ratio,
            timeout: config.timeout,
        })
    }
}

impl LimitAlgorithm for Aimd {
    fn limit(&self) -> u32 {
        self.limit
    }

    fn min_limit(&self) -> u32 {
        self.min_limit
    }

    fn max_limit(&self) -> u32 {
        self.max_limit
    }

    fn on_sample<R: Rng + ?Sized>(&mut self, _now: Nanos, sample: Sample, _rng: &mut R) {
        let next = if sample.dropped || sample.rtt > self.timeout {
            truncate_to_limit(f64::from(self.limit) * self.backoff_ratio)
        } else if 2 * u64::from(sample.inflight) >= u64::from(self.limit) {
            self.limit.saturating_add(1)
        } else {
            self.limit
        };
        self.limit = next.clamp(self.min_limit, self.max_limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn aimd(min: u32, initial: u32, max: u32) -> Aimd {
        Aimd::new(&AimdConfig {
            min_limit: min,
            initial_limit: initial,
            max_limit: max,
            ..AimdConfig::default()
        })
        .unwrap()
    }

    fn feed(a: &mut Aimd, rtt: Nanos, inflight: u32, dropped: bool) {
        let mut rng = Pcg64Mcg::seed_from_u64(0);
        let sample = Sample {
            rtt,
            inflight,
            dropped,
        };
        a.on_sample(Nanos::ZERO, sample, &mut rng);
    }

    #[test]
    fn drop_multiplies_by_backoff() {
        let mut a = aimd(1, 20, 200);
        feed(&mut a, Nanos::from_millis(10), 20, true);
        assert_eq!(a.limit(), 18); // floor(20 × 0.9) = 18
        feed(&mut a, Nanos::from_millis(10), 20, true);
        assert_eq!(a.limit(), 16); // floor(18 × 0.9) = floor(16.2) = 16
    }

    #[test]
    fn default_floor_holds_a_drop_at_twenty() {
        let mut a = Aimd::new(&AimdConfig::default()).unwrap();
        feed(&mut a, Nanos::from_millis(10), 20, true);
        assert_eq!(a.limit(), 20); // 18 clamped up to min_limit 20
    }

    #[test]
    fn rtt_over_timeout_counts_as_drop_but_equal_does_not() {
        let mut a = aimd(1, 100, 200);
        feed(&mut a, Nanos::from_secs(5), 100, false);
        assert_eq!(a.limit(), 101, "rtt == timeout is not a drop (strict >)");
        feed(&mut a, Nanos::from_secs(5) + Nanos::NANOSECOND, 100, false);
        assert_eq!(a.limit(), 90); // floor(101 × 0.9) = floor(90.9) = 90
    }

    #[test]
    fn grows_only_when_half_the_limit_is_in_use() {
        let mut a = aimd(1, 40, 200);
        feed(&mut a, Nanos::from_millis(10), 19, false); // 2 × 19 = 38 < 40: app-limited
        assert_eq!(a.limit(), 40);
        feed(&mut a, Nanos::from_millis(10), 20, false); // 2 × 20 = 40 ≥ 40
        assert_eq!(a.limit(), 41);
    }

    #[test]
    fn growth_stops_at_max() {
        let mut a = aimd(1, 199, 200);
        feed(&mut a, Nanos::from_millis(1), 199, false);
        feed(&mut a, Nanos::from_millis(1), 200, false);
        assert_eq!(a.limit(), 200);
    }

    #[test]
    fn validation_names_fields() {
        let bad = AimdConfig {
            backoff_ratio: 1.0,
            ..AimdConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "limit: aimd.backoff_ratio must be in [0.5, 1.0), got 1"
        );
        let bad = AimdConfig {
            initial_limit: 10,
            ..AimdConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field(), "aimd.initial_limit");
        let bad = AimdConfig {
            timeout: Nanos::ZERO,
            ..AimdConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field(), "aimd.timeout");
    }
}
