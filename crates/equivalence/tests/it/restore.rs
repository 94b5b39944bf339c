//! Staged-restore equivalence (issue 14, item 4: "admit … shed"): one
//! seeded trace of requests from three sites — arrival time, site,
//! latency, answer — through the guard's route restore
//! (`stormbreak_guard::trace::RestorePath`: the proxy's own `Restore`,
//! admitting by site and feeding each admitted answer to the site's error
//! guard, on tokio's paused clock) and through the simulator's LB ramp
//! glue (`stormbreak_sim::engine::ramp::RampGate`, driven as the engine's
//! `lb.rs` drives it, with the wake-ups it asks for) must admit and refuse
//! the same requests and end with the same fractions per site.
//!
//! The trace ramps the three sites up while healthy, breaks the first
//! site's backend while it ramps (its error guard holds it and steps it
//! back), heals, and breaks it again after the restore has finished.
//!
//! Two differences are by design and outside the trace: a site the
//! simulator's ramp does not list is not ramped (admits all), while a
//! guard listener outside `restore_sites` admits nothing while a restore
//! runs; and a refused request is answered with the scenario ramp's
//! `status` in the simulator, with the guard's `[saturation]` answer in the
//! guard.

use std::cmp::Reverse;
use std::time::Duration;
use stormbreak_equivalence::{arrivals, paused_runtime};

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use stormbreak_guard::trace::RestorePath;
use stormbreak_policy::Nanos;
use stormbreak_policy::ramp::{StagedRestore, StagedRestoreConfig};
use stormbreak_sim::engine::ramp::{RampGate, Wake};

const SITES: [&str; 3] = ["a", "b", "c"];
const SEED: u64 = 0x5_17e5;

#[derive(Clone, Copy, Debug)]
struct Request {
    at: Nanos,
    site: usize,
    latency: Nanos,
    status: u16,
}

fn config() -> StagedRestoreConfig {
    toml::from_str(
        r#"
next_site_at_fraction = 1.0
[ramp]
steps = [0.25, 0.5, 1.0]
hold = "2s"
step_back_after = "2s"
guard = { window = "1s", buckets = 10, error_rate_threshold = 0.2, min_requests = 5 }
"#,
    )
    .unwrap()
}

/// ~400 requests/s for 60 s spread over the three sites; site a's
/// backend answers 80 % 503 from 3 s to 8 s (while it ramps) and from 40 s
/// to 44 s (after the restore is done), and a few 403/429 arrive
/// throughout (not errors).
fn trace(seed: u64) -> Vec<Request> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut t = Nanos::ZERO;
    let mut out = Vec::new();
    while t < Nanos::from_secs(60) {
        t += Nanos::from_micros(rng.random_range(500..4_500));
        let site = rng.random_range(0..3);
        let secs = t.as_secs_f64();
        let broken = site == 0 && ((3.0..8.0).contains(&secs) || (40.0..44.0).contains(&secs));
        let status = if broken && rng.random_bool(0.8) {
            503
        } else if rng.random_bool(0.02) {
            [403, 429][rng.random_range(0..2)]
        } else {
            200
        };
        out.push(Request {
            at: t,
            site,
            latency: Nanos::from_micros(rng.random_range(2_000..30_000)),
            status,
        });
    }
    out
}

const COMPLETION: u8 = 0;
const ARRIVAL: u8 = 1;
const WAKE: u8 = 2;

struct Outcome {
    admitted: Vec<bool>,
    fractions: Vec<f64>,
}

