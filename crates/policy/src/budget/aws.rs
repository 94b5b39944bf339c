//! The AWS SDK "standard" retry quota.

use super::FAMILY;
use super::{RetryBudget, RetryCause};
use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// Parameters of an [`AwsRetryQuota`], named after the SDK constants.
///
/// Defaults are the AWS SDKs' standard retry mode (the shared
/// "Retry behavior" reference; e.g. `@aws-sdk/middleware-retry` constants,
/// botocore `retries/standard.py`): `INITIAL_RETRY_TOKENS` 500,
/// `RETRY_COST` 5, `TIMEOUT_RETRY_COST` 10, `NO_RETRY_INCREMENT` 1.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AwsRetryQuotaConfig {
    /// Starting and maximum capacity.
    pub initial_tokens: u32,
    /// Cost of a retry after an error; at least 1.
    pub retry_cost: u32,
    /// Cost of a retry after a timeout; at least 1.
    pub timeout_retry_cost: u32,
    /// Capacity regained when a first attempt succeeds.
    pub no_retry_increment: u32,
}

impl Default for AwsRetryQuotaConfig {
    fn default() -> Self {
        AwsRetryQuotaConfig {
            initial_tokens: 500,
            retry_cost: 5,
            timeout_retry_cost: 10,
            no_retry_increment: 1,
        }
    }
}

impl AwsRetryQuotaConfig {
    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.retry_cost == 0 {
            return Err(FieldError::new(FAMILY, "retry_cost", "≥ 1", 0));
        }
        if self.timeout_retry_cost == 0 {
            return Err(FieldError::new(FAMILY, "timeout_retry_cost", "≥ 1", 0));
        }
        Ok(())
    }
}

/// The client-wide retry quota of the AWS SDKs' standard retry mode.
///
/// Source law: capacity starts at `INITIAL_RETRY_TOKENS` (500). A retry must
/// acquire `RETRY_COST` (5), or `TIMEOUT_RETRY_COST` (10) when the failed
/// attempt timed out; if capacity is short the retry is not made. When an
/// attempt succeeds, capacity is released: the cost its retry acquired, or
/// `NO_RETRY_INCREMENT` (1) if it was a first attempt, never above the
/// initial 500.
///
/// With no successes at all the quota therefore allows at most
/// 500 / 5 = 100 retries (50 after timeouts), however long the outage.
///
/// ```
/// use stormbreak_policy::budget::{AwsRetryQuota, AwsRetryQuotaConfig, RetryBudget, RetryCause};
/// use stormbreak_policy::Nanos;
/// let mut q = AwsRetryQuota::new(&AwsRetryQuotaConfig::default()).unwrap();
/// let retries = (0..1000).filter(|_| q.try_withdraw(Nanos::ZERO, RetryCause::Error)).count();
/// assert_eq!(retries, 100);
/// q.on_success(Nanos::ZERO, Some(RetryCause::Error)); // a retry succeeded: its 5 come back
/// assert!(q.try_withdraw(Nanos::ZERO, RetryCause::Error));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AwsRetryQuota {
    available: u32,
    capacity: u32,
    retry_cost: u32,
    timeout_retry_cost: u32,
    no_retry_increment: u32,
}

impl AwsRetryQuota {
    /// Validates `config`; the quota starts full.
    pub fn new(config: &AwsRetryQuotaConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(AwsRetryQuota {
            available: config.initial_tokens,
            capacity: config.initial_tokens,
            retry_cost: config.retry_cost,
            timeout_retry_cost: config.timeout_retry_cost,
            no_retry_increment: config.no_retry_increment,
        })
    }

    /// Capacity left.
    pub fn available(&self) -> u32 {
        self.available
    }

    #[inline]
    fn cost(&self, cause: RetryCause) -> u32 {
        match cause {
            RetryCause::Error => self.retry_cost,
            RetryCause::Timeout => self.timeout_retry_cost,
        }
    }
}

impl RetryBudget for AwsRetryQuota {
    #[inline]
    fn try_withdraw(&mut self, _now: Nanos, cause: RetryCause) -> bool {
        let cost = self.cost(cause);
        if cost > self.available {
            return false;
        }
        self.available -= cost;
        true
    }

