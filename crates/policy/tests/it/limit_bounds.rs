//! Invariants of every limit algorithm over arbitrary sample sequences and
//! arbitrary valid configs: the limit never leaves `[min_limit, max_limit]`,
//! the limiter never admits past the limit, and equal inputs give equal limits.

use proptest::prelude::*;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;
use stormbreak_policy::limit::{
    AimdConfig, AnyLimit, EnvoyGradientConfig, FixedConfig, Gradient2Config, LimitAlgorithm,
    LimitConfig, Limiter, Outcome, Sample, VegasConfig, WindowedConfig, WindowedLimitConfig,
};

/// Times drawn uniformly from `[lo, hi)`.
fn span(lo: Nanos, hi: Nanos) -> impl Strategy<Value = Nanos> + Clone {
    (lo.as_nanos()..hi.as_nanos()).prop_map(Nanos::from_nanos)
}

/// (time step, rtt, inflight, dropped)
type Step = (Nanos, Nanos, u32, bool);

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (
            span(Nanos::ZERO, Nanos::from_millis(300)),
            prop_oneof![
                span(Nanos::ZERO, Nanos::from_millis(50)),
                span(Nanos::ZERO, Nanos::from_secs(10))
            ],
            0u32..3000,
            any::<bool>(),
        ),
        1..300,
    )
}

fn limit_range() -> impl Strategy<Value = (u32, u32, u32)> {
    (1u32..100, 0u32..2000)
        .prop_flat_map(|(min, span)| (Just(min), min..=min + span, Just(min + span)))
}

fn fixed() -> impl Strategy<Value = LimitConfig> {
    (1u32..5000).prop_map(|limit| LimitConfig::Fixed(FixedConfig { limit }))
}

fn aimd() -> impl Strategy<Value = LimitConfig> {
    (
        limit_range(),
        0.5f64..0.999,
        span(Nanos::NANOSECOND, Nanos::from_secs(10)),
    )
        .prop_map(|((min, initial, max), ratio, timeout)| {
            LimitConfig::Aimd(AimdConfig {
                min_limit: min,
                initial_limit: initial,
                max_limit: max,
                backoff_ratio: ratio,
                timeout,
            })
        })
}

fn vegas() -> impl Strategy<Value = LimitConfig> {
    (limit_range(), 0.01f64..=1.0, 1u32..100).prop_map(|((_, initial, max), smoothing, probe)| {
        LimitConfig::Vegas(VegasConfig {
            initial_limit: initial,
            max_concurrency: max,
            smoothing,
            probe_multiplier: probe,
        })
    })
}

fn gradient2() -> impl Strategy<Value = LimitConfig> {
    (
        limit_range(),
        0.01f64..=1.0,
        1.0f64..4.0,
        1u32..1000,
        0u32..50,
    )
        .prop_map(
            |((min, initial, max), smoothing, tolerance, long_window, queue_size)| {
                LimitConfig::Gradient2(Gradient2Config {
                    min_limit: min,
                    initial_limit: initial,
                    max_concurrency: max,
                    smoothing,
                    rtt_tolerance: tolerance,
                    long_window,
                    queue_size,
                })
            },
        )
}

fn envoy() -> impl Strategy<Value = LimitConfig> {
    (
        (1u32..20, 0u32..2000),
        0.0f64..=100.0,
        span(Nanos::from_millis(1), Nanos::from_millis(500)),
        (
            span(Nanos::from_millis(1), Nanos::from_secs(5)),
            prop::option::of(span(Nanos::NANOSECOND, Nanos::from_millis(100))),
        ),
        (1u32..100, 0.0f64..=100.0, 0.0f64..=100.0, 1u32..256),
    )
        .prop_map(
            |((min, span), percentile, update, (interval, fixed), (count, jitter, buffer, cap))| {
                LimitConfig::EnvoyGradient(EnvoyGradientConfig {
                    sample_aggregate_percentile: percentile,
                    concurrency_update_interval: update,
                    max_concurrency_limit: min + span,
                    min_rtt_interval: interval,
                    min_rtt_fixed_value: fixed,
                    min_rtt_request_count: count,
                    min_rtt_jitter: jitter,
                    min_concurrency: min,
                    min_rtt_buffer: buffer,
                    sample_capacity: cap,
                })
            },
        )
}

