//! The Kubernetes HPA v2 algorithm against the documentation's worked
//! examples (kubernetes.io "Horizontal Pod Autoscaling": algorithm details,
//! scaling policies, stabilization window) and against the 2026-08-17 blind
//! spot: a saturated sidecar that CPU-based autoscaling cannot see.

use stormbreak_policy::Nanos;
use stormbreak_policy::autoscale::{
    Behavior, ContainerSample, Hpa, HpaConfig, MetricError, MetricId, MetricSpec, MetricTarget,
    PodStatus, PodTable, ResourceName, ScaleDecision, ScaleLimit, ScaleReason, ScalingPolicy,
    ScalingRules, SelectPolicy, Stabilization,
};

/// Long after every pod started, so CPU initialisation rules do not apply.
const T0: Nanos = Nanos::HOUR;
const SYNC: Nanos = Nanos::from_secs(15);

fn hpa(metrics: Vec<MetricSpec>, min: u32, max: u32) -> Hpa {
    Hpa::new(&HpaConfig {
        min_replicas: min,
        max_replicas: max,
        metrics,
        pod_containers: vec!["app".into(), "istio-proxy".into()],
        ..HpaConfig::default()
    })
    .unwrap()
}

fn cpu_average_value(cores: f64) -> MetricSpec {
    MetricSpec::Resource {
        name: ResourceName::Cpu,
        target: MetricTarget::AverageValue {
            average_value: cores,
        },
    }
}

fn pods_metric(name: &str, average_value: f64) -> MetricSpec {
    MetricSpec::Pods {
        metric: name.into(),
        target: MetricTarget::AverageValue { average_value },
    }
}

/// `n` long-running ready pods, one container using `usage` of `request` CPU.
fn uniform(table: &mut PodTable, n: usize, usage: f64, request: f64, now: Nanos) {
    table.clear(n as u32);
    for _ in 0..n {
        table.push_pod(
            PodStatus::ready(Nanos::ZERO, now),
            &[ContainerSample::cpu(usage, request)],
        );
    }
}

// --- Algorithm details: desiredReplicas = ceil(current × current / desired) ---

