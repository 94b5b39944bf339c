//! An HPA sync — refilling the pod table and deciding — allocates nothing
//! after construction.

use stormbreak_policy::Nanos;
use stormbreak_policy::autoscale::{
    ContainerSample, Hpa, HpaConfig, MetricId, MetricSpec, MetricTarget, PodStatus, PodTable,
    ResourceName, ScalingPolicy, ScalingRules,
};

use crate::common::allocations_during;

const PODS: usize = 100;
const SYNCS: u64 = 10_000;

/// Every metric source and target kind, and long histories (a 1 h
/// stabilization window and 30 min policy periods) so the rings wrap.
fn config() -> HpaConfig {
    HpaConfig {
        min_replicas: 2,
        max_replicas: 200,
        pod_containers: vec!["app".into(), "istio-proxy".into()],
        metrics: vec![
            MetricSpec::cpu_utilization(60),
            MetricSpec::ContainerResource {
                name: ResourceName::Cpu,
                container: "app".into(),
                target: MetricTarget::Utilization {
                    average_utilization: 60,
                },
            },
            MetricSpec::ContainerResource {
                name: ResourceName::Memory,
                container: "istio-proxy".into(),
                target: MetricTarget::AverageValue {
                    average_value: 64.0,
                },
            },
            MetricSpec::Pods {
                metric: "sidecar_saturation".into(),
                target: MetricTarget::AverageValue { average_value: 0.8 },
            },
            MetricSpec::Object {
                metric: "queue".into(),
                target: MetricTarget::Value { value: 500.0 },
            },
            MetricSpec::Object {
                metric: "queue_per_pod".into(),
                target: MetricTarget::AverageValue { average_value: 5.0 },
            },
        ],
        behavior: stormbreak_policy::autoscale::Behavior {
            scale_up: ScalingRules {
                stabilization_window: Some(Nanos::from_secs(60)),
                policies: Some(vec![
                    ScalingPolicy::pods(4, 30 * Nanos::MINUTE),
                    ScalingPolicy::percent(50, Nanos::from_secs(60)),
                ]),
                ..ScalingRules::default()
            },
            scale_down: ScalingRules {
                stabilization_window: Some(60 * Nanos::MINUTE),
                ..ScalingRules::default()
            },
        },
        ..HpaConfig::default()
    }
}

/// One sync's view: load swings with `i` so every path (up, down, within
/// tolerance, missing and initialising pods) is exercised.
fn fill(table: &mut PodTable, replicas: u32, i: u64, now: Nanos) {
    table.clear(replicas);
    let load = 0.2 + 0.8 * (((i / 40) % 5) as f64 / 4.0);
    for p in 0..(replicas as usize).min(PODS) {
        let status = match p % 17 {
            0 => PodStatus::starting(now.saturating_sub(Nanos::from_secs(20)), now),
            1 => PodStatus::ready(Nanos::ZERO, now).without_sample(),
            2 => PodStatus::pending(),
            _ => PodStatus::ready(Nanos::ZERO, now),
        };
        let mut app = ContainerSample::cpu(load, 1.0);
        app.memory_usage = 200.0;
        app.memory_request = 256.0;
        let mut sidecar = ContainerSample::cpu(0.05, 0.1);
        sidecar.memory_usage = 40.0 + 40.0 * load;
        sidecar.memory_request = 128.0;
        let idx = table.push_pod(status, &[app, sidecar]);
        table.set_pod_metric(idx, MetricId(3), load);
    }
    table.set_object_metric(MetricId(4), Some(400.0 * load));
    table.set_object_metric(MetricId(5), Some(600.0 * load));
}

#[test]
fn ten_thousand_syncs_allocate_nothing() {
    let config = config();
    let metric_count = config.metrics.len();
    let mut hpa = Hpa::new(&config).unwrap();
    let mut table = PodTable::with_capacity(PODS, 2, metric_count);
    let mut replicas = 10u32;
    let mut changes = 0u32;
    let allocations = allocations_during(|| {
        for i in 0..SYNCS {
            let now = 60 * Nanos::MINUTE + i * Nanos::from_secs(15);
            fill(&mut table, replicas, i, now);
            let d = hpa.sync(now, &table);
            if d.rescale() {
                changes += 1;
            }
            replicas = d.desired.min(PODS as u32);
        }
    });
    assert_eq!(allocations, 0);
    // The run did scale both ways, so the event rings were written and wrapped.
    assert!(changes > 20, "only {changes} rescales");
}

#[test]
fn the_counter_sees_allocations() {
    // Guards against a counter that never counts.
    let n = allocations_during(|| {
        let v: Vec<u64> = Vec::with_capacity(16);
        std::hint::black_box(v);
    });
    assert_eq!(n, 1);
}
