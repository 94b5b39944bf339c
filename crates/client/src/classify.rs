//! How a response or an error reads to the retry policy.

use std::error::Error as StdError;
use std::io;
use std::time::{SystemTime, UNIX_EPOCH};

use stormbreak_policy::retry::{AttemptOutcome, Pushback, retry_after_from_header};

use crate::BoxError;

/// Turns what one attempt produced into the policy crate's
/// [`AttemptOutcome`], which decides success, retry or give-up.
///
/// Timeouts the layer enforces itself never reach the classifier; they are
/// [`AttemptOutcome::Timeout`].
pub trait Classify<Res> {
    /// The outcome of an attempt that produced a response.
    fn response(&self, response: &Res) -> AttemptOutcome;

    /// The outcome of an attempt that failed with an error: a refused
    /// connection is [`ConnectFailed`](AttemptOutcome::ConnectFailed), a
    /// timeout from an inner layer (tokio's or tower's `Elapsed`) is
    /// [`Timeout`](AttemptOutcome::Timeout), a local refusal
    /// ([`Rejected`](crate::Rejected)) a final 503 with "do not retry"
    /// pushback, anything else a [`Reset`](AttemptOutcome::Reset).
    fn error(&self, error: &BoxError) -> AttemptOutcome {
        error_outcome(error.as_ref())
    }
}

/// The default classification of transport errors (see [`Classify::error`]).
pub fn error_outcome(error: &(dyn StdError + 'static)) -> AttemptOutcome {
    let mut cause: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = cause {
        if e.is::<crate::Rejected>() {
            // Never sent: retrying against our own throttle or open
            // breaker would only spend the budget.
            return AttemptOutcome::Response {
                status: 503,
                retry_after: None,
                pushback: Pushback::DoNotRetry,
            };
        }
        if e.is::<tokio::time::error::Elapsed>() || e.is::<tower::timeout::error::Elapsed>() {
            return AttemptOutcome::Timeout;
        }
        #[cfg(feature = "reqwest")]
        if let Some(r) = e.downcast_ref::<reqwest::Error>() {
            if r.is_connect() {
                return AttemptOutcome::ConnectFailed;
            }
            if r.is_timeout() {
                return AttemptOutcome::Timeout;
            }
        }
        if let Some(io) = e.downcast_ref::<io::Error>() {
            match io.kind() {
                io::ErrorKind::ConnectionRefused => return AttemptOutcome::ConnectFailed,
                io::ErrorKind::TimedOut => return AttemptOutcome::Timeout,
                _ => {}
            }
        }
        cause = e.source();
    }
    AttemptOutcome::Reset
}

/// Classifies `http::Response`s by status, `Retry-After` and gRPC's
/// `grpc-retry-pushback-ms`.
///
/// `Retry-After` (delta-seconds or an HTTP date) becomes the minimum pause
/// before the next attempt unless [`ignoring_retry_after`](Self::ignoring_retry_after)
/// is set, which is what the scrapers of the incident did.
///
/// ```
/// use stormbreak_client::{Classify, HttpClassifier};
/// use stormbreak_policy::Nanos;
/// use stormbreak_policy::retry::AttemptOutcome;
///
/// let shed = http::Response::builder()
///     .status(429)
///     .header("retry-after", "2")
///     .body(())
///     .unwrap();
/// let outcome = HttpClassifier::default().response(&shed);
/// assert_eq!(outcome.retry_after(), Some(Nanos::from_secs(2)));
/// assert!(matches!(outcome, AttemptOutcome::Response { status: 429, .. }));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct HttpClassifier {
    honour_retry_after: bool,
    own_refusal: OwnRefusal,
}

/// How a request this side refused itself, never sent (its own open
/// circuit breaker or throttle: a [`Rejected`](crate::Rejected)), reads to
/// the retry policy. The one place a client and a gateway built on the
/// same retry layer differ in classification.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OwnRefusal {
    /// Final: a 503 with "do not retry" pushback. A client's default:
    /// retrying against its own throttle or open breaker would only spend
    /// the budget.
    #[default]
    Final,
    /// A 503 carrying the refusal's `Retry-After` (when an open breaker
    /// admits its next probe), retried as any 503 is, after at least that
    /// long. A gateway's: it answers its downstream that way too, so a
    /// retry waits until probes resume instead of giving up on a path that
    /// may be back by then.
    RetryAfter,
}

impl Default for HttpClassifier {
    fn default() -> Self {
        HttpClassifier {
            honour_retry_after: true,
            own_refusal: OwnRefusal::Final,
        }
    }
}

impl HttpClassifier {
    /// A classifier that drops `Retry-After`: retries follow the backoff only.
    pub fn ignoring_retry_after() -> Self {
        HttpClassifier {
            honour_retry_after: false,
            ..Self::default()
        }
    }

