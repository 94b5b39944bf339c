//! The HPA a `[service.autoscaler]` table describes, built in one place so
//! that validation checks exactly the configuration the engine runs.

use stormbreak_policy::FieldError;
use stormbreak_policy::autoscale::{HpaConfig, MetricSpec, MetricTarget, ResourceName};

use super::{AutoscalerSpec, ScaleMetric};

/// The pod's containers in the order the engine's metrics view reports them.
pub(crate) const POD_CONTAINERS: [&str; 2] = ["app", "sidecar"];

impl AutoscalerSpec {
    /// The policy crate's configuration of this autoscaler: the metric as
    /// an `autoscaling/v2` metric source, `min`/`max`/`sync_period`, and
    /// `behavior` (Kubernetes' defaults when absent); the controller flags
    /// not in the table keep Kubernetes' defaults.
    pub fn hpa_config(&self) -> HpaConfig {
        // CPU targets are whole percents, as `averageUtilization` is.
        let pct = (self.target * 100.0).round() as u32;
        let metric = match self.metric {
            ScaleMetric::AppCpu => MetricSpec::ContainerResource {
                name: ResourceName::Cpu,
                container: POD_CONTAINERS[0].into(),
                target: MetricTarget::Utilization {
                    average_utilization: pct,
                },
            },
            ScaleMetric::PodCpu => MetricSpec::cpu_utilization(pct),
            ScaleMetric::SidecarSaturation => MetricSpec::Pods {
                metric: "sidecar_saturation".into(),
                target: MetricTarget::AverageValue {
                    average_value: self.target,
                },
            },
        };
        HpaConfig {
            min_replicas: self.min,
            max_replicas: self.max,
            metrics: vec![metric],
            pod_containers: POD_CONTAINERS.iter().map(|c| (*c).to_owned()).collect(),
            sync_period: self.sync_period,
            // `Behavior::default()` spells out Kubernetes' defaults.
            behavior: self.behavior.clone().unwrap_or_default(),
            ..HpaConfig::default()
        }
    }
}

/// The autoscaler table's field that a [`HpaConfig`] error names, dotted
/// for [`stormbreak_spans::Spans`] (`behavior.scale_up.policies.0.period`) and
/// as the user spells it (`behavior.scale_up.policies[0].period`).
pub(crate) fn table_field(e: &FieldError) -> (String, String) {
    let field = e.field();
    let spelt = if field == "min_replicas" {
        "min".to_owned()
    } else if field == "max_replicas" {
        "max".to_owned()
    } else if field.starts_with("metrics") {
        if field.ends_with(".container") {
            "metric".to_owned()
        } else {
            "target".to_owned()
        }
    } else {
        field.to_owned()
    };
    let dotted = spelt.replace('[', ".").replace(']', "");
    (dotted, spelt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormbreak_policy::Nanos;
    use stormbreak_policy::autoscale::{Behavior, ScalingPolicy, ScalingRules};

    fn spec(behavior: Option<Behavior>) -> AutoscalerSpec {
        AutoscalerSpec {
            metric: ScaleMetric::AppCpu,
            target: 0.6,
            min: 2,
            max: 10,
            pod_start: Nanos::from_secs(30),
            sync_period: Nanos::from_secs(15),
            behavior,
        }
    }

    #[test]
    fn without_behavior_the_hpa_runs_kubernetes_defaults() {
        let c = spec(None).hpa_config();
        assert_eq!(c.behavior, Behavior::default());
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn a_behavior_is_carried_unchanged() {
        let b = Behavior {
            scale_up: ScalingRules {
                policies: Some(vec![ScalingPolicy::pods(1, Nanos::from_secs(60))]),
                ..ScalingRules::default()
            },
            scale_down: ScalingRules::default(),
        };
        assert_eq!(spec(Some(b.clone())).hpa_config().behavior, b);
    }

    #[test]
    fn error_fields_become_the_tables_fields() {
        let mut s = spec(None);
        s.behavior = Some(Behavior {
            scale_up: ScalingRules {
                policies: Some(vec![
                    ScalingPolicy::pods(1, Nanos::from_secs(60)),
                    ScalingPolicy::pods(1, Nanos::ZERO),
                ]),
                ..ScalingRules::default()
            },
            scale_down: ScalingRules::default(),
        });
        let e = s.hpa_config().validate().unwrap_err();
        assert_eq!(
            table_field(&e),
            (
                "behavior.scale_up.policies.1.period".to_owned(),
                "behavior.scale_up.policies[1].period".to_owned()
            )
        );
        s.behavior = None;
        s.max = 1;
        let e = s.hpa_config().validate().unwrap_err();
        assert_eq!(table_field(&e).1, "max");
    }
}
