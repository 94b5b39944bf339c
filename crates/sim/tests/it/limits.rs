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
    let text = include_str!("../fixtures/spin.toml");
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
            limit,
            ..
        } => {
            assert_eq!(limit, "requests_in_flight");
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

/// A scenario's `[limits]` may lower a limit, never raise one: raising is
/// the command line's (`--limit`), and the error says so at the key.
#[test]
fn a_scenario_may_lower_a_limit_but_not_raise_it() {
    let lowered = slow_with("users", 100, "[limits]\nattempts_in_flight = 300\n");
    let err = engine(&lowered).run().map(|_| ()).unwrap_err();
    assert_eq!(err.limit(), "attempts_in_flight");
    // The command line may raise the default, not past the scenario's.
    let err = engine(&lowered)
        .with_limits(Limits {
            attempts_in_flight: 8_000_000,
            ..Limits::default()
        })
        .run()
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("more than 300 attempts"), "{err}");
    let raised = slow_with("users", 100, "[limits]\nattempts_in_flight = 5000000\n");
    let e = Scenario::parse("limits.toml", &raised)
        .unwrap_err()
        .to_string();
    let line = raised
        .lines()
        .position(|l| l.starts_with("attempts_in_flight"))
        .unwrap()
        + 1;
    assert!(e.starts_with(&format!("limits.toml:{line}:")), "{e}");
    assert!(
        e.contains("attempts_in_flight = 5000000 is above its default 4000000"),
        "{e}"
    );
    assert!(e.contains("--limit attempts_in_flight=5000000"), "{e}");
    let unknown = slow_with("users", 100, "[limits]\nattempts = 5\n");
    let e = Scenario::parse("limits.toml", &unknown)
        .unwrap_err()
        .to_string();
    assert!(e.contains("attempts"), "{e}");
    let zero = slow_with("users", 100, "[limits]\njob_backlog = 0\n");
    let e = Scenario::parse("limits.toml", &zero)
        .unwrap_err()
        .to_string();
    assert!(e.contains("job_backlog must be at least 1"), "{e}");
}

/// `--limit NAME=VALUE` as the command line reads it.
#[test]
fn limits_are_set_by_name() {
    let mut l = Limits::default();
    l.set_from("attempts_in_flight=8_000_000").unwrap();
    assert_eq!(l.attempts_in_flight, 8_000_000);
    l.set_from(" events_total = 5 ").unwrap();
    assert_eq!(l.get("events_total"), Some(5));
    let e = l.set_from("attempts=3").unwrap_err();
    assert!(
        e.contains("expected one of default_app_queue, requests_in_flight"),
        "{e}"
    );
    assert!(
        l.set_from("attempts_in_flight")
            .unwrap_err()
            .contains("NAME=VALUE")
    );
    assert!(
        l.set_from("attempts_in_flight=0")
            .unwrap_err()
            .contains("at least 1")
    );
    let e = l.set_from("requests_in_flight=5000000000").unwrap_err();
    assert!(e.contains("at most 4294967295"), "{e}");
    for name in Limits::NAMES {
        assert!(Limits::default().get(name).is_some(), "{name}");
    }
}

/// A run a limit stops keeps its whole intervals up to the stop; its
/// error names the limit and the flag, its summary says it stopped.
#[test]
fn a_stopped_run_keeps_its_recording_up_to_the_stop() {
    let text = slow_with("users", 100, "");
    let (rec, err) = engine(&text)
        .with_limits(Limits {
            attempts_in_flight: 300,
            ..Limits::default()
        })
        .run_to_stop();
    let err = err.expect("stopped");
    let msg = err.to_string();
    assert!(msg.contains("It is the limit attempts_in_flight"), "{msg}");
    assert!(msg.contains("--limit attempts_in_flight=N"), "{msg}");
    // 100/s against a service that holds one: 300 in flight after 3 s.
    assert!(err.at() < Nanos::from_secs(4), "{}", err.at());
    assert_eq!(rec.duration, rec.interval * rec.intervals() as u64);
    assert!(rec.duration <= err.at());
    let stop = stormbreak_sim::engine::Stopped::from(&err);
    let doc = stormbreak_sim::output::summary_json_of(&rec, None, Some(&stop));
    assert_eq!(doc["stopped"]["limit"], "attempts_in_flight");
    assert!(
        stormbreak_sim::output::summary_json(&rec, None)
            .get("stopped")
            .is_none()
    );
}
