//! Keyed rate limiting with GCRA in bounded, preallocated memory.
//!
//! [`KeyedRateLimiter`] limits each key (a client IP, a header value, a token)
//! to `rate` requests per second with bursts of up to `burst`, the tool against
//! the incident's codeload scrapers. It keeps at most `max_keys` keys in
//! storage allocated at construction, so a flood of unique keys costs a fixed
//! amount of memory and no allocation.
//!
//! # Keys
//!
//! The caller turns whatever identifies a client into a `u64` key. When an
//! attacker chooses that input (IP addresses, headers), hash it with a keyed
//! hash and a secret seed (e.g. `std::hash::BuildHasher` over
//! `std::collections::hash_map::RandomState`, created once per process):
//! the table's own mixing is unkeyed, and keys crafted to collide would
//! lengthen its probe runs. Distinct inputs that hash to one key share a limit.

mod gcra;
mod table;

pub use gcra::Gcra;

use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::fmt;
use table::KeyTable;

/// The family named in this module's [`FieldError`]s.
const FAMILY: &str = "ratelimit";

/// A request did not conform; it may be retried after exactly `retry_after`.
///
/// `retry_after` is exact to the nanosecond for the key's current state: a
/// request at `now + retry_after` conforms, one a nanosecond earlier does not
/// (unless the key was evicted in between, which only ever makes it earlier).
/// For a `Retry-After` header, round up to whole seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotUntil {
    /// Time from `now` until the key's next request conforms; always > 0.
    pub retry_after: Nanos,
}

impl fmt::Display for NotUntil {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rate limited: retry after {}",
            crate::units::format_duration(self.retry_after)
        )
    }
}

impl std::error::Error for NotUntil {}

/// Config of a [`KeyedRateLimiter`].
///
/// Defaults: 10 requests/s per key, bursts of 20, 65 536 keys (≈ 3.5 MiB:
/// storage is about 56 bytes per key).
/// They suit one anonymous client of an archive-download endpoint: a person
/// or CI job downloading a few archives at once gets its burst, a scraper
/// walking every repository gets 10/s. Tune per route.
///
/// ```
/// use stormbreak_policy::ratelimit::RateLimitConfig;
/// let cfg: RateLimitConfig = serde_json::from_str(r#"{"rate": "600/min", "burst": 5}"#).unwrap();
/// assert_eq!(cfg.rate, 10.0);
/// assert_eq!(cfg.max_keys, 65_536);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Sustained requests per second per key (`"9k/s"`, `"600/min"` or a number).
    #[serde(with = "crate::units::rate")]
    pub rate: f64,
    /// Requests a key that has been idle may make at once (≥ 1).
    pub burst: u32,
    /// Most keys held at once; storage for them is allocated up front.
    pub max_keys: usize,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            rate: 10.0,
            burst: 20,
            max_keys: 65_536,
        }
    }
}

impl RateLimitConfig {
    /// Largest accepted `max_keys`: 2²⁴ keys take about 0.9 GiB.
    pub const MAX_KEYS: usize = 1 << 24;

    /// Checks every field, then builds the per-key law.
    pub fn gcra(&self) -> Result<Gcra, FieldError> {
        if !(self.rate.is_finite()
            && self.rate > 0.0
            && self.rate <= Nanos::SECOND.as_nanos() as f64)
        {
            return Err(FieldError::new(
                FAMILY,
                "rate",
                "between one request per 584 years and 1e9/s",
                format!("{}/s", self.rate),
            ));
        }
        if self.burst == 0 {
            return Err(FieldError::new(FAMILY, "burst", "≥ 1", "0"));
        }
        if self.max_keys == 0 || self.max_keys > Self::MAX_KEYS {
            return Err(FieldError::new(
                FAMILY,
                "max_keys",
                format!("between 1 and {}", Self::MAX_KEYS),
                self.max_keys,
            ));
        }
        Gcra::new(emission_interval(self.rate), self.burst).map_err(|_| {
            FieldError::new(
                FAMILY,
                "burst",
                "small enough that burst × the emission interval fits in 584 years",
                format!("{} at {}/s", self.burst, self.rate),
            )
        })
    }

    /// Every field in range.
    pub fn validate(&self) -> Result<(), FieldError> {
        self.gcra().map(|_| ())
    }
}

/// `T = 1 s / rate` in whole nanoseconds, rounded up so the limiter never
/// exceeds the configured rate; a quotient within 1e-6 ns of an integer is
/// taken as that integer, so 1000/s gives exactly 1 ms despite float error.
fn emission_interval(rate: f64) -> Nanos {
    let exact = Nanos::SECOND.as_nanos() as f64 / rate;
    let nearest = exact.round();
    let t = if (exact - nearest).abs() < 1e-6 {
        nearest
    } else {
        exact.ceil()
    };
    (Nanos::from_nanos(t.min(u64::MAX as f64) as u64)).max(Nanos::NANOSECOND)
}

