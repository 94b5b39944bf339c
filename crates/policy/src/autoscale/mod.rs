//! Horizontal pod autoscaling: the Kubernetes HPA v2 algorithm as a sans-IO
//! state machine.
//!
//! # Source law
//!
//! Kubernetes documentation, "Horizontal Pod Autoscaling" (algorithm details,
//! container resource metrics, configurable scaling behavior), and the
//! controller it describes, `pkg/controller/podautoscaler/horizontal.go` and
//! `replica_calculator.go`:
//!
//! ```text
//! desiredReplicas = ceil(currentReplicas × currentMetricValue / desiredMetricValue)
//! ```
//!
//! skipped while |ratio − 1| ≤ tolerance; computed per metric, the largest
//! wins; pods being deleted or failed ignored, pods without metrics assumed at
//! 100 % of their request (of the target, for plain values) on a scale-down
//! and 0 % on a scale-up, pending and (for CPU) not-yet-ready pods assumed
//! 0 % on a scale-up, the ratio recomputed and the action dropped if it then
//! reverses or falls within tolerance; then stabilization windows, rate
//! policies and min/max replicas.
//!
//! # Defaults
//!
//! Sync every 15 s, tolerance 0.1, min replicas 1, CPU initialization period
//! 5 min, initial readiness delay 30 s; scale-up: no stabilization, max(100 %,
//! 4 pods) per 15 s; scale-down: 300 s stabilization, 100 % per 15 s. See
//! [`HpaConfig`].
//!
//! # Why this module exists
//!
//! In the 2026-08-17 incident an Istio sidecar hit its concurrency limit while
//! the HPA watched the application container's CPU. A starved application
//! burns little CPU, so `ContainerResource` on the app — and pod-level
//! `Resource`, where the app's large request dominates the sum — both read
//! "idle" and never scale. A `Pods` metric of sidecar saturation (in-flight /
//! limit, target 0.8) sees the real bottleneck. The tests reproduce exactly
//! that.
//!
//! # Example
//!
//! ```
//! use stormbreak_policy::autoscale::{ContainerSample, Hpa, HpaConfig, PodStatus, PodTable};
//! use stormbreak_policy::Nanos;
//!
//! // CPU target 50 % of request; 4 pods at 100 %.
//! let config = HpaConfig {
//!     metrics: vec![stormbreak_policy::autoscale::MetricSpec::cpu_utilization(50)],
//!     ..HpaConfig::default()
//! };
//! let mut hpa = Hpa::new(&config).unwrap();
//! let mut pods = PodTable::with_capacity(16, 1, 1);
//! let now = Nanos::from_secs(3600);
//! pods.clear(4);
//! for _ in 0..4 {
//!     pods.push_pod(PodStatus::ready(Nanos::ZERO, now), &[ContainerSample::cpu(0.5, 0.5)]);
//! }
//! // ratio 100 / 50 = 2 ⇒ ceil(4 × 2) = 8, within max(100 %, 4 pods) per 15 s.
//! let decision = hpa.sync(now, &pods);
//! assert_eq!(decision.desired, 8);
//! assert_eq!(hpa.next_sync(), now + Nanos::from_secs(15));
//! ```

mod behavior;
mod config;
mod replicas;
mod step;
mod view;

pub use behavior::{ScaleLimit, Stabilization};
pub use config::{
    Behavior, DEFAULT_DOWNSCALE_STABILIZATION, HpaConfig, MAX_HISTORY_SYNCS, MAX_POLICIES,
    MetricSpec, MetricTarget, PolicyKind, ResourceName, ScalingPolicy, ScalingRules, SelectPolicy,
    default_scale_down_policies, default_scale_up_policies,
};
pub use replicas::{MetricError, MetricReading};
pub use step::StepResponse;
pub use view::{
    ContainerSample, MetricId, MetricSample, MetricsView, PodPhase, PodStatus, PodTable,
};

use crate::FieldError;
use crate::Nanos;
use behavior::{History, Rules};
use replicas::{Readiness, ResourceTarget, Source, SyncInputs, Tolerances};

/// The family named in this module's [`FieldError`]s.
const FAMILY: &str = "autoscale";

/// Why a sync chose its replica count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScaleReason {
    /// The target is at 0 replicas while `min_replicas` > 0: someone paused
    /// it on purpose, so the HPA leaves it alone.
    ScalingDisabled,
    /// The target was above `max_replicas`; brought down to it.
    AboveMaxReplicas,
    /// The target was below `min_replicas`; brought up to it.
    BelowMinReplicas,
    /// Every metric failed, or some failed while the rest pointed down:
    /// the replica count is kept.
    MetricsUnavailable,
    /// Computed from the metrics, stabilization and policies.
    Metrics,
}

