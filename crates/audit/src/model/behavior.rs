//! HPA `behavior` (autoscaling/v2 and v2beta2, same schema for what is
//! read here): scale-up and scale-down rules with Kubernetes' defaults, and
//! the time a scale-up takes, simulated the way the controller limits it.
//!
//! Reference: Kubernetes documentation, "Horizontal Pod Autoscaling",
//! section "Configurable scaling behavior" and "Default Behavior"
//! <https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#configurable-scaling-behavior>.

use k8s_openapi::api::autoscaling::v2 as hpa2;

/// The controller's sync period (kube-controller-manager
/// `--horizontal-pod-autoscaler-sync-period`, default 15 s): the step of
/// the scale-up simulation.
pub const SYNC_SECONDS: u32 = 15;
/// The simulation stops after this many sync periods (one day): a bound on
/// hostile input; slower than that reads as "never".
pub const MAX_STEPS: u32 = 24 * 3600 / SYNC_SECONDS;

/// One scaling policy.
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    /// At most `n` pods added (or removed) per `period` seconds.
    Pods {
        /// Pods.
        n: u32,
        /// Period in seconds.
        period: u32,
    },
    /// At most `pct` percent of the current replicas per `period` seconds.
    Percent {
        /// Percent.
        pct: u32,
        /// Period in seconds.
        period: u32,
    },
}

/// How policies combine (`selectPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// The policy allowing the largest change (the default).
    Max,
    /// The policy allowing the smallest change.
    Min,
    /// No scaling in this direction.
    Disabled,
}

/// `HPAScalingRules`, defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    /// `stabilizationWindowSeconds`.
    pub window: u32,
    /// `policies`.
    pub policies: Vec<Policy>,
    /// `selectPolicy`.
    pub select: Select,
    /// True when every field came from Kubernetes' defaults.
    pub default: bool,
}

/// `behavior`, defaults filled in.
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
            up: default_up(),
            down: default_down(),
        }
    }
}

fn default_up() -> Rules {
    Rules {
        window: 0,
        policies: vec![
            Policy::Percent {
                pct: 100,
                period: 15,
            },
            Policy::Pods { n: 4, period: 15 },
        ],
        select: Select::Max,
        default: true,
    }
}

fn default_down() -> Rules {
    Rules {
        window: 300,
        policies: vec![Policy::Percent {
            pct: 100,
            period: 15,
        }],
        select: Select::Max,
        default: true,
    }
}

fn clamp(v: i32) -> u32 {
    v.max(0) as u32
}

