//! SB104: an HPA whose `behavior.scaleUp` (stabilization window and
//! policies) cannot follow a 2× peak from its minimum replicas within
//! [`FOLLOW_WITHIN_SECONDS`]: the new pods arrive after the peak has
//! already overloaded the old ones.

use super::{Ctx, RuleInfo};
use crate::finding::{Finding, Severity};
use crate::model::behavior::SYNC_SECONDS;

/// SB104.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB104",
    name: "scale-up-too-slow-for-a-peak",
    severity: Severity::Warning,
    summary: "An HPA's scaleUp behavior (stabilization window and policies) cannot double the replicas from minReplicas within 5 minutes.",
};

/// How fast a 2× peak must be followed.
pub const FOLLOW_WITHIN_SECONDS: u32 = 300;

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for a in &ctx.inv.autoscalers {
        let Some(b) = &a.behavior else { continue };
        let from = a.min.max(1);
        let to = from.saturating_mul(2).min(a.max);
        if to <= from {
            continue;
        }
        let took = b.seconds_to_reach(from, to);
        if took.is_some_and(|t| t <= FOLLOW_WITHIN_SECONDS) {
            continue;
        }
        let how_long = match took {
            Some(t) => format!(
                "{t} s (the HPA controller's law, syncs every {SYNC_SECONDS} s: stabilization window {} s, then the policies' rate)",
                b.up.window
            ),
            None => "never (scale-up disabled or limited to 0)".into(),
        };
        out.push(Finding {
            rule: RULE.id,
            severity: Severity::Warning,
            pos: a.src.line_of("scaleUp"),
            object: crate::model::key(a.kind, &a.namespace, &a.name),
            message: format!(
                "{} {}/{}: a 2× peak from minReplicas {from} needs {to} replicas; scaleUp ({}) gets there in {how_long}, over {FOLLOW_WITHIN_SECONDS} s",
                a.kind,
                a.namespace,
                a.name,
                b.up.describe()
            ),
        });
    }
}
