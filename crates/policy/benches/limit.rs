//! Cost of one per-request decision of each concurrency limiter: a release
//! (feeding a sample) followed by an acquire, in steady state with 32
//! requests in flight and virtual time advancing 100 µs per request.
use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;
use stormbreak_policy::Nanos;
use stormbreak_policy::limit::{
    Aimd, AimdConfig, EnvoyGradient, EnvoyGradientConfig, Fixed, FixedConfig, Gradient2,
    Gradient2Config, LimitAlgorithm, LimitConfig, Limiter, Outcome, Permit, Sample, Vegas,
    VegasConfig, Windowed, WindowedConfig,
};

const IN_FLIGHT: usize = 32;

/// Release the oldest of 32 in-flight permits, then acquire a new one.
fn bench_acquire_release<A: LimitAlgorithm>(c: &mut Criterion, name: &str, algorithm: A) {
    let mut limiter = Limiter::new(algorithm);
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    let mut held: [Option<Permit>; IN_FLIGHT] = [None; IN_FLIGHT];
    let mut now: Nanos = Nanos::ZERO;
    let mut i = 0usize;
    c.bench_function(&format!("limit/{name}/acquire_release"), |b| {
        b.iter(|| {
            now += 100 * Nanos::MICROSECOND;
            let slot = i % IN_FLIGHT;
            i += 1;
            if let Some(permit) = held[slot].take() {
                limiter.release(now, permit, Outcome::Success, &mut rng);
            }
            held[slot] = black_box(limiter.try_acquire(black_box(now)));
        })
    });
}

/// Feed one sample straight to the algorithm, without the limiter.
fn bench_on_sample<A: LimitAlgorithm>(c: &mut Criterion, name: &str, mut algorithm: A) {
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    let mut now: Nanos = Nanos::ZERO;
    let mut i = 0u64;
    c.bench_function(&format!("limit/{name}/on_sample"), |b| {
        b.iter(|| {
            now += 100 * Nanos::MICROSECOND;
            i += 1;
            let sample = Sample {
                rtt: 10_000 * Nanos::MICROSECOND + (i % 7) * 500 * Nanos::MICROSECOND,
                inflight: 30 + (i % 5) as u32,
                dropped: i.is_multiple_of(101),
            };
            algorithm.on_sample(now, black_box(sample), &mut rng);
            black_box(algorithm.limit())
        })
    });
}

fn fixed() -> Fixed {
    Fixed::new(&FixedConfig { limit: 40 }).unwrap()
}
fn aimd() -> Aimd {
    Aimd::new(&AimdConfig::default()).unwrap()
}
fn vegas() -> Vegas {
    Vegas::new(&VegasConfig::default()).unwrap()
}
fn gradient2() -> Gradient2 {
    Gradient2::new(&Gradient2Config::default()).unwrap()
}
fn envoy() -> EnvoyGradient {
    EnvoyGradient::new(&EnvoyGradientConfig::default()).unwrap()
}
fn windowed() -> Windowed<Gradient2> {
    Windowed::new(&WindowedConfig::default(), gradient2()).unwrap()
}

fn limit(c: &mut Criterion) {
    bench_acquire_release(c, "fixed", fixed());
    bench_acquire_release(c, "aimd", aimd());
    bench_acquire_release(c, "vegas", vegas());
    bench_acquire_release(c, "gradient2", gradient2());
    bench_acquire_release(c, "envoy_gradient", envoy());
    bench_acquire_release(c, "windowed_gradient2", windowed());
    let any: LimitConfig = serde_json::from_str(r#"{"kind": "envoy_gradient"}"#).unwrap();
    bench_acquire_release(c, "any_envoy_gradient", any.build().unwrap());

    bench_on_sample(c, "aimd", aimd());
    bench_on_sample(c, "vegas", vegas());
    bench_on_sample(c, "gradient2", gradient2());
    bench_on_sample(c, "envoy_gradient", envoy());
    bench_on_sample(c, "windowed_gradient2", windowed());
}

criterion_group!(benches, limit);
criterion_main!(benches);
