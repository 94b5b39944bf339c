//! An Istio DestinationRule connection pool as a limited `[[gateway]]`.
//!
//! A pool lives in each calling proxy (Istio 1.27 "Destination Rule",
//! ConnectionPoolSettings: the settings apply to each upstream host's
//! connections from every sidecar), and the chain counts it as Σ caller
//! pods × the per-caller limit. The gateway has one instance per caller
//! and the per-caller limit each, so instances × limit is the chain's
//! number. Past the limit Envoy answers 503 at once (its circuit breaker's
//! overflow, `upstream_rq_pending_overflow`, with `x-envoy-overloaded`),
//! except that with `maxConnections` the binding limit, requests wait for
//! a connection in a pending queue of `http1MaxPendingRequests` (Envoy
//! "Circuit breaking",
//! <https://www.envoyproxy.io/docs/envoy/v1.34.0/intro/arch_overview/upstream/circuit_breaking>).
//! Envoy never retries an overflow (`source/common/router/retry_state_impl.cc`,
//! "we never retry if the reset reason is overflow",
//! <https://github.com/envoyproxy/envoy>), so the gateway sits before the
//! route's retry gateway, whose retries then cannot retry it.

use super::limit::{self, Limited};
use super::names::{one_line, plural};
use super::{MAX_PODS, MAX_QUEUE, MAX_SLOTS, NO_TIMEOUT, Out, Placed, timeout};
use crate::chain::{Chain, Hop, pool_of};
use crate::model::Inventory;
use crate::units::trim;

/// The pool hop `h` of `chain` as a gateway.
pub(crate) fn gateway(
    inv: &Inventory,
    chain: &Chain,
    h: &Hop,
    out: &mut Out,
    blocks: &mut String,
) -> Result<Placed, String> {
    let Some(total) = h.limit else {
        return Ok(Placed {
            name: None,
            ledger: vec![format!(
                "#   {}: no limit ({}) → nothing to carry",
                one_line(&h.name),
                one_line(&h.how)
            )],
        });
    };
    let pool = pool_of(inv, h);
    let per_caller = pool.and_then(|p| p.in_flight()).map(|(n, _)| n);
    // One instance per caller when the total is whole callers of the
    // per-caller limit (callers with different rules can break that:
    // then one instance of the total, said so).
    let split = per_caller.and_then(|n| {
        let callers = total / n as f64;
        (n >= 1
            && n <= MAX_SLOTS as u64
            && callers.fract() == 0.0
            && (1.0..=MAX_PODS as f64).contains(&callers))
        .then_some((n as u32, callers as u32))
    });
    let mut ledger = Vec::new();
    let (limit, instances) = match split {
        Some(s) => s,
        None => {
            let l = (total.round() as u64).clamp(1, MAX_SLOTS as u64) as u32;
            ledger.push(format!(
                "# GAP: {}: its {} is not whole callers of one per-caller limit; written as one instance of {l}, one pool shared by every caller",
                one_line(&h.name),
                trim(total)
            ));
            (l, 1)
        }
    };
    // A pool met again from the same callers for the same destination
    // (another route to the same host and subset: one Envoy cluster) is
    // the same pool in the same proxies; a subset is a cluster of its own,
    // with its own counters, even when it inherits the host's pool.
    let destination = chain.route.rsplit('→').next().unwrap_or_default().trim();
    let key = format!("pool {}|{}|{}|{destination}", h.object, h.name, trim(total));
    let (name, new) = out.names.of(&key, &h.name);
    ledger.push(format!(
        "#   {} ({}) → [[gateway]] {name}: fixed limit {limit} × {instances} {} (one per calling proxy)",
        one_line(&h.name),
        trim(total),
        plural(instances as u64, "instance")
    ));
    if new {
        let route_timeout = timeout(chain.timeout);
        let wait = || match route_timeout {
            Some(t) => (t, "the route timeout".to_string()),
            None => (
                NO_TIMEOUT,
                "no route timeout (Istio's default): Envoy waits without end; the format's largest"
                    .to_string(),
            ),
        };
        // Envoy queues only for a connection: when maxConnections is the
        // binding limit (HTTP/1.1, one request per connection).
        let queue = pool.and_then(|p| {
            let conns = p.max_connections.count()?;
            if p.max_requests.count().is_some_and(|r| r <= conns) {
                return None;
            }
            let (t, why) = wait();
            Some(match p.pending.count() {
                Some(n) => (
                    n.clamp(1, MAX_QUEUE as u64) as u32,
                    t,
                    format!("size: http1MaxPendingRequests {n}; timeout: {why}"),
                ),
                None => (
                    MAX_QUEUE,
                    t,
                    format!(
                        "size: http1MaxPendingRequests unset (Istio's default 2³²−1), the format's largest {MAX_QUEUE}; timeout: {why}"
                    ),
                ),
            })
        });
        let overflow = if queue.is_some() {
            "past maxConnections Envoy queues up to http1MaxPendingRequests, then answers 503 at once (upstream_rq_pending_overflow)"
        } else {
            "past the limit Envoy answers 503 at once (upstream_rq_pending_overflow, x-envoy-overloaded), with no queue"
        };
        let g = Limited {
            name: name.clone(),
            comments: vec![
                format!("{} ({}): {}", h.name, h.pos, h.how),
                format!(
                    "An Istio pool lives in each calling proxy: {} (callers) × {limit} = {}; {overflow}; Envoy never retries an overflow, so this gateway comes before the route's retry gateway",
                    plural(instances as u64, "instance"),
                    trim(total)
                ),
                "GAP: requests are dealt to the instances in turn, where each caller's proxy takes its own callers' traffic; the slot is held through the route's retries and their back-off, where Envoy takes one per attempt".into(),
            ],
            timeout: wait(),
            limit,
            instances,
            queue,
        };
        blocks.push_str(&limit::block(&g)?);
    }
    Ok(Placed {
        name: Some(name),
        ledger,
    })
}
