//! A budget chosen by configuration: the tagged table a person writes
//! (`{ kind = "ratio", retry_ratio = 0.1 }`) and the budget it builds, so
//! the simulator's scenarios, the client layer and the gateway read the same
//! syntax and dispatch without a box.

use serde::{Deserialize, Serialize};

use super::{
    AwsRetryQuota, AwsRetryQuotaConfig, GrpcThrottle, GrpcThrottleConfig, RatioBudget,
    RatioBudgetConfig, RetryBudget, RetryCause, TokenBucket, TokenBucketConfig, Unlimited,
};
use crate::{FieldError, Nanos};

/// Which budget law, with its parameters, as written in a config file.
///
/// ```
/// use stormbreak_policy::Nanos;
/// use stormbreak_policy::budget::{BudgetConfig, RetryBudget, RetryCause};
/// let config: BudgetConfig = toml::from_str(r#"kind = "bucket""#).unwrap();
/// let mut budget = config.build().unwrap();
/// let sent = (0..100).filter(|_| budget.try_withdraw(Nanos::ZERO, RetryCause::Error)).count();
/// assert_eq!(sent, 10, "the bucket starts with 10 tokens");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    deny_unknown_fields,
    expecting = "a budget table with kind = \"ratio\" | \"grpc\" | \"aws\" | \"bucket\""
)]
#[non_exhaustive]
pub enum BudgetConfig {
    /// Finagle/Linkerd ratio budget.
    Ratio(RatioBudgetConfig),
    /// gRPC retry throttling (gRFC A6).
    Grpc(GrpcThrottleConfig),
    /// AWS SDK standard retry quota.
    Aws(AwsRetryQuotaConfig),
    /// Brooker's retry token bucket.
    Bucket(TokenBucketConfig),
}

impl BudgetConfig {
    /// Every field in range.
    pub fn validate(&self) -> Result<(), FieldError> {
        match self {
            BudgetConfig::Ratio(c) => c.validate(),
            BudgetConfig::Grpc(c) => c.validate(),
            BudgetConfig::Aws(c) => c.validate(),
            BudgetConfig::Bucket(c) => c.validate(),
        }
    }

    /// Validates and builds the budget.
    pub fn build(&self) -> Result<AnyBudget, FieldError> {
        Ok(match self {
            BudgetConfig::Ratio(c) => AnyBudget::Ratio(RatioBudget::new(c)?),
            BudgetConfig::Grpc(c) => AnyBudget::Grpc(GrpcThrottle::new(c)?),
            BudgetConfig::Aws(c) => AnyBudget::Aws(AwsRetryQuota::new(c)?),
            BudgetConfig::Bucket(c) => AnyBudget::Bucket(TokenBucket::new(c)?),
        })
    }
}

/// Any budget of this crate, dispatched by `match` rather than through a
/// `dyn` pointer; [`Unlimited`] is what a caller with no budget table gets.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyBudget {
    /// No budget.
    Unlimited(Unlimited),
    /// See [`RatioBudget`].
    Ratio(RatioBudget),
    /// See [`GrpcThrottle`].
    Grpc(GrpcThrottle),
    /// See [`AwsRetryQuota`].
    Aws(AwsRetryQuota),
    /// See [`TokenBucket`].
    Bucket(TokenBucket),
}

impl Default for AnyBudget {
    fn default() -> Self {
        AnyBudget::Unlimited(Unlimited)
    }
}

macro_rules! each {
    ($self:ident, $b:ident => $body:expr) => {
        match $self {
            AnyBudget::Unlimited($b) => $body,
            AnyBudget::Ratio($b) => $body,
            AnyBudget::Grpc($b) => $body,
            AnyBudget::Aws($b) => $body,
            AnyBudget::Bucket($b) => $body,
        }
    };
}

impl RetryBudget for AnyBudget {
    #[inline]
    fn on_request(&mut self, now: Nanos) {
        each!(self, b => b.on_request(now))
    }
    #[inline]
    fn try_withdraw(&mut self, now: Nanos, cause: RetryCause) -> bool {
        each!(self, b => b.try_withdraw(now, cause))
    }
    #[inline]
    fn on_success(&mut self, now: Nanos, paid_retry: Option<RetryCause>) {
        each!(self, b => b.on_success(now, paid_retry))
    }
    #[inline]
    fn on_failure(&mut self, now: Nanos) {
        each!(self, b => b.on_failure(now))
    }
    #[inline]
    fn on_timeout(&mut self, now: Nanos) {
        each!(self, b => b.on_timeout(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_builds_its_law_and_bad_fields_are_named() {
        for (text, first_ten) in [
            (r#"kind = "ratio""#, true),
            (r#"kind = "grpc""#, true),
            (r#"kind = "aws""#, true),
            (r#"kind = "bucket""#, true),
        ] {
            let c: BudgetConfig = toml::from_str(text).unwrap();
            let mut b = c.build().unwrap();
            let t = Nanos::ZERO;
            assert_eq!(b.try_withdraw(t, RetryCause::Error), first_ten, "{text}");
        }
        let bad: BudgetConfig = toml::from_str("kind = \"bucket\"\ncost = 0.0").unwrap();
        assert_eq!(bad.build().unwrap_err().field(), "cost");
        let e = toml::from_str::<BudgetConfig>(r#"kind = "hope""#).unwrap_err();
        assert!(e.to_string().contains("hope"), "{e}");
    }

    #[test]
    fn dispatch_reaches_the_law_s_own_timeout_rule() {
        // The AWS quota charges a timeout retry double: through AnyBudget too.
        let mut b = BudgetConfig::Aws(AwsRetryQuotaConfig::default())
            .build()
            .unwrap();
        assert!(b.try_withdraw(Nanos::ZERO, RetryCause::Timeout));
        let AnyBudget::Aws(q) = &b else {
            unreachable!()
        };
        assert_eq!(q.available(), 490);
    }
}
