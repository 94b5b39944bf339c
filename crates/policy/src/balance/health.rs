//! Active health checking: consecutive probe results with thresholds.

use super::FAMILY;
use crate::{FieldError, Nanos};
use serde::{Deserialize, Serialize};

/// Parameters of active health checks, and of a [`HealthTable`].
///
/// Defaults follow Envoy's and Kubernetes' common settings: probe
/// `path` `/healthz` every 5 s with a 1 s timeout; 3 failures in a row mark
/// an endpoint unhealthy (`unhealthy_threshold`, Envoy's and Kubernetes'
/// `failureThreshold` of 3), 2 successes in a row mark it healthy again.
///
/// ```
/// use stormbreak_policy::balance::HealthCheckConfig;
/// let c: HealthCheckConfig = toml::from_str(r#"path = "/ready"
/// interval = "2s""#).unwrap();
/// assert_eq!((c.path.as_str(), c.unhealthy_threshold), ("/ready", 3));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HealthCheckConfig {
    /// Path probed with `GET`; a 2xx answer is a success.
    pub path: String,
    /// Time between probes of one endpoint.
    pub interval: Nanos,
    /// Time a probe may take; longer is a failure. Less than `interval`.
    pub timeout: Nanos,
    /// Successes in a row that mark an unhealthy endpoint healthy; ≥ 1.
    pub healthy_threshold: u32,
    /// Failures in a row that mark a healthy endpoint unhealthy; ≥ 1.
    pub unhealthy_threshold: u32,
}

impl Default for HealthCheckConfig {
    fn default() -> Self {
        HealthCheckConfig {
            path: "/healthz".to_owned(),
            interval: 5 * Nanos::SECOND,
            timeout: Nanos::SECOND,
            healthy_threshold: 2,
            unhealthy_threshold: 3,
        }
    }
}

impl HealthCheckConfig {
    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !self.path.starts_with('/') {
            return Err(FieldError::new(
                FAMILY,
                "path",
                "a path starting with '/'",
                &self.path,
            ));
        }
        if self.interval < Nanos::from_millis(10) {
            return Err(FieldError::new(FAMILY, "interval", "≥ 10ms", self.interval));
        }
        if self.timeout.is_zero() || self.timeout >= self.interval {
            return Err(FieldError::new(
                FAMILY,
                "timeout",
                format!("> 0 and < interval ({})", self.interval),
                self.timeout,
            ));
        }
        if self.healthy_threshold == 0 {
            return Err(FieldError::new(FAMILY, "healthy_threshold", "≥ 1", 0));
        }
        if self.unhealthy_threshold == 0 {
            return Err(FieldError::new(FAMILY, "unhealthy_threshold", "≥ 1", 0));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    healthy: bool,
    streak: u32,
}

/// The health of a fixed set of endpoints, from probe results.
///
/// Every endpoint starts healthy, so a restart does not take a whole
/// cluster out until its first probes come back. A healthy endpoint turns
/// unhealthy after `unhealthy_threshold` failed probes in a row; an
/// unhealthy one turns healthy after `healthy_threshold` successes in a
/// row. Storage is allocated in [`new`](Self::new).
///
/// ```
/// use stormbreak_policy::balance::{HealthCheckConfig, HealthTable};
/// let cfg = HealthCheckConfig { unhealthy_threshold: 2, healthy_threshold: 1, ..Default::default() };
/// let mut t = HealthTable::new(&cfg, 1).unwrap();
/// assert_eq!(t.on_probe(0, false), None);
/// assert_eq!(t.on_probe(0, false), Some(false), "second failure: unhealthy");
/// assert_eq!(t.on_probe(0, true), Some(true));
/// ```
#[derive(Clone, Debug)]
pub struct HealthTable {
    healthy_threshold: u32,
    unhealthy_threshold: u32,
    endpoints: Vec<State>,
}

impl HealthTable {
    /// A table of `endpoints` healthy endpoints.
    pub fn new(config: &HealthCheckConfig, endpoints: usize) -> Result<Self, FieldError> {
        config.validate()?;
        if endpoints > super::OutlierDetector::MAX_ENDPOINTS {
            return Err(FieldError::new(
                FAMILY,
                "endpoints",
                "at most 65536",
                endpoints,
            ));
        }
        Ok(HealthTable {
            healthy_threshold: config.healthy_threshold,
            unhealthy_threshold: config.unhealthy_threshold,
            endpoints: vec![
                State {
                    healthy: true,
                    streak: 0
                };
                endpoints
            ],
        })
    }

