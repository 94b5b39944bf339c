//! The replica calculator: one metric's recommendation at one sync.
//!
//! Follows `pkg/controller/podautoscaler/replica_calculator.go`
//! (`GetResourceReplicas`, `calcPlainMetricReplicas`, `GetObjectMetricReplicas`,
//! `GetObjectPerPodMetricReplicas`, `groupPods`, `calculateRequests`). Where
//! the controller builds maps of pod names, this keeps running sums in one
//! pass over the pods, so a sync allocates nothing: every later step of the
//! algorithm only needs totals and counts per pod class.

use super::config::ResourceName;
use super::view::{MetricId, MetricSample, MetricsView, PodPhase, PodStatus};
use crate::Nanos;
use std::fmt;

/// What one metric reported at the last sync.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricReading {
    /// Replicas this metric alone recommends.
    pub replicas: u32,
    /// The value the HPA status would show, before any readiness or
    /// missing-metric adjustment: whole-percent utilisation for `Utilization`
    /// targets, the per-pod mean for `AverageValue`, the object's value for
    /// `Value`.
    pub current: f64,
}

/// Why a metric could not produce a recommendation this sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricError {
    /// No sync has run yet.
    NotSynced,
    /// The selector matched no pods.
    NoPods,
    /// No pod that counts had a value (all missing, pending or unready).
    NoMetrics,
    /// Pod `pod` has a container without a request for the resource, so
    /// utilisation is undefined.
    MissingRequest {
        /// Index of the pod in the view.
        pod: usize,
    },
    /// Pod `pod` lacks the container a `ContainerResource` metric names.
    ContainerNotFound {
        /// Index of the pod in the view.
        pod: usize,
    },
    /// The `Object` metric had no value.
    ObjectMetricMissing,
}

impl fmt::Display for MetricError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricError::NotSynced => write!(f, "no sync has run yet"),
            MetricError::NoPods => {
                write!(
                    f,
                    "no pods returned by selector while calculating replica count"
                )
            }
            MetricError::NoMetrics => write!(
                f,
                "did not receive metrics for targeted pods (pods might be unready)"
            ),
            MetricError::MissingRequest { pod } => {
                write!(f, "missing resource request in a container of pod {pod}")
            }
            MetricError::ContainerNotFound { pod } => {
                write!(f, "container not found in pod {pod}")
            }
            MetricError::ObjectMetricMissing => write!(f, "object metric has no value"),
        }
    }
}

impl std::error::Error for MetricError {}

/// The dead band around a usage ratio of 1, per direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Tolerances {
    pub(crate) down: f64,
    pub(crate) up: f64,
}

impl Tolerances {
    /// `1 − down ≤ ratio ≤ 1 + up`: too small a change to act on.
    pub(crate) fn within(&self, ratio: f64) -> bool {
        1.0 - self.down <= ratio && ratio <= 1.0 + self.up
    }
}

/// The controller flags deciding when a CPU sample is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Readiness {
    pub(crate) cpu_initialization_period: Nanos,
    pub(crate) initial_readiness_delay: Nanos,
}

/// A metric spec resolved for the per-sync path (names turned into indices).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Source {
    /// `Resource` (container `None`) or `ContainerResource`.
    Resource {
        resource: ResourceName,
        container: Option<usize>,
        target: ResourceTarget,
    },
    /// `Pods` with an `AverageValue` target.
    Pods { average_value: f64 },
    /// `Object` with a `Value` target.
    ObjectValue { value: f64 },
    /// `Object` with an `AverageValue` target.
    ObjectAverageValue { average_value: f64 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ResourceTarget {
    Utilization(u32),
    AverageValue(f64),
}

/// Everything a calculation needs besides the view.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SyncInputs {
    pub(crate) now: Nanos,
    pub(crate) spec_replicas: u32,
    pub(crate) tolerances: Tolerances,
    pub(crate) readiness: Readiness,
}

