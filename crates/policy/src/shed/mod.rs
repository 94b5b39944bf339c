//! Load shedding: which requests a saturated component turns away, and with what answer.
//!
//! Three mechanisms, each usable alone:
//!
//! * [`SaturationShedder`] — server side: rejects requests of lower
//!   [`Criticality`] first as a saturation signal rises (Google SRE book,
//!   ch. 21 "Handling Overload", *Criticality*).
//! * [`ShedRules`] — operator side: a fixed-capacity table of static rules,
//!   keyed by route and optionally class, as added at a load balancer during an
//!   incident ("shed copilot-token requests with 403").
//! * [`AdaptiveThrottle`] — client side: rejects locally, with a probability
//!   that rises as the backend's accept ratio falls (Google SRE book, ch. 21,
//!   *Client-side throttling*).
//!
//! [`Shedder`] combines the first two as a gateway applies them: operator rules
//! first, then the saturation thresholds.
//!
//! # Status codes
//!
//! A rejection carries an HTTP status and optionally a `Retry-After`. The
//! status says what a well-behaved client does next, which is why it is a
//! policy decision and not a detail:
//!
//! | status | meaning to the client (RFC 9110 §15.5.4, §15.6.4; RFC 6585 §4) | `Retry-After` |
//! |---|---|---|
//! | 403 | do not repeat this request | never: it would contradict the status, so [`ShedRule::validate`] and [`SaturationConfig::validate`] reject the combination |
//! | 429 | too many requests from you; retry later | optional, recommended |
//! | 503 | the service is overloaded; retry later | optional, recommended |
//!
//! In config files a `retry_after` of `"0"` means "send no `Retry-After`":
//! an immediate retry is never what a shedding component wants.

mod criticality;
mod rules;
mod saturation;
mod shedder;
mod throttle;

pub use criticality::Criticality;
pub use rules::{AddRuleError, ShedRule, ShedRules};
pub use saturation::{ClassThresholds, SaturationConfig, SaturationShedder, saturation_of};
pub use shedder::{ShedConfig, Shedder};
pub use throttle::{AdaptiveThrottle, ThrottleConfig};

use crate::FieldError;
use crate::Nanos;

/// The family named in this module's [`FieldError`]s.
const FAMILY: &str = "shed";

/// What a shedding policy decided for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a policy decision must be acted on"]
pub enum Decision {
    /// Let the request through.
    Admit,
    /// Answer at once with `status`, and a `Retry-After` header when `retry_after` is set.
    Reject {
        /// HTTP status: 403, 429 or 503.
        status: u16,
        /// Delay to advertise in `Retry-After`; `None` sends no header.
        retry_after: Option<Nanos>,
    },
}

impl Decision {
    /// `true` for [`Decision::Admit`].
    pub fn is_admit(&self) -> bool {
        matches!(self, Decision::Admit)
    }
}

/// The statuses a shed may answer with; see the module docs for why these three.
pub const SHED_STATUSES: [u16; 3] = [403, 429, 503];

/// Checks one (status, Retry-After) pair; `prefix` is prepended to field names.
pub(crate) fn validate_answer(
    prefix: &str,
    status: u16,
    retry_after: Option<Nanos>,
) -> Result<(), FieldError> {
    if !SHED_STATUSES.contains(&status) {
        return Err(FieldError::new(
            FAMILY,
            format!("{prefix}status"),
            "403, 429 or 503",
            status,
        ));
    }
    match retry_after {
        Some(after) if status == 403 => Err(FieldError::new(
            FAMILY,
            format!("{prefix}retry_after"),
            "unset (or \"0\") when status is 403: 403 tells clients not to retry",
            after,
        )),
        Some(Nanos::ZERO) => Err(FieldError::new(
            FAMILY,
            format!("{prefix}retry_after"),
            "> 0 or unset: Retry-After: 0 invites an immediate retry of shed work",
            Nanos::ZERO,
        )),
        _ => Ok(()),
    }
}

/// `#[serde(with = "retry_after")]`: a duration string where `"0"` means no header.
pub(crate) mod retry_after {
    use crate::Nanos;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Nanos>, D::Error> {
        Nanos::deserialize(d).map(|n| (!n.is_zero()).then_some(n))
    }

    pub fn serialize<S: Serializer>(n: &Option<Nanos>, s: S) -> Result<S::Ok, S::Error> {
        n.unwrap_or(Nanos::ZERO).serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_403_429_503_are_shed_statuses() {
        for ok in [403, 429, 503] {
            assert!(validate_answer("", ok, None).is_ok());
        }
        let e = validate_answer("rules[1].", 500, None).unwrap_err();
        assert_eq!(e.field(), "rules[1].status");
        assert_eq!(
            e.to_string(),
            "shed: rules[1].status must be 403, 429 or 503, got 500"
        );
    }

    #[test]
    fn retry_after_is_refused_with_403_and_accepted_with_429_and_503() {
        let e = validate_answer("", 403, Some(crate::Nanos::SECOND)).unwrap_err();
        assert_eq!(e.field(), "retry_after");
        assert!(e.to_string().contains("403 tells clients not to retry"));
        assert!(validate_answer("", 429, Some(crate::Nanos::SECOND)).is_ok());
        assert!(validate_answer("", 503, Some(crate::Nanos::SECOND)).is_ok());
        assert!(validate_answer("", 503, Some(Nanos::ZERO)).is_err());
    }

    #[test]
    fn decision_is_admit() {
        assert!(Decision::Admit.is_admit());
        let reject = Decision::Reject {
            status: 503,
            retry_after: None,
        };
        assert!(!reject.is_admit());
    }
}
