//! How `--scale F` shrinks a topology.
//!
//! Public so that `stormbreak lab` shrinks a scenario exactly as the
//! simulator does (pods, per-pod capacities, autoscaler bounds and `Pods`
//! policies): one law for both runs.

use stormbreak_policy::autoscale::PolicyKind;
use stormbreak_policy::limit::{LimitConfig, QueueConfig};

use crate::scenario::AutoscalerSpec;

/// `n × scale`, rounded, at least 1.
pub fn scaled(n: u32, scale: f64) -> u32 {
    ((n as f64 * scale).round() as u32).max(1)
}

/// How `--scale F` shrinks a service: a fleet of identical pods keeps its
/// per-pod behaviour (queueing, limits) and loses pods, so F × 400 pods run
/// as 4 pods of the same shape. The fleet's total capacity is exact: where
/// F × replicas is not a whole number, the pods are rounded and each pod's
/// capacities (workers, sidecar limit, queues) bend by the rest, so
/// 40 × 0.03 = 1.2 pods run as one pod of 1.2 × the shape, not one pod of
/// the shape (17% short). Below one pod the one pod's capacities shrink.
///
/// Invariant: pods × per-pod capacity = F × replicas × the scenario's
/// per-pod capacity, up to rounding each capacity to a whole number.
#[derive(Debug, Clone, Copy)]
pub struct FleetScale {
    pod_factor: f64,
    capacity_factor: f64,
}

impl FleetScale {
    /// The shrinking of a service of `replicas` pods at `--scale scale`.
    pub fn new(replicas: u32, scale: f64) -> Self {
        let replicas = replicas.max(1) as f64;
        let pods = (replicas * scale).round().max(1.0);
        FleetScale {
            pod_factor: pods / replicas,
            capacity_factor: replicas * scale / pods,
        }
    }

    /// A pod count of the scenario (replicas, an HPA bound, a fault's
    /// pods) at this scale: rounded, at least 1.
    pub fn pods(&self, n: u32) -> u32 {
        scaled(n, self.pod_factor)
    }

    /// A per-pod capacity of the scenario (workers, a sidecar limit, a
    /// queue) at this scale: bent by what rounding the pods left over.
    pub fn per_pod(&self, n: u32) -> u32 {
        scaled(n, self.capacity_factor)
    }
}

/// A `Pods` scaling policy counts pods, so it converts with them, like the
/// autoscaler's `min` and `max` (rounded, at least 1): 1 pod per minute on
/// 400 pods stays a quarter percent of the fleet per minute as 4 pods.
/// `Percent` policies need nothing. Kubernetes' default scale-up policy
/// (4 pods per 15 s, when `behavior` leaves `policies` out) is not
/// converted, so runs without `behavior` are the same as before it.
pub fn scale_pod_policies(a: &mut AutoscalerSpec, fleet: FleetScale) {
    let Some(b) = a.behavior.as_mut() else { return };
    for rules in [&mut b.scale_up, &mut b.scale_down] {
        for p in rules.policies.iter_mut().flatten() {
            if p.kind == PolicyKind::Pods {
                p.value = fleet.pods(p.value);
            }
        }
    }
}

/// An autoscaler at `fleet`'s scale: `min` and `max` convert with the
/// pods (`max` never under `min`), and so do its `Pods` policies
/// ([`scale_pod_policies`]).
pub fn scale_autoscaler(a: &AutoscalerSpec, fleet: FleetScale) -> AutoscalerSpec {
    let mut a = a.clone();
    a.min = fleet.pods(a.min);
    a.max = fleet.pods(a.max).max(a.min);
    scale_pod_policies(&mut a, fleet);
    a
}

/// A gateway's instances at `--scale`: they shrink like a service's
/// pods ([`FleetScale`]) and each keeps its limiter; a `fixed` limit and
/// the queue's size bend by the rest where scale × instances is not
/// whole, so the fleet's total stays exact; an adaptive limit keeps its
/// config (it finds its own level).
#[derive(Debug, Clone)]
pub struct ScaledGateway {
    /// Instances at this scale (rounded, at least 1).
    pub instances: u32,
    /// Each instance's limit.
    pub limit: Option<LimitConfig>,
    /// Each instance's admission queue (its size at least 1).
    pub queue: Option<QueueConfig>,
}

