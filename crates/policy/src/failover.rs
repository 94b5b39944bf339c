//! Regional failover that spills only what the receiving region can take.
//!
//! On 2026-08-17 failing traffic was partly shifted from Central US to Northern
//! Virginia, which served it normally; GitHub's follow-up 5 asks for
//! "safeguards for regional failover", because a backup region without
//! headroom turns one overloaded region into two.
//!
//! # Source law
//!
//! Capacity-based spillover as in **Google Cloud Load Balancing's
//! `WATERFALL_BY_REGION`** ("direct traffic to the nearest region with
//! endpoints and capacity before spilling over to other regions"), with the
//! receiving side's capacity taken at a **target utilisation** rather than at
//! 100%:
//!
//! ```text
//! excess   = max(0, primary_demand − primary_capacity)
//! headroom = max(0, target · secondary_capacity − secondary_base_load)
//! spill    = min(excess, headroom)
//! residual = excess − spill        (stays at the primary: shed or queued there)
//! ```
//!
//! **Default target utilisation 0.8**, the default `utilizationTarget` of Google
//! Cloud's load-balancing-based autoscaling, and for the same queueing reason:
//! an M/M/1 server's mean time in system is `1 / (μ − λ)`, i.e. 5 service times
//! at ρ = 0.8 but 10 at 0.9 and 20 at 0.95, so the last 20% of capacity buys
//! latency collapse, and it is also the margin that absorbs the error of the
//! rate estimates this decision rests on (a 25% underestimate of the load is
//! still below saturation: 0.8 × 1.25 = 1.0).
//!
//! `secondary_base_load` is the secondary's load **not counting the traffic this
//! policy spills to it**. Feeding back the measured total instead makes the law
//! oscillate: each spill shrinks the next headroom by itself (`s' = H − s`).
//!
//! [`SpillLaw::AllExcess`] and [`SpillLaw::FixedFraction`] are the naive
//! policies (shift everything failing, or a fixed share of traffic, whatever the
//! other side can take), kept so a simulation can show the difference.
//!
//! [`Failover`] wraps a law for per-request use: rates are smoothed by a
//! time-based EWMA (half-life 10 s, about one metrics scrape or HPA sync), and
//! the applied spill fraction follows the law with hysteresis: it **drops at
//! once** (the receiver's headroom is a hard safety bound) but **rises only by at
//! least `deadband`** (0.05 of demand), so noise in the rates cannot make it flap.
//! Hence the applied fraction never exceeds what the law allows on the smoothed
//! rates. Without a fresh observation for `stale_after` (30 s, three half-lives)
//! spilling stops: headroom that is not known is not there.
//!
//! ```
//! use stormbreak_policy::failover::{RegionRates, SpillLaw};
//!
//! // Primary: 10k/s offered, 6k/s healthy. Secondary: 3k/s capacity, 1k/s of its own.
//! let rates = RegionRates {
//!     primary_demand: 10_000.0,
//!     primary_capacity: 6_000.0,
//!     secondary_capacity: 3_000.0,
//!     secondary_base_load: 1_000.0,
//! };
//! let aware = SpillLaw::default().plan(&rates);
//! assert_eq!(aware.spill, 1_400.0); // 0.8 × 3k − 1k
//! assert_eq!(aware.residual, 2_600.0); // shed at the primary
//! let naive = SpillLaw::AllExcess.plan(&rates);
//! assert!(naive.secondary_utilisation > 1.0); // 5k/s on a 3k/s region
//! ```

use crate::FieldError;
use crate::Nanos;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The family named in this module's [`FieldError`]s.
const FAMILY: &str = "failover";

/// Rates above this (per second) are clamped: larger values are measurement
/// garbage, and keeping sums finite keeps every plan free of NaN.
pub const MAX_RATE: f64 = 1e15;

