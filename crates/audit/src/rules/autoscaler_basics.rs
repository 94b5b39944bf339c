//! SB106–SB110: autoscalers that cannot do their job whatever the load —
//! no target, a utilisation target without requests, nothing to scale
//! between, two controllers on one target, fields their version drops.
//!
//! Sources: Kubernetes v1.33 "Horizontal Pod Autoscaling" ("Algorithm
//! details": a resource utilisation is usage over the containers'
//! requests, and "if any of the pods' containers do not have the relevant
//! resource request set, CPU utilization for the pod will not be
//! defined"; "Support for multiple metrics"), the `autoscaling/v1` API
//! reference (its spec has only `scaleTargetRef`, `minReplicas`,
//! `maxReplicas` and `targetCPUUtilizationPercentage`), KEDA 2.17
//! "ScaledObject specification" and FAQ (KEDA creates and owns an HPA for
//! each ScaledObject, so another HPA on the same target competes with it).

use std::collections::BTreeMap;

use super::{Ctx, RuleInfo};
use crate::finding::{Finding, Severity};
use crate::model::{Autoscaler, Metric, key};

/// SB106.
pub const TARGET_MISSING: RuleInfo = RuleInfo {
    id: "SB106",
    name: "autoscaler-target-missing",
    severity: Severity::Warning,
    summary: "An autoscaler's scaleTargetRef names no workload among the inputs (info when its namespace has no workloads among them: the inputs look partial).",
};
/// SB107.
pub const NO_REQUESTS: RuleInfo = RuleInfo {
    id: "SB107",
    name: "utilization-without-requests",
    severity: Severity::Error,
    summary: "A CPU or memory utilisation target on a workload whose containers request none of that resource: the HPA cannot compute it (warning when another metric still drives the HPA).",
};
/// SB108.
pub const PINNED: RuleInfo = RuleInfo {
    id: "SB108",
    name: "autoscaler-min-equals-max",
    severity: Severity::Warning,
    summary: "minReplicas equals maxReplicas: the autoscaler can never change the replica count.",
};
/// SB109.
pub const TWO_CONTROLLERS: RuleInfo = RuleInfo {
    id: "SB109",
    name: "two-autoscalers-one-target",
    severity: Severity::Error,
    summary: "Two autoscalers (HPAs, or an HPA and a KEDA ScaledObject, which creates its own HPA) scale the same workload and overwrite each other's replica count.",
};
/// SB110.
pub const DROPPED_FIELDS: RuleInfo = RuleInfo {
    id: "SB110",
    name: "autoscaling-v1-drops-v2-fields",
    severity: Severity::Warning,
    summary: "An autoscaling/v1 HPA writes metrics or behavior, which only autoscaling/v2 has: the API server drops them and the HPA scales on CPU alone with the default behavior.",
};

/// The workload kinds the audit reads: a target of another kind (an Argo
/// Rollout, a custom resource) is not looked for.
const READ_KINDS: &[&str] = &["Deployment", "StatefulSet", "DaemonSet"];

fn object(a: &Autoscaler) -> String {
    key(a.kind, &a.namespace, &a.name)
}

/// Runs the five rules.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let mut by_target: BTreeMap<(&str, &str, &str), Vec<&Autoscaler>> = BTreeMap::new();
    for a in &ctx.inv.autoscalers {
        by_target
            .entry((&a.namespace, &a.target.0, &a.target.1))
            .or_default()
            .push(a);
        target_and_requests(ctx, a, out);
        if a.min == a.max && a.min > 0 {
            out.push(Finding {
                rule: PINNED.id,
                severity: Severity::Warning,
                pos: a.src.line_of(if a.kind == "ScaledObject" {
                    "maxReplicaCount"
                } else {
                    "maxReplicas"
                }),
                object: object(a),
                message: format!(
                    "{} {}/{} has minimum = maximum = {} replicas: it can never scale {} {}; raise the maximum to what a peak needs, or drop the autoscaler and set replicas",
                    a.kind, a.namespace, a.name, a.min, a.target.0, a.target.1
                ),
            });
        }
        if !a.dropped_fields.is_empty() {
            let fields = a.dropped_fields.join(" and ");
            out.push(Finding {
                rule: DROPPED_FIELDS.id,
                severity: Severity::Warning,
                pos: a.src.line_of(a.dropped_fields[0]),
                object: object(a),
                message: format!(
                    "HorizontalPodAutoscaler {}/{} is autoscaling/v1, which has no {fields}: the API server drops them, and the HPA scales on CPU (targetCPUUtilizationPercentage, 80% when unset) with Kubernetes' default behavior; write apiVersion: autoscaling/v2",
                    a.namespace, a.name
                ),
            });
        }
    }
    for ((ns, kind, name), all) in by_target {
        if all.len() < 2 {
            continue;
        }
        let names: Vec<String> = all
            .iter()
            .map(|a| format!("{} {} ({})", a.kind, a.name, a.src.pos))
            .collect();
        let keda = all.iter().any(|a| a.kind == "ScaledObject");
        for a in &all[1..] {
            out.push(Finding {
                rule: TWO_CONTROLLERS.id,
                severity: Severity::Error,
                pos: a.src.line_of("scaleTargetRef"),
                object: object(a),
                message: format!(
                    "{} autoscalers scale {kind} {ns}/{name}: {}; each sets the replica count from its own metrics and they overwrite each other{}; keep one (merge their metrics into it: an HPA scales to the largest of its metrics' proposals)",
                    all.len(),
                    names.join(", "),
                    if keda {
                        " (KEDA creates an HPA of its own for the ScaledObject)"
                    } else {
                        ""
                    }
                ),
            });
        }
    }
}

