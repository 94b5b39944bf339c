//! Cost of each per-request decision of the shedding and rate-limit policies.
//!
//! Run: `cargo bench -p stormbreak-policy --bench shed -- --warm-up-time 1 --measurement-time 2`
use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;
use stormbreak_policy::Nanos;
use stormbreak_policy::ratelimit::{KeyedRateLimiter, RateLimitConfig};
use stormbreak_policy::shed::{
    AdaptiveThrottle, Criticality, SaturationConfig, SaturationShedder, ShedConfig, ShedRule,
    ShedRules, Shedder, ThrottleConfig,
};

/// 64 rules over 48 routes (every third route also has a per-class rule).
fn full_rule_set() -> Vec<ShedRule> {
    let mut rules = Vec::new();
    for route in 0..48u32 {
        rules.push(ShedRule {
            route: route * 3,
            class: None,
            status: 503,
            retry_after: None,
        });
        if route % 3 == 0 {
            rules.push(ShedRule {
                route: route * 3,
                class: Some(Criticality::Sheddable),
                status: 429,
                retry_after: None,
            });
        }
    }
    rules
}

fn saturation(c: &mut Criterion) {
    let shedder = SaturationShedder::new(&SaturationConfig::default()).unwrap();
    let mut i = 0u64;
    c.bench_function("shed/saturation/decide", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let class = Criticality::ALL[(i & 3) as usize];
            shedder.decide(black_box(class), black_box((i % 128) as f64 / 100.0))
        })
    });
}

fn rules(c: &mut Criterion) {
    let mut table = ShedRules::with_capacity(64).unwrap();
    for rule in full_rule_set() {
        table.add_rule(rule).unwrap();
    }
    let mut i = 0u32;
    c.bench_function("shed/rules/lookup_64_rules", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            table.lookup(
                black_box(i % 160),
                black_box(Criticality::ALL[(i & 3) as usize]),
            )
        })
    });
}

fn shedder(c: &mut Criterion) {
    let cfg = ShedConfig {
        rules: full_rule_set(),
        ..ShedConfig::default()
    };
    let shedder = Shedder::new(&cfg).unwrap();
    let mut i = 0u32;
    c.bench_function("shed/shedder/decide_64_rules", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let class = Criticality::ALL[(i & 3) as usize];
            shedder.decide(black_box(i % 160), black_box(class), black_box(0.85))
        })
    });
}

fn throttle(c: &mut Criterion) {
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    let mut throttle = AdaptiveThrottle::new(&ThrottleConfig::default()).unwrap();
    // One request per 100 µs: a new 1 s bucket every 10 000 calls, so the
    // ring advance is included at its real frequency. The backend accepts one
    // in four, so p > 0 and the random draw is taken.
    let mut now = Nanos::ZERO;
    let mut n = 0u64;
    c.bench_function("shed/throttle/should_send_and_on_response", |b| {
        b.iter(|| {
            now += 100 * Nanos::MICROSECOND;
            n += 1;
            let send = throttle.should_send(black_box(now), &mut rng);
            if send {
                throttle.on_response(now, n.is_multiple_of(4));
            }
            send
        })
    });
}

fn ratelimit(c: &mut Criterion) {
    let cfg = RateLimitConfig::default(); // 10/s, burst 20, 65 536 keys
    let mut limiter = KeyedRateLimiter::new(&cfg).unwrap();
    let mut now = Nanos::ZERO;
    let mut i = 0u64;
    c.bench_function("shed/ratelimit/check_1000_live_keys", |b| {
        b.iter(|| {
            now += Nanos::MICROSECOND;
            i += 1;
            limiter.check(black_box(now), black_box(i % 1000)).is_ok()
        })
    });

    // Every call is a new key into a full 65 536-key table: find misses,
    // evict the smallest TAT, insert, sift down.
    let mut limiter = KeyedRateLimiter::new(&cfg).unwrap();
    let mut key = 1u64 << 40;
    for _ in 0..cfg.max_keys {
        key += 1;
        now += Nanos::MICROSECOND;
        limiter.check(now, key).unwrap();
    }
    c.bench_function(
        "shed/ratelimit/check_unique_key_flood_full_64k_table",
        |b| {
            b.iter(|| {
                key += 1;
                now += Nanos::MICROSECOND;
                limiter.check(black_box(now), black_box(key)).is_ok()
            })
        },
    );
}

criterion_group!(benches, saturation, rules, shedder, throttle, ratelimit);
criterion_main!(benches);