    /// The same classifier, reading this side's own refusals as `own`
    /// says.
    ///
    /// ```
    /// use stormbreak_client::{HttpClassifier, OwnRefusal};
    /// use stormbreak_policy::Nanos;
    /// use stormbreak_policy::retry::Pushback;
    ///
    /// let client = HttpClassifier::default();
    /// assert_eq!(client.refusal(Some(Nanos::SECOND)).pushback(), Pushback::DoNotRetry);
    /// let gateway = HttpClassifier::default().own_refusal(OwnRefusal::RetryAfter);
    /// let refused = gateway.refusal(Some(Nanos::SECOND));
    /// assert_eq!((refused.pushback(), refused.retry_after()), (Pushback::None, Some(Nanos::SECOND)));
    /// ```
    pub fn own_refusal(self, own: OwnRefusal) -> Self {
        HttpClassifier {
            own_refusal: own,
            ..self
        }
    }

    /// What a request this side refused itself reads as, `retry_after`
    /// being when the refusal ends, if known (see [`OwnRefusal`]).
    pub fn refusal(&self, retry_after: Option<stormbreak_policy::Nanos>) -> AttemptOutcome {
        match self.own_refusal {
            OwnRefusal::Final => AttemptOutcome::Response {
                status: 503,
                retry_after: None,
                pushback: Pushback::DoNotRetry,
            },
            OwnRefusal::RetryAfter => AttemptOutcome::Response {
                status: 503,
                retry_after,
                pushback: Pushback::None,
            },
        }
    }

    /// An answer with `status` and no header the policy reads.
    pub fn status(&self, status: u16) -> AttemptOutcome {
        AttemptOutcome::Response {
            status,
            retry_after: None,
            pushback: Pushback::None,
        }
    }

    /// An error's outcome: this side's own refusal as [`OwnRefusal`]
    /// says, anything else as [`error_outcome`].
    fn error_with_refusal(&self, error: &BoxError) -> AttemptOutcome {
        match crate::reject::find_rejected(error.as_ref()) {
            Some(r) => self.refusal(r.retry_after.map(stormbreak_policy::Nanos::from)),
            None => error_outcome(error.as_ref()),
        }
    }
}

impl<B> Classify<http::Response<B>> for HttpClassifier {
    fn response(&self, response: &http::Response<B>) -> AttemptOutcome {
        self.parts(response.status(), response.headers())
    }

    fn error(&self, error: &BoxError) -> AttemptOutcome {
        self.error_with_refusal(error)
    }
}

#[cfg(feature = "reqwest")]
impl Classify<reqwest::Response> for HttpClassifier {
    fn response(&self, response: &reqwest::Response) -> AttemptOutcome {
        self.parts(response.status(), response.headers())
    }

    fn error(&self, error: &BoxError) -> AttemptOutcome {
        self.error_with_refusal(error)
    }
}

impl HttpClassifier {
    fn parts(&self, status: http::StatusCode, headers: &http::HeaderMap) -> AttemptOutcome {
        // The usual answer, read on every attempt by the retry layer and
        // again by the throttle: no header to look up.
        if headers.is_empty() {
            return self.status(status.as_u16());
        }
        let retry_after = if self.honour_retry_after {
            headers
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_after_from_header(v, unix_now_secs()))
        } else {
            None
        };
        let pushback = headers
            .get(&GRPC_RETRY_PUSHBACK_MS)
            .and_then(|v| v.to_str().ok())
            .map_or(Pushback::None, Pushback::from_grpc_header);
        AttemptOutcome::Response {
            status: status.as_u16(),
            retry_after,
            pushback,
        }
    }
}

/// Named once: a `&str` name would be parsed on every look-up.
static GRPC_RETRY_PUSHBACK_MS: http::HeaderName =
    http::HeaderName::from_static("grpc-retry-pushback-ms");

fn unix_now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormbreak_policy::Nanos;

    #[test]
    fn refused_connections_and_timeouts_are_told_apart_through_the_source_chain() {
        #[derive(Debug)]
        struct Wrapper(io::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("client error")
            }
        }
        impl StdError for Wrapper {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let refused: BoxError = Box::new(Wrapper(io::ErrorKind::ConnectionRefused.into()));
        assert_eq!(
            error_outcome(refused.as_ref()),
            AttemptOutcome::ConnectFailed
        );
        let timed_out: BoxError = Box::new(io::Error::from(io::ErrorKind::TimedOut));
        assert_eq!(error_outcome(timed_out.as_ref()), AttemptOutcome::Timeout);
        let tower_timeout: BoxError = Box::new(tower::timeout::error::Elapsed::new());
        assert_eq!(
            error_outcome(tower_timeout.as_ref()),
            AttemptOutcome::Timeout
        );
        let other: BoxError = "broken pipe".into();
        assert_eq!(error_outcome(other.as_ref()), AttemptOutcome::Reset);
    }

    #[test]
    fn retry_after_can_be_ignored_and_pushback_is_read() {
        let r = http::Response::builder()
            .status(503)
            .header("retry-after", "5")
            .header("grpc-retry-pushback-ms", "-1")
            .body(())
            .unwrap();
        let honoured = HttpClassifier::default().response(&r);
        assert_eq!(honoured.retry_after(), Some(Nanos::from_secs(5)));
        assert_eq!(honoured.pushback(), Pushback::DoNotRetry);
        let ignored = HttpClassifier::ignoring_retry_after().response(&r);
        assert_eq!(ignored.retry_after(), None);
    }
}
