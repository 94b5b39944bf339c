//! Brooker's retry token bucket ("Fixing retries with token buckets and
//! circuit breakers", Marc Brooker, 2022): each retry spends a token, each
//! success earns a fraction of one.

use super::FAMILY;
use super::{RetryBudget, RetryCause};
use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// Tokens are counted in thousandths, so the bucket is exact and the same on
/// every platform (no float drift over a long run).
const MILLI: f64 = 1000.0;

/// Parameters of a [`TokenBucket`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenBucketConfig {
    /// Tokens the bucket holds, and starts with. Default 10.
    pub capacity: f64,
    /// Tokens a retry spends. Default 1.
    pub cost: f64,
    /// Tokens a successful attempt earns. Default 0.1.
    pub reward: f64,
}

impl Default for TokenBucketConfig {
    fn default() -> Self {
        TokenBucketConfig {
            capacity: 10.0,
            cost: 1.0,
            reward: 0.1,
        }
    }
}

impl TokenBucketConfig {
    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        let milli = |v: f64| v * MILLI;
        if !(self.capacity.is_finite() && milli(self.capacity) >= 1.0 && self.capacity <= 1e9) {
            return Err(FieldError::new(
                FAMILY,
                "capacity",
                "between 0.001 and 1e9 tokens",
                self.capacity,
            ));
        }
        if !(self.cost.is_finite() && milli(self.cost).round() >= 1.0 && self.cost <= self.capacity)
        {
            return Err(FieldError::new(
                FAMILY,
                "cost",
                "at least 0.001 and at most the capacity",
                self.cost,
            ));
        }
        if !(self.reward.is_finite() && self.reward >= 0.0 && self.reward <= self.capacity) {
            return Err(FieldError::new(
                FAMILY,
                "reward",
                "between 0 and the capacity",
                self.reward,
            ));
        }
        Ok(())
    }
}

/// A retry token bucket: a retry is sent only if the bucket holds `cost`
/// tokens, and spends them; every successful attempt (first or retry) adds
/// `reward`, up to `capacity`. Failures cost nothing by themselves.
///
/// Source law: retries ≤ (`reward` × successes + `capacity`) / `cost`. At
/// low and moderate failure rates the extra load is at most about
/// `reward / cost` of the successful traffic (10% by default); at total
/// failure no success refills the bucket, so after the first `capacity /
/// cost` retries load falls to 1.0× of demand.
///
/// How it differs from the crate's other budgets:
///
/// | budget | what a retry costs | what refills it | retries stop when |
/// |---|---|---|---|
/// | [`TokenBucket`] | `cost` tokens, spent when sent | `reward` per success | fewer than `cost` tokens |
/// | [`AwsRetryQuota`](super::AwsRetryQuota) | 5 (10 after a timeout), spent when sent | a success *refunds its own retry's cost*, else adds 1 | the quota is below the cost |
/// | [`GrpcThrottle`](super::GrpcThrottle) | nothing when sent; each *failure* costs 1 | `token_ratio` per success | tokens ≤ half the maximum |
/// | [`RatioBudget`](super::RatioBudget) | 1 deposit | `ratio` per *request*, expiring after `ttl`, plus a reserve | no unexpired deposit |
///
/// The AWS quota's refund makes a retry that succeeds free, so a service
/// that fails half its attempts keeps retrying forever at no net cost; the
/// bucket charges every retry and pays only a fraction back, so the same
/// service is held to `reward` extra load.
///
/// ```
/// use stormbreak_policy::budget::{RetryBudget, RetryCause, TokenBucket, TokenBucketConfig};
/// use stormbreak_policy::Nanos;
/// let mut b = TokenBucket::new(&TokenBucketConfig::default()).unwrap();
/// // Total failure: the 10 starting tokens buy 10 retries, then none.
/// let sent = (0..100).filter(|_| b.try_withdraw(Nanos::ZERO, RetryCause::Error)).count();
/// assert_eq!(sent, 10);
/// // Ten successes earn one retry back.
/// for _ in 0..10 { b.on_success(Nanos::ZERO, None) }
/// assert!(b.try_withdraw(Nanos::ZERO, RetryCause::Error));
/// assert!(!b.try_withdraw(Nanos::ZERO, RetryCause::Error));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    milli_tokens: u64,
    capacity: u64,
    cost: u64,
    reward: u64,
}