fn rules(r: Option<&hpa2::HPAScalingRules>, d: Rules) -> Result<Rules, String> {
    let Some(r) = r else { return Ok(d) };
    let select = match r.select_policy.as_deref() {
        None | Some("Max") => Select::Max,
        Some("Min") => Select::Min,
        Some("Disabled") => Select::Disabled,
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
                let period = clamp(p.period_seconds).clamp(1, 1800);
                match p.type_.as_str() {
                    "Pods" => Ok(Policy::Pods {
                        n: clamp(p.value),
                        period,
                    }),
                    "Percent" => Ok(Policy::Percent {
                        pct: clamp(p.value),
                        period,
                    }),
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

impl Behavior {
    /// Reads `behavior` (absent: the defaults).
    pub fn read(b: Option<&hpa2::HorizontalPodAutoscalerBehavior>) -> Result<Behavior, String> {
        let Some(b) = b else {
            return Ok(Behavior::default());
        };
        Ok(Behavior {
            up: rules(b.scale_up.as_ref(), default_up())
                .map_err(|e| format!("behavior.scaleUp.{e}"))?,
            down: rules(b.scale_down.as_ref(), default_down())
                .map_err(|e| format!("behavior.scaleDown.{e}"))?,
        })
    }
}

impl Rules {
    /// Seconds to scale up from `from` to `to` replicas when the
    /// recommendation jumps to `to` at time 0 (a step peak): the
    /// stabilization window first (the controller takes the lowest
    /// recommendation in the window, so it moves only once the window has
    /// seen the peak throughout), then a sync every [`SYNC_SECONDS`], each
    /// allowed up to the policies' limit, where a policy's limit counts
    /// from the replicas at the start of its period. None: never (disabled,
    /// a zero policy, or longer than [`MAX_STEPS`] syncs).
    pub fn seconds_to_reach(&self, from: u32, to: u32) -> Option<u32> {
        if to <= from {
            return Some(0);
        }
        let stuck = |p: &Policy| {
            matches!(
                p,
                Policy::Pods { n: 0, .. } | Policy::Percent { pct: 0, .. }
            )
        };
        // Max needs every policy stuck to stop growth, Min just one.
        let never = match self.select {
            Select::Disabled => true,
            Select::Max => self.policies.iter().all(stuck),
            Select::Min => self.policies.iter().any(stuck),
        };
        if never || self.policies.is_empty() {
            return None;
        }
        let mut history: Vec<u32> = vec![from.max(1)];
        for step in 1..=MAX_STEPS {
            let now = *history.last().expect("non-empty");
            let limit = |p: &Policy| -> u64 {
                let period = match p {
                    Policy::Pods { period, .. } | Policy::Percent { period, .. } => *period,
                };
                let back = period.div_ceil(SYNC_SECONDS) as usize;
                let base = history[history.len().saturating_sub(back)] as u64;
                match p {
                    Policy::Pods { n, .. } => base + *n as u64,
                    Policy::Percent { pct, .. } => base + (base * *pct as u64).div_ceil(100),
                }
            };
            let limits = self.policies.iter().map(limit);
            let cap = match self.select {
                Select::Min => limits.min(),
                _ => limits.max(),
            }
            .unwrap_or(now as u64);
            let next = (cap.min(to as u64) as u32).max(now);
            if next >= to {
                return Some(self.window + step * SYNC_SECONDS);
            }
            history.push(next);
        }
        None
    }

    /// Replicas left after the first scale-down sync from `from` when the
    /// recommendation has dropped to `to` for the whole stabilization
    /// window: each policy bounds the replicas to `from − n` (`Pods`) or
    /// ⌈from × (1 − p/100)⌉ (`Percent`), counted from the replicas at the
    /// start of its period (here `from`); `selectPolicy: Max` (the default)
    /// takes the policy allowing the largest change, i.e. the lowest bound,
    /// `Min` the highest, `Disabled` none. As the HPA controller's
    /// scale-down limit (Kubernetes "Horizontal Pod Autoscaling", "Scaling
    /// policies").
    pub fn one_step_down(&self, from: u32, to: u32) -> u32 {
        if to >= from || self.select == Select::Disabled || self.policies.is_empty() {
            return from;
        }
        let bound = |p: &Policy| -> u64 {
            match p {
                Policy::Pods { n, .. } => (from as u64).saturating_sub(*n as u64),
                Policy::Percent { pct, .. } => {
                    let keep = 100u64.saturating_sub((*pct).min(100) as u64);
                    (from as u64 * keep).div_ceil(100)
                }
            }
        };
        let bounds = self.policies.iter().map(bound);
        let limit = match self.select {
            Select::Min => bounds.max(),
            _ => bounds.min(),
        }
        .unwrap_or(from as u64);
        (limit.max(to as u64)).min(from as u64) as u32
    }

    /// A short description.
    pub fn describe(&self) -> String {
        let ps: Vec<String> = self
            .policies
            .iter()
            .map(|p| match p {
                Policy::Pods { n, period } => format!("{n} pods per {period}s"),
                Policy::Percent { pct, period } => format!("{pct}% per {period}s"),
            })
            .collect();
        let sel = match self.select {
            Select::Max => "the larger",
            Select::Min => "the smaller",
            Select::Disabled => "disabled",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_double_in_one_sync() {
        let b = Behavior::default();
        assert_eq!(b.up.seconds_to_reach(10, 20), Some(15));
        // From 1: max(100% → 2, 4 pods → 5) per sync: 1 → 5 → 10 → 20.
        assert_eq!(b.up.seconds_to_reach(1, 20), Some(45));
    }

    #[test]
    fn a_slow_pods_policy_and_a_window() {
        let r = Rules {
            window: 60,
            policies: vec![Policy::Pods { n: 1, period: 60 }],
            select: Select::Max,
            default: false,
        };
        // 10 → 20 at 1 pod per 60 s: the policy counts from the replicas
        // at the start of its period, so one pod per 4 syncs.
        assert_eq!(r.seconds_to_reach(10, 20), Some(60 + 10 * 60 - 45));
        let disabled = Rules {
            select: Select::Disabled,
            ..r.clone()
        };
        assert_eq!(disabled.seconds_to_reach(10, 20), None);
        let zero = Rules {
            policies: vec![Policy::Pods { n: 0, period: 15 }],
            ..r
        };
        assert_eq!(zero.seconds_to_reach(10, 20), None);
    }

    #[test]
    fn scale_down_limits_as_the_controller_takes_them() {
        let d = Behavior::default().down;
        // 100% per 15 s: straight to the recommendation.
        assert_eq!(d.one_step_down(40, 10), 10);
        let gentle = Rules {
            window: 300,
            policies: vec![
                Policy::Percent {
                    pct: 10,
                    period: 60,
                },
                Policy::Pods { n: 2, period: 60 },
            ],
            select: Select::Max,
            default: false,
        };
        // Max: the larger change, 40 − max(⌈40 × 0.9⌉ = 36 → 4, 2) = 36.
        assert_eq!(gentle.one_step_down(40, 10), 36);
        let min = Rules {
            select: Select::Min,
            ..gentle.clone()
        };
        assert_eq!(min.one_step_down(40, 10), 38);
        let off = Rules {
            select: Select::Disabled,
            ..gentle
        };
        assert_eq!(off.one_step_down(40, 10), 40);
        // Never below the recommendation.
        assert_eq!(d.one_step_down(40, 39), 39);
    }
}
