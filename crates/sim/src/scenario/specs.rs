//! The scenario's own checks of retry and budget tables. The tables
//! themselves are the policy crate's [`RetryConfig`] and [`BudgetConfig`],
//! read unchanged, so a gateway config and a scenario share one syntax; what
//! is added here are the scenario's limits ([`MAX_ATTEMPTS`],
//! [`MAX_DURATION`]).

use std::fmt;

use stormbreak_policy::budget::BudgetConfig;
use stormbreak_policy::limit::{LimitAlgorithm, LimitConfig};
use stormbreak_policy::retry::{RetryConfig, RetryPolicy};
use stormbreak_policy::units::format_duration;

use super::{MAX_ATTEMPTS, MAX_DURATION, MAX_SLOTS};

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

/// Checks a budget table the way the policy crate will build it, plus the
/// scenario's [`MAX_DURATION`].
pub fn check_budget(budget: &BudgetConfig) -> Result<(), FieldProblem> {
    budget.validate().map_err(|e| FieldProblem {
        field: e.field().to_owned(),
        message: e.to_string(),
    })?;
    if let BudgetConfig::Ratio(c) = budget {
        long("ttl", c.ttl)?;
    }
    Ok(())
}

/// Checks a retry table the way the policy crate will build it, plus the
/// scenario's own limits ([`MAX_ATTEMPTS`], [`MAX_DURATION`]).
pub fn check_retry(spec: &RetryConfig) -> Result<(), FieldProblem> {
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

/// Checks a concurrency-limit table the way the policy crate will build
/// it, plus the scenario's [`MAX_SLOTS`] on the largest limit the
/// algorithm may reach (each in-flight request is an attempt the engine
/// holds).
pub fn check_limit(spec: &LimitConfig) -> Result<(), FieldProblem> {
    let limit = spec.build().map_err(|e| FieldProblem {
        field: e.field().to_owned(),
        message: e.to_string(),
    })?;
    if limit.max_limit() > MAX_SLOTS {
        return Err(FieldProblem {
            field: "max_limit".into(),
            message: format!(
                "the {} limit may grow to {}: at most {MAX_SLOTS} requests in flight \
                 per instance (set its largest limit lower)",
                spec.kind(),
                limit.max_limit()
            ),
        });
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