#[test]
fn current_200m_over_target_100m_doubles_the_replicas() {
    let mut h = hpa(vec![cpu_average_value(0.1)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    uniform(&mut t, 4, 0.2, 0.5, T0);
    // ratio 200 / 100 = 2.0 ⇒ ceil(4 × 2.0) = 8; default scale-up allows max(4 × 2, 4 + 4) = 8.
    let d = h.sync(T0, &t);
    assert_eq!((d.current, d.desired, d.recommendation), (4, 8, Some(8)));
    assert_eq!(d.limit, ScaleLimit::DesiredWithinRange);
    assert_eq!(h.readings()[0].unwrap().current, 0.2);
}

#[test]
fn current_50m_over_target_100m_halves_the_replicas() {
    let mut h = hpa(vec![cpu_average_value(0.1)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    uniform(&mut t, 4, 0.05, 0.5, T0);
    // ratio 0.5 ⇒ ceil(4 × 0.5) = 2; no earlier recommendation holds it up,
    // and the default scale-down policy allows 100 %.
    let d = h.sync(T0, &t);
    assert_eq!(d.desired, 2);
    assert_eq!(d.stabilization, Stabilization::None);
}

#[test]
fn a_ratio_within_the_tolerance_changes_nothing() {
    let mut t = PodTable::with_capacity(16, 1, 1);
    // 105m / 100m: |1.05 − 1| ≤ 0.1 ⇒ stay at 4.
    uniform(&mut t, 4, 0.105, 0.5, T0);
    assert_eq!(
        hpa(vec![cpu_average_value(0.1)], 1, 100)
            .sync(T0, &t)
            .desired,
        4
    );
    // 91m / 100m: |0.91 − 1| ≤ 0.1 ⇒ stay at 4.
    uniform(&mut t, 4, 0.091, 0.5, T0);
    assert_eq!(
        hpa(vec![cpu_average_value(0.1)], 1, 100)
            .sync(T0, &t)
            .desired,
        4
    );
    // 111m / 100m is outside: ceil(4 × 1.11) = ceil(4.44) = 5.
    uniform(&mut t, 4, 0.111, 0.5, T0);
    assert_eq!(
        hpa(vec![cpu_average_value(0.1)], 1, 100)
            .sync(T0, &t)
            .desired,
        5
    );
}

#[test]
fn utilization_is_truncated_to_a_whole_percent_before_the_tolerance_check() {
    let mut t = PodTable::with_capacity(16, 1, 1);
    // 110.9 % of request against a 100 % target: the controller's
    // int32(usage × 100 / request) reads 110 ⇒ ratio 1.10, inside the band.
    uniform(&mut t, 10, 1.109, 1.0, T0);
    let d = hpa(vec![MetricSpec::cpu_utilization(100)], 1, 100).sync(T0, &t);
    assert_eq!(d.desired, 10);
}

#[test]
fn a_per_direction_tolerance_overrides_the_global_one() {
    let mut t = PodTable::with_capacity(16, 1, 1);
    // ratio 1.08: inside the default 10 % band, outside a 5 % scale-up band.
    uniform(&mut t, 4, 0.108, 0.5, T0);
    assert_eq!(
        hpa(vec![cpu_average_value(0.1)], 1, 100)
            .sync(T0, &t)
            .desired,
        4
    );
    let mut tight = Hpa::new(&HpaConfig {
        metrics: vec![cpu_average_value(0.1)],
        max_replicas: 100,
        behavior: Behavior {
            scale_up: ScalingRules {
                tolerance: Some(0.05),
                ..ScalingRules::default()
            },
            scale_down: ScalingRules::default(),
        },
        ..HpaConfig::default()
    })
    .unwrap();
    // ceil(4 × 1.08) = ceil(4.32) = 5.
    assert_eq!(tight.sync(T0, &t).desired, 5);
}

#[test]
fn the_largest_recommendation_over_metrics_wins() {
    let mut h = hpa(
        vec![MetricSpec::cpu_utilization(50), pods_metric("rps", 100.0)],
        1,
        100,
    );
    let mut t = PodTable::with_capacity(16, 1, 2);
    uniform(&mut t, 4, 0.5, 1.0, T0);
    for p in 0..4 {
        t.set_pod_metric(p, MetricId(1), 150.0);
    }
    // CPU: 50 % / 50 % ⇒ keep 4. rps: 150 / 100 = 1.5 ⇒ ceil(4 × 1.5) = 6.
    let d = h.sync(T0, &t);
    assert_eq!(d.desired, 6);
    assert_eq!(d.metric, Some(MetricId(1)));
    assert_eq!(h.readings()[0].unwrap().replicas, 4);
    assert_eq!(h.readings()[1].unwrap().replicas, 6);
}

#[test]
fn pod_level_resource_utilization_is_total_usage_over_total_requests() {
    let mut h = hpa(vec![MetricSpec::cpu_utilization(50)], 1, 100);
    let mut t = PodTable::with_capacity(16, 2, 1);
    t.clear(2);
    // Pod 0: (0.6 + 0.2) / (1.0 + 0.2); pod 1: (0.2 + 0.0) / (1.0 + 0.2).
    // Σ usage / Σ requests = 1.0 / 2.4 = 41.67 % ⇒ 41 % ⇒ ratio 0.82
    // ⇒ ceil(2 × 0.82) = ceil(1.64) = 2: no change.
    t.push_pod(
        PodStatus::ready(Nanos::ZERO, T0),
        &[
            ContainerSample::cpu(0.6, 1.0),
            ContainerSample::cpu(0.2, 0.2),
        ],
    );
    t.push_pod(
        PodStatus::ready(Nanos::ZERO, T0),
        &[
            ContainerSample::cpu(0.2, 1.0),
            ContainerSample::cpu(0.0, 0.2),
        ],
    );
    let d = h.sync(T0, &t);
    assert_eq!(h.readings()[0].unwrap().current, 41.0);
    assert_eq!(d.desired, 2);
}

// --- Missing metrics and not-yet-ready pods ---

#[test]
fn missing_metric_pods_count_as_full_request_on_a_scale_down() {
    let mut h = hpa(vec![MetricSpec::cpu_utilization(50)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    t.clear(5);
    for _ in 0..4 {
        t.push_pod(
            PodStatus::ready(Nanos::ZERO, T0),
            &[ContainerSample::cpu(0.25, 1.0)],
        );
    }
    t.push_pod(
        PodStatus::ready(Nanos::ZERO, T0).without_sample(),
        &[ContainerSample::cpu(0.0, 1.0)],
    );
    // Measured: 1.0 / 4.0 = 25 % ⇒ ratio 0.5 (alone: ceil(4 × 0.5) = 2).
    // Missing pod assumed at 100 % of its request: (1.0 + 1.0) / 5.0 = 40 %
    // ⇒ ratio 0.8 ⇒ ceil(0.8 × 5) = 4.
    let d = h.sync(T0, &t);
    assert_eq!(d.recommendation, Some(4));
    assert_eq!(d.desired, 4);
    // The status reports the original, uncorrected utilisation.
    assert_eq!(h.readings()[0].unwrap().current, 25.0);
}

#[test]
fn missing_metric_pods_count_as_zero_on_a_scale_up() {
    let mut h = hpa(vec![MetricSpec::cpu_utilization(50)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    t.clear(4);
    for _ in 0..3 {
        t.push_pod(
            PodStatus::ready(Nanos::ZERO, T0),
            &[ContainerSample::cpu(1.0, 1.0)],
        );
    }
    t.push_pod(
        PodStatus::ready(Nanos::ZERO, T0).without_sample(),
        &[ContainerSample::cpu(0.0, 1.0)],
    );
    // Measured 100 % ⇒ ratio 2. With the missing pod at 0 %: 3.0 / 4.0 = 75 %
    // ⇒ ratio 1.5 ⇒ ceil(1.5 × 4) = 6.
    assert_eq!(h.sync(T0, &t).desired, 6);
}

#[test]
fn pending_and_missing_pods_can_pull_a_scale_up_back_into_tolerance() {
    // 10 replicas, target 70 %, requests 1 core: 8 ready pods use 7.6 cores,
    // one is Pending, one has no metrics yet.
    let mut h = hpa(vec![MetricSpec::cpu_utilization(70)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    t.clear(10);
    for _ in 0..8 {
        t.push_pod(
            PodStatus::ready(Nanos::ZERO, T0),
            &[ContainerSample::cpu(0.95, 1.0)],
        );
    }
    t.push_pod(PodStatus::pending(), &[ContainerSample::cpu(0.0, 1.0)]);
    t.push_pod(
        PodStatus::ready(Nanos::ZERO, T0).without_sample(),
        &[ContainerSample::cpu(0.0, 1.0)],
    );
    // Measured: 7.6 / 8 = 95 % ⇒ ratio 95 / 70 = 1.357, a scale-up.
    // Recount with both at 0 %: 7.6 / 10 = 76 % ⇒ 76 / 70 = 1.086 ≤ 1.1 ⇒ stay at 10.
    let d = h.sync(T0, &t);
    assert_eq!(d.desired, 10);
    assert_eq!(h.readings()[0].unwrap().current, 95.0);
}

#[test]
fn not_ready_cpu_pods_are_set_aside_and_count_as_zero_on_a_scale_up() {
    let mut h = hpa(vec![MetricSpec::cpu_utilization(50)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    t.clear(4);
    for _ in 0..3 {
        t.push_pod(
            PodStatus::ready(Nanos::ZERO, T0),
            &[ContainerSample::cpu(1.0, 1.0)],
        );
    }
    // Started 20 s ago, still initialising, burning CPU it will not keep.
    t.push_pod(
        PodStatus::starting(T0 - Nanos::from_secs(20), T0),
        &[ContainerSample::cpu(1.0, 1.0)],
    );
    // Ready pods: 100 % ⇒ ratio 2. The starting pod at 0 %: 3 / 4 = 75 %
    // ⇒ 1.5 ⇒ ceil(1.5 × 4) = 6 (not ceil(2 × 4) = 8).
    assert_eq!(h.sync(T0, &t).desired, 6);
}

#[test]
fn not_ready_pods_do_not_hold_up_a_cpu_scale_down() {
    let mut h = hpa(vec![MetricSpec::cpu_utilization(50)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    t.clear(4);
    for _ in 0..2 {
        t.push_pod(
            PodStatus::ready(Nanos::ZERO, T0),
            &[ContainerSample::cpu(0.1, 1.0)],
        );
    }
    for _ in 0..2 {
        t.push_pod(
            PodStatus::starting(T0 - Nanos::from_secs(20), T0),
            &[ContainerSample::cpu(0.9, 1.0)],
        );
    }
    // Set aside and not rebalanced on the way down: 10 % / 50 % = 0.2 over the
    // 2 ready pods ⇒ ceil(0.4) = 1.
    assert_eq!(h.sync(T0, &t).desired, 1);
}

#[test]
fn a_recount_that_reverses_direction_drops_the_action() {
    let mut h = hpa(vec![MetricSpec::cpu_utilization(50)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    t.clear(4);
    t.push_pod(
        PodStatus::ready(Nanos::ZERO, T0),
        &[ContainerSample::cpu(0.4, 1.0)],
    );
    for _ in 0..3 {
        t.push_pod(
            PodStatus::ready(Nanos::ZERO, T0).without_sample(),
            &[ContainerSample::cpu(0.0, 1.0)],
        );
    }
    // Measured 40 % ⇒ 0.8, a scale-down. Missing pods at 100 %:
    // (0.4 + 3.0) / 4 = 85 % ⇒ 1.7, which points up ⇒ do nothing.
    let d = h.sync(T0, &t);
    assert_eq!((d.recommendation, d.desired), (Some(4), 4));
}

#[test]
fn pending_pods_reverse_a_custom_metric_scale_up() {
    let mut h = hpa(vec![pods_metric("rps", 1.0)], 1, 100);
    let mut t = PodTable::with_capacity(16, 0, 1);
    t.clear(3);
    let p = t.push_pod(PodStatus::ready(Nanos::ZERO, T0), &[]);
    t.set_pod_metric(p, MetricId(0), 1.5);
    t.push_pod(PodStatus::pending(), &[]);
    t.push_pod(PodStatus::pending(), &[]);
    // Measured 1.5 ⇒ up. Pending pods at 0: 1.5 / 3 = 0.5 ⇒ reversed ⇒ keep 3.
    assert_eq!(h.sync(T0, &t).desired, 3);
}

// --- Errors in some metrics ---

#[test]
fn a_failing_metric_blocks_a_scale_down_but_not_a_scale_up() {
    let object = MetricSpec::Object {
        metric: "queue".into(),
        target: MetricTarget::Value { value: 100.0 },
    };
    let mut h = hpa(vec![MetricSpec::cpu_utilization(50), object], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 2);
    // CPU says 10 % / 50 % ⇒ ceil(0.8) = 1, but the queue metric is missing.
    uniform(&mut t, 4, 0.1, 1.0, T0);
    let d = h.sync(T0, &t);
    assert_eq!(d.reason, ScaleReason::MetricsUnavailable);
    assert_eq!(d.desired, 4);
    assert_eq!(h.readings()[1], Err(MetricError::ObjectMetricMissing));
    // CPU says 100 % / 50 % ⇒ 8: scaling up on what can be seen is safe.
    uniform(&mut t, 4, 1.0, 1.0, T0 + SYNC);
    let d = h.sync(T0 + SYNC, &t);
    assert_eq!((d.reason, d.desired), (ScaleReason::Metrics, 8));
}

// --- Replica bounds and the disabled state ---

#[test]
fn out_of_bounds_targets_are_brought_back_and_zero_means_paused() {
    let mut h = hpa(vec![MetricSpec::cpu_utilization(50)], 2, 10);
    let mut t = PodTable::with_capacity(32, 1, 1);
    uniform(&mut t, 12, 0.5, 1.0, T0);
    let d = h.sync(T0, &t);
    assert_eq!((d.desired, d.reason), (10, ScaleReason::AboveMaxReplicas));
    uniform(&mut t, 1, 0.5, 1.0, T0 + SYNC);
    let d = h.sync(T0 + SYNC, &t);
    assert_eq!((d.desired, d.reason), (2, ScaleReason::BelowMinReplicas));
    t.clear(0);
    let d = h.sync(T0 + 2 * SYNC, &t);
    assert_eq!((d.desired, d.reason), (0, ScaleReason::ScalingDisabled));
    assert!(!d.rescale());
}

// --- Scaling policies ---

/// An Object AverageValue metric of 10 against 1 per pod always recommends
/// ceil(10 / 1) = 10, whatever the current replica count.
fn recommend_ten(t: &mut PodTable, replicas: u32) {
    t.clear(replicas);
    t.set_status_replicas(replicas);
    t.set_object_metric(MetricId(0), Some(10.0));
}

fn scale_down_hpa(select: SelectPolicy, policies: Vec<ScalingPolicy>) -> Hpa {
    Hpa::new(&HpaConfig {
        max_replicas: 100,
        metrics: vec![MetricSpec::Object {
            metric: "work".into(),
            target: MetricTarget::AverageValue { average_value: 1.0 },
        }],
        behavior: Behavior {
            scale_up: ScalingRules::default(),
            scale_down: ScalingRules {
                select_policy: Some(select),
                policies: Some(policies),
                ..ScalingRules::default()
            },
        },
        ..HpaConfig::default()
    })
    .unwrap()
}

/// Drives the HPA every 15 s for `syncs` syncs, applying each decision.
fn run(h: &mut Hpa, mut replicas: u32, syncs: usize) -> Vec<(Nanos, ScaleDecision)> {
    let mut t = PodTable::with_capacity(1, 0, 1);
    let mut out = Vec::new();
    for i in 0..syncs {
        let now = T0 + SYNC * i as u64;
        recommend_ten(&mut t, replicas);
        let d = h.sync(now, &t);
        replicas = d.desired;
        out.push((now, d));
    }
    out
}

#[test]
fn scale_down_policies_pods_4_and_percent_10_per_minute_from_80() {
    // Docs: 80 replicas, target 10, policies Pods 4/60s and Percent 10/60s,
    // the larger change wins. Each minute:
    //   80 → 72 (10 % = 8 > 4)            72 → 64 (7.2 rounds the removal up to 8)
    //   64 → 57 (64 × 0.9 = 57.6 → 57)    57 → 51 (51.3)   51 → 45 (45.9)
    //   45 → 40 (40.5)                    40 → 36 (both 4)
    //   then Pods wins below 40: 32, 28, 24, 20, 16, 12, and 12 → 10 (the target).
    let mut h = scale_down_hpa(
        SelectPolicy::Max,
        vec![
            ScalingPolicy::pods(4, Nanos::from_secs(60)),
            ScalingPolicy::percent(10, Nanos::from_secs(60)),
        ],
    );
    let decisions = run(&mut h, 80, 60);
    let changes: Vec<u32> = decisions
        .iter()
        .filter(|(_, d)| d.rescale())
        .map(|(_, d)| d.desired)
        .collect();
    assert_eq!(
        changes,
        [72, 64, 57, 51, 45, 40, 36, 32, 28, 24, 20, 16, 12, 10]
    );
    // One step per 60 s period: changes land on whole minutes from T0.
    for (now, d) in &decisions {
        if d.rescale() {
            assert_eq!((*now - T0) % Nanos::MINUTE, Nanos::ZERO, "changed at {now}");
        } else if d.current > 10 {
            assert_eq!(d.limit, ScaleLimit::ScaleDownLimit);
        }
    }
}

#[test]
fn select_policy_min_removes_at_most_5_pods_per_minute() {
    // Docs: Percent 10/60s and Pods 5/60s with selectPolicy Min.
    // From 80: 10 % would remove 8, Pods 5 ⇒ the smaller change, 75.
    let mut h = scale_down_hpa(
        SelectPolicy::Min,
        vec![
            ScalingPolicy::percent(10, Nanos::from_secs(60)),
            ScalingPolicy::pods(5, Nanos::from_secs(60)),
        ],
    );
    let decisions = run(&mut h, 80, 9);
    let changes: Vec<u32> = decisions
        .iter()
        .filter(|(_, d)| d.rescale())
        .map(|(_, d)| d.desired)
        .collect();
    // Syncs at 0, 60 and 120 s: 80 → 75 → 70 → 65 (10 % of 70 is 7 > 5).
    assert_eq!(changes, [75, 70, 65]);
}

#[test]
fn select_policy_disabled_never_scales_down() {
    let mut h = scale_down_hpa(
        SelectPolicy::Disabled,
        vec![ScalingPolicy::pods(4, Nanos::from_secs(60))],
    );
    let decisions = run(&mut h, 80, 40);
    assert!(decisions.iter().all(|(_, d)| d.desired == 80));
}

#[test]
fn default_scale_up_doubles_or_adds_four_each_15s() {
    let mut h = hpa(vec![cpu_average_value(0.1)], 1, 50);
    let mut t = PodTable::with_capacity(64, 1, 1);
    let mut replicas = 1;
    let mut seen = Vec::new();
    for i in 0..6 {
        let now = T0 + i * SYNC;
        // Demand far above any reachable size: each pod at 100× its target.
        uniform(&mut t, replicas as usize, 10.0, 0.5, now);
        let d = h.sync(now, &t);
        replicas = d.desired;
        seen.push((d.desired, d.limit));
    }
    // 1 → max(2, 5) = 5 → max(10, 9) = 10 → 20 → 40 → 50 (max_replicas) → 50.
    assert_eq!(
        seen,
        [
            (5, ScaleLimit::ScaleUpLimit),
            (10, ScaleLimit::ScaleUpLimit),
            (20, ScaleLimit::ScaleUpLimit),
            (40, ScaleLimit::ScaleUpLimit),
            (50, ScaleLimit::TooManyReplicas),
            (50, ScaleLimit::TooManyReplicas),
        ]
    );
}

// --- Stabilization window ---

#[test]
fn scale_down_keeps_the_highest_recommendation_of_the_last_300s() {
    let mut h = hpa(vec![cpu_average_value(0.1)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    uniform(&mut t, 10, 0.1, 0.5, T0);
    // At target: recommendation 10.
    assert_eq!(h.sync(T0, &t).desired, 10);
    // Load collapses to 20 %: recommendation ceil(10 × 0.2) = 2, but the
    // window still holds the 10 from T0.
    let mut last = None;
    for i in 1..=20 {
        let now = T0 + i * SYNC;
        uniform(&mut t, 10, 0.02, 0.5, now);
        let d = h.sync(now, &t);
        assert_eq!(d.recommendation, Some(2));
        last = Some((now, d));
        if i < 20 {
            assert_eq!(d.desired, 10, "at +{} s", i * 15);
            assert_eq!(d.stabilization, Stabilization::ScaleDownStabilized);
        }
    }
    // At T0 + 300 s the recommendation of T0 is exactly one window old and drops out.
    let (now, d) = last.unwrap();
    assert_eq!(now - T0, Nanos::from_secs(300));
    assert_eq!(d.desired, 2);
}

#[test]
fn a_brief_dip_does_not_remove_pods() {
    let mut h = hpa(vec![cpu_average_value(0.1)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    for i in 0..40 {
        let now = T0 + i * SYNC;
        // One sync in ten sees a dip to half the target.
        let usage = if i % 10 == 5 { 0.05 } else { 0.1 };
        uniform(&mut t, 8, usage, 0.5, now);
        assert_eq!(h.sync(now, &t).desired, 8);
    }
}

// --- Sync cadence ---

#[test]
fn poll_syncs_once_per_period() {
    let mut h = hpa(vec![cpu_average_value(0.1)], 1, 100);
    let mut t = PodTable::with_capacity(16, 1, 1);
    uniform(&mut t, 4, 0.1, 0.5, T0);
    let mut syncs = 0;
    // A caller ticking every second for a minute gets 4 syncs: 0, 15, 30, 45 s.
    for s in 0..60 {
        if h.poll(T0 + Nanos::from_secs(s), &t).is_some() {
            syncs += 1;
        }
    }
    assert_eq!(syncs, 4);
    assert_eq!(h.next_sync(), T0 + Nanos::from_secs(60));
    // A late call keeps the 15 s grid.
    assert!(h.poll(T0 + Nanos::from_secs(67), &t).is_some());
    assert_eq!(h.next_sync(), T0 + Nanos::from_secs(75));
}

// --- The blind spot of 2026-08-17 ---

const APP: usize = 0;
const SIDECAR: usize = 1;

/// `n` pods whose `istio-proxy` sidecar sits at its concurrency limit
/// (in-flight / limit = 1.0). The app behind it is starved: it gets few
/// requests, so it burns 0.15 of its 1-core request; the sidecar burns 0.09
/// of its 0.1-core request.
fn saturated_sidecar_pods(t: &mut PodTable, n: u32, now: Nanos) {
    t.clear(n);
    for _ in 0..n {
        let mut containers = [ContainerSample::default(); 2];
        containers[APP] = ContainerSample::cpu(0.15, 1.0);
        containers[SIDECAR] = ContainerSample::cpu(0.09, 0.1);
        let p = t.push_pod(PodStatus::ready(Nanos::ZERO, now), &containers);
        // Slot 1 carries the sidecar saturation in the two-metric config.
        t.set_pod_metric(p, MetricId(0), 1.0);
        t.set_pod_metric(p, MetricId(1), 1.0);
    }
}

fn container_cpu(container: &str, percent: u32) -> MetricSpec {
    MetricSpec::ContainerResource {
        name: ResourceName::Cpu,
        container: container.into(),
        target: MetricTarget::Utilization {
            average_utilization: percent,
        },
    }
}

#[test]
fn blind_spot_app_container_cpu_does_not_scale_a_saturated_sidecar() {
    let mut h = hpa(vec![container_cpu("app", 60)], 2, 50);
    let mut t = PodTable::with_capacity(64, 2, 2);
    let mut replicas = 10;
    for i in 0..40 {
        let now = T0 + i * SYNC;
        saturated_sidecar_pods(&mut t, replicas, now);
        let d = h.sync(now, &t);
        // App CPU 15 % vs 60 % ⇒ ratio 0.25: it wants FEWER pods
        // (ceil(10 × 0.25) = 3 at first, ceil(3 × 0.25) = 1 later).
        assert!(d.recommendation.unwrap() < replicas);
        assert!(d.desired <= replicas, "app CPU never scales up");
        replicas = d.desired;
    }
    // Worse, it removes pods from the bottleneck: 10 → 3 at once (a new
    // HPA has no earlier recommendation to hold it), then after the 300 s
    // window down to min_replicas.
    assert_eq!(replicas, 2);
}

#[test]
fn blind_spot_pod_level_cpu_hides_the_hot_sidecar_behind_the_app() {
    let mut h = hpa(vec![MetricSpec::cpu_utilization(60)], 2, 50);
    let mut t = PodTable::with_capacity(64, 2, 2);
    saturated_sidecar_pods(&mut t, 10, T0);
    // Sidecar CPU alone is 90 % of its request, but the pod sums
    // (0.15 + 0.09) / (1.0 + 0.1) = 21.8 % ⇒ 21 % vs 60 % ⇒ ceil(10 × 0.35) = 4.
    let d = h.sync(T0, &t);
    assert_eq!(h.readings()[0].unwrap().current, 21.0);
    assert_eq!(d.recommendation, Some(4));
    assert!(d.desired <= 10);
}

#[test]
fn blind_spot_sidecar_container_cpu_sees_only_cpu_not_concurrency() {
    // Even watching the sidecar's CPU: 90 % vs a 100 % target is inside the
    // tolerance, and a concurrency limit caps in-flight work, not CPU.
    let mut h = hpa(vec![container_cpu("istio-proxy", 100)], 2, 50);
    let mut t = PodTable::with_capacity(64, 2, 2);
    saturated_sidecar_pods(&mut t, 10, T0);
    assert_eq!(h.sync(T0, &t).desired, 10);
}

#[test]
fn sidecar_saturation_metric_scales_the_real_bottleneck() {
    let mut h = hpa(vec![pods_metric("sidecar_saturation", 0.8)], 2, 50);
    let mut t = PodTable::with_capacity(64, 2, 2);
    saturated_sidecar_pods(&mut t, 10, T0);
    // in-flight / limit = 1.0 vs 0.8 ⇒ ratio 1.25 ⇒ ceil(10 × 1.25) = 13.
    let d = h.sync(T0, &t);
    assert_eq!((d.desired, d.reason), (13, ScaleReason::Metrics));
}

#[test]
fn watching_both_app_cpu_and_sidecar_saturation_scales_on_the_worse_one() {
    let mut h = hpa(
        vec![
            container_cpu("app", 60),
            pods_metric("sidecar_saturation", 0.8),
        ],
        2,
        50,
    );
    let mut t = PodTable::with_capacity(64, 2, 2);
    saturated_sidecar_pods(&mut t, 10, T0);
    // app CPU ⇒ 3, sidecar saturation ⇒ 13; the maximum wins.
    let d = h.sync(T0, &t);
    assert_eq!(d.desired, 13);
    assert_eq!(d.metric, Some(MetricId(1)));
}

#[test]
fn a_sidecar_hpa_from_a_config_file() {
    let config: HpaConfig = serde_json::from_str(
        r#"{
            "min_replicas": 2,
            "max_replicas": 50,
            "pod_containers": ["app", "istio-proxy"],
            "metrics": [
                {"type": "ContainerResource", "name": "cpu", "container": "app",
                 "target": {"type": "Utilization", "average_utilization": 60}},
                {"type": "Pods", "metric": "sidecar_saturation",
                 "target": {"type": "AverageValue", "average_value": 0.8}}
            ]
        }"#,
    )
    .unwrap();
    assert_eq!(config.container_index("istio-proxy"), Some(SIDECAR));
    let mut h = Hpa::new(&config).unwrap();
    let mut t = PodTable::with_capacity(64, 2, 2);
    saturated_sidecar_pods(&mut t, 10, T0);
    assert_eq!(h.sync(T0, &t).desired, 13);
}

#[test]
fn invalid_configs_are_refused_by_the_constructor() {
    let err = Hpa::new(&HpaConfig {
        max_replicas: 0,
        ..HpaConfig::default()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "autoscale: max_replicas must be ≥ 1, got 0"
    );
    assert_eq!(err.field(), "max_replicas");
}
