//! Whether and when to retry one logical request.
//!
//! Four small pieces, one job each:
//!
//! * [`classify`] turns what an attempt produced ([`AttemptOutcome`]) into an
//!   [`OutcomeClass`]: success, retryable, non-retryable, throttled, timeout.
//!   Which statuses are retryable is configurable in the spirit of Envoy's
//!   `retry_on` (default `5xx,reset,connect-failure`, plus timeouts, plus 429
//!   and `503 + Retry-After` as *throttled*).
//! * [`backoff`] computes the pause before a retry: constant or exponential,
//!   with the AWS Architecture Blog jitters (full, equal, decorrelated) or
//!   gRPC's ±20 % spread.
//! * [`headers`] parses what servers say about *when*: `Retry-After`
//!   (delta-seconds or HTTP-date, RFC 9110 §10.2.3), rate-limit reset epochs,
//!   and gRPC's `grpc-retry-pushback-ms`.
//! * [`state`] is the per-request state machine ([`RetryState`]) that puts them
//!   together with max attempts, per-try timeout, overall deadline and an
//!   optional [`RetryBudget`](crate::budget::RetryBudget).
//!
//! The configuration ([`RetryConfig`]) is validated once into a [`RetryPolicy`];
//! many small [`RetryState`]s (one per in-flight logical request, `Copy`, 40
//! bytes) are then driven against that shared policy without allocating.
//!
//! ```
//! use stormbreak_policy::retry::{AttemptOutcome, RetryConfig, RetryDecision, RetryPolicy, RetryState};
//! use stormbreak_policy::Nanos;
//! use rand::SeedableRng;
//!
//! let policy = RetryPolicy::new(&RetryConfig::default()).unwrap();
//! let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
//! let mut request = RetryState::new(&policy, Nanos::ZERO);
//!
//! // A 503 at t = 40 ms: retried after full-jitter backoff in [0, 25 ms].
//! let d = request.on_outcome(&policy, Nanos::from_millis(40), AttemptOutcome::status(503), &mut rng);
//! let RetryDecision::RetryAt(at) = d else { panic!("{d:?}") };
//! assert!(at >= Nanos::from_millis(40) && at <= Nanos::from_millis(65));
//!
//! // A 429 asking for 2 s: never sooner than the server said.
//! let throttled = AttemptOutcome::Response {
//!     status: 429,
//!     retry_after: Some(Nanos::from_secs(2)),
//!     pushback: Default::default(),
//! };
//! assert_eq!(request.on_outcome(&policy, Nanos::from_millis(100), throttled, &mut rng),
//!            RetryDecision::RetryAt(Nanos::from_millis(100) + Nanos::from_secs(2)));
//! ```

pub mod backoff;
pub mod classify;
pub mod headers;
pub mod state;

pub use backoff::{Backoff, BackoffConfig, BackoffKind, Jitter};
pub use classify::{AttemptOutcome, Classifier, OutcomeClass, Pushback, RetryOn};
pub use headers::{
    http_date_to_unix_secs, retry_after_from_delta_seconds, retry_after_from_header,
    retry_after_from_http_date, retry_after_from_reset_epoch,
};
pub use state::{GiveUpReason, RetryDecision, RetryState};

use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// The family named in this module's [`FieldError`]s.
const FAMILY: &str = "retry";

/// gRPC's client-side ceiling on `maxAttempts` (gRFC A6, "Limits on Retries
/// and Hedges"): service configs asking for more are treated as 5.
pub const GRPC_MAX_ATTEMPTS: u32 = 5;

/// A retry policy as written in a scenario or guard config file.
///
/// Sources and defaults:
///
/// | field | default | source |
/// |---|---|---|
/// | `max_attempts` | 3 (first attempt + 2 retries) | AWS SDK standard mode; Istio's default of 2 retries |
/// | `max_attempts_cap` | 5 | gRPC client-side cap (gRFC A6) |
/// | `per_try_timeout` | none | Envoy `per_try_timeout` (unset by default) |
/// | `overall_timeout` | 15 s | Envoy route `timeout` default |
/// | `retry_on` | `5xx, reset, connect-failure, timeout, throttled` | Envoy `retry_on` + timeouts + 429 |
/// | `non_retriable_status_codes` | `[501]` | 501 Not Implemented will not change on retry |
/// | `backoff` | exponential 25 ms × 2, cap 250 ms, full jitter | Envoy `retry_back_off` |
///
/// Unknown fields are rejected, durations use the human units of
/// [`units`](crate::units):
///
/// ```
/// use stormbreak_policy::retry::{RetryConfig, RetryPolicy};
/// let cfg: RetryConfig = serde_json::from_str(r#"{
///     "max_attempts": 4,
///     "per_try_timeout": "250ms",
///     "retry_on": ["gateway-error", "connect-failure", "throttled"],
///     "backoff": { "base": "100ms", "max": "1s", "jitter": "decorrelated" }
/// }"#).unwrap();
/// assert!(RetryPolicy::new(&cfg).is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Attempts per logical request, including the first; 1 disables retries.
    pub max_attempts: u32,
    /// Ceiling for `max_attempts`, gRPC's 5 by default; raise it on purpose to
    /// model a client without that guard.
    pub max_attempts_cap: u32,
    /// Time allowed for one attempt; `None` lets each attempt run to the deadline.
    pub per_try_timeout: Option<Nanos>,
    /// Time allowed for the whole logical request, retries and pauses included.
    pub overall_timeout: Option<Nanos>,
    /// Which failures are retried.
    pub retry_on: Vec<RetryOn>,
    /// Extra statuses that are always retried (Envoy `retriable_status_codes`).
    pub retriable_status_codes: Vec<u16>,
    /// Statuses never retried, whatever `retry_on` says.
    pub non_retriable_status_codes: Vec<u16>,
    /// Pause between attempts.
    pub backoff: BackoffConfig,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: 3,
            max_attempts_cap: GRPC_MAX_ATTEMPTS,
            per_try_timeout: None,
            overall_timeout: Some(15 * Nanos::SECOND),
            retry_on: RetryOn::DEFAULT.to_vec(),
            retriable_status_codes: Vec::new(),
            non_retriable_status_codes: vec![501],
            backoff: BackoffConfig::default(),
        }
    }
}

