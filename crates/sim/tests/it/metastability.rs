//! A known storm: the metastable failure of a retrying client population
//! against a 10-worker service (Bronson et al., "Metastable Failures in
//! Distributed Systems", HotOS '21, reproduced with the parameters of the
//! simulator issue).
//!
//! 10 workers × 1 ms exponential service = 10 k/s capacity; demand 9 k/s
//! (load 0.9); a 10 s spike to 1.3× (11.7 k/s); client timeout 200 ms. The
//! app accepts up to 3 000 waiting requests (a listen backlog: 300 ms of work,
//! longer than the timeout, so a full queue serves only requests whose
//! clients have left).
//!
//! * 3 naive retries: after the spike every answer comes too late, every
//!   attempt is retried, offered attempts lock near 4× demand and goodput
//!   stays near zero long after the trigger has passed.
//! * no retries, or a 10 % retry budget: offered load falls back under
//!   capacity, the backlog drains and goodput returns within a minute.

use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::record::Recording;

use crate::common::{NAIVE, SPIKE_END_S, SPIKE_START_S};

fn scenario(retry: &str) -> String {
    crate::common::metastable("300s", "10s", retry)
}

const BUDGETED: &str = r#"retry = { max_attempts = 4, backoff = { kind = "constant", base = "0" } }
budget = { kind = "ratio", retry_ratio = 0.1 }"#;

fn run(text: &str) -> Recording {
    let sc = Scenario::parse("metastable.toml", text).expect("valid scenario");
    Engine::new(&sc, RunOptions::default())
        .run()
        .expect("the run stays within its bounds")
}

/// (attempts / demand, successes / demand) over intervals ending in (from_s, to_s].
fn window(rec: &Recording, from_s: usize, to_s: usize) -> (f64, f64) {
    let r = rec.route("r").unwrap();
    let (a, b) = (from_s / 10, to_s / 10);
    let sum = |v: &[u64]| v[a..b].iter().sum::<u64>() as f64;
    let demand = sum(&r.first_attempts);
    (sum(&r.attempts) / demand, sum(&r.successes) / demand)
}

#[test]
fn healthy_before_the_spike_in_every_variant() {
    for retry in ["", NAIVE, BUDGETED] {
        let rec = run(&scenario(retry));
        let (ampl, goodput) = window(&rec, 10, SPIKE_START_S);
        assert!(
            ampl < 1.05,
            "{retry}: amplification {ampl} before the spike"
        );
        assert!(
            goodput > 0.98,
            "{retry}: goodput {goodput} before the spike"
        );
    }
}

#[test]
fn naive_retries_lock_in_the_overload_long_after_the_spike() {
    let rec = run(&scenario(NAIVE));
    let (ampl, goodput) = window(&rec, 200, 300);
    assert!(
        (3.5..=4.05).contains(&ampl),
        "offered attempts should lock near 4× demand, got {ampl:.2}×"
    );
    assert!(
        goodput < 0.05,
        "goodput should stay near zero, got {goodput:.3}"
    );
}

#[test]
fn without_retries_goodput_returns_within_a_minute() {
    let rec = run(&scenario(""));
    let (ampl, goodput) = window(&rec, SPIKE_END_S + 60, 300);
    assert!(ampl < 1.01, "{ampl}");
    assert!(
        goodput > 0.98,
        "goodput {goodput:.3} a minute after the spike"
    );
}

#[test]
fn a_ten_percent_budget_returns_within_a_minute() {
    let rec = run(&scenario(BUDGETED));
    let (ampl, goodput) = window(&rec, SPIKE_END_S + 60, 300);
    assert!(ampl < 1.05, "{ampl}");
    assert!(
        goodput > 0.98,
        "goodput {goodput:.3} a minute after the spike"
    );
    // And the budget really did cap retries during the storm.
    let (storm_ampl, _) = window(&rec, SPIKE_START_S, SPIKE_END_S + 20);
    assert!(
        storm_ampl <= 1.1 + 0.01 + 10.0 / 9000.0 * 2.0,
        "{storm_ampl}"
    );
}

/// Brooker's token bucket in a scenario: the same storm that naive retries
/// lock in ends, and during it retries stay within the bucket's closed
/// form — at most `reward` per success plus the starting capacity.
#[test]
fn a_token_bucket_returns_within_a_minute_and_meets_its_closed_form() {
    const BUCKET: &str = r#"retry = { max_attempts = 4, backoff = { kind = "constant", base = "0" } }
budget = { kind = "bucket", capacity = 10, cost = 1, reward = 0.1 }"#;
    let rec = run(&scenario(BUCKET));
    let (ampl, goodput) = window(&rec, SPIKE_END_S + 60, 300);
    assert!(ampl < 1.12, "{ampl}");
    assert!(
        goodput > 0.98,
        "goodput {goodput:.3} a minute after the spike"
    );
    let r = rec.route("r").unwrap();
    let total = |v: &[u64]| v.iter().sum::<u64>() as f64;
    let retries = total(&r.attempts) - total(&r.first_attempts);
    let bound = 0.1 * total(&r.successes) + 10.0;
    assert!(retries <= bound, "{retries} retries over the bound {bound}");
    assert!(retries > 0.0, "the bucket never let a retry through");
}
