//! What the client cannot count itself, read from the run's guards at
//! each interval's end and filed as that interval's deltas: a gateway's
//! arrivals and refusals (its instances' `stormbreak_guard_requests_total`
//! and `…_shed_total`), a service's behind a guard (`Fleet::part_counts`),
//! and a dependency route's calls (the gateway's
//! `stormbreak_guard_dependency_calls_total` by outcome), recorded on that
//! route as the simulator records a gateway's dependency attempts.

use std::sync::Arc;

use stormbreak_sim::record::Cause;

use crate::fleet::Fleet;
use crate::hops::Pools;
use crate::plan::{Hop, LabPlan};
use crate::record::{Recorder, RouteCounts};

/// The outcomes of the guard's dependency calls and the cause each is
/// recorded as; a non-2xx answer (`bad_status`) has no cause of its own
/// here (the dependency's hops counted theirs) and is recorded
/// `unavailable` and as unclassified.
const OUTCOMES: [(&str, Option<Cause>); 7] = [
    ("ok", None),
    ("timeout", Some(Cause::Timeout)),
    ("reset", Some(Cause::Reset)),
    ("connect", Some(Cause::Unavailable)),
    ("no_endpoint", Some(Cause::Unavailable)),
    ("breaker_open", Some(Cause::Unavailable)),
    ("bad_status", Some(Cause::Unavailable)),
];

/// Totals read at the last interval's end.
pub struct Counted {
    services: Vec<(u64, u64)>,
    /// Per gateway: requests, sheds, then one per outcome.
    gateways: Vec<[f64; 2 + OUTCOMES.len()]>,
}

impl Counted {
    /// Nothing counted yet.
    pub fn new(plan: &LabPlan) -> Self {
        Counted {
            services: vec![(0, 0); plan.services.len()],
            gateways: vec![[0.0; 2 + OUTCOMES.len()]; plan.gateways.len()],
        }
    }

    /// Files what the parts counted since the last call in interval `i`.
    pub fn file(
        &mut self,
        plan: &LabPlan,
        rec: &Recorder,
        i: usize,
        fleets: &[Arc<Fleet>],
        pools: &Pools,
    ) {
        for (s, fleet) in fleets.iter().enumerate() {
            if plan.is_behind_a_hop(s) {
                let now = fleet.part_counts();
                let before = std::mem::replace(&mut self.services[s], now);
                let c = plan.component(Hop::Service(s));
                rec.part_counts(
                    c,
                    i,
                    now.0.saturating_sub(before.0),
                    now.1.saturating_sub(before.1),
                );
            }
        }
        for (g, pool) in pools.gateways.iter().enumerate() {
            let mut now = [0.0; 2 + OUTCOMES.len()];
            now[0] = pool.sum("stormbreak_guard_requests_total{", None);
            now[1] = pool.sum("stormbreak_guard_shed_total{", None);
            for (k, (outcome, _)) in OUTCOMES.iter().enumerate() {
                now[2 + k] = pool.sum(
                    "stormbreak_guard_dependency_calls_total{",
                    Some(&format!("outcome=\"{outcome}\"")),
                );
            }
            let before = std::mem::replace(&mut self.gateways[g], now);
            let d: Vec<u64> = now
                .iter()
                .zip(before)
                .map(|(n, b)| (n - b).max(0.0) as u64)
                .collect();
            let c = plan.component(Hop::Gateway(g));
            rec.part_counts(c, i, d[0], d[1]);
            if let Some(r) = plan.gateways[g].dependency {
                let mut counts = RouteCounts {
                    // Every admitted request makes one check (retried
                    // calls are attempts, not first attempts).
                    first_attempts: d[0].saturating_sub(d[1]),
                    attempts: d[2..].iter().sum(),
                    successes: d[2],
                    ..RouteCounts::default()
                };
                for (k, (outcome, cause)) in OUTCOMES.iter().enumerate() {
                    if let Some(cause) = cause {
                        counts.errors.push((*cause, d[2 + k]));
                    }
                    if *outcome == "bad_status" {
                        counts.unclassified = d[2 + k];
                    }
                }
                rec.route_counts(r, i, &counts);
            }
        }
    }
}
