//! The engine's bounds: a run that cannot advance virtual time, or that
//! holds ever more work, stops with an error naming what; a default queue
//! bound that refuses work is reported. Honest runs never meet a bound
//! (every other test runs with the defaults).

use stormbreak_policy::Nanos;
use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, Limits, RunError, RunOptions};
use stormbreak_sim::record::Cause;

fn engine(text: &str) -> Engine {
    let sc = Scenario::parse("limits.toml", text).unwrap_or_else(|e| panic!("{e}"));
    Engine::new(&sc, RunOptions::default())
}

const SLOW: &str = r#"
[scenario]
name = "slow"
duration = "1h"
[[service]]
name = "slow"
replicas = 1
app = { workers = 1, service_time = { dist = "constant", value = "1h" } }
[[route]]
name = "r"
path = ["slow"]
"#;

/// The slow service with one client population: `name`, `rate` per second,
/// a 2 h timeout, and `extra` lines.
fn slow_with(name: &str, rate: u32, extra: &str) -> String {
    format!(
        "{SLOW}[[client]]\nname = \"{name}\"\nroute = \"r\"\nrate = \"{rate}/s\"\ntimeout = \"2h\"\n{extra}"
    )
}

/// Runs `text` under `limits` to the error it must stop with.
fn stopped(text: &str, limits: Limits) -> RunError {
    engine(text)
        .with_limits(limits)
        .run()
        .map(|_| ())
        .unwrap_err()
}

/// The fan-out bug with a 1 µs delay against a service that refuses at
/// once: attempts a nanosecond apart, virtual time all but frozen.
#[test]
fn a_loop_that_cannot_advance_time_hits_the_work_budget() {
    let text = include_str!("fixtures/spin.toml");
    let err = engine(text).run().map(|_| ()).unwrap_err();
    match &err {
        RunError::WorkBudget { at, component, .. } => {
            assert!(*at < Nanos::from_secs(10), "stopped only at {at}");
            assert!(component.contains("client retries"), "{component}");
            assert!(component.contains("\"bug\""), "{component}");
        }
        other => panic!("expected the work budget, got {other:?}"),
    }
    assert!(
        err.to_string().contains("events per simulated second"),
        "{err}"
    );
}

#[test]
fn requests_piling_up_stop_the_run_naming_the_population() {
    let text = slow_with("users", 100, "");
    let limits = Limits {
        requests_in_flight: 500,
        ..Limits::default()
    };
    let err = stopped(&text, limits);
    match err {
        RunError::InFlight {
            at,
            component,
            what,
        } => {
            assert_eq!(component, "client \"users\"");
            assert!(what.contains("500 requests in flight"), "{what}");
            // 500 requests at 100/s: about 5 s in.
            assert!(
                (Nanos::from_secs(4)..Nanos::from_secs(7)).contains(&at),
                "at {at}"
            );
        }
        other => panic!("expected InFlight, got {other:?}"),
    }
}

#[test]
fn a_job_backlog_over_its_bound_stops_the_run() {
    let text = slow_with("jobs", 100, "workers = 1\n");
    let limits = Limits {
        job_backlog: 1_000,
        ..Limits::default()
    };
    let err = stopped(&text, limits);
    assert!(
        matches!(&err, RunError::InFlight { component, what, .. }
            if component == "client \"jobs\"" && what.contains("1000 jobs")),
        "{err:?}"
    );
}

#[test]
fn attempts_in_flight_are_bounded_for_the_whole_run() {
    let text = slow_with("users", 100, "");
    let limits = Limits {
        attempts_in_flight: 300,
        ..Limits::default()
    };
    let err = stopped(&text, limits);
    assert!(
        matches!(&err, RunError::InFlight { what, .. } if what.contains("300 attempts")),
        "{err:?}"
    );
}

/// An app queue the scenario leaves unset is bounded by default; what the
/// bound refuses is counted as `limit_rejected` and reported.
#[test]
fn the_default_app_queue_bound_refuses_and_is_reported() {
    let text = slow_with("users", 10, "");
    let limits = Limits {
        default_app_queue: 20,
        ..Limits::default()
    };
    let mut e = engine(&text).with_limits(limits);
    while e.run_until(e.end()).unwrap() {}
    let hits = e.bounds_hit().to_vec();
    let rec = e.finish();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].bound, "default_app_queue");
    assert_eq!(hits[0].component, "slow");
    let refused: u64 = rec
        .route("r")
        .unwrap()
        .errors
        .iter()
        .map(|e| e[Cause::LimitRejected as usize])
        .sum();
    assert_eq!(refused, hits[0].count);
    assert!(
        refused > 30_000,
        "10/s for an hour, 21 held: {refused} refused"
    );
    assert_eq!(rec.bounds_hit, hits);
    // 21 s in: 1 in service + 20 queued, the next one refused.
    assert!(
        (Nanos::from_secs(2)..Nanos::from_millis(2300)).contains(&hits[0].first_at),
        "{}",
        hits[0].first_at
    );
}

/// With the defaults, the same overload never meets a bound within the
/// run's horizon of a slow service (sanity: the defaults are not tiny).
#[test]
fn defaults_leave_an_ordinary_overload_alone() {
    let text = slow_with("users", 10, "");
    let mut e = engine(&text);
    while e.run_until(e.end()).unwrap() {}
    assert!(e.bounds_hit().is_empty());
}
