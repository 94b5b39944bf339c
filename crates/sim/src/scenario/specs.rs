//! The scenario syntax of retries and budgets: the policy crate's configs
//! as written in a scenario file, and their checks.

use std::fmt;

use serde::Deserialize;
use stormbreak_policy::budget::{
    AwsRetryQuotaConfig, GrpcThrottleConfig, RatioBudgetConfig, TokenBucketConfig,
};
use stormbreak_policy::retry::{RetryConfig, RetryPolicy};
use stormbreak_policy::units::format_duration;

use super::{MAX_ATTEMPTS, MAX_DURATION};

/// A scenario's `retry = { … }` table: the policy crate's [`RetryConfig`]
/// as written (see `docs/scenarios.md` and the `retry` module docs).
pub type RetrySpec = RetryConfig;

/// A scenario's `budget = { kind = …, … }` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    deny_unknown_fields,
    expecting = "a budget table with kind = \"ratio\" | \"grpc\" | \"aws\""
)]
pub enum BudgetSpec {
    /// Finagle/Linkerd ratio budget.
    Ratio(RatioBudgetConfig),
    /// gRPC retry throttling (gRFC A6).
    Grpc(GrpcThrottleConfig),
    /// AWS SDK standard retry quota.
    Aws(AwsRetryQuotaConfig),
    /// Brooker's retry token bucket.
    Bucket(TokenBucketConfig),
}

/// A rejected field of a retry or budget table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// The field inside the table, dotted for nested ones (`"backoff.max"`),
    /// so the error can point at it.
    pub field: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl BudgetSpec {
    /// What is wrong with the parameters, if anything.
    pub fn check(&self) -> Result<(), FieldProblem> {
        match self {
            BudgetSpec::Ratio(c) => c.validate(),
            BudgetSpec::Grpc(c) => c.validate(),
            BudgetSpec::Aws(c) => c.validate(),
            BudgetSpec::Bucket(c) => c.validate(),
        }
        .map_err(|e| FieldProblem {
            field: e.field().to_owned(),
            message: e.to_string(),
        })?;
        if let BudgetSpec::Ratio(c) = self {
            long("ttl", c.ttl)?;
        }
        Ok(())
    }
}

/// Checks a retry table the way the policy crate will build it, plus the
/// scenario's own limits ([`MAX_ATTEMPTS`], [`MAX_DURATION`]).
pub fn check_retry(spec: &RetrySpec) -> Result<(), FieldProblem> {
    RetryPolicy::new(spec).map_err(|e| FieldProblem {
        field: e.field().to_owned(),
        message: e.to_string(),
    })?;
    if spec.max_attempts > MAX_ATTEMPTS {
        return Err(FieldProblem {
            field: "max_attempts".into(),
            message: format!(
                "max_attempts must be at most {MAX_ATTEMPTS} (attempts per request), got {}",
                spec.max_attempts
            ),
        });
    }
    for (field, d) in [
        ("per_try_timeout", spec.per_try_timeout),
        ("overall_timeout", spec.overall_timeout),
        ("backoff.base", Some(spec.backoff.base)),
        ("backoff.max", spec.backoff.max),
    ] {
        if let Some(d) = d {
            long(field, d)?;
        }
    }
    Ok(())
}

/// `d` must not exceed [`MAX_DURATION`].
fn long(field: &str, d: stormbreak_policy::Nanos) -> Result<(), FieldProblem> {
    if d > MAX_DURATION {
        return Err(FieldProblem {
            field: field.into(),
            message: format!(
                "{field} must be at most {}, got {}",
                format_duration(MAX_DURATION),
                format_duration(d)
            ),
        });
    }
    Ok(())
}
