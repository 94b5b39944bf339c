//! The HPA's spec (`autoscaling/v2` `HorizontalPodAutoscalerSpec`) and the
//! controller-manager flags it depends on, with the published defaults.
//!
//! Field names follow the crate's snake_case convention; enum tags keep the
//! Kubernetes spelling (`Resource`, `Utilization`, `Percent`, `Max`, …) so a
//! manifest translates line by line. `periodSeconds` and
//! `stabilizationWindowSeconds` become duration strings (`"60s"`).

use super::FAMILY;
use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// A container resource the resource metrics API (metrics-server) reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ResourceName {
    /// CPU; the only resource whose samples are set aside while a pod initialises.
    Cpu,
    /// Memory.
    Memory,
}

/// What a metric is compared with (`MetricTarget` in `autoscaling/v2`).
///
/// Which kinds a source accepts is the API's rule: `Resource` and
/// `ContainerResource` take `Utilization` or `AverageValue`, `Pods` takes
/// `AverageValue`, `Object` takes `Value` or `AverageValue`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
#[non_exhaustive]
pub enum MetricTarget {
    /// Mean usage as a whole percentage of the pods' requests (e.g. `60`).
    Utilization {
        /// Target utilisation in percent of request, ≥ 1.
        average_utilization: u32,
    },
    /// Mean value per pod, in the caller's unit (cores, in-flight/limit, …).
    AverageValue {
        /// Target per-pod value, > 0.
        average_value: f64,
    },
    /// One total value (Object metrics only).
    Value {
        /// Target value, > 0.
        value: f64,
    },
}

/// One entry of `spec.metrics`: where the signal comes from and its target.
///
/// A metric is identified at run time by its position in [`HpaConfig::metrics`]
/// (a [`MetricId`](super::MetricId)); names are for people and error messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
#[non_exhaustive]
pub enum MetricSpec {
    /// Pod-level resource: the sum over *all* containers of a pod, so a hot
    /// small container hides behind a cold large one.
    Resource {
        /// The resource.
        name: ResourceName,
        /// `Utilization` or `AverageValue`.
        target: MetricTarget,
    },
    /// One named container's resource only; the others are invisible to it.
    ContainerResource {
        /// The resource.
        name: ResourceName,
        /// Container name; must appear in [`HpaConfig::pod_containers`].
        container: String,
        /// `Utilization` or `AverageValue`.
        target: MetricTarget,
    },
    /// A per-pod custom metric (`custom.metrics.k8s.io`), averaged over pods.
    Pods {
        /// Metric name, e.g. `sidecar_saturation`.
        metric: String,
        /// `AverageValue` only.
        target: MetricTarget,
    },
    /// One value describing another object (an Ingress's request rate, a queue's depth).
    Object {
        /// Metric name.
        metric: String,
        /// `Value`, or `AverageValue` (the value divided by the current replica count).
        target: MetricTarget,
    },
}

impl MetricSpec {
    /// CPU utilisation at `percent` of request over the whole pod (`kubectl autoscale --cpu`).
    pub fn cpu_utilization(percent: u32) -> Self {
        MetricSpec::Resource {
            name: ResourceName::Cpu,
            target: MetricTarget::Utilization {
                average_utilization: percent,
            },
        }
    }
}

/// How a scaling policy's `value` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PolicyKind {
    /// An absolute number of pods per period.
    Pods,
    /// A percentage of the replicas at the start of the period.
    Percent,
}

/// One `HPAScalingPolicy`: at most `value` pods (or percent) per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingPolicy {
    /// `Pods` or `Percent`.
    #[serde(rename = "type")]
    pub kind: PolicyKind,
    /// Pods or percent, ≥ 1.
    pub value: u32,
    /// Look-back over which the policy must hold, in (0, 30 min].
    pub period: Nanos,
}

