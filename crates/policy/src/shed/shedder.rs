//! Operator rules and saturation shedding, applied in the order a gateway applies them.

use super::FAMILY;
use super::{
    AddRuleError, Criticality, Decision, SaturationConfig, SaturationShedder, ShedRule, ShedRules,
};
use crate::FieldError;
use serde::{Deserialize, Serialize};

/// Config of a [`Shedder`].
///
/// Defaults: [`SaturationConfig::default`] (sheddable 0.8, sheddable_plus 0.9,
/// critical 1.0, critical_plus 1.2; 503 with `Retry-After: 1s`), room for 64
/// operator rules, none set.
///
/// ```
/// use stormbreak_policy::shed::ShedConfig;
/// let cfg: ShedConfig = serde_json::from_str(r#"{
///     "saturation": {"status": 429, "thresholds": {"sheddable": 0.7}},
///     "rules": [{"route": 7, "status": 403}]
/// }"#).unwrap();
/// assert_eq!(cfg.saturation.thresholds.sheddable, 0.7);
/// assert_eq!(cfg.max_rules, 64);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShedConfig {
    /// Class thresholds and the answer given when saturation sheds.
    pub saturation: SaturationConfig,
    /// Capacity of the operator rule table, fixed at construction.
    pub max_rules: usize,
    /// Rules in force from the start; more can be added at runtime.
    pub rules: Vec<ShedRule>,
}

impl Default for ShedConfig {
    fn default() -> Self {
        ShedConfig {
            saturation: SaturationConfig::default(),
            max_rules: 64,
            rules: Vec::new(),
        }
    }
}

impl ShedConfig {
    /// Validates every part; rule errors are reported as `rules[i].field`.
    pub fn validate(&self) -> Result<(), FieldError> {
        self.build().map(|_| ())
    }

    fn build(&self) -> Result<Shedder, FieldError> {
        let saturation =
            SaturationShedder::new(&self.saturation).map_err(|e| e.nested("saturation."))?;
        let mut rules = ShedRules::with_capacity(self.max_rules)?;
        for (i, rule) in self.rules.iter().enumerate() {
            rules.add_rule(*rule).map_err(|e| match e {
                AddRuleError::Invalid(e) => e.nested(&format!("rules[{i}].")),
                AddRuleError::Full { capacity } => FieldError::new(
                    FAMILY,
                    "rules",
                    format!("at most max_rules ({capacity}) rules"),
                    self.rules.len(),
                ),
            })?;
        }
        Ok(Shedder { rules, saturation })
    }
}

/// Gateway-side shedding: operator [`ShedRules`] first, then [`SaturationShedder`].
///
/// Source laws: operator shed rules at the load balancer (the 2026-08-17
/// incident's 403 shed of token requests) and the Google SRE book, ch. 21
/// "Handling Overload" (criticality). Defaults: see [`ShedConfig`].
///
/// Rules go first because they are the operator's explicit override: a route
/// shed with 403 must stay shed even when the saturation signal looks calm.
///
/// ```
/// use stormbreak_policy::shed::{Criticality, Decision, ShedConfig, ShedRule, Shedder};
/// let mut shedder = Shedder::new(&ShedConfig::default()).unwrap();
/// assert!(shedder.decide(7, Criticality::Critical, 0.5).is_admit());
/// shedder.add_rule(ShedRule { route: 7, class: None, status: 403, retry_after: None }).unwrap();
/// assert_eq!(
///     shedder.decide(7, Criticality::Critical, 0.5),
///     Decision::Reject { status: 403, retry_after: None }
/// );
/// ```
#[derive(Clone, Debug)]
pub struct Shedder {
    rules: ShedRules,
    saturation: SaturationShedder,
}

impl Shedder {
    /// Builds the shedder, with the config's initial rules installed.
    pub fn new(config: &ShedConfig) -> Result<Self, FieldError> {
        config.build()
    }