impl TokenBucket {
    /// Validates `config`; the bucket starts full.
    pub fn new(config: &TokenBucketConfig) -> Result<Self, FieldError> {
        config.validate()?;
        let milli = |v: f64| (v * MILLI).round() as u64;
        Ok(TokenBucket {
            milli_tokens: milli(config.capacity),
            capacity: milli(config.capacity),
            cost: milli(config.cost),
            reward: milli(config.reward),
        })
    }

    /// Tokens in the bucket now.
    pub fn tokens(&self) -> f64 {
        self.milli_tokens as f64 / MILLI
    }
}

impl RetryBudget for TokenBucket {
    #[inline]
    fn try_withdraw(&mut self, _now: Nanos, _cause: RetryCause) -> bool {
        if self.milli_tokens >= self.cost {
            self.milli_tokens -= self.cost;
            true
        } else {
            false
        }
    }

    #[inline]
    fn on_success(&mut self, _now: Nanos, _paid_retry: Option<RetryCause>) {
        self.milli_tokens = (self.milli_tokens + self.reward).min(self.capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The closed form, for any interleaving of outcomes and retry wishes:
        /// retries ≤ (reward × successes + capacity) / cost.
        #[test]
        fn retries_never_exceed_what_successes_and_capacity_paid_for(
            capacity in 1u32..50,
            cost_tenths in 1u32..30,
            reward_hundredths in 0u32..100,
            events in proptest::collection::vec(any::<bool>(), 0..5000),
        ) {
            let cfg = TokenBucketConfig {
                capacity: f64::from(capacity),
                cost: (f64::from(cost_tenths) / 10.0).min(f64::from(capacity)),
                reward: f64::from(reward_hundredths) / 100.0,
            };
            let mut b = TokenBucket::new(&cfg).unwrap();
            let (mut retries, mut successes) = (0u64, 0u64);
            for ok in events {
                if ok {
                    b.on_success(Nanos::ZERO, None);
                    successes += 1;
                } else if b.try_withdraw(Nanos::ZERO, RetryCause::Error) {
                    retries += 1;
                }
            }
            let bound = (cfg.reward * successes as f64 + cfg.capacity) / cfg.cost;
            prop_assert!(retries as f64 <= bound + 1e-9, "{retries} retries, bound {bound}");
        }
    }

    /// A client sending every request until it succeeds or the bucket says
    /// no: at failure rate p, attempts per request stay near 1 + p (while
    /// p/(1−p) < reward) and fall to 1.0 at total failure.
    #[test]
    fn load_is_held_near_demand_plus_reward() {
        for (p, max_ampl) in [(0.05, 1.06), (0.3, 1.12), (1.0, 1.0011)] {
            let mut b = TokenBucket::new(&TokenBucketConfig::default()).unwrap();
            let mut rng = 0x9E37_79B9_7F4A_7C15u64;
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                (rng >> 11) as f64 / (1u64 << 53) as f64
            };
            let requests = 10_000u64;
            let mut attempts = 0u64;
            for _ in 0..requests {
                loop {
                    attempts += 1;
                    if next() >= p {
                        b.on_success(Nanos::ZERO, None);
                        break;
                    }
                    if !b.try_withdraw(Nanos::ZERO, RetryCause::Error) {
                        break;
                    }
                }
            }
            let ampl = attempts as f64 / requests as f64;
            assert!(ampl <= max_ampl, "p = {p}: {ampl:.4} attempts per request");
        }
    }

    #[test]
    fn bad_configs_name_their_field() {
        let bad = |c: TokenBucketConfig| c.validate().unwrap_err().field().to_owned();
        let d = TokenBucketConfig::default;
        assert_eq!(
            bad(TokenBucketConfig {
                capacity: 0.0,
                ..d()
            }),
            "capacity"
        );
        assert_eq!(bad(TokenBucketConfig { cost: 20.0, ..d() }), "cost");
        assert_eq!(
            bad(TokenBucketConfig {
                cost: f64::NAN,
                ..d()
            }),
            "cost"
        );
        assert_eq!(
            bad(TokenBucketConfig {
                reward: -0.1,
                ..d()
            }),
            "reward"
        );
    }

    #[test]
    fn the_config_round_trips() {
        let c = TokenBucketConfig {
            capacity: 5.0,
            cost: 0.5,
            reward: 0.25,
        };
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<TokenBucketConfig>(&text).unwrap(), c);
    }
}
