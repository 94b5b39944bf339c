//! What the throttle and the breaker count as the backend's answer.

use stormbreak_policy::retry::AttemptOutcome;

use crate::reject::find_rejected;
use crate::{BoxError, Classify};

/// How an attempt reads to an overload control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The backend took the request and answered (even with an
    /// application error such as a 404).
    Accepted,
    /// The backend failed or refused it: a 5xx or 429, a timeout, a reset
    /// or refused connection.
    Failed,
    /// Another local control refused it; the backend never saw it.
    NotSent,
}

pub(crate) fn verdict<Res, C: Classify<Res>>(
    classifier: &C,
    result: &Result<Res, BoxError>,
) -> Verdict {
    let outcome = match result {
        Ok(response) => classifier.response(response),
        Err(error) => {
            if find_rejected(error.as_ref()).is_some() {
                return Verdict::NotSent;
            }
            classifier.error(error)
        }
    };
    match outcome {
        AttemptOutcome::Response { status, .. } if status >= 500 || status == 429 => {
            Verdict::Failed
        }
        AttemptOutcome::Response { .. } => Verdict::Accepted,
        _ => Verdict::Failed,
    }
}
