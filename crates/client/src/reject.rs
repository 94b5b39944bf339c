//! The error a layer answers with when it refuses a request locally.

use std::fmt;
use std::time::Duration;

/// Which layer refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectedBy {
    /// [`ThrottleLayer`](crate::ThrottleLayer): the adaptive throttle's
    /// local reject probability came up.
    Throttle,
    /// [`BreakerLayer`](crate::BreakerLayer): the breaker is open, or its
    /// half-open probes are all out.
    Breaker,
}

/// A request refused by this client, never sent.
///
/// The retry layer treats it as final (like a server's "do not retry"
/// pushback): retrying against one's own throttle or open breaker only
/// spends the retry budget. The throttle and breaker layers do not count
/// each other's refusals as the backend's answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// Who refused.
    pub by: RejectedBy,
    /// When an open breaker admits its next probe, if known.
    pub retry_after: Option<Duration>,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.by {
            RejectedBy::Throttle => f.write_str("request throttled locally (adaptive throttle)")?,
            RejectedBy::Breaker => f.write_str("request refused locally: circuit breaker open")?,
        }
        if let Some(after) = self.retry_after {
            write!(f, "; next probe in {after:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Rejected {}

/// Whether `error`, or any error in its source chain, is a [`Rejected`].
pub(crate) fn find_rejected<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a Rejected> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(r) = e.downcast_ref::<Rejected>() {
            return Some(r);
        }
        cause = e.source();
    }
    None
}
