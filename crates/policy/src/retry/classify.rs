//! What an attempt produced, and what that means for a retry.
//!
//! The law is Envoy's `retry_on` (router filter, `x-envoy-retry-on`): a list
//! of conditions such as `5xx`, `gateway-error`, `reset`, `connect-failure`,
//! `retriable-4xx`, plus explicit `retriable_status_codes`. Stormbreak adds two
//! conditions Envoy folds into others: `timeout` (a per-try timeout fired) and
//! `throttled` (429 Too Many Requests, RFC 6585 §4, and 503 carrying
//! `Retry-After`, RFC 9110 §15.6.4), which are retried only after the delay the
//! server asked for. 403 and the other 4xx are never retried unless listed:
//! a well-behaved client does not retry a shed (the 2026-08-17 incident shed
//! token traffic with 403 exactly for that reason).

use super::FAMILY;
use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// A server's explicit retry signal, after gRPC's `grpc-retry-pushback-ms`
/// (gRFC A6, "Pushback").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pushback {
    /// The server said nothing.
    #[default]
    None,
    /// Retry after exactly this delay (no jitter); the following backoff starts
    /// again from its initial value.
    RetryAfter(Nanos),
    /// Do not retry this request at all.
    DoNotRetry,
}

/// What one attempt produced, as the caller observed it.
///
/// `retry_after` is the delay the caller parsed from `Retry-After` or a
/// rate-limit reset header (see [`headers`](super::headers)); it applies to
/// any failed response, and a retry never happens sooner than it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// An HTTP response arrived.
    Response {
        /// HTTP status code.
        status: u16,
        /// Server-requested minimum delay before the next attempt.
        retry_after: Option<Nanos>,
        /// Server pushback.
        pushback: Pushback,
    },
    /// The per-try timeout (or the overall deadline) fired first.
    Timeout,
    /// The connection could not be established.
    ConnectFailed,
    /// The connection or stream was reset before a response.
    Reset,
}

impl AttemptOutcome {
    /// A bare response with `status` and no retry hints.
    pub const fn status(status: u16) -> Self {
        AttemptOutcome::Response {
            status,
            retry_after: None,
            pushback: Pushback::None,
        }
    }

    /// The server-requested delay, if any.
    pub fn retry_after(&self) -> Option<Nanos> {
        match self {
            AttemptOutcome::Response { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The server pushback ([`Pushback::None`] for transport failures).
    pub fn pushback(&self) -> Pushback {
        match self {
            AttemptOutcome::Response { pushback, .. } => *pushback,
            _ => Pushback::None,
        }
    }
}

/// The class of an attempt's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OutcomeClass {
    /// A final, non-error response (status below 400).
    Success,
    /// A failure that `retry_on` says to retry.
    Retryable,
    /// A failure that must not be retried (most 4xx, 501, anything unlisted).
    NonRetryable,
    /// The server is rate limiting: 429, or 503 with `Retry-After`.
    Throttled,
    /// No answer within the attempt's timeout.
    Timeout,
}

/// A retry condition, spelled as in Envoy's `retry_on` where Envoy has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RetryOn {
    /// `5xx`: any 5xx status.
    #[serde(rename = "5xx")]
    ServerError,
    /// `gateway-error`: 502, 503, 504.
    GatewayError,
    /// `retriable-4xx`: 409 Conflict.
    #[serde(rename = "retriable-4xx")]
    Retriable4xx,
    /// `reset`: the connection or stream was reset.
    Reset,
    /// `connect-failure`: the connection could not be established.
    ConnectFailure,
    /// `timeout`: the per-try timeout fired.
    Timeout,
    /// `throttled`: 429, and 503 with `Retry-After`, retried after the server's delay.
    Throttled,
}

impl RetryOn {
    /// The default set: Envoy's `5xx,reset,connect-failure`, plus timeouts and throttling.
    pub const DEFAULT: [RetryOn; 5] = [
        RetryOn::ServerError,
        RetryOn::Reset,
        RetryOn::ConnectFailure,
        RetryOn::Timeout,
        RetryOn::Throttled,
    ];
}

const FIRST_STATUS: u16 = 100;
const STATUS_COUNT: usize = 500; // 100..=599

/// A compiled classifier: one table look-up per response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classifier {
    by_status: [OutcomeClass; STATUS_COUNT],
    throttled_503: bool,
    reset: bool,
    connect_failure: bool,
    timeout: bool,
    throttled: bool,
}

