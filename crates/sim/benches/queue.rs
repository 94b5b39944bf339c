//! Cost of the event queue with 10⁶ pending timers: `EventQueue` (binary
//! heap + FIFO lanes for fixed-duration timers) against a plain
//! `std::collections::BinaryHeap` ordered by (time, sequence), which is what
//! the lanes replace.
//!
//! Each benchmark is a "hold" step, the classic future-event-list workload:
//! pop the earliest event, advance the clock to it, schedule its successor.
//! The queue stays at its pending size for the whole measurement, so one
//! iteration is one pop + one push at that size.
//!
//! * `hold_timers_1e6/*`: 10⁶ pending 200 ms timeouts (all the same
//!   duration, as a client population's per-try timeouts are).
//! * `hold_mixed_1e6/*`: the same 10⁶ timeouts plus 10³ events at random
//!   exponential delays (mean 1 ms, like service completions) that stay in
//!   the heap; about 1 pop in 6 is such an event.
//! * `fill_drain_1e6/*`: push 10⁶ timers, then pop them all (per element).
//! * `hold_random_{3e3,3e4}/*`: only random-delay events, at the heap sizes
//!   of the replay at `--scale 0.1` and `--scale 1`.
//!
//! Run: `cargo bench -p stormbreak-sim --bench queue`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::Nanos;
use stormbreak_sim::queue::{EventQueue, Lane};

/// Same size as the engine's `Ev` (a tag and a generational key): 12 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Payload {
    kind: u32,
    index: u32,
    generation: u32,
}

const PENDING: u64 = 1_000_000;
const TIMEOUT: u64 = 200_000_000; // 200 ms in ns
const RANDOM_PENDING: u64 = 1_000;
const RANDOM_MEAN_NS: f64 = 1_000_000.0; // 1 ms

const TIMER: u32 = 0;
const RANDOM: u32 = 1;

fn timer(i: u64) -> Payload {
    Payload {
        kind: TIMER,
        index: i as u32,
        generation: 0,
    }
}

fn exp_ns(rng: &mut Pcg64Mcg) -> u64 {
    let u: f64 = rng.random();
    ((-(1.0 - u).ln()) * RANDOM_MEAN_NS).ceil().max(1.0) as u64
}

/// The future-event list under test.
trait Fel {
    fn push_timer(&mut self, now: u64, p: Payload);
    fn push_at(&mut self, at: u64, p: Payload);
    fn pop(&mut self) -> Option<(u64, Payload)>;
}

/// `EventQueue` with timers in a FIFO lane.
struct Lanes {
    q: EventQueue<Payload>,
    lane: Lane,
}

impl Lanes {
    fn new() -> Self {
        let mut q = EventQueue::new();
        let lane = q.lane(Nanos::from_nanos(TIMEOUT));
        Lanes { q, lane }
    }
}

impl Fel for Lanes {
    #[inline]
    fn push_timer(&mut self, now: u64, p: Payload) {
        self.q
            .schedule_in_lane(self.lane, Nanos::from_nanos(now), p);
    }
    #[inline]
    fn push_at(&mut self, at: u64, p: Payload) {
        self.q.schedule(Nanos::from_nanos(at), p);
    }
    #[inline]
    fn pop(&mut self) -> Option<(u64, Payload)> {
        self.q.pop().map(|(t, p)| (t.as_nanos(), p))
    }
}

/// `EventQueue` with every event in its heap (no lane used).
struct HeapOnly(EventQueue<Payload>);

impl Fel for HeapOnly {
    #[inline]
    fn push_timer(&mut self, now: u64, p: Payload) {
        self.0.schedule(Nanos::from_nanos(now + TIMEOUT), p);
    }
    #[inline]
    fn push_at(&mut self, at: u64, p: Payload) {
        self.0.schedule(Nanos::from_nanos(at), p);
    }
    #[inline]
    fn pop(&mut self) -> Option<(u64, Payload)> {
        self.0.pop().map(|(t, p)| (t.as_nanos(), p))
    }
}

/// A plain `BinaryHeap` of (time, sequence, payload), min-first.
#[derive(Default)]
struct StdHeap {
    heap: BinaryHeap<Reverse<(u64, u64, Payload)>>,
    seq: u64,
}

impl Fel for StdHeap {
    #[inline]
    fn push_timer(&mut self, now: u64, p: Payload) {
        self.push_at(now + TIMEOUT, p);
    }
    #[inline]
    fn push_at(&mut self, at: u64, p: Payload) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, p)));
    }
    #[inline]
    fn pop(&mut self) -> Option<(u64, Payload)> {
        self.heap.pop().map(|Reverse((at, _, p))| (at, p))
    }
}

