//! What the lab can run today, and the refusal of everything else by name,
//! before anything starts: a scenario feature the lab would drop silently
//! would make a real run look like the simulated one when it is not.

use stormbreak_sim::Scenario;
use stormbreak_sim::scenario::ActionKind;

/// The timeline actions the lab applies (`actions.rs`). The others act on
/// LB pools and gateways, which the lab does not run yet, or on traffic
/// shifting between routes (`shift_traffic`, with `failover_route`).
pub const SUPPORTED_ACTIONS: [&str; 7] = [
    "slow_service",
    "set_rate",
    "set_retry",
    "set_capacity",
    "kill_pods",
    "fail_pods",
    "stall",
];

/// The shortest mean service time the lab runs: tokio's timer wakes on
/// whole milliseconds and about 1 ms late on Linux (tokio-rs/tokio#5021),
/// so a mean under 5 ms would be served measurably slower than sampled.
pub const MIN_MEAN_SERVICE_TIME_NS: f64 = 5e6;

/// Every feature of `sc` the lab cannot run yet, one line each, naming the
/// table and the field as the scenario file spells them. Empty when the
/// lab can run the whole scenario.
pub fn unsupported(sc: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    for lb in &sc.lbs {
        out.push(format!(
            "[[lb]] {:?}: LB node pools (a guard listener that refuses at its flow cap is not built yet)",
            lb.name.get_ref()
        ));
    }
    for gw in &sc.gateways {
        out.push(format!(
            "[[gateway]] {:?}: gateways (the guard's dependency call is not built yet)",
            gw.name.get_ref()
        ));
    }
    if !sc.failovers.is_empty() {
        out.push("[[failover]]: capacity-aware failover controllers".to_owned());
    }
    for s in &sc.services {
        let name = s.name.get_ref();
        let mean = s.app.service_time.mean();
        if mean < MIN_MEAN_SERVICE_TIME_NS {
            out.push(format!(
                "[[service]] {name:?}: a mean service time of {:.3} ms; the lab serves by sleeping on \
                 tokio's millisecond timer and needs a mean of at least {} ms",
                mean / 1e6,
                MIN_MEAN_SERVICE_TIME_NS / 1e6
            ));
        }
        if s.app.drop_expired {
            out.push(format!(
                "[[service]] {name:?}: app.drop_expired = true (the backend cannot yet tell an abandoned request)"
            ));
        }
    }
    let services: Vec<&str> = sc
        .services
        .iter()
        .map(|s| s.name.get_ref().as_str())
        .collect();
    for r in &sc.routes {
        let one_service = r.path.len() == 1 && services.contains(&r.path[0].get_ref().as_str());
        if !one_service {
            out.push(format!(
                "[[route]] {:?}: a path of {} hop(s); the lab runs routes of exactly one service",
                r.name.get_ref(),
                r.path.len()
            ));
        }
    }
    for c in &sc.clients {
        let name = c.name.get_ref();
        let mut field = |f: &str| out.push(format!("[[client]] {name:?}: {f}"));
        if c.fanout > 0 {
            field("fanout (the fan-out refresh loop)");
        }
        if c.workers.is_some() {
            field("workers (a job queue)");
        }
        if c.connections.is_some() {
            field("connections (keep-alive connection model)");
        }
        if c.failover_route.is_some() {
            field("failover_route");
        }
        if c.retry
            .as_ref()
            .is_some_and(|r| r.per_try_timeout.is_some())
        {
            field(
                "retry.per_try_timeout (the simulator times each attempt by the client's `timeout`; \
                 remove it so both runs mean the same)",
            );
        }
    }
    for a in &sc.actions {
        let a = a.get_ref();
        let name = a.kind.name();
        let at = stormbreak_policy::units::format_duration(a.at);
        if !SUPPORTED_ACTIONS.contains(&name) {
            out.push(format!("[[action]] at {at}: do = {name:?}"));
            continue;
        }
        match &a.kind {
            ActionKind::SetCapacity { sidecar_limit, .. } if sidecar_limit.is_some() => {
                out.push(format!(
                    "[[action]] at {at}: do = \"set_capacity\" with sidecar_limit (a running \
                     guard's limit cannot be changed in place yet)"
                ))
            }
            ActionKind::SetRetry { retry: Some(r), .. } if r.per_try_timeout.is_some() => {
                out.push(format!(
                    "[[action]] at {at}: do = \"set_retry\" with retry.per_try_timeout (the \
                     simulator times each attempt by the client's `timeout`)"
                ))
            }
            _ => {}
        }
    }
    out
}