impl Classifier {
    /// Compiles `retry_on` and the two explicit status lists.
    ///
    /// Precedence for a status: `non_retriable` wins, then 429 is
    /// [`Throttled`](OutcomeClass::Throttled), then `retriable`, then the
    /// `retry_on` families; anything else is non-retryable.
    pub fn new(
        retry_on: &[RetryOn],
        retriable: &[u16],
        non_retriable: &[u16],
    ) -> Result<Self, FieldError> {
        for (field, list) in [
            ("retriable_status_codes", retriable),
            ("non_retriable_status_codes", non_retriable),
        ] {
            if let Some(bad) = list.iter().find(|s| !(100..=599).contains(*s)) {
                return Err(FieldError::new(
                    FAMILY,
                    field,
                    "HTTP statuses in 100..=599",
                    bad,
                ));
            }
        }
        if let Some(both) = retriable.iter().find(|s| non_retriable.contains(s)) {
            return Err(FieldError::new(
                FAMILY,
                "retriable_status_codes",
                "disjoint from non_retriable_status_codes",
                format!("{both} in both"),
            ));
        }
        let on = |c: RetryOn| retry_on.contains(&c);
        let mut by_status = [OutcomeClass::NonRetryable; STATUS_COUNT];
        for (i, class) in by_status.iter_mut().enumerate() {
            let status = FIRST_STATUS + i as u16;
            *class = if status < 400 {
                OutcomeClass::Success
            } else if non_retriable.contains(&status) {
                OutcomeClass::NonRetryable
            } else if status == 429 {
                OutcomeClass::Throttled
            } else if retriable.contains(&status)
                || (status >= 500 && on(RetryOn::ServerError))
                || (matches!(status, 502..=504) && on(RetryOn::GatewayError))
                || (status == 409 && on(RetryOn::Retriable4xx))
            {
                OutcomeClass::Retryable
            } else {
                OutcomeClass::NonRetryable
            };
        }
        Ok(Classifier {
            by_status,
            throttled_503: !non_retriable.contains(&503),
            reset: on(RetryOn::Reset),
            connect_failure: on(RetryOn::ConnectFailure),
            timeout: on(RetryOn::Timeout),
            throttled: on(RetryOn::Throttled),
        })
    }

    /// The class of `outcome`. Statuses outside 100..=599 are non-retryable.
    ///
    /// ```
    /// use stormbreak_policy::retry::{AttemptOutcome, Classifier, OutcomeClass, RetryOn};
    /// let c = Classifier::new(&RetryOn::DEFAULT, &[], &[501]).unwrap();
    /// assert_eq!(c.classify(&AttemptOutcome::status(503)), OutcomeClass::Retryable);
    /// assert_eq!(c.classify(&AttemptOutcome::status(403)), OutcomeClass::NonRetryable);
    /// assert_eq!(c.classify(&AttemptOutcome::status(429)), OutcomeClass::Throttled);
    /// ```
    #[inline]
    pub fn classify(&self, outcome: &AttemptOutcome) -> OutcomeClass {
        match *outcome {
            AttemptOutcome::Response {
                status,
                retry_after,
                ..
            } => {
                if status == 503 && retry_after.is_some() && self.throttled_503 {
                    return OutcomeClass::Throttled;
                }
                status
                    .checked_sub(FIRST_STATUS)
                    .and_then(|i| self.by_status.get(i as usize))
                    .copied()
                    .unwrap_or(OutcomeClass::NonRetryable)
            }
            AttemptOutcome::Timeout => OutcomeClass::Timeout,
            AttemptOutcome::ConnectFailed if self.connect_failure => OutcomeClass::Retryable,
            AttemptOutcome::Reset if self.reset => OutcomeClass::Retryable,
            AttemptOutcome::ConnectFailed | AttemptOutcome::Reset => OutcomeClass::NonRetryable,
        }
    }

