//! Scaling behaviour: stabilization windows and rate-limiting policies.
//!
//! Follows `normalizeDesiredReplicasWithBehaviors` in
//! `pkg/controller/podautoscaler/horizontal.go`: the raw recommendation is
//! first stabilized against the recommendations of the last window, then
//! held to the policies' rate given the scale events of each policy's period,
//! then to min/max replicas. The controller keeps those histories in growable
//! slices; here they are rings sized once from the longest window and period.

use super::config::{PolicyKind, ScalingPolicy, SelectPolicy};
use super::replicas::ceil_replicas;
use crate::Nanos;

/// Timestamped values, oldest overwritten when full.
#[derive(Debug, Clone)]
pub(crate) struct TimedRing {
    entries: Box<[(Nanos, u32)]>,
    next: usize,
    len: usize,
}

impl TimedRing {
    pub(crate) fn new(capacity: usize) -> Self {
        TimedRing {
            entries: vec![(Nanos::ZERO, 0); capacity.max(1)].into_boxed_slice(),
            next: 0,
            len: 0,
        }
    }

    pub(crate) fn push(&mut self, at: Nanos, value: u32) {
        self.entries[self.next] = (at, value);
        self.next = (self.next + 1) % self.entries.len();
        self.len = (self.len + 1).min(self.entries.len());
    }

    /// Entries younger than `period` at `now` (the controller's
    /// `timestamp.After(now − period)`), in no particular order.
    pub(crate) fn within(&self, now: Nanos, period: Nanos) -> impl Iterator<Item = u32> + '_ {
        self.entries[..self.len]
            .iter()
            .filter(move |(at, _)| at.saturating_add(period) > now)
            .map(|&(_, v)| v)
    }

    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.entries.len()
    }
}

/// One direction's rules with the defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rules {
    pub(crate) stabilization_window: Nanos,
    pub(crate) select: SelectPolicy,
    pub(crate) policies: Box<[ScalingPolicy]>,
}

impl Rules {
    pub(crate) fn longest_period(&self) -> Nanos {
        self.policies
            .iter()
            .map(|p| p.period)
            .max()
            .unwrap_or(Nanos::ZERO)
    }
}

/// How stabilization changed the recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stabilization {
    /// The recommendation stood.
    None,
    /// Held down to the lowest recommendation of the scale-up window.
    ScaleUpStabilized,
    /// Held up to the highest recommendation of the scale-down window.
    ScaleDownStabilized,
}

/// What bounded the final replica count (the `ScalingLimited` condition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScaleLimit {
    /// Nothing: the stabilized recommendation was applied as is.
    DesiredWithinRange,
    /// A scale-up policy's rate.
    ScaleUpLimit,
    /// A scale-down policy's rate.
    ScaleDownLimit,
    /// `max_replicas`.
    TooManyReplicas,
    /// `min_replicas`.
    TooFewReplicas,
}

/// Recommendation and scale-event history for one autoscaler.
#[derive(Debug, Clone)]
pub(crate) struct History {
    recommendations: TimedRing,
    scale_ups: TimedRing,
    scale_downs: TimedRing,
}

impl History {
    /// Rings holding one entry per sync over the longest look-back, plus slack
    /// for a sync landing early.
    pub(crate) fn new(up: &Rules, down: &Rules, sync_period: Nanos) -> Self {
        let per_sync = |span: Nanos| {
            (span.div_ceil(sync_period.max(Nanos::NANOSECOND)) as usize).saturating_add(2)
        };
        let window = up.stabilization_window.max(down.stabilization_window);
        let period = up.longest_period().max(down.longest_period());
        History {
            recommendations: TimedRing::new(per_sync(window)),
            scale_ups: TimedRing::new(per_sync(period)),
            scale_downs: TimedRing::new(per_sync(period)),
        }
    }

    #[cfg(test)]
    pub(crate) fn capacities(&self) -> (usize, usize) {
        (self.recommendations.capacity(), self.scale_ups.capacity())
    }

