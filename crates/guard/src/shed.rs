//! Answers for requests the guard refuses itself: shed (403/429/503),
//! rate limited (429), no route (404), too large (413).

use http::{HeaderValue, Response, StatusCode, header};
use stormbreak_policy::Nanos;
use stormbreak_policy::shed::Decision;

use crate::body::{self, Body};

/// A response with `status`, a one-line reason and, when set, `Retry-After`
/// in whole seconds rounded up (RFC 9110 §10.2.3 has no fractions; rounding
/// down could invite a retry before the policy allows one).
pub(crate) fn reject(
    status: u16,
    retry_after: Option<Nanos>,
    reason: &'static str,
) -> Response<Body> {
    let mut response = Response::new(body::full(format!("{reason}\n")));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    if let Some(after) = retry_after {
        let secs = after.div_ceil(Nanos::SECOND).max(1);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

/// The response for a shed decision, `None` for admit.
pub(crate) fn answer(decision: Decision) -> Option<Response<Body>> {
    match decision {
        Decision::Admit => None,
        Decision::Reject {
            status,
            retry_after,
        } => Some(reject(status, retry_after, "shed by stormbreak guard")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds_and_is_absent_when_unset() {
        let r = reject(429, Some(Nanos::from_millis(1500)), "x");
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()[header::RETRY_AFTER], "2");
        let r = reject(503, Some(Nanos::from_millis(1)), "x");
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = reject(403, None, "x");
        assert!(!r.headers().contains_key(header::RETRY_AFTER));
    }
}
