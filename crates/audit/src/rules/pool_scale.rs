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

/// One workload behind the destination: its per-pod capacity and the
/// replicas it runs at its minimum and can reach.
struct Behind {
    key: String,
    per_pod: f64,
    min: u32,
    max: u32,
}

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let mut seen = std::collections::BTreeSet::new();
    for c in ctx.chains {
        let Some(pool) = c.hops.iter().find(|h| h.kind == HopKind::Pool) else {
            continue;
        };
        let Some(p) = pool.limit else { continue };
        // Every workload the Service sends to (v1, v2… Deployments behind
        // one Service), each at its own minimum and maximum.
        let ws: Vec<usize> = if c.workloads.is_empty() {
            c.workload.into_iter().collect()
        } else {
            c.workloads.clone()
        };
        let mut behind = Vec::new();
        for &wi in &ws {
            let w = &ctx.inv.workloads[wi];
            // A workload of unknown capacity leaves the total unknown.
            let Some(per_pod) = pod_limits(ctx.inv, w, ctx.opts).per_pod() else {
                behind.clear();
                break;
            };
            // An autoscaled workload can shrink to its minReplicas; one
            // without an autoscaler stays at its replicas.
            let scalers = ctx.inv.autoscalers_of(w);
            let min = match scalers.iter().map(|a| a.min.max(1)).max() {
                Some(m) => m,
                None => w.replicas.max(1),
            };
            let max = scalers.iter().map(|a| a.max).max().unwrap_or(min).max(min);
            behind.push(Behind {
                key: w.key(),
                per_pod,
                min: min.max(1),
                max,
            });
        }
        if behind.is_empty() {
            continue;
        }
        let at_min: f64 = behind.iter().map(|b| b.per_pod * b.min as f64).sum();
        let at_max: f64 = behind.iter().map(|b| b.per_pod * b.max as f64).sum();
        if at_max <= at_min || p > at_min || !seen.insert(pool.object.clone()) {
            continue;
        }
        let (min_text, max_text, need) = if let [b] = behind.as_slice() {
            (
                format!(
                    "{}'s capacity at its minimum: {} replicas × {} per pod = {}",
                    b.key,
                    b.min,
                    trim(b.per_pod),
                    trim(at_min)
                ),
                format!("{} replicas ({} requests)", b.max, trim(at_max)),
                format!(
                    "{} per pod × {} max replicas ÷ caller pods",
                    trim(b.per_pod),
                    b.max
                ),
            )
        } else {
            let sum = |n: fn(&Behind) -> u32| {
                behind
                    .iter()
                    .map(|b| format!("{} {} × {}", b.key, n(b), trim(b.per_pod)))
                    .collect::<Vec<_>>()
                    .join(" + ")
            };
            (
                format!(
                    "the capacity of the {} workloads behind the Service at their minimums: {} = {}",
                    behind.len(),
                    sum(|b| b.min),
                    trim(at_min)
                ),
                format!(
                    "their maximums ({} = {} requests)",
                    sum(|b| b.max),
                    trim(at_max)
                ),
                format!("{} ÷ caller pods", trim(at_max)),
            )
        };
        out.push(Finding {
            rule: RULE.id,
            severity: Severity::Warning,
            pos: pool.pos.clone(),
            object: pool.object.clone(),
            message: format!(
                "{} admits {} requests ({}); a pool is per client sidecar, so admission = caller pods × limit, whatever the destination's replicas; already ≤ {min_text}; scaling to {max_text} adds nothing for these callers (the limit must be ≥ {need})",
                pool.name,
                trim(p),
                pool.how
            ),
        });
    }
}