/// The four rates a spill decision needs, all in the same unit (e.g. req/s).
///
/// Negative or non-finite values are read as 0; values above [`MAX_RATE`] as [`MAX_RATE`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RegionRates {
    /// Traffic offered to the primary region.
    pub primary_demand: f64,
    /// What the primary can serve now (its healthy capacity).
    pub primary_capacity: f64,
    /// What the secondary can serve at 100% utilisation.
    pub secondary_capacity: f64,
    /// The secondary's own load, excluding traffic spilled to it by this policy.
    pub secondary_base_load: f64,
}

impl RegionRates {
    fn sanitized(self) -> Self {
        let clean = |x: f64| {
            if x > 0.0 {
                x.min(MAX_RATE)
            } else {
                0.0 // negative, zero or NaN
            }
        };
        RegionRates {
            primary_demand: clean(self.primary_demand),
            primary_capacity: clean(self.primary_capacity),
            secondary_capacity: clean(self.secondary_capacity),
            secondary_base_load: clean(self.secondary_base_load),
        }
    }

    fn excess(&self) -> f64 {
        (self.primary_demand - self.primary_capacity).max(0.0)
    }

    fn blend(&self, other: &Self, keep: f64) -> Self {
        let mix = |old: f64, new: f64| keep * old + (1.0 - keep) * new;
        RegionRates {
            primary_demand: mix(self.primary_demand, other.primary_demand),
            primary_capacity: mix(self.primary_capacity, other.primary_capacity),
            secondary_capacity: mix(self.secondary_capacity, other.secondary_capacity),
            secondary_base_load: mix(self.secondary_base_load, other.secondary_base_load),
        }
    }
}

/// A law's answer for one set of rates.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpillPlan {
    /// Primary demand above the primary's capacity.
    pub excess: f64,
    /// Rate to send to the secondary.
    pub spill: f64,
    /// Excess not spilled: to be shed or queued at the primary.
    pub residual: f64,
    /// `spill / primary_demand`, the share of requests to route to the secondary.
    pub fraction: f64,
    /// `(secondary_base_load + spill) / secondary_capacity` after the spill
    /// (∞ if the secondary has no capacity but some load).
    pub secondary_utilisation: f64,
}

impl SpillPlan {
    fn new(rates: &RegionRates, spill: f64) -> Self {
        let excess = rates.excess();
        let demand = rates.primary_demand;
        let load = rates.secondary_base_load + spill;
        SpillPlan {
            excess,
            spill,
            residual: (excess - spill).max(0.0),
            fraction: if demand > 0.0 {
                (spill / demand).clamp(0.0, 1.0)
            } else {
                0.0
            },
            secondary_utilisation: if rates.secondary_capacity > 0.0 {
                load / rates.secondary_capacity
            } else if load > 0.0 {
                f64::INFINITY
            } else {
                0.0
            },
        }
    }
}

/// What the secondary can still take at `target` utilisation: `max(0, target·capacity − load)`.
pub fn headroom(capacity: f64, load: f64, target_utilisation: f64) -> f64 {
    let h = target_utilisation * capacity - load;
    if h > 0.0 { h } else { 0.0 }
}

/// How much to spill.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum SpillLaw {
    /// `min(excess, headroom at target)`: the capacity-aware law. Default, target 0.8.
    CapacityAware {
        /// Utilisation (0, 1] the secondary may be filled to.
        target_utilisation: f64,
    },
    /// Naive: spill the whole excess, whatever the secondary can take.
    AllExcess,
    /// Naive: while the primary has any excess, spill this share (0, 1] of its demand.
    FixedFraction {
        /// Share of primary demand sent to the secondary.
        fraction: f64,
    },
}

impl Default for SpillLaw {
    fn default() -> Self {
        SpillLaw::CapacityAware {
            target_utilisation: 0.8,
        }
    }
}

