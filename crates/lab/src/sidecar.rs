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

/// The guard config of a sidecar in front of `app`.
///
/// Saturation shedding by class is off (`"never"`: an Istio sidecar's
/// `http2MaxRequests` does not shed by class), so the only refusal is the
/// limit's when it and its queue are full, answered 503 without
/// `Retry-After` as the simulator's sidecar does.
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
thresholds = {{ sheddable = "never", sheddable_plus = "never", critical = "never", critical_plus = "never" }}
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
    let gauge = |name: &str| {
        text.lines()
            .filter(|l| l.starts_with(name) && l.contains(&format!("route=\"{ROUTE}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .next()
            .unwrap_or(0.0)
    };
    (
        gauge("stormbreak_guard_inflight{"),
        gauge("stormbreak_guard_queue_depth{"),
    )
}