/// The outcome of one sync: set the target's replicas to `desired`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a policy decision must be acted on"]
pub struct ScaleDecision {
    /// `spec.replicas` as seen in the view.
    pub current: u32,
    /// Replicas to set.
    pub desired: u32,
    /// Largest per-metric recommendation before stabilization and limits
    /// (`None` unless `reason` is [`ScaleReason::Metrics`]).
    pub recommendation: Option<u32>,
    /// The metric behind `recommendation`.
    pub metric: Option<MetricId>,
    /// Why.
    pub reason: ScaleReason,
    /// How the stabilization window changed the recommendation.
    pub stabilization: Stabilization,
    /// What bounded the result after stabilization.
    pub limit: ScaleLimit,
}

impl ScaleDecision {
    /// The replica count changes.
    pub fn rescale(&self) -> bool {
        self.desired != self.current
    }
}

/// A HorizontalPodAutoscaler controller for one scale target.
///
/// Source law: Kubernetes HPA v2 (`autoscaling/v2`; kubernetes.io "Horizontal
/// Pod Autoscaling" and `pkg/controller/podautoscaler`). Defaults: 15 s sync,
/// tolerance 0.1, scale-up max(100 %, 4 pods)/15 s without stabilization,
/// scale-down 100 %/15 s with a 300 s stabilization window, min replicas 1.
///
/// Call [`sync`](Self::sync) each time the clock passes
/// [`next_sync`](Self::next_sync) (or use [`poll`](Self::poll)), apply
/// `desired` to the workload, and report the new `spec.replicas` in the next
/// view. History (recommendations, scale events) lives in rings sized at
/// construction for one entry per `sync_period` over the longest window or
/// policy period (at most [`MAX_HISTORY_SYNCS`] entries, which
/// [`HpaConfig::validate`] enforces); syncing much more often than
/// `sync_period` shortens the effective look-back instead of allocating.
///
/// Differences from the controller, all deliberate: the `behavior` path is
/// always used (its defaults reproduce the legacy path); plain metric values
/// are `f64` rather than milli-units; a `ContainerResource` container missing
/// from a pod is an error for that metric, as `calculateRequests` makes it.
#[derive(Debug, Clone)]
pub struct Hpa {
    min_replicas: u32,
    max_replicas: u32,
    sync_period: Nanos,
    tolerances: Tolerances,
    readiness: Readiness,
    sources: Box<[Source]>,
    readings: Box<[Result<MetricReading, MetricError>]>,
    up: Rules,
    down: Rules,
    history: History,
    next_sync: Option<Nanos>,
}

impl Hpa {
    /// Validates `config` and allocates all history up front.
    pub fn new(config: &HpaConfig) -> Result<Self, FieldError> {
        config.validate()?;
        let sources: Box<[Source]> = config.metrics.iter().map(|m| resolve(config, m)).collect();
        let (up, down) = rules_of(&config.behavior);
        let history = History::new(&up, &down, config.sync_period);
        Ok(Hpa {
            min_replicas: config.min_replicas,
            max_replicas: config.max_replicas,
            sync_period: config.sync_period,
            tolerances: Tolerances {
                down: config
                    .behavior
                    .scale_down
                    .tolerance
                    .unwrap_or(config.tolerance),
                up: config
                    .behavior
                    .scale_up
                    .tolerance
                    .unwrap_or(config.tolerance),
            },
            readiness: Readiness {
                cpu_initialization_period: config.cpu_initialization_period,
                initial_readiness_delay: config.initial_readiness_delay,
            },
            readings: vec![Err(MetricError::NotSynced); sources.len()].into_boxed_slice(),
            sources,
            up,
            down,
            history,
            next_sync: None,
        })
    }

    /// When the next sync is due (0 before the first one: due at once).
    pub fn next_sync(&self) -> Nanos {
        self.next_sync.unwrap_or(Nanos::ZERO)
    }