impl SpillLaw {
    /// The plan for these rates.
    pub fn plan(&self, rates: &RegionRates) -> SpillPlan {
        let rates = rates.sanitized();
        let excess = rates.excess();
        let spill = match *self {
            SpillLaw::CapacityAware { target_utilisation } => excess.min(headroom(
                rates.secondary_capacity,
                rates.secondary_base_load,
                target_utilisation,
            )),
            SpillLaw::AllExcess => excess,
            SpillLaw::FixedFraction { fraction } => {
                if excess > 0.0 {
                    fraction * rates.primary_demand
                } else {
                    0.0
                }
            }
        };
        SpillPlan::new(&rates, spill)
    }

    /// Checks the law's parameter; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        match *self {
            SpillLaw::CapacityAware {
                target_utilisation: t,
            } if !(t > 0.0 && t <= 1.0) => Err(FieldError::new(
                FAMILY,
                "law.target_utilisation",
                "in (0, 1]",
                t.to_string(),
            )),
            SpillLaw::FixedFraction { fraction: f } if !(f > 0.0 && f <= 1.0) => Err(
                FieldError::new(FAMILY, "law.fraction", "in (0, 1]", f.to_string()),
            ),
            _ => Ok(()),
        }
    }
}

/// Parameters of the per-request [`Failover`] router.
///
/// Missing fields in a config file take the [`Default`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FailoverConfig {
    /// The spill law. Default capacity-aware at 0.8.
    pub law: SpillLaw,
    /// Half-life of the rate EWMA; 0 disables smoothing. Default 10 s.
    pub half_life: Nanos,
    /// Smallest rise of the spill fraction that is applied, in [0, 1). Default 0.05.
    pub deadband: f64,
    /// Spilling stops when the last observation is older than this; 0 never
    /// stops. Default 30 s.
    pub stale_after: Nanos,
}

impl Default for FailoverConfig {
    fn default() -> Self {
        FailoverConfig {
            law: SpillLaw::default(),
            half_life: 10 * Nanos::SECOND,
            deadband: 0.05,
            stale_after: 30 * Nanos::SECOND,
        }
    }
}

impl FailoverConfig {
    /// Checks every field; the error names the field and what was expected.
    pub fn validate(&self) -> Result<(), FieldError> {
        self.law.validate()?;
        if !(self.deadband >= 0.0 && self.deadband < 1.0) {
            return Err(FieldError::new(
                FAMILY,
                "deadband",
                "in [0, 1)",
                self.deadband.to_string(),
            ));
        }
        Ok(())
    }
}

/// Where one request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Region {
    /// Served (or shed) by the primary region.
    Primary,
    /// Spilled to the secondary region.
    Secondary,
}

/// Per-request failover router: EWMA-smoothed rates, a [`SpillLaw`], and a
/// hysteresis on the spill fraction; see the [module docs](self) for the law
/// and defaults.
#[derive(Clone, Debug)]
pub struct Failover {
    config: FailoverConfig,
    smoothed: Option<RegionRates>,
    last_observed: Nanos,
    plan: SpillPlan,
    fraction: f64,
    changes: u64,
}

impl Failover {
    /// A router that spills nothing until its first observation.
    pub fn new(config: &FailoverConfig) -> Result<Self, FieldError> {
        config.validate()?;
        Ok(Failover {
            config: config.clone(),
            smoothed: None,
            last_observed: Nanos::ZERO,
            plan: SpillPlan::default(),
            fraction: 0.0,
            changes: 0,
        })
    }

