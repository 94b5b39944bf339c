//! What the controller sees at a sync: the pods behind the scale target, their
//! containers' usage and requests, per-pod custom metrics and object metrics.
//!
//! The autoscaler reads through the [`MetricsView`] trait, so a simulator can
//! answer straight from its own pod table without copying. [`PodTable`] is a
//! ready-made implementation whose buffers are sized once and refilled in
//! place each sync.

use super::config::ResourceName;
use crate::Nanos;

/// Position of a metric in [`HpaConfig::metrics`](super::HpaConfig::metrics).
///
/// Per-pod custom values and object values are looked up by it, so a sync
/// never compares strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MetricId(pub usize);

/// Pod lifecycle phase (`pod.status.phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodPhase {
    /// Accepted but not all containers running (being scheduled, pulling, starting).
    Pending,
    /// Bound to a node with its containers started.
    #[default]
    Running,
    /// All containers exited successfully.
    Succeeded,
    /// All containers exited and at least one failed.
    Failed,
}

/// When metrics-server took the pod's resource sample, and over what window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricSample {
    /// End of the sampling window.
    pub at: Nanos,
    /// Length of the window the usage was averaged over.
    pub window: Nanos,
}

impl MetricSample {
    /// A sample ending at `at` over metrics-server's default 15 s resolution.
    pub const fn at(at: Nanos) -> Self {
        MetricSample {
            at,
            window: Nanos::from_secs(15),
        }
    }
}

/// The parts of a pod's status the HPA reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodStatus {
    /// Lifecycle phase; `Failed` pods are discarded, `Pending` ones set aside.
    pub phase: PodPhase,
    /// A deletion timestamp is set: the pod is being shut down and is ignored.
    pub deleting: bool,
    /// The `Ready` condition is true.
    pub ready: bool,
    /// `status.startTime`; `None` (or no `Ready` condition yet) makes a CPU
    /// sample untrusted.
    pub started_at: Option<Nanos>,
    /// Last transition time of the `Ready` condition.
    pub ready_changed_at: Nanos,
    /// The resource metrics API's sample for this pod; `None` = missing metrics.
    pub resource_sample: Option<MetricSample>,
}

impl PodStatus {
    /// A running pod that became ready at `ready_at` (started then too),
    /// with a resource sample taken at `sampled_at`.
    pub const fn ready(ready_at: Nanos, sampled_at: Nanos) -> Self {
        PodStatus {
            phase: PodPhase::Running,
            deleting: false,
            ready: true,
            started_at: Some(ready_at),
            ready_changed_at: ready_at,
            resource_sample: Some(MetricSample::at(sampled_at)),
        }
    }

    /// A running pod that started at `started_at` and is not ready yet.
    pub const fn starting(started_at: Nanos, sampled_at: Nanos) -> Self {
        PodStatus {
            phase: PodPhase::Running,
            deleting: false,
            ready: false,
            started_at: Some(started_at),
            ready_changed_at: started_at,
            resource_sample: Some(MetricSample::at(sampled_at)),
        }
    }

    /// A pod not yet running (scheduling, pulling images).
    pub const fn pending() -> Self {
        PodStatus {
            phase: PodPhase::Pending,
            deleting: false,
            ready: false,
            started_at: None,
            ready_changed_at: Nanos::ZERO,
            resource_sample: None,
        }
    }

    /// Same pod, without a resource sample (metrics-server has none for it).
    pub const fn without_sample(mut self) -> Self {
        self.resource_sample = None;
        self
    }

    /// Same pod, marked for deletion.
    pub const fn deleting(mut self) -> Self {
        self.deleting = true;
        self
    }
}

/// One container's resource usage and request. Units are the caller's
/// (cores or millicores, bytes or MiB), but must match the targets'.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ContainerSample {
    /// CPU in use.
    pub cpu_usage: f64,
    /// CPU requested; ≤ 0 means no request is set.
    pub cpu_request: f64,
    /// Memory in use.
    pub memory_usage: f64,
    /// Memory requested; ≤ 0 means no request is set.
    pub memory_request: f64,
}

impl ContainerSample {
    /// A container with CPU `usage` of `request`, and no memory figures.
    pub const fn cpu(usage: f64, request: f64) -> Self {
        ContainerSample {
            cpu_usage: usage,
            cpu_request: request,
            memory_usage: 0.0,
            memory_request: 0.0,
        }
    }

    /// Usage of `resource`.
    pub fn usage(&self, resource: ResourceName) -> f64 {
        match resource {
            ResourceName::Cpu => self.cpu_usage,
            ResourceName::Memory => self.memory_usage,
        }
    }

    /// Request of `resource`, if one is set.
    pub fn request(&self, resource: ResourceName) -> Option<f64> {
        let r = match resource {
            ResourceName::Cpu => self.cpu_request,
            ResourceName::Memory => self.memory_request,
        };
        (r > 0.0).then_some(r)
    }
}

/// Read access to the cluster state one sync needs. Pods are indexed
/// `0..pod_count()`, containers `0..container_count(pod)` in the order of
/// [`HpaConfig::pod_containers`](super::HpaConfig::pod_containers).
pub trait MetricsView {
    /// `scale.spec.replicas`: the replica count the HPA last set (or the user did).
    fn spec_replicas(&self) -> u32;
    /// Number of pods the target's selector matches, in any phase.
    fn pod_count(&self) -> usize;
    /// Status of pod `pod`.
    fn pod(&self, pod: usize) -> PodStatus;
    /// Number of containers of pod `pod`.
    fn container_count(&self, pod: usize) -> usize;
    /// Container `container` of pod `pod`.
    fn container(&self, pod: usize, container: usize) -> ContainerSample;
    /// The `Pods` metric `metric` for pod `pod`; `None` when the pod has no value.
    fn pod_metric(&self, pod: usize, metric: MetricId) -> Option<f64>;
    /// The `Object` metric `metric`; `None` when the metrics API has none.
    fn object_metric(&self, metric: MetricId) -> Option<f64>;
    /// `scale.status.replicas`; by default the pods neither terminated nor being deleted.
    fn status_replicas(&self) -> u32 {
        (0..self.pod_count())
            .filter(|&p| {
                let s = self.pod(p);
                !s.deleting && matches!(s.phase, PodPhase::Pending | PodPhase::Running)
            })
            .count() as u32
    }
}

