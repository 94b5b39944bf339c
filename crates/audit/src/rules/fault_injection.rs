//! SB305: a route that injects faults ([`crate::model::fault`]): every
//! caller of the route gets them, and the layers outside the calling
//! proxy (clients, an edge proxy) retry the aborts as if the service had
//! failed, so a fault left in place (a chaos test not removed) is load
//! and errors in production.

use super::{Ctx, RuleInfo};
use crate::finding::{Finding, Severity};
use crate::model::FailureClass;

/// SB305.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB305",
    name: "fault-injection-on-route",
    severity: Severity::Warning,
    summary: "A VirtualService route injects aborts or delays for every caller; outer retry layers multiply the aborts.",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let mut seen = std::collections::BTreeSet::new();
    for c in ctx.chains {
        let Some(f) = &c.fault else { continue };
        if !seen.insert((c.object.clone(), c.pos.line)) {
            continue;
        }
        // The route's own layer is the last; only the ones outside it
        // see an abort.
        let outer = &c.retries[..c.retries.len().saturating_sub(1)];
        let retried = match f.abort {
            Some((_, Some(503))) => {
                let attempts: u64 = outer
                    .iter()
                    .map(|l| l.attempts(FailureClass::Status503) as u64)
                    .product();
                if attempts > 1 {
                    format!(
                        "; the layers outside the calling proxy retry a 503: {attempts} attempts per aborted request reach the proxy"
                    )
                } else {
                    "; no layer outside the calling proxy retries a 503".to_string()
                }
            }
            // The audit reduces answers to 503, connection failure and
            // timeout; whether another status is retried is not modelled.
            Some((_, Some(s))) => {
                format!("; whether the outer layers retry a {s} is not modelled (only 503 is)")
            }
            _ => String::new(),
        };
        out.push(Finding {
            rule: RULE.id,
            severity: Severity::Warning,
            pos: c.pos.clone(),
            object: c.object.clone(),
            message: format!(
                "route {}: fault injection, {}, for every caller: aborts never reach the service and are not retried by this route{retried}; delays count against the callers' own timeouts",
                c.route,
                f.describe()
            ),
        });
    }
}