    /// Feeds a fresh measurement of the rates; returns the applied spill fraction.
    pub fn observe(&mut self, now: Nanos, rates: RegionRates) -> f64 {
        let rates = rates.sanitized();
        let smoothed = match self.smoothed {
            None => rates,
            Some(old) => {
                let dt = now.saturating_sub(self.last_observed);
                // Weight of the old estimate after dt: 2^(−dt / half-life).
                let keep = if self.config.half_life == Nanos::ZERO {
                    0.0
                } else {
                    (-(dt.as_nanos() as f64) / self.config.half_life.as_nanos() as f64).exp2()
                };
                old.blend(&rates, keep)
            }
        };
        self.smoothed = Some(smoothed);
        self.last_observed = self.last_observed.max(now);
        self.plan = self.config.law.plan(&smoothed);
        let target = self.plan.fraction;
        if target < self.fraction || target - self.fraction >= self.config.deadband {
            if target != self.fraction {
                self.changes += 1;
            }
            self.fraction = target;
        }
        self.fraction
    }

    /// Routes one request: to the secondary with the applied spill fraction.
    /// Draws from `rng` only when the fraction is strictly between 0 and 1.
    pub fn route<R: Rng + ?Sized>(&self, now: Nanos, rng: &mut R) -> Region {
        let f = self.spill_fraction(now);
        if f <= 0.0 {
            Region::Primary
        } else if f >= 1.0 || rng.random::<f64>() < f {
            Region::Secondary
        } else {
            Region::Primary
        }
    }

    /// The spill fraction in force at `now` (0 when observations are stale).
    pub fn spill_fraction(&self, now: Nanos) -> f64 {
        if self.is_stale(now) {
            0.0
        } else {
            self.fraction
        }
    }

    /// When the applied spill fraction next changes on its own: the instant
    /// the last observation turns stale (the fraction then drops to 0), or
    /// `None` if nothing is spilled or staleness is disabled. Between
    /// observations nothing else changes.
    ///
    /// ```
    /// use stormbreak_policy::failover::{Failover, FailoverConfig};
    /// let f = Failover::new(&FailoverConfig::default()).unwrap();
    /// assert_eq!(f.poll_timeout(), None); // nothing observed, nothing spilled
    /// ```
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Nanos> {
        (self.smoothed.is_some() && self.fraction > 0.0 && self.config.stale_after > Nanos::ZERO)
            .then(|| self.last_observed.saturating_add(self.config.stale_after))
    }

    /// Whether the last observation is too old to spill on.
    pub fn is_stale(&self, now: Nanos) -> bool {
        match self.smoothed {
            None => true,
            Some(_) => {
                self.config.stale_after > Nanos::ZERO
                    && now.saturating_sub(self.last_observed) > self.config.stale_after
            }
        }
    }

    /// The law's plan on the smoothed rates (the target the fraction follows).
    pub fn plan(&self) -> SpillPlan {
        self.plan
    }

    /// The smoothed rates, once observed.
    pub fn smoothed(&self) -> Option<RegionRates> {
        self.smoothed
    }

