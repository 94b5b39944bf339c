//! A workload as a `[[service]]`: replicas, sidecar limit, app workers,
//! autoscaler.

use std::fmt::Write;

use super::names::one_line;
use super::{ASSUMED_WORKERS, MAX_PODS, MAX_SLOTS, STAND_IN_WORKERS, UNLIMITED_SIDECAR};
use crate::chain::{ChainOptions, HopKind, pod_limits, replicas};
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

/// What a workload's `[[service]]` admits, as written: whole slots per
/// pod within the format's bounds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Slots {
    /// Pods (`replicas`).
    pub replicas: u32,
    /// The sidecar's limit per pod (None: the pod has no sidecar).
    pub sidecar: Option<u64>,
    /// App workers per pod.
    pub workers: u64,
}

impl Slots {
    /// What the pod admits at the chain's hop of this kind: a pod without
    /// a sidecar admits at the sidecar hop what its app does (as the
    /// chain sums it).
    pub fn per_pod(&self, kind: HopKind) -> u64 {
        match (kind, self.sidecar) {
            (HopKind::Sidecar, Some(s)) => s,
            _ => self.workers,
        }
    }
}

/// A workload's slots as its `[[service]]` writes them.
pub(crate) fn slots(inv: &Inventory, w: &Workload, opts: &ChainOptions) -> Slots {
    let pl = pod_limits(inv, w, opts);
    let sidecar = w.sidecar.as_ref().map(|_| match &pl.sidecar {
        // Little's law may give a fraction: whole slots, rounded down.
        Some((l, ..)) => (l.floor() as u64).clamp(1, MAX_SLOTS as u64),
        None => UNLIMITED_SIDECAR as u64,
    });
    let workers = match &pl.app {
        Some((v, _)) => (*v as u64).clamp(1, MAX_SLOTS as u64),
        None => ASSUMED_WORKERS as u64,
    };
    Slots {
        replicas: replicas(inv, w).0.clamp(1, MAX_PODS),
        sidecar,
        workers,
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
    let (_, rep) = replicas(inv, w);
    let sl = slots(inv, w, opts);
    let _ = writeln!(
        s,
        "# {} ({})\n[[service]]\nname = \"{name}\"\nreplicas = {}   # {}",
        w.key(),
        one_line(&w.src.pos.to_string()),
        sl.replicas,
        one_line(&rep)
    );
    if let Some(limit) = sl.sidecar {
        match &pl.sidecar {
            Some((_, how, assumed, _)) => {
                let mark = if *assumed { "ASSUMPTION: " } else { "" };
                let _ = writeln!(
                    s,
                    "sidecar = {{ limit = {limit} }}   # {mark}{}",
                    one_line(how)
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "sidecar = {{ limit = {limit} }}   # ASSUMPTION: no inbound limit in the configs"
                );
            }
        }
    }
    let wnote = match &pl.app {
        Some((_, how)) => one_line(how),
        None => "ASSUMPTION: app concurrency not in the configs".into(),
    };
    let _ = writeln!(
        s,
        "app = {{ workers = {}, service_time = {{ dist = \"exponential\", mean = \"{lat}\" }} }}   # workers: {wnote}; service time: ASSUMPTION (--assume-latency)",
        sl.workers
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
            // A target the format refuses (0, NaN) is not a utilisation the
            // HPA can use either: the default stands in, said so.
            let (target, assumed) = if target.is_finite() && target > 0.0 {
                (target, assumed)
            } else {
                (0.8, true)
            };
            let mark = if assumed {
                "   # target: ASSUMPTION (the metric's target is not a utilisation)"
            } else {
                ""
            };
            // A written behavior travels as the policy crate's `Behavior`,
            // which the simulator's HPA runs; the defaults need no field.
            let mut behavior = String::new();
            if let Some(b) = &a.behavior {
                let _ = writeln!(s, "{}", behavior_note(b));
                if !(b.up.default && b.down.default) {
                    match super::inline::inline(&b.to_policy()) {
                        Ok(t) => behavior = format!(", behavior = {t}"),
                        Err(e) => {
                            let _ = writeln!(s, "# NOT CARRIED: HPA behavior: {e}");
                        }
                    }
                }
            }
            let min = a.min.clamp(1, sl.replicas);
            // The format wants the replicas within the bounds; the chain
            // sizes at `spec.replicas` when it is above the HPA's max.
            let max = a.max.max(min).max(sl.replicas).min(MAX_PODS);
            if max != a.max {
                let _ = writeln!(
                    s,
                    "# NOT CARRIED: {} {}/{} maxReplicas {}: the format needs replicas ({}) within the autoscaler's bounds, so max is {max}",
                    a.kind, a.namespace, a.name, a.max, sl.replicas
                );
            }
            let _ = writeln!(
                s,
                "autoscaler = {{ metric = \"{metric}\", target = {}, min = {min}, max = {max}, pod_start = \"30s\"{behavior} }}   # {} {}/{}; pod_start: ASSUMPTION{mark}",
                trim(target),
                a.kind,
                a.namespace,
                a.name
            );
        }
    }
    s.push('\n');
    s
}

/// The `[[service]]` standing in for a destination the configs do not
/// show (an HAProxy backend's servers at plain addresses, a Service not
/// among the inputs): a route must end at a service, and this one admits
/// [`STAND_IN_WORKERS`] a pod so that every hop the chain knows saturates
/// before it.
pub(crate) fn stand_in(name: &str, replicas: u32, why: &str, lat: &str) -> String {
    format!(
        "# Stand-in: {}. ASSUMPTION: {STAND_IN_WORKERS} workers a pod, so it saturates after every hop of the chain, and the assumed service time\n[[service]]\nname = \"{name}\"\nreplicas = {}\napp = {{ workers = {STAND_IN_WORKERS}, service_time = {{ dist = \"exponential\", mean = \"{lat}\" }} }}\n\n",
        one_line(why),
        replicas.clamp(1, MAX_PODS)
    )
}

/// The comment above an exported autoscaler that says how its HPA
/// `behavior` travels: Kubernetes' defaults need no field (the simulator's
/// HPA applies them); anything else is written as the autoscaler's
/// `behavior` table (docs/scenarios.md, `autoscaler.behavior`), which the
/// simulator's HPA runs with the policy crate's law, the one this audit's
/// SB104/SB105 read.
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
        "# HPA behavior ({}; {}): carried in `behavior` below and run by the simulator's HPA",
        side("scaleUp", &b.up),
        side("scaleDown", &b.down)
    )
}