fn windowed() -> impl Strategy<Value = LimitConfig> {
    (
        prop_oneof![aimd(), vegas(), gradient2()],
        100u64..2000,
        0u64..2000,
        10u32..50,
    )
        .prop_map(|(inner, min_ms, extra_ms, size)| {
            LimitConfig::Windowed(WindowedLimitConfig {
                window: WindowedConfig {
                    min_window: min_ms * Nanos::MILLISECOND,
                    max_window: (min_ms + extra_ms) * Nanos::MILLISECOND,
                    window_size: size,
                    ..WindowedConfig::default()
                },
                inner: Box::new(inner),
            })
        })
}

fn any_config() -> impl Strategy<Value = LimitConfig> {
    prop_oneof![fixed(), aimd(), vegas(), gradient2(), envoy(), windowed()]
}

/// Feeds `steps` and returns the limit after each one, checking bounds as it goes.
fn trajectory(limit: &mut AnyLimit, steps: &[Step], seed: u64) -> Result<Vec<u32>, TestCaseError> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let (min, max) = (limit.min_limit(), limit.max_limit());
    prop_assert!(min >= 1 && min <= max);
    let mut now = Nanos::ZERO;
    let mut seen = Vec::with_capacity(steps.len());
    for &(dt, rtt, inflight, dropped) in steps {
        // Time only moves forward: a timer check halfway, then the sample.
        now += dt / 2;
        limit.advance(now);
        now += dt - dt / 2;
        let sample = Sample {
            rtt,
            inflight,
            dropped,
        };
        limit.on_sample(now, sample, &mut rng);
        let l = limit.limit();
        prop_assert!(
            (min..=max).contains(&l),
            "limit {} left [{}, {}] at {}",
            l,
            min,
            max,
            now
        );
        seen.push(l);
    }
    Ok(seen)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn limit_stays_within_bounds_and_is_deterministic(
        config in any_config(),
        steps in steps(),
        seed in any::<u64>(),
    ) {
        let built = config.build();
        prop_assert!(built.is_ok(), "generated config rejected: {:?}", built.err());
        let mut first = built.unwrap();
        let mut second = config.build().unwrap();
        let a = trajectory(&mut first, &steps, seed)?;
        let b = trajectory(&mut second, &steps, seed)?;
        prop_assert_eq!(a, b);
    }

    #[test]
    fn limiter_never_admits_past_the_limit(
        config in any_config(),
        ops in prop::collection::vec((span(Nanos::ZERO, Nanos::from_millis(50)), any::<bool>(), 0u8..3), 1..400),
        seed in any::<u64>(),
    ) {
        let mut limiter = Limiter::new(config.build().unwrap());
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut held = Vec::new();
        let mut now = Nanos::ZERO;
        for (dt, acquire, kind) in ops {
            now += dt;
            if acquire || held.is_empty() {
                if let Some(permit) = limiter.try_acquire(now) {
                    prop_assert!(limiter.inflight() <= limiter.limit());
                    prop_assert_eq!(permit.inflight, limiter.inflight());
                    held.push(permit);
                } else {
                    prop_assert!(limiter.inflight() >= limiter.limit());
                }
            } else {
                let permit = held.remove(0);
                let outcome = [Outcome::Success, Outcome::Dropped, Outcome::Ignore][kind as usize];
                limiter.release(now, permit, outcome, &mut rng);
            }
            prop_assert_eq!(limiter.inflight() as usize, held.len());
        }
    }
}
