//! SB503: Istio locality failover to a region without the headroom for the
//! load it would take. With outlier detection (without it Istio never fails
//! over), when the endpoints of a region are ejected its traffic goes to
//! the `failover` target region (or, with `failoverPriority`, to the
//! endpoints of the next priority: the other regions). The target must hold
//! that traffic on top of its own.

use std::collections::BTreeMap;

use super::{Ctx, RuleInfo};
use crate::chain::{pod_limits, replicas};
use crate::finding::{Finding, Severity};
use crate::units::trim;

/// SB503.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB503",
    name: "locality-failover-without-room",
    severity: Severity::Warning,
    summary: "A locality failover target region holds fewer concurrent requests than the region whose traffic it would take.",
};

/// A region's capacity: concurrent requests and the terms that sum to it.
type Capacity = (f64, Vec<String>);

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for svc in &ctx.inv.services {
        let Some(dr) = ctx.inv.destination_rule_for(svc, None) else {
            continue;
        };
        let (Some(fo), Some(_)) = (&dr.failover, &dr.outlier) else {
            continue;
        };
        // Capacity per region: Σ per-pod capacity × replicas of the
        // backing workloads pinned to it; a region with a workload of
        // unknown capacity is unknown (no claim).
        let mut cap: BTreeMap<&str, Option<Capacity>> = BTreeMap::new();
        for w in ctx.inv.backing(svc) {
            let Some(r) = w.region.as_deref() else {
                continue;
            };
            let (n, _) = replicas(ctx.inv, w);
            let per = pod_limits(ctx.inv, w, ctx.opts).per_pod();
            let e = cap.entry(r).or_insert(Some((0.0, Vec::new())));
            match (e.as_mut(), per) {
                (Some((c, parts)), Some(p)) => {
                    *c += p * n as f64;
                    parts.push(format!("{} {n} × {}", w.name, trim(p)));
                }
                _ => *e = None,
            }
        }
        let known = |r: &str| cap.get(r).cloned().flatten();
        let mut checks: Vec<(String, String, Capacity, Capacity)> = Vec::new();
        for (from, to) in &fo.pairs {
            if let (Some(a), Some(b)) = (known(from), known(to)) {
                checks.push((from.clone(), to.clone(), a, b));
            }
        }
        let by_region = fo
            .priority
            .iter()
            .any(|l| l == crate::model::workload::REGION_LABEL);
        if fo.pairs.is_empty() && by_region && cap.values().all(Option::is_some) {
            for from in cap.keys() {
                let Some(a) = known(from) else { continue };
                let rest: Vec<_> = cap
                    .iter()
                    .filter(|(r, _)| *r != from)
                    .filter_map(|(_, c)| c.clone())
                    .collect();
                if rest.is_empty() {
                    continue;
                }
                let b = rest.iter().fold((0.0, Vec::new()), |mut acc, (c, p)| {
                    acc.0 += c;
                    acc.1.extend(p.iter().cloned());
                    acc
                });
                let others: Vec<&str> = cap.keys().copied().filter(|r| r != from).collect();
                checks.push((from.to_string(), others.join("+"), a, b));
            }
        }
        for (from, to, (a, ap), (b, bp)) in checks {
            if b < a {
                out.push(Finding { rule: RULE.id, severity: Severity::Warning, pos: dr.src.line_of("localityLbSetting"), object: crate::model::key("DestinationRule", &dr.namespace, &dr.name), message: format!(
                    "{}/{}: when outlier detection ejects region {from} ({} = {} concurrent requests), its traffic fails over to {to} ({} = {}), which holds less than that load even before its own: at {from}'s capacity {to} needs ≥ {} + its own load",
                    svc.namespace, svc.name, ap.join(" + "), trim(a), bp.join(" + "), trim(b), trim(a)
                ) });
            }
        }
    }
}
