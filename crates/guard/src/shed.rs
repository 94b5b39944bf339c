//! Answers for requests the guard refuses itself: shed (403/429/503),
//! rate limited (429), no route (404), too large (413).

use std::sync::{Mutex, PoisonError};

use http::{HeaderValue, Response, StatusCode, header};
use stormbreak_policy::Nanos;
use stormbreak_policy::shed::{Criticality, Decision, Shedder};

use crate::body::{self, Body};
use crate::limit::ConcurrencyLimit;

/// A request the shedder turned away before its route's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shed {
    /// The answer (never [`Decision::Admit`]).
    pub(crate) decision: Decision,
    /// An operator rule gave it, not the saturation.
    pub(crate) by_rule: bool,
}

/// The admission step before a route's limit, in the order a gateway
/// applies it: operator rules for (`route`, `class`), then the saturation
/// shedder at the saturation of `limit` (0 without one). `None` admits.
///
/// The proxy and `trace::LimitPath` both call it, so the
/// trace-equivalence test checks the proxy's own step.
pub(crate) fn decide(
    shedder: &Mutex<Shedder>,
    route: u32,
    class: Criticality,
    limit: Option<&ConcurrencyLimit>,
) -> Option<Shed> {
    let saturation = limit.map_or(0.0, ConcurrencyLimit::saturation);
    let shedder = shedder.lock().unwrap_or_else(PoisonError::into_inner);
    match shedder.decide(route, class, saturation) {
        Decision::Admit => None,
        decision => Some(Shed {
            decision,
            by_rule: shedder.rules().lookup(route, class).is_some(),
        }),
    }
}

/// The answer to a request a route's limit refuses: the saturation
/// shedder's (503 with `Retry-After: 1s` by default), as if the request
/// were of the least class.
pub(crate) fn full_answer(shedder: &Mutex<Shedder>) -> (u16, Option<Nanos>) {
    let shedder = shedder.lock().unwrap_or_else(PoisonError::into_inner);
    match shedder
        .saturation()
        .decide(Criticality::Sheddable, f64::INFINITY)
    {
        Decision::Reject {
            status,
            retry_after,
        } => (status, retry_after),
        Decision::Admit => (503, Some(Nanos::SECOND)),
    }
}

/// A response with `status`, a one-line reason and, when set, `Retry-After`
/// in whole seconds rounded up (RFC 9110 §10.2.3 has no fractions; rounding
/// down could invite a retry before the policy allows one).
pub(crate) fn reject(status: u16, retry_after: Option<Nanos>, reason: &str) -> Response<Body> {
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

/// Names in [`crate::limit::REFUSED_HEADER`] why the guard itself refused
/// a request (`rule`, `saturation`, `restore`, `rate_limit`, `limit`,
/// `queue_timeout`): a client, or `stormbreak lab`, tells a queue timeout
/// from a full limit or a shed without parsing the body.
pub(crate) fn refused(mut response: Response<Body>, why: &'static str) -> Response<Body> {
    response.headers_mut().insert(
        http::HeaderName::from_static(crate::limit::REFUSED_HEADER),
        HeaderValue::from_static(why),
    );
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