impl RetryConfig {
    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.max_attempts_cap == 0 {
            return Err(FieldError::new(FAMILY, "max_attempts_cap", "≥ 1", 0));
        }
        if self.max_attempts == 0 {
            return Err(FieldError::new(FAMILY, "max_attempts", "≥ 1", 0));
        }
        if self.max_attempts > self.max_attempts_cap {
            return Err(FieldError::new(
                FAMILY,
                "max_attempts",
                format!(
                    "≤ max_attempts_cap ({}; gRPC's client-side limit is {GRPC_MAX_ATTEMPTS}, \
                     raise max_attempts_cap to model a client without it)",
                    self.max_attempts_cap
                ),
                self.max_attempts,
            ));
        }
        if self.per_try_timeout == Some(Nanos::ZERO) {
            return Err(FieldError::new(
                FAMILY,
                "per_try_timeout",
                "> 0 or absent",
                "0",
            ));
        }
        if self.overall_timeout == Some(Nanos::ZERO) {
            return Err(FieldError::new(
                FAMILY,
                "overall_timeout",
                "> 0 or absent",
                "0",
            ));
        }
        Classifier::new(
            &self.retry_on,
            &self.retriable_status_codes,
            &self.non_retriable_status_codes,
        )?;
        self.backoff.validate()
    }
}

/// A validated [`RetryConfig`], shared by every [`RetryState`] that uses it.
///
/// Holds the status table and the backoff law so that per-request decisions
/// are table look-ups and a little arithmetic.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    classifier: Classifier,
    backoff: Backoff,
    max_attempts: u32,
    per_try_timeout: Option<Nanos>,
    overall_timeout: Option<Nanos>,
}

impl RetryPolicy {
    /// Validates `config` and compiles it.
    pub fn new(config: &RetryConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(RetryPolicy {
            classifier: Classifier::new(
                &config.retry_on,
                &config.retriable_status_codes,
                &config.non_retriable_status_codes,
            )?,
            backoff: Backoff::new(&config.backoff)?,
            max_attempts: config.max_attempts,
            per_try_timeout: config.per_try_timeout,
            overall_timeout: config.overall_timeout,
        })
    }

    /// The outcome classifier.
    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// The backoff law.
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// Attempts per logical request, including the first.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Time allowed for one attempt, if limited.
    pub fn per_try_timeout(&self) -> Option<Nanos> {
        self.per_try_timeout
    }

    /// Time allowed for the whole logical request, if limited.
    pub fn overall_timeout(&self) -> Option<Nanos> {
        self.overall_timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        let cfg = RetryConfig::default();
        cfg.validate().unwrap();
        let policy = RetryPolicy::new(&cfg).unwrap();
        assert_eq!(policy.max_attempts(), 3);
        assert_eq!(policy.overall_timeout(), Some(15 * Nanos::SECOND));
        assert_eq!(policy.per_try_timeout(), None);
    }

    #[test]
    fn zero_attempts_is_rejected_by_name() {
        let cfg = RetryConfig {
            max_attempts: 0,
            ..RetryConfig::default()
        };
        let e = cfg.validate().unwrap_err();
        assert_eq!(e.field(), "max_attempts");
        assert_eq!(e.to_string(), "retry: max_attempts must be ≥ 1, got 0");
    }

    #[test]
    fn attempts_above_the_grpc_cap_need_an_explicit_cap() {
        let mut cfg = RetryConfig {
            max_attempts: 10,
            ..RetryConfig::default()
        };
        let e = cfg.validate().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("retry: max_attempts must be ≤ max_attempts_cap (5")
        );
        assert!(e.to_string().ends_with("got 10"));
        cfg.max_attempts_cap = 10;
        assert!(cfg.validate().is_ok());
    }

    #[test]
    fn zero_timeouts_are_rejected() {
        let cfg = RetryConfig {
            per_try_timeout: Some(Nanos::ZERO),
            ..RetryConfig::default()
        };
        assert_eq!(cfg.validate().unwrap_err().field(), "per_try_timeout");
        let cfg = RetryConfig {
            overall_timeout: Some(Nanos::ZERO),
            ..RetryConfig::default()
        };
        assert_eq!(cfg.validate().unwrap_err().field(), "overall_timeout");
    }

    #[test]
    fn config_parses_with_human_units_and_rejects_unknown_fields() {
        let cfg: RetryConfig = serde_json::from_str(
            r#"{"per_try_timeout": "250ms", "overall_timeout": "2s",
                "retry_on": ["5xx", "reset"], "non_retriable_status_codes": [501, 500]}"#,
        )
        .unwrap();
        assert_eq!(cfg.per_try_timeout, Some(Nanos::from_millis(250)));
        assert_eq!(cfg.overall_timeout, Some(2 * Nanos::SECOND));
        assert_eq!(cfg.retry_on, vec![RetryOn::ServerError, RetryOn::Reset]);
        assert_eq!(cfg.max_attempts, 3, "missing fields take the defaults");
        let err = serde_json::from_str::<RetryConfig>(r#"{"max_retries": 3}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `max_retries`"),
            "{err}"
        );
    }
}
