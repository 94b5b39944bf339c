//! The controller's scaling behaviour on its own, as a step response: how
//! the replica count follows a recommendation that jumps and then stays.
//!
//! The same stabilization and rate limits as [`Hpa`](super::Hpa) (the
//! history of `normalizeDesiredReplicasWithBehaviors`), without metrics: a
//! static check (how long does a 2× peak take to follow? how many pods
//! does one dip remove?) asks the law the simulator runs, rather than an
//! approximation of it.

use super::behavior::{History, Rules};
use super::config::Behavior;
use super::rules_of;
use crate::Nanos;

/// The replica count, sync by sync, after the recommendation has been
/// `from` long enough to fill every window and then steps to `to` at
/// time 0 and stays there. Yields `(time since the step, replicas after
/// that sync)` for the syncs at 0, one sync period later, and so on.
///
/// Invariant: the iterator never ends (a disabled direction stays at
/// `from` for ever); bound it with `take`.
///
/// # Example
///
/// ```
/// use stormbreak_policy::autoscale::{Behavior, StepResponse};
/// use stormbreak_policy::Nanos;
///
/// // Kubernetes' defaults double the replicas every 15 s (100 % per 15 s,
/// // or 4 pods when that is more).
/// let mut up = StepResponse::new(&Behavior::default(), Nanos::from_secs(15), 10, 40);
/// assert_eq!(up.next(), Some((Nanos::ZERO, 20)));
/// assert_eq!(up.next(), Some((Nanos::from_secs(15), 40)));
/// // A dip is held until the 300 s scale-down window holds nothing else
/// // (the syncs at 0, 15, …, 285 s), then followed at once.
/// let down = StepResponse::new(&Behavior::default(), Nanos::from_secs(15), 40, 10);
/// let first = down.take(100).find(|&(_, r)| r < 40);
/// assert_eq!(first, Some((Nanos::from_secs(285), 10)));
/// ```
#[derive(Debug, Clone)]
pub struct StepResponse {
    history: History,
    up: Rules,
    down: Rules,
    sync: Nanos,
    /// The step's instant on the history's clock (which cannot go below 0).
    epoch: Nanos,
    now: Nanos,
    current: u32,
    to: u32,
}

impl StepResponse {
    /// The response of `behavior`, syncing every `sync_period` (15 s by
    /// default in the controller), to a step from `from` to `to`.
    pub fn new(behavior: &Behavior, sync_period: Nanos, from: u32, to: u32) -> Self {
        let (up, down) = rules_of(behavior);
        let sync = sync_period.max(Nanos::NANOSECOND);
        let mut history = History::new(&up, &down, sync);
        // Steady at `from` over the longest look-back before the step.
        let back = up
            .stabilization_window
            .max(down.stabilization_window)
            .max(up.longest_period())
            .max(down.longest_period());
        let syncs_before = back.div_ceil(sync) + 1;
        let epoch = sync.saturating_mul(syncs_before);
        for k in 0..syncs_before {
            let at = sync.saturating_mul(k);
            let _ = history.stabilize(at, from, from, &up, &down);
        }
        StepResponse {
            history,
            up,
            down,
            sync,
            epoch,
            now: epoch,
            current: from,
            to,
        }
    }
}

impl Iterator for StepResponse {
    type Item = (Nanos, u32);

