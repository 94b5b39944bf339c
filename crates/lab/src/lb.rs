//! An LB node as a `stormbreak guard`: the simulator's node holds a
//! **flow** for an attempt's whole downstream life and refuses a new one
//! at `flows_per_node` (`engine/lb.rs`). The guard expresses that as its
//! route's concurrency limit, `fixed` at `flows_per_node`, with no queue
//! and shedding by class off (`sidecar::NO_SHEDDING`): a request is admitted while fewer than that
//! many are in flight through the node (held until the next hop answers),
//! else answered at once with [`REFUSAL_STATUS`] and
//! `X-Stormbreak-Refused: limit`.
//!
//! Not the listener's `max_connections`: that counts connections, idle
//! keep-alive ones included, where a flow is a request in flight; and
//! its refusal (a reset) could not be told from a paused node's.

use std::net::SocketAddr;

use crate::plan::LbPlan;
use crate::pool::{LISTENER, ROUTE};

/// The status of a node's own refusal at its flow cap. No other part of
/// an LB's route answers 429 with `X-Stormbreak-Refused: limit` (sidecars
/// and apps refuse with 503), so the client tells the node's refusal from
/// a refusal further down that the node passed on; the lab then hands it
/// to the client's classifier as the refused connection the simulator's
/// callers see (`flows_exhausted`).
pub const REFUSAL_STATUS: u16 = 429;

/// The guard config of one node of `lb` forwarding to `next` (the next
/// hop's pods or instances; the guard's P2C least-request picks one).
pub fn config_text(lb: &LbPlan, next: &[SocketAddr]) -> String {
    let endpoints = next
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ");
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
name = "next"
endpoints = [{endpoints}]
protocol = "http1"
pool_max_idle_per_endpoint = 4096

[[route]]
name = "{ROUTE}"
match = {{ path_prefix = "/" }}
cluster = "next"
limit = {{ kind = "fixed", limit = {flows} }}

[saturation]
status = {REFUSAL_STATUS}
retry_after = "0"
{no_shedding}
"#,
        no_shedding = crate::sidecar::NO_SHEDDING,
        flows = lb.flows_per_node,
        backlog = crate::backend::BACKEND_BACKLOG,
    )
}

/// The `[[shed]]` table of an operator's `shed` action at a node: every
/// request of its one route answered `status` (with `Retry-After` in whole
/// seconds, rounded up, when set), named `rule` in `X-Stormbreak-Refused`.
pub fn shed_table(status: u16, retry_after: Option<stormbreak_policy::Nanos>) -> String {
    let after = retry_after.map_or(String::new(), |d| {
        format!(
            "retry_after = \"{}\"\n",
            stormbreak_policy::units::format_duration(d)
        )
    });
    format!("[[shed]]\nroute = \"{ROUTE}\"\nstatus = {status}\n{after}")
}