/// The gateway of `instances` with `limit` and `queue` at `--scale
/// scale`, as the simulator runs it and `stormbreak lab` starts it.
pub fn scale_gateway(
    limit: Option<&LimitConfig>,
    queue: Option<&QueueConfig>,
    instances: u32,
    scale: f64,
) -> ScaledGateway {
    let fleet = FleetScale::new(instances, scale);
    let limit = limit.map(|l| {
        let mut l = l.clone();
        if let LimitConfig::Fixed(f) = &mut l {
            f.limit = fleet.per_pod(f.limit);
        }
        l
    });
    ScaledGateway {
        instances: fleet.pods(instances),
        limit,
        queue: queue.map(|q| QueueConfig {
            size: fleet.per_pod(q.size).max(1),
            timeout: q.timeout,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::FleetScale;

    fn fleet(replicas: u32, scale: f64) -> (u32, u32) {
        let f = FleetScale::new(replicas, scale);
        (f.pods(replicas), f.per_pod(10))
    }

    #[test]
    fn a_fleet_keeps_its_pod_shape_where_the_pods_come_out_whole() {
        assert_eq!(fleet(100, 1.0), (100, 10));
        assert_eq!(fleet(100, 0.1), (10, 10));
        assert_eq!(fleet(100, 0.01), (1, 10));
        assert_eq!(fleet(40, 0.1), (4, 10));
        assert_eq!(fleet(4, 2.0), (8, 10));
    }

    #[test]
    fn a_fleet_keeps_its_total_capacity_where_they_do_not() {
        // 40 × 0.03 = 1.2 pods: one pod of 12, not one of 10.
        assert_eq!(fleet(40, 0.03), (1, 12));
        // 100 × 0.025 = 2.5 pods: 3 pods of 8.33, rounded to 8.
        assert_eq!(fleet(100, 0.025), (3, 8));
        // Below one pod: one pod with 0.4 of the shape.
        assert_eq!(fleet(40, 0.01), (1, 4));
        // An HPA bound converts with the pods: max 160 at 0.03 is 4 pods
        // of 1.2, the 4.8 replicas' worth.
        let f = FleetScale::new(40, 0.03);
        assert_eq!(f.pods(160), 4);
        assert_eq!(f.per_pod(1), 1, "never a capacity of zero");
    }

    #[test]
    fn pods_policies_convert_with_the_pods_and_percentages_do_not() {
        use super::scale_pod_policies;
        use crate::scenario::{AutoscalerSpec, ScaleMetric};
        use stormbreak_policy::Nanos;
        use stormbreak_policy::autoscale::{Behavior, ScalingPolicy, ScalingRules};
        let minute = Nanos::from_secs(60);
        let rules = ScalingRules {
            policies: Some(vec![
                ScalingPolicy::pods(200, minute),
                ScalingPolicy::pods(1, minute),
                ScalingPolicy::percent(10, minute),
            ]),
            ..ScalingRules::default()
        };
        let mut a = AutoscalerSpec {
            metric: ScaleMetric::AppCpu,
            target: 0.6,
            min: 40,
            max: 160,
            pod_start: minute,
            sync_period: Nanos::from_secs(15),
            behavior: Some(Behavior {
                scale_up: rules.clone(),
                scale_down: rules,
            }),
        };
        scale_pod_policies(&mut a, FleetScale::new(400, 0.01));
        let b = a.behavior.unwrap();
        for r in [b.scale_up, b.scale_down] {
            assert_eq!(
                r.policies.unwrap(),
                [
                    ScalingPolicy::pods(2, minute),
                    ScalingPolicy::pods(1, minute),
                    ScalingPolicy::percent(10, minute)
                ]
            );
        }
    }

    #[test]
    fn a_gateway_loses_instances_and_its_fixed_limit_and_queue_bend_by_the_rest() {
        use super::scale_gateway;
        use stormbreak_policy::Nanos;
        use stormbreak_policy::limit::{AimdConfig, FixedConfig, LimitConfig, QueueConfig};

        let fixed = LimitConfig::Fixed(FixedConfig { limit: 100 });
        let queue = QueueConfig {
            size: 10,
            timeout: Nanos::from_millis(50),
        };
        // 4 instances × 0.3 = 1.2: one instance of 1.2 × the shape.
        let g = scale_gateway(Some(&fixed), Some(&queue), 4, 0.3);
        assert_eq!(g.instances, 1);
        assert_eq!(
            g.limit,
            Some(LimitConfig::Fixed(FixedConfig { limit: 120 }))
        );
        assert_eq!(g.queue.as_ref().map(|q| q.size), Some(12));
        // Whole instances keep the shape; a tiny queue stays at least 1.
        let tiny = QueueConfig { size: 1, ..queue };
        let g = scale_gateway(Some(&fixed), Some(&tiny), 10, 0.01);
        assert_eq!(g.instances, 1);
        assert_eq!(g.limit, Some(LimitConfig::Fixed(FixedConfig { limit: 10 })));
        assert_eq!(g.queue.map(|q| q.size), Some(1));
        // An adaptive limit keeps its config: it finds its own level.
        let aimd = LimitConfig::Aimd(AimdConfig::default());
        let g = scale_gateway(Some(&aimd), None, 4, 0.3);
        assert_eq!(g.limit, Some(aimd));
        assert!(g.queue.is_none());
    }
}
