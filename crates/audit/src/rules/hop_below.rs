//! SB201: a hop far below the hop behind it: the capacity behind it is
//! stranded (a DestinationRule pool admitting 1 request in front of 40
//! workers).

use super::{Ctx, FAR_RATIO, RuleInfo};
use crate::chain::HopKind;
use crate::finding::{Finding, Severity};
use crate::units::trim;

/// SB201.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB201",
    name: "hop-far-below-neighbour",
    severity: Severity::Warning,
    summary: "A hop admits at most 1/4 of what the path behind it can take: that capacity is stranded and the hop saturates first.",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let mut seen = std::collections::BTreeSet::new();
    for c in ctx.chains {
        for (i, h) in c.hops.iter().enumerate() {
            let Some(l) = h.limit else { continue };
            if matches!(h.kind, HopKind::App | HopKind::Frontend) {
                continue;
            }
            // What the path behind this hop can take: its tightest known hop.
            let Some(next) = c.hops[i + 1..]
                .iter()
                .filter(|n| n.limit.is_some())
                .min_by(|a, b| a.limit.unwrap_or(0.0).total_cmp(&b.limit.unwrap_or(0.0)))
            else {
                continue;
            };
            // A sidecar in front of its own app is the blind-autoscaler
            // rules' case (SB101–SB103), which weigh the autoscaler too.
            if h.kind == HopKind::Sidecar && next.kind == HopKind::App {
                continue;
            }
            let nl = next.limit.unwrap_or(0.0);
            if l * FAR_RATIO <= nl && seen.insert((h.object.clone(), h.name.clone())) {
                out.push(Finding { rule: RULE.id, severity: Severity::Warning, pos: h.pos.clone(), object: h.object.clone(), message: format!(
                    "on route {}: {} admits {} concurrent requests ({}) but the path behind it can take {} (its tightest hop, {}: {}): {}× more, stranded",
                    c.route, h.name, trim(l), h.how, trim(nl), next.name, next.how, trim(nl / l)
                ) });
            }
        }
    }
}
