//! The Finagle / Linkerd ratio retry budget.

use super::FAMILY;
use super::{RetryBudget, RetryCause};
use crate::FieldError;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// One retry, in the budget's fixed-point token unit. Integer tokens keep the
/// arithmetic exact (Finagle scales by 1000 for the same reason); 10⁶ resolves
/// ratios to one part per million.
const TOKEN: i64 = 1_000_000;

/// Parameters of a [`RatioBudget`].
///
/// Defaults are Finagle's `RetryBudget()` and Linkerd's `retryBudget`:
/// `retry_ratio` 0.2 (`percentCanRetry` / `retryRatio`),
/// `min_retries_per_sec` 10 (`minRetriesPerSec` / `minRetriesPerSecond`),
/// `ttl` 10 s, kept in 10 time buckets (Finagle's `WindowedAdder` slices).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RatioBudgetConfig {
    /// Retries allowed per first attempt, in `[0, 1000]` (Finagle's range).
    pub retry_ratio: f64,
    /// Retries per second always allowed, however little traffic there is;
    /// a rate such as `"10/s"` or a plain number.
    #[serde(with = "crate::units::rate")]
    pub min_retries_per_sec: f64,
    /// How long a deposit (and a withdrawal) counts, in `[1 s, 60 s]` (Finagle's range).
    pub ttl: Nanos,
    /// Time buckets per `ttl`, in `1..=1000`; more buckets expire more smoothly.
    pub buckets: u32,
}

impl Default for RatioBudgetConfig {
    fn default() -> Self {
        RatioBudgetConfig {
            retry_ratio: 0.2,
            min_retries_per_sec: 10.0,
            ttl: 10 * Nanos::SECOND,
            buckets: 10,
        }
    }
}

impl RatioBudgetConfig {
    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(self.retry_ratio.is_finite() && (0.0..=1000.0).contains(&self.retry_ratio)) {
            return Err(FieldError::new(
                FAMILY,
                "retry_ratio",
                "between 0 and 1000",
                self.retry_ratio,
            ));
        }
        if !(self.min_retries_per_sec.is_finite()
            && (0.0..=1e6).contains(&self.min_retries_per_sec))
        {
            return Err(FieldError::new(
                FAMILY,
                "min_retries_per_sec",
                "between 0 and 1e6 per second",
                self.min_retries_per_sec,
            ));
        }
        if !(Nanos::SECOND..=60 * Nanos::SECOND).contains(&self.ttl) {
            return Err(FieldError::new(
                FAMILY,
                "ttl",
                "between 1s and 60s",
                crate::units::format_duration(self.ttl),
            ));
        }
        if !(1..=1000).contains(&self.buckets) {
            return Err(FieldError::new(
                FAMILY,
                "buckets",
                "between 1 and 1000",
                self.buckets,
            ));
        }
        Ok(())
    }
}

/// A retry budget where retries may be `retry_ratio` of recent first attempts,
/// plus a floor of `min_retries_per_sec`.
///
/// Source law: Finagle `RetryBudget` (`TokenRetryBudget` over a leaky bucket)
/// and the Linkerd retry budget. Each first attempt deposits `retry_ratio`
/// tokens; a retry withdraws one token if the balance — the deposits minus the
/// withdrawals of the last `ttl`, plus a standing reserve of
/// `min_retries_per_sec × ttl` — is at least one. Deposits *and* withdrawals
/// expire after `ttl`, so the reserve is spent at most once per `ttl`.
///
/// Defaults: ratio 0.2, 10 retries/s, ttl 10 s (reserve 100 retries).
///
/// Expiry uses a fixed ring of `buckets + 1` time buckets of `ttl / buckets`
/// each, allocated once. An entry lives between `ttl` and `ttl + ttl/buckets`:
/// never less than `ttl`, which is what guarantees the published bound —
/// over any run of `elapsed` seconds under total failure,
/// `retries ≤ retry_ratio × requests + min_retries_per_sec × (elapsed + ttl)`.
/// The price of never expiring early is a steady-state floor of
/// `min_retries_per_sec × buckets / (buckets + 1)` (9.1/s with the defaults).
///
/// ```
/// use stormbreak_policy::budget::{RatioBudget, RatioBudgetConfig, RetryBudget, RetryCause};
/// use stormbreak_policy::Nanos;
/// let mut budget = RatioBudget::new(&RatioBudgetConfig::default()).unwrap();
/// for _ in 0..50 {
///     budget.on_request(Nanos::ZERO); // 50 first attempts deposit 50 × 0.2 = 10
/// }
/// let allowed = (0..1000).filter(|_| budget.try_withdraw(Nanos::ZERO, RetryCause::Error)).count();
/// assert_eq!(allowed, 10 + 100); // deposits + reserve (10/s × 10 s)
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RatioBudget {
    slots: Box<[i64]>,
    slot_width: Nanos,
    head: u64,
    window: i64,
    deposit: i64,
    reserve: i64,
}

