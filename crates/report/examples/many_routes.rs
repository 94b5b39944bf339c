//! Times `render` on a synthetic recording with many routes, to show how
//! the report scales with the number of routes (docs/BENCHMARKS.md).
//!
//! ```sh
//! cargo run --release -p stormbreak-report --example many_routes -- 1000 2000 4000 8000
//! ```
//!
//! Each argument is a route count; each count is rendered three times and
//! the fastest wall time is printed (the machine is shared, so the minimum
//! is the least noisy figure).

use std::time::Instant;

use stormbreak_policy::Nanos;
use stormbreak_report::{ReportExtras, render};
use stormbreak_sim::Recording;
use stormbreak_sim::record::{Cause, ComponentSeries, RouteSeries};

/// Ten-second intervals over ten minutes.
const INTERVALS: usize = 60;
const S: Nanos = Nanos::SECOND;

fn recording(routes: usize) -> Recording {
    let route = |k: usize| {
        let mut r = RouteSeries {
            name: format!("route-{k:05}"),
            ..RouteSeries::default()
        };
        for i in 0..INTERVALS {
            let first = 100 + (k as u64 % 7) + i as u64;
            let failed = (k as u64 + i as u64) % 11;
            let mut errors = [0; Cause::ALL.len()];
            errors[Cause::Timeout as usize] = failed;
            r.first_attempts.push(first);
            r.attempts.push(first + failed);
            r.successes.push(first);
            r.errors.push(errors);
            r.latency_ms.push([10.0, 20.0, 40.0, 80.0]);
            r.latency_mean_ms.push(12.0);
        }
        r
    };
    let n = INTERVALS;
    Recording {
        scenario: "many-routes".into(),
        seed: 1,
        scale: 1.0,
        interval: 10 * S,
        duration: S * (n as u64 * 10),
        clock_origin_s: 13 * 3600,
        routes: (0..routes).map(route).collect(),
        components: vec![ComponentSeries {
            name: "svc".into(),
            kind: "service".into(),
            arrivals: vec![1000; n],
            rejected: vec![0; n],
            in_flight: vec![5.0; n],
            limit: vec![10.0; n],
            queue: vec![0.0; n],
            replicas: vec![2.0; n],
            app_utilisation: vec![0.5; n],
            connections: Vec::new(),
            little: Default::default(),
        }],
        actions: Vec::new(),
        events: 0,
        attempts: 0,
        peak_in_flight: 0,
        peak_events_per_s: 0.0,
        peak_job_backlog: 0,
        bounds_hit: Vec::new(),
    }
}

fn main() {
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse().unwrap_or_else(|_| {
                eprintln!("usage: many_routes ROUTES…   (got {a:?})");
                std::process::exit(2)
            })
        })
        .collect();
    let counts = if counts.is_empty() {
        vec![1000, 8000]
    } else {
        counts
    };
    println!("routes  intervals  best of 3 (s)  html (MB)");
    for n in counts {
        let rec = recording(n);
        let mut best = f64::INFINITY;
        let mut len = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let html = render(&[("run", &rec)], &ReportExtras::default());
            best = best.min(t.elapsed().as_secs_f64());
            len = html.len();
        }
        println!(
            "{n:>6}  {INTERVALS:>9}  {best:>13.3}  {:>9.1}",
            len as f64 / 1e6
        );
    }
}