impl ScalingPolicy {
    /// `value` pods per `period`.
    pub const fn pods(value: u32, period: Nanos) -> Self {
        ScalingPolicy {
            kind: PolicyKind::Pods,
            value,
            period,
        }
    }

    /// `value` percent per `period`.
    pub const fn percent(value: u32, period: Nanos) -> Self {
        ScalingPolicy {
            kind: PolicyKind::Percent,
            value,
            period,
        }
    }
}

/// Which policy wins when several are listed (`selectPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SelectPolicy {
    /// The policy allowing the largest change (default).
    #[default]
    Max,
    /// The policy allowing the smallest change.
    Min,
    /// No scaling in this direction at all.
    Disabled,
}

/// `HPAScalingRules` for one direction. `None` fields take that direction's
/// default when the autoscaler is built, as the API server's defaulting does.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingRules {
    /// Look-back over past recommendations (0 s up, 300 s down), ≤ 1 h.
    #[serde(default)]
    pub stabilization_window: Option<Nanos>,
    /// Policy selection (default `Max`).
    #[serde(default)]
    pub select_policy: Option<SelectPolicy>,
    /// Rate limits (up: 100 % and 4 pods per 15 s; down: 100 % per 15 s).
    #[serde(default)]
    pub policies: Option<Vec<ScalingPolicy>>,
    /// Dead band in this direction (default: [`HpaConfig::tolerance`]).
    #[serde(default)]
    pub tolerance: Option<f64>,
}

impl ScalingRules {
    /// The published scale-up defaults, spelt out.
    pub fn scale_up_default() -> Self {
        ScalingRules {
            stabilization_window: Some(Nanos::ZERO),
            select_policy: Some(SelectPolicy::Max),
            policies: Some(default_scale_up_policies().to_vec()),
            tolerance: None,
        }
    }

    /// The published scale-down defaults, spelt out.
    pub fn scale_down_default() -> Self {
        ScalingRules {
            stabilization_window: Some(DEFAULT_DOWNSCALE_STABILIZATION),
            select_policy: Some(SelectPolicy::Max),
            policies: Some(default_scale_down_policies().to_vec()),
            tolerance: None,
        }
    }
}

/// `spec.behavior`: separate rules for each direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Behavior {
    /// Rules when the recommendation is above the current replicas.
    #[serde(default)]
    pub scale_up: ScalingRules,
    /// Rules when the recommendation is below the current replicas.
    #[serde(default)]
    pub scale_down: ScalingRules,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior {
            scale_up: ScalingRules::scale_up_default(),
            scale_down: ScalingRules::scale_down_default(),
        }
    }
}

/// `--horizontal-pod-autoscaler-downscale-stabilization`: 5 minutes.
pub const DEFAULT_DOWNSCALE_STABILIZATION: Nanos = Nanos::from_secs(5 * 60);

/// Scale-up default policies: 100 % and 4 pods, each per 15 s (the larger wins).
pub const fn default_scale_up_policies() -> [ScalingPolicy; 2] {
    [
        ScalingPolicy::percent(100, Nanos::from_secs(15)),
        ScalingPolicy::pods(4, Nanos::from_secs(15)),
    ]
}

/// Scale-down default policy: 100 % per 15 s, i.e. straight to the recommendation.
pub const fn default_scale_down_policies() -> [ScalingPolicy; 1] {
    [ScalingPolicy::percent(100, Nanos::from_secs(15))]
}

