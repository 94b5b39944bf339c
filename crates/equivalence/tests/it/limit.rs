//! Limit and shed equivalence (issue 14, item 4: "admit … shed, limit"):
//! one seeded synthetic trace of requests — arrival time, criticality
//! class, latency, the answer's status — through the guard's route
//! admission (`stormbreak_guard::trace::LimitPath`: the proxy's shed step
//! and `ConcurrencyLimit` with its status → sample rule, on tokio's paused
//! clock) and through the simulator's gateway admission
//! (`stormbreak_sim::engine::admission`, the engine's own glue) must admit
//! and refuse the same requests, give each refusal the same answer
//! (status and `Retry-After`), and hold the same limit after every event,
//! for every algorithm and for the default and a configured saturation
//! table.
//!
//! Both sides build their limiter from the same `limit` table and draw the
//! algorithm's randomness (Vegas' and Envoy's jitter) from the same seed.
//! Events meet in (time, kind, request) order on both sides: completions
//! before arrivals at one instant, as the simulator's event order has it
//! for this trace (a completion was scheduled first).

use std::cmp::Reverse;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use stormbreak_equivalence::{Answer, Events, Request, arrivals, draw_class, paused_runtime};
use stormbreak_guard::trace::{self, LimitPath};
use stormbreak_policy::Nanos;
use stormbreak_policy::limit::LimitConfig;
use stormbreak_policy::shed::{Criticality, SaturationConfig};
use stormbreak_sim::engine::Res;
use stormbreak_sim::engine::admission::{Admission, Admitted, Slot};
use stormbreak_sim::record::Cause;

const REQUESTS: usize = 4000;
const LIMITER_SEED: u64 = 0x11_517;

/// Arrivals at ~1 per ms; latency grows with the load a healthy backend
/// of 40 workers would see, then a phase where the backend answers 503 to
/// most requests, then healthy again, so loss-based and latency-based
/// algorithms both move.
fn trace(seed: u64) -> Vec<Request> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut t = Nanos::ZERO;
    (0..REQUESTS)
        .map(|i| {
            t += Nanos::from_micros(rng.random_range(200..1_800));
            let failing = (1_500..2_500).contains(&i);
            let status = if failing && rng.random_bool(0.8) {
                503
            } else if rng.random_bool(0.02) {
                403
            } else {
                200
            };
            let base = rng.random_range(5_000..15_000);
            let slow = if (500..1_500).contains(&i) { 4 } else { 1 };
            let class = draw_class(&mut rng);
            Request {
                at: t,
                class,
                latency: Nanos::from_micros(base * slow),
                status,
            }
        })
        .collect()
}

/// What each side did: per request admitted (`None`) or the refusal's
/// answer, and the (in flight, limit) after every event.
#[derive(Debug)]
struct Decisions {
    refused: Vec<Option<Answer>>,
    states: Vec<(Nanos, u64, u64)>,
}

impl Decisions {
    fn new(n: usize) -> Self {
        Decisions {
            refused: vec![None; n],
            states: Vec::new(),
        }
    }
}

/// Events in (time, kind, request) order; kind 0 = completion, 1 = arrival.
fn events(reqs: &[Request]) -> Events {
    arrivals(reqs.iter().map(|r| r.at), 1)
}

fn sim_side(
    config: &LimitConfig,
    saturation: Option<&SaturationConfig>,
    reqs: &[Request],
    seed: u64,
) -> Decisions {
    let mut adm =
        Admission::new(config, saturation, None, 1, Pcg64Mcg::seed_from_u64(seed)).unwrap();
    let mut slots: Vec<Option<Slot>> = vec![None; reqs.len()];
    let mut out = Decisions::new(reqs.len());
    let mut q = events(reqs);
    while let Some(Reverse((now, kind, i))) = q.pop() {
        if kind == 1 {
            match adm.admit(now, reqs[i].class) {
                Ok(Admitted::Queued { .. }) => unreachable!("no queue"),
                Ok(Admitted::Now(slot)) => {
                    slots[i] = Some(slot);
                    q.push(Reverse((now + reqs[i].latency, 0, i)));
                }
                Err(refusal) => out.refused[i] = Some(refusal.answer()),
            }
        } else {
            let res = match reqs[i].status {
                200 => Res::Ok,
                403 => Res::Err(Cause::Shed403, None),
                _ => Res::Err(Cause::Shed503, None),
            };
            let slot = slots[i].take().expect("admitted");
            adm.finish(now, slot, Admission::outcome(res, false));
        }
        out.states
            .push((now, u64::from(adm.inflight()), adm.limit()));
    }
    out
}

