use super::FAMILY;
use super::{LimitAlgorithm, Sample};
use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Config for [`Fixed`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FixedConfig {
    /// The constant limit. Default 1024, Envoy's cluster circuit-breaker
    /// `max_requests` default.
    pub limit: u32,
}

impl Default for FixedConfig {
    fn default() -> Self {
        FixedConfig { limit: 1024 }
    }
}

impl FixedConfig {
    /// Rejects a zero limit, which would refuse every request forever.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.limit < 1 {
            return Err(FieldError::new(FAMILY, "fixed.limit", "≥ 1", self.limit));
        }
        Ok(())
    }
}

/// A constant concurrency limit that never adapts.
///
/// Source: an Istio sidecar's `DestinationRule`
/// `connectionPool.http.http2MaxRequests` (Istio's documented default
/// 2^32−1, i.e. unlimited), which Istio renders as the Envoy cluster
/// circuit breaker `max_requests` (Envoy default **1024**, used here); also
/// Netflix's `FixedLimit`. This is the limit the 2026-08-17 sidecar hit: it
/// holds no matter how healthy or sick the upstream is.
///
/// ```
/// use stormbreak_policy::limit::{Fixed, FixedConfig, LimitAlgorithm};
/// let fixed = Fixed::new(&FixedConfig::default()).unwrap();
/// assert_eq!(fixed.limit(), 1024);
/// ```
#[derive(Clone, Debug)]
pub struct Fixed {
    limit: u32,
}

impl Fixed {
    /// Builds the limiter after validating `config`.
    pub fn new(config: &FixedConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(Fixed {
            limit: config.limit,
        })
    }
}

impl LimitAlgorithm for Fixed {
    fn limit(&self) -> u32 {
        self.limit
    }

    fn min_limit(&self) -> u32 {
        self.limit
    }

    fn max_limit(&self) -> u32 {
        self.limit
    }

    fn on_sample<R: Rng + ?Sized>(&mut self, _now: Nanos, _sample: Sample, _rng: &mut R) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn ignores_drops_and_slow_samples() {
        let mut fixed = Fixed::new(&FixedConfig { limit: 7 }).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        for i in 0..100 {
            let sample = Sample {
                rtt: Nanos::from_secs(i),
                inflight: 7,
                dropped: i % 2 == 0,
            };
            fixed.on_sample(Nanos::from_nanos(i), sample, &mut rng);
        }
        assert_eq!(fixed.limit(), 7);
    }

    #[test]
    fn zero_is_rejected_with_field_name() {
        let err = Fixed::new(&FixedConfig { limit: 0 }).unwrap_err();
        assert_eq!(err.to_string(), "limit: fixed.limit must be ≥ 1, got 0");
    }
}
