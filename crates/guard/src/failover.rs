//! Failover to a second cluster by the policy crate's capacity-aware spill
//! law: only the excess the primary cannot serve, and only as much as the
//! secondary has headroom for.
//!
//! Rates come from the guard's own counters, read once a second by
//! [`Spill::observe`]: the route's attempts (demand on the primary), the
//! secondary cluster's attempts less those this route spilled to it (its
//! base load), and each cluster's `endpoint_capacity × available endpoints`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::failover::{Failover, FailoverConfig, Region, RegionRates};
use stormbreak_policy::{FieldError, Nanos};

use crate::clock::Clock;

/// How often the counters are turned into rates.
pub(crate) const OBSERVE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One route's spill state.
pub(crate) struct Spill {
    state: Mutex<(Failover, Pcg64Mcg)>,
    demand: AtomicU64,
    spilled: AtomicU64,
    last: Mutex<Counts>,
    clock: Clock,
}

/// Counter readings at the previous observation.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    at: Nanos,
    demand: u64,
    spilled: u64,
    secondary_served: u64,
}

/// What [`Spill::observe`] needs to know about the two clusters now.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Capacity {
    /// Requests per second the primary's available endpoints can serve.
    pub(crate) primary: f64,
    /// Requests per second the secondary's available endpoints can serve.
    pub(crate) secondary: f64,
    /// Attempts the secondary cluster has been sent in all (a running counter).
    pub(crate) secondary_served: u64,
}

impl Spill {
    pub(crate) fn new(config: &FailoverConfig, clock: Clock) -> Result<Self, FieldError> {
        Ok(Spill {
            state: Mutex::new((Failover::new(config)?, Pcg64Mcg::from_os_rng())),
            demand: AtomicU64::new(0),
            spilled: AtomicU64::new(0),
            last: Mutex::new(Counts::default()),
            clock,
        })
    }

    /// Where the next attempt goes; counts it.
    pub(crate) fn route(&self) -> Region {
        self.demand.fetch_add(1, Ordering::Relaxed);
        let now = self.clock.now();
        let region = {
            let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let (failover, rng) = &mut *s;
            failover.route(now, rng)
        };
        if region == Region::Secondary {
            self.spilled.fetch_add(1, Ordering::Relaxed);
        }
        region
    }

    /// Turns the counters since the last call into rates and feeds the law;
    /// returns the spill fraction now applied.
    pub(crate) fn observe(&self, capacity: Capacity) -> f64 {
        let now = self.clock.now();
        let current = Counts {
            at: now,
            demand: self.demand.load(Ordering::Relaxed),
            spilled: self.spilled.load(Ordering::Relaxed),
            secondary_served: capacity.secondary_served,
        };
        let previous = std::mem::replace(
            &mut *self.last.lock().unwrap_or_else(PoisonError::into_inner),
            current,
        );
        let dt = now.saturating_sub(previous.at).as_secs_f64();
        if dt <= 0.0 {
            return self.fraction();
        }
        let per_sec = |a: u64, b: u64| a.saturating_sub(b) as f64 / dt;
        let spilled = per_sec(current.spilled, previous.spilled);
        let rates = RegionRates {
            // What the primary was asked for, spilled part included.
            primary_demand: per_sec(current.demand, previous.demand),
            primary_capacity: capacity.primary,
            secondary_capacity: capacity.secondary,
            // The secondary's own load: not what we sent it (see the policy's docs).
            secondary_base_load: (per_sec(current.secondary_served, previous.secondary_served)
                - spilled)
                .max(0.0),
        };
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.0.observe(now, rates)
    }

    fn fraction(&self) -> f64 {
        let now = self.clock.now();
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .spill_fraction(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn instant() -> FailoverConfig {
        FailoverConfig {
            half_life: Nanos::ZERO,
            deadband: 0.0,
            ..FailoverConfig::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn counters_become_rates_and_only_the_excess_within_headroom_spills() {
        let spill = Spill::new(&instant(), Clock::new()).unwrap();
        // One second of 100 attempts/s while nothing spills yet.
        for _ in 0..100 {
            assert_eq!(spill.route(), Region::Primary);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Primary serves 50/s; the secondary 100/s with 30/s of its own:
        // excess 50, headroom 0.8 × 100 − 30 = 50 → spill 50 of 100.
        let f = spill.observe(Capacity {
            primary: 50.0,
            secondary: 100.0,
            secondary_served: 30,
        });
        assert!((f - 0.5).abs() < 1e-9, "{f}");
        let secondary = (0..10_000)
            .filter(|_| spill.route() == Region::Secondary)
            .count();
        assert!((4_500..5_500).contains(&secondary), "{secondary}");
        // Next second: 10 000 attempts/s against 5 000/s of primary capacity.
        // The secondary's count includes what we spilled to it, which is not
        // its base load: only its own 30/s is, so the headroom stays 50/s and
        // the fraction is 50 / 10 000. (Counting the spill as base load would
        // leave no headroom and a fraction of 0.)
        tokio::time::sleep(Duration::from_secs(1)).await;
        let served = 30 + 30 + secondary as u64;
        let f = spill.observe(Capacity {
            primary: 5_000.0,
            secondary: 100.0,
            secondary_served: served,
        });
        assert!((f - 0.005).abs() < 1e-9, "{f}");
    }

    #[tokio::test(start_paused = true)]
    async fn no_headroom_no_spill_however_overloaded_the_primary() {
        let spill = Spill::new(&instant(), Clock::new()).unwrap();
        for _ in 0..1000 {
            let _ = spill.route();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Secondary at 90 % of its capacity already: 0.8 × 100 − 90 < 0.
        let f = spill.observe(Capacity {
            primary: 10.0,
            secondary: 100.0,
            secondary_served: 90,
        });
        assert_eq!(f, 0.0);
        assert!((0..1000).all(|_| spill.route() == Region::Primary));
    }
}
