//! How `--scale F` shrinks a topology.

/// `n × scale`, rounded, at least 1.
pub(crate) fn scaled(n: u32, scale: f64) -> u32 {
    ((n as f64 * scale).round() as u32).max(1)
}

/// How `--scale F` shrinks a service: a fleet of identical pods keeps its
/// per-pod behaviour (queueing, limits) and loses pods, so F × 400 pods run
/// as 4 pods of the same shape. Only when fewer than one pod would remain do
/// the pod's own capacities (workers, sidecar limit, queues) shrink instead.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FleetScale {
    pod_factor: f64,
    capacity_factor: f64,
}

impl FleetScale {
    pub(crate) fn new(replicas: u32, scale: f64) -> Self {
        let pods = replicas.max(1) as f64 * scale;
        if pods >= 1.0 || scale >= 1.0 {
            FleetScale {
                pod_factor: scale,
                capacity_factor: 1.0,
            }
        } else {
            FleetScale {
                pod_factor: 1.0 / replicas.max(1) as f64,
                capacity_factor: pods,
            }
        }
    }

    pub(crate) fn pods(&self, n: u32) -> u32 {
        scaled(n, self.pod_factor)
    }

    pub(crate) fn per_pod(&self, n: u32) -> u32 {
        scaled(n, self.capacity_factor)
    }
}