fn sim_side(reqs: &[Request]) -> Outcome {
    let restore = StagedRestore::new(&config(), SITES.len()).unwrap();
    let site_map = (0..SITES.len()).map(Some).collect();
    let mut gate = RampGate::new(restore, site_map, 503, 1);
    let mut rng = Pcg64Mcg::seed_from_u64(SEED);
    let mut retired = false;
    let mut admitted = vec![false; reqs.len()];
    let mut q = arrivals(reqs.iter().map(|r| r.at), ARRIVAL);
    if let Some(at) = gate.start(Nanos::ZERO) {
        q.push(Reverse((at, WAKE, 0)));
    }
    while let Some(Reverse((now, kind, i))) = q.pop() {
        match kind {
            ARRIVAL if retired || gate.admit(now, reqs[i].site, &mut rng) => {
                admitted[i] = true;
                q.push(Reverse((now + reqs[i].latency, COMPLETION, i)));
            }
            COMPLETION if !retired => {
                // The engine's rule (`Res::is_server_error`).
                let ok = !(500..600).contains(&reqs[i].status);
                if let Some(at) = gate.observe(now, reqs[i].site, ok) {
                    q.push(Reverse((at, WAKE, 0)));
                }
            }
            WAKE if !retired => match gate.wake(now, gate.epoch()) {
                Wake::Again(at) => q.push(Reverse((at, WAKE, 0))),
                Wake::Complete => retired = true,
                Wake::Stale | Wake::Idle => {}
            },
            _ => {}
        }
    }
    let end = Nanos::from_secs(61);
    let fractions = if retired {
        vec![1.0; SITES.len()]
    } else {
        (0..SITES.len())
            .map(|s| {
                gate.restore()
                    .site(s)
                    .map_or(0.0, |r| r.clone().fraction(end))
            })
            .collect()
    };
    Outcome {
        admitted,
        fractions,
    }
}

fn guard_side(reqs: &[Request]) -> Outcome {
    let rt = paused_runtime();
    rt.block_on(async {
        let path = RestorePath::new(&config(), &SITES, SEED).unwrap();
        let mut admitted = vec![false; reqs.len()];
        let mut q = arrivals(reqs.iter().map(|r| r.at), ARRIVAL);
        while let Some(Reverse((at, kind, i))) = q.pop() {
            tokio::time::advance(Duration::from(at - path.now())).await;
            let site = SITES[reqs[i].site];
            if kind == ARRIVAL {
                if path.admit(site) {
                    admitted[i] = true;
                    q.push(Reverse((at + reqs[i].latency, COMPLETION, i)));
                }
            } else {
                path.finish(site, reqs[i].status);
            }
        }
        tokio::time::advance(Duration::from(Nanos::from_secs(61) - path.now())).await;
        Outcome {
            admitted,
            fractions: path.fractions(),
        }
    })
}

#[test]
fn the_guard_and_the_simulator_restore_the_same_requests_site_by_site() {
    let reqs = trace(1);
    let sim = sim_side(&reqs);
    let guard = guard_side(&reqs);
    // The trace exercises the ramp: requests are refused, then every site
    // is admitted in full.
    let refused = sim.admitted.iter().filter(|a| !**a).count();
    assert!(refused > 1000, "only {refused} refused");
    assert_eq!(sim.fractions, vec![1.0; 3], "the restore completes");
    if let Some(i) = (0..reqs.len()).find(|&i| sim.admitted[i] != guard.admitted[i]) {
        panic!(
            "request {i} ({:?}): simulator admitted {}, guard {}",
            reqs[i], sim.admitted[i], guard.admitted[i]
        );
    }
    assert_eq!(sim.fractions, guard.fractions);
}

#[test]
fn the_first_sites_breakage_holds_the_restore_back() {
    // Without the breakage, site a is full sooner and the restore ends
    // sooner: its error guard shapes the decisions compared above.
    let healthy: Vec<Request> = trace(1)
        .into_iter()
        .map(|r| Request { status: 200, ..r })
        .collect();
    let broken = sim_side(&trace(1));
    let clean = sim_side(&healthy);
    let count = |o: &Outcome| o.admitted.iter().filter(|a| **a).count();
    assert!(
        count(&clean) > count(&broken) + 500,
        "admitted healthy {} vs broken {}",
        count(&clean),
        count(&broken)
    );
}
