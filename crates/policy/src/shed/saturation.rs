//! Shedding by criticality under a saturation signal.

use super::FAMILY;
use super::{Criticality, Decision, validate_answer};
use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// Saturation at or above which each class is shed.
///
/// Saturation is dimensionless: in-flight / concurrency limit, or queue delay /
/// target delay, so 1.0 means "exactly at capacity". A threshold may be
/// `"never"` in config files (`f64::INFINITY`): that class is never shed by
/// saturation.
///
/// Defaults, and why:
///
/// | class | sheds from | reason |
/// |---|---|---|
/// | `sheddable` | 0.8 | keeps 20% headroom for everything else, the same margin an 80% autoscaling target keeps |
/// | `sheddable_plus` | 0.9 | |
/// | `critical` | 1.0 | at capacity, admitting more only queues |
/// | `critical_plus` | 1.2 | a 20% band past capacity where only the most critical traffic still enters; not `never`, because a class that is never shed lets the component go unboundedly over its limit, the metastable state of the 2026-08-17 incident |
///
/// The thresholds must not decrease with importance, which gives the book's
/// rule: a class is only rejected when every lower class is rejected too.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassThresholds {
    /// Threshold for [`Criticality::Sheddable`]; default 0.8.
    #[serde(with = "threshold")]
    pub sheddable: f64,
    /// Threshold for [`Criticality::SheddablePlus`]; default 0.9.
    #[serde(with = "threshold")]
    pub sheddable_plus: f64,
    /// Threshold for [`Criticality::Critical`]; default 1.0.
    #[serde(with = "threshold")]
    pub critical: f64,
    /// Threshold for [`Criticality::CriticalPlus`]; default 1.2.
    #[serde(with = "threshold")]
    pub critical_plus: f64,
}

impl Default for ClassThresholds {
    fn default() -> Self {
        ClassThresholds {
            sheddable: 0.8,
            sheddable_plus: 0.9,
            critical: 1.0,
            critical_plus: 1.2,
        }
    }
}

impl ClassThresholds {
    /// The thresholds indexed by [`Criticality::index`].
    pub fn as_array(&self) -> [f64; 4] {
        [
            self.sheddable,
            self.sheddable_plus,
            self.critical,
            self.critical_plus,
        ]
    }

