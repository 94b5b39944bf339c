//! Service-time distributions, sampled with `rand_distr` in nanoseconds.

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use serde::Deserialize;
use stormbreak_policy::{Nanos, units};

use crate::scenario::{MAX_DURATION, MAX_SIGMA};

/// How long an app worker spends on one request, as written in a scenario.
///
/// ```toml
/// service_time = { dist = "exponential", mean = "1ms" }
/// service_time = { dist = "constant", value = "5ms" }
/// service_time = { dist = "lognormal", median = "20ms", sigma = 0.5 }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(
    tag = "dist",
    rename_all = "lowercase",
    deny_unknown_fields,
    expecting = "a table with dist = \"constant\" | \"exponential\" | \"lognormal\", \
                 e.g. { dist = \"exponential\", mean = \"1ms\" }"
)]
pub enum ServiceTimeSpec {
    /// Memoryless service (M/M/c): the mean is the only parameter.
    Exponential {
        /// Mean service time.
        mean: Nanos,
    },
    /// Every request takes exactly `value`.
    Constant {
        /// The service time.
        value: Nanos,
    },
    /// Heavy-tailed service: `ln(T)` is normal with median `median` and
    /// standard deviation `sigma` (mean = median·e^(σ²/2)).
    Lognormal {
        /// Median service time.
        median: Nanos,
        /// Shape: standard deviation of `ln(T)`.
        sigma: f64,
    },
}

impl ServiceTimeSpec {
    /// Mean service time in nanoseconds.
    pub fn mean(&self) -> f64 {
        match *self {
            ServiceTimeSpec::Exponential { mean } => mean.as_nanos() as f64,
            ServiceTimeSpec::Constant { value } => value.as_nanos() as f64,
            ServiceTimeSpec::Lognormal { median, sigma } => {
                median.as_nanos() as f64 * (sigma * sigma / 2.0).exp()
            }
        }
    }

    /// What is wrong with the parameters, if anything, naming the field.
    ///
    /// Beyond what the samplers need (a positive mean or median, a finite
    /// sigma), times are capped at [`MAX_DURATION`] and sigma at
    /// [`MAX_SIGMA`] so that samples stay far inside the nanosecond clock.
    pub fn check(&self) -> Result<(), String> {
        let (field, t) = match *self {
            ServiceTimeSpec::Exponential { mean } => ("mean", mean),
            ServiceTimeSpec::Constant { value } => ("value", value),
            ServiceTimeSpec::Lognormal { median, .. } => ("median", median),
        };
        let positive = !matches!(self, ServiceTimeSpec::Constant { .. });
        if positive && t == Nanos::ZERO {
            return Err(format!("{field} must be > 0"));
        }
        if t > MAX_DURATION {
            return Err(format!(
                "{field} must be at most {}, got {}",
                units::format_duration(MAX_DURATION),
                units::format_duration(t)
            ));
        }
        if let ServiceTimeSpec::Lognormal { sigma, .. } = *self
            && !(sigma.is_finite() && (0.0..=MAX_SIGMA).contains(&sigma))
        {
            return Err(format!(
                "sigma must be a finite number from 0 to {MAX_SIGMA}, got {sigma}"
            ));
        }
        Ok(())
    }

    /// A sampler, scaled by `factor` (the service's slowdown multiplier).
    pub fn sampler(&self) -> ServiceTime {
        match *self {
            ServiceTimeSpec::Exponential { mean } => {
                ServiceTime::Exp(Exp::new(1.0 / mean.as_nanos() as f64).expect("checked"))
            }
            ServiceTimeSpec::Constant { value } => ServiceTime::Const(value),
            ServiceTimeSpec::Lognormal { median, sigma } => ServiceTime::LogNormal(
                LogNormal::new((median.as_nanos() as f64).ln(), sigma).expect("checked"),
            ),
        }
    }
}

/// A ready-to-sample service-time distribution.
#[derive(Debug, Clone, Copy)]
pub enum ServiceTime {
    /// Exponential with rate 1/mean.
    Exp(Exp<f64>),
    /// Constant.
    Const(Nanos),
    /// Lognormal.
    LogNormal(LogNormal<f64>),
}

impl ServiceTime {
    /// One service time in nanoseconds (at least 1 ns).
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Nanos {
        let t = match self {
            ServiceTime::Exp(d) => d.sample(rng),
            ServiceTime::Const(v) => return (*v).max(Nanos::NANOSECOND),
            ServiceTime::LogNormal(d) => d.sample(rng),
        };
        (Nanos::from_nanos(t.round() as u64)).max(Nanos::NANOSECOND)
    }
}
