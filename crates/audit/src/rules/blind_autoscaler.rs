//! SB101, SB102, SB103: an autoscaler that cannot see the sidecar that
//! saturates first, or none at all.
//!
//! Not blind when any metric can see the bottleneck: the HPA takes the
//! largest proposal over its metrics (Kubernetes v1.33 "Horizontal Pod
//! Autoscaling", "Algorithm details"), so one `Pods`/`Object`/`External`
//! metric (requests per pod, queue length, a KEDA scaler) or a
//! `ContainerResource` on `istio-proxy` is enough.

use super::{Ctx, RuleInfo};
use crate::chain::pod_limits;
use crate::finding::{Finding, Severity};
use crate::model::{Autoscaler, Metric};
use crate::units::trim;

/// SB101.
pub const CONTAINER: RuleInfo = RuleInfo {
    id: "SB101",
    name: "blind-autoscaler-container-resource",
    severity: Severity::Error,
    summary: "The autoscaler watches the app container's resources while the sidecar saturates first (warning when an assumed conversion decides it).",
};
/// SB102.
pub const POD_CPU: RuleInfo = RuleInfo {
    id: "SB102",
    name: "blind-autoscaler-pod-cpu",
    severity: Severity::Error,
    summary: "Pod-level CPU cannot cross the target while the sidecar saturates first: proxy CPU limit / pod CPU requests < target (warning when assumed).",
};
/// SB103.
pub const NONE: RuleInfo = RuleInfo {
    id: "SB103",
    name: "no-autoscaler-on-saturating-sidecar",
    severity: Severity::Warning,
    summary: "No autoscaler on a workload whose sidecar saturates first.",
};

fn sees_bottleneck(a: &Autoscaler) -> bool {
    a.metrics.iter().any(|m| match m {
        Metric::Pods(_) | Metric::Object(_) | Metric::External(_) => true,
        Metric::ContainerResource { container, .. } => container == "istio-proxy",
        Metric::Resource { .. } => false,
    })
}

/// Runs the three rules.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for w in &ctx.inv.workloads {
        let Some(sc) = &w.sidecar else { continue };
        let pl = pod_limits(ctx.inv, w, ctx.opts);
        let Some(assumed) = pl.sidecar_first() else {
            continue;
        };
        let (s, how, _, _) = pl
            .sidecar
            .clone()
            .expect("sidecar_first implies a sidecar limit");
        let (a, ahow) = pl.app.clone().expect("sidecar_first implies an app limit");
        let why = format!(
            "the sidecar admits {} concurrent requests per pod ({how}) while the app has {} ({ahow})",
            trim(s),
            trim(a)
        );
        let sev = if assumed {
            Severity::Warning
        } else {
            Severity::Error
        };
        let scalers = ctx.inv.autoscalers_of(w);
        if scalers.is_empty() {
            out.push(Finding {
                rule: NONE.id,
                severity: Severity::Warning,
                pos: w.src.pos.clone(),
                object: w.key(),
                message: format!(
                    "{} has no autoscaler, and its sidecar saturates first: {why}",
                    w.key()
                ),
            });
            continue;
        }
        for h in scalers {
            if sees_bottleneck(h) {
                continue;
            }
            let hk = crate::model::key(h.kind, &h.namespace, &h.name);
            if let Some(Metric::ContainerResource {
                container,
                resource,
                ..
            }) = h
                .metrics
                .iter()
                .find(|m| matches!(m, Metric::ContainerResource { .. }))
            {
                out.push(Finding { rule: CONTAINER.id, severity: sev, pos: h.src.line_of("metrics"), object: hk.clone(), message: format!("{hk} scales {} on ContainerResource {resource} of {container:?}, which cannot see the sidecar: {why}; when the sidecar is full the app idles and nothing scales", w.key()) });
                continue;
            }
            for m in &h.metrics {
                let Metric::Resource {
                    resource,
                    utilization: Some(target),
                } = m
                else {
                    continue;
                };
                if resource != "cpu" {
                    continue;
                }
                let Some(requests) = w.pod_cpu_requests().filter(|r| *r > 0.0) else {
                    continue;
                };
                let Some((cores, _)) = sc.usable_cores() else {
                    continue;
                };
                // With the sidecar full the proxy burns at most its usable
                // cores, and no more than the admitted rate costs (Istio's
                // 0.20 vCPU per 1000 req/s; the rate by Little's law, s / W).
                let rate = s / ctx.opts.assumed_latency.as_secs_f64();
                let by_rate = rate * crate::chain::PROXY_CPU_PER_REQUEST.as_secs_f64();
                let proxy = cores.min(by_rate);
                // The proxy's cores and request are the chart defaults, or
                // its injection is inferred: an assumption decides it.
                let sev = if by_rate < cores || sc.assumed() {
                    Severity::Warning
                } else {
                    sev
                };
                let resting = if sc.assumed() {
                    format!(
                        " (the proxy's numbers rest on an assumption: {})",
                        sc.source
                    )
                } else {
                    String::new()
                };
                // The app is starved behind the full sidecar: it works only
                // on the s requests admitted out of the a it could take.
                let app_request = w.app().and_then(|c| c.cpu_request).unwrap_or(0.0);
                let ceiling = (proxy + app_request * (s / a)) / requests;
                if ceiling < *target {
                    out.push(Finding { rule: POD_CPU.id, severity: sev, pos: h.src.line_of("metrics"), object: hk.clone(), message: format!(
                        "{hk} scales {} on pod CPU at {}%, but with the sidecar full the pod's CPU is at most (proxy {} cores [the smaller of its usable {} cores and {} req/s × 0.20 ms] + app {} cores × {}/{} admitted) / {} cores requested = {}% < {}%{resting}: {why}",
                        w.key(), pct(*target), trim(proxy), trim(cores), trim(rate), trim(app_request), trim(s), trim(a), trim(requests), pct(ceiling), pct(*target)
                    ) });
                }
            }
        }
    }
}

fn pct(f: f64) -> String {
    format!("{:.1}", f * 100.0)
}
