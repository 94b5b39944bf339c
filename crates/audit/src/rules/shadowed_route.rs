//! SB304: a VirtualService that loses its host to another, as Istio
//! resolves several VirtualServices for one host ([`crate::model::vs_order`]):
//! for sidecars the first by creation time, name and namespace builds the
//! host's routes and a later one is dropped for that host; at a gateway
//! they merge, and a route without `match` in an earlier one takes every
//! request.

use super::{Ctx, RuleInfo};
use crate::finding::{Finding, Severity};
use crate::model::{key, vs_order};

/// SB304.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB304",
    name: "virtual-service-host-shadowed",
    severity: Severity::Warning,
    summary: "Two VirtualServices for one host: Istio uses one (sidecars) or the first catch-all route (gateways); the other's routes, retries and timeouts never apply (info when it still applies in some namespaces).",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for s in vs_order::shadowed(ctx.inv) {
        let (l, w) = (&ctx.inv.routes[s.loser], &ctx.inv.routes[s.winner]);
        let winner = key(w.kind, &w.namespace, &w.name);
        let order = match (&l.created, &w.created) {
            (Some(_), Some(_)) => "created earlier",
            _ => "first by name and namespace (no creationTimestamp in the inputs)",
        };
        let message = if s.gateway {
            format!(
                "host {}: at the gateway Istio merges this VirtualService's routes after those of {winner} ({order}), whose route without match takes every request: none of this one's routes, retries or timeouts is ever used",
                s.host
            )
        } else {
            format!(
                "host {}: sidecars in {} use {winner} ({order}) and drop this VirtualService for that host (Istio merges VirtualServices only at gateways): its routes, retries and timeouts do not apply there{}",
                s.host,
                s.namespaces.join(", "),
                if s.everywhere {
                    "; it routes nothing anywhere"
                } else {
                    ""
                }
            )
        };
        out.push(Finding {
            rule: RULE.id,
            severity: if s.everywhere {
                Severity::Warning
            } else {
                Severity::Info
            },
            pos: l.src.line_of("hosts"),
            object: key(l.kind, &l.namespace, &l.name),
            message,
        });
    }
}
