//! Autoscaling: a service's HPA (the policy crate's [`Hpa`]) fed from
//! simulated pods on its own sync clock, and the pods it starts and stops.
//!
//! [`Autoscaler`] is public so that `stormbreak lab` feeds the same HPA,
//! with the same pod table and the same sidecar CPU assumption, from real
//! pods: one way of turning pod readings into a replica count, not two.

use stormbreak_policy::Nanos;
use stormbreak_policy::autoscale::{ContainerSample, Hpa, MetricId, PodStatus, PodTable};

use super::ids::ServiceId;
use super::{Engine, Ev};
use crate::scenario::AutoscalerSpec;

/// What was measured on one pod since the last sync.
#[derive(Debug, Clone, Copy)]
pub struct PodSample {
    /// Ready to serve (a pod that is not is draining: the HPA ignores it,
    /// as Kubernetes ignores a pod being deleted).
    pub ready: bool,
    /// Time-averaged busy workers / workers.
    pub app_utilisation: f64,
    /// Time-averaged sidecar in-flight / sidecar limit.
    pub sidecar_saturation: f64,
}

/// A service's HPA: the policy crate's [`Hpa`] fed from simulated pods.
///
/// Containers: `app` (CPU request = its worker count, usage = busy workers)
/// and `sidecar` (see [`SIDECAR_CPU_SHARE`]).
#[derive(Debug)]
pub struct Autoscaler {
    hpa: Hpa,
    table: PodTable,
    period: Nanos,
}

/// Assumption: a sidecar's CPU request is this share of the app's, and its
/// usage is proportional to its in-flight share of that. It only matters
/// for the pod-level `Resource` metric, where the app dominates the sum.
pub const SIDECAR_CPU_SHARE: f64 = 0.1;

impl Autoscaler {
    /// Builds the HPA for a validated spec (validation ran the same
    /// [`AutoscalerSpec::hpa_config`] through the same `validate`).
    ///
    /// # Panics
    /// If `spec` is not one of a validated scenario (at any `--scale`,
    /// through [`scale_autoscaler`](super::scale::scale_autoscaler)).
    pub fn new(spec: &AutoscalerSpec) -> Self {
        let config = spec.hpa_config();
        let period = config.sync_period;
        Autoscaler {
            hpa: Hpa::new(&config).expect("validated autoscaler"),
            table: PodTable::with_capacity(spec.max as usize * 2 + 8, 2, 1),
            period,
        }
    }

    /// When the HPA wants its next sync (since the run's start): one period
    /// after the last, or the first period of the run before any.
    pub fn poll_timeout(&self) -> Nanos {
        self.hpa.poll_timeout().unwrap_or(self.period)
    }

    /// One HPA sync at `now` (since the run's start) with `current` the
    /// Deployment's replicas (serving pods and those starting) and `pods`
    /// every live pod's sample: returns the desired replica count.
    pub fn sync(&mut self, now: Nanos, current: u32, pods: impl Iterator<Item = PodSample>) -> u32 {
        self.table.clear(current);
        for p in pods {
            let status = if p.ready {
                PodStatus::ready(Nanos::ZERO, now)
            } else {
                PodStatus::ready(Nanos::ZERO, now).deleting()
            };
            let app = ContainerSample::cpu(p.app_utilisation, 1.0);
            let sidecar =
                ContainerSample::cpu(p.sidecar_saturation * SIDECAR_CPU_SHARE, SIDECAR_CPU_SHARE);
            let i = self.table.push_pod(status, &[app, sidecar]);
            self.table
                .set_pod_metric(i, MetricId(0), p.sidecar_saturation);
        }
        self.hpa.sync(now, &self.table).desired
    }
}

impl Engine {
    /// One HPA sync on its own clock (`sync_period`), then the next wake-up
    /// the HPA asks for.
    pub(crate) fn on_autoscale(&mut self, s: ServiceId) {
        let Some(next) = self.services[s.ix()].sync_autoscaler(self.now) else {
            return;
        };
        self.queue.schedule(next, Ev::Autoscale { svc: s });
        self.reconcile(s);
    }

    pub(crate) fn on_pod_ready(&mut self, s: ServiceId) {
        self.services[s.ix()].pod_ready(self.now);
    }
}