    #[inline]
    fn on_success(&mut self, _now: Nanos, paid_retry: Option<RetryCause>) {
        let refund = paid_retry.map_or(self.no_retry_increment, |cause| self.cost(cause));
        self.available = self.available.saturating_add(refund).min(self.capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn quota() -> AwsRetryQuota {
        AwsRetryQuota::new(&AwsRetryQuotaConfig::default()).unwrap()
    }

    #[test]
    fn five_hundred_tokens_buy_one_hundred_retries_or_fifty_after_timeouts() {
        let mut q = quota();
        assert_eq!(
            (0..1000)
                .filter(|_| q.try_withdraw(Nanos::ZERO, RetryCause::Error))
                .count(),
            100
        );
        assert_eq!(q.available(), 0);
        let mut q = quota();
        assert_eq!(
            (0..1000)
                .filter(|_| q.try_withdraw(Nanos::ZERO, RetryCause::Timeout))
                .count(),
            50
        );
    }

    #[test]
    fn a_short_quota_refuses_the_expensive_retry_but_not_the_cheap_one() {
        // 500 − 49 × 10 = 10 → one timeout retry left; then 0. Refill 5 via a
        // succeeding error-retry: 5 < 10 refuses a timeout retry, 5 ≥ 5 allows an error retry.
        let mut q = quota();
        for _ in 0..50 {
            assert!(q.try_withdraw(Nanos::ZERO, RetryCause::Timeout));
        }
        q.on_success(Nanos::ZERO, Some(RetryCause::Error));
        assert_eq!(q.available(), 5);
        assert!(!q.try_withdraw(Nanos::ZERO, RetryCause::Timeout));
        assert_eq!(q.available(), 5, "a refused withdrawal costs nothing");
        assert!(q.try_withdraw(Nanos::ZERO, RetryCause::Error));
    }

    #[test]
    fn successes_refund_what_their_retry_cost_or_one() {
        let mut q = quota();
        assert!(q.try_withdraw(Nanos::ZERO, RetryCause::Timeout)); // 490
        assert!(q.try_withdraw(Nanos::ZERO, RetryCause::Error)); // 485
        q.on_success(Nanos::ZERO, Some(RetryCause::Timeout)); // 495
        assert_eq!(q.available(), 495);
        q.on_success(Nanos::ZERO, None); // 496
        q.on_success(Nanos::ZERO, None); // 497
        assert_eq!(q.available(), 497);
        q.on_success(Nanos::ZERO, Some(RetryCause::Error)); // 502 → capped at 500
        assert_eq!(q.available(), 500);
        q.on_success(Nanos::ZERO, None);
        assert_eq!(q.available(), 500, "never above the initial capacity");
    }

    #[test]
    fn failures_alone_do_not_drain_the_quota() {
        let mut q = quota();
        (0..1000).for_each(|_| {
            q.on_failure(Nanos::ZERO);
            q.on_timeout(Nanos::ZERO);
        });
        assert_eq!(q.available(), 500, "only retries spend capacity");
    }

    #[test]
    fn zero_costs_are_rejected_by_name() {
        let e = AwsRetryQuota::new(&AwsRetryQuotaConfig {
            retry_cost: 0,
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "budget: retry_cost must be ≥ 1, got 0");
        let e = AwsRetryQuota::new(&AwsRetryQuotaConfig {
            timeout_retry_cost: 0,
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.field(), "timeout_retry_cost");
    }

    proptest! {
        /// With no successes, the capacity spent never exceeds the initial 500,
        /// so retries ≤ 500/5 = 100 whatever the mix of causes.
        #[test]
        fn without_successes_at_most_initial_over_cost_retries(
            causes in prop::collection::vec(any::<bool>(), 0..2000),
        ) {
            let mut q = quota();
            let (mut granted, mut spent) = (0u32, 0u32);
            for timeout in causes {
                let cause = if timeout { RetryCause::Timeout } else { RetryCause::Error };
                if q.try_withdraw(Nanos::ZERO, cause) {
                    granted += 1;
                    spent += if timeout { 10 } else { 5 };
                }
            }
            prop_assert!(granted <= 100);
            prop_assert!(spent <= 500);
            prop_assert_eq!(q.available(), 500 - spent);
        }
    }
}