/// Per-key GCRA rate limiter with a fixed key capacity.
///
/// Source law: GCRA, the Generic Cell Rate Algorithm of ITU-T I.371, virtual
/// scheduling form, as in the governor crate and redis-cell (see [`Gcra`]).
/// `burst` counts requests that pass at once (governor's `burst_size`;
/// redis-cell's `max_burst` is one less). Defaults ([`RateLimitConfig`]):
/// 10/s, burst 20, 65 536 keys.
///
/// The law: a key idle long enough passes exactly `burst` requests at once,
/// then one per emission interval `T = 1/rate` (rounded up to a whole
/// nanosecond); over any interval `[t0, t1]` a key passes at most
/// `burst + rate·(t1 − t0)` requests. A refused request leaves the state
/// unchanged and is told exactly when to come back ([`NotUntil`]).
///
/// # Bounded memory and eviction
///
/// At most `max_keys` keys are stored, in arrays allocated at construction
/// and never resized. A new key arriving at a full table evicts the stored
/// key with the **smallest TAT**:
///
/// * if any key is idle (`TAT ≤ now`), the smallest TAT is idle, and its
///   state equals a fresh key's, so evicting it loses nothing;
/// * otherwise, evicting key `k` forgives it at most `⌈(TAT_k − now)/T⌉`
///   requests of debt, and the smallest TAT is the smallest such gift.
///   A key that would be refused now has `TAT > now + τ = now + (burst − 1)·T`,
///   while a one-off key seen at or before `now` has `TAT ≤ now + T`; so with
///   `burst ≥ 2` a flood of unique keys evicts its own members before any key
///   it is currently limiting.
///
/// The limit is therefore exact while fewer than `max_keys` keys are non-idle
/// at once, and degrades, by forgiving the keys closest to idle, beyond that.
///
/// Cost: a check is an expected O(1) hash probe plus, for a key seen before,
/// an O(log₈ n) heap update. Keys seen only once wait in an arrival-ordered
/// list that is already sorted by TAT, so a flood of one-off keys inserts
/// and evicts in O(1) and never touches the heap.
///
/// ```
/// use stormbreak_policy::ratelimit::{KeyedRateLimiter, NotUntil, RateLimitConfig};
/// use stormbreak_policy::Nanos;
/// let cfg = RateLimitConfig { rate: 10.0, burst: 2, max_keys: 1024 };
/// let mut limiter = KeyedRateLimiter::new(&cfg).unwrap();
/// let client = 0x0a00_0001; // the caller's (keyed) hash of the client IP
/// assert!(limiter.check(Nanos::ZERO, client).is_ok());
/// assert!(limiter.check(Nanos::ZERO, client).is_ok());
/// assert_eq!(limiter.check(Nanos::ZERO, client), Err(NotUntil { retry_after: Nanos::from_millis(100) }));
/// assert!(limiter.check(Nanos::from_millis(100), client).is_ok());
/// ```
#[derive(Clone, Debug)]
pub struct KeyedRateLimiter {
    gcra: Gcra,
    table: KeyTable,
    evictions: u64,
    forgiving_evictions: u64,
}

impl KeyedRateLimiter {
    /// Builds the limiter and preallocates room for `max_keys` keys.
    pub fn new(config: &RateLimitConfig) -> Result<Self, FieldError> {
        Ok(KeyedRateLimiter {
            gcra: config.gcra()?,
            table: KeyTable::with_capacity(config.max_keys),
            evictions: 0,
            forgiving_evictions: 0,
        })
    }

    /// Checks one request for `key` at `now`; a conforming request is counted.
    ///
    /// `key` is the caller's hash of the client identity; see the module docs.
    #[inline]
    pub fn check(&mut self, now: Nanos, key: u64) -> Result<(), NotUntil> {
        match self.table.find(key) {
            Some(id) => {
                let tat = self.gcra.check(self.table.tat(id), now)?;
                self.table.raise(id, tat);
            }
            None => {
                if let Some((_, tat)) = self.table.insert(key, self.gcra.fresh(now)) {
                    self.evictions += 1;
                    self.forgiving_evictions += u64::from(tat > now);
                }
            }
        }
        Ok(())
    }

    /// The per-key law in use.
    pub fn gcra(&self) -> Gcra {
        self.gcra
    }

    /// Keys currently stored (idle ones included); never above [`Self::max_keys`].
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// `true` before the first request.
    pub fn is_empty(&self) -> bool {
        self.table.len() == 0
    }

