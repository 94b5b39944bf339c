//! Passive outlier ejection by consecutive failures.

use super::FAMILY;
use crate::{FieldError, Nanos};
use serde::{Deserialize, Serialize};

/// Parameters of an [`OutlierDetector`].
///
/// Defaults are Envoy's outlier detection defaults: `consecutive_failures`
/// 5 (`consecutive_5xx`), `base_ejection_time` 30 s, `max_ejection_time`
/// 300 s, `max_ejection_percent` 10.
///
/// ```
/// use stormbreak_policy::balance::OutlierConfig;
/// use stormbreak_policy::Nanos;
/// let c: OutlierConfig = toml::from_str(r#"consecutive_failures = 3
/// base_ejection_time = "5s""#).unwrap();
/// assert_eq!(c.base_ejection_time, Nanos::from_secs(5));
/// assert_eq!(c.max_ejection_percent, 10);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutlierConfig {
    /// Failures in a row (5xx, reset, refused connection, timeout) that eject an endpoint; ≥ 1.
    pub consecutive_failures: u32,
    /// Ejection time of a first ejection; the n-th ejection lasts n times as long.
    pub base_ejection_time: Nanos,
    /// Longest ejection, however often an endpoint has been ejected.
    pub max_ejection_time: Nanos,
    /// Most endpoints ejected at once, in percent of the cluster (0..=100);
    /// one endpoint may always be ejected, as in Envoy.
    pub max_ejection_percent: u32,
}

impl Default for OutlierConfig {
    fn default() -> Self {
        OutlierConfig {
            consecutive_failures: 5,
            base_ejection_time: 30 * Nanos::SECOND,
            max_ejection_time: 300 * Nanos::SECOND,
            max_ejection_percent: 10,
        }
    }
}

