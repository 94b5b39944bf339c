//! Per-request decisions of the shedding and rate-limit policies never allocate.
//!
//! A counting global allocator counts allocations made on the current thread
//! while counting is switched on there (both the switch and the count are
//! thread-local, so tests running in parallel do not see each other's
//! allocations); construction happens before counting starts.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;
use stormbreak_policy::ratelimit::{KeyedRateLimiter, RateLimitConfig};
use stormbreak_policy::shed::{
    AdaptiveThrottle, Criticality, SaturationConfig, SaturationShedder, ShedConfig, ShedRule,
    Shedder, ThrottleConfig,
};

use crate::common::allocations_during;

const N: u64 = 10_000;

#[test]
fn the_counter_sees_allocations() {
    // Guards against a counter that can never fire.
    assert!(allocations_during(|| drop(std::hint::black_box(vec![1u8; 64]))) >= 1);
}

#[test]
fn saturation_shedder_decide_does_not_allocate() {
    let shedder = SaturationShedder::new(&SaturationConfig::default()).unwrap();
    let mut rejected = 0;
    let n = allocations_during(|| {
        for i in 0..N {
            let class = Criticality::ALL[(i % 4) as usize];
            rejected += u32::from(!shedder.decide(class, (i % 150) as f64 / 100.0).is_admit());
        }
    });
    assert_eq!(n, 0);
    assert!(rejected > 0);
}

#[test]
fn shedder_decide_and_rule_lookup_do_not_allocate() {
    let mut shedder = Shedder::new(&ShedConfig::default()).unwrap();
    for route in 0..32 {
        let rule = ShedRule {
            route: route * 2,
            class: (route % 3 == 0).then_some(Criticality::Sheddable),
            status: 429,
            retry_after: Some(Nanos::SECOND),
        };
        shedder.add_rule(rule).unwrap();
    }
    let mut rejected = 0;
    let n = allocations_during(|| {
        for i in 0..N {
            let class = Criticality::ALL[(i % 4) as usize];
            let route = (i % 80) as u32;
            rejected += u32::from(!shedder.decide(route, class, 0.5).is_admit());
            rejected += u32::from(shedder.rules().lookup(route, class).is_some());
        }
    });
    assert_eq!(n, 0);
    assert!(rejected > 0);
}

#[test]
fn adaptive_throttle_does_not_allocate() {
    let mut throttle = AdaptiveThrottle::new(&ThrottleConfig::default()).unwrap();
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    let mut sent = 0;
    let n = allocations_during(|| {
        // 10 000 requests over 10 minutes, a backend accepting one in three:
        // the ring wraps several times.
        for i in 0..N {
            let now = i * 60_000 * Nanos::MICROSECOND;
            if throttle.should_send(now, &mut rng) {
                sent += 1;
                throttle.on_response(now, i % 3 == 0);
            }
        }
    });
    assert_eq!(n, 0);
    assert!(sent > 0 && sent < N);
}

#[test]
fn keyed_rate_limiter_does_not_allocate_even_under_a_flood_of_unique_keys() {
    let cfg = RateLimitConfig {
        rate: 10.0,
        burst: 5,
        max_keys: 1024,
    };
    let mut limiter = KeyedRateLimiter::new(&cfg).unwrap();
    let mut admitted = 0u64;
    let n = allocations_during(|| {
        // A hot key and a small working set.
        for i in 0..N {
            admitted += u64::from(limiter.check(i * Nanos::MICROSECOND, i % 50).is_ok());
        }
        // 10⁶ unique keys, almost a thousand times the capacity.
        for i in 0..1_000_000u64 {
            admitted += u64::from(limiter.check(Nanos::from_nanos(N + i), 1 << 40 | i).is_ok());
            assert!(limiter.len() <= 1024);
        }
    });
    assert_eq!(n, 0);
    assert!(admitted > 1_000_000);
    assert_eq!(limiter.len(), 1024);
}