    /// When the next sync is due, once the first sync has set the cadence
    /// (`None` before it: the driver chooses the first sync). On the model
    /// of quinn-proto's `poll_timeout`: a driver sleeps until this instant
    /// and then calls [`sync`](Self::sync) (or [`poll`](Self::poll)).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.next_sync
    }

    /// Syncs if one is due at `now`, else `None`.
    pub fn poll<V: MetricsView + ?Sized>(&mut self, now: Nanos, view: &V) -> Option<ScaleDecision> {
        (now >= self.next_sync()).then(|| self.sync(now, view))
    }

    /// Each metric's reading at the last sync, indexed by [`MetricId`].
    pub fn readings(&self) -> &[Result<MetricReading, MetricError>] {
        &self.readings
    }

    /// One reconcile (`reconcileAutoscaler`): read the view, decide the
    /// replica count, record it in the history, schedule the next sync.
    pub fn sync<V: MetricsView + ?Sized>(&mut self, now: Nanos, view: &V) -> ScaleDecision {
        self.schedule_after(now);
        let current = view.spec_replicas();
        let mut decision = ScaleDecision {
            current,
            desired: current,
            recommendation: None,
            metric: None,
            reason: ScaleReason::Metrics,
            stabilization: Stabilization::None,
            limit: ScaleLimit::DesiredWithinRange,
        };
        if current == 0 && self.min_replicas != 0 {
            decision.reason = ScaleReason::ScalingDisabled;
            return decision;
        }
        if current > self.max_replicas {
            decision.desired = self.max_replicas;
            decision.reason = ScaleReason::AboveMaxReplicas;
        } else if current < self.min_replicas {
            decision.desired = self.min_replicas;
            decision.reason = ScaleReason::BelowMinReplicas;
        } else {
            let Some((recommended, metric)) = self.recommend(now, current, view) else {
                decision.reason = ScaleReason::MetricsUnavailable;
                return decision;
            };
            let (stabilized, how) =
                self.history
                    .stabilize(now, current, recommended, &self.up, &self.down);
            let (desired, limit) = self.history.rate_limit(
                now,
                current,
                stabilized,
                (self.min_replicas, self.max_replicas),
                &self.up,
                &self.down,
            );
            decision.desired = desired;
            decision.recommendation = Some(recommended);
            decision.metric = metric;
            decision.stabilization = how;
            decision.limit = limit;
        }
        self.history.record_scale(now, current, decision.desired);
        decision
    }

    /// `computeReplicasForMetrics`: the largest recommendation, or `None` when
    /// every metric failed or a failure coincides with a proposed scale-down
    /// (a blind metric must not shrink the workload).
    fn recommend<V: MetricsView + ?Sized>(
        &mut self,
        now: Nanos,
        current: u32,
        view: &V,
    ) -> Option<(u32, Option<MetricId>)> {
        let inputs = SyncInputs {
            now,
            spec_replicas: current,
            tolerances: self.tolerances,
            readiness: self.readiness,
        };
        let (mut best, mut best_metric, mut invalid) = (0u32, None, 0usize);
        for (i, source) in self.sources.iter().enumerate() {
            let reading = replicas::recommend(source, MetricId(i), view, &inputs);
            match reading {
                Ok(r) if best_metric.is_none() || r.replicas > best => {
                    best = r.replicas;
                    best_metric = Some(MetricId(i));
                }
                Ok(_) => {}
                Err(_) => invalid += 1,
            }
            self.readings[i] = reading;
        }
        if invalid == self.sources.len() || (invalid > 0 && best < current) {
            return None;
        }
        Some((best, best_metric))
    }

    /// Next sync one period on from the previous schedule, skipping missed
    /// ones, so the cadence does not drift with late calls; a first or early
    /// sync starts the cadence afresh from `now`.
    fn schedule_after(&mut self, now: Nanos) {
        let next = match self.next_sync {
            Some(due) if due <= now => {
                let behind = (now - due) / self.sync_period;
                due.saturating_add(self.sync_period.saturating_mul(behind + 1))
            }
            _ => now.saturating_add(self.sync_period),
        };
        self.next_sync = Some(next);
    }
}

/// Turns a validated metric spec into its per-sync form.
/// Each direction's rules with the defaults the API server fills in.
fn rules_of(behavior: &Behavior) -> (Rules, Rules) {
    let rules = |r: &ScalingRules, window: Nanos, policies: &[ScalingPolicy]| Rules {
        stabilization_window: r.stabilization_window.unwrap_or(window),
        select: r.select_policy.unwrap_or_default(),
        policies: r
            .policies
            .clone()
            .unwrap_or_else(|| policies.to_vec())
            .into_boxed_slice(),
    };
    (
        rules(
            &behavior.scale_up,
            Nanos::ZERO,
            &default_scale_up_policies(),
        ),
        rules(
            &behavior.scale_down,
            DEFAULT_DOWNSCALE_STABILIZATION,
            &default_scale_down_policies(),
        ),
    )
}

fn resolve(config: &HpaConfig, metric: &MetricSpec) -> Source {
    let resource_target = |t: &MetricTarget| match *t {
        MetricTarget::Utilization {
            average_utilization,
        } => ResourceTarget::Utilization(average_utilization),
        MetricTarget::AverageValue { average_value } => ResourceTarget::AverageValue(average_value),
        MetricTarget::Value { value } => ResourceTarget::AverageValue(value),
    };
    match metric {
        MetricSpec::Resource { name, target } => Source::Resource {
            resource: *name,
            container: None,
            target: resource_target(target),
        },
        MetricSpec::ContainerResource {
            name,
            container,
            target,
        } => Source::Resource {
            resource: *name,
            container: config.container_index(container),
            target: resource_target(target),
        },
        MetricSpec::Pods { target, .. } => Source::Pods {
            average_value: target_value(target),
        },
        MetricSpec::Object { target, .. } => match *target {
            MetricTarget::AverageValue { average_value } => {
                Source::ObjectAverageValue { average_value }
            }
            _ => Source::ObjectValue {
                value: target_value(target),
            },
        },
    }
}

fn target_value(target: &MetricTarget) -> f64 {
    match *target {
        MetricTarget::Utilization {
            average_utilization,
        } => f64::from(average_utilization),
        MetricTarget::AverageValue { average_value } => average_value,
        MetricTarget::Value { value } => value,
    }
}
