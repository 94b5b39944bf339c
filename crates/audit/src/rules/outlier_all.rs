//! SB501: outlier detection able to eject every endpoint of a small
//! service. Envoy ejects while the ejected share is below
//! `max_ejection_percent`, and always at least one host (Envoy 1.34
//! "Outlier detection"); Istio's `minHealthPercent` defaults to 0, so
//! detection stays on. With n endpoints and p%: up to max(1, ⌈n·p/100⌉).

use super::{Ctx, RuleInfo};
use crate::chain::replicas;
use crate::finding::{Finding, Severity};

/// SB501.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB501",
    name: "outlier-detection-ejects-every-endpoint",
    severity: Severity::Warning,
    summary: "Outlier detection may eject every endpoint of the service (max(1, ⌈n·maxEjectionPercent/100⌉) ≥ n, minHealthPercent 0): failover without room.",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for svc in &ctx.inv.services {
        let Some(dr) = ctx.inv.destination_rule_for(svc, None) else {
            continue;
        };
        let Some(od) = &dr.outlier else { continue };
        // The endpoints are every pod the Service selects, across all the
        // workloads it selects (v1 and v2 of one app are one host).
        let backing = ctx.inv.backing(svc);
        if backing.is_empty() {
            continue;
        }
        let n: u64 = backing
            .iter()
            .map(|w| u64::from(replicas(ctx.inv, w).0))
            .sum();
        let n = n.max(1) as f64;
        let ejectable = (n * od.max_ejection_percent / 100.0).ceil().max(1.0).min(n);
        if ejectable >= n && od.min_health_percent == 0.0 {
            out.push(Finding { rule: RULE.id, severity: Severity::Warning, pos: dr.src.line_of("outlierDetection"), object: crate::model::key("DestinationRule", &dr.namespace, &dr.name), message: format!(
                "outlier detection on {}/{} may eject all {n} endpoints (maxEjectionPercent {}%, at least one host is always ejectable, minHealthPercent 0): every request then fails with no healthy host",
                svc.namespace, svc.name, od.max_ejection_percent
            ) });
        }
    }
}