/// SB106 and SB107: the target exists, and requests what a utilisation
/// target divides by.
fn target_and_requests(ctx: &Ctx<'_>, a: &Autoscaler, out: &mut Vec<Finding>) {
    let (kind, name) = (&a.target.0, &a.target.1);
    let Some(w) = ctx.inv.workload(&a.namespace, kind, name) else {
        if !READ_KINDS.contains(&kind.as_str()) {
            return;
        }
        let partial = ctx.inv.workloads_in(&a.namespace).is_empty();
        out.push(Finding {
            rule: TARGET_MISSING.id,
            severity: if partial {
                Severity::Info
            } else {
                Severity::Warning
            },
            pos: a.src.line_of("scaleTargetRef"),
            object: object(a),
            message: if partial {
                format!(
                    "{} {}/{} scales {kind} {name}, and no workload of namespace {} is among the inputs: add the {kind} to audit what it scales",
                    a.kind, a.namespace, a.name, a.namespace
                )
            } else {
                format!(
                    "{} {}/{} scales {kind} {name}, which is not among the inputs although other workloads of namespace {} are: the autoscaler scales nothing (check the name and kind of scaleTargetRef)",
                    a.kind, a.namespace, a.name, a.namespace
                )
            },
        });
        return;
    };
    let others = a
        .metrics
        .iter()
        .filter(|m| utilization_resource(m).is_none())
        .count();
    for m in &a.metrics {
        let Some((resource, container)) = utilization_resource(m) else {
            continue;
        };
        let mut lacking: Vec<&str> = w
            .containers
            .iter()
            .filter(|c| container.is_none_or(|n| c.name == n))
            .filter(|c| !c.requested.iter().any(|r| r == resource))
            .map(|c| c.name.as_str())
            .collect();
        // The injected proxy counts too: a resource annotation leaves out
        // the requests it does not name (see decide_sidecar).
        if let Some(sc) = &w.sidecar
            && container.is_none_or(|n| n == "istio-proxy")
            && !sc.requested.iter().any(|r| r == resource)
        {
            lacking.push("istio-proxy");
        }
        if lacking.is_empty() {
            continue;
        }
        let (severity, effect) = if others > 0 {
            (
                Severity::Warning,
                "this metric is left out and the HPA scales on its other metrics alone",
            )
        } else {
            (
                Severity::Error,
                "it is the HPA's only metric, so the HPA does not scale at all",
            )
        };
        out.push(Finding {
            rule: NO_REQUESTS.id,
            severity,
            pos: a.src.line_of("metrics"),
            object: object(a),
            message: format!(
                "{} {}/{} targets {} utilisation of {}, but container(s) {} of {} set no {resource} request (nor a limit, which Kubernetes would copy into it): utilisation is usage over requests, so the HPA cannot compute it and {effect}; set resources.requests.{resource} on every container (unless a LimitRange of namespace {} sets a default request)",
                a.kind,
                a.namespace,
                a.name,
                resource,
                container.map_or("the pod".to_string(), |c| format!("container {c}")),
                lacking.join(", "),
                w.key(),
                a.namespace
            ),
        });
    }
}

/// The resource (and container, for `ContainerResource`) of a utilisation
/// target; None for any other metric.
fn utilization_resource(m: &Metric) -> Option<(&str, Option<&str>)> {
    match m {
        Metric::Resource {
            resource,
            utilization: Some(_),
        } => Some((resource, None)),
        Metric::ContainerResource {
            container,
            resource,
            utilization: Some(_),
        } => Some((resource, Some(container))),
        _ => None,
    }
}
