//! gRPC retry throttling (gRFC A6, "Throttling Retry Attempts and Hedged RPCs").

use super::FAMILY;
use super::{RetryBudget, RetryCause};
use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// Tokens are kept in thousandths: A6 supports `tokenRatio` to three decimal
/// places, and gRPC's own implementations count milli-tokens as integers.
const MILLI: u32 = 1000;

/// Parameters of a [`GrpcThrottle`], named as in the service config's
/// `retryThrottling`.
///
/// A6 makes both fields required and gives `maxTokens: 10, tokenRatio: 0.1`
/// as its example ("throttles when the failure ratio exceeds ~10 %"); that
/// example is the default here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GrpcThrottleConfig {
    /// Starting and maximum token count, in `1..=1000` (A6: greater than
    /// zero; grpc-go rejects more than 1000).
    pub max_tokens: u32,
    /// Tokens regained per successful attempt; positive, three decimals.
    pub token_ratio: f64,
}

impl Default for GrpcThrottleConfig {
    fn default() -> Self {
        GrpcThrottleConfig {
            max_tokens: 10,
            token_ratio: 0.1,
        }
    }
}

impl GrpcThrottleConfig {
    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(1..=1000).contains(&self.max_tokens) {
            return Err(FieldError::new(
                FAMILY,
                "max_tokens",
                "between 1 and 1000",
                self.max_tokens,
            ));
        }
        let milli = self.token_ratio * f64::from(MILLI);
        if !(self.token_ratio.is_finite() && milli.round() >= 1.0 && self.token_ratio <= 1000.0) {
            return Err(FieldError::new(
                FAMILY,
                "token_ratio",
                "between 0.001 and 1000 (three decimals are kept)",
                self.token_ratio,
            ));
        }
        Ok(())
    }
}

/// Client-side retry throttling as specified by gRPC (gRFC A6).
///
/// Source law: per server, `token_count` starts at `maxTokens` and stays in
/// `[0, maxTokens]`; every failed attempt subtracts 1, every successful one
/// adds `tokenRatio`; retries are allowed only while
/// `token_count > maxTokens / 2`. Only failures the retry policy would retry
/// (or a "do not retry" pushback) count, so malformed requests do not
/// throttle a healthy server. Withdrawing does not spend tokens: the
/// retry's own failure will.
///
/// Defaults: the A6 example, `maxTokens` 10, `tokenRatio` 0.1. Under total
/// failure retries therefore stop after 5 failures: the 5th takes the count
/// to 5, which is not above 10 / 2.
///
/// ```
/// use stormbreak_policy::budget::{GrpcThrottle, GrpcThrottleConfig, RetryBudget, RetryCause};
/// use stormbreak_policy::Nanos;
/// let mut t = GrpcThrottle::new(&GrpcThrottleConfig::default()).unwrap();
/// let mut retries = 0;
/// for _ in 0..100 {
///     t.on_failure(Nanos::ZERO);
///     if t.try_withdraw(Nanos::ZERO, RetryCause::Error) { retries += 1 }
/// }
/// assert_eq!(retries, 4); // after failures 1..=4 the count is 9, 8, 7, 6 > 5
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrpcThrottle {
    milli_tokens: u32,
    max_milli_tokens: u32,
    milli_ratio: u32,
}

impl GrpcThrottle {
    /// Validates `config`; the bucket starts full.
    pub fn new(config: &GrpcThrottleConfig) -> Result<Self, FieldError> {
        config.validate()?;
        let max = config.max_tokens * MILLI;
        Ok(GrpcThrottle {
            milli_tokens: max,
            max_milli_tokens: max,
            milli_ratio: (config.token_ratio * f64::from(MILLI)).round() as u32,
        })
    }

    /// The current `token_count`.
    pub fn tokens(&self) -> f64 {
        f64::from(self.milli_tokens) / f64::from(MILLI)
    }

    /// Whether retries are currently allowed: `token_count > maxTokens / 2`.
    #[inline]
    pub fn allows_retries(&self) -> bool {
        // Doubling both sides keeps the comparison exact for odd maxima.
        u64::from(self.milli_tokens) * 2 > u64::from(self.max_milli_tokens)
    }
}

impl RetryBudget for GrpcThrottle {
    #[inline]
    fn try_withdraw(&mut self, _now: Nanos, _cause: RetryCause) -> bool {
        self.allows_retries()
    }

    #[inline]
    fn on_success(&mut self, _now: Nanos, _paid_retry: Option<RetryCause>) {
        self.milli_tokens = (self.milli_tokens + self.milli_ratio).min(self.max_milli_tokens);
    }