/// Recommends replicas for one metric.
pub(crate) fn recommend<V: MetricsView + ?Sized>(
    source: &Source,
    id: MetricId,
    view: &V,
    inputs: &SyncInputs,
) -> Result<MetricReading, MetricError> {
    match *source {
        Source::Resource {
            resource,
            container,
            target: ResourceTarget::Utilization(percent),
        } => utilization(view, inputs, resource, container, percent),
        Source::Resource {
            resource,
            container,
            target: ResourceTarget::AverageValue(average_value),
        } => {
            let cpu = resource == ResourceName::Cpu;
            plain(view, inputs, average_value, cpu, |p| {
                pod_usage(view, p, resource, container)
            })
        }
        Source::Pods { average_value } => plain(view, inputs, average_value, false, |p| {
            view.pod_metric(p, id)
        }),
        Source::ObjectValue { value } => object_value(view, inputs, id, value),
        Source::ObjectAverageValue { average_value } => {
            object_average_value(view, inputs, id, average_value)
        }
    }
}

/// `groupPods`: how a pod takes part in the average.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodClass {
    /// Being deleted or failed: left out entirely.
    Ignored,
    /// Pending, or (CPU only) not ready / sampled before it was ready:
    /// counted as 0 % only on a scale-up.
    Unready,
    /// No value: 0 % on a scale-up, 100 % on a scale-down.
    Missing,
    /// Counted as measured.
    Ready,
}

fn classify(status: &PodStatus, has_value: bool, cpu: bool, now: Nanos, r: &Readiness) -> PodClass {
    if status.deleting || status.phase == PodPhase::Failed {
        return PodClass::Ignored;
    }
    if status.phase == PodPhase::Pending {
        return PodClass::Unready;
    }
    if !has_value {
        return PodClass::Missing;
    }
    if cpu
        && let Some(sample) = status.resource_sample
        && cpu_sample_untrusted(status, sample, now, r)
    {
        return PodClass::Unready;
    }
    PodClass::Ready
}

/// CPU burns hot while a pod initialises (JIT, caches), so its samples are
/// distrusted until the pod is ready and a full window was measured since.
fn cpu_sample_untrusted(s: &PodStatus, sample: MetricSample, now: Nanos, r: &Readiness) -> bool {
    let Some(started) = s.started_at else {
        return true;
    };
    if started.saturating_add(r.cpu_initialization_period) > now {
        !s.ready || sample.at < s.ready_changed_at.saturating_add(sample.window)
    } else {
        // Past initialisation only a pod that has never been ready is set
        // aside: unready, with its last transition soon after start.
        !s.ready && started.saturating_add(r.initial_readiness_delay) > s.ready_changed_at
    }
}

/// Usage summed over all containers (`container` `None`) or of one container;
/// `None` when metrics-server has no sample or the container is absent.
fn pod_usage<V: MetricsView + ?Sized>(
    view: &V,
    pod: usize,
    resource: ResourceName,
    container: Option<usize>,
) -> Option<f64> {
    view.pod(pod).resource_sample?;
    match container {
        Some(c) if c < view.container_count(pod) => Some(view.container(pod, c).usage(resource)),
        Some(_) => None,
        None => Some(
            (0..view.container_count(pod))
                .map(|c| view.container(pod, c).usage(resource))
                .sum(),
        ),
    }
}

/// `calculateRequests`: the pod's request, summed like its usage.
fn pod_request<V: MetricsView + ?Sized>(
    view: &V,
    pod: usize,
    resource: ResourceName,
    container: Option<usize>,
) -> Result<f64, MetricError> {
    let missing = MetricError::MissingRequest { pod };
    match container {
        Some(c) if c < view.container_count(pod) => {
            view.container(pod, c).request(resource).ok_or(missing)
        }
        Some(_) => Err(MetricError::ContainerNotFound { pod }),
        None => {
            let mut total = 0.0;
            for c in 0..view.container_count(pod) {
                total += view.container(pod, c).request(resource).ok_or(missing)?;
            }
            if total > 0.0 { Ok(total) } else { Err(missing) }
        }
    }
}

/// `GetResourceUtilizationRatio` keeps utilisation as a whole percent
/// (`int32(usage*100/requests)`), which decides cases at the tolerance edge;
/// the nudge absorbs binary rounding of exact decimal inputs.
fn whole_percent(usage: f64, request: f64) -> f64 {
    let p = usage * 100.0 / request;
    (p + 1e-9 * p.abs().max(1.0)).floor()
}

/// `ceil` into a replica count the way the controller's int32 conversion
/// would, saturating instead of wrapping.
pub(crate) fn ceil_replicas(x: f64) -> u32 {
    if x.is_nan() || x <= 0.0 {
        0
    } else {
        x.ceil().min(i32::MAX as f64) as u32
    }
}

/// Running totals of one pod class.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    pods: u32,
    usage: f64,
    request: f64,
}