/// A reusable, preallocated [`MetricsView`]: clear it, push this sync's pods,
/// hand it to [`Hpa::sync`](super::Hpa::sync).
///
/// Buffers are sized at construction for `max_pods`; filling within that
/// capacity never allocates.
///
/// ```
/// use stormbreak_policy::autoscale::{ContainerSample, MetricId, PodStatus, PodTable};
/// use stormbreak_policy::Nanos;
/// let mut table = PodTable::with_capacity(100, 2, 1);
/// table.clear(3);
/// for _ in 0..3 {
///     let p = table.push_pod(
///         PodStatus::ready(Nanos::ZERO, Nanos::ZERO),
///         &[ContainerSample::cpu(0.2, 1.0), ContainerSample::cpu(0.1, 0.1)],
///     );
///     table.set_pod_metric(p, MetricId(0), 0.95);
/// }
/// assert_eq!(table.len(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct PodTable {
    spec_replicas: u32,
    status_replicas: Option<u32>,
    max_containers: usize,
    metric_slots: usize,
    pods: Vec<PodStatus>,
    container_counts: Vec<usize>,
    containers: Vec<ContainerSample>,
    pod_metrics: Vec<Option<f64>>,
    object_metrics: Vec<Option<f64>>,
}

impl PodTable {
    /// Room for `max_pods` pods of up to `max_containers` containers each,
    /// and `metric_slots` metrics (use `config.metrics.len()`).
    pub fn with_capacity(max_pods: usize, max_containers: usize, metric_slots: usize) -> Self {
        PodTable {
            spec_replicas: 0,
            status_replicas: None,
            max_containers,
            metric_slots,
            pods: Vec::with_capacity(max_pods),
            container_counts: Vec::with_capacity(max_pods),
            containers: Vec::with_capacity(max_pods * max_containers),
            pod_metrics: Vec::with_capacity(max_pods * metric_slots),
            object_metrics: vec![None; metric_slots],
        }
    }

    /// Empties the table for a new sync, keeping its buffers.
    pub fn clear(&mut self, spec_replicas: u32) {
        self.spec_replicas = spec_replicas;
        self.status_replicas = None;
        self.pods.clear();
        self.container_counts.clear();
        self.containers.clear();
        self.pod_metrics.clear();
        self.object_metrics.fill(None);
    }

    /// Adds a pod; containers beyond `max_containers` are dropped. Returns its index.
    pub fn push_pod(&mut self, status: PodStatus, containers: &[ContainerSample]) -> usize {
        let n = containers.len().min(self.max_containers);
        self.pods.push(status);
        self.container_counts.push(n);
        self.containers.extend_from_slice(&containers[..n]);
        self.containers.resize(
            self.pods.len() * self.max_containers,
            ContainerSample::default(),
        );
        self.pod_metrics
            .resize(self.pods.len() * self.metric_slots, None);
        self.pods.len() - 1
    }

    /// Sets the `Pods` metric `metric` of pod `pod`; out-of-range indices are ignored.
    pub fn set_pod_metric(&mut self, pod: usize, metric: MetricId, value: f64) {
        if pod < self.pods.len() && metric.0 < self.metric_slots {
            self.pod_metrics[pod * self.metric_slots + metric.0] = Some(value);
        }
    }

    /// Sets (or, with `None`, withdraws) the `Object` metric `metric`.
    pub fn set_object_metric(&mut self, metric: MetricId, value: Option<f64>) {
        if let Some(slot) = self.object_metrics.get_mut(metric.0) {
            *slot = value;
        }
    }

    /// Overrides `scale.status.replicas` (otherwise derived from the pods).
    pub fn set_status_replicas(&mut self, replicas: u32) {
        self.status_replicas = Some(replicas);
    }

    /// Number of pods pushed since the last [`clear`](Self::clear).
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    /// No pods pushed since the last [`clear`](Self::clear).
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

impl MetricsView for PodTable {
    fn spec_replicas(&self) -> u32 {
        self.spec_replicas
    }

    fn pod_count(&self) -> usize {
        self.pods.len()
    }

    fn pod(&self, pod: usize) -> PodStatus {
        self.pods[pod]
    }

    fn container_count(&self, pod: usize) -> usize {
        self.container_counts[pod]
    }

    fn container(&self, pod: usize, container: usize) -> ContainerSample {
        self.containers[pod * self.max_containers + container]
    }

    fn pod_metric(&self, pod: usize, metric: MetricId) -> Option<f64> {
        if metric.0 >= self.metric_slots {
            return None;
        }
        self.pod_metrics[pod * self.metric_slots + metric.0]
    }

    fn object_metric(&self, metric: MetricId) -> Option<f64> {
        self.object_metrics.get(metric.0).copied().flatten()
    }

    fn status_replicas(&self) -> u32 {
        match self.status_replicas {
            Some(n) => n,
            None => self
                .pods
                .iter()
                .filter(|s| !s.deleting && matches!(s.phase, PodPhase::Pending | PodPhase::Running))
                .count() as u32,
        }
    }
}
