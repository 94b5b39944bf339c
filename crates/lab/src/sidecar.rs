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
//! The config is a [`GuardDoc`], kept by the pod so a `set_capacity`
//! with `sidecar_limit` reloads the running sidecar with its new limit
//! (changed in place: requests in flight keep their slots).

use std::net::SocketAddr;

use stormbreak_guard::Guard;
use stormbreak_policy::limit::QueueConfig;
use stormbreak_sim::scenario::SidecarSpec;

use crate::guard_doc::GuardDoc;

/// The listener's name in the generated config.
pub const LISTENER: &str = "pod";
/// The route's name in the generated config (its metrics label).
pub const ROUTE: &str = "app";

/// The guard config of a sidecar in front of `app`, with concurrency
/// limit `limit` (the scenario's, or a `set_capacity`'s, per pod).
///
/// Saturation shedding by class is off (an Istio sidecar's
/// `http2MaxRequests` does not shed by class), so the only refusal is the
/// limit's when it and its queue are full, answered 503 without
/// `Retry-After` as the simulator's sidecar does.
pub fn doc(spec: &SidecarSpec, limit: u32, app: SocketAddr) -> GuardDoc {
    let queue = match (spec.queue, spec.queue_timeout) {
        (size, Some(timeout)) if size > 0 => Some(QueueConfig { size, timeout }),
        _ => None,
    };
    GuardDoc::new(LISTENER, ROUTE, &[app]).fixed_limit(limit, queue, 503)
}

/// Starts a sidecar for `app` with limit `limit`, returning the guard,
/// its config and its address.
pub async fn start(
    spec: &SidecarSpec,
    limit: u32,
    app: SocketAddr,
) -> Result<(Guard, GuardDoc, SocketAddr), String> {
    let doc = doc(spec, limit, app);
    let (guard, addr) = doc.start().await?;
    Ok((guard, doc, addr))
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
