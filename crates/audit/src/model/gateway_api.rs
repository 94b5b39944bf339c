//! Gateway API HTTPRoute rules as the implementation that runs them
//! applies them.
//!
//! The Gateway API leaves a rule without `retry` (and a `retry` without
//! `attempts`) to the implementation (GEP-1731). Which implementation runs
//! a route is known only once every object is read: its `parentRefs` name
//! a Gateway (whose `gatewayClassName` says who runs it) or, for mesh
//! routing (GAMMA), a Service. So a rule is kept as written
//! ([`RuleSpec`]) and [`resolve`] sets its retry layer and timeout after
//! loading.
//!
//! Istio translates an HTTPRoute rule into a VirtualService route
//! (istio/istio `pilot/pkg/config/kube/gateway/conversion.go`, as of
//! Istio 1.28, "Gateway API" task
//! <https://istio.io/v1.28/docs/tasks/traffic-management/ingress/gateway-api/>):
//! - no `retry`: the route has no `retries`, so Istio's default policy
//!   applies (2 retries on connection failures, [`RetryLayer::istio_default`]);
//! - `retry`: `attempts` defaults to 2; retried on `connect-failure,
//!   refused-stream,unavailable,cancelled` plus each of `codes`;
//!   `attempts: 0` disables retries;
//! - `timeouts.request` is the route timeout; `timeouts.backendRequest` is
//!   the per-try timeout when `retry` is set, and otherwise *replaces* the
//!   route timeout.
//!
//! Istio's GatewayClasses are `istio`, `istio-waypoint`, `istio-remote`
//! and `istio-east-west` (Istio 1.28 "Gateway API", "Gateway classes").

use std::time::Duration;

use super::{Inventory, RetryLayer};

/// Istio's built-in GatewayClass names.
pub const ISTIO_CLASSES: [&str; 4] = ["istio", "istio-waypoint", "istio-remote", "istio-east-west"];

/// One HTTPRoute rule's retry and timeouts as written (durations already
/// parsed; `0s`, which disables a Gateway API timeout, already dropped).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSpec {
    /// `retry`: (`attempts`, `codes`, `backoff`).
    pub retry: Option<(Option<i64>, Vec<i64>, Option<Duration>)>,
    /// `timeouts.request`.
    pub request: Option<Duration>,
    /// `timeouts.backendRequest`.
    pub backend_request: Option<Duration>,
}

/// Who runs an HTTPRoute, and why the audit thinks so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Implementation {
    /// Istio: its proxies apply Istio's translation.
    Istio(String),
    /// Another implementation (its class named), or none known.
    Other(String),
}

/// True when the inputs show an Istio mesh: an Istio object, a pod with
/// an Istio sidecar, or a namespace labelled for injection.
pub fn shows_istio(inv: &Inventory) -> bool {
    const ISTIO_KINDS: [&str; 6] = [
        "VirtualService",
        "DestinationRule",
        "Sidecar",
        "EnvoyFilter",
        "ServiceEntry",
        "ProxyConfig",
    ];
    ISTIO_KINDS.iter().any(|k| inv.counts.read.contains_key(*k))
        || inv.workloads.iter().any(|w| w.sidecar.is_some())
        || inv
            .namespaces
            .values()
            .any(|l| l.contains_key("istio-injection") || l.contains_key("istio.io/rev"))
}

/// Who runs a route with these `parentRefs` ((kind, namespace, name)).
pub fn implementation(
    inv: &Inventory,
    parents: &[(String, String, String)],
    istio_seen: bool,
) -> Implementation {
    let mut other = None;
    for (kind, ns, name) in parents {
        if kind == "Service" {
            if istio_seen {
                return Implementation::Istio(format!(
                    "mesh route on Service {ns}/{name} in an Istio mesh"
                ));
            }
            other.get_or_insert_with(|| {
                format!("mesh route on Service {ns}/{name}, no mesh among the inputs")
            });
            continue;
        }
        match inv.gateway_classes.get(&(ns.clone(), name.clone())) {
            Some(class) if ISTIO_CLASSES.contains(&class.as_str()) => {
                return Implementation::Istio(format!("Gateway {ns}/{name}, class {class}"));
            }
            Some(class) => {
                other.get_or_insert_with(|| format!("Gateway {ns}/{name}, class {class}"));
            }
            None if istio_seen => {
                return Implementation::Istio(format!(
                    "Gateway {ns}/{name} not among the inputs, assumed Istio's: the inputs show an Istio mesh"
                ));
            }
            None => {
                other.get_or_insert_with(|| {
                    format!("Gateway {ns}/{name} not among the inputs, no mesh among them")
                });
            }
        }
    }
    Implementation::Other(other.unwrap_or_else(|| "no parentRefs".into()))
}