    /// How many times the applied fraction changed, for flapping metrics.
    pub fn changes(&self) -> u64 {
        self.changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Nanos;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn rates(demand: f64, cap: f64, sec_cap: f64, sec_load: f64) -> RegionRates {
        RegionRates {
            primary_demand: demand,
            primary_capacity: cap,
            secondary_capacity: sec_cap,
            secondary_base_load: sec_load,
        }
    }

    const AWARE: SpillLaw = SpillLaw::CapacityAware {
        target_utilisation: 0.8,
    };

    #[test]
    fn capacity_aware_spill_is_min_of_excess_and_headroom() {
        // excess = 10k − 8k = 2k; headroom = 0.8·5k − 2k = 2k → spill 2k, fraction 0.2.
        let p = AWARE.plan(&rates(10_000.0, 8_000.0, 5_000.0, 2_000.0));
        assert_eq!(
            (p.excess, p.spill, p.residual, p.fraction),
            (2_000.0, 2_000.0, 0.0, 0.2)
        );
        assert_eq!(p.secondary_utilisation, 0.8);
        // Busier secondary: headroom = 4k − 3.5k = 0.5k → spill 0.5k, 1.5k stays, fraction 0.05.
        let p = AWARE.plan(&rates(10_000.0, 8_000.0, 5_000.0, 3_500.0));
        assert_eq!((p.spill, p.residual, p.fraction), (500.0, 1_500.0, 0.05));
        // Secondary already above target: headroom clamps at 0, nothing spills.
        let p = AWARE.plan(&rates(10_000.0, 8_000.0, 5_000.0, 4_500.0));
        assert_eq!((p.spill, p.residual), (0.0, 2_000.0));
    }

    #[test]
    fn nothing_spills_while_the_primary_has_capacity() {
        for law in [
            AWARE,
            SpillLaw::AllExcess,
            SpillLaw::FixedFraction { fraction: 0.5 },
        ] {
            let p = law.plan(&rates(7_000.0, 8_000.0, 5_000.0, 0.0));
            assert_eq!(p.spill, 0.0, "{law:?}");
            assert_eq!(p.fraction, 0.0);
        }
    }

    #[test]
    fn naive_spill_overloads_a_small_secondary_while_capacity_aware_does_not() {
        // Primary 10k/s offered, 6k/s healthy → 4k/s excess. Secondary 3k/s, 1k/s own load.
        let r = rates(10_000.0, 6_000.0, 3_000.0, 1_000.0);
        // All excess: 1k + 4k = 5k on 3k → 167%.
        let all = SpillLaw::AllExcess.plan(&r);
        assert_eq!(all.spill, 4_000.0);
        assert!((all.secondary_utilisation - 5.0 / 3.0).abs() < 1e-12);
        // Fixed half: 5k spilled → 6k on 3k → 200%.
        let half = SpillLaw::FixedFraction { fraction: 0.5 }.plan(&r);
        assert_eq!(half.secondary_utilisation, 2.0);
        // Capacity-aware: 0.8·3k − 1k = 1.4k → 2.4k on 3k = 80%; 2.6k stays at the primary.
        let aware = AWARE.plan(&r);
        assert_eq!(aware.spill, 1_400.0);
        assert_eq!(aware.secondary_utilisation, 0.8);
        assert_eq!(aware.residual, 2_600.0);
    }

    #[test]
    fn garbage_rates_are_read_as_zero_or_clamped() {
        let p = AWARE.plan(&rates(f64::NAN, -1.0, f64::INFINITY, 0.0));
        assert_eq!(p, SpillPlan::default());
        let p = SpillLaw::AllExcess.plan(&rates(f64::INFINITY, 0.0, 0.0, 0.0));
        assert_eq!(p.spill, MAX_RATE);
        assert_eq!(p.fraction, 1.0);
        assert_eq!(p.secondary_utilisation, f64::INFINITY);
    }

    #[test]
    fn ewma_follows_the_half_life() {
        // Half-life 10 s: after 10 s the old value keeps weight 1/2, after 20 s 1/4.
        let config = FailoverConfig {
            deadband: 0.0,
            ..FailoverConfig::default()
        };
        let mut f = Failover::new(&config).unwrap();
        f.observe(Nanos::ZERO, rates(1_000.0, 0.0, 0.0, 1_000.0));
        f.observe(Nanos::from_secs(10), rates(3_000.0, 0.0, 0.0, 3_000.0));
        assert_eq!(f.smoothed().unwrap().primary_demand, 2_000.0);
        // 0.25·2000 + 0.75·6000 = 5000.
        f.observe(Nanos::from_secs(30), rates(6_000.0, 0.0, 0.0, 0.0));
        assert_eq!(f.smoothed().unwrap().primary_demand, 5_000.0);
        // 0.25·2000 + 0.75·0 = 500.
        assert_eq!(f.smoothed().unwrap().secondary_base_load, 500.0);
    }

    #[test]
    fn fraction_drops_at_once_but_rises_only_past_the_deadband() {
        // No smoothing; demand 10k, capacity 5k (5k excess); secondary capacity 10k
        // at 0.8 → 8k − base. Target fraction = min(5k, 8k − base) / 10k.
        let config = FailoverConfig {
            half_life: Nanos::ZERO,
            ..FailoverConfig::default()
        };
        let mut f = Failover::new(&config).unwrap();
        let at = |base: f64| rates(10_000.0, 5_000.0, 10_000.0, base);
        assert_eq!(f.observe(Nanos::ZERO, at(6_000.0)), 0.2); // 2k: rise 0.2 ≥ 0.05
        assert_eq!(f.observe(Nanos::NANOSECOND, at(5_700.0)), 0.2); // 2.3k → 0.23: rise 0.03 < 0.05
        assert_eq!(f.observe(Nanos::from_nanos(2), at(5_400.0)), 0.26); // 2.6k → 0.26: rise 0.06
        assert_eq!(f.observe(Nanos::from_nanos(3), at(7_000.0)), 0.1); // 1k → 0.1: drops at once
        assert_eq!(f.observe(Nanos::from_nanos(4), at(6_990.0)), 0.1); // 0.101: not worth a change
        assert_eq!(f.changes(), 3);
    }

    #[test]
    fn noisy_rates_do_not_make_the_fraction_flap() {
        // Secondary base load 6k ± 10% uniform noise, one sample per second, for 10 min.
        // Raw law: target = (8k − base)/10k swings between 0.14 and 0.26 every second.
        let mut rng = Pcg64Mcg::seed_from_u64(42);
        let samples: Vec<RegionRates> = (0..600)
            .map(|_| {
                let base = 6_000.0 * (0.9 + 0.2 * rng.random::<f64>());
                rates(10_000.0, 5_000.0, 10_000.0, base)
            })
            .collect();
        let raw_rises = {
            let mut prev = 0.0;
            let mut rises = 0;
            for r in &samples {
                let t = AWARE.plan(r).fraction;
                rises += usize::from(t > prev);
                prev = t;
            }
            rises
        };
        let mut f = Failover::new(&FailoverConfig::default()).unwrap();
        let mut prev = 0.0;
        let mut rises = 0;
        for (i, r) in samples.iter().enumerate() {
            let applied = f.observe(Nanos::from_secs(i as u64), *r);
            rises += usize::from(applied > prev);
            prev = applied;
        }
        assert!(raw_rises > 200, "the raw law flaps ({raw_rises} rises)");
        // Only the initial step up from 0 (and at most a couple more) survive.
        assert!(rises <= 3, "smoothed + hysteresis rose {rises} times");
        assert!(
            prev > 0.1 && prev <= 0.2 + 1e-9,
            "settles near 0.2, got {prev}"
        );
    }

    #[test]
    fn stale_observations_stop_the_spill() {
        let mut f = Failover::new(&FailoverConfig::default()).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        assert_eq!(
            f.route(Nanos::ZERO, &mut rng),
            Region::Primary,
            "nothing observed yet"
        );
        f.observe(Nanos::from_secs(10), rates(10_000.0, 0.0, 100_000.0, 0.0));
        assert_eq!(f.spill_fraction(Nanos::from_secs(40)), 1.0);
        assert_eq!(f.route(Nanos::from_secs(40), &mut rng), Region::Secondary);
        // 30 s stale_after: at 40 s + 1 ns the observation from 10 s is too old.
        assert_eq!(
            f.spill_fraction(Nanos::from_secs(40) + Nanos::NANOSECOND),
            0.0
        );
        assert_eq!(f.route(Nanos::from_secs(41), &mut rng), Region::Primary);
    }

    #[test]
    fn route_matches_the_fraction_statistically() {
        // fraction 0.2; 50 000 draws: σ = √(50 000·0.2·0.8) ≈ 89.4; accept 10 000 ± 5σ.
        let config = FailoverConfig {
            half_life: Nanos::ZERO,
            ..FailoverConfig::default()
        };
        let mut f = Failover::new(&config).unwrap();
        f.observe(Nanos::ZERO, rates(10_000.0, 8_000.0, 5_000.0, 2_000.0));
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let spilled = (0..50_000)
            .filter(|_| f.route(Nanos::ZERO, &mut rng) == Region::Secondary)
            .count();
        assert!((9_553..=10_447).contains(&spilled), "spilled {spilled}");
    }

    #[test]
    fn config_validation_and_parsing() {
        let c: FailoverConfig = serde_json::from_str(
            r#"{"law": {"kind": "fixed_fraction", "fraction": 0.5}, "half_life": "5s"}"#,
        )
        .unwrap();
        assert_eq!(c.law, SpillLaw::FixedFraction { fraction: 0.5 });
        assert_eq!(c.half_life, Nanos::from_secs(5));
        let c: FailoverConfig = serde_json::from_str(r#"{"law": {"kind": "all_excess"}}"#).unwrap();
        assert_eq!(c.law, SpillLaw::AllExcess);
        assert!(
            serde_json::from_str::<FailoverConfig>(
                r#"{"law": {"kind": "capacity_aware", "target": 0.8}}"#
            )
            .is_err()
        );
        let bad = FailoverConfig {
            law: SpillLaw::CapacityAware {
                target_utilisation: 1.5,
            },
            ..FailoverConfig::default()
        };
        assert_eq!(
            Failover::new(&bad).unwrap_err().to_string(),
            "failover: law.target_utilisation must be in (0, 1], got 1.5"
        );
        let bad = FailoverConfig {
            deadband: 1.0,
            ..FailoverConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field(), "deadband");
        let bad = FailoverConfig {
            law: SpillLaw::FixedFraction { fraction: 0.0 },
            ..FailoverConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field(), "law.fraction");
    }

    fn rate() -> impl Strategy<Value = f64> {
        prop_oneof![Just(0.0), 0.0..1e6f64]
    }

    proptest! {
        #[test]
        fn capacity_aware_spill_never_exceeds_headroom_or_excess(
            demand in rate(), cap in rate(), sec_cap in rate(), sec_load in rate(),
            target in 0.01..=1.0f64,
        ) {
            let r = rates(demand, cap, sec_cap, sec_load);
            let p = SpillLaw::CapacityAware { target_utilisation: target }.plan(&r);
            let h = headroom(sec_cap, sec_load, target);
            prop_assert!(p.spill >= 0.0);
            prop_assert!(p.spill <= h);
            prop_assert!(p.spill <= p.excess);
            prop_assert!((p.spill + p.residual - p.excess).abs() <= 1e-9 * p.excess.max(1.0));
            prop_assert!((0.0..=1.0).contains(&p.fraction));
            if demand <= cap {
                prop_assert_eq!(p.spill, 0.0);
            }
            // Filling the secondary only up to target: never past it by our spill.
            if sec_cap > 0.0 && p.spill > 0.0 {
                prop_assert!(p.secondary_utilisation <= target + 1e-9);
            }
        }

        /// The router's applied fraction never exceeds the law's target on the
        /// smoothed rates, so the spill it sends stays within the headroom.
        #[test]
        fn router_never_spills_past_the_smoothed_headroom(
            obs in proptest::collection::vec((0u64..30, rate(), rate(), rate(), rate()), 1..200),
        ) {
            let mut f = Failover::new(&FailoverConfig::default()).unwrap();
            let mut now = Nanos::ZERO;
            for (dt, d, c, sc, sl) in obs {
                now += dt * Nanos::SECOND;
                let applied = f.observe(now, rates(d, c, sc, sl));
                let s = f.smoothed().unwrap();
                prop_assert!(applied <= f.plan().fraction + 1e-12);
                let spill = applied * s.primary_demand;
                let h = headroom(s.secondary_capacity, s.secondary_base_load, 0.8);
                prop_assert!(spill <= h * (1.0 + 1e-9) + 1e-9);
            }
        }
    }
}