    /// `stabilizeRecommendationWithBehaviors`: clamp the current replicas
    /// between the lowest recommendation of the up window and the highest of
    /// the down window (each including this one), then record this one.
    pub(crate) fn stabilize(
        &mut self,
        now: Nanos,
        current: u32,
        desired: u32,
        up: &Rules,
        down: &Rules,
    ) -> (u32, Stabilization) {
        let floor = self
            .recommendations
            .within(now, up.stabilization_window)
            .fold(desired, u32::min);
        let ceiling = self
            .recommendations
            .within(now, down.stabilization_window)
            .fold(desired, u32::max);
        let stabilized = current.max(floor).min(ceiling);
        self.recommendations.push(now, desired);
        let how = if stabilized == desired {
            Stabilization::None
        } else if desired >= current {
            Stabilization::ScaleUpStabilized
        } else {
            Stabilization::ScaleDownStabilized
        };
        (stabilized, how)
    }

    /// `convertDesiredReplicasWithBehaviorRate`: hold `desired` to the rate
    /// the policies allow from `current`, and to `[min, max]`.
    pub(crate) fn rate_limit(
        &self,
        now: Nanos,
        current: u32,
        desired: u32,
        bounds: (u32, u32),
        up: &Rules,
        down: &Rules,
    ) -> (u32, ScaleLimit) {
        let (min, max) = bounds;
        if desired > current {
            let limit = self
                .scale_up_limit(now, current, up)
                .max(i64::from(current));
            let (allowed, why) = if i64::from(max) > limit {
                (limit as u32, ScaleLimit::ScaleUpLimit)
            } else {
                (max, ScaleLimit::TooManyReplicas)
            };
            if desired > allowed {
                return (allowed, why);
            }
        } else if desired < current {
            let limit = self
                .scale_down_limit(now, current, down)
                .min(i64::from(current));
            let (allowed, why) = if i64::from(min) < limit {
                (limit as u32, ScaleLimit::ScaleDownLimit)
            } else {
                (min, ScaleLimit::TooFewReplicas)
            };
            if desired < allowed {
                return (allowed, why);
            }
        }
        (desired, ScaleLimit::DesiredWithinRange)
    }

    /// `storeScaleEvent`: remember a change the caller is about to apply.
    pub(crate) fn record_scale(&mut self, now: Nanos, from: u32, to: u32) {
        if to > from {
            self.scale_ups.push(now, to - from);
        } else if to < from {
            self.scale_downs.push(now, from - to);
        }
    }

    /// Replicas at the start of `period`: undo the changes made within it.
    fn period_start(&self, now: Nanos, current: u32, period: Nanos) -> i64 {
        let added: i64 = self.scale_ups.within(now, period).map(i64::from).sum();
        let removed: i64 = self.scale_downs.within(now, period).map(i64::from).sum();
        i64::from(current) - added + removed
    }

    /// `calculateScaleUpLimitWithScalingRules`: the most replicas the policies
    /// allow now (Max picks the largest, Min the smallest).
    fn scale_up_limit(&self, now: Nanos, current: u32, rules: &Rules) -> i64 {
        let pick: fn(i64, i64) -> i64 = match rules.select {
            SelectPolicy::Disabled => return i64::from(current),
            SelectPolicy::Min => i64::min,
            SelectPolicy::Max => i64::max,
        };
        let mut result: Option<i64> = None;
        for policy in rules.policies.iter() {
            let start = self.period_start(now, current, policy.period);
            let proposed = match policy.kind {
                PolicyKind::Pods => start + i64::from(policy.value),
                // Rounded up, or a small workload could never grow by a percentage.
                PolicyKind::Percent => {
                    let grown = start as f64 * (1.0 + f64::from(policy.value) / 100.0);
                    signed_ceil(grown)
                }
            };
            result = Some(result.map_or(proposed, |r| pick(r, proposed)));
        }
        result.unwrap_or(i64::from(current))
    }

