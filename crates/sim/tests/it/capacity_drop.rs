//! A capacity-decreasing trigger and where it turns metastable.
//!
//! Huang et al., "Metastable Failures in the Wild" (OSDI'22), §2 and their
//! MongoDB case: a replica's CPU cut by 80% for 10 s left the system stuck
//! after the cut ended, while 9 s, or a 78% cut, or 30% less load
//! recovered. The shape to show is theirs — the outcome flips within a
//! narrow band of drop magnitude and of drop duration, and less demand
//! moves the boundary outwards — not their numbers.
//!
//! The model is `scenarios/capacity-drop.toml`: 1 000 req/s on a service
//! of 1 600 req/s (ρ = 0.625), clients that time out after 4 s and retry
//! twice after a 10 ms pause with no budget, a server that serves what its callers
//! abandoned. A cut of depth d multiplies service times by 1/(1 − d).
//! Nothing sets the outcome: once the queue holds more than the timeout's
//! worth of work, every attempt times out, each request becomes three
//! attempts, and 3 000 attempts/s against 1 600 keeps the queue full after
//! the cut has ended.

use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};

const SCENARIO: &str = include_str!("../../../../scenarios/capacity-drop.toml");

/// Goodput share (successes / logical requests started) in the last 30 s
/// of a run with a cut of `depth` lasting `secs`, at `rate` req/s.
fn goodput_after(depth: f64, secs: f64, rate: f64, seed: u64) -> f64 {
    let factor = 1.0 / (1.0 - depth);
    let text = SCENARIO
        .replace("factor = 5.0", &format!("factor = {factor}"))
        .replace(
            "for = \"10s\"",
            &format!("for = \"{}ms\"", (secs * 1000.0).round()),
        )
        .replace("rate = \"1000/s\"", &format!("rate = \"{rate}/s\""));
    let sc = Scenario::parse("capacity-drop.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    let rec = Engine::new(
        &sc,
        RunOptions {
            seed: Some(seed),
            scale: 1.0,
        },
    )
    .run()
    .unwrap();
    let r = rec.route("query").unwrap();
    let n = r.successes.len();
    let ok: u64 = r.successes[n - 30..].iter().sum();
    let started: u64 = r.first_attempts[n - 30..].iter().sum();
    ok as f64 / started as f64
}

fn stuck(depth: f64, secs: f64, rate: f64, seed: u64) -> bool {
    let g = goodput_after(depth, secs, rate, seed);
    // The outcome is bimodal: every seed tried lands under 1% or over 99%.
    assert!(
        !(0.01..=0.99).contains(&g),
        "depth {depth} for {secs} s at {rate}/s, seed {seed}: goodput {g}"
    );
    g < 0.5
}

/// Bisects the smallest value in `[lo, hi]` (lo recovers, hi is stuck) at
/// which `f` is stuck, to within `tol`.
fn boundary(mut lo: f64, mut hi: f64, tol: f64, f: impl Fn(f64) -> bool) -> f64 {
    assert!(!f(lo) && f(hi), "no flip in [{lo}, {hi}]");
    while hi - lo > tol {
        let mid = (lo + hi) / 2.0;
        if f(mid) { hi = mid } else { lo = mid }
    }
    hi
}

const SEEDS: [u64; 3] = [1, 2, 3];

/// At full demand, an 80% cut is survived for 6.5 s and not for 8 s, and a
/// 10 s cut is survived at a 60% depth and not at 70%, on every seed; the
/// flip itself sits within a band a fraction of a second (of duration) or
/// a point or two (of depth) wide across seeds.
#[test]
fn a_capacity_drop_flips_within_a_narrow_band_of_depth_and_of_duration() {
    let mut by_secs = Vec::new();
    let mut by_depth = Vec::new();
    for seed in SEEDS {
        assert!(
            !stuck(0.8, 6.5, 1000.0, seed),
            "seed {seed}: 80% for 6.5 s stuck"
        );
        assert!(
            stuck(0.8, 8.0, 1000.0, seed),
            "seed {seed}: 80% for 8 s recovered"
        );
        assert!(
            !stuck(0.6, 10.0, 1000.0, seed),
            "seed {seed}: 60% for 10 s stuck"
        );
        assert!(
            stuck(0.7, 10.0, 1000.0, seed),
            "seed {seed}: 70% for 10 s recovered"
        );
        by_secs.push(boundary(6.5, 8.0, 0.05, |secs| {
            stuck(0.8, secs, 1000.0, seed)
        }));
        by_depth.push(boundary(0.6, 0.7, 0.002, |d| stuck(d, 10.0, 1000.0, seed)));
    }
    let spread = |v: &[f64]| {
        v.iter().cloned().fold(f64::MIN, f64::max) - v.iter().cloned().fold(f64::MAX, f64::min)
    };
    assert!(
        spread(&by_secs) <= 0.5,
        "duration boundary across seeds: {by_secs:?}"
    );
    assert!(
        spread(&by_depth) <= 0.02,
        "depth boundary across seeds: {by_depth:?}"
    );
}

