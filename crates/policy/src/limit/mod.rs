//! Concurrency limiters: how many requests may be in flight at once.
//!
//! A limit algorithm ([`LimitAlgorithm`]) turns completed-request samples
//! (round-trip time, in-flight count at admission, dropped or not) into a
//! limit. A [`Limiter`] wraps one algorithm, counts in-flight requests, admits
//! while `inflight < limit` and feeds each finished request back as a sample.
//!
//! | algorithm | source law | signal |
//! |---|---|---|
//! | [`Fixed`] | Istio `http2MaxRequests` / Envoy circuit-breaker `max_requests` | none: a constant |
//! | [`Aimd`] | Netflix concurrency-limits `AIMDLimit` | loss (drop or rtt > timeout) |
//! | [`Vegas`] | Netflix concurrency-limits `VegasLimit` (TCP Vegas) | queue estimate from rtt vs no-load rtt |
//! | [`Gradient2`] | Netflix concurrency-limits `Gradient2Limit` | short rtt vs long-term average rtt |
//! | [`EnvoyGradient`] | Envoy adaptive concurrency filter, gradient controller | sample-window percentile vs probed minRTT |
//! | [`Windowed`] | Netflix concurrency-limits `WindowedLimit` | aggregates samples into windows for any of the above |
//!
//! [`LimitConfig`] / [`AnyLimit`] pick an algorithm from a config file without
//! generics:
//!
//! ```
//! use stormbreak_policy::limit::{LimitConfig, Limiter, Outcome};
//! use stormbreak_policy::Nanos;
//! use rand::SeedableRng;
//!
//! let config: LimitConfig = serde_json::from_str(r#"{"kind": "aimd", "timeout": "200ms"}"#).unwrap();
//! let mut limiter = Limiter::new(config.build().unwrap());
//! let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
//!
//! let permit = limiter.try_acquire(Nanos::ZERO).expect("AIMD starts at 20");
//! limiter.release(Nanos::from_millis(5), permit, Outcome::Success, &mut rng);
//! assert_eq!(limiter.inflight(), 0);
//! ```

mod aimd;
mod any;
mod envoy_gradient;
mod error;
mod fixed;
mod gradient2;
mod limiter;
mod queue;
mod sample_buffer;
mod vegas;
mod windowed;

pub use aimd::{Aimd, AimdConfig};
pub use any::{AnyLimit, LimitConfig, WindowedLimitConfig};
pub use envoy_gradient::{EnvoyGradient, EnvoyGradientConfig};
pub use fixed::{Fixed, FixedConfig};
pub use gradient2::{Gradient2, Gradient2Config};
pub use limiter::{Limiter, Outcome, Permit};
pub use queue::QueueConfig;
pub use vegas::{Vegas, VegasConfig};
pub use windowed::{Windowed, WindowedConfig};

use crate::Nanos;
use rand::Rng;

/// The family named in this module's [`FieldError`]s.
const FAMILY: &str = "limit";

/// One finished request, as a limit algorithm sees it.
///
/// Mirrors the arguments of Netflix's `Limit.onSample(startTime, rtt, inflight,
/// didDrop)`; the start time is `now - rtt`, so it is not stored twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Round-trip time of the request, admission to completion.
    pub rtt: Nanos,
    /// Requests in flight when this one was admitted, itself included
    /// (Netflix passes the in-flight count at acquisition, not at release).
    pub inflight: u32,
    /// The request was dropped: rejected downstream or timed out.
    pub dropped: bool,
}

/// A rule that turns completed-request samples into a concurrency limit.
///
/// Implementations are plain state machines: the caller supplies time and
/// randomness, so identical inputs give identical limits.
pub trait LimitAlgorithm {
    /// The current limit: admit while in-flight is below it.
    fn limit(&self) -> u32;

    /// The smallest limit this algorithm can ever report.
    fn min_limit(&self) -> u32;

    /// The largest limit this algorithm can ever report.
    fn max_limit(&self) -> u32;

    /// Feeds one finished request, completed at `now`.
    ///
    /// `rng` is only drawn from by algorithms whose source randomises
    /// (Vegas' probe jitter, Envoy's minRTT jitter and sample reservoir).
    fn on_sample<R: Rng + ?Sized>(&mut self, now: Nanos, sample: Sample, rng: &mut R);

    /// Runs transitions that are due by `now` even when no sample arrives
    /// (Envoy's timers). Algorithms driven only by samples do nothing.
    fn advance(&mut self, now: Nanos) {
        let _ = now;
    }
}

impl<A: LimitAlgorithm + ?Sized> LimitAlgorithm for Box<A> {
    fn limit(&self) -> u32 {
        (**self).limit()
    }

    fn min_limit(&self) -> u32 {
        (**self).min_limit()
    }

    fn max_limit(&self) -> u32 {
        (**self).max_limit()
    }

    fn on_sample<R: Rng + ?Sized>(&mut self, now: Nanos, sample: Sample, rng: &mut R) {
        (**self).on_sample(now, sample, rng)
    }

    fn advance(&mut self, now: Nanos) {
        (**self).advance(now)
    }
}

/// `floor(log10(n))`, at least 1: Netflix's `Log10RootIntFunction`, which the
/// Vegas thresholds are built from (0 and 1..=99 all map to 1).
pub(crate) fn log10_at_least_one(n: u32) -> u32 {
    let mut digits = 0;
    let mut rest = n;
    while rest >= 10 {
        rest /= 10;
        digits += 1;
    }
    digits.max(1)
}

/// Converts a non-negative estimate to a limit the way Java's `(int)` cast
/// does: truncate toward zero, saturate at the integer range.
pub(crate) fn truncate_to_limit(estimate: f64) -> u32 {
    // `as` saturates and maps NaN to 0, which every caller clamps afterwards.
    estimate as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log10_matches_netflix_lookup_table() {
        // Netflix: max(1, (int) Math.log10(i)); log10(0) = -inf -> 1.
        assert_eq!(log10_at_least_one(0), 1);
        assert_eq!(log10_at_least_one(1), 1);
        assert_eq!(log10_at_least_one(9), 1);
        assert_eq!(log10_at_least_one(99), 1);
        assert_eq!(log10_at_least_one(100), 2);
        assert_eq!(log10_at_least_one(999), 2);
        assert_eq!(log10_at_least_one(1000), 3);
        assert_eq!(log10_at_least_one(u32::MAX), 9);
    }

    #[test]
    fn truncation_follows_java_int_cast() {
        assert_eq!(truncate_to_limit(20.99), 20);
        assert_eq!(truncate_to_limit(-3.0), 0);
        assert_eq!(truncate_to_limit(f64::NAN), 0);
        assert_eq!(truncate_to_limit(1e12), u32::MAX);
    }
}