impl OutlierConfig {
    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.consecutive_failures == 0 {
            return Err(FieldError::new(FAMILY, "consecutive_failures", "≥ 1", 0));
        }
        if self.base_ejection_time.is_zero() {
            return Err(FieldError::new(FAMILY, "base_ejection_time", "> 0", "0"));
        }
        if self.max_ejection_time < self.base_ejection_time {
            return Err(FieldError::new(
                FAMILY,
                "max_ejection_time",
                format!("≥ base_ejection_time ({})", self.base_ejection_time),
                self.max_ejection_time,
            ));
        }
        if self.max_ejection_percent > 100 {
            return Err(FieldError::new(
                FAMILY,
                "max_ejection_percent",
                "between 0 and 100",
                self.max_ejection_percent,
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Endpoint {
    consecutive: u32,
    /// Ejected while `now < ejected_until`.
    ejected_until: Nanos,
    /// Ejections so far, less one per healthy `base_ejection_time` since.
    times_ejected: u32,
    /// A success from this instant on forgives one past ejection.
    forgive_at: Nanos,
}

/// Envoy's consecutive-failure outlier ejection over a fixed set of endpoints.
///
/// Each endpoint counts failures in a row; the `consecutive_failures`-th
/// ejects it for `base_ejection_time × times ejected` (capped at
/// `max_ejection_time`), unless `max_ejection_percent` of the cluster is
/// already ejected (one endpoint always may be). An ejection ends by itself
/// when its time is up: the next [`is_ejected`](Self::is_ejected) call says
/// so, no timer needed. A success resets the failure count, and each success
/// at least `base_ejection_time` after an ejection ended forgives one past
/// ejection, as Envoy decrements its multiplier while a host stays healthy.
///
/// Storage is one small record per endpoint, allocated in
/// [`new`](Self::new); nothing allocates afterwards.
///
/// ```
/// use stormbreak_policy::balance::{OutlierConfig, OutlierDetector};
/// use stormbreak_policy::Nanos;
/// let cfg = OutlierConfig { consecutive_failures: 2, max_ejection_percent: 50, ..Default::default() };
/// let mut d = OutlierDetector::new(&cfg, 2).unwrap();
/// let t = Nanos::from_secs(1);
/// assert_eq!(d.on_failure(0, t), None);
/// assert_eq!(d.on_failure(0, t), Some(t + Nanos::from_secs(30)));
/// assert!(d.is_ejected(0, t) && !d.is_ejected(1, t));
/// assert!(!d.is_ejected(0, t + Nanos::from_secs(30)), "back after 30 s");
/// ```
#[derive(Clone, Debug)]
pub struct OutlierDetector {
    config: OutlierConfig,
    endpoints: Vec<Endpoint>,
}

impl OutlierDetector {
    /// Most endpoints one detector tracks.
    pub const MAX_ENDPOINTS: usize = 1 << 16;

    /// A detector for endpoints `0..endpoints`, none ejected.
    pub fn new(config: &OutlierConfig, endpoints: usize) -> Result<Self, FieldError> {
        config.validate()?;
        if endpoints > Self::MAX_ENDPOINTS {
            return Err(FieldError::new(
                FAMILY,
                "endpoints",
                "at most 65536",
                endpoints,
            ));
        }
        Ok(OutlierDetector {
            config: config.clone(),
            endpoints: vec![Endpoint::default(); endpoints],
        })
    }

    /// The detector for a new endpoint list in which endpoint `j` was
    /// endpoint `from[j]` of this one (its failure streak and ejection
    /// carried over) or is new (`None`: not ejected, no history), as Envoy
    /// keeps a host's outlier state across an EDS update that keeps the
    /// host. An index past this detector's endpoints counts as new.
    ///
    /// ```
    /// use stormbreak_policy::balance::{OutlierConfig, OutlierDetector};
    /// use stormbreak_policy::Nanos;
    /// let cfg = OutlierConfig { consecutive_failures: 1, max_ejection_percent: 100, ..Default::default() };
    /// let mut d = OutlierDetector::new(&cfg, 2).unwrap();
    /// let t = Nanos::from_secs(1);
    /// let _ = d.on_failure(1, t);
    /// // Endpoint 0 goes, endpoint 1 stays (now first), one is added.
    /// let d = d.carried(&[Some(1), None]).unwrap();
    /// assert!(d.is_ejected(0, t) && !d.is_ejected(1, t));
    /// ```
    pub fn carried(&self, from: &[Option<usize>]) -> Result<Self, FieldError> {
        if from.len() > Self::MAX_ENDPOINTS {
            return Err(FieldError::new(
                FAMILY,
                "endpoints",
                "at most 65536",
                from.len(),
            ));
        }
        Ok(OutlierDetector {
            config: self.config.clone(),
            endpoints: from
                .iter()
                .map(|i| {
                    i.and_then(|i| self.endpoints.get(i).copied())
                        .unwrap_or_default()
                })
                .collect(),
        })
    }

    /// Number of endpoints tracked.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// `true` when no endpoint is tracked.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// Is endpoint `i` ejected at `now`? Out-of-range endpoints are not.
    pub fn is_ejected(&self, i: usize, now: Nanos) -> bool {
        self.endpoints.get(i).is_some_and(|e| now < e.ejected_until)
    }

    /// Endpoints ejected at `now`.
    pub fn ejected_count(&self, now: Nanos) -> usize {
        self.endpoints
            .iter()
            .filter(|e| now < e.ejected_until)
            .count()
    }

    /// An attempt to endpoint `i` succeeded at `now`.
    pub fn on_success(&mut self, i: usize, now: Nanos) {
        let base = self.config.base_ejection_time;
        if let Some(e) = self.endpoints.get_mut(i) {
            e.consecutive = 0;
            if e.times_ejected > 0 && now >= e.forgive_at {
                e.times_ejected -= 1;
                // The next forgiveness needs another healthy period.
                e.forgive_at = now.saturating_add(base);
            }
        }
    }

    /// An attempt to endpoint `i` failed at `now`; returns the end of the
    /// ejection when this failure ejected it.
    #[must_use = "an ejection should be logged or counted"]
    pub fn on_failure(&mut self, i: usize, now: Nanos) -> Option<Nanos> {
        let n = self.endpoints.len();
        let cap = (n * self.config.max_ejection_percent as usize / 100).max(1);
        let ejected = self.ejected_count(now);
        let e = self.endpoints.get_mut(i)?;
        if now < e.ejected_until {
            // Already out: late answers from before the ejection change nothing.
            return None;
        }
        e.consecutive = e.consecutive.saturating_add(1);
        if e.consecutive < self.config.consecutive_failures || ejected >= cap {
            return None;
        }
        e.consecutive = 0;
        e.times_ejected = e.times_ejected.saturating_add(1);
        let time = self
            .config
            .base_ejection_time
            .saturating_mul(u64::from(e.times_ejected))
            .min(self.config.max_ejection_time);
        e.ejected_until = now.saturating_add(time);
        e.forgive_at = e
            .ejected_until
            .saturating_add(self.config.base_ejection_time);
        Some(e.ejected_until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(percent: u32) -> OutlierConfig {
        OutlierConfig {
            consecutive_failures: 3,
            base_ejection_time: Nanos::from_secs(10),
            max_ejection_time: Nanos::from_secs(25),
            max_ejection_percent: percent,
        }
    }

    #[test]
    fn invalid_fields_are_named() {
        let bad = [
            OutlierConfig {
                consecutive_failures: 0,
                ..cfg(10)
            },
            OutlierConfig {
                base_ejection_time: Nanos::ZERO,
                ..cfg(10)
            },
            OutlierConfig {
                max_ejection_time: Nanos::from_secs(1),
                ..cfg(10)
            },
            OutlierConfig {
                max_ejection_percent: 101,
                ..cfg(10)
            },
        ];
        let fields: Vec<_> = bad
            .iter()
            .map(|c| OutlierDetector::new(c, 4).unwrap_err().field().to_owned())
            .collect();
        assert_eq!(
            fields,
            [
                "consecutive_failures",
                "base_ejection_time",
                "max_ejection_time",
                "max_ejection_percent"
            ]
        );
    }

    #[test]
    fn a_success_in_between_resets_the_count() {
        let mut d = OutlierDetector::new(&cfg(100), 2).unwrap();
        let t = Nanos::from_secs(1);
        assert_eq!(d.on_failure(0, t), None);
        assert_eq!(d.on_failure(0, t), None);
        d.on_success(0, t);
        assert_eq!(d.on_failure(0, t), None);
        assert_eq!(d.on_failure(0, t), None);
        assert_eq!(d.on_failure(0, t), Some(t + Nanos::from_secs(10)));
    }

    #[test]
    fn repeated_ejections_grow_to_the_cap_and_healthy_time_forgives() {
        let mut d = OutlierDetector::new(&cfg(100), 1).unwrap();
        let mut t = Nanos::ZERO;
        let eject = |d: &mut OutlierDetector, t: Nanos| {
            let _ = d.on_failure(0, t);
            let _ = d.on_failure(0, t);
            d.on_failure(0, t).expect("third failure ejects")
        };
        let until = eject(&mut d, t);
        assert_eq!(until - t, Nanos::from_secs(10));
        t = until;
        let until = eject(&mut d, t);
        assert_eq!(until - t, Nanos::from_secs(20));
        t = until;
        let until = eject(&mut d, t);
        assert_eq!(
            until - t,
            Nanos::from_secs(25),
            "capped at max_ejection_time"
        );
        // Healthy for one base period after the ejection: one ejection forgiven.
        t = until + Nanos::from_secs(10);
        d.on_success(0, t);
        let again = eject(&mut d, t);
        assert_eq!(
            again - t,
            Nanos::from_secs(25),
            "3 - 1 + 1 = 3 ejections: still capped"
        );
        t = again + Nanos::from_secs(10);
        d.on_success(0, t);
        d.on_success(0, t + Nanos::from_secs(10));
        d.on_success(0, t + Nanos::from_secs(20));
        let t = t + Nanos::from_secs(20);
        assert_eq!(
            eject(&mut d, t) - t,
            Nanos::from_secs(10),
            "all forgiven: base time again"
        );
    }

    #[test]
    fn max_ejection_percent_caps_ejections_but_one_is_always_allowed() {
        // 10 % of 4 endpoints rounds to 0: one may still be ejected.
        let mut d = OutlierDetector::new(&cfg(10), 4).unwrap();
        let t = Nanos::from_secs(1);
        for i in 0..4 {
            for _ in 0..3 {
                let _ = d.on_failure(i, t);
            }
        }
        assert_eq!(d.ejected_count(t), 1);
        assert!(d.is_ejected(0, t));
        // 50 % of 4: two.
        let mut d = OutlierDetector::new(&cfg(50), 4).unwrap();
        for i in 0..4 {
            for _ in 0..3 {
                let _ = d.on_failure(i, t);
            }
        }
        assert_eq!(d.ejected_count(t), 2);
    }

    #[test]
    fn failures_while_ejected_do_not_extend_it_and_out_of_range_is_ignored() {
        let mut d = OutlierDetector::new(&cfg(100), 1).unwrap();
        let t = Nanos::from_secs(1);
        for _ in 0..2 {
            let _ = d.on_failure(0, t);
        }
        let until = d.on_failure(0, t).unwrap();
        for _ in 0..10 {
            assert_eq!(d.on_failure(0, t + Nanos::from_secs(5)), None);
        }
        assert!(!d.is_ejected(0, until));
        assert_eq!(d.on_failure(7, t), None);
        assert!(!d.is_ejected(7, t));
    }
}