impl Tally {
    fn add(&mut self, usage: f64, request: f64) {
        self.pods += 1;
        self.usage += usage;
        self.request += request;
    }
}

/// `GetResourceReplicas`: utilisation = Σ usage / Σ requests over the counted
/// pods, then the missing / not-yet-ready corrections.
fn utilization<V: MetricsView + ?Sized>(
    view: &V,
    inputs: &SyncInputs,
    resource: ResourceName,
    container: Option<usize>,
    target_percent: u32,
) -> Result<MetricReading, MetricError> {
    let pods = view.pod_count();
    if pods == 0 {
        return Err(MetricError::NoPods);
    }
    let cpu = resource == ResourceName::Cpu;
    let (mut ready, mut missing, mut unready) =
        (Tally::default(), Tally::default(), Tally::default());
    for p in 0..pods {
        // The controller sums requests over every listed pod, even ignored ones.
        let request = pod_request(view, p, resource, container)?;
        let status = view.pod(p);
        let usage = pod_usage(view, p, resource, container);
        match (
            classify(&status, usage.is_some(), cpu, inputs.now, &inputs.readiness),
            usage,
        ) {
            (PodClass::Ready, Some(u)) => ready.add(u, request),
            (PodClass::Missing, _) => missing.add(0.0, request),
            (PodClass::Unready, _) => unready.add(0.0, request),
            _ => {}
        }
    }
    if ready.pods == 0 {
        return Err(MetricError::NoMetrics);
    }
    let target = f64::from(target_percent);
    let percent = whole_percent(ready.usage, ready.request);
    let ratio = percent / target;
    let current = inputs.spec_replicas;
    let reading = |replicas| {
        Ok(MetricReading {
            replicas,
            current: percent,
        })
    };
    let scale_up_with_unready = unready.pods > 0 && ratio > 1.0;
    if !scale_up_with_unready && missing.pods == 0 {
        if inputs.tolerances.within(ratio) {
            return reading(current);
        }
        return reading(ceil_replicas(ratio * f64::from(ready.pods)));
    }
    let mut counted = ready;
    if missing.pods > 0 {
        if ratio < 1.0 {
            // Assume the silent pods use their whole request (or the target,
            // if that is above 100 %): a scale-down must not rely on them.
            let fallback = target.max(100.0) / 100.0;
            counted.pods += missing.pods;
            counted.usage += missing.request * fallback;
            counted.request += missing.request;
        } else if ratio > 1.0 {
            counted.pods += missing.pods;
            counted.request += missing.request;
        }
    }
    if scale_up_with_unready {
        counted.pods += unready.pods;
        counted.request += unready.request;
    }
    let new_ratio = whole_percent(counted.usage, counted.request) / target;
    reading(settle(
        ratio,
        new_ratio,
        counted.pods,
        current,
        inputs.tolerances,
    ))
}

/// `calcPlainMetricReplicas`: the mean per-pod value against an average target.
fn plain<V: MetricsView + ?Sized>(
    view: &V,
    inputs: &SyncInputs,
    target: f64,
    cpu: bool,
    value_of: impl Fn(usize) -> Option<f64>,
) -> Result<MetricReading, MetricError> {
    let pods = view.pod_count();
    if pods == 0 {
        return Err(MetricError::NoPods);
    }
    let (mut ready, mut missing, mut unready) = (Tally::default(), 0u32, 0u32);
    for p in 0..pods {
        let status = view.pod(p);
        let value = value_of(p);
        match (
            classify(&status, value.is_some(), cpu, inputs.now, &inputs.readiness),
            value,
        ) {
            (PodClass::Ready, Some(v)) => ready.add(v, 0.0),
            (PodClass::Missing, _) => missing += 1,
            (PodClass::Unready, _) => unready += 1,
            _ => {}
        }
    }
    if ready.pods == 0 {
        return Err(MetricError::NoMetrics);
    }
    let average = ready.usage / f64::from(ready.pods);
    let ratio = average / target;
    let current = inputs.spec_replicas;
    let reading = |replicas| {
        Ok(MetricReading {
            replicas,
            current: average,
        })
    };
    let scale_up_with_unready = unready > 0 && ratio > 1.0;
    if !scale_up_with_unready && missing == 0 {
        if inputs.tolerances.within(ratio) {
            return reading(current);
        }
        return reading(ceil_replicas(ratio * f64::from(ready.pods)));
    }
    let (mut total, mut counted) = (ready.usage, ready.pods);
    if missing > 0 {
        if ratio < 1.0 {
            // Silent pods are assumed exactly on target on the way down.
            total += f64::from(missing) * target;
            counted += missing;
        } else if ratio > 1.0 {
            counted += missing;
        }
    }
    if scale_up_with_unready {
        counted += unready;
    }
    let new_ratio = total / f64::from(counted) / target;
    reading(settle(
        ratio,
        new_ratio,
        counted,
        current,
        inputs.tolerances,
    ))
}

