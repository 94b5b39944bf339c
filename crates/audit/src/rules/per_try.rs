//! SB302: perTryTimeout × attempts above the route timeout: the route
//! timeout covers all attempts (Istio 1.27 "Virtual Service", HTTPRetry),
//! so the last attempts are never made, or the timeout is not what the
//! owner thinks.

use super::{Ctx, RuleInfo};
use crate::finding::{Finding, Severity};
use crate::units::show;

/// SB302.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB302",
    name: "per-try-timeout-over-route-timeout",
    severity: Severity::Warning,
    summary: "perTryTimeout × attempts exceeds the route timeout: the later attempts can never finish.",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let mut seen = std::collections::BTreeSet::new();
    for c in ctx.chains {
        let (Some(layer), Some(timeout)) = (c.retries.last(), c.timeout) else {
            continue;
        };
        let Some(per_try) = layer.per_try else {
            continue;
        };
        let attempts = 1 + layer.retries;
        let total = per_try.saturating_mul(attempts);
        if !timeout.is_zero() && total > timeout && seen.insert((c.object.clone(), c.pos.line)) {
            out.push(Finding { rule: RULE.id, severity: Severity::Warning, pos: c.pos.clone(), object: c.object.clone(), message: format!(
                "route {}: perTryTimeout {} × {attempts} attempts = {} exceeds the route timeout {}: at most {} attempts fit",
                c.route, show(per_try), show(total), show(timeout), (timeout.as_nanos() / per_try.as_nanos().max(1)).max(1)
            ) });
        }
    }
}