    /// Each threshold ≥ 0 (or `never`), non-decreasing with importance.
    pub fn validate(&self) -> Result<(), FieldError> {
        let values = self.as_array();
        for (class, value) in Criticality::ALL.iter().zip(values) {
            if value.is_nan() || value < 0.0 {
                return Err(FieldError::new(
                    FAMILY,
                    format!("thresholds.{class}"),
                    "a number ≥ 0 or \"never\"",
                    value,
                ));
            }
        }
        for i in 1..values.len() {
            let (lower, higher) = (Criticality::ALL[i - 1], Criticality::ALL[i]);
            if values[i] < values[i - 1] {
                return Err(FieldError::new(
                    FAMILY,
                    format!("thresholds.{higher}"),
                    format!("≥ thresholds.{lower} ({})", values[i - 1]),
                    format!(
                        "{}: a class may only be shed once every lower class is",
                        values[i]
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `f64` thresholds where `"never"` is `f64::INFINITY`.
mod threshold {
    use serde::{Deserialize, Deserializer, Serializer, de};

    const EXPECTED: &str = "a number ≥ 0 or \"never\"";

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(f64),
            Text(String),
        }
        match Raw::deserialize(d).map_err(|_| de::Error::custom(EXPECTED))? {
            Raw::Num(n) => Ok(n),
            Raw::Text(s) if s == "never" => Ok(f64::INFINITY),
            Raw::Text(s) => Err(de::Error::custom(format!("got {s:?}, expected {EXPECTED}"))),
        }
    }

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if *v == f64::INFINITY {
            s.serialize_str("never")
        } else {
            s.serialize_f64(*v)
        }
    }
}

/// Config of a [`SaturationShedder`].
///
/// Defaults: [`ClassThresholds::default`], status 503, `Retry-After` 1 s.
/// 503 because saturation is the server's state, not the client's fault
/// (429 blames one client); 1 s because it is the first step of common
/// backoff schedules (gRPC's connection backoff starts at 1 s), so a client
/// that honours it waits at least as long as a well-behaved backoff would.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaturationConfig {
    /// Per-class saturation thresholds.
    pub thresholds: ClassThresholds,
    /// HTTP status of a rejection: 403, 429 or 503.
    pub status: u16,
    /// `Retry-After` to send; `"0"` in config files sends none. Must be unset with 403.
    #[serde(with = "super::retry_after")]
    pub retry_after: Option<Nanos>,
}

impl Default for SaturationConfig {
    fn default() -> Self {
        SaturationConfig {
            thresholds: ClassThresholds::default(),
            status: 503,
            retry_after: Some(Nanos::SECOND),
        }
    }
}

impl SaturationConfig {
    /// Thresholds in range and ordered; status one of 403/429/503; no `Retry-After` with 403.
    pub fn validate(&self) -> Result<(), FieldError> {
        self.thresholds.validate()?;
        validate_answer("", self.status, self.retry_after)
    }
}

/// The saturation a gateway sheds by: requests holding or waiting for a
/// slot over all the room it has, `(inflight + waiting) / (limit + queue)`,
/// 1.0 when the limit and its admission queue are both full (a zero room
/// counts as one, so a stage with no room reads as saturated, not NaN).
///
/// One formula for `stormbreak guard`'s routes and the simulator's
/// gateways, so the same thresholds shed at the same load in both. With the
/// default thresholds sheddable work goes at 80 % while critical work still
/// queues.
///
/// ```
/// use stormbreak_policy::shed::saturation_of;
/// assert_eq!(saturation_of(8, 0, 10, 0), 0.8);
/// assert_eq!(saturation_of(10, 5, 10, 5), 1.0);
/// assert_eq!(saturation_of(0, 0, 0, 0), 0.0);
/// ```
#[inline]
pub fn saturation_of(inflight: u32, waiting: u32, limit: u32, queue: u32) -> f64 {
    let room = (u64::from(limit) + u64::from(queue)).max(1);
    (f64::from(inflight) + f64::from(waiting)) / room as f64
}

/// Rejects requests whose class threshold the current saturation has reached.
///
/// Source law: Google SRE book, ch. 21 "Handling Overload" — criticality
/// classes, lower classes rejected first. Defaults in [`ClassThresholds`] and
/// [`SaturationConfig`]: sheddable 0.8, sheddable_plus 0.9, critical 1.0,
/// critical_plus 1.2; status 503 with `Retry-After: 1s`.
///
/// A request of class `c` is rejected when `saturation ≥ threshold[c]`
/// (never when the threshold is `never`). A NaN saturation counts as
/// overloaded: it comes from a broken signal such as a zero limit, and a
/// component that cannot tell its load should not admit unbounded work.
///
/// ```
/// use stormbreak_policy::shed::{Criticality, Decision, SaturationConfig, SaturationShedder};
/// let shedder = SaturationShedder::new(&SaturationConfig::default()).unwrap();
/// assert!(shedder.decide(Criticality::Critical, 0.85).is_admit());
/// assert!(!shedder.decide(Criticality::Sheddable, 0.85).is_admit());
/// ```
#[derive(Clone, Debug)]
pub struct SaturationShedder {
    thresholds: [f64; 4],
    reject: Decision,
}

impl SaturationShedder {
    /// Builds the shedder after [`SaturationConfig::validate`].
    pub fn new(config: &SaturationConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(SaturationShedder {
            thresholds: config.thresholds.as_array(),
            reject: Decision::Reject {
                status: config.status,
                retry_after: config.retry_after,
            },
        })
    }

    /// Admit or reject one request of `class` at the current `saturation`.
    #[inline]
    pub fn decide(&self, class: Criticality, saturation: f64) -> Decision {
        let threshold = self.thresholds[class.index()];
        let saturation = if saturation.is_nan() {
            f64::INFINITY
        } else {
            saturation
        };
        if threshold != f64::INFINITY && saturation >= threshold {
            self.reject
        } else {
            Decision::Admit
        }
    }

    /// The least important class still admitted at `saturation`, if any.
    pub fn lowest_admitted(&self, saturation: f64) -> Option<Criticality> {
        Criticality::ALL
            .into_iter()
            .find(|&c| self.decide(c, saturation).is_admit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Criticality::*;
    use proptest::prelude::*;

    fn default_shedder() -> SaturationShedder {
        SaturationShedder::new(&SaturationConfig::default()).unwrap()
    }

    #[test]
    fn default_thresholds_shed_classes_in_order() {
        let s = default_shedder();
        // Just below, at, and above each default threshold.
        assert_eq!(s.lowest_admitted(0.79), Some(Sheddable));
        assert_eq!(s.lowest_admitted(0.8), Some(SheddablePlus));
        assert_eq!(s.lowest_admitted(0.9), Some(Critical));
        assert_eq!(s.lowest_admitted(1.0), Some(CriticalPlus));
        assert_eq!(s.lowest_admitted(1.19), Some(CriticalPlus));
        assert_eq!(s.lowest_admitted(1.2), None);
    }

    #[test]
    fn rejection_carries_the_configured_status_and_retry_after() {
        let s = default_shedder();
        assert_eq!(
            s.decide(Sheddable, 0.95),
            Decision::Reject {
                status: 503,
                retry_after: Some(Nanos::SECOND)
            }
        );
        let cfg = SaturationConfig {
            status: 429,
            retry_after: None,
            ..SaturationConfig::default()
        };
        let s = SaturationShedder::new(&cfg).unwrap();
        assert_eq!(
            s.decide(Sheddable, 0.95),
            Decision::Reject {
                status: 429,
                retry_after: None
            }
        );
    }

    #[test]
    fn never_threshold_is_never_shed_and_nan_counts_as_overload() {
        let cfg: SaturationConfig =
            serde_json::from_str(r#"{"thresholds": {"critical_plus": "never"}}"#).unwrap();
        assert_eq!(cfg.thresholds.critical_plus, f64::INFINITY);
        assert_eq!(cfg.thresholds.sheddable, 0.8);
        let s = SaturationShedder::new(&cfg).unwrap();
        assert!(s.decide(CriticalPlus, f64::INFINITY).is_admit());
        assert!(s.decide(CriticalPlus, f64::NAN).is_admit());
        assert!(!s.decide(Critical, f64::NAN).is_admit());
        assert_eq!(
            serde_json::to_value(&cfg).unwrap()["thresholds"]["critical_plus"],
            "never"
        );
    }

    #[test]
    fn config_parses_with_units_and_rejects_unknown_fields() {
        let cfg: SaturationConfig =
            serde_json::from_str(r#"{"status": 429, "retry_after": "2s"}"#).unwrap();
        assert_eq!(cfg.retry_after, Some(2 * Nanos::SECOND));
        let cfg: SaturationConfig =
            serde_json::from_str(r#"{"status": 403, "retry_after": "0"}"#).unwrap();
        assert_eq!(cfg.retry_after, None);
        assert!(cfg.validate().is_ok());
        assert!(serde_json::from_str::<SaturationConfig>(r#"{"statuss": 429}"#).is_err());
        assert!(
            serde_json::from_str::<SaturationConfig>(r#"{"thresholds": {"critical": "soon"}}"#)
                .is_err()
        );
    }

    #[test]
    fn invalid_configs_name_the_field() {
        let mut cfg = SaturationConfig::default();
        cfg.thresholds.critical = 0.85;
        let e = SaturationShedder::new(&cfg).unwrap_err();
        assert_eq!(e.field(), "thresholds.critical");
        assert!(
            e.to_string()
                .contains("must be ≥ thresholds.sheddable_plus (0.9), got 0.85")
        );

        let mut cfg = SaturationConfig::default();
        cfg.thresholds.sheddable = f64::NAN;
        assert_eq!(cfg.validate().unwrap_err().field(), "thresholds.sheddable");
        cfg.thresholds.sheddable = -0.1;
        assert_eq!(cfg.validate().unwrap_err().field(), "thresholds.sheddable");

        let cfg = SaturationConfig {
            status: 403,
            ..SaturationConfig::default()
        };
        assert_eq!(cfg.validate().unwrap_err().field(), "retry_after");
    }

    proptest! {
        /// The book's rule: a class is rejected only if every lower class is, and a
        /// rejected class stays rejected as saturation rises.
        #[test]
        fn shedding_is_monotone_in_class_and_saturation(
            mut t in proptest::array::uniform4(0.0f64..3.0),
            s in 0.0f64..4.0,
            ds in 0.0f64..1.0,
        ) {
            t.sort_by(f64::total_cmp);
            let cfg = SaturationConfig {
                thresholds: ClassThresholds {
                    sheddable: t[0], sheddable_plus: t[1], critical: t[2], critical_plus: t[3],
                },
                ..SaturationConfig::default()
            };
            let shedder = SaturationShedder::new(&cfg).unwrap();
            for (i, c) in Criticality::ALL.into_iter().enumerate() {
                let rejected = !shedder.decide(c, s).is_admit();
                prop_assert_eq!(rejected, s >= t[i]);
                if rejected {
                    prop_assert!(!shedder.decide(c, s + ds).is_admit());
                    for lower in &Criticality::ALL[..i] {
                        prop_assert!(!shedder.decide(*lower, s).is_admit());
                    }
                }
            }
        }
    }
}
