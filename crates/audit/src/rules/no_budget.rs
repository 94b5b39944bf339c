//! SB303: retries written on a path with no retry budget anywhere. A
//! per-request attempt limit does not bound the retry load across
//! requests; a budget does (Google SRE book, "Handling Overload", retry
//! budgets; Envoy 1.34 "Circuit breaking", `max_retries`, which Istio's
//! `maxRetries` sets).

use super::{Ctx, RuleInfo};
use crate::finding::{Finding, Severity};
use crate::model::FailureClass;

/// SB303.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB303",
    name: "no-retry-budget",
    severity: Severity::Warning,
    summary: "A path retries under an explicitly written policy (or 4× or more in all) and nothing on it bounds retries across requests.",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for c in ctx.chains {
        if c.budget {
            continue;
        }
        let explicit = c
            .retries
            .iter()
            .any(|l| !l.default && l.retries > 0 && !l.what.starts_with("clients"));
        let worst = FailureClass::ALL
            .iter()
            .map(|k| super::retry_amplification::amplification(c, *k).0)
            .max()
            .unwrap_or(1);
        if (explicit && worst > 1) || worst >= 4 {
            out.push(Finding { rule: RULE.id, severity: Severity::Warning, pos: c.pos.clone(), object: c.object.clone(), message: format!(
                "route {}: up to {worst} attempts per request and no retry budget on the path (no DestinationRule maxRetries for the destination)",
                c.route
            ) });
        }
    }
}