/// A HorizontalPodAutoscaler: its `autoscaling/v2` spec plus the
/// kube-controller-manager flags that shape it.
///
/// Defaults (Kubernetes'): `sync_period` 15 s, `tolerance` 0.1,
/// `cpu_initialization_period` 5 min, `initial_readiness_delay` 30 s,
/// `min_replicas` 1, `metrics` = CPU `Utilization` 80 %, [`Behavior::default`].
/// `max_replicas` has no default in Kubernetes (it is required); `Default`
/// uses 10 and a config file must state it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HpaConfig {
    /// Lower bound on replicas (default 1; 0 only with an `Object` metric, as
    /// with the `HPAScaleToZero` feature gate).
    #[serde(default = "default_min_replicas")]
    pub min_replicas: u32,
    /// Upper bound on replicas; required.
    pub max_replicas: u32,
    /// Metric sources; the largest recommendation wins (default CPU 80 %).
    #[serde(default = "default_metrics")]
    pub metrics: Vec<MetricSpec>,
    /// Container names of the pod template in the index order the metrics
    /// view uses; `ContainerResource` names are looked up here once.
    #[serde(default)]
    pub pod_containers: Vec<String>,
    /// Scaling behaviour per direction.
    #[serde(default)]
    pub behavior: Behavior,
    /// `--horizontal-pod-autoscaler-sync-period` (15 s).
    #[serde(default = "default_sync_period")]
    pub sync_period: Nanos,
    /// `--horizontal-pod-autoscaler-tolerance` (0.1): no action while
    /// |ratio − 1| ≤ tolerance, unless a direction sets its own.
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period` (5 min).
    #[serde(default = "default_cpu_initialization_period")]
    pub cpu_initialization_period: Nanos,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay` (30 s).
    #[serde(default = "default_initial_readiness_delay")]
    pub initial_readiness_delay: Nanos,
}

fn default_min_replicas() -> u32 {
    1
}
fn default_metrics() -> Vec<MetricSpec> {
    vec![MetricSpec::cpu_utilization(80)]
}
fn default_sync_period() -> Nanos {
    Nanos::from_secs(15)
}
fn default_tolerance() -> f64 {
    0.1
}
fn default_cpu_initialization_period() -> Nanos {
    5 * Nanos::MINUTE
}
fn default_initial_readiness_delay() -> Nanos {
    Nanos::from_secs(30)
}

impl Default for HpaConfig {
    fn default() -> Self {
        HpaConfig {
            min_replicas: default_min_replicas(),
            max_replicas: 10,
            metrics: default_metrics(),
            pod_containers: Vec::new(),
            behavior: Behavior::default(),
            sync_period: default_sync_period(),
            tolerance: default_tolerance(),
            cpu_initialization_period: default_cpu_initialization_period(),
            initial_readiness_delay: default_initial_readiness_delay(),
        }
    }
}

/// Kubernetes' ceiling on `periodSeconds`.
const MAX_POLICY_PERIOD: Nanos = Nanos::from_secs(30 * 60);
/// Kubernetes' ceiling on `stabilizationWindowSeconds`.
const MAX_STABILIZATION_WINDOW: Nanos = Nanos::HOUR;

/// Most policies one direction may list. Kubernetes' API sets no maximum;
/// this crate does, because every sync walks each policy over its period's
/// scale events, and real HPAs list one to three.
pub const MAX_POLICIES: usize = 10;

/// Most syncs the history may span: the longest stabilization window or
/// policy period divided by `sync_period`. [`Hpa`](super::Hpa) keeps one
/// entry per sync over that span in each of its three rings, allocated up
/// front, so a 1 ns sync period with the default 300 s window would ask for
/// terabytes; 100 000 entries is 1.6 MB a ring, and allows a 3 ms sync
/// period with the defaults, 36 ms with a 1 h window.
pub const MAX_HISTORY_SYNCS: u64 = 100_000;

