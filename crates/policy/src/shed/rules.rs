//! Static shed rules, as an operator adds them at a load balancer.

use super::FAMILY;
use super::{Criticality, Decision, validate_answer};
use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One operator rule: shed every request to `route` (of `class`, if set) with
/// `status` and an optional `Retry-After`.
///
/// The incident's "shed incoming Copilot token requests at the load balancers
/// with HTTP 403" is `ShedRule { route: TOKEN, class: None, status: 403, retry_after: None }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShedRule {
    /// Route id the rule applies to (the caller's numbering).
    pub route: u32,
    /// Only this class, or every class of the route when unset.
    #[serde(default)]
    pub class: Option<Criticality>,
    /// HTTP status to answer with: 403, 429 or 503.
    pub status: u16,
    /// `Retry-After` to send; unset or `"0"` sends none. Must be unset with 403.
    #[serde(default, with = "super::retry_after")]
    pub retry_after: Option<Nanos>,
}

impl ShedRule {
    /// Status one of 403/429/503, and no `Retry-After` with 403.
    pub fn validate(&self) -> Result<(), FieldError> {
        validate_answer("", self.status, self.retry_after)
    }

    /// Sort key: by route, then the route-wide rule before the per-class ones.
    fn key(&self) -> (u32, u8) {
        rule_key(self.route, self.class)
    }

    fn decision(&self) -> Decision {
        Decision::Reject {
            status: self.status,
            retry_after: self.retry_after,
        }
    }
}

fn rule_key(route: u32, class: Option<Criticality>) -> (u32, u8) {
    (route, class.map_or(0, |c| c.index() as u8 + 1))
}

/// Why [`ShedRules::add_rule`] refused a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddRuleError {
    /// The rule itself is invalid (status, or `Retry-After` with 403).
    Invalid(FieldError),
    /// The table already holds `capacity` rules; remove one first.
    Full {
        /// The table's fixed capacity.
        capacity: usize,
    },
}

impl fmt::Display for AddRuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddRuleError::Invalid(e) => write!(f, "invalid shed rule: {e}"),
            AddRuleError::Full { capacity } => write!(
                f,
                "shed rule table is full ({capacity} rules): remove a rule or raise max_rules"
            ),
        }
    }
}

impl std::error::Error for AddRuleError {}

/// A fixed-capacity table of [`ShedRule`]s, keyed by (route, class).
///
/// Source: operator shed rules at a load balancer, as in HAProxy's
/// `http-request deny deny_status 403 if { path_beg /token }` or Envoy's
/// fault/RBAC deny filters; the 2026-08-17 incident was contained with one.
/// Default capacity (in [`super::ShedConfig`]): 64 rules.
///
/// A class-specific rule wins over the route-wide one: an operator can shed a
/// whole route with 503 and still answer its sheddable traffic with 429.
/// Storage is allocated once at construction; rules are kept sorted so
/// [`ShedRules::lookup`] is a binary search that never allocates.
///
/// ```
/// use stormbreak_policy::shed::{Criticality, Decision, ShedRule, ShedRules};
/// const TOKEN_ROUTE: u32 = 7;
/// let mut rules = ShedRules::with_capacity(8).unwrap();
/// rules.add_rule(ShedRule { route: TOKEN_ROUTE, class: None, status: 403, retry_after: None }).unwrap();
/// assert_eq!(
///     rules.lookup(TOKEN_ROUTE, Criticality::Critical),
///     Some(Decision::Reject { status: 403, retry_after: None })
/// );
/// assert_eq!(rules.lookup(8, Criticality::Critical), None);
/// ```
#[derive(Clone, Debug)]
pub struct ShedRules {
    /// Sorted by [`ShedRule::key`]; never grows past its initial capacity.
    rules: Vec<ShedRule>,
    capacity: usize,
}

