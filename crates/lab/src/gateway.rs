//! A gateway instance as a `stormbreak guard`: one route with the
//! gateway's `limit`, `queue` and `[saturation]` table, its `retry` and
//! `budget`, and its `dependency` as the guard's `route.dependency` (the
//! simulator's dependency call, docs/guard.md), calling the dependency
//! route's first hop before forwarding to the next hop.
//!
//! The policy tables are the scenario's own values, serialised by the
//! policy crate's serde code and parsed back by the guard's parser: one
//! schema, no translation.

use std::net::SocketAddr;

use serde::Serialize;
use stormbreak_policy::budget::BudgetConfig;
use stormbreak_policy::limit::{LimitConfig, QueueConfig};
use stormbreak_policy::retry::RetryConfig;
use stormbreak_policy::shed::SaturationConfig;

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
pub const UNBUDGETED: &str =
    r#"{ kind = "ratio", retry_ratio = 1000, min_retries_per_sec = 1000000 }"#;

#[derive(Serialize)]
struct Doc<'a> {
    route: [Route<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    saturation: Option<&'a SaturationConfig>,
}

#[derive(Serialize)]
struct Route<'a> {
    name: &'static str,
    cluster: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<&'a LimitConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue: Option<&'a QueueConfig>,
    retry: RetryConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget: Option<&'a BudgetConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dependency: Option<Dependency>,
}

#[derive(Serialize)]
struct Dependency {
    cluster: &'static str,
    path: &'static str,
    timeout: String,
}

fn endpoints(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn cluster(name: &str, addrs: &[SocketAddr]) -> String {
    format!(
        "[[cluster]]\nname = \"{name}\"\nendpoints = [{}]\nprotocol = \"http1\"\npool_max_idle_per_endpoint = 4096\n\n",
        endpoints(addrs)
    )
}

/// The guard config of one instance of `gw` forwarding to `next` and,
/// with a dependency, calling `dependency` (the dependency route's first
/// hop) first.
///
/// Both calls are timed by the gateway's `timeout`: the route's
/// `retry.per_try_timeout` for the forwarded call, the dependency's
/// `timeout` for the check. Without `retry` the route gets one attempt
/// (`max_attempts = 1`), so that the forwarded call still has its
/// timeout, as the simulator's gateway arms it.
pub fn config_text(
    gw: &GatewayPlan,
    next: &[SocketAddr],
    dependency: Option<&[SocketAddr]>,
) -> Result<String, String> {
    let timeout = stormbreak_policy::units::format_duration(gw.timeout);
    let mut retry = gw.retry.clone().unwrap_or(RetryConfig {
        max_attempts: 1,
        overall_timeout: None,
        ..RetryConfig::default()
    });
    retry.per_try_timeout = Some(gw.timeout);
    let doc = Doc {
        route: [Route {
            name: ROUTE,
            cluster: "next",
            limit: gw.limit.as_ref(),
            queue: gw.queue.as_ref(),
            retry,
            budget: gw.budget.as_ref(),
            dependency: dependency.map(|_| Dependency {
                cluster: "dependency",
                path: "/",
                timeout: timeout.clone(),
            }),
        }],
        saturation: gw.saturation.as_ref().filter(|_| gw.limit.is_some()),
    };
    let mut tables = toml::to_string(&doc).map_err(|e| format!("gateway {:?}: {e}", gw.name))?;
    if gw.budget.is_none() {
        // After the route's own keys, before any sub-table of it.
        tables = tables.replacen(
            &format!("name = \"{ROUTE}\"\n"),
            &format!("name = \"{ROUTE}\"\nbudget = {UNBUDGETED}\n"),
            1,
        );
    }
    let mut text = format!(
        r#"[[listener]]
name = "{LISTENER}"
bind = "127.0.0.1:0"
protocol = "http1"
max_connections = 10000
backlog = {backlog}
request_timeout = "1h"
idle_timeout = "1h"

"#,
        backlog = crate::backend::BACKEND_BACKLOG,
    );
    text.push_str(&cluster("next", next));
    if let Some(dep) = dependency {
        text.push_str(&cluster("dependency", dep));
    }
    text.push_str(&tables);
    // Every route matches every path (`match` after the route's keys).
    Ok(text.replacen(
        &format!("name = \"{ROUTE}\"\n"),
        &format!("name = \"{ROUTE}\"\nmatch = {{ path_prefix = \"/\" }}\n"),
        1,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormbreak_guard::GuardConfig;
    use stormbreak_policy::Nanos;
    use stormbreak_policy::limit::FixedConfig;

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
            let text = config_text(&plan(retry, budget), &[a], Some(&[a])).unwrap();
            let parsed = GuardConfig::parse("gw.toml", &text);
            assert!(parsed.is_ok(), "{text}\n{}", parsed.err().unwrap());
            assert!(text.contains("per_try_timeout = \"250ms\""), "{text}");
            assert_eq!(text.contains("retry_ratio = 1000"), !budget, "{text}");
        }
        let bare = GatewayPlan {
            limit: None,
            queue: None,
            ..plan(false, false)
        };
        let text = config_text(&bare, &[a], None).unwrap();
        assert!(GuardConfig::parse("gw.toml", &text).is_ok(), "{text}");
        assert!(
            !text.contains("[saturation]") && !text.contains("dependency"),
            "{text}"
        );
    }
}
