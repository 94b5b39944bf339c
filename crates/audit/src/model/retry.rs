//! Retry policies of every layer, reduced to attempts per failure class.
//!
//! Istio, when a route sets no `retries`: 2 retries on
//! `connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes`
//! with no status codes configured (`EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY`
//! defaults to true), so a 503 answer is not retried and neither is a
//! timeout — istio/istio `pilot/pkg/networking/core/route/retry/retry.go`,
//! `defaultPolicy()` and `ConvertPolicy()`; `attempts: 0` disables retries.
//! Envoy's retry-on conditions: Envoy 1.34 "Router" filter,
//! `x-envoy-retry-on`. HAProxy: `retries` (default 3) applies only to the
//! `retry-on` conditions (default `conn-failure`).

use std::time::Duration;

use serde::Serialize;

/// The failures a retry policy may or may not retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The connection could not be made (refused, reset before request).
    ConnectFailure,
    /// A 503 answer (an overloaded or overflowing hop).
    Status503,
    /// No answer within the per-try timeout.
    Timeout,
}

impl FailureClass {
    /// All classes, in report order.
    pub const ALL: [FailureClass; 3] = [
        FailureClass::ConnectFailure,
        FailureClass::Status503,
        FailureClass::Timeout,
    ];

    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            FailureClass::ConnectFailure => "connection failure",
            FailureClass::Status503 => "503",
            FailureClass::Timeout => "timeout",
        }
    }
}

/// One layer's retries.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryLayer {
    /// Which layer and how it was read (`Istio default policy`…).
    pub what: String,
    /// Retries after the first attempt.
    pub retries: u32,
    /// Which classes are retried, indexed like [`FailureClass::ALL`].
    pub on: [bool; 3],
    /// Per-try timeout.
    pub per_try: Option<Duration>,
    /// True when no policy was written and a default applies.
    pub default: bool,
    /// An HAProxy layer: where its retries go (None: not HAProxy).
    pub redispatch: Option<Redispatch>,
}

/// Where an HAProxy layer's retries go: `option redispatch <interval>`
/// sends some of them to another server; without it every retry goes to
/// the server first chosen (HAProxy 3.0 manual, `retries`, `option
/// redispatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redispatch {
    /// Retries sent to another server when every attempt fails (0
    /// without redispatch).
    pub moved: u32,
    /// The first retry sent to another server (1-based; None: none is).
    pub first: Option<u32>,
    /// Active servers in the backend (with one, "another server" is the
    /// same one).
    pub active_servers: usize,
}

impl Redispatch {
    /// Attempts one request puts on one failing server of the backend
    /// (the others healthy) when the layer may make `attempts` attempts,
    /// and whether a redispatched retry reaches a healthy server (then the
    /// request succeeds there and no outer layer retries it): the first
    /// attempt and every retry before the first redispatched one.
    pub fn on_failing_server(&self, attempts: u32) -> (u32, bool) {
        match self.first {
            Some(k) if self.active_servers >= 2 && k < attempts => (k, true),
            _ => (attempts, false),
        }
    }
}

impl RetryLayer {
    /// Attempts for one failure class (1 when it is not retried).
    pub fn attempts(&self, class: FailureClass) -> u32 {
        let i = FailureClass::ALL
            .iter()
            .position(|c| *c == class)
            .unwrap_or(0);
        if self.on[i] { 1 + self.retries } else { 1 }
    }

    /// No retries.
    pub fn none(what: &str) -> RetryLayer {
        RetryLayer {
            what: what.into(),
            retries: 0,
            on: [false; 3],
            per_try: None,
            default: false,
            redispatch: None,
        }
    }

    /// Istio's policy for a route with no `retries` field.
    pub fn istio_default() -> RetryLayer {
        RetryLayer {
            what: "Istio default policy (no retries field): 2 retries on connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes, no status codes".into(),
            retries: 2,
            on: [true, false, false],
            per_try: None,
            default: true,
            redispatch: None,
        }
    }

    /// An Istio `HTTPRetry` as written.
    pub fn istio(
        attempts: Option<i64>,
        retry_on: Option<&str>,
        per_try: Option<Duration>,
    ) -> Result<RetryLayer, String> {
        let n = attempts.unwrap_or(0);
        if n < 0 {
            return Err(format!("retries.attempts: expected a count ≥ 0, got {n}"));
        }
        if n == 0 {
            return Ok(RetryLayer::none(
                "Istio retries.attempts: 0 (retries disabled)",
            ));
        }
        let retries = u32::try_from(n.min(1000)).unwrap_or(1000);
        // Istio keeps the default conditions when retryOn is empty.
        let spec = retry_on.filter(|s| !s.trim().is_empty()).unwrap_or(
            "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes",
        );
        let tokens: Vec<&str> = spec
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        let has = |t: &str| tokens.contains(&t);
        let five = has("5xx");
        let gw = has("gateway-error");
        let connect = has("connect-failure") || five || gw || has("reset");
        let s503 = five || gw || has("503");
        let timeout = (five || gw || has("reset") || has("504")) && per_try.is_some();
        Ok(RetryLayer {
            what: format!(
                "Istio retries: attempts {n}, retryOn {spec}{}",
                per_try
                    .map(|d| format!(", perTryTimeout {}", crate::units::show(d)))
                    .unwrap_or_default()
            ),
            retries,
            on: [connect, s503, timeout],
            per_try,
            default: false,
            redispatch: None,
        })
    }

