//! Invariants of the HPA algorithm over random load histories.

use proptest::prelude::*;
use stormbreak_policy::Nanos;
use stormbreak_policy::autoscale::{
    Behavior, ContainerSample, Hpa, HpaConfig, MetricId, MetricSpec, MetricTarget, PodStatus,
    PodTable, ScaleReason, ScalingPolicy, ScalingRules,
};

const T0: Nanos = Nanos::HOUR;
const SYNC: Nanos = Nanos::from_secs(15);

fn cpu_hpa(min: u32, max: u32, target_percent: u32) -> Hpa {
    Hpa::new(&HpaConfig {
        min_replicas: min,
        max_replicas: max,
        metrics: vec![MetricSpec::cpu_utilization(target_percent)],
        ..HpaConfig::default()
    })
    .unwrap()
}

/// `n` ready pods each using `usage` of a 1-core request.
fn uniform(t: &mut PodTable, n: u32, usage: f64, now: Nanos) {
    t.clear(n);
    for _ in 0..n {
        t.push_pod(
            PodStatus::ready(Nanos::ZERO, now),
            &[ContainerSample::cpu(usage, 1.0)],
        );
    }
}

proptest! {
    /// Driven every 15 s with default behaviour and the decisions applied:
    /// replicas stay in [min, max]; a step up never exceeds max(2×, +4) (the
    /// default scale-up policies, whose 15 s period holds exactly one sync);
    /// a step down never goes below the highest recommendation of the last
    /// 300 s (the default scale-down stabilization window).
    #[test]
    fn bounds_rates_and_stabilization_hold(
        min in 1u32..5,
        extra in 0u32..40,
        start in 0u32..45,
        loads in prop::collection::vec(0.0f64..4.0, 1..60),
    ) {
        let max = min + extra;
        let mut replicas = start.clamp(min, max);
        let mut h = cpu_hpa(min, max, 50);
        let mut t = PodTable::with_capacity(64, 1, 1);
        let mut recommendations: Vec<(Nanos, u32)> = Vec::new();
        for (i, &load) in loads.iter().enumerate() {
            let now = T0 + SYNC * i as u64;
            uniform(&mut t, replicas, load, now);
            let d = h.sync(now, &t);
            prop_assert_eq!(d.current, replicas);
            prop_assert!((min..=max).contains(&d.desired), "{:?}", d);
            if let Some(r) = d.recommendation {
                recommendations.push((now, r));
            }
            if d.desired > replicas {
                prop_assert!(d.desired <= (2 * replicas).max(replicas + 4), "{:?}", d);
            }
            if d.desired < replicas {
                let recent_max = recommendations
                    .iter()
                    .filter(|(at, _)| now - *at < Nanos::from_secs(300))
                    .map(|&(_, r)| r)
                    .max()
                    .unwrap();
                prop_assert!(d.desired >= recent_max.max(min), "{:?} vs {}", d, recent_max);
            }
            replicas = d.desired;
        }
    }

    /// A scale-down `Pods k per period` policy: over any period, the pods
    /// removed never add up to more than k.
    #[test]
    fn pods_policy_caps_removals_per_period(
        k in 1u32..6,
        period_syncs in 1u64..9,
        start in 10u32..60,
        syncs in 5usize..40,
    ) {
        let period = period_syncs * SYNC;
        let mut h = Hpa::new(&HpaConfig {
            max_replicas: 100,
            metrics: vec![MetricSpec::cpu_utilization(50)],
            behavior: Behavior {
                scale_up: ScalingRules::default(),
                scale_down: ScalingRules {
                    stabilization_window: Some(Nanos::ZERO),
                    policies: Some(vec![ScalingPolicy::pods(k, period)]),
                    ..ScalingRules::default()
                },
            },
            ..HpaConfig::default()
        })
        .unwrap();
        let mut t = PodTable::with_capacity(64, 1, 1);
        let mut removals: Vec<(Nanos, u32)> = Vec::new();
        let mut replicas = start;
        for i in 0..syncs {
            let now = T0 + SYNC * i as u64;
            // Idle pods: the recommendation is always the minimum.
            uniform(&mut t, replicas, 0.0, now);
            let d = h.sync(now, &t);
            removals.push((now, replicas - d.desired));
            let in_period: u32 = removals
                .iter()
                .filter(|(at, _)| now - *at < period)
                .map(|&(_, r)| r)
                .sum();
            prop_assert!(in_period <= k, "removed {} within {:?}", in_period, period);
            replicas = d.desired;
        }
        // And it does make progress: exactly k per period until the floor.
        let expected_steps = syncs.div_ceil(period_syncs as usize) as u32;
        prop_assert_eq!(replicas, start.saturating_sub(k * expected_steps).max(1));
    }

    /// Utilisation within ±10 % of the target never changes the replica count.
    #[test]
    fn within_tolerance_nothing_changes(
        n in 1u32..60,
        target in 10u32..100,
        offset in 0.0f64..=1.0,
    ) {
        // A whole percent p with 0.9 ≤ p / target ≤ 1.1.
        let lo = (0.9 * f64::from(target)).ceil();
        let hi = (1.1 * f64::from(target)).floor();
        let p = (lo + (offset * (hi - lo)).floor()).min(hi);
        let mut t = PodTable::with_capacity(64, 1, 1);
        uniform(&mut t, n, p / 100.0, T0);
        let d = cpu_hpa(1, 100, target).sync(T0, &t);
        prop_assert_eq!(d.desired, n);
    }

    /// More load never recommends fewer replicas.
    #[test]
    fn recommendation_is_monotone_in_load(
        n in 1u32..40,
        a in 0.0f64..3.0,
        b in 0.0f64..3.0,
    ) {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let mut t = PodTable::with_capacity(64, 1, 1);
        uniform(&mut t, n, lo, T0);
        let r_lo = cpu_hpa(1, 1000, 50).sync(T0, &t).recommendation.unwrap();
        uniform(&mut t, n, hi, T0);
        let r_hi = cpu_hpa(1, 1000, 50).sync(T0, &t).recommendation.unwrap();
        prop_assert!(r_lo <= r_hi, "{} at {} > {} at {}", r_lo, lo, r_hi, hi);
    }

    /// Pods without metrics only ever dampen a scale-down: the recommendation
    /// is never below what the measured pods alone give, ceil(ratio × ready).
    #[test]
    fn missing_metrics_dampen_scale_down(
        values in prop::collection::vec(0.0f64..0.8, 1..30),
        missing in 1usize..10,
    ) {
        let target = 1.0;
        let mut h = Hpa::new(&HpaConfig {
            max_replicas: 1000,
            metrics: vec![MetricSpec::Pods {
                metric: "load".into(),
                target: MetricTarget::AverageValue { average_value: target },
            }],
            ..HpaConfig::default()
        })
        .unwrap();
        let n = values.len();
        let mut t = PodTable::with_capacity(64, 0, 1);
        t.clear((n + missing) as u32);
        for &v in &values {
            let p = t.push_pod(PodStatus::ready(Nanos::ZERO, T0), &[]);
            t.set_pod_metric(p, MetricId(0), v);
        }
        for _ in 0..missing {
            t.push_pod(PodStatus::ready(Nanos::ZERO, T0), &[]);
        }
        let mean: f64 = values.iter().sum::<f64>() / n as f64;
        let undamped = (mean / target * n as f64).ceil() as u32;
        let d = h.sync(T0, &t);
        prop_assert!(d.recommendation.unwrap() >= undamped);
        prop_assert!(d.recommendation.unwrap() <= (n + missing) as u32);
    }

    /// Same inputs, same decisions: two autoscalers fed one history agree.
    #[test]
    fn decisions_are_deterministic(loads in prop::collection::vec(0.0f64..4.0, 1..40)) {
        let mut a = cpu_hpa(1, 50, 60);
        let mut b = cpu_hpa(1, 50, 60);
        let mut t = PodTable::with_capacity(64, 1, 1);
        let mut replicas = 5;
        for (i, &load) in loads.iter().enumerate() {
            let now = T0 + SYNC * i as u64;
            uniform(&mut t, replicas, load, now);
            let (da, db) = (a.sync(now, &t), b.sync(now, &t));
            prop_assert_eq!(da, db);
            prop_assert_eq!(da.reason, ScaleReason::Metrics);
            replicas = da.desired;
        }
    }
}
