//! A pod's sidecar: a `stormbreak guard` in this process (its library
//! entry point, `Guard::start`, the one `stormbreak guard --config` uses),
//! with one route whose concurrency limit and queue are the scenario's
//! sidecar `limit`, `queue` and `queue_timeout`.
//!
//! In-process rather than a child process: a lab run's parts then share
//! one runtime, end with it, and cannot outlive the run (a child process
//! could be orphaned by a crash); the cost is that the guards share the
//! load generator's two cores, which `validity.rs` watches.
//!
//! The config is written as guard TOML and parsed by the guard's own
//! parser, so whatever the guard refuses is refused here with its message.

use std::net::SocketAddr;

use stormbreak_guard::{Guard, GuardConfig};
use stormbreak_sim::scenario::SidecarSpec;

/// The listener's name in the generated config.
pub const LISTENER: &str = "pod";
/// The route's name in the generated config (its metrics label).
pub const ROUTE: &str = "app";

/// `[saturation]` thresholds that never shed by class: a fixed limit's
/// saturation never passes 1. Finite, not `"never"`: the guard answers a
/// full limit with the answer its table gives the least important class
/// at infinite saturation, which a `"never"` table does not give (it then
/// falls back to 503 with `Retry-After: 1`, which the simulator's sidecar
/// and LB do not send).
pub const NO_SHEDDING: &str =
    "thresholds = { sheddable = 1e9, sheddable_plus = 1e9, critical = 1e9, critical_plus = 1e9 }";

/// The guard config of a sidecar in front of `app`.
///
/// Saturation shedding by class is off ([`NO_SHEDDING`]: an Istio
/// sidecar's `http2MaxRequests` does not shed by class), so the only
/// refusal is the limit's when it and its queue are full, answered 503
/// without `Retry-After` as the simulator's sidecar does.
pub fn config_text(spec: &SidecarSpec, app: SocketAddr) -> String {
    let queue = match (spec.queue, spec.queue_timeout) {
        (q, Some(t)) if q > 0 => format!("queue = {{ size = {q}, timeout = \"{t}\" }}\n"),
        _ => String::new(),
    };
    format!(
        r#"[[listener]]
name = "{LISTENER}"
bind = "127.0.0.1:0"
protocol = "http1"
max_connections = 10000
backlog = {backlog}
request_timeout = "1h"
idle_timeout = "1h"

[[cluster]]
name = "app"
endpoints = ["{app}"]
protocol = "http1"
pool_max_idle_per_endpoint = 4096

[[route]]
name = "{ROUTE}"
match = {{ path_prefix = "/" }}
cluster = "app"
limit = {{ kind = "fixed", limit = {limit} }}
{queue}
[saturation]
status = 503
retry_after = "0"
{NO_SHEDDING}
"#,
        limit = spec.limit,
        backlog = crate::backend::BACKEND_BACKLOG,
    )
}

/// Starts a sidecar for `app`, returning the guard and its address.
pub async fn start(spec: &SidecarSpec, app: SocketAddr) -> Result<(Guard, SocketAddr), String> {
    let text = config_text(spec, app);
    let config = GuardConfig::parse("<lab sidecar>", &text).map_err(|e| e.to_string())?;
    let guard = Guard::start(&config).await.map_err(|e| e.to_string())?;
    let addr = guard
        .local_addr(LISTENER)
        .ok_or("the sidecar guard has no listener")?;
    Ok((guard, addr))
}

/// (in flight, queued) of the sidecar's route, read from the guard's
/// OpenMetrics text (`stormbreak_guard_inflight`, `…_queue_depth`).
pub fn reading(guard: &Guard) -> (f64, f64) {
    let text = guard.metrics_text();
    (
        metric(&text, "stormbreak_guard_inflight{", ROUTE),
        metric(&text, "stormbreak_guard_queue_depth{", ROUTE),
    )
}

/// (requests arrived, requests refused by the limit) at the sidecar's
/// route so far: `stormbreak_guard_requests_total` and
/// `stormbreak_guard_limit_refused_total` (both reasons).
pub fn counts(guard: &Guard) -> (u64, u64) {
    let text = guard.metrics_text();
    (
        metric(&text, "stormbreak_guard_requests_total{", ROUTE) as u64,
        metric(&text, "stormbreak_guard_limit_refused_total{", ROUTE) as u64,
    )
}

/// The sum of the samples of `name` (a metric name with its opening
/// brace) labelled with `route` in a guard's OpenMetrics `text`: a gauge
/// has one, a counter by reason several.
pub fn metric(text: &str, name: &str, route: &str) -> f64 {
    let label = format!("route=\"{route}\"");
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
