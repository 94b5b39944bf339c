//! SB105: an HPA whose `behavior.scaleDown` lets a dip shorter than the
//! time to get the pods back remove most of them: when the load returns,
//! it meets the few pods left while the scale-up and the new pods' start
//! catch up — the replica count flaps, and each flap is an overload.
//!
//! The stabilization window is Kubernetes' guard against exactly this
//! ("used to restrict the flapping of replica count when the metrics used
//! for scaling keep fluctuating"); it should be at least as long as what a
//! removed pod costs to bring back, the way one holds a resource for at
//! least its re-acquisition cost.

use super::{Ctx, RuleInfo};
use crate::finding::{Finding, Severity};
use crate::model::behavior::SYNC_SECONDS;
use crate::model::{Autoscaler, Workload};
use stormbreak_policy::autoscale::SelectPolicy;

/// SB105.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB105",
    name: "scale-down-faster-than-scale-back",
    severity: Severity::Warning,
    summary: "An HPA's scaleDown lets a dip shorter than the time to get the pods back (scale-up + pod start) remove at least half of them in one sync: the replica count flaps.",
};

/// Pod start assumed when no probe of the app states a delay (the same
/// assumption as `--export-scenario`'s `pod_start`).
pub const ASSUMED_POD_START_SECONDS: u32 = 30;

/// One replica count the rule starts a dip from, and where it comes from.
struct Peak {
    replicas: u32,
    what: String,
}

/// The replica counts a dip is checked from, in order: the count the
/// target runs at, then `maxReplicas`, the most the autoscaler can reach.
/// The count it runs at is, by precedence, the HPA's
/// `status.currentReplicas` (what the controller last saw running, in a
/// live export), else the target's written `spec.replicas` (the count it
/// was applied at, or last scaled to); clamped to the autoscaler's bounds
/// and used when above `minReplicas` and below `maxReplicas`. Neither it
/// nor `maxReplicas` alone is the worst case: a `Percent` policy removes
/// the most pods from the largest count, a `Pods` policy the largest share
/// from the smallest.
fn peaks(a: &Autoscaler, target: Option<&Workload>, floor: u32) -> Vec<Peak> {
    let mut out = Vec::new();
    // (count, the field it is read from, the object it is read on)
    let running = match a.current {
        Some(n) => Some((
            n,
            "status.currentReplicas",
            format!("{} {}/{}", a.kind, a.namespace, a.name),
        )),
        None => target.filter(|w| w.replicas_written).map(|w| {
            (
                w.replicas,
                "spec.replicas",
                format!("{} {}/{}", w.kind, w.namespace, w.name),
            )
        }),
    };
    if let Some((n, field, object)) = running {
        let n = n.clamp(floor, a.max);
        if n > floor && n < a.max {
            out.push(Peak {
                replicas: n,
                what: format!("{field} {n} of {object}"),
            });
        }
    }
    out.push(Peak {
        replicas: a.max,
        what: format!("maxReplicas {}", a.max),
    });
    out
}

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for a in &ctx.inv.autoscalers {
        let Some(b) = &a.behavior else { continue };
        let floor = a.min.max(1);
        if b.down.select == SelectPolicy::Disabled || a.max <= floor {
            continue;
        }
        let target = ctx.inv.workload(&a.namespace, &a.target.0, &a.target.1);
        let (start, start_how) = match target.and_then(|w| w.ready_after.clone()) {
            Some((s, how)) => (s, format!("pod start ≥ {s} s ({how})")),
            None => (
                ASSUMED_POD_START_SECONDS,
                format!(
                    "pod start {ASSUMED_POD_START_SECONDS} s (ASSUMPTION: no probe of the app states a delay)"
                ),
            ),
        };
        for p in peaks(a, target, floor) {
            let peak = p.replicas;
            // The shortest dip that removes pods: the recommendation stays
            // low until a sync whose window holds nothing else.
            let Some((dip, after)) = b.first_step_down(peak, floor) else {
                continue;
            };
            let removed = peak - after;
            // "Most pods": at least half of the peak gone in one sync.
            if removed * 2 < peak {
                continue;
            }
            let up = b.seconds_to_reach(after, peak);
            let (back, back_how) = match up {
                Some(u) => (
                    u.saturating_add(start),
                    format!("scale-up {after} → {peak} {u} s + {start_how}"),
                ),
                None => (
                    u32::MAX,
                    "never: scaleUp is disabled or limited to 0".to_string(),
                ),
            };
            if dip >= back {
                continue;
            }
            let back_s = if back == u32::MAX {
                "never".to_string()
            } else {
                format!("{back} s")
            };
            out.push(Finding {
                rule: RULE.id,
                severity: Severity::Warning,
                pos: a.src.line_of("scaleDown"),
                object: crate::model::key(a.kind, &a.namespace, &a.name),
                message: format!(
                    "{} {}/{}: scaleDown ({}) lets a dip of {dip} s (until a sync whose {} s window holds only the low recommendation, syncs every {SYNC_SECONDS} s) take the replicas from {} to {after} in one sync ({removed} pods); getting them back takes {back_s} ({back_how}): load that returns sooner meets {after} of {peak} pods, and the replica count flaps. Needs stabilizationWindowSeconds ≥ {} s, or a scaleDown policy that removes fewer pods per period",
                    a.kind,
                    a.namespace,
                    a.name,
                    b.down.describe(),
                    b.down.window,
                    p.what,
                    // A window of W ≥ 15 s acts on a dip of W s.
                    if back == u32::MAX { "∞".to_string() } else { back.to_string() }
                ),
            });
            // One finding per autoscaler: the first count that flaps.
            break;
        }
    }
}