    #[inline]
    fn on_failure(&mut self, _now: Nanos) {
        self.milli_tokens = self.milli_tokens.saturating_sub(MILLI);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn throttle(max_tokens: u32, token_ratio: f64) -> GrpcThrottle {
        GrpcThrottle::new(&GrpcThrottleConfig {
            max_tokens,
            token_ratio,
        })
        .unwrap()
    }

    #[test]
    fn starts_full_and_throttles_at_half() {
        let mut t = throttle(10, 0.1);
        assert_eq!(t.tokens(), 10.0);
        for expected in [9.0, 8.0, 7.0, 6.0] {
            t.on_failure(Nanos::ZERO);
            assert_eq!(t.tokens(), expected);
            assert!(
                t.try_withdraw(Nanos::ZERO, RetryCause::Error),
                "{expected} > 5"
            );
        }
        t.on_failure(Nanos::ZERO);
        assert_eq!(t.tokens(), 5.0);
        assert!(
            !t.try_withdraw(Nanos::ZERO, RetryCause::Error),
            "5 is not > 5"
        );
    }

    #[test]
    fn one_success_above_the_threshold_reopens_retries() {
        // At 5.0, one success adds 0.1 → 5.1 > 5.
        let mut t = throttle(10, 0.1);
        (0..5).for_each(|_| t.on_failure(Nanos::ZERO));
        assert!(!t.allows_retries());
        t.on_success(Nanos::ZERO, None);
        assert!((t.tokens() - 5.1).abs() < 1e-9);
        assert!(t.allows_retries());
        // And ten successes are needed to undo one failure.
        t.on_failure(Nanos::ZERO);
        assert!((t.tokens() - 4.1).abs() < 1e-9);
        (0..9).for_each(|_| t.on_success(Nanos::ZERO, None));
        assert!((t.tokens() - 5.0).abs() < 1e-9);
        assert!(!t.allows_retries());
    }

    #[test]
    fn count_stays_between_zero_and_max() {
        let mut t = throttle(3, 0.5);
        (0..10).for_each(|_| t.on_failure(Nanos::ZERO));
        assert_eq!(t.tokens(), 0.0);
        (0..100).for_each(|_| t.on_success(Nanos::ZERO, None));
        assert_eq!(t.tokens(), 3.0);
    }

    #[test]
    fn odd_maximum_compares_exactly() {
        // max 3: threshold 1.5. 2 > 1.5 retries; 1 does not.
        let mut t = throttle(3, 0.1);
        t.on_failure(Nanos::ZERO);
        assert!(t.allows_retries());
        t.on_failure(Nanos::ZERO);
        assert!(!t.allows_retries());
    }

    #[test]
    fn ratio_keeps_three_decimals() {
        let mut t = throttle(10, 0.0125); // rounds to 0.013
        (0..6).for_each(|_| t.on_failure(Nanos::ZERO));
        t.on_success(Nanos::ZERO, None);
        assert!((t.tokens() - 4.013).abs() < 1e-9);
    }

    #[test]
    fn invalid_configs_are_rejected_by_name() {
        let e = GrpcThrottle::new(&GrpcThrottleConfig {
            max_tokens: 0,
            token_ratio: 0.1,
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "budget: max_tokens must be between 1 and 1000, got 0"
        );
        let e = GrpcThrottle::new(&GrpcThrottleConfig {
            max_tokens: 1001,
            token_ratio: 0.1,
        })
        .unwrap_err();
        assert_eq!(e.field(), "max_tokens");
        for bad in [0.0, -1.0, 0.0004, f64::INFINITY, f64::NAN] {
            let e = GrpcThrottle::new(&GrpcThrottleConfig {
                max_tokens: 10,
                token_ratio: bad,
            })
            .unwrap_err();
            assert_eq!(e.field(), "token_ratio", "{bad}");
        }
    }

    proptest! {
        /// Under total failure (no success ever), whatever the interleaving of
        /// failures and retry requests, retries are granted only while fewer than
        /// maxTokens/2 failures have been seen: at most ⌈maxTokens/2⌉ − 1 of them
        /// after failures, and none once maxTokens/2 failures have happened.
        #[test]
        fn without_successes_retries_stop_after_half_the_tokens(
            max_tokens in 1u32..=1000,
            ops in prop::collection::vec(any::<bool>(), 0..3000),
        ) {
            let mut t = throttle(max_tokens, 0.1);
            let mut failures = 0u32;
            let mut granted_after_a_failure = 0u32;
            for is_failure in ops {
                if is_failure {
                    t.on_failure(Nanos::ZERO);
                    failures += 1;
                } else if t.try_withdraw(Nanos::ZERO, RetryCause::Error) {
                    prop_assert!(2 * failures < max_tokens, "retry granted after {} failures of {}", failures, max_tokens);
                    if failures > 0 { granted_after_a_failure = failures; }
                }
            }
            prop_assert!(granted_after_a_failure < max_tokens.div_ceil(2));
        }

        /// The count is a pure function of the failure and success tallies:
        /// max − failures + ratio × successes, clamped to [0, max] step by step.
        #[test]
        fn tokens_follow_the_a6_update_rule(
            max_tokens in 1u32..=100,
            ratio_milli in 1u32..=2000,
            ops in prop::collection::vec(any::<bool>(), 0..500),
        ) {
            let mut t = throttle(max_tokens, f64::from(ratio_milli) / 1000.0);
            let mut model = f64::from(max_tokens);
            for success in ops {
                if success {
                    t.on_success(Nanos::ZERO, None);
                    model = (model + f64::from(ratio_milli) / 1000.0).min(f64::from(max_tokens));
                } else {
                    t.on_failure(Nanos::ZERO);
                    model = (model - 1.0).max(0.0);
                }
                prop_assert!((t.tokens() - model).abs() < 1e-6);
                prop_assert_eq!(t.allows_retries(), model > f64::from(max_tokens) / 2.0 + 1e-9);
            }
        }
    }
}