impl ShedRules {
    /// Largest accepted capacity: a table this size still looks up in ~12 steps.
    pub const MAX_CAPACITY: usize = 4096;

    /// An empty table holding up to `capacity` rules (1..=[`Self::MAX_CAPACITY`]).
    pub fn with_capacity(capacity: usize) -> Result<Self, FieldError> {
        if capacity == 0 || capacity > Self::MAX_CAPACITY {
            return Err(FieldError::new(
                FAMILY,
                "max_rules",
                format!("between 1 and {}", Self::MAX_CAPACITY),
                capacity,
            ));
        }
        Ok(ShedRules {
            rules: Vec::with_capacity(capacity),
            capacity,
        })
    }

    /// Adds `rule`, or replaces the rule with the same (route, class); returns the replaced rule.
    pub fn add_rule(&mut self, rule: ShedRule) -> Result<Option<ShedRule>, AddRuleError> {
        rule.validate().map_err(AddRuleError::Invalid)?;
        match self.rules.binary_search_by_key(&rule.key(), ShedRule::key) {
            Ok(i) => Ok(Some(std::mem::replace(&mut self.rules[i], rule))),
            Err(_) if self.rules.len() == self.capacity => Err(AddRuleError::Full {
                capacity: self.capacity,
            }),
            Err(i) => {
                self.rules.insert(i, rule);
                Ok(None)
            }
        }
    }

    /// Removes the rule for exactly (route, class); `None` if there was none.
    pub fn remove_rule(&mut self, route: u32, class: Option<Criticality>) -> Option<ShedRule> {
        let i = self
            .rules
            .binary_search_by_key(&rule_key(route, class), ShedRule::key)
            .ok()?;
        Some(self.rules.remove(i))
    }

    /// The rejection a rule imposes on a request of `class` to `route`, if any.
    #[inline]
    pub fn lookup(&self, route: u32, class: Criticality) -> Option<Decision> {
        let start = self.rules.partition_point(|r| r.route < route);
        let mut route_wide = None;
        // At most five rules share a route: the route-wide one first, then per class.
        for rule in self.rules[start..].iter().take_while(|r| r.route == route) {
            match rule.class {
                None => route_wide = Some(rule),
                Some(c) if c == class => return Some(rule.decision()),
                Some(_) => {}
            }
        }
        route_wide.map(ShedRule::decision)
    }

    /// Rules in (route, class) order.
    pub fn iter(&self) -> impl Iterator<Item = &ShedRule> {
        self.rules.iter()
    }

    /// Number of rules in the table.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// `true` when no rule is set.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The fixed capacity given at construction.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use Criticality::*;
    use proptest::prelude::*;

    fn rule(route: u32, class: Option<Criticality>, status: u16) -> ShedRule {
        ShedRule {
            route,
            class,
            status,
            retry_after: None,
        }
    }

    fn reject(status: u16) -> Option<Decision> {
        Some(Decision::Reject {
            status,
            retry_after: None,
        })
    }

    #[test]
    fn route_wide_rule_sheds_every_class_of_that_route_only() {
        let mut rules = ShedRules::with_capacity(4).unwrap();
        rules.add_rule(rule(7, None, 403)).unwrap();
        for c in Criticality::ALL {
            assert_eq!(rules.lookup(7, c), reject(403));
            assert_eq!(rules.lookup(6, c), None);
            assert_eq!(rules.lookup(8, c), None);
        }
    }

    #[test]
    fn class_rule_wins_over_route_wide_rule() {
        let mut rules = ShedRules::with_capacity(4).unwrap();
        rules.add_rule(rule(1, Some(Sheddable), 429)).unwrap();
        rules.add_rule(rule(1, None, 503)).unwrap();
        assert_eq!(rules.lookup(1, Sheddable), reject(429));
        assert_eq!(rules.lookup(1, Critical), reject(503));
        rules.remove_rule(1, None).unwrap();
        assert_eq!(rules.lookup(1, Critical), None);
        assert_eq!(rules.lookup(1, Sheddable), reject(429));
    }