impl HpaConfig {
    /// Checks every rule the API server and the controller would enforce.
    ///
    /// ```
    /// use stormbreak_policy::autoscale::HpaConfig;
    /// let bad = HpaConfig { min_replicas: 5, max_replicas: 3, ..HpaConfig::default() };
    /// assert_eq!(
    ///     bad.validate().unwrap_err().to_string(),
    ///     "autoscale: max_replicas must be ≥ min_replicas (5), got 3"
    /// );
    /// ```
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.sync_period == Nanos::ZERO {
            return Err(FieldError::new(FAMILY, "sync_period", "> 0", "0"));
        }
        check_tolerance("tolerance", self.tolerance)?;
        let has_object = self
            .metrics
            .iter()
            .any(|m| matches!(m, MetricSpec::Object { .. }));
        if self.min_replicas == 0 && !has_object {
            return Err(FieldError::new(
                FAMILY,
                "min_replicas",
                "≥ 1 unless an Object metric is configured (scale to zero)",
                "0",
            ));
        }
        if self.max_replicas == 0 {
            return Err(FieldError::new(FAMILY, "max_replicas", "≥ 1", "0"));
        }
        if self.max_replicas < self.min_replicas {
            return Err(FieldError::new(
                FAMILY,
                "max_replicas",
                format!("≥ min_replicas ({})", self.min_replicas),
                self.max_replicas,
            ));
        }
        if self.max_replicas > i32::MAX as u32 {
            return Err(FieldError::new(
                FAMILY,
                "max_replicas",
                format!("≤ {} (int32)", i32::MAX),
                self.max_replicas,
            ));
        }
        if self.metrics.is_empty() {
            return Err(FieldError::new(
                FAMILY,
                "metrics",
                "a list of at least one metric source (omit the field for CPU Utilization 80)",
                "[]",
            ));
        }
        for (i, metric) in self.metrics.iter().enumerate() {
            self.check_metric(i, metric)?;
        }
        check_rules("behavior.scale_up", &self.behavior.scale_up)?;
        check_rules("behavior.scale_down", &self.behavior.scale_down)?;
        self.check_history()
    }

    /// The history's span in syncs stays within [`MAX_HISTORY_SYNCS`]
    /// (windows and periods with the defaults filled in, as `Hpa::new` will).
    fn check_history(&self) -> Result<(), FieldError> {
        let (up, down) = super::rules_of(&self.behavior);
        let span = up
            .stabilization_window
            .max(down.stabilization_window)
            .max(up.longest_period())
            .max(down.longest_period());
        if span.div_ceil(self.sync_period) <= MAX_HISTORY_SYNCS {
            return Ok(());
        }
        let shortest = Nanos::from_nanos(span.as_nanos().div_ceil(MAX_HISTORY_SYNCS));
        Err(FieldError::new(
            FAMILY,
            "sync_period",
            format!(
                "at least {} (the history keeps one entry per sync over the longest \
                 stabilization window or policy period, {}, and at most {MAX_HISTORY_SYNCS})",
                crate::units::format_duration(shortest),
                crate::units::format_duration(span),
            ),
            crate::units::format_duration(self.sync_period),
        ))
    }

    /// Index of a container name in [`pod_containers`](Self::pod_containers).
    pub fn container_index(&self, name: &str) -> Option<usize> {
        self.pod_containers.iter().position(|c| c == name)
    }

    fn check_metric(&self, i: usize, metric: &MetricSpec) -> Result<(), FieldError> {
        let at = |field: &str| format!("metrics[{i}].{field}");
        let (source, target) = match metric {
            MetricSpec::Resource { target, .. } => ("Resource", target),
            MetricSpec::ContainerResource {
                container, target, ..
            } => {
                if self.container_index(container).is_none() {
                    return Err(FieldError::new(
                        FAMILY,
                        at("container"),
                        format!("one of pod_containers {:?}", self.pod_containers),
                        format!("{container:?}"),
                    ));
                }
                ("ContainerResource", target)
            }
            MetricSpec::Pods { metric, target } | MetricSpec::Object { metric, target } => {
                if metric.is_empty() {
                    return Err(FieldError::new(
                        FAMILY,
                        at("metric"),
                        "a non-empty name",
                        "\"\"",
                    ));
                }
                let source = if matches!(self.metrics[i], MetricSpec::Pods { .. }) {
                    "Pods"
                } else {
                    "Object"
                };
                (source, target)
            }
        };
        let allowed = matches!(
            (metric, target),
            (
                MetricSpec::Resource { .. } | MetricSpec::ContainerResource { .. },
                MetricTarget::Utilization { .. } | MetricTarget::AverageValue { .. },
            ) | (MetricSpec::Pods { .. }, MetricTarget::AverageValue { .. })
                | (
                    MetricSpec::Object { .. },
                    MetricTarget::Value { .. } | MetricTarget::AverageValue { .. },
                )
        );
        if !allowed {
            let expected = match metric {
                MetricSpec::Resource { .. } | MetricSpec::ContainerResource { .. } => {
                    "Utilization or AverageValue"
                }
                MetricSpec::Pods { .. } => "AverageValue",
                MetricSpec::Object { .. } => "Value or AverageValue",
            };
            return Err(FieldError::new(
                FAMILY,
                at("target.type"),
                format!("{expected} for {source} metrics"),
                target_kind(target),
            ));
        }
        match *target {
            MetricTarget::Utilization {
                average_utilization: 0,
            } => Err(FieldError::new(
                FAMILY,
                at("target.average_utilization"),
                "≥ 1",
                "0",
            )),
            MetricTarget::AverageValue { average_value } if !positive(average_value) => {
                Err(FieldError::new(
                    FAMILY,
                    at("target.average_value"),
                    "a finite number > 0",
                    average_value,
                ))
            }
            MetricTarget::Value { value } if !positive(value) => Err(FieldError::new(
                FAMILY,
                at("target.value"),
                "a finite number > 0",
                value,
            )),
            _ => Ok(()),
        }
    }
}

