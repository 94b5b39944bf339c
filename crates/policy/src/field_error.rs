//! The one error every policy config's `validate` (and every constructor
//! that validates) returns: which family and field, what was expected, what
//! was given.

use std::borrow::Cow;
use std::fmt;

/// A rejected configuration field.
///
/// Every family reports the same shape, so a caller that maps config errors
/// to file positions (the simulator's scenario checker, the gateway's config
/// loader) needs one `match`, and [`FieldError::field`] always names the
/// field as spelled in config files, dotted or indexed for nested ones
/// (`backoff.max`, `rules[2].status`, `metrics[1].target.average_utilization`).
///
/// ```
/// use stormbreak_policy::breaker::{Breaker, BreakerConfig};
/// let bad = BreakerConfig { failure_rate_threshold: 1.5, ..BreakerConfig::default() };
/// let e = Breaker::new(&bad).unwrap_err();
/// assert_eq!(e.family(), "breaker");
/// assert_eq!(e.field(), "failure_rate_threshold");
/// assert!(e.to_string().starts_with("breaker: failure_rate_threshold must be"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    family: &'static str,
    field: Cow<'static, str>,
    expected: Cow<'static, str>,
    got: String,
}

impl FieldError {
    pub(crate) fn new(
        family: &'static str,
        field: impl Into<Cow<'static, str>>,
        expected: impl Into<Cow<'static, str>>,
        got: impl fmt::Display,
    ) -> Self {
        FieldError {
            family,
            field: field.into(),
            expected: expected.into(),
            got: got.to_string(),
        }
    }

    /// The same error with `prefix` put before the field path, for a config
    /// nested in another (`saturation.`, `rules[2].`).
    pub(crate) fn nested(mut self, prefix: &str) -> Self {
        self.field = Cow::Owned(format!("{prefix}{}", self.field));
        self
    }

    /// The policy family: `retry`, `budget`, `limit`, `shed`, `ratelimit`,
    /// `breaker`, `autoscale`, `ramp` or `failover`.
    pub fn family(&self) -> &'static str {
        self.family
    }

    /// The offending field, as spelled in config files.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What the field must be.
    pub fn expected(&self) -> &str {
        &self.expected
    }

    /// The value that was given.
    pub fn got(&self) -> &str {
        &self.got
    }
}

/// `"<family>: <field> must be <expected>, got <got>"`.
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
