//! Cost of the per-request decisions of the breaker, ramp, staged restore and failover.
use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;
use stormbreak_policy::Nanos;
use stormbreak_policy::breaker::{Breaker, BreakerConfig};
use stormbreak_policy::failover::{Failover, FailoverConfig, RegionRates};
use stormbreak_policy::ramp::{Ramp, RampConfig, StagedRestore, StagedRestoreConfig};

fn breaker(c: &mut Criterion) {
    let mut b = Breaker::new(&BreakerConfig::default()).unwrap();
    let mut now = Nanos::ZERO;
    c.bench_function("misc/breaker/allow+on_success", |bench| {
        bench.iter(|| {
            now += Nanos::from_micros(1);
            if let Some(t) = b.allow(black_box(now)).ticket() {
                black_box(b.on_success(now, t));
            }
        })
    });
    // Open: the rejection path a shed caller hits on every request.
    let config = BreakerConfig {
        consecutive_failures: 1,
        ..BreakerConfig::default()
    };
    let mut open = Breaker::new(&config).unwrap();
    let t = open.allow(Nanos::ZERO).ticket().unwrap();
    let _ = open.on_failure(Nanos::ZERO, t);
    c.bench_function("misc/breaker/allow_open", |bench| {
        bench.iter(|| black_box(open.allow(black_box(Nanos::SECOND))))
    });
}

fn ramp(c: &mut Criterion) {
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    let mut r = Ramp::new(&RampConfig::default()).unwrap();
    r.start(Nanos::ZERO);
    let mut now = Nanos::ZERO;
    c.bench_function("misc/ramp/admit", |bench| {
        bench.iter(|| {
            now = (now + Nanos::from_micros(1)) % (10 * Nanos::MINUTE); // stays below 1.0: draws every time
            black_box(r.admit(black_box(now), &mut rng))
        })
    });
    let mut now = Nanos::ZERO;
    c.bench_function("misc/ramp/observe", |bench| {
        bench.iter(|| {
            now += Nanos::from_micros(1);
            r.observe(black_box(now), black_box(true))
        })
    });
}

fn staged_restore(c: &mut Criterion) {
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    let mut s = StagedRestore::new(&StagedRestoreConfig::default(), 8).unwrap();
    s.start(Nanos::ZERO);
    let mut now = 25 * Nanos::MINUTE; // site 1 ramping
    let mut site = 0;
    c.bench_function("misc/staged_restore/admit", |bench| {
        bench.iter(|| {
            now += Nanos::from_micros(1);
            site = (site + 1) % 2;
            black_box(s.admit(black_box(now), site, &mut rng))
        })
    });
}

fn failover(c: &mut Criterion) {
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    let mut f = Failover::new(&FailoverConfig::default()).unwrap();
    let rates = RegionRates {
        primary_demand: 10_000.0,
        primary_capacity: 8_000.0,
        secondary_capacity: 5_000.0,
        secondary_base_load: 2_000.0,
    };
    f.observe(Nanos::ZERO, rates);
    c.bench_function("misc/failover/route", |bench| {
        bench.iter(|| black_box(f.route(black_box(Nanos::SECOND), &mut rng)))
    });
    let mut now = Nanos::ZERO;
    c.bench_function("misc/failover/observe", |bench| {
        bench.iter(|| {
            now += Nanos::SECOND / 10;
            black_box(f.observe(black_box(now), black_box(rates)))
        })
    });
}

criterion_group!(benches, breaker, ramp, staged_restore, failover);
criterion_main!(benches);