    /// The table for a new endpoint list in which endpoint `j` was
    /// endpoint `from[j]` of this one (its health and streak carried over)
    /// or is new (`None`: healthy, as [`new`](Self::new) starts every
    /// endpoint). An index past this table's endpoints counts as new.
    ///
    /// ```
    /// use stormbreak_policy::balance::{HealthCheckConfig, HealthTable};
    /// let cfg = HealthCheckConfig { unhealthy_threshold: 1, ..Default::default() };
    /// let mut t = HealthTable::new(&cfg, 2).unwrap();
    /// let _ = t.on_probe(1, false);
    /// let t = t.carried(&[Some(1), None]).unwrap();
    /// assert!(!t.is_healthy(0) && t.is_healthy(1));
    /// ```
    pub fn carried(&self, from: &[Option<usize>]) -> Result<Self, FieldError> {
        if from.len() > super::OutlierDetector::MAX_ENDPOINTS {
            return Err(FieldError::new(
                FAMILY,
                "endpoints",
                "at most 65536",
                from.len(),
            ));
        }
        let fresh = State {
            healthy: true,
            streak: 0,
        };
        Ok(HealthTable {
            healthy_threshold: self.healthy_threshold,
            unhealthy_threshold: self.unhealthy_threshold,
            endpoints: from
                .iter()
                .map(|i| {
                    i.and_then(|i| self.endpoints.get(i).copied())
                        .unwrap_or(fresh)
                })
                .collect(),
        })
    }

    /// Is endpoint `i` healthy? Out-of-range endpoints are not.
    pub fn is_healthy(&self, i: usize) -> bool {
        self.endpoints.get(i).is_some_and(|s| s.healthy)
    }

    /// Records one probe of endpoint `i`; returns the new health when it changed.
    #[must_use = "a health transition should be logged or counted"]
    pub fn on_probe(&mut self, i: usize, ok: bool) -> Option<bool> {
        let s = self.endpoints.get_mut(i)?;
        if ok == s.healthy {
            // A result that agrees with the state breaks any opposite streak.
            s.streak = 0;
            return None;
        }
        s.streak = s.streak.saturating_add(1);
        let needed = if s.healthy {
            self.unhealthy_threshold
        } else {
            self.healthy_threshold
        };
        if s.streak < needed {
            return None;
        }
        s.healthy = ok;
        s.streak = 0;
        Some(ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_fields_are_named() {
        let d = HealthCheckConfig::default();
        let bad = [
            HealthCheckConfig {
                path: "healthz".into(),
                ..d.clone()
            },
            HealthCheckConfig {
                interval: Nanos::from_millis(1),
                ..d.clone()
            },
            HealthCheckConfig {
                timeout: d.interval,
                ..d.clone()
            },
            HealthCheckConfig {
                healthy_threshold: 0,
                ..d.clone()
            },
            HealthCheckConfig {
                unhealthy_threshold: 0,
                ..d.clone()
            },
        ];
        let fields: Vec<_> = bad
            .iter()
            .map(|c| c.validate().unwrap_err().field().to_owned())
            .collect();
        assert_eq!(
            fields,
            [
                "path",
                "interval",
                "timeout",
                "healthy_threshold",
                "unhealthy_threshold"
            ]
        );
    }

    #[test]
    fn thresholds_need_streaks_and_an_agreeing_result_breaks_one() {
        let cfg = HealthCheckConfig {
            unhealthy_threshold: 3,
            healthy_threshold: 2,
            ..Default::default()
        };
        let mut t = HealthTable::new(&cfg, 2).unwrap();
        assert!(
            t.is_healthy(0) && t.is_healthy(1),
            "endpoints start healthy"
        );
        assert_eq!(t.on_probe(0, false), None);
        assert_eq!(t.on_probe(0, false), None);
        assert_eq!(t.on_probe(0, true), None, "streak broken");
        assert_eq!(t.on_probe(0, false), None);
        assert_eq!(t.on_probe(0, false), None);
        assert_eq!(t.on_probe(0, false), Some(false));
        assert!(!t.is_healthy(0) && t.is_healthy(1));
        assert_eq!(t.on_probe(0, true), None);
        assert_eq!(t.on_probe(0, false), None);
        assert_eq!(t.on_probe(0, true), None);
        assert_eq!(t.on_probe(0, true), Some(true));
        assert_eq!(t.on_probe(9, false), None);
        assert!(!t.is_healthy(9));
    }
}