/// After the conservative recount: act only if the change is still outside
/// the tolerance and still points the same way as the measured ratio.
fn settle(ratio: f64, new_ratio: f64, counted: u32, current: u32, tolerances: Tolerances) -> u32 {
    let reversed = (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0);
    if tolerances.within(new_ratio) || reversed {
        return current;
    }
    let replicas = ceil_replicas(new_ratio * f64::from(counted));
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return current;
    }
    replicas
}

/// `GetObjectMetricReplicas`: value / target scales the ready pods; from zero
/// replicas, `ceil(ratio)` (scale from zero).
fn object_value<V: MetricsView + ?Sized>(
    view: &V,
    inputs: &SyncInputs,
    id: MetricId,
    target: f64,
) -> Result<MetricReading, MetricError> {
    let value = view
        .object_metric(id)
        .ok_or(MetricError::ObjectMetricMissing)?;
    let ratio = value / target;
    let current = inputs.spec_replicas;
    let replicas = if current == 0 {
        ceil_replicas(ratio)
    } else if inputs.tolerances.within(ratio) {
        current
    } else {
        let pods = view.pod_count();
        if pods == 0 {
            return Err(MetricError::NoPods);
        }
        let ready = (0..pods)
            .filter(|&p| {
                let s = view.pod(p);
                s.phase == PodPhase::Running && s.ready
            })
            .count();
        ceil_replicas(ratio * ready as f64)
    };
    Ok(MetricReading {
        replicas,
        current: value,
    })
}