/// The retry layer and route timeout of a rule run by `who`.
pub fn apply(rule: &RuleSpec, who: &Implementation) -> (RetryLayer, Option<Duration>) {
    match who {
        Implementation::Istio(why) => match &rule.retry {
            None => {
                let mut l = RetryLayer::istio_default();
                l.what = format!(
                    "HTTPRoute without retry, run by Istio ({why}): Istio's default policy, 2 retries on connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes, no status codes"
                );
                // Without a retry, Istio makes backendRequest the route timeout.
                (l, rule.backend_request.or(rule.request))
            }
            Some((attempts, codes, backoff)) => {
                let n = attempts.unwrap_or(2);
                let mut on = String::from("connect-failure,refused-stream,unavailable,cancelled");
                for c in codes {
                    on.push_str(&format!(",{c}"));
                }
                let mut l = match RetryLayer::istio(Some(n), Some(&on), rule.backend_request) {
                    Ok(l) => l,
                    // A negative count is refused by the API server; read as none.
                    Err(_) => RetryLayer::none("HTTPRoute retry.attempts below 0"),
                };
                l.what = format!(
                    "HTTPRoute retry run by Istio ({why}): {}{}{}",
                    l.what,
                    if attempts.is_none() {
                        " (attempts unset: Istio uses 2)"
                    } else {
                        ""
                    },
                    backoff
                        .map(|b| format!(", backoff {}", crate::units::show(b)))
                        .unwrap_or_default()
                );
                (l, rule.request)
            }
        },
        Implementation::Other(why) => {
            let mut l = match &rule.retry {
                None => RetryLayer::none(&format!(
                    "HTTPRoute without retry (implementation default not counted: {why})"
                )),
                Some((attempts, codes, backoff)) => {
                    RetryLayer::gateway_api(*attempts, codes, *backoff)
                }
            };
            l.per_try = rule.backend_request;
            (l, rule.request)
        }
    }
}

/// Sets every HTTPRoute rule's retry layer and timeout from the
/// implementation that runs it. Called once, after every object is read.
pub fn resolve(inv: &mut Inventory) {
    let istio_seen = shows_istio(inv);
    let mut decided = Vec::new();
    for ro in &inv.routes {
        if ro.kind != "HTTPRoute" {
            decided.push(None);
            continue;
        }
        decided.push(Some(implementation(inv, &ro.parents, istio_seen)));
    }
    for (ro, who) in inv.routes.iter_mut().zip(decided) {
        let Some(who) = who else { continue };
        for r in &mut ro.routes {
            if let Some(spec) = &r.gateway_api {
                let (retry, timeout) = apply(spec, &who);
                r.retry = retry;
                r.timeout = timeout;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FailureClass;

    fn rule(retry: Option<(Option<i64>, Vec<i64>, Option<Duration>)>) -> RuleSpec {
        RuleSpec {
            retry,
            request: Some(Duration::from_secs(10)),
            backend_request: Some(Duration::from_secs(2)),
        }
    }

    #[test]
    fn istio_without_retry_applies_its_default_and_backend_request_becomes_the_route_timeout() {
        let who = Implementation::Istio("test".into());
        let (l, t) = apply(&rule(None), &who);
        assert_eq!(l.attempts(FailureClass::ConnectFailure), 3);
        assert_eq!(l.attempts(FailureClass::Status503), 1);
        assert_eq!(t, Some(Duration::from_secs(2)));
    }

    #[test]
    fn istio_retry_without_attempts_is_two_and_codes_are_retried() {
        let who = Implementation::Istio("test".into());
        let (l, t) = apply(&rule(Some((None, vec![503], None))), &who);
        assert_eq!(l.attempts(FailureClass::Status503), 3);
        assert_eq!(l.per_try, Some(Duration::from_secs(2)));
        assert_eq!(t, Some(Duration::from_secs(10)));
        let (off, _) = apply(&rule(Some((Some(0), vec![503], None))), &who);
        assert_eq!(off.attempts(FailureClass::ConnectFailure), 1);
    }

    #[test]
    fn another_implementation_counts_no_default() {
        let who = Implementation::Other("class envoy".into());
        let (l, _) = apply(&rule(None), &who);
        assert_eq!(l.attempts(FailureClass::ConnectFailure), 1);
        assert!(l.what.contains("class envoy"), "{}", l.what);
    }
}