impl RatioBudget {
    /// Validates `config` and allocates the bucket ring.
    pub fn new(config: &RatioBudgetConfig) -> Result<Self, FieldError> {
        config.validate()?;
        let buckets = u64::from(config.buckets);
        let ttl_secs = config.ttl.as_secs_f64();
        Ok(RatioBudget {
            slots: vec![0; buckets as usize + 1].into_boxed_slice(),
            slot_width: Nanos::from_nanos(config.ttl.as_nanos().div_ceil(buckets)),
            head: 0,
            window: 0,
            // Rounded down so the budget never grants more than the law allows.
            deposit: (config.retry_ratio * TOKEN as f64).floor() as i64,
            reserve: (config.min_retries_per_sec * ttl_secs * TOKEN as f64).floor() as i64,
        })
    }

    /// Whole retries that [`try_withdraw`](RetryBudget::try_withdraw) would grant now.
    pub fn balance(&mut self, now: Nanos) -> u64 {
        self.advance(now);
        ((self.window + self.reserve).max(0) / TOKEN) as u64
    }

    /// Drops the buckets that fell out of the window. Time never runs backwards
    /// here: an earlier `now` is treated as the latest one seen.
    #[inline]
    fn advance(&mut self, now: Nanos) {
        let bucket = now / self.slot_width;
        if bucket <= self.head {
            return;
        }
        let len = self.slots.len() as u64;
        let steps = bucket - self.head;
        if steps >= len {
            self.slots.fill(0);
            self.window = 0;
        } else {
            for i in 1..=steps {
                let slot = &mut self.slots[((self.head + i) % len) as usize];
                self.window -= *slot;
                *slot = 0;
            }
        }
        self.head = bucket;
    }

    #[inline]
    fn add(&mut self, tokens: i64) {
        let len = self.slots.len() as u64;
        self.slots[(self.head % len) as usize] += tokens;
        self.window += tokens;
    }
}

impl RetryBudget for RatioBudget {
    #[inline]
    fn on_request(&mut self, now: Nanos) {
        self.advance(now);
        self.add(self.deposit);
    }