    /// HAProxy `retries` and `retry-on` of a backend.
    pub fn haproxy(retries: u32, retry_on: &[String], explicit: bool) -> RetryLayer {
        let has = |t: &str| retry_on.iter().any(|r| r == t);
        let all = has("all-retryable-errors");
        let none = has("none");
        RetryLayer {
            what: format!(
                "HAProxy retries {retries}{} on retry-on {}",
                if explicit { "" } else { " (default)" },
                retry_on.join(" ")
            ),
            retries,
            on: [
                !none && (all || has("conn-failure")),
                !none && (all || has("503")),
                !none && (all || has("response-timeout")),
            ],
            per_try: None,
            default: !explicit,
            redispatch: Some(Redispatch {
                moved: 0,
                first: None,
                active_servers: 1,
            }),
        }
    }

    /// HAProxy `option redispatch <interval>` on this layer, over
    /// `active_servers` servers: which of the retries go to another server.
    /// The attempt count is unchanged, so the whole-destination figure is
    /// too (when every server fails, a redispatched retry fails
    /// elsewhere); what changes is the load on one failing server, and
    /// whether the request is rescued by a healthy one
    /// ([`Redispatch::on_failing_server`]). Stated in `what`.
    pub fn redispatching(mut self, interval: i64, active_servers: usize) -> RetryLayer {
        let r = self.retries;
        // Interval P > 0: retries P, 2P, …; −N: retry r + 1 − N (−1, the
        // default, is the last retry).
        let (moved, first) = if r == 0 || interval == 0 {
            (0, None)
        } else if interval > 0 {
            let p = interval.min(u32::MAX as i64) as u32;
            (r / p, (p <= r).then_some(p))
        } else {
            let k = (r as i64 + 1).saturating_add(interval);
            if k >= 1 {
                (1, Some(k as u32))
            } else {
                (0, None)
            }
        };
        self.redispatch = Some(Redispatch {
            moved,
            first,
            active_servers,
        });
        if r == 0 || interval == 0 {
            self.what
                .push_str(", no redispatch: every retry goes to the same server");
            return self;
        }
        let which = if interval == -1 {
            "the last retry".to_string()
        } else if interval > 0 {
            format!("each retry numbered a multiple of {interval}")
        } else {
            format!("retry number {} counted from the last", -interval)
        };
        let single = if active_servers < 2 {
            " (one active server: another server is the same one)"
        } else {
            ""
        };
        let on_first = first.unwrap_or(1 + r);
        self.what.push_str(&format!(
            ", option redispatch {interval}: {which} goes to another server ({moved} of {r} retries elsewhere; {on_first} attempts on the server first chosen before one leaves it){single}"
        ));
        self
    }

    /// Gateway API `HTTPRoute` `rules[].retry` (GEP-1731): `attempts` is
    /// the number of retries (unset: implementation-specific, not
    /// counted); `codes` are the statuses retried (503; 504, the gateway's
    /// answer to a `backendRequest` timeout); a connection error is retried
    /// whenever retries are allowed (the `HTTPRouteRetryConnectionError`
    /// conformance feature). `backoff` only spaces attempts out.
    pub fn gateway_api(
        attempts: Option<i64>,
        codes: &[i64],
        backoff: Option<Duration>,
    ) -> RetryLayer {
        let n = attempts.unwrap_or(0).clamp(0, 1000) as u32;
        let count = match attempts {
            Some(_) => format!("retry.attempts {n}"),
            None => "retry.attempts unset (implementation-specific, not counted)".to_string(),
        };
        let backoff = backoff
            .map(|b| format!(", retry.backoff {}", crate::units::show(b)))
            .unwrap_or_default();
        RetryLayer {
            what: format!("HTTPRoute {count}, retry.codes {codes:?}{backoff}"),
            retries: n,
            on: [n > 0, codes.contains(&503), codes.contains(&504)],
            per_try: None,
            default: false,
            redispatch: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn istio_default_retries_connect_failures_only() {
        let d = RetryLayer::istio_default();
        assert_eq!(d.attempts(FailureClass::ConnectFailure), 3);
        assert_eq!(d.attempts(FailureClass::Status503), 1);
        assert_eq!(d.attempts(FailureClass::Timeout), 1);
    }

    #[test]
    fn istio_attempts_zero_disables_and_5xx_covers_503() {
        assert_eq!(
            RetryLayer::istio(Some(0), Some("5xx"), None)
                .unwrap()
                .attempts(FailureClass::Status503),
            1
        );
        let p = RetryLayer::istio(Some(3), Some("5xx"), Some(Duration::from_secs(1))).unwrap();
        assert_eq!(p.attempts(FailureClass::Status503), 4);
        assert_eq!(p.attempts(FailureClass::Timeout), 4);
        let no_per_try = RetryLayer::istio(Some(3), Some("5xx"), None).unwrap();
        assert_eq!(
            no_per_try.attempts(FailureClass::Timeout),
            1,
            "the route timeout ends the request"
        );
    }

    #[test]
    fn haproxy_retries_only_on_its_conditions() {
        let d = RetryLayer::haproxy(3, &["conn-failure".into()], false);
        assert_eq!(d.attempts(FailureClass::ConnectFailure), 4);
        assert_eq!(d.attempts(FailureClass::Status503), 1);
        let all = RetryLayer::haproxy(2, &["all-retryable-errors".into()], true);
        assert_eq!(all.attempts(FailureClass::Timeout), 3);
    }
}
