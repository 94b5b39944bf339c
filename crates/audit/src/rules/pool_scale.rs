//! SB203: Istio's connection pools are per caller proxy and per upstream
//! cluster (Envoy 1.34 "Circuit breaking"), so they do not grow when the
//! destination scales out: the destination admits Σ caller pods × limit
//! (the callers the configs show, see [`crate::chain`]), compared with its
//! capacity at `minReplicas`.

use super::{Ctx, RuleInfo};
use crate::chain::{HopKind, pod_limits};
use crate::finding::{Finding, Severity};
use crate::units::trim;

/// SB203.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB203",
    name: "per-caller-pool-does-not-scale",
    severity: Severity::Warning,
    summary: "A DestinationRule pool caps callers at or below the destination's capacity at its minimum replicas, so the autoscaler's scale-out adds nothing for them.",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let mut seen = std::collections::BTreeSet::new();
    for c in ctx.chains {
        let Some(wi) = c.workload else { continue };
        let w = &ctx.inv.workloads[wi];
        let Some(pool) = c.hops.iter().find(|h| h.kind == HopKind::Pool) else {
            continue;
        };
        let Some(p) = pool.limit else { continue };
        let Some(per_pod) = pod_limits(ctx.inv, w, ctx.opts).per_pod() else {
            continue;
        };
        for a in ctx.inv.autoscalers_of(w) {
            let min = a.min.max(1) as f64;
            if a.max as f64 > min && p <= per_pod * min && seen.insert(pool.object.clone()) {
                out.push(Finding { rule: RULE.id, severity: Severity::Warning, pos: pool.pos.clone(), object: pool.object.clone(), message: format!(
                    "{} admits {} requests ({}); a pool is per client sidecar, so admission = caller pods × limit, whatever the destination's replicas; already ≤ {}'s capacity at its minimum: {} replicas × {} per pod = {}; scaling to {} replicas ({} requests) adds nothing for these callers (the limit must be ≥ {} per pod × {} max replicas ÷ caller pods)",
                    pool.name, trim(p), pool.how, w.key(), trim(min), trim(per_pod), trim(per_pod * min), a.max, trim(per_pod * a.max as f64), trim(per_pod), a.max
                ) });
            }
        }
    }
}