/// 30% less demand survives the cut that sticks at full demand, and moves
/// the duration boundary of an 80% cut out by seconds.
#[test]
fn less_demand_moves_the_boundary_outwards() {
    for seed in SEEDS {
        assert!(stuck(0.8, 8.0, 1000.0, seed));
        assert!(
            !stuck(0.8, 8.0, 700.0, seed),
            "seed {seed}: 700/s stuck after 80% for 8 s"
        );
        assert!(
            !stuck(0.7, 10.0, 700.0, seed),
            "seed {seed}: 700/s stuck after 70% for 10 s"
        );
        let secs = boundary(8.0, 20.0, 0.1, |secs| stuck(0.8, secs, 700.0, seed));
        assert!(
            secs > 9.5,
            "seed {seed}: at 700/s an 80% cut sticks from {secs} s"
        );
    }
}

/// What keeps the stuck run stuck is the retries: every request makes its
/// three attempts, the service receives about 3 000 attempts/s against its
/// 1 600/s capacity, and the same cut with a 10% retry budget recovers.
#[test]
fn the_stuck_state_is_sustained_by_retries() {
    let run = |text: &str| {
        let sc = Scenario::parse("capacity-drop.toml", text).unwrap_or_else(|e| panic!("{e}"));
        let rec = Engine::new(&sc, RunOptions::default()).run().unwrap();
        let r = rec.route("query").unwrap();
        let n = r.attempts.len();
        let attempts: u64 = r.attempts[n - 30..].iter().sum();
        let first: u64 = r.first_attempts[n - 30..].iter().sum();
        let ok: u64 = r.successes[n - 30..].iter().sum();
        (attempts as f64 / first as f64, ok as f64 / first as f64)
    };
    let (amplification, goodput) = run(SCENARIO);
    assert!(goodput < 0.01, "the shipped scenario recovered: {goodput}");
    assert!(
        amplification > 2.9,
        "stuck with {amplification} attempts per request"
    );
    let budgeted = SCENARIO.replace(
        "retry = { max_attempts = 3,",
        "budget = { kind = \"ratio\", retry_ratio = 0.1, min_retries_per_sec = \"0/s\" }\nretry = { max_attempts = 3,",
    );
    assert_ne!(budgeted, SCENARIO);
    let (amplification, goodput) = run(&budgeted);
    assert!(goodput > 0.99, "a 10% budget did not recover: {goodput}");
    assert!(amplification < 1.1, "{amplification}");
}

/// Prints the boundaries `docs/scenarios.md` reports, on four seeds:
/// `cargo test --release -p stormbreak-sim --test capacity_drop -- --ignored --nocapture`.
/// (Ignored: it re-runs the bisections of the tests above at finer steps.)
#[test]
#[ignore = "prints the boundary map for the docs; slow in debug builds"]
fn print_the_boundary_map() {
    for seed in 1..=4 {
        let d = boundary(2.0, 20.0, 0.05, |secs| stuck(0.8, secs, 1000.0, seed));
        let m = boundary(0.4, 0.9, 0.002, |depth| stuck(depth, 10.0, 1000.0, seed));
        let d7 = boundary(2.0, 30.0, 0.05, |secs| stuck(0.8, secs, 700.0, seed));
        let m7 = boundary(0.4, 0.95, 0.002, |depth| stuck(depth, 10.0, 700.0, seed));
        println!(
            "seed {seed}: 80% cut stuck from {d:.2} s; 10 s cut stuck from depth {m:.3}; at 700/s: {d7:.2} s, depth {m7:.3}"
        );
    }
}