/// Fills `q` with `PENDING` timers armed one every `TIMEOUT / PENDING` ns
/// (so they fire at that spacing), plus `random` heap events; returns the
/// clock after the fill.
fn fill<Q: Fel>(q: &mut Q, random: u64, rng: &mut Pcg64Mcg) -> u64 {
    let step = TIMEOUT / PENDING;
    let mut now = 0;
    for i in 0..PENDING {
        q.push_timer(now, timer(i));
        now += step;
    }
    for i in 0..random {
        q.push_at(
            now + exp_ns(rng),
            Payload {
                kind: RANDOM,
                index: i as u32,
                generation: 0,
            },
        );
    }
    now
}

/// One hold step: pop the earliest, re-arm its kind. Timers come back
/// `TIMEOUT` later, so the timer population stays at `PENDING`.
#[inline]
fn hold<Q: Fel>(q: &mut Q, now: &mut u64, rng: &mut Pcg64Mcg) -> Payload {
    let (at, p) = q.pop().expect("never empty");
    *now = at;
    if p.kind == TIMER {
        q.push_timer(at, p);
    } else {
        q.push_at(at + exp_ns(rng), p);
    }
    p
}

fn bench_hold<Q: Fel>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut q: Q,
    random: u64,
) {
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    let mut now = fill(&mut q, random, &mut rng);
    c.bench_function(name, |b| {
        b.iter(|| black_box(hold(&mut q, &mut now, &mut rng)))
    });
}

fn hold_timers(c: &mut Criterion) {
    let mut g = c.benchmark_group("queue/hold_timers_1e6");
    g.throughput(Throughput::Elements(1));
    bench_hold(&mut g, "eventqueue_lanes", Lanes::new(), 0);
    bench_hold(
        &mut g,
        "eventqueue_heap_only",
        HeapOnly(EventQueue::new()),
        0,
    );
    bench_hold(&mut g, "std_binaryheap", StdHeap::default(), 0);
    g.finish();
}

fn hold_mixed(c: &mut Criterion) {
    let mut g = c.benchmark_group("queue/hold_mixed_1e6");
    g.throughput(Throughput::Elements(1));
    bench_hold(&mut g, "eventqueue_lanes", Lanes::new(), RANDOM_PENDING);
    bench_hold(
        &mut g,
        "eventqueue_heap_only",
        HeapOnly(EventQueue::new()),
        RANDOM_PENDING,
    );
    bench_hold(&mut g, "std_binaryheap", StdHeap::default(), RANDOM_PENDING);
    g.finish();
}

fn fill_drain<Q: Fel>(q: &mut Q) -> u64 {
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    fill(q, 0, &mut rng);
    let mut sum = 0u64;
    while let Some((at, _)) = q.pop() {
        sum = sum.wrapping_add(at);
    }
    sum
}

fn fill_drain_all(c: &mut Criterion) {
    let mut g = c.benchmark_group("queue/fill_drain_1e6");
    g.throughput(Throughput::Elements(PENDING));
    g.sample_size(10);
    g.bench_function("eventqueue_lanes", |b| {
        b.iter_batched_ref(Lanes::new, fill_drain, BatchSize::LargeInput)
    });
    g.bench_function("eventqueue_heap_only", |b| {
        b.iter_batched_ref(
            || HeapOnly(EventQueue::new()),
            fill_drain,
            BatchSize::LargeInput,
        )
    });
    g.bench_function("std_binaryheap", |b| {
        b.iter_batched_ref(StdHeap::default, fill_drain, BatchSize::LargeInput)
    });
    g.finish();
}

/// Holds with only random-delay events in the heap, at the sizes the
/// replay's heap reaches (about 3 000 pending at `--scale 0.1`, 30 000 at
/// `--scale 1`: service ends, arrivals, retry pauses).
fn hold_random(c: &mut Criterion) {
    for (name, pending) in [
        ("queue/hold_random_3e3", 3_000),
        ("queue/hold_random_3e4", 30_000),
    ] {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(1));
        bench_hold_random(
            &mut g,
            "eventqueue_heap",
            HeapOnly(EventQueue::new()),
            pending,
        );
        bench_hold_random(&mut g, "std_binaryheap", StdHeap::default(), pending);
        g.finish();
    }
}

fn bench_hold_random<Q: Fel>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mut q: Q,
    pending: u64,
) {
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    for i in 0..pending {
        let p = Payload {
            kind: RANDOM,
            index: i as u32,
            generation: 0,
        };
        q.push_at(exp_ns(&mut rng), p);
    }
    let mut now = 0;
    c.bench_function(name, |b| {
        b.iter(|| black_box(hold(&mut q, &mut now, &mut rng)))
    });
}

criterion_group!(
    benches,
    hold_timers,
    hold_mixed,
    fill_drain_all,
    hold_random
);
criterion_main!(benches);
