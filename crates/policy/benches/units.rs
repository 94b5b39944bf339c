//! Cost of parsing the human units used in scenario and guard config files.
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use stormbreak_policy::units::{parse_duration, parse_rate};

fn units(c: &mut Criterion) {
    c.bench_function("units/parse_duration 7h47m", |b| {
        b.iter(|| parse_duration(black_box("7h47m")))
    });
    c.bench_function("units/parse_rate 9k/s", |b| {
        b.iter(|| parse_rate(black_box("9k/s")))
    });
}

criterion_group!(benches, units);
criterion_main!(benches);