    #[inline]
    fn try_withdraw(&mut self, now: Nanos, _cause: RetryCause) -> bool {
        self.advance(now);
        if self.window + self.reserve >= TOKEN {
            self.add(-TOKEN);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use proptest::prelude::*;

    fn default_budget() -> RatioBudget {
        RatioBudget::new(&RatioBudgetConfig::default()).unwrap()
    }

    fn drain(b: &mut RatioBudget, now: Nanos) -> usize {
        (0..100_000)
            .take_while(|_| b.try_withdraw(now, RetryCause::Error))
            .count()
    }

    #[test]
    fn a_fresh_budget_holds_exactly_the_reserve() {
        // 10 retries/s × 10 s = 100.
        let mut b = default_budget();
        assert_eq!(b.balance(Nanos::ZERO), 100);
        assert_eq!(drain(&mut b, Nanos::ZERO), 100);
        assert!(!b.try_withdraw(Nanos::ZERO, RetryCause::Error));
    }

    #[test]
    fn each_request_deposits_a_fifth_of_a_retry() {
        // 37 requests × 0.2 = 7.4 → 7 whole retries on top of the reserve.
        let mut b = default_budget();
        for _ in 0..37 {
            b.on_request(Nanos::from_secs(3));
        }
        assert_eq!(b.balance(Nanos::from_secs(3)), 107);
        assert_eq!(drain(&mut b, Nanos::from_secs(3)), 107);
    }

    #[test]
    fn deposits_expire_after_ttl_but_never_before() {
        // Buckets are 1 s wide; the deposit at t = 0.5 s sits in bucket 0, which
        // stays live until bucket 11 begins at t = 11 s.
        let mut b = default_budget();
        for _ in 0..50 {
            b.on_request(Nanos::from_millis(500));
        }
        assert_eq!(b.balance(Nanos::from_millis(500)), 110);
        assert_eq!(
            b.balance(Nanos::from_millis(10_500)),
            110,
            "exactly ttl later: still counted"
        );
        assert_eq!(b.balance(Nanos::from_millis(10_999)), 110);
        assert_eq!(
            b.balance(Nanos::from_secs(11)),
            100,
            "expired; the reserve stands"
        );
    }

    #[test]
    fn withdrawals_expire_too_so_the_reserve_refills_once_per_ttl() {
        let mut b = default_budget();
        assert_eq!(drain(&mut b, Nanos::ZERO), 100);
        assert_eq!(b.balance(Nanos::from_secs(5)), 0);
        assert_eq!(b.balance(Nanos::from_millis(10_999)), 0);
        assert_eq!(b.balance(Nanos::from_secs(11)), 100);
    }

    #[test]
    fn time_running_backwards_is_ignored() {
        let mut b = default_budget();
        b.on_request(Nanos::from_secs(30));
        assert_eq!(drain(&mut b, Nanos::from_secs(30)), 100);
        assert!(!b.try_withdraw(Nanos::from_secs(1), RetryCause::Error));
        assert_eq!(b.balance(Nanos::from_secs(1)), 0);
    }

    #[test]
    fn steady_failure_is_held_near_ratio_plus_floor() {
        // 100 requests/s, all failing, each wanting a retry. The law allows
        // 0.2 × 100 + 10 = 30 retries/s; the conservative 11-bucket window
        // settles at 20 + 100/11 ≈ 29.1 per second.
        let mut b = default_budget();
        let mut per_second = Vec::new();
        for s in 0..120 {
            let now = Nanos::from_secs(s);
            for _ in 0..100 {
                b.on_request(now);
            }
            per_second.push(
                (0..100)
                    .filter(|_| b.try_withdraw(now, RetryCause::Error))
                    .count(),
            );
        }
        assert_eq!(
            per_second[0], 100,
            "the first second gets deposits (20) + reserve (100), capped by demand"
        );
        let steady: f64 = per_second[30..].iter().sum::<usize>() as f64 / 90.0;
        assert!((28.5..=30.0).contains(&steady), "steady {steady}");
        // Amplification: (100 + 29.1) / 100 ≈ 1.29, where max_attempts = 3
        // alone would allow 3.
    }

    #[test]
    fn zero_ratio_and_zero_floor_allow_nothing() {
        let mut b = RatioBudget::new(&RatioBudgetConfig {
            retry_ratio: 0.0,
            min_retries_per_sec: 0.0,
            ..RatioBudgetConfig::default()
        })
        .unwrap();
        for _ in 0..1000 {
            b.on_request(Nanos::ZERO);
        }
        assert!(!b.try_withdraw(Nanos::ZERO, RetryCause::Error));
    }

    #[test]
    fn invalid_configs_are_rejected_by_name() {
        let base = RatioBudgetConfig::default();
        let cases = [
            (
                RatioBudgetConfig {
                    retry_ratio: -0.1,
                    ..base.clone()
                },
                "retry_ratio must be between 0 and 1000, got -0.1",
            ),
            (
                RatioBudgetConfig {
                    retry_ratio: f64::NAN,
                    ..base.clone()
                },
                "retry_ratio must be between 0 and 1000, got NaN",
            ),
            (
                RatioBudgetConfig {
                    min_retries_per_sec: -1.0,
                    ..base.clone()
                },
                "min_retries_per_sec must be between 0 and 1e6 per second, got -1",
            ),
            (
                RatioBudgetConfig {
                    ttl: Nanos::from_millis(500),
                    ..base.clone()
                },
                "ttl must be between 1s and 60s, got 500ms",
            ),
            (
                RatioBudgetConfig {
                    ttl: Nanos::from_secs(61),
                    ..base.clone()
                },
                "ttl must be between 1s and 60s, got 1m1s",
            ),
            (
                RatioBudgetConfig {
                    buckets: 0,
                    ..base.clone()
                },
                "buckets must be between 1 and 1000, got 0",
            ),
        ];
        for (cfg, msg) in cases {
            assert_eq!(
                RatioBudget::new(&cfg).unwrap_err().to_string(),
                format!("budget: {msg}")
            );
        }
    }

    #[test]
    fn config_parses_linkerd_style_values() {
        let cfg: RatioBudgetConfig = serde_json::from_str(
            r#"{"retry_ratio": 0.1, "min_retries_per_sec": "5/s", "ttl": "20s"}"#,
        )
        .unwrap();
        assert_eq!(cfg.min_retries_per_sec, 5.0);
        assert_eq!(cfg.ttl, Nanos::from_secs(20));
        assert_eq!(cfg.buckets, 10);
        let mut b = RatioBudget::new(&cfg).unwrap();
        assert_eq!(b.balance(Nanos::ZERO), 100); // 5/s × 20 s
    }

    #[derive(Clone, Debug)]
    enum Event {
        Request,
        Retry,
    }

    fn gap() -> impl Strategy<Value = Nanos> {
        prop_oneof![
            4 => Just(Nanos::ZERO),                     // bursts
            4 => (0u64..50).prop_map(|m| m * Nanos::MILLISECOND),
            2 => (0u64..3_000).prop_map(|m| m * Nanos::MILLISECOND),
            1 => (0u64..40_000).prop_map(|m| m * Nanos::MILLISECOND), // idle periods
            1 => (0u64..1_000).prop_map(Nanos::from_nanos), // sub-microsecond jitter
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Under 100 % failure, whatever the arrival pattern:
        /// retries ≤ ratio × requests + floor × elapsed + floor × ttl (the reserve).
        #[test]
        fn retries_never_exceed_ratio_times_requests_plus_floor_plus_reserve(
            ratio in 0.0f64..2.0,
            floor in 0.0f64..50.0,
            ttl_s in 1u64..=60,
            buckets in 1u32..=20,
            start in 0u64..1_000_000_000_000,
            events in prop::collection::vec((gap(), prop_oneof![Just(Event::Request), Just(Event::Retry)]), 1..1500),
        ) {
            let cfg = RatioBudgetConfig { retry_ratio: ratio, min_retries_per_sec: floor, ttl: Nanos::from_secs(ttl_s), buckets };
            let mut b = RatioBudget::new(&cfg).unwrap();
            let start = Nanos::from_nanos(start);
            let mut now = start;
            let (mut requests, mut retries) = (0u64, 0u64);
            for (gap, event) in &events {
                now += *gap;
                match event {
                    Event::Request => { b.on_request(now); requests += 1; }
                    Event::Retry => if b.try_withdraw(now, RetryCause::Error) { retries += 1 },
                }
            }
            let elapsed = (now - start).as_secs_f64();
            let bound = ratio * requests as f64 + floor * elapsed + floor * ttl_s as f64;
            prop_assert!(retries as f64 <= bound + 1e-6,
                "retries {} > bound {} (requests {}, elapsed {} s)", retries, bound, requests, elapsed);
        }

        /// The adversarial case for bucketed windows: drain everything at the
        /// very end of bucket 0, then again at the very start of every later
        /// bucket. Entries must live a full ttl, so a refill comes only every
        /// `buckets + 1` buckets, and the bound holds even over the shortest
        /// stretch (a ring one bucket shorter would refill after ttl − width).
        #[test]
        fn draining_at_bucket_edges_stays_within_the_bound(
            floor in 1u32..50,
            ttl_s in 1u64..=60,
            buckets in 1u32..=20,
            later_buckets in 1u64..100,
        ) {
            let cfg = RatioBudgetConfig { min_retries_per_sec: f64::from(floor), ttl: Nanos::from_secs(ttl_s), buckets, ..RatioBudgetConfig::default() };
            let mut b = RatioBudget::new(&cfg).unwrap();
            let width = Nanos::from_nanos(Nanos::from_secs(ttl_s).as_nanos().div_ceil(u64::from(buckets)));
            let reserve = u64::from(floor) * ttl_s;
            let first = width - Nanos::NANOSECOND;
            let mut retries = drain(&mut b, first) as u64;
            for bucket in 1..=later_buckets {
                retries += drain(&mut b, width * bucket) as u64;
            }
            let refills = later_buckets / (u64::from(buckets) + 1);
            prop_assert_eq!(retries, reserve * (1 + refills));
            let elapsed = (width * later_buckets - first).as_secs_f64();
            let bound = f64::from(floor) * (elapsed + ttl_s as f64);
            prop_assert!(retries as f64 <= bound + 1e-6, "retries {} > bound {}", retries, bound);
        }

        /// The floor is real: with no traffic at all, one reserve is granted per window.
        #[test]
        fn an_idle_client_gets_its_reserve_back_every_ttl_and_a_bucket(
            floor in 1u32..50, ttl_s in 1u64..=60, windows in 1u64..5,
        ) {
            let cfg = RatioBudgetConfig { min_retries_per_sec: floor as f64, ttl: Nanos::from_secs(ttl_s), ..RatioBudgetConfig::default() };
            let mut b = RatioBudget::new(&cfg).unwrap();
            let reserve = u64::from(floor) * ttl_s;
            let period = Nanos::from_secs(ttl_s) + Nanos::from_nanos(Nanos::from_secs(ttl_s).as_nanos().div_ceil(10));
            for w in 0..windows {
                prop_assert_eq!(drain(&mut b, period * w) as u64, reserve);
            }
        }
    }
}
