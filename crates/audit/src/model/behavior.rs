//! HPA `behavior` (autoscaling/v2 and v2beta2, same schema for what is
//! read here), read into the policy crate's [`autoscale::Behavior`]. The
//! law — stabilization windows and rate policies, sync by sync — is the
//! policy crate's ([`StepResponse`]), the one the simulator's HPA runs:
//! this module only reads the object and describes it.
//!
//! Reference: Kubernetes documentation, "Horizontal Pod Autoscaling",
//! section "Configurable scaling behavior" and "Default Behavior"
//! <https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#configurable-scaling-behavior>.

use k8s_openapi::api::autoscaling::v2 as hpa2;
use stormbreak_policy::Nanos;
use stormbreak_policy::autoscale::{
    self, PolicyKind, ScalingPolicy, ScalingRules, SelectPolicy, StepResponse,
};

/// The controller's sync period (kube-controller-manager
/// `--horizontal-pod-autoscaler-sync-period`, default 15 s).
pub const SYNC_SECONDS: u32 = 15;
/// The step response is followed for at most this many sync periods (one
/// day): a bound on hostile input; slower than that reads as "never".
pub const MAX_STEPS: u32 = 24 * 3600 / SYNC_SECONDS;

/// One direction's `HPAScalingRules` as read, defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    /// `stabilizationWindowSeconds`.
    pub window: u32,
    /// `policies`.
    pub policies: Vec<ScalingPolicy>,
    /// `selectPolicy`.
    pub select: SelectPolicy,
    /// True when every field came from Kubernetes' defaults.
    pub default: bool,
}

/// `behavior` as read, defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Behavior {
    /// `scaleUp` (default: no window; max of 100% and 4 pods per 15 s).
    pub up: Rules,
    /// `scaleDown` (default: 300 s window; 100% per 15 s).
    pub down: Rules,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            up: Rules::from_policy(&ScalingRules::scale_up_default()),
            down: Rules::from_policy(&ScalingRules::scale_down_default()),
        }
    }
}

fn clamp(v: i32) -> u32 {
    v.max(0) as u32
}