    fn next(&mut self) -> Option<(Nanos, u32)> {
        let now = self.now;
        let (stabilized, _) =
            self.history
                .stabilize(now, self.current, self.to, &self.up, &self.down);
        // Bounds wide enough never to bind: the step response is the
        // behaviour's alone (min/max replicas are the caller's to apply).
        let (desired, _) = self.history.rate_limit(
            now,
            self.current,
            stabilized,
            (0, u32::MAX),
            &self.up,
            &self.down,
        );
        self.history.record_scale(now, self.current, desired);
        self.current = desired;
        self.now = now.saturating_add(self.sync);
        Some((now.saturating_sub(self.epoch), desired))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscale::{ScalingPolicy, ScalingRules, SelectPolicy};

    fn secs(s: u64) -> Nanos {
        Nanos::from_secs(s)
    }

    fn up_only(window: u64, select: SelectPolicy, policies: Vec<ScalingPolicy>) -> Behavior {
        Behavior {
            scale_up: ScalingRules {
                stabilization_window: Some(secs(window)),
                select_policy: Some(select),
                policies: Some(policies),
                tolerance: None,
            },
            ..Behavior::default()
        }
    }

    /// The first time the response reaches `to`, within `syncs`.
    fn reach(b: &Behavior, from: u32, to: u32, syncs: usize) -> Option<Nanos> {
        StepResponse::new(b, secs(15), from, to)
            .take(syncs)
            .find(|&(_, r)| r >= to)
            .map(|(t, _)| t)
    }

    #[test]
    fn defaults_take_the_larger_of_100_percent_and_4_pods() {
        // From 1: max(2, 5) = 5, then 10, then 20.
        let got: Vec<u32> = StepResponse::new(&Behavior::default(), secs(15), 1, 20)
            .take(4)
            .map(|(_, r)| r)
            .collect();
        assert_eq!(got, vec![5, 10, 20, 20]);
    }

    #[test]
    fn a_window_holds_the_step_until_it_has_seen_only_the_new_value() {
        // Window 60 s: the recommendations younger than 60 s at t = 45 are
        // those of 0, 15, 30 and 45, all the new value, so the rise starts
        // at 45 (the controller's `timestamp.After(now − window)`).
        let b = up_only(
            60,
            SelectPolicy::Max,
            vec![ScalingPolicy::pods(100, secs(15))],
        );
        assert_eq!(reach(&b, 10, 20, 100), Some(secs(45)));
    }

    #[test]
    fn a_pods_policy_counts_from_the_start_of_its_period() {
        // 1 pod per 60 s: each 60 s look-back holds one event, so one pod
        // per 4 syncs: 10 → 20 needs 10 steps, the first at 0.
        let b = up_only(0, SelectPolicy::Max, vec![ScalingPolicy::pods(1, secs(60))]);
        assert_eq!(reach(&b, 10, 20, 1000), Some(secs(9 * 60)));
    }

    #[test]
    fn disabled_or_min_of_a_zero_policy_never_moves() {
        let off = up_only(
            0,
            SelectPolicy::Disabled,
            vec![ScalingPolicy::pods(4, secs(15))],
        );
        assert_eq!(reach(&off, 10, 20, 1000), None);
        let min = up_only(
            0,
            SelectPolicy::Min,
            vec![
                ScalingPolicy::pods(4, secs(15)),
                ScalingPolicy::percent(0, secs(15)),
            ],
        );
        assert_eq!(reach(&min, 10, 20, 1000), None);
    }

    #[test]
    fn scale_down_truncates_a_percentage_as_the_controller_does() {
        // 10 % per 60 s from 40: the controller allows int32(40 × 0.9) = 36.
        let b = Behavior {
            scale_down: ScalingRules {
                stabilization_window: Some(Nanos::ZERO),
                select_policy: Some(SelectPolicy::Max),
                policies: Some(vec![ScalingPolicy::percent(10, secs(60))]),
                tolerance: None,
            },
            ..Behavior::default()
        };
        let first = StepResponse::new(&b, secs(15), 40, 10).next();
        assert_eq!(first, Some((Nanos::ZERO, 36)));
        // 15 %: 40 × 0.85 = 34 exactly; 33 % → 26.8 → 26 (truncated).
        for (pct, left) in [(15, 34), (33, 26)] {
            let b = Behavior {
                scale_down: ScalingRules {
                    policies: Some(vec![ScalingPolicy::percent(pct, secs(60))]),
                    ..b.scale_down.clone()
                },
                ..b.clone()
            };
            assert_eq!(
                StepResponse::new(&b, secs(15), 40, 10).next().map(|x| x.1),
                Some(left)
            );
        }
    }
}
