//! Cost of one HPA sync over 100 pods × 2 containers (app + istio-proxy),
//! and of refilling the pod table the sync reads.
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use stormbreak_policy::Nanos;
use stormbreak_policy::autoscale::{
    ContainerSample, Hpa, HpaConfig, MetricId, MetricSpec, MetricTarget, PodStatus, PodTable,
    ResourceName,
};

const PODS: usize = 100;
const T0: Nanos = Nanos::HOUR;

fn config(metrics: Vec<MetricSpec>) -> HpaConfig {
    HpaConfig {
        min_replicas: 2,
        max_replicas: 200,
        pod_containers: vec!["app".into(), "istio-proxy".into()],
        metrics,
        ..HpaConfig::default()
    }
}

fn app_cpu() -> MetricSpec {
    MetricSpec::ContainerResource {
        name: ResourceName::Cpu,
        container: "app".into(),
        target: MetricTarget::Utilization {
            average_utilization: 60,
        },
    }
}

fn saturation() -> MetricSpec {
    MetricSpec::Pods {
        metric: "sidecar_saturation".into(),
        target: MetricTarget::AverageValue { average_value: 0.8 },
    }
}

/// 100 ready pods near target (so every sync runs the full algorithm and
/// records a recommendation), with the saturation metric in slots 0 and 1.
fn fill(table: &mut PodTable, now: Nanos) {
    table.clear(PODS as u32);
    for p in 0..PODS {
        let load = 0.55 + 0.1 * (p % 3) as f64;
        let containers = [
            ContainerSample::cpu(load, 1.0),
            ContainerSample::cpu(0.05, 0.1),
        ];
        let idx = table.push_pod(PodStatus::ready(Nanos::ZERO, now), &containers);
        table.set_pod_metric(idx, MetricId(0), 0.8);
        table.set_pod_metric(idx, MetricId(1), 0.8);
    }
}

fn bench_sync(c: &mut Criterion, name: &str, metrics: Vec<MetricSpec>) {
    let slots = metrics.len();
    let mut hpa = Hpa::new(&config(metrics)).unwrap();
    let mut table = PodTable::with_capacity(PODS, 2, slots.max(2));
    fill(&mut table, T0);
    let mut now = T0;
    c.bench_function(name, |b| {
        b.iter(|| {
            now += Nanos::from_secs(15);
            black_box(hpa.sync(black_box(now), black_box(&table)))
        })
    });
}

fn autoscale(c: &mut Criterion) {
    bench_sync(
        c,
        "autoscale/hpa/sync 100 pods x 2 containers, Resource cpu",
        vec![MetricSpec::cpu_utilization(60)],
    );
    bench_sync(
        c,
        "autoscale/hpa/sync 100 pods x 2 containers, ContainerResource app + Pods saturation",
        vec![app_cpu(), saturation()],
    );
    let mut table = PodTable::with_capacity(PODS, 2, 2);
    c.bench_function("autoscale/pod_table/fill 100 pods x 2 containers", |b| {
        b.iter(|| fill(black_box(&mut table), black_box(T0)))
    });
}

criterion_group!(benches, autoscale);
criterion_main!(benches);