fn rules(r: Option<&hpa2::HPAScalingRules>, d: Rules) -> Result<Rules, String> {
    let Some(r) = r else { return Ok(d) };
    let select = match r.select_policy.as_deref() {
        None | Some("Max") => SelectPolicy::Max,
        Some("Min") => SelectPolicy::Min,
        Some("Disabled") => SelectPolicy::Disabled,
        Some(o) => {
            return Err(format!(
                "selectPolicy: expected Max, Min or Disabled, got {o:?}"
            ));
        }
    };
    let policies = match &r.policies {
        None => d.policies.clone(),
        Some(ps) => ps
            .iter()
            .map(|p| {
                // The API server accepts periods of 1 s to 30 min.
                let period = Nanos::from_secs(u64::from(clamp(p.period_seconds).clamp(1, 1800)));
                let value = clamp(p.value);
                match p.type_.as_str() {
                    "Pods" => Ok(ScalingPolicy::pods(value, period)),
                    "Percent" => Ok(ScalingPolicy::percent(value, period)),
                    o => Err(format!(
                        "policies[].type: expected Pods or Percent, got {o:?}"
                    )),
                }
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(Rules {
        window: r
            .stabilization_window_seconds
            .map(|w| clamp(w).min(3600))
            .unwrap_or(d.window),
        policies,
        select,
        default: false,
    })
}

impl Rules {
    /// The policy crate's defaults, as read.
    fn from_policy(r: &ScalingRules) -> Rules {
        Rules {
            window: r
                .stabilization_window
                .map_or(0, |w| (w.as_nanos() / 1_000_000_000) as u32),
            policies: r.policies.clone().unwrap_or_default(),
            select: r.select_policy.unwrap_or_default(),
            default: true,
        }
    }

    /// The policy crate's rules for this direction.
    fn to_policy(&self) -> ScalingRules {
        ScalingRules {
            stabilization_window: Some(Nanos::from_secs(u64::from(self.window))),
            select_policy: Some(self.select),
            policies: Some(self.policies.clone()),
            tolerance: None,
        }
    }

    /// A short description.
    pub fn describe(&self) -> String {
        let ps: Vec<String> = self
            .policies
            .iter()
            .map(|p| {
                let period = p.period.as_nanos() / 1_000_000_000;
                match p.kind {
                    PolicyKind::Pods => format!("{} pods per {period}s", p.value),
                    PolicyKind::Percent => format!("{}% per {period}s", p.value),
                }
            })
            .collect();
        let sel = match self.select {
            SelectPolicy::Max => "the larger",
            SelectPolicy::Min => "the smaller",
            SelectPolicy::Disabled => "disabled",
        };
        format!(
            "stabilizationWindowSeconds {}, policies [{}], selectPolicy {sel}{}",
            self.window,
            ps.join(", "),
            if self.default {
                " (Kubernetes' defaults)"
            } else {
                ""
            }
        )
    }
}

impl Behavior {
    /// Reads `behavior` (absent: the defaults).
    pub fn read(b: Option<&hpa2::HorizontalPodAutoscalerBehavior>) -> Result<Behavior, String> {
        let Some(b) = b else {
            return Ok(Behavior::default());
        };
        let d = Behavior::default();
        Ok(Behavior {
            up: rules(b.scale_up.as_ref(), d.up).map_err(|e| format!("behavior.scaleUp.{e}"))?,
            down: rules(b.scale_down.as_ref(), d.down)
                .map_err(|e| format!("behavior.scaleDown.{e}"))?,
        })
    }

    /// The policy crate's behavior, which the simulator's HPA runs.
    pub fn to_policy(&self) -> autoscale::Behavior {
        autoscale::Behavior {
            scale_up: self.up.to_policy(),
            scale_down: self.down.to_policy(),
        }
    }

    /// The step response with its times counted from the change itself,
    /// taken to come just after a sync (the worst phase): the first sync
    /// to see it is [`SYNC_SECONDS`] later.
    fn response(&self, from: u32, to: u32) -> impl Iterator<Item = (u32, u32)> {
        StepResponse::new(
            &self.to_policy(),
            Nanos::from_secs(u64::from(SYNC_SECONDS)),
            from,
            to,
        )
        .take(MAX_STEPS as usize)
        .map(|(t, r)| ((t.as_nanos() / 1_000_000_000) as u32 + SYNC_SECONDS, r))
    }

    /// Seconds from a step of the recommendation up from `from` to `to`
    /// replicas until the sync that reaches `to` (at least one sync
    /// period). None: never within [`MAX_STEPS`] syncs (disabled, or a
    /// policy of 0).
    pub fn seconds_to_reach(&self, from: u32, to: u32) -> Option<u32> {
        if to <= from {
            return Some(0);
        }
        self.response(from.max(1), to)
            .find(|&(_, r)| r >= to)
            .map(|(t, _)| t)
    }

    /// The first scale-down after the recommendation drops from `from` to
    /// `to` and stays: when (seconds after the drop, so the shortest dip
    /// that removes pods) and to how many replicas. None: never within
    /// [`MAX_STEPS`] syncs.
    pub fn first_step_down(&self, from: u32, to: u32) -> Option<(u32, u32)> {
        if to >= from {
            return None;
        }
        self.response(from, to).find(|&(_, r)| r < from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_double_in_one_sync() {
        let b = Behavior::default();
        assert_eq!(b.seconds_to_reach(10, 20), Some(15));
        // From 1: max(100% → 2, 4 pods → 5) per sync: 1 → 5 → 10 → 20.
        assert_eq!(b.seconds_to_reach(1, 20), Some(45));
        assert!(b.up.default && b.down.default);
        assert_eq!(b.to_policy(), autoscale::Behavior::default());
    }

    #[test]
    fn a_read_behavior_is_the_policy_crates() {
        let written: hpa2::HorizontalPodAutoscalerBehavior = serde_json::from_str(
            r#"{"scaleUp": {"stabilizationWindowSeconds": 60, "selectPolicy": "Min",
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}"#,
        )
        .unwrap();
        let b = Behavior::read(Some(&written)).unwrap();
        assert_eq!(b.up.window, 60);
        assert!(!b.up.default && b.down.default);
        let law = b.to_policy();
        assert_eq!(law.scale_up.select_policy, Some(SelectPolicy::Min));
        assert_eq!(
            law.scale_up.policies,
            Some(vec![ScalingPolicy::pods(1, Nanos::from_secs(60))])
        );
        assert_eq!(law.scale_down, ScalingRules::scale_down_default());
    }

    #[test]
    fn the_default_scale_down_waits_out_its_window_then_goes_all_the_way() {
        // The sync 285 s after the first one to see the drop is the first
        // whose 300 s window holds only the new recommendation; the drop
        // came up to one sync before that first one: 300 s.
        assert_eq!(Behavior::default().first_step_down(40, 10), Some((300, 10)));
    }
}