    #[test]
    fn same_key_replaces_and_full_table_refuses() {
        let mut rules = ShedRules::with_capacity(2).unwrap();
        assert_eq!(rules.add_rule(rule(1, None, 503)).unwrap(), None);
        assert_eq!(
            rules.add_rule(rule(1, None, 429)).unwrap(),
            Some(rule(1, None, 503))
        );
        rules.add_rule(rule(2, None, 503)).unwrap();
        assert_eq!(
            rules.add_rule(rule(3, None, 503)),
            Err(AddRuleError::Full { capacity: 2 })
        );
        // Replacing still works when full.
        assert!(rules.add_rule(rule(2, None, 403)).is_ok());
        assert_eq!(rules.len(), 2);
        assert_eq!(rules.capacity(), 2);
        assert_eq!(rules.remove_rule(9, None), None);
    }

    #[test]
    fn invalid_rules_are_refused() {
        let mut rules = ShedRules::with_capacity(2).unwrap();
        let e = rules
            .add_rule(ShedRule {
                route: 1,
                class: None,
                status: 403,
                retry_after: Some(Nanos::SECOND),
            })
            .unwrap_err();
        assert!(e.to_string().contains("retry_after must be unset"), "{e}");
        assert!(rules.add_rule(rule(1, None, 200)).is_err());
        assert!(rules.is_empty());
        assert_eq!(
            ShedRules::with_capacity(0).unwrap_err().to_string(),
            "shed: max_rules must be between 1 and 4096, got 0"
        );
    }

    #[test]
    fn rule_parses_from_config() {
        let r: ShedRule = serde_json::from_str(
            r#"{"route": 3, "class": "sheddable", "status": 429, "retry_after": "30s"}"#,
        )
        .unwrap();
        assert_eq!(r.class, Some(Sheddable));
        assert_eq!(r.retry_after, Some(30 * Nanos::SECOND));
        let r: ShedRule = serde_json::from_str(r#"{"route": 3, "status": 403}"#).unwrap();
        assert_eq!(r, rule(3, None, 403));
        assert!(serde_json::from_str::<ShedRule>(r#"{"route": 3}"#).is_err());
    }

    proptest! {
        /// The table agrees with a naive model (a list searched in full) after any
        /// sequence of adds and removes, and never exceeds its capacity.
        #[test]
        fn lookup_matches_a_naive_model(
            ops in proptest::collection::vec(
                (any::<bool>(), 0u32..6, proptest::option::of(0usize..4), prop_oneof![Just(403u16), Just(429), Just(503)]),
                0..60,
            ),
        ) {
            let mut table = ShedRules::with_capacity(8).unwrap();
            let mut model: Vec<ShedRule> = Vec::new();
            for (add, route, class, status) in ops {
                let class = class.map(|i| Criticality::ALL[i]);
                let same = |r: &ShedRule| r.route == route && r.class == class;
                if add {
                    let r = rule(route, class, status);
                    let full = model.len() == 8 && !model.iter().any(same);
                    prop_assert_eq!(table.add_rule(r).is_err(), full);
                    if !full {
                        model.retain(|r| !same(r));
                        model.push(r);
                    }
                } else {
                    let had = model.iter().position(same);
                    prop_assert_eq!(table.remove_rule(route, class).is_some(), had.is_some());
                    model.retain(|r| !same(r));
                }
                prop_assert!(table.len() <= table.capacity());
                for route in 0..6 {
                    for c in Criticality::ALL {
                        let want = model
                            .iter()
                            .find(|r| r.route == route && r.class == Some(c))
                            .or_else(|| model.iter().find(|r| r.route == route && r.class.is_none()))
                            .map(|r| r.decision());
                        prop_assert_eq!(table.lookup(route, c), want);
                    }
                }
            }
        }
    }
}