    /// Admit or reject one request of `class` to `route` at the current `saturation`.
    #[inline]
    pub fn decide(&self, route: u32, class: Criticality, saturation: f64) -> Decision {
        match self.rules.lookup(route, class) {
            Some(rejection) => rejection,
            None => self.saturation.decide(class, saturation),
        }
    }

    /// Adds or replaces an operator rule; see [`ShedRules::add_rule`].
    pub fn add_rule(&mut self, rule: ShedRule) -> Result<Option<ShedRule>, AddRuleError> {
        self.rules.add_rule(rule)
    }

    /// Removes an operator rule; see [`ShedRules::remove_rule`].
    pub fn remove_rule(&mut self, route: u32, class: Option<Criticality>) -> Option<ShedRule> {
        self.rules.remove_rule(route, class)
    }

    /// The operator rules in force.
    pub fn rules(&self) -> &ShedRules {
        &self.rules
    }

    /// The saturation part.
    pub fn saturation(&self) -> &SaturationShedder {
        &self.saturation
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use Criticality::*;

    #[test]
    fn rules_override_a_calm_saturation_and_saturation_applies_elsewhere() {
        let cfg: ShedConfig = serde_json::from_str(
            r#"{"rules": [{"route": 7, "status": 403}, {"route": 2, "class": "sheddable", "status": 429, "retry_after": "5s"}]}"#,
        )
        .unwrap();
        let shedder = Shedder::new(&cfg).unwrap();
        let forbidden = Decision::Reject {
            status: 403,
            retry_after: None,
        };
        assert_eq!(shedder.decide(7, CriticalPlus, 0.0), forbidden);
        assert_eq!(
            shedder.decide(2, Sheddable, 0.0),
            Decision::Reject {
                status: 429,
                retry_after: Some(5 * Nanos::SECOND)
            }
        );
        assert!(shedder.decide(2, Critical, 0.0).is_admit());
        // No rule for route 3: the default saturation law applies.
        assert!(shedder.decide(3, Critical, 0.95).is_admit());
        assert_eq!(
            shedder.decide(3, Sheddable, 0.95),
            Decision::Reject {
                status: 503,
                retry_after: Some(Nanos::SECOND)
            }
        );
    }

    #[test]
    fn add_and_remove_rules_at_runtime() {
        let mut shedder = Shedder::new(&ShedConfig::default()).unwrap();
        let rule = ShedRule {
            route: 1,
            class: None,
            status: 503,
            retry_after: Some(10 * Nanos::SECOND),
        };
        shedder.add_rule(rule).unwrap();
        assert!(!shedder.decide(1, Critical, 0.0).is_admit());
        assert_eq!(shedder.remove_rule(1, None), Some(rule));
        assert!(shedder.decide(1, Critical, 0.0).is_admit());
        assert!(shedder.rules().is_empty());
    }

    #[test]
    fn config_errors_name_the_nested_field() {
        let cfg: ShedConfig = serde_json::from_str(
            r#"{"rules": [{"route": 1, "status": 503}, {"route": 2, "status": 418}]}"#,
        )
        .unwrap();
        let e = cfg.validate().unwrap_err();
        assert_eq!(e.field(), "rules[1].status");
        assert_eq!(
            e.to_string(),
            "shed: rules[1].status must be 403, 429 or 503, got 418"
        );

        let cfg: ShedConfig = serde_json::from_str(r#"{"saturation": {"status": 403}}"#).unwrap();
        let e = cfg.validate().unwrap_err();
        assert_eq!(e.field(), "saturation.retry_after");
        assert!(
            e.to_string()
                .starts_with("shed: saturation.retry_after must be unset")
        );

        let cfg: ShedConfig = serde_json::from_str(
            r#"{"max_rules": 1, "rules": [{"route": 1, "status": 503}, {"route": 2, "status": 503}]}"#,
        )
        .unwrap();
        assert_eq!(
            cfg.validate().unwrap_err().to_string(),
            "shed: rules must be at most max_rules (1) rules, got 2"
        );
        assert!(serde_json::from_str::<ShedConfig>(r#"{"max_rule": 1}"#).is_err());
    }
}