    /// The fixed key capacity.
    pub fn max_keys(&self) -> usize {
        self.table.capacity()
    }

    /// Keys evicted to make room so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Evictions of keys that were not idle, each of which forgave that key
    /// some debt. Non-zero means `max_keys` is too small for the key churn.
    pub fn forgiving_evictions(&self) -> u64 {
        self.forgiving_evictions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use proptest::prelude::*;

    fn limiter(rate: f64, burst: u32, max_keys: usize) -> KeyedRateLimiter {
        KeyedRateLimiter::new(&RateLimitConfig {
            rate,
            burst,
            max_keys,
        })
        .unwrap()
    }

    #[test]
    fn emission_interval_rounds_up_except_float_noise() {
        assert_eq!(emission_interval(1000.0), Nanos::MILLISECOND);
        assert_eq!(emission_interval(10.0), Nanos::from_millis(100));
        // 1e9/3 = 333 333 333.3… → 333 333 334: never faster than 3/s.
        assert_eq!(emission_interval(3.0), Nanos::from_nanos(333333334));
        assert_eq!(emission_interval(1e9), Nanos::NANOSECOND);
        // 1e9 / (1e9/7) is 7 up to float error, taken as exactly 7 ns.
        assert_eq!(emission_interval(1e9 / 7.0), Nanos::from_nanos(7));
    }

    #[test]
    fn exactly_burst_pass_after_idle_then_one_per_interval() {
        // 100/s → T = 10 ms; burst 5.
        let mut l = limiter(100.0, 5, 16);
        let start = 1_000 * Nanos::from_millis(1);
        for _ in 0..5 {
            assert!(l.check(start, 42).is_ok());
        }
        // 6th at the same instant: TAT = start + 50 ms, τ = 40 ms → wait 10 ms.
        assert_eq!(
            l.check(start, 42),
            Err(NotUntil {
                retry_after: Nanos::from_millis(10)
            })
        );
        // Then exactly one per 10 ms.
        for i in 1..=20 {
            let now = start + i * Nanos::from_millis(10);
            assert!(l.check(now, 42).is_ok(), "at +{i}·T");
            assert_eq!(
                l.check(now, 42),
                Err(NotUntil {
                    retry_after: Nanos::from_millis(10)
                })
            );
        }
        // After an idle period of burst·T the full burst is back, and no more.
        let later = start + 20 * Nanos::from_millis(10) + 5 * Nanos::from_millis(10);
        for _ in 0..5 {
            assert!(l.check(later, 42).is_ok());
        }
        assert!(l.check(later, 42).is_err());
        // Other keys are independent.
        assert!(l.check(later, 43).is_ok());
    }

    #[test]
    fn refused_requests_do_not_push_the_key_further_back() {
        let mut l = limiter(10.0, 1, 4);
        assert!(l.check(Nanos::ZERO, 1).is_ok());
        for t in [
            Nanos::ZERO,
            Nanos::from_millis(10),
            Nanos::from_millis(50),
            Nanos::from_millis(99),
        ] {
            assert_eq!(
                l.check(t, 1),
                Err(NotUntil {
                    retry_after: Nanos::from_millis(100) - t
                })
            );
        }
        assert!(l.check(Nanos::from_millis(100), 1).is_ok());
    }

    #[test]
    fn flood_of_unique_keys_stays_bounded_and_hot_key_stays_limited() {
        for burst in [2, 5] {
            // 10/s per key, 1024 keys. A flood of 10⁶ unique keys at one per
            // microsecond (1 s in all) while a hot key hammers every 100 µs.
            let mut l = limiter(10.0, burst, 1024);
            let (mut hot_ok, mut hot_tries) = (0u64, 0u64);
            for i in 0..1_000_000u64 {
                let now = Nanos::from_micros(i);
                assert!(
                    l.check(now, 1_000_000 + i).is_ok(),
                    "a fresh key always passes"
                );
                if i % 100 == 0 {
                    hot_tries += 1;
                    hot_ok += u64::from(l.check(now, 7).is_ok());
                }
                assert!(l.len() <= 1024);
            }
            assert_eq!(l.len(), 1024);
            assert_eq!(hot_tries, 10_000);
            // Over [0, 1 s): `burst` at t = 0, then one per 100 ms at 100, …, 900 ms:
            // burst + 9, exactly as if the flood were not there.
            assert_eq!(hot_ok, u64::from(burst) + 9, "burst {burst}");
            // Only flood keys were evicted (the hot key was inserted once), and each
            // was idle or closest to idle.
            assert_eq!(l.evictions(), 1_000_001 - 1024);
        }
    }

    #[test]
    fn eviction_prefers_idle_keys_then_smallest_tat() {
        let mut l = limiter(10.0, 1, 2); // T = 100 ms
        l.check(Nanos::ZERO, 1).unwrap(); // TAT 100 ms
        l.check(Nanos::from_millis(50), 2).unwrap(); // TAT 150 ms
        // At 120 ms key 1 is idle (TAT 100 ≤ 120): it goes, nothing forgiven.
        l.check(Nanos::from_millis(120), 3).unwrap(); // TAT 220 ms
        assert_eq!((l.evictions(), l.forgiving_evictions()), (1, 0));
        assert!(
            l.check(Nanos::from_millis(120), 2).is_err(),
            "key 2 kept its state"
        );
        // At 130 ms nobody is idle; key 2 (TAT 150) is closest to idle and is forgiven.
        l.check(Nanos::from_millis(130), 4).unwrap();
        assert_eq!((l.evictions(), l.forgiving_evictions()), (2, 1));
        assert!(
            l.check(Nanos::from_millis(130), 3).is_err(),
            "key 3 kept its state"
        );
    }

    #[test]
    fn config_validation_names_the_field() {
        let bad = |cfg: RateLimitConfig| cfg.validate().unwrap_err();
        let d = RateLimitConfig::default();
        assert_eq!(
            bad(RateLimitConfig {
                rate: 0.0,
                ..d.clone()
            })
            .field(),
            "rate"
        );
        assert_eq!(
            bad(RateLimitConfig {
                rate: f64::NAN,
                ..d.clone()
            })
            .field(),
            "rate"
        );
        assert_eq!(
            bad(RateLimitConfig {
                rate: 2e9,
                ..d.clone()
            })
            .field(),
            "rate"
        );
        assert_eq!(
            bad(RateLimitConfig {
                burst: 0,
                ..d.clone()
            })
            .to_string(),
            "ratelimit: burst must be ≥ 1, got 0"
        );
        assert_eq!(
            bad(RateLimitConfig {
                max_keys: 0,
                ..d.clone()
            })
            .to_string(),
            "ratelimit: max_keys must be between 1 and 16777216, got 0"
        );
        assert_eq!(
            bad(RateLimitConfig {
                rate: 1e-9,
                burst: 100,
                ..d.clone()
            })
            .field(),
            "burst"
        );
        assert!(d.validate().is_ok());
        assert!(serde_json::from_str::<RateLimitConfig>(r#"{"rate": "fast"}"#).is_err());
        assert!(serde_json::from_str::<RateLimitConfig>(r#"{"burts": 3}"#).is_err());
    }

    proptest! {
        /// For any arrival pattern, one key admits at most burst + rate·(t1 − t0)
        /// requests over any [t0, t1] — also with other keys interleaved, as
        /// long as the table has room for all of them.
        #[test]
        fn admitted_count_never_exceeds_burst_plus_rate_times_interval(
            rate in 0.5f64..1_000.0,
            burst in 1u32..20,
            arrivals in proptest::collection::vec((0u64..50_000_000, 0u64..4), 1..300),
        ) {
            let mut l = limiter(rate, burst, 8);
            let mut now = Nanos::ZERO;
            let mut admitted: Vec<Nanos> = Vec::new();
            for (gap, key) in arrivals {
                now += Nanos::from_nanos(gap);
                if l.check(now, key).is_ok() && key == 0 {
                    admitted.push(now);
                }
            }
            for i in 0..admitted.len() {
                for j in i..admitted.len() {
                    let count = (j - i + 1) as f64;
                    let span = (admitted[j] - admitted[i]).as_secs_f64();
                    prop_assert!(
                        count <= f64::from(burst) + rate * span + 1e-9,
                        "{} admitted in {}s at {}/s burst {}", count, span, rate, burst
                    );
                }
            }
        }

        /// The reported retry_after is exact for the limiter, not just the law.
        #[test]
        fn retry_after_is_exact_for_the_keyed_limiter(
            burst in 1u32..10,
            gaps in proptest::collection::vec(0u64..200_000_000, 1..50),
        ) {
            let mut l = limiter(7.0, burst, 4);
            let mut now = Nanos::ZERO;
            for gap in gaps {
                now += Nanos::from_nanos(gap);
                if let Err(NotUntil { retry_after }) = l.check(now, 9) {
                    prop_assert!(retry_after > Nanos::ZERO);
                    prop_assert!(l.check(now + retry_after - Nanos::NANOSECOND, 9).is_err());
                    prop_assert!(l.check(now + retry_after, 9).is_ok());
                    now += retry_after;
                }
            }
        }
    }
}
