//! What the lab can run today, and the refusal of everything else by name,
//! before anything starts: a scenario feature the lab would drop silently
//! would make a real run look like the simulated one when it is not.

use stormbreak_sim::Scenario;
use stormbreak_sim::scenario::ActionKind;

/// The timeline actions the lab applies (`actions.rs`). The others act on
/// LB pools' manual gates (`admit`, not yet through the lab), or on
/// traffic shifting between routes (`shift_traffic`, with
/// `failover_route`).
pub const SUPPORTED_ACTIONS: [&str; 13] = [
    "slow_service",
    "pause_nodes",
    "restart_nodes",
    "shed",
    "unshed",
    "set_rate",
    "set_retry",
    "set_capacity",
    "kill_pods",
    "fail_pods",
    "stall",
    "set_lb_limit",
    "ramp",
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
    lb_pools(sc, &mut out);
    gateways(sc, &mut out);
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
    routes(sc, &mut out);
    for c in &sc.clients {
        let name = c.name.get_ref();
        let mut field = |f: &str| out.push(format!("[[client]] {name:?}: {f}"));
        if c.fanout > 0 && (c.fanout_delay.as_nanos() as f64) < MIN_MEAN_SERVICE_TIME_NS {
            // The spawned attempts' delay is slept on the same timer as
            // service times: under 5 ms it would be measurably long, and
            // the loop would spawn slower than the simulator's.
            field(&format!(
                "fanout_delay = {}; the lab sleeps it on tokio's millisecond timer and needs at \
                 least {} ms",
                stormbreak_policy::units::format_duration(c.fanout_delay),
                MIN_MEAN_SERVICE_TIME_NS / 1e6
            ));
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
        let behind = |s: &str| behind_a_hop(sc, s);
        match &a.kind {
            ActionKind::PauseNodes { lb, .. } | ActionKind::RestartNodes { lb } if behind(lb) => {
                out.push(format!(
                    "[[action]] at {at}: do = {name:?} of {lb:?}, which is behind another LB \
                     pool (its nodes are that pool's fixed cluster)"
                ))
            }
            ActionKind::Shed {
                lb, route, class, ..
            }
            | ActionKind::Unshed { lb, route, class } => {
                if class.is_some() {
                    out.push(format!(
                        "[[action]] at {at}: do = {name:?} with class (the lab's clients send no \
                         criticality class yet)"
                    ));
                }
                if behind(lb) {
                    out.push(format!(
                        "[[action]] at {at}: do = {name:?} at {lb:?}, which is behind another LB \
                         pool (its refusal would reach the client as the outer pool's)"
                    ));
                }
                let (routes, crosses) = routes_through(sc, lb, route);
                if !crosses {
                    out.push(format!(
                        "[[action]] at {at}: do = {name:?} of route {route:?} at {lb:?}, which \
                         that route does not cross"
                    ));
                } else if routes > 1 {
                    out.push(format!(
                        "[[action]] at {at}: do = {name:?} at {lb:?}, which carries {routes} \
                         routes (its nodes' one guard route cannot tell them apart)"
                    ));
                }
            }
            ActionKind::Ramp {
                lb,
                route,
                sites,
                status,
                ..
            } => ramp(sc, &at, lb, route, sites, *status, &mut out),
            ActionKind::SetLbLimit {
                maxconn: Some(_), ..
            } => out.push(format!(
                "[[action]] at {at}: do = \"set_lb_limit\" with maxconn (the keep-alive \
                 connection model)"
            )),
            ActionKind::Stall { targets, .. } => {
                for t in targets {
                    if !is_service(sc, t) {
                        out.push(format!(
                            "[[action]] at {at}: do = \"stall\" of {t:?} (the lab stalls services only)"
                        ));
                    } else if behind(t) {
                        out.push(format!(
                            "[[action]] at {at}: do = \"stall\" of {t:?}, which is behind an LB pool \
                             or a gateway (the lab's stall hook is in the client's path to a first hop)"
                        ));
                    }
                }
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

/// A `ramp` at `lb` of `route` over `sites`: the LB must be its clients'
/// first hop and carry that route alone (its nodes' one guard route is
/// what the guard restores), every client crossing it must have a site
/// among `sites` (a guard listener outside a restore's sites admits
/// nothing while it runs, where the simulator does not ramp such a site),
/// and every ramp at the LB must name the same sites and status (they are
/// the nodes' config, fixed at start).
fn ramp(
    sc: &Scenario,
    at: &str,
    lb: &str,
    route: &str,
    sites: &[String],
    status: u16,
    out: &mut Vec<String>,
) {
    let mut say = |why: String| {
        out.push(format!(
            "[[action]] at {at}: do = \"ramp\" at {lb:?}: {why}"
        ))
    };
    if behind_a_hop(sc, lb) {
        say("it is behind another hop (the lab's clients send only to a first hop's site listeners)".into());
    }
    let (routes, crosses) = routes_through(sc, lb, route);
    if !crosses {
        say(format!("route {route:?} does not cross it"));
    } else if routes > 1 {
        say(format!(
            "it carries {routes} routes (its nodes' one guard route cannot tell them apart)"
        ));
    }
    for c in &sc.clients {
        let crosses_lb = sc
            .routes
            .iter()
            .find(|r| r.name.get_ref() == c.route.get_ref())
            .is_some_and(|r| r.path.iter().any(|h| h.get_ref() == lb));
        if crosses_lb && !c.site.as_ref().is_some_and(|s| sites.contains(s)) {
            say(format!(
                "client {:?} (site {:?}) is not among its sites (the guard admits nothing from \
                 a site outside a running restore; the simulator does not ramp it)",
                c.name.get_ref(),
                c.site.as_deref().unwrap_or("none")
            ));
        }
    }
    let differs = sc.actions.iter().any(|a| match &a.get_ref().kind {
        ActionKind::Ramp {
            lb: other,
            sites: s,
            status: st,
            ..
        } => other == lb && (s != sites || *st != status),
        _ => false,
    });
    if differs {
        say("another ramp at it names other sites or another status (they are its nodes' config, set at start)".into());
    }
}

/// How many routes cross LB pool `lb`, and whether `route` is one.
fn routes_through(sc: &Scenario, lb: &str, route: &str) -> (usize, bool) {
    let crossing: Vec<&str> = sc
        .routes
        .iter()
        .filter(|r| r.path.iter().any(|h| h.get_ref() == lb))
        .map(|r| r.name.get_ref().as_str())
        .collect();
    (crossing.len(), crossing.contains(&route))
}

fn is_service(sc: &Scenario, name: &str) -> bool {
    sc.services.iter().any(|s| s.name.get_ref() == name)
}

fn is_lb(sc: &Scenario, name: &str) -> bool {
    sc.lbs.iter().any(|l| l.name.get_ref() == name)
}

fn is_gateway(sc: &Scenario, name: &str) -> bool {
    sc.gateways.iter().any(|g| g.name.get_ref() == name)
}

/// Whether route `r` is a gateway's dependency.
fn is_dependency(sc: &Scenario, r: &str) -> bool {
    sc.gateways
        .iter()
        .any(|g| g.dependency.as_ref().is_some_and(|d| d.get_ref() == r))
}

/// Whether service `name` is reached through a guard (an LB node or a
/// gateway): after a route's first hop, or first on a dependency route.
fn behind_a_hop(sc: &Scenario, name: &str) -> bool {
    sc.routes.iter().any(|r| {
        r.path.iter().skip(1).any(|h| h.get_ref() == name)
            || (is_dependency(sc, r.name.get_ref())
                && r.path.first().is_some_and(|h| h.get_ref() == name))
    })
}

/// The distinct hops after `name` on every route, and whether it is on
/// any route.
fn next_hops<'a>(sc: &'a Scenario, name: &str) -> (Vec<&'a str>, bool) {
    let mut next: Vec<&str> = Vec::new();
    let mut on_a_route = false;
    for r in &sc.routes {
        on_a_route |= r.path.iter().any(|h| h.get_ref() == name);
        for w in r.path.windows(2) {
            if w[0].get_ref() == name && !next.contains(&w[1].get_ref().as_str()) {
                next.push(w[1].get_ref());
            }
        }
    }
    (next, on_a_route)
}

/// Refuses a pool (`table` `name`) on no route or with several next hops.
fn one_next_hop(sc: &Scenario, table: &str, name: &str, out: &mut Vec<String>) {
    let (next, on_a_route) = next_hops(sc, name);
    if !on_a_route {
        out.push(format!(
            "{table} {name:?}: on no route (the lab starts its guards in front of its route's \
             next hop)"
        ));
    } else if next.len() > 1 {
        out.push(format!(
            "{table} {name:?}: forwards to {} different next hops ({}); the lab's guards \
             forward every request to one",
            next.len(),
            next.join(", ")
        ));
    }
}

/// Gateways: each instance a guard with the gateway's policies and its
/// dependency call (`gateway.rs`).
fn gateways(sc: &Scenario, out: &mut Vec<String>) {
    for g in &sc.gateways {
        let name = g.name.get_ref();
        one_next_hop(sc, "[[gateway]]", name, out);
        if g.retry
            .as_ref()
            .is_some_and(|r| r.per_try_timeout.is_some())
        {
            out.push(format!(
                "[[gateway]] {name:?}: retry.per_try_timeout (the simulator times each call by \
                 the gateway's `timeout`; remove it so both runs mean the same)"
            ));
        }
        let status = g.saturation.as_ref().map_or(503, |s| s.status);
        let behind_lb = sc.routes.iter().any(|r| {
            r.path
                .windows(2)
                .any(|w| w[1].get_ref() == name && is_lb(sc, w[0].get_ref()))
        });
        if g.limit.is_some() && behind_lb && status == crate::lb::REFUSAL_STATUS {
            out.push(format!(
                "[[gateway]] {name:?}: saturation.status = {status} behind an LB pool (the \
                 lab tells an LB node's own refusal by that status; use 503 or 403)"
            ));
        }
    }
}

/// LB pools: each node is a guard forwarding to one next hop, holding at
/// most `flows_per_node` requests in flight (`lb.rs`).
fn lb_pools(sc: &Scenario, out: &mut Vec<String>) {
    for lb in &sc.lbs {
        let name = lb.name.get_ref();
        if lb.connections.is_some() {
            out.push(format!(
                "[[lb]] {name:?}: connections (the keep-alive connection model; without it a \
                 node's flows are its requests in flight, which the lab runs)"
            ));
        }
        one_next_hop(sc, "[[lb]]", name, out);
    }
    for s in &sc.services {
        let name = s.name.get_ref();
        if !behind_a_hop(sc, name) {
            continue;
        }
        let first_for_clients = sc.routes.iter().any(|r| {
            !is_dependency(sc, r.name.get_ref())
                && r.path.first().is_some_and(|h| h.get_ref() == name)
        });
        if first_for_clients {
            out.push(format!(
                "[[service]] {name:?}: both a client route's first hop and behind an LB pool \
                 or a gateway (its arrivals are counted at one place or the other)"
            ));
        }
    }
}

/// Routes: LB pools, then gateways, then one service last; no LB pool on
/// a gateway's way (its dependency route, or after it): the gateway would
/// read a node's refusal as an answer where the simulator's gateway sees
/// a refused connection.
fn routes(sc: &Scenario, out: &mut Vec<String>) {
    for r in &sc.routes {
        let name = r.name.get_ref();
        let lb_at = |from: usize| r.path.iter().skip(from).find(|h| is_lb(sc, h.get_ref()));
        if let Some(lb) = r
            .path
            .iter()
            .position(|h| is_gateway(sc, h.get_ref()))
            .and_then(lb_at)
        {
            out.push(format!(
                "[[route]] {name:?}: LB pool {:?} after a gateway (the lab runs LB pools at \
                 the edge, before gateways)",
                lb.get_ref()
            ));
        }
        if is_dependency(sc, name)
            && let Some(lb) = lb_at(0)
        {
            out.push(format!(
                "[[route]] {name:?}: LB pool {:?} on a gateway's dependency route",
                lb.get_ref()
            ));
        }
        let Some((last, front)) = r.path.split_last() else {
            continue;
        };
        if !is_service(sc, last.get_ref()) {
            out.push(format!(
                "[[route]] {name:?}: ends at {:?}; the lab runs routes that end at a service",
                last.get_ref()
            ));
        }
        for h in front {
            let h = h.get_ref();
            if is_service(sc, h) {
                out.push(format!(
                    "[[route]] {name:?}: service {h:?} before the last hop"
                ));
            }
        }
    }
}
