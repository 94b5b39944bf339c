//! Per-request decisions of every limiter allocate nothing after construction.
//!
//! A counting global allocator tallies, per thread, allocations made while
//! that thread's flag is on, so test threads running in parallel do not
//! see each other's allocations.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;
use stormbreak_policy::limit::{
    Aimd, AimdConfig, EnvoyGradient, EnvoyGradientConfig, Fixed, FixedConfig, Gradient2,
    Gradient2Config, LimitAlgorithm, LimitConfig, Limiter, Outcome, Vegas, VegasConfig, Windowed,
    WindowedConfig,
};

use crate::common::allocations_during;

const DECISIONS: u64 = 10_000;

/// 10 000 acquire/release pairs with rtts and drops that move every
/// algorithm through its branches (growth, backoff, windows, probes).
fn drive<A: LimitAlgorithm>(limiter: &mut Limiter<A>) -> usize {
    let mut rng = Pcg64Mcg::seed_from_u64(11);
    let mut held = [None; 64];
    allocations_during(|| {
        for i in 0..DECISIONS {
            let now = i * 500 * Nanos::MICROSECOND;
            let slot = (i % 64) as usize;
            if let Some(permit) = held[slot].take() {
                let outcome = match i % 97 {
                    0 => Outcome::Dropped,
                    1 => Outcome::Ignore,
                    _ => Outcome::Success,
                };
                limiter.release(now, permit, outcome, &mut rng);
            }
            held[slot] = limiter.try_acquire(now);
        }
    })
}

fn assert_no_alloc<A: LimitAlgorithm>(name: &str, algorithm: A) {
    let mut limiter = Limiter::new(algorithm);
    let n = drive(&mut limiter);
    assert_eq!(n, 0, "{name}: {n} allocations in {DECISIONS} decisions");
}

#[test]
fn counter_sees_allocations() {
    // Guards the guard: if counting were broken every test below would pass.
    let n = allocations_during(|| {
        std::hint::black_box(vec![1u8; 16]);
    });
    assert_eq!(n, 1);
}

#[test]
fn fixed_does_not_allocate() {
    assert_no_alloc("fixed", Fixed::new(&FixedConfig { limit: 40 }).unwrap());
}

#[test]
fn aimd_does_not_allocate() {
    let config = AimdConfig {
        timeout: Nanos::from_millis(20),
        ..AimdConfig::default()
    };
    assert_no_alloc("aimd", Aimd::new(&config).unwrap());
}

#[test]
fn vegas_does_not_allocate() {
    let config = VegasConfig {
        probe_multiplier: 1,
        ..VegasConfig::default()
    };
    assert_no_alloc("vegas", Vegas::new(&config).unwrap());
}

#[test]
fn gradient2_does_not_allocate() {
    assert_no_alloc(
        "gradient2",
        Gradient2::new(&Gradient2Config::default()).unwrap(),
    );
}

#[test]
fn envoy_gradient_does_not_allocate() {
    // A tiny buffer forces the reservoir path; a 1 s minRTT interval puts
    // several probes inside the 5 s run.
    let config = EnvoyGradientConfig {
        sample_capacity: 8,
        min_rtt_interval: Nanos::from_secs(1),
        min_rtt_request_count: 5,
        ..EnvoyGradientConfig::default()
    };
    assert_no_alloc("envoy_gradient", EnvoyGradient::new(&config).unwrap());
}

#[test]
fn windowed_does_not_allocate() {
    let config = WindowedConfig {
        min_window: Nanos::from_millis(100),
        max_window: Nanos::from_millis(100),
        ..WindowedConfig::default()
    };
    let inner = Gradient2::new(&Gradient2Config::default()).unwrap();
    assert_no_alloc("windowed", Windowed::new(&config, inner).unwrap());
}

#[test]
fn any_limit_from_config_does_not_allocate() {
    for json in [
        r#"{"kind": "fixed", "limit": 40}"#,
        r#"{"kind": "aimd"}"#,
        r#"{"kind": "vegas"}"#,
        r#"{"kind": "gradient2"}"#,
        r#"{"kind": "envoy_gradient", "min_rtt_interval": "1s", "sample_capacity": 8}"#,
        r#"{"kind": "windowed", "window": {"min_window": "100ms", "max_window": "100ms"},
            "inner": {"kind": "vegas"}}"#,
    ] {
        let config: LimitConfig = serde_json::from_str(json).unwrap();
        assert_no_alloc(config.kind(), config.build().unwrap());
    }
}
