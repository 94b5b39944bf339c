//! Whether a retry may be spent at all, across every request of a client.
//!
//! A per-request limit (`max_attempts`) bounds amplification at
//! `max_attempts ×`; when everything fails that is exactly the storm of the
//! 2026-08-17 incident (token traffic ×10 while demand stayed flat). A budget
//! bounds it *across* requests instead: retries may only be a fraction of
//! recent traffic, or may only continue while most calls succeed.
//!
//! | budget | law | defaults |
//! |---|---|---|
//! | [`RatioBudget`] | Finagle `RetryBudget` / Linkerd retry budget: each request deposits `ratio` tokens that expire after `ttl`, plus a standing reserve | ratio 0.2, 10 retries/s, ttl 10 s |
//! | [`GrpcThrottle`] | gRPC retry throttling (gRFC A6): tokens start at `maxTokens`, −1 per failure, +`tokenRatio` per success; retry only while tokens > `maxTokens/2` | the A6 example: 10 tokens, ratio 0.1 |
//! | [`AwsRetryQuota`] | AWS SDK "standard" retry quota: 500 tokens, a retry costs 5 (10 after a timeout), a success refunds its retry's cost or adds 1 | 500 / 5 / 10 / 1 |
//! | [`TokenBucket`] | Brooker's retry token bucket: a retry spends `cost`, every success earns `reward`; retries ≤ (reward × successes + capacity) / cost | capacity 10, cost 1, reward 0.1 |
//! | [`Unlimited`] | no budget | — |
//!
//! [`BudgetConfig`] is the tagged table a config file names one with
//! (`{ kind = "bucket", reward = 0.05 }`), and [`AnyBudget`] the budget it
//! builds. All of them implement [`RetryBudget`], which a
//! [`RetryState`](crate::retry::RetryState) consults through
//! [`on_outcome_budgeted`](crate::retry::RetryState::on_outcome_budgeted).

mod any;
mod aws;
mod bucket;
mod grpc;
mod ratio;

pub use any::{AnyBudget, BudgetConfig};
pub use aws::{AwsRetryQuota, AwsRetryQuotaConfig};
pub use bucket::{TokenBucket, TokenBucketConfig};
pub use grpc::{GrpcThrottle, GrpcThrottleConfig};
pub use ratio::{RatioBudget, RatioBudgetConfig};

use crate::Nanos;

/// The family named in this module's [`FieldError`]s.
const FAMILY: &str = "budget";

/// Why a retry is wanted; the AWS quota charges a retry after a timeout double.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryCause {
    /// The previous attempt failed with an error response, reset or refused connection.
    Error,
    /// The previous attempt timed out.
    Timeout,
}

/// A client-wide allowance of retries, fed by what happens to every request.
///
/// The caller (usually [`RetryState`](crate::retry::RetryState)) reports:
/// * [`on_request`](Self::on_request) when a logical request sends its first attempt;
/// * [`on_success`](Self::on_success) when an attempt succeeds;
/// * [`on_failure`](Self::on_failure) / [`on_timeout`](Self::on_timeout) when an
///   attempt fails in a way the retry policy would retry (or the server
///   pushed back with "do not retry"), as gRPC counts failures;
/// * [`try_withdraw`](Self::try_withdraw) before each retry.
///
/// Methods a law ignores default to no-ops. Nothing here allocates.
pub trait RetryBudget {
    /// A logical request sent its first attempt.
    fn on_request(&mut self, now: Nanos) {
        let _ = now;
    }

    /// May a retry be sent now? Consumes the allowance if yes.
    fn try_withdraw(&mut self, now: Nanos, cause: RetryCause) -> bool;

    /// An attempt succeeded. `paid_retry` is the cause the attempt was
    /// withdrawn for if it was a retry, `None` for a first attempt.
    fn on_success(&mut self, now: Nanos, paid_retry: Option<RetryCause>) {
        let _ = (now, paid_retry);
    }

    /// An attempt failed with a retryable error.
    fn on_failure(&mut self, now: Nanos) {
        let _ = now;
    }

    /// An attempt timed out; by default the same as a failure.
    fn on_timeout(&mut self, now: Nanos) {
        self.on_failure(now);
    }
}

/// No budget: every retry the per-request policy allows is sent.
///
/// This is what an Envoy route without `retry_budget`, or most hand-written
/// client retry loops, amount to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unlimited;

impl RetryBudget for Unlimited {
    #[inline]
    fn try_withdraw(&mut self, _now: Nanos, _cause: RetryCause) -> bool {
        true
    }
}

impl<B: RetryBudget + ?Sized> RetryBudget for &mut B {
    fn on_request(&mut self, now: Nanos) {
        (**self).on_request(now)
    }
    fn try_withdraw(&mut self, now: Nanos, cause: RetryCause) -> bool {
        (**self).try_withdraw(now, cause)
    }
    fn on_success(&mut self, now: Nanos, paid_retry: Option<RetryCause>) {
        (**self).on_success(now, paid_retry)
    }
    fn on_failure(&mut self, now: Nanos) {
        (**self).on_failure(now)
    }
    fn on_timeout(&mut self, now: Nanos) {
        (**self).on_timeout(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_always_allows() {
        let mut b = Unlimited;
        b.on_request(Nanos::ZERO);
        b.on_failure(Nanos::ZERO);
        assert!((0..10_000).all(|t| b.try_withdraw(Nanos::from_nanos(t), RetryCause::Error)));
    }

    #[test]
    fn a_mutable_reference_is_a_budget_too() {
        fn spend(mut b: impl RetryBudget) -> bool {
            b.try_withdraw(Nanos::ZERO, RetryCause::Timeout)
        }
        let mut quota = AwsRetryQuota::new(&AwsRetryQuotaConfig::default()).unwrap();
        assert!(spend(&mut quota));
        assert_eq!(quota.available(), 490, "the timeout retry cost 10 of 500");
    }
}