fn guard_side(
    config: &LimitConfig,
    saturation: Option<&SaturationConfig>,
    reqs: &[Request],
    seed: u64,
) -> Decisions {
    let rt = paused_runtime();
    rt.block_on(async {
        let path = LimitPath::new(config, saturation, None, seed).unwrap();
        let origin = tokio::time::Instant::now();
        let mut held: Vec<Option<trace::Admitted>> = (0..reqs.len()).map(|_| None).collect();
        let mut out = Decisions::new(reqs.len());
        let mut q = events(reqs);
        while let Some(Reverse((at, kind, i))) = q.pop() {
            let now = Nanos::from(tokio::time::Instant::now() - origin);
            tokio::time::advance(Duration::from(at - now)).await;
            if kind == 1 {
                match path.admit(reqs[i].class).await {
                    Ok(a) => {
                        held[i] = Some(a);
                        q.push(Reverse((at + reqs[i].latency, 0, i)));
                    }
                    Err(r) => out.refused[i] = Some((r.status, r.retry_after)),
                }
            } else {
                held[i].take().expect("admitted").finish(reqs[i].status);
            }
            out.states
                .push((at, path.inflight(), u64::from(path.limit())));
        }
        out
    })
}

fn config(text: &str) -> LimitConfig {
    toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

const CONFIGS: [&str; 7] = [
    "kind = \"fixed\"\nlimit = 12",
    "kind = \"aimd\"\ninitial_limit = 10\nmin_limit = 1\ntimeout = \"30ms\"",
    "kind = \"vegas\"\ninitial_limit = 10",
    "kind = \"gradient2\"\ninitial_limit = 10\nmin_limit = 1",
    "kind = \"envoy_gradient\"",
    "kind = \"windowed\"\ninner = { kind = \"gradient2\", initial_limit = 10, min_limit = 1 }",
    "kind = \"windowed\"\ninner = { kind = \"vegas\", initial_limit = 10 }",
];

/// A saturation table unlike the defaults: other thresholds, 429 with a
/// longer `Retry-After`.
fn custom_saturation() -> SaturationConfig {
    toml::from_str(
        "status = 429\nretry_after = \"3s\"\nthresholds = { sheddable = 0.5, sheddable_plus = 0.7, critical = 0.95, critical_plus = \"never\" }",
    )
    .unwrap()
}

#[test]
fn the_guard_and_the_simulator_admit_and_shed_the_same_requests_under_every_algorithm() {
    let reqs = trace(1);
    let custom = custom_saturation();
    for saturation in [None, Some(&custom)] {
        for text in CONFIGS {
            let c = config(text);
            let sim = sim_side(&c, saturation, &reqs, LIMITER_SEED);
            let guard = guard_side(&c, saturation, &reqs, LIMITER_SEED);
            // Every class is shed below the limit somewhere, and critical
            // requests are refused too, so both steps are compared.
            for class in [Criticality::Sheddable, Criticality::Critical] {
                let refused = (0..reqs.len())
                    .filter(|&i| reqs[i].class == class && sim.refused[i].is_some())
                    .count();
                assert!(refused > 0, "{text}: no {class:?} request was refused");
            }
            if let Some(d) = first_difference(&reqs, &sim, &guard) {
                panic!("{text}, saturation {saturation:?}: {d}");
            }
        }
    }
}

#[test]
fn classes_are_refused_in_order_and_the_answer_follows_the_table() {
    // On the fixed limit, sheddable requests lose most and critical_plus
    // least; the configured table answers 429 after 3 s.
    let reqs = trace(1);
    let share = |d: &Decisions, class| {
        let of: Vec<_> = (0..reqs.len())
            .filter(|&i| reqs[i].class == class)
            .collect();
        of.iter().filter(|&&i| d.refused[i].is_some()).count() as f64 / of.len() as f64
    };
    let fixed = config(CONFIGS[0]);
    let d = sim_side(&fixed, None, &reqs, LIMITER_SEED);
    let shares: Vec<f64> = Criticality::ALL.iter().map(|&c| share(&d, c)).collect();
    assert!(
        shares.windows(2).all(|w| w[0] > w[1]),
        "refused share by class, least important first: {shares:?}"
    );
    assert!(
        d.refused
            .iter()
            .flatten()
            .all(|&a| a == (503, Some(Nanos::SECOND)))
    );
    let d = sim_side(&fixed, Some(&custom_saturation()), &reqs, LIMITER_SEED);
    assert!(
        d.refused
            .iter()
            .flatten()
            .all(|&a| a == (429, Some(Nanos::from_secs(3))))
    );
}

/// Where the two sides first part, in words (a whole `Decisions` is too
/// long to print).
fn first_difference(reqs: &[Request], sim: &Decisions, guard: &Decisions) -> Option<String> {
    if let Some(i) = (0..reqs.len()).find(|&i| sim.refused[i] != guard.refused[i]) {
        return Some(format!(
            "request {i} ({:?}) at {}: simulator refused with {:?}, guard {:?} (None: admitted)",
            reqs[i].class, reqs[i].at, sim.refused[i], guard.refused[i]
        ));
    }
    let k = (0..sim.states.len().max(guard.states.len()))
        .find(|&k| sim.states.get(k) != guard.states.get(k))?;
    Some(format!(
        "event {k}: simulator (t, in flight, limit) {:?}, guard {:?}",
        sim.states.get(k),
        guard.states.get(k)
    ))
}

#[test]
fn the_limits_move_so_the_comparison_could_fail() {
    // Each adaptive algorithm leaves its starting limit on this trace, so
    // equal limits are a real agreement.
    let reqs = trace(1);
    for text in &CONFIGS[1..] {
        let sim = sim_side(&config(text), None, &reqs, LIMITER_SEED);
        let first = sim.states[0].2;
        assert!(
            sim.states.iter().any(|s| s.2 != first),
            "{text}: the limit never moved from {first}"
        );
    }
    // And a different jitter seed on one side changes Vegas' limits.
    let vegas = config(CONFIGS[2]);
    let a = sim_side(&vegas, None, &reqs, LIMITER_SEED);
    let b = guard_side(&vegas, None, &reqs, LIMITER_SEED + 1);
    assert!(
        first_difference(&reqs, &a, &b).is_some(),
        "vegas' probe jitter should depend on the seed"
    );
}

#[test]
fn both_count_a_server_error_as_a_drop_and_a_403_as_a_sample() {
    // AIMD backs off on drops only: a trace of 503s pulls both limits down
    // alike; the same trace answered 403 leaves them at their maximum.
    let c = config(
        "kind = \"aimd\"\ninitial_limit = 10\nmin_limit = 1\nmax_limit = 10\ntimeout = \"1s\"",
    );
    let answered = |status| -> Vec<Request> {
        trace(2)
            .into_iter()
            .map(|r| Request { status, ..r })
            .collect()
    };
    for (status, shrinks) in [(503, true), (403, false)] {
        let reqs = answered(status);
        let sim = sim_side(&c, None, &reqs, LIMITER_SEED);
        let guard = guard_side(&c, None, &reqs, LIMITER_SEED);
        if let Some(d) = first_difference(&reqs, &sim, &guard) {
            panic!("status {status}: {d}");
        }
        let lowest = sim.states.iter().map(|s| s.2).min().unwrap();
        assert_eq!(
            lowest < 10,
            shrinks,
            "status {status}: lowest limit {lowest}"
        );
    }
}