/// `GetObjectPerPodMetricReplicas`: `ceil(value / target)` when
/// value / (target × status replicas) leaves the tolerance.
fn object_average_value<V: MetricsView + ?Sized>(
    view: &V,
    inputs: &SyncInputs,
    id: MetricId,
    target: f64,
) -> Result<MetricReading, MetricError> {
    let value = view
        .object_metric(id)
        .ok_or(MetricError::ObjectMetricMissing)?;
    let status = view.status_replicas();
    let ratio = value / (target * f64::from(status));
    let replicas = if inputs.tolerances.within(ratio) {
        status
    } else {
        ceil_replicas(value / target)
    };
    let current = if status == 0 {
        value
    } else {
        value / f64::from(status)
    };
    Ok(MetricReading { replicas, current })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use crate::autoscale::view::{ContainerSample, PodTable};

    const TOLERANCE: Tolerances = Tolerances { down: 0.1, up: 0.1 };
    const READINESS: Readiness = Readiness {
        cpu_initialization_period: Nanos::from_secs(5 * 60),
        initial_readiness_delay: Nanos::from_secs(30),
    };
    const NOW: Nanos = Nanos::HOUR;

    fn inputs(spec: u32) -> SyncInputs {
        SyncInputs {
            now: NOW,
            spec_replicas: spec,
            tolerances: TOLERANCE,
            readiness: READINESS,
        }
    }

    fn cpu_util(percent: u32) -> Source {
        Source::Resource {
            resource: ResourceName::Cpu,
            container: None,
            target: ResourceTarget::Utilization(percent),
        }
    }

    fn old_ready() -> PodStatus {
        PodStatus::ready(Nanos::ZERO, NOW)
    }

    #[test]
    fn whole_percent_truncates_like_int_division() {
        // (7600 * 100) / 8000 = 95 exactly; (1105 * 100) / 1000 = 110 (110.5 truncated).
        assert_eq!(whole_percent(7.6, 8.0), 95.0);
        assert_eq!(whole_percent(1.105, 1.0), 110.0);
        // 0.2 * 100 / 0.1 is 199.99999999999997 in binary; the controller's
        // integer millicores give exactly 200.
        assert_eq!(whole_percent(0.2, 0.1), 200.0);
    }

    #[test]
    fn tolerance_band_is_inclusive_on_both_edges() {
        assert!(TOLERANCE.within(0.9));
        assert!(TOLERANCE.within(1.1));
        assert!(!TOLERANCE.within(0.89));
        assert!(!TOLERANCE.within(1.11));
    }

    #[test]
    fn missing_requests_make_utilization_undefined() {
        let mut t = PodTable::with_capacity(4, 2, 1);
        t.clear(2);
        t.push_pod(old_ready(), &[ContainerSample::cpu(0.5, 1.0)]);
        t.push_pod(
            old_ready(),
            &[
                ContainerSample::cpu(0.5, 1.0),
                ContainerSample::cpu(0.1, 0.0),
            ],
        );
        assert_eq!(
            recommend(&cpu_util(50), MetricId(0), &t, &inputs(2)),
            Err(MetricError::MissingRequest { pod: 1 })
        );
    }

    #[test]
    fn container_resource_on_a_pod_without_that_container_is_an_error() {
        let mut t = PodTable::with_capacity(4, 2, 1);
        t.clear(2);
        t.push_pod(
            old_ready(),
            &[
                ContainerSample::cpu(0.5, 1.0),
                ContainerSample::cpu(0.1, 0.1),
            ],
        );
        t.push_pod(old_ready(), &[ContainerSample::cpu(0.5, 1.0)]);
        let source = Source::Resource {
            resource: ResourceName::Cpu,
            container: Some(1),
            target: ResourceTarget::Utilization(50),
        };
        assert_eq!(
            recommend(&source, MetricId(0), &t, &inputs(2)),
            Err(MetricError::ContainerNotFound { pod: 1 })
        );
    }

    #[test]
    fn no_pods_and_no_metrics_are_errors() {
        let mut t = PodTable::with_capacity(4, 1, 1);
        t.clear(1);
        assert_eq!(
            recommend(&cpu_util(50), MetricId(0), &t, &inputs(1)),
            Err(MetricError::NoPods)
        );
        t.push_pod(PodStatus::pending(), &[ContainerSample::cpu(0.0, 1.0)]);
        assert_eq!(
            recommend(&cpu_util(50), MetricId(0), &t, &inputs(1)),
            Err(MetricError::NoMetrics)
        );
    }

    #[test]
    fn deleted_and_failed_pods_are_left_out() {
        let mut t = PodTable::with_capacity(4, 1, 1);
        t.clear(2);
        t.push_pod(old_ready(), &[ContainerSample::cpu(1.0, 1.0)]);
        t.push_pod(old_ready(), &[ContainerSample::cpu(1.0, 1.0)]);
        // A terminating pod idling at 0 % and a failed one would drag the mean down.
        t.push_pod(old_ready().deleting(), &[ContainerSample::cpu(0.0, 1.0)]);
        let mut failed = old_ready();
        failed.phase = PodPhase::Failed;
        t.push_pod(failed, &[ContainerSample::cpu(0.0, 1.0)]);
        // 100 % / 50 % = 2.0 over 2 counted pods ⇒ 4.
        let r = recommend(&cpu_util(50), MetricId(0), &t, &inputs(2)).unwrap();
        assert_eq!(
            r,
            MetricReading {
                replicas: 4,
                current: 100.0
            }
        );
    }

    #[test]
    fn cpu_samples_of_initialising_pods_are_set_aside_but_custom_metrics_are_not() {
        // Started 60 s ago (inside the 5 min CPU initialisation period) and
        // not ready: its hot CPU is start-up noise.
        let started = NOW - Nanos::from_secs(60);
        let mut t = PodTable::with_capacity(4, 1, 1);
        t.clear(2);
        let p = t.push_pod(old_ready(), &[ContainerSample::cpu(0.5, 1.0)]);
        t.set_pod_metric(p, MetricId(0), 1.0);
        let p = t.push_pod(
            PodStatus::starting(started, NOW),
            &[ContainerSample::cpu(1.0, 1.0)],
        );
        t.set_pod_metric(p, MetricId(0), 1.0);
        // CPU: only pod 0 counts: 50 % vs 50 % ⇒ ratio 1 ⇒ keep 2.
        let r = recommend(&cpu_util(50), MetricId(0), &t, &inputs(2)).unwrap();
        assert_eq!(r.replicas, 2);
        assert_eq!(r.current, 50.0);
        // Pods metric: readiness is not consulted, mean 1.0 vs 0.5 ⇒ ceil(2 × 2) = 4.
        let pods = Source::Pods { average_value: 0.5 };
        assert_eq!(
            recommend(&pods, MetricId(0), &t, &inputs(2))
                .unwrap()
                .replicas,
            4
        );
    }

    #[test]
    fn a_ready_pod_sampled_before_a_full_window_since_ready_is_set_aside() {
        // Ready 5 s ago, inside initialisation; the sample (15 s window) ends
        // now, so it partly covers the unready time.
        let mut s = PodStatus::ready(NOW - Nanos::from_secs(5), NOW);
        s.started_at = Some(NOW - Nanos::from_secs(40));
        assert!(cpu_sample_untrusted(
            &s,
            s.resource_sample.unwrap(),
            NOW,
            &READINESS
        ));
        // 20 s after becoming ready a full window fits.
        s.ready_changed_at = NOW - Nanos::from_secs(20);
        assert!(!cpu_sample_untrusted(
            &s,
            s.resource_sample.unwrap(),
            NOW,
            &READINESS
        ));
    }

    #[test]
    fn after_initialisation_only_never_ready_pods_are_set_aside() {
        let mut s = PodStatus::starting(NOW - 10 * Nanos::MINUTE, NOW);
        // Unready since 10 s after start (< 30 s delay): never became ready.
        s.ready_changed_at = NOW - 10 * Nanos::MINUTE + Nanos::from_secs(10);
        assert!(cpu_sample_untrusted(
            &s,
            s.resource_sample.unwrap(),
            NOW,
            &READINESS
        ));
        // Went unready 2 min after start: it was ready before, sample counts.
        s.ready_changed_at = NOW - 8 * Nanos::MINUTE;
        assert!(!cpu_sample_untrusted(
            &s,
            s.resource_sample.unwrap(),
            NOW,
            &READINESS
        ));
    }

    #[test]
    fn object_value_scales_ready_pods_and_scales_from_zero() {
        let mut t = PodTable::with_capacity(4, 0, 1);
        t.clear(3);
        for _ in 0..2 {
            t.push_pod(old_ready(), &[]);
        }
        t.push_pod(PodStatus::starting(NOW, NOW), &[]);
        t.set_object_metric(MetricId(0), Some(300.0));
        let source = Source::ObjectValue { value: 100.0 };
        // ratio 3 over 2 running+ready pods ⇒ 6.
        assert_eq!(
            recommend(&source, MetricId(0), &t, &inputs(3))
                .unwrap()
                .replicas,
            6
        );
        // From zero replicas: ceil(300 / 100) = 3, tolerance not consulted.
        t.clear(0);
        t.set_object_metric(MetricId(0), Some(250.0));
        assert_eq!(
            recommend(&source, MetricId(0), &t, &inputs(0))
                .unwrap()
                .replicas,
            3
        );
        t.set_object_metric(MetricId(0), None);
        assert_eq!(
            recommend(&source, MetricId(0), &t, &inputs(0)),
            Err(MetricError::ObjectMetricMissing)
        );
    }

    #[test]
    fn object_average_value_divides_by_status_replicas() {
        let mut t = PodTable::with_capacity(4, 0, 1);
        t.clear(2);
        t.set_status_replicas(2);
        let source = Source::ObjectAverageValue { average_value: 4.0 };
        // Queue of 12 for 2 replicas at 4 each: ratio 12 / 8 = 1.5 ⇒ ceil(12 / 4) = 3.
        t.set_object_metric(MetricId(0), Some(12.0));
        let r = recommend(&source, MetricId(0), &t, &inputs(2)).unwrap();
        assert_eq!(
            r,
            MetricReading {
                replicas: 3,
                current: 6.0
            }
        );
        // 8.5 / 8 = 1.0625 is within tolerance ⇒ stay at 2.
        t.set_object_metric(MetricId(0), Some(8.5));
        assert_eq!(
            recommend(&source, MetricId(0), &t, &inputs(2))
                .unwrap()
                .replicas,
            2
        );
    }

    #[test]
    fn ceil_replicas_saturates() {
        assert_eq!(ceil_replicas(f64::NAN), 0);
        assert_eq!(ceil_replicas(-3.0), 0);
        assert_eq!(ceil_replicas(2.000_1), 3);
        assert_eq!(ceil_replicas(1e20), i32::MAX as u32);
    }
}
