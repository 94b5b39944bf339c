//! The misc policies (breaker, ramp, staged restore, failover) make their
//! per-request decisions without touching the heap.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;
use stormbreak_policy::breaker::{Breaker, BreakerConfig};
use stormbreak_policy::failover::{Failover, FailoverConfig, RegionRates};
use stormbreak_policy::ramp::{Ramp, RampConfig, StagedRestore, StagedRestoreConfig};

use crate::common::allocations_during;

const DECISIONS: u64 = 10_000;

#[test]
fn the_counter_sees_allocations() {
    let n = allocations_during(|| drop(std::hint::black_box(vec![1u8; 64])));
    assert_eq!(n, 1);
}

#[test]
fn breaker_decisions_do_not_allocate() {
    let config = BreakerConfig {
        sliding_window_size: 50,
        minimum_number_of_calls: 10,
        wait_duration_in_open_state: 100 * Nanos::MILLISECOND,
        permitted_number_of_calls_in_half_open_state: 3,
        ..BreakerConfig::default()
    };
    let mut breaker = Breaker::new(&config).unwrap();
    let n = allocations_during(|| {
        // Failure bursts walk it through closed → open → half-open → closed/open.
        for i in 0..DECISIONS {
            let now = i * Nanos::MILLISECOND;
            if let Some(t) = breaker.allow(now).ticket() {
                if (i / 200) % 2 == 0 {
                    let _ = breaker.on_success(now, t);
                } else {
                    let _ = breaker.on_failure(now, t);
                }
            }
        }
    });
    assert!(breaker.stats().opened > 0 && breaker.stats().closed > 0);
    assert_eq!(n, 0);
}

#[test]
fn ramp_decisions_do_not_allocate() {
    let mut ramp = Ramp::new(&RampConfig::default()).unwrap();
    ramp.start(Nanos::ZERO);
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    let n = allocations_during(|| {
        for i in 0..DECISIONS {
            let now = i * 300 * Nanos::MILLISECOND; // 50 min in total
            if ramp.admit(now, &mut rng) {
                ramp.observe(now, i % 7 != 0);
            }
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn staged_restore_decisions_do_not_allocate() {
    let mut restore = StagedRestore::new(&StagedRestoreConfig::default(), 4).unwrap();
    restore.start(Nanos::ZERO);
    let mut rng = Pcg64Mcg::seed_from_u64(4);
    let n = allocations_during(|| {
        for i in 0..DECISIONS {
            let now = i * Nanos::SECOND; // ≈ 2.8 h: every site starts and completes
            let site = (i % 4) as usize;
            if restore.admit(now, site, &mut rng) {
                restore.observe(now, site, true);
            }
        }
    });
    assert!(restore.is_complete());
    assert_eq!(n, 0);
}

#[test]
fn failover_decisions_do_not_allocate() {
    let mut failover = Failover::new(&FailoverConfig::default()).unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(5);
    let n = allocations_during(|| {
        let mut spilled = 0u64;
        for i in 0..DECISIONS {
            let now = i * Nanos::MILLISECOND;
            if i % 100 == 0 {
                failover.observe(
                    now,
                    RegionRates {
                        primary_demand: 10_000.0 + (i % 1000) as f64,
                        primary_capacity: 8_000.0,
                        secondary_capacity: 5_000.0,
                        secondary_base_load: 2_000.0,
                    },
                );
            }
            spilled += u64::from(
                failover.route(now, &mut rng) == stormbreak_policy::failover::Region::Secondary,
            );
        }
        std::hint::black_box(spilled);
    });
    assert_eq!(n, 0);
}