    /// Whether a failure of this class is retried under this `retry_on`.
    #[inline]
    pub fn is_retried(&self, class: OutcomeClass) -> bool {
        match class {
            OutcomeClass::Retryable => true,
            OutcomeClass::Throttled => self.throttled,
            OutcomeClass::Timeout => self.timeout,
            OutcomeClass::Success | OutcomeClass::NonRetryable => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;

    fn default_classifier() -> Classifier {
        Classifier::new(&RetryOn::DEFAULT, &[], &[501]).unwrap()
    }

    fn with_retry_after(status: u16) -> AttemptOutcome {
        AttemptOutcome::Response {
            status,
            retry_after: Some(Nanos::SECOND),
            pushback: Pushback::None,
        }
    }

    #[test]
    fn default_classes_follow_envoy_5xx_reset_connect_failure() {
        let c = default_classifier();
        use OutcomeClass::*;
        for (status, class) in [
            (200, Success),
            (204, Success),
            (304, Success),
            (400, NonRetryable),
            (403, NonRetryable),
            (404, NonRetryable),
            (409, NonRetryable),
            (429, Throttled),
            (500, Retryable),
            (501, NonRetryable),
            (502, Retryable),
            (503, Retryable),
            (504, Retryable),
            (599, Retryable),
            (99, NonRetryable),
            (600, NonRetryable),
        ] {
            assert_eq!(
                c.classify(&AttemptOutcome::status(status)),
                class,
                "{status}"
            );
        }
        assert_eq!(c.classify(&AttemptOutcome::Reset), Retryable);
        assert_eq!(c.classify(&AttemptOutcome::ConnectFailed), Retryable);
        assert_eq!(c.classify(&AttemptOutcome::Timeout), Timeout);
    }

    #[test]
    fn retry_after_turns_503_into_throttled_but_not_other_statuses() {
        let c = default_classifier();
        assert_eq!(c.classify(&with_retry_after(503)), OutcomeClass::Throttled);
        assert_eq!(c.classify(&with_retry_after(502)), OutcomeClass::Retryable);
        assert_eq!(
            c.classify(&with_retry_after(403)),
            OutcomeClass::NonRetryable
        );
    }

    #[test]
    fn which_classes_are_retried_depends_on_retry_on() {
        let c = default_classifier();
        assert!(c.is_retried(OutcomeClass::Retryable));
        assert!(c.is_retried(OutcomeClass::Throttled));
        assert!(c.is_retried(OutcomeClass::Timeout));
        assert!(!c.is_retried(OutcomeClass::NonRetryable));
        assert!(!c.is_retried(OutcomeClass::Success));

        let gateway_only = Classifier::new(&[RetryOn::GatewayError], &[], &[]).unwrap();
        assert_eq!(
            gateway_only.classify(&AttemptOutcome::status(500)),
            OutcomeClass::NonRetryable
        );
        assert_eq!(
            gateway_only.classify(&AttemptOutcome::status(504)),
            OutcomeClass::Retryable
        );
        assert_eq!(
            gateway_only.classify(&AttemptOutcome::Reset),
            OutcomeClass::NonRetryable
        );
        assert!(!gateway_only.is_retried(OutcomeClass::Timeout));
        assert!(!gateway_only.is_retried(OutcomeClass::Throttled));
    }

    #[test]
    fn explicit_lists_override_families() {
        let c = Classifier::new(
            &[RetryOn::ServerError, RetryOn::Retriable4xx],
            &[408],
            &[500, 429],
        )
        .unwrap();
        assert_eq!(
            c.classify(&AttemptOutcome::status(408)),
            OutcomeClass::Retryable
        );
        assert_eq!(
            c.classify(&AttemptOutcome::status(409)),
            OutcomeClass::Retryable
        );
        assert_eq!(
            c.classify(&AttemptOutcome::status(500)),
            OutcomeClass::NonRetryable
        );
        assert_eq!(
            c.classify(&AttemptOutcome::status(429)),
            OutcomeClass::NonRetryable
        );
        assert_eq!(
            c.classify(&AttemptOutcome::status(501)),
            OutcomeClass::Retryable
        );

        let never_503 = Classifier::new(&RetryOn::DEFAULT, &[], &[503]).unwrap();
        assert_eq!(
            never_503.classify(&with_retry_after(503)),
            OutcomeClass::NonRetryable
        );
    }

    #[test]
    fn bad_status_lists_are_rejected_by_name() {
        let e = Classifier::new(&[], &[700], &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "retry: retriable_status_codes must be HTTP statuses in 100..=599, got 700"
        );
        let e = Classifier::new(&[], &[], &[42]).unwrap_err();
        assert_eq!(e.field(), "non_retriable_status_codes");
        let e = Classifier::new(&[], &[503], &[503]).unwrap_err();
        assert!(e.to_string().contains("503 in both"), "{e}");
    }

    #[test]
    fn retry_on_parses_envoy_spelling() {
        let v: Vec<RetryOn> = serde_json::from_str(
            r#"["5xx","gateway-error","retriable-4xx","reset","connect-failure","timeout","throttled"]"#,
        )
        .unwrap();
        assert_eq!(v.len(), 7);
        assert_eq!(v[0], RetryOn::ServerError);
        assert_eq!(v[4], RetryOn::ConnectFailure);
        assert!(serde_json::from_str::<Vec<RetryOn>>(r#"["4xx"]"#).is_err());
    }
}
