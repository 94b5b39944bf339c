//! The error every policy config's `validate` returns where a single field
//! is out of range: which family and field, what was expected, what was
//! given. Modules re-export it as their own `ConfigError`.

use std::fmt;

/// A rejected configuration field.
///
/// ```
/// use stormbreak_policy::breaker::{Breaker, BreakerConfig};
/// let bad = BreakerConfig { failure_rate_threshold: 1.5, ..BreakerConfig::default() };
/// let e = Breaker::new(&bad).unwrap_err();
/// assert_eq!(e.field, "failure_rate_threshold");
/// assert!(e.to_string().starts_with("breaker: failure_rate_threshold must be"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The policy family, e.g. `"breaker"`.
    pub family: &'static str,
    /// The offending field, as spelled in config files.
    pub field: &'static str,
    /// What the field must be.
    pub expected: &'static str,
    /// The value that was given.
    pub got: String,
}

impl FieldError {
    pub(crate) fn new(
        family: &'static str,
        field: &'static str,
        expected: &'static str,
        got: String,
    ) -> Self {
        FieldError {
            family,
            field,
            expected,
            got,
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} must be {}, got {}",
            self.family, self.field, self.expected, self.got
        )
    }
}

impl std::error::Error for FieldError {}