fn target_kind(target: &MetricTarget) -> &'static str {
    match target {
        MetricTarget::Utilization { .. } => "Utilization",
        MetricTarget::AverageValue { .. } => "AverageValue",
        MetricTarget::Value { .. } => "Value",
    }
}

fn positive(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

fn check_tolerance(field: &str, t: f64) -> Result<(), FieldError> {
    if t.is_finite() && t >= 0.0 {
        Ok(())
    } else {
        Err(FieldError::new(
            FAMILY,
            field.to_owned(),
            "a finite number ≥ 0",
            t,
        ))
    }
}

fn check_rules(path: &str, rules: &ScalingRules) -> Result<(), FieldError> {
    if let Some(w) = rules.stabilization_window
        && w > MAX_STABILIZATION_WINDOW
    {
        return Err(FieldError::new(
            FAMILY,
            format!("{path}.stabilization_window"),
            "≤ 1h",
            crate::units::format_duration(w),
        ));
    }
    if let Some(t) = rules.tolerance {
        check_tolerance(&format!("{path}.tolerance"), t)?;
    }
    if let Some(policies) = &rules.policies {
        if policies.is_empty() {
            return Err(FieldError::new(
                FAMILY,
                format!("{path}.policies"),
                "a list of at least one policy when given (omit it for the defaults)",
                "[]",
            ));
        }
        if policies.len() > MAX_POLICIES {
            return Err(FieldError::new(
                FAMILY,
                format!("{path}.policies"),
                format!("a list of at most {MAX_POLICIES} policies"),
                format!("{} policies", policies.len()),
            ));
        }
        for (i, p) in policies.iter().enumerate() {
            if p.value == 0 {
                return Err(FieldError::new(
                    FAMILY,
                    format!("{path}.policies[{i}].value"),
                    "≥ 1",
                    "0",
                ));
            }
            if p.period == Nanos::ZERO || p.period > MAX_POLICY_PERIOD {
                return Err(FieldError::new(
                    FAMILY,
                    format!("{path}.policies[{i}].period"),
                    "in (0s, 30m]",
                    crate::units::format_duration(p.period),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<HpaConfig, serde_json::Error> {
        serde_json::from_str(json)
    }

    fn error_of(config: HpaConfig) -> String {
        config.validate().unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_the_published_ones() {
        let c = HpaConfig::default();
        assert_eq!(c.sync_period, Nanos::from_secs(15));
        assert_eq!(c.tolerance, 0.1);
        assert_eq!(c.min_replicas, 1);
        assert_eq!(c.cpu_initialization_period, 5 * Nanos::MINUTE);
        assert_eq!(c.initial_readiness_delay, Nanos::from_secs(30));
        assert_eq!(c.metrics, vec![MetricSpec::cpu_utilization(80)]);
        let up = &c.behavior.scale_up;
        assert_eq!(up.stabilization_window, Some(Nanos::ZERO));
        assert_eq!(
            up.policies.as_deref(),
            Some(
                &[
                    ScalingPolicy::percent(100, Nanos::from_secs(15)),
                    ScalingPolicy::pods(4, Nanos::from_secs(15))
                ][..]
            )
        );
        let down = &c.behavior.scale_down;
        assert_eq!(down.stabilization_window, Some(Nanos::from_secs(300)));
        assert_eq!(
            down.policies.as_deref(),
            Some(&[ScalingPolicy::percent(100, Nanos::from_secs(15))][..])
        );
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn a_manifest_translates_field_by_field() {
        let c = parse(
            r#"{
                "min_replicas": 2,
                "max_replicas": 40,
                "pod_containers": ["app", "istio-proxy"],
                "metrics": [
                    {"type": "ContainerResource", "name": "cpu", "container": "app",
                     "target": {"type": "Utilization", "average_utilization": 60}},
                    {"type": "Pods", "metric": "sidecar_saturation",
                     "target": {"type": "AverageValue", "average_value": 0.8}},
                    {"type": "Object", "metric": "queue_depth",
                     "target": {"type": "Value", "value": 100}}
                ],
                "behavior": {
                    "scale_down": {
                        "stabilization_window": "60s",
                        "select_policy": "Min",
                        "policies": [
                            {"type": "Percent", "value": 10, "period": "60s"},
                            {"type": "Pods", "value": 5, "period": "1m"}
                        ]
                    }
                }
            }"#,
        )
        .unwrap();
        assert_eq!(c.min_replicas, 2);
        assert_eq!(
            c.metrics[0],
            MetricSpec::ContainerResource {
                name: ResourceName::Cpu,
                container: "app".into(),
                target: MetricTarget::Utilization {
                    average_utilization: 60
                },
            }
        );
        assert_eq!(
            c.metrics[1],
            MetricSpec::Pods {
                metric: "sidecar_saturation".into(),
                target: MetricTarget::AverageValue { average_value: 0.8 },
            }
        );
        assert_eq!(
            c.behavior.scale_down.stabilization_window,
            Some(Nanos::from_secs(60))
        );
        assert_eq!(c.behavior.scale_down.select_policy, Some(SelectPolicy::Min));
        assert_eq!(
            c.behavior.scale_down.policies.as_deref(),
            Some(
                &[
                    ScalingPolicy::percent(10, Nanos::from_secs(60)),
                    ScalingPolicy::pods(5, Nanos::from_secs(60))
                ][..]
            )
        );
        // An omitted direction is left to the defaults, field by field.
        assert_eq!(c.behavior.scale_up, ScalingRules::default());
        assert_eq!(c.sync_period, Nanos::from_secs(15));
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn omitted_metrics_default_to_cpu_80() {
        let c = parse(r#"{"max_replicas": 5}"#).unwrap();
        assert_eq!(c.metrics, vec![MetricSpec::cpu_utilization(80)]);
        assert_eq!(c.min_replicas, 1);
    }

    #[test]
    fn unknown_fields_are_rejected_at_every_level() {
        assert!(parse(r#"{"max_replicas": 5, "maxReplicas": 5}"#).is_err());
        assert!(parse(
            r#"{"max_replicas": 5, "metrics": [{"type": "Resource", "name": "cpu", "container": "app",
               "target": {"type": "Utilization", "average_utilization": 60}}]}"#
        )
        .is_err());
        assert!(parse(
            r#"{"max_replicas": 5, "behavior": {"scale_up": {"stabilization_window_seconds": 0}}}"#
        )
        .is_err());
        assert!(
            parse(
                r#"{"max_replicas": 5, "metrics": [{"type": "External", "metric": "x",
               "target": {"type": "Value", "value": 1}}]}"#
            )
            .is_err()
        );
    }

    #[test]
    fn max_replicas_is_required_in_files() {
        let err = parse(r#"{"min_replicas": 1}"#).unwrap_err().to_string();
        assert!(err.contains("max_replicas"), "{err}");
    }

    #[test]
    fn replica_bounds_are_checked() {
        let c = |min, max| HpaConfig {
            min_replicas: min,
            max_replicas: max,
            ..HpaConfig::default()
        };
        assert_eq!(
            error_of(c(0, 5)),
            "autoscale: min_replicas must be ≥ 1 unless an Object metric is configured (scale to zero), got 0"
        );
        assert_eq!(
            error_of(c(5, 3)),
            "autoscale: max_replicas must be ≥ min_replicas (5), got 3"
        );
        let zero_with_object = HpaConfig {
            min_replicas: 0,
            metrics: vec![MetricSpec::Object {
                metric: "queue".into(),
                target: MetricTarget::Value { value: 10.0 },
            }],
            ..HpaConfig::default()
        };
        assert_eq!(zero_with_object.validate(), Ok(()));
    }

    #[test]
    fn each_source_accepts_only_its_target_types() {
        let with = |m: MetricSpec| HpaConfig {
            metrics: vec![m],
            pod_containers: vec!["app".into()],
            ..HpaConfig::default()
        };
        assert_eq!(
            error_of(with(MetricSpec::Pods {
                metric: "rps".into(),
                target: MetricTarget::Utilization {
                    average_utilization: 50
                },
            })),
            "autoscale: metrics[0].target.type must be AverageValue for Pods metrics, got Utilization"
        );
        assert_eq!(
            error_of(with(MetricSpec::Resource {
                name: ResourceName::Cpu,
                target: MetricTarget::Value { value: 1.0 },
            })),
            "autoscale: metrics[0].target.type must be Utilization or AverageValue for Resource metrics, got Value"
        );
        assert_eq!(
            error_of(with(MetricSpec::Object {
                metric: "q".into(),
                target: MetricTarget::Utilization {
                    average_utilization: 50
                },
            })),
            "autoscale: metrics[0].target.type must be Value or AverageValue for Object metrics, got Utilization"
        );
        assert_eq!(
            error_of(with(MetricSpec::cpu_utilization(0))),
            "autoscale: metrics[0].target.average_utilization must be ≥ 1, got 0"
        );
        assert_eq!(
            error_of(with(MetricSpec::Pods {
                metric: "rps".into(),
                target: MetricTarget::AverageValue {
                    average_value: -1.0
                },
            })),
            "autoscale: metrics[0].target.average_value must be a finite number > 0, got -1"
        );
    }

    #[test]
    fn container_names_must_resolve() {
        let c = HpaConfig {
            pod_containers: vec!["app".into()],
            metrics: vec![MetricSpec::ContainerResource {
                name: ResourceName::Cpu,
                container: "istio-proxy".into(),
                target: MetricTarget::Utilization {
                    average_utilization: 60,
                },
            }],
            ..HpaConfig::default()
        };
        assert_eq!(
            error_of(c),
            "autoscale: metrics[0].container must be one of pod_containers [\"app\"], got \"istio-proxy\""
        );
    }

    #[test]
    fn behavior_limits_match_the_api() {
        let with_down = |rules: ScalingRules| HpaConfig {
            behavior: Behavior {
                scale_up: ScalingRules::default(),
                scale_down: rules,
            },
            ..HpaConfig::default()
        };
        assert_eq!(
            error_of(with_down(ScalingRules {
                policies: Some(vec![]),
                ..ScalingRules::default()
            })),
            "autoscale: behavior.scale_down.policies must be a list of at least one policy when given (omit it for the defaults), got []"
        );
        assert_eq!(
            error_of(with_down(ScalingRules {
                policies: Some(vec![ScalingPolicy::pods(4, 31 * Nanos::MINUTE)]),
                ..ScalingRules::default()
            })),
            "autoscale: behavior.scale_down.policies[0].period must be in (0s, 30m], got 31m"
        );
        assert_eq!(
            error_of(with_down(ScalingRules {
                policies: Some(vec![ScalingPolicy::percent(0, Nanos::from_secs(15))]),
                ..ScalingRules::default()
            })),
            "autoscale: behavior.scale_down.policies[0].value must be ≥ 1, got 0"
        );
        assert_eq!(
            error_of(with_down(ScalingRules {
                stabilization_window: Some(Nanos::from_secs(3601)),
                ..ScalingRules::default()
            })),
            "autoscale: behavior.scale_down.stabilization_window must be ≤ 1h, got 1h1s"
        );
        assert_eq!(
            error_of(with_down(ScalingRules {
                tolerance: Some(-0.1),
                ..ScalingRules::default()
            })),
            "autoscale: behavior.scale_down.tolerance must be a finite number ≥ 0, got -0.1"
        );
    }

    #[test]
    fn a_direction_lists_at_most_ten_policies() {
        let with_up = |n: usize| HpaConfig {
            behavior: Behavior {
                scale_up: ScalingRules {
                    policies: Some(vec![ScalingPolicy::pods(1, Nanos::from_secs(15)); n]),
                    ..ScalingRules::default()
                },
                scale_down: ScalingRules::default(),
            },
            ..HpaConfig::default()
        };
        assert_eq!(with_up(MAX_POLICIES).validate(), Ok(()));
        assert_eq!(
            error_of(with_up(MAX_POLICIES + 1)),
            "autoscale: behavior.scale_up.policies must be a list of at most 10 policies, got 11 policies"
        );
    }

    #[test]
    fn the_history_spans_a_bounded_number_of_syncs() {
        // Default 300 s down window: 3 ms syncs are 100 000 entries, 2 ms too many.
        let with_sync = |sync: Nanos| HpaConfig {
            sync_period: sync,
            ..HpaConfig::default()
        };
        assert_eq!(with_sync(Nanos::from_millis(3)).validate(), Ok(()));
        assert_eq!(
            error_of(with_sync(Nanos::NANOSECOND)),
            "autoscale: sync_period must be at least 3ms (the history keeps one entry per sync \
             over the longest stabilization window or policy period, 5m, and at most 100000), got 1ns"
        );
        // An omitted window still counts with its default; a longer policy period counts too.
        let long_period = HpaConfig {
            sync_period: Nanos::from_millis(3),
            behavior: Behavior {
                scale_up: ScalingRules {
                    policies: Some(vec![ScalingPolicy::pods(1, 30 * Nanos::MINUTE)]),
                    ..ScalingRules::default()
                },
                scale_down: ScalingRules::default(),
            },
            ..HpaConfig::default()
        };
        assert!(error_of(long_period).contains("at least 18ms"));
    }

    #[test]
    fn controller_flags_are_checked() {
        let c = HpaConfig {
            sync_period: Nanos::ZERO,
            ..HpaConfig::default()
        };
        assert_eq!(error_of(c), "autoscale: sync_period must be > 0, got 0");
        let c = HpaConfig {
            tolerance: f64::NAN,
            ..HpaConfig::default()
        };
        assert_eq!(
            error_of(c),
            "autoscale: tolerance must be a finite number ≥ 0, got NaN"
        );
        let c = HpaConfig {
            metrics: vec![],
            ..HpaConfig::default()
        };
        assert_eq!(
            error_of(c),
            "autoscale: metrics must be a list of at least one metric source (omit the field for CPU Utilization 80), got []"
        );
    }
}
