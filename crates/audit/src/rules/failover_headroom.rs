//! SB503: Istio locality failover to a locality without the headroom for
//! the load it would take. With outlier detection (without it Istio never
//! fails over), when the endpoints of a locality are ejected its traffic
//! goes to the next priority: for a zone, the other zones of its region
//! (Envoy priority 2 in Istio's "Locality failover" task); for a region, its
//! `failover` target region; with `failoverPriority`, the endpoints that
//! match the most leading labels. The target must hold that traffic on top
//! of its own.

use std::collections::BTreeMap;

use super::{Ctx, RuleInfo};
use crate::chain::{pod_limits, replicas};
use crate::finding::{Finding, Severity};
use crate::model::workload::{REGION_LABEL, ZONE_LABEL};
use crate::model::{DestinationRule, Service};
use crate::units::trim;

/// SB503.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB503",
    name: "locality-failover-without-room",
    severity: Severity::Warning,
    summary: "A locality failover target (region, or the other zones of a zone's region) holds fewer concurrent requests than the locality whose traffic it would take.",
};

/// A region's capacity: concurrent requests and the terms that sum to it.
type Capacity = (f64, Vec<String>);

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for svc in &ctx.inv.services {
        let Some(dr) = ctx.inv.destination_rule_for(svc, None) else {
            continue;
        };
        if dr.failover.is_some() && dr.outlier.is_some() {
            regions(ctx, svc, dr, out);
            zones(ctx, svc, dr, out);
        }
    }
}

/// Region against region: `failover` pairs, or `failoverPriority` by region.
fn regions(ctx: &Ctx<'_>, svc: &Service, dr: &DestinationRule, out: &mut Vec<Finding>) {
    let Some(fo) = &dr.failover else { return };
    {
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
        let by_region = fo.priority.iter().any(|l| l == REGION_LABEL);
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

/// Zone against the zones that take its traffic. Runs when the backing
/// workloads are pinned to zones and the priority reads zones: Istio's
/// default (no `failoverPriority`: a zone's traffic goes to the other zones
/// of its region first; what crosses regions is [`regions`]' check), or a
/// `failoverPriority` naming `topology.kubernetes.io/zone` (and otherwise
/// only the region label): the next group is the endpoints that share the
/// most leading labels with the failed one. No claim when a backing
/// workload's locality or capacity is unknown, or a label is one the audit
/// cannot place (a custom label).
fn zones(ctx: &Ctx<'_>, svc: &Service, dr: &DestinationRule, out: &mut Vec<Finding>) {
    let Some(fo) = &dr.failover else { return };
    let (labels, deepest): (Vec<&str>, usize) = if fo.priority.is_empty() {
        // Default priorities: same region, other zone, before any other
        // region; only that first step is checked here.
        (vec![REGION_LABEL, ZONE_LABEL], 1)
    } else {
        let ls: Vec<&str> = fo.priority.iter().map(String::as_str).collect();
        if !ls.contains(&ZONE_LABEL) || ls.iter().any(|l| *l != ZONE_LABEL && *l != REGION_LABEL) {
            return;
        }
        (ls, 0)
    };
    let backing = ctx.inv.backing(svc);
    if !backing.iter().any(|w| w.zone.is_some()) {
        return;
    }
    // Capacity per group of label values.
    let mut cap: BTreeMap<Vec<String>, Capacity> = BTreeMap::new();
    for w in backing {
        let mut key = Vec::new();
        for l in &labels {
            let v = if *l == ZONE_LABEL { &w.zone } else { &w.region };
            let Some(v) = v else { return };
            key.push(v.clone());
        }
        let (n, _) = replicas(ctx.inv, w);
        let Some(p) = pod_limits(ctx.inv, w, ctx.opts).per_pod() else {
            return;
        };
        let e = cap.entry(key).or_insert((0.0, Vec::new()));
        e.0 += p * n as f64;
        e.1.push(format!("{} {n} × {}", w.name, trim(p)));
    }
    let name = |k: &[String]| -> String {
        labels
            .iter()
            .zip(k)
            .map(|(l, v)| format!("{} {v}", if *l == ZONE_LABEL { "zone" } else { "region" }))
            .collect::<Vec<_>>()
            .join(" ")
    };
    // With the region label in the priority, a whole region failing is
    // the region check's; a lone zone of its region is skipped here.
    let region_checked = labels.contains(&REGION_LABEL) && !fo.priority.is_empty();
    for (failed, (a, ap)) in &cap {
        for k in (deepest..labels.len()).rev() {
            let takers: Vec<(&Vec<String>, &Capacity)> = cap
                .iter()
                .filter(|(g, _)| *g != failed && g[..k] == failed[..k])
                .collect();
            if takers.is_empty() {
                continue;
            }
            let whole_region =
                k == 0 && region_checked && cap.keys().filter(|g| g[0] == failed[0]).count() == 1;
            let b: f64 = takers.iter().map(|(_, c)| c.0).sum();
            if b < *a && !whole_region {
                let to: Vec<String> = takers
                    .iter()
                    .map(|(g, c)| format!("{}: {}", name(g), c.1.join(" + ")))
                    .collect();
                out.push(Finding {
                    rule: RULE.id,
                    severity: Severity::Warning,
                    pos: dr.src.line_of("localityLbSetting"),
                    object: crate::model::key("DestinationRule", &dr.namespace, &dr.name),
                    message: format!(
                        "{}/{}: when outlier detection ejects {} ({} = {} concurrent requests), its traffic fails over to the next priority ({}; together {}), which holds less than that load even before its own: it needs ≥ {} + its own load",
                        svc.namespace,
                        svc.name,
                        name(failed),
                        ap.join(" + "),
                        trim(*a),
                        to.join("; "),
                        trim(b),
                        trim(*a)
                    ),
                });
            }
            break;
        }
    }
}