    /// `calculateScaleDownLimitWithBehaviors`: the fewest replicas the
    /// policies allow now (Max = largest change = lowest count).
    fn scale_down_limit(&self, now: Nanos, current: u32, rules: &Rules) -> i64 {
        let pick: fn(i64, i64) -> i64 = match rules.select {
            SelectPolicy::Disabled => return i64::from(current),
            SelectPolicy::Min => i64::max,
            SelectPolicy::Max => i64::min,
        };
        let mut result: Option<i64> = None;
        for policy in rules.policies.iter() {
            let start = self.period_start(now, current, policy.period);
            let proposed = match policy.kind {
                PolicyKind::Pods => start - i64::from(policy.value),
                // Truncated toward zero, as the controller's int32 conversion does.
                PolicyKind::Percent => {
                    (start as f64 * (1.0 - f64::from(policy.value) / 100.0)) as i64
                }
            };
            result = Some(result.map_or(proposed, |r| pick(r, proposed)));
        }
        result.unwrap_or(i64::from(current))
    }
}

fn signed_ceil(x: f64) -> i64 {
    if x >= 0.0 {
        i64::from(ceil_replicas(x))
    } else {
        x.ceil() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;

    fn rules(window: u64, select: SelectPolicy, policies: &[ScalingPolicy]) -> Rules {
        Rules {
            stabilization_window: Nanos::from_secs(window),
            select,
            policies: policies.to_vec().into_boxed_slice(),
        }
    }

    fn default_up() -> Rules {
        rules(
            0,
            SelectPolicy::Max,
            &[
                ScalingPolicy::percent(100, Nanos::from_secs(15)),
                ScalingPolicy::pods(4, Nanos::from_secs(15)),
            ],
        )
    }

    fn default_down() -> Rules {
        rules(
            300,
            SelectPolicy::Max,
            &[ScalingPolicy::percent(100, Nanos::from_secs(15))],
        )
    }

    #[test]
    fn ring_forgets_the_oldest_when_full() {
        let mut r = TimedRing::new(2);
        r.push(Nanos::from_secs(1), 1);
        r.push(Nanos::from_secs(2), 2);
        r.push(Nanos::from_secs(3), 3);
        let mut seen: Vec<u32> = r
            .within(Nanos::from_secs(3), Nanos::from_secs(100))
            .collect();
        seen.sort();
        assert_eq!(seen, [2, 3]);
    }

    #[test]
    fn window_excludes_an_entry_exactly_one_period_old() {
        let mut r = TimedRing::new(4);
        r.push(Nanos::ZERO, 7);
        // At t = 15 s with a 15 s period the cutoff is 0 and 0 is not after 0.
        assert_eq!(
            r.within(Nanos::from_secs(15), Nanos::from_secs(15)).count(),
            0
        );
        assert_eq!(
            r.within(Nanos::from_secs(14), Nanos::from_secs(15)).count(),
            1
        );
    }

    #[test]
    fn default_scale_up_is_max_of_double_and_plus_four() {
        let h = History::new(&default_up(), &default_down(), Nanos::from_secs(15));
        // 1 replica: max(ceil(1 × 2), 1 + 4) = 5.
        assert_eq!(h.scale_up_limit(Nanos::ZERO, 1, &default_up()), 5);
        // 10 replicas: max(20, 14) = 20.
        assert_eq!(h.scale_up_limit(Nanos::ZERO, 10, &default_up()), 20);
    }

    #[test]
    fn scale_up_limit_counts_from_the_start_of_the_period() {
        let mut h = History::new(&default_up(), &default_down(), Nanos::from_secs(15));
        h.record_scale(Nanos::ZERO, 1, 5);
        // 5 s later the period started at 1 replica: limit still 5.
        assert_eq!(h.scale_up_limit(Nanos::from_secs(5), 5, &default_up()), 5);
        // 15 s later the event has left the period: max(10, 9) = 10.
        assert_eq!(h.scale_up_limit(Nanos::from_secs(15), 5, &default_up()), 10);
    }

    #[test]
    fn percent_scale_up_rounds_up_even_past_float_noise() {
        let up = rules(
            0,
            SelectPolicy::Max,
            &[ScalingPolicy::percent(10, Nanos::from_secs(60))],
        );
        let h = History::new(&up, &default_down(), Nanos::from_secs(15));
        // 50 × (1 + 10/100) is 55.00000000000001 in binary (Go's float64 too),
        // so the controller's ceil allows 56, not 55.
        assert_eq!(h.scale_up_limit(Nanos::ZERO, 50, &up), 56);
        // 10 × 1.1 rounds to exactly 11.0: ceil 11.
        assert_eq!(h.scale_up_limit(Nanos::ZERO, 10, &up), 11);
        // 1 replica +10 %: ceil(1.1) = 2, never stuck at 1.
        assert_eq!(h.scale_up_limit(Nanos::ZERO, 1, &up), 2);
    }

    #[test]
    fn disabled_direction_holds_current() {
        let off = rules(
            0,
            SelectPolicy::Disabled,
            &[ScalingPolicy::pods(4, Nanos::from_secs(15))],
        );
        let h = History::new(&off, &off, Nanos::from_secs(15));
        assert_eq!(
            h.rate_limit(Nanos::ZERO, 3, 9, (1, 10), &off, &off),
            (3, ScaleLimit::ScaleUpLimit)
        );
        assert_eq!(
            h.rate_limit(Nanos::ZERO, 3, 1, (1, 10), &off, &off),
            (3, ScaleLimit::ScaleDownLimit)
        );
    }

    #[test]
    fn bounds_apply_only_in_the_direction_of_change() {
        let h = History::new(&default_up(), &default_down(), Nanos::from_secs(15));
        assert_eq!(
            h.rate_limit(Nanos::ZERO, 8, 30, (1, 10), &default_up(), &default_down()),
            (10, ScaleLimit::TooManyReplicas)
        );
        assert_eq!(
            h.rate_limit(Nanos::ZERO, 8, 0, (2, 10), &default_up(), &default_down()),
            (2, ScaleLimit::TooFewReplicas)
        );
        assert_eq!(
            h.rate_limit(Nanos::ZERO, 8, 8, (1, 10), &default_up(), &default_down()),
            (8, ScaleLimit::DesiredWithinRange)
        );
    }

    #[test]
    fn stabilization_takes_the_highest_recommendation_of_the_down_window() {
        let (up, down) = (default_up(), default_down());
        let mut h = History::new(&up, &down, Nanos::from_secs(15));
        assert_eq!(
            h.stabilize(Nanos::ZERO, 10, 10, &up, &down),
            (10, Stabilization::None)
        );
        assert_eq!(
            h.stabilize(Nanos::from_secs(15), 10, 4, &up, &down),
            (10, Stabilization::ScaleDownStabilized)
        );
        assert_eq!(
            h.stabilize(Nanos::from_secs(30), 10, 6, &up, &down),
            (10, Stabilization::ScaleDownStabilized)
        );
        // At 300 s the 10 recorded at 0 s has aged out; the highest left is 6 (at 30 s).
        assert_eq!(
            h.stabilize(Nanos::from_secs(300), 10, 3, &up, &down),
            (6, Stabilization::ScaleDownStabilized)
        );
    }

    #[test]
    fn scale_up_window_takes_the_lowest_recommendation() {
        let up = rules(
            60,
            SelectPolicy::Max,
            &[ScalingPolicy::pods(100, Nanos::from_secs(15))],
        );
        let down = default_down();
        let mut h = History::new(&up, &down, Nanos::from_secs(15));
        assert_eq!(
            h.stabilize(Nanos::ZERO, 4, 4, &up, &down),
            (4, Stabilization::None)
        );
        // A one-sync spike to 12 is held at the lowest of the minute: 4.
        assert_eq!(
            h.stabilize(Nanos::from_secs(15), 4, 12, &up, &down),
            (4, Stabilization::ScaleUpStabilized)
        );
        assert_eq!(
            h.stabilize(Nanos::from_secs(30), 4, 9, &up, &down),
            (4, Stabilization::ScaleUpStabilized)
        );
        // Once the 4 has aged out (60 s), the lowest left is 9.
        assert_eq!(
            h.stabilize(Nanos::from_secs(60), 4, 12, &up, &down),
            (9, Stabilization::ScaleUpStabilized)
        );
    }

    #[test]
    fn rings_are_sized_from_the_longest_window_and_period() {
        let up = rules(
            0,
            SelectPolicy::Max,
            &[ScalingPolicy::pods(4, Nanos::from_secs(60))],
        );
        let h = History::new(&up, &default_down(), Nanos::from_secs(15));
        // 300 s / 15 s + 2 = 22 recommendations; 60 s / 15 s + 2 = 6 events.
        assert_eq!(h.capacities(), (22, 6));
    }
}
