//! The scenario syntax of retries and budgets: the policy crate's configs
//! as written in a scenario file, and their checks.

use serde::Deserialize;
use stormbreak_policy::budget::{AwsRetryQuotaConfig, GrpcThrottleConfig, RatioBudgetConfig};
use stormbreak_policy::retry::{RetryConfig, RetryPolicy};

/// A scenario's `retry = { … }` table: the policy crate's [`RetryConfig`]
/// as written (see `docs/scenarios.md` and the `retry` module docs).
pub type RetrySpec = RetryConfig;

/// A scenario's `budget = { kind = …, … }` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum BudgetSpec {
    /// Finagle/Linkerd ratio budget.
    Ratio(RatioBudgetConfig),
    /// gRPC retry throttling (gRFC A6).
    Grpc(GrpcThrottleConfig),
    /// AWS SDK standard retry quota.
    Aws(AwsRetryQuotaConfig),
}

impl BudgetSpec {
    /// What is wrong with the parameters, if anything.
    pub fn check(&self) -> Result<(), String> {
        match self {
            BudgetSpec::Ratio(c) => c.validate(),
            BudgetSpec::Grpc(c) => c.validate(),
            BudgetSpec::Aws(c) => c.validate(),
        }
        .map_err(|e| e.to_string())
    }
}

/// Checks a retry table the way the policy crate will build it.
pub fn check_retry(spec: &RetrySpec) -> Result<(), String> {
    RetryPolicy::new(spec)
        .map(|_| ())
        .map_err(|e| e.to_string())
}
