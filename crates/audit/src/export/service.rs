//! A workload as a `[[service]]`: replicas, sidecar limit, app workers,
//! autoscaler.

use std::fmt::Write;

use super::{ASSUMED_WORKERS, SCENARIO_FORMAT, UNLIMITED_SIDECAR};
use crate::chain::{ChainOptions, pod_limits, replicas};
use crate::model::behavior::Behavior;
use crate::model::{Inventory, Metric, Workload};
use crate::units::trim;

fn metric(w: &Workload, m: &Metric) -> (&'static str, f64, bool) {
    match m {
        Metric::ContainerResource {
            container,
            utilization,
            ..
        } if container == "istio-proxy" => (
            "sidecar_saturation",
            utilization.unwrap_or(0.8),
            utilization.is_none(),
        ),
        Metric::ContainerResource { utilization, .. } => {
            ("app_cpu", utilization.unwrap_or(0.8), utilization.is_none())
        }
        Metric::Resource { utilization, .. } if w.sidecar.is_some() => {
            ("pod_cpu", utilization.unwrap_or(0.8), utilization.is_none())
        }
        Metric::Resource { utilization, .. } => {
            ("app_cpu", utilization.unwrap_or(0.8), utilization.is_none())
        }
        _ => ("sidecar_saturation", 0.8, true),
    }
}

/// A workload's `[[service]]` block.
pub(crate) fn service_block(
    inv: &Inventory,
    w: &Workload,
    name: &str,
    opts: &ChainOptions,
    lat: &str,
) -> String {
    let mut s = String::new();
    let pl = pod_limits(inv, w, opts);
    let (n, rep) = replicas(inv, w);
    let _ = writeln!(
        s,
        "# {} ({})\n[[service]]\nname = \"{name}\"\nreplicas = {}   # {rep}",
        w.key(),
        w.src.pos,
        n.clamp(1, 100_000)
    );
    if w.sidecar.is_some() {
        match &pl.sidecar {
            Some((l, how, assumed, _)) => {
                let mark = if *assumed { "ASSUMPTION: " } else { "" };
                let _ = writeln!(
                    s,
                    "sidecar = {{ limit = {} }}   # {mark}{how}",
                    (l.floor() as u64).clamp(1, 10_000_000)
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "sidecar = {{ limit = {UNLIMITED_SIDECAR} }}   # ASSUMPTION: no inbound limit in the configs"
                );
            }
        }
    }
    let (workers, wnote) = match &pl.app {
        Some((v, how)) => ((*v as u64).clamp(1, 10_000_000), how.clone()),
        None => (
            ASSUMED_WORKERS as u64,
            "ASSUMPTION: app concurrency not in the configs".into(),
        ),
    };
    let _ = writeln!(
        s,
        "app = {{ workers = {workers}, service_time = {{ dist = \"exponential\", mean = \"{lat}\" }} }}   # workers: {wnote}; service time: ASSUMPTION (--assume-latency)"
    );
    if let Some(a) = inv.autoscalers_of(w).into_iter().next() {
        // The HPA takes the largest proposal: a metric that sees the
        // sidecar wins over CPU, so it is exported when present.
        let chosen = a
            .metrics
            .iter()
            .map(|m| metric(w, m))
            .max_by_key(|m| m.0 == "sidecar_saturation");
        if let Some((metric, target, assumed)) = chosen {
            let mark = if assumed {
                "   # target: ASSUMPTION (the metric's target is not a utilisation)"
            } else {
                ""
            };
            if let Some(b) = &a.behavior {
                let _ = writeln!(s, "{}", behavior_note(b));
            }
            let _ = writeln!(
                s,
                "autoscaler = {{ metric = \"{metric}\", target = {}, min = {}, max = {}, pod_start = \"30s\" }}   # {} {}/{}; pod_start: ASSUMPTION{mark}",
                trim(target),
                a.min.max(1),
                a.max.max(a.min.max(1)).min(100_000),
                a.kind,
                a.namespace,
                a.name
            );
        }
    }
    s.push('\n');
    s
}

/// The comment that carries an HPA's `behavior` into the scenario: the
/// scenario format (docs/scenarios.md, `[service.autoscaler]`, this
/// release) has no field for it, and the simulator's HPA always runs
/// Kubernetes' default behavior. Defaults lose nothing; anything else is
/// written out as NOT CARRIED, so whoever runs the scenario sees which
/// scaling the run does not reproduce.
pub fn behavior_note(b: &Behavior) -> String {
    if b.up.default && b.down.default {
        return "# HPA behavior: Kubernetes' defaults, which the simulator's HPA applies".into();
    }
    let side = |name: &str, r: &crate::model::behavior::Rules| {
        if r.default {
            format!("{name} defaults")
        } else {
            format!("{name} {}", r.describe())
        }
    };
    format!(
        "# NOT CARRIED: HPA behavior ({}; {}). The scenario format has no behavior field ({SCENARIO_FORMAT}); the simulated HPA uses Kubernetes' defaults (scaleUp: max of 100% and 4 pods per 15 s, no window; scaleDown: 100% per 15 s, 300 s window), so its scaling differs from this HPA's",
        side("scaleUp", &b.up),
        side("scaleDown", &b.down)
    )
}
