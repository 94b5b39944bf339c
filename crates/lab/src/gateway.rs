//! A gateway instance as a `stormbreak guard`: one route with the
//! gateway's `limit`, `queue` and `[saturation]` table, its `retry` and
//! `budget`, and its `dependency` as the guard's `route.dependency` (the
//! simulator's dependency call, docs/guard.md), calling the dependency
//! route's first hop before forwarding to the next hop.
//!
//! The policy tables are the scenario's own values (the policy crate's
//! types, serialised in a [`GuardDoc`] and parsed back by the guard's
//! parser): one schema, no translation.

use std::net::SocketAddr;

use stormbreak_policy::budget::{BudgetConfig, RatioBudgetConfig};
use stormbreak_policy::retry::RetryConfig;

use crate::guard_doc::GuardDoc;
use crate::plan::GatewayPlan;
use crate::pool::{LISTENER, ROUTE};

/// The body of the guard's answer to a request whose dependency check
/// failed for good (502, docs/guard.md): the lab records it
/// `dependency_failed`, as the simulator does.
pub const DEPENDENCY_FAILED_BODY: &[u8] = b"dependency check failed\n";

/// The budget of a gateway with `retry` and no `budget`: the simulator's
/// gateway is then unbudgeted, while the guard gives such a route the
/// ratio budget's defaults; the largest ratio budget the policy crate
/// accepts (1 000 retries per request, 10⁶ a second) never binds in a lab
/// run (at most 2 000 000 sends).
pub fn unbudgeted() -> BudgetConfig {
    BudgetConfig::Ratio(RatioBudgetConfig {
        retry_ratio: 1000.0,
        min_retries_per_sec: 1e6,
        ..RatioBudgetConfig::default()
    })
}

/// The route's retry policy for a gateway whose `retry` is `retry`:
/// without one, one attempt (`max_attempts = 1`), so that the forwarded
/// call still has its timeout, as the simulator's gateway arms it; with
/// one, its `per_try_timeout` is the gateway's `timeout`.
pub fn route_retry(gw: &GatewayPlan, retry: Option<&RetryConfig>) -> RetryConfig {
    let mut retry = retry.cloned().unwrap_or(RetryConfig {
        max_attempts: 1,
        overall_timeout: None,
        ..RetryConfig::default()
    });
    retry.per_try_timeout = Some(gw.timeout);
    retry
}

/// The guard config of one instance of `gw` forwarding to `next` and,
/// with a dependency, calling `dependency` (the dependency route's first
/// hop) first.
///
/// Both calls are timed by the gateway's `timeout`: the route's
/// `retry.per_try_timeout` for the forwarded call, the dependency's
/// `timeout` for the check.
pub fn doc(gw: &GatewayPlan, next: &[SocketAddr], dependency: Option<&[SocketAddr]>) -> GuardDoc {
    let doc = GuardDoc::new(LISTENER, ROUTE, next)
        .limits(gw.limit.clone(), gw.queue.clone(), gw.saturation.clone())
        .retry(
            route_retry(gw, gw.retry.as_ref()),
            Some(gw.budget.clone().unwrap_or_else(unbudgeted)),
        );
    match dependency {
        Some(at) => doc.dependency(at, gw.timeout),
        None => doc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormbreak_policy::Nanos;
    use stormbreak_policy::limit::{FixedConfig, LimitConfig, QueueConfig};
    use stormbreak_policy::shed::SaturationConfig;

    fn plan(retry: bool, budget: bool) -> GatewayPlan {
        GatewayPlan {
            name: "gw".into(),
            instances: 2,
            limit: Some(LimitConfig::Fixed(FixedConfig { limit: 7 })),
            queue: Some(QueueConfig {
                size: 3,
                timeout: Nanos::from_millis(50),
            }),
            saturation: Some(SaturationConfig::default()),
            retry: retry.then(RetryConfig::default),
            budget: budget.then(|| BudgetConfig::Ratio(Default::default())),
            timeout: Nanos::from_millis(250),
            dependency: Some(1),
        }
    }

    #[test]
    fn the_guard_parses_every_gateway_config_the_lab_writes() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        for (retry, budget) in [(false, false), (true, false), (true, true)] {
            let text = doc(&plan(retry, budget), &[a], Some(&[a])).text().unwrap();
            let parsed = stormbreak_guard::GuardConfig::parse("gw.toml", &text);
            assert!(parsed.is_ok(), "{text}\n{}", parsed.err().unwrap());
            assert!(text.contains("per_try_timeout = \"250ms\""), "{text}");
            assert_eq!(text.contains("retry_ratio = 1000"), !budget, "{text}");
        }
        let bare = GatewayPlan {
            limit: None,
            queue: None,
            ..plan(false, false)
        };
        let text = doc(&bare, &[a], None).text().unwrap();
        assert!(
            stormbreak_guard::GuardConfig::parse("gw.toml", &text).is_ok(),
            "{text}"
        );
        assert!(
            !text.contains("[saturation]") && !text.contains("dependency"),
            "{text}"
        );
    }
}
