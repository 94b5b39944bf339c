//! Short real runs (a few seconds, tiny rates) checking that each scenario
//! element maps to its real part as docs/lab.md says. The bounds asserted
//! are mechanisms (a semaphore of W workers that each sleep S cannot
//! finish more than W per S), never timings.

use stormbreak_lab::{LabOptions, LabPlan, Stop, run};
use stormbreak_sim::record::Cause;

use crate::common::{errors, plan, scenario, total};

const BACKEND: &str = r#"
[scenario]
name = "backend"
duration = "3s"
interval = "1s"
seed = 5

[[service]]
name = "api"
replicas = 1
# 2 workers × 1/50 ms = 40 req/s; no app queue: a busy app refuses.
app = { workers = 2, queue = 0, service_time = { dist = "constant", value = "50ms" } }

[[route]]
name = "r"
path = ["api"]

[[client]]
name = "users"
route = "r"
rate = "150/s"
timeout = "2s"
"#;

#[test]
fn a_backend_serves_at_most_workers_over_service_time_and_refuses_the_rest() {
    let p = plan(BACKEND);
    let lab = run(&p, &Stop::default()).unwrap();
    let rec = &lab.recording;
    let r = &rec.routes[0];
    let ok = total(&r.successes);
    // 2 workers sleeping 50 ms each finish at most 40 a second.
    assert!(ok <= 2 * 20 * 3, "{ok} successes");
    assert!(ok > 0);
    // No retries: one attempt per request sent; every attempt succeeded,
    // was refused, or was still in service at the end (≤ 2 workers).
    let attempts = total(&r.attempts);
    assert_eq!(attempts, total(&r.first_attempts));
    let refused = errors(rec, Cause::LimitRejected);
    assert!(
        ok + refused + 2 >= attempts && ok + refused <= attempts,
        "{ok} ok + {refused} refused vs {attempts} attempts"
    );
    // The intended count is the seeded schedule's, whatever the timing.
    let intended: u64 = lab.series[0].intended.iter().sum();
    assert_eq!(
        intended,
        attempts + lab.series[0].dropped.iter().sum::<u64>()
    );
    assert!(
        refused >= attempts - 2 * 20 * 3 - 2,
        "{refused} of {attempts}"
    );
    let c = &rec.components[0];
    assert_eq!(total(&c.rejected), refused);
    assert_eq!(total(&c.arrivals), attempts);
    assert!(c.limit.iter().all(|&l| l == 2.0), "{:?}", c.limit);
    assert!(c.app_utilisation.iter().all(|&u| (0.0..=1.0).contains(&u)));
    assert!(c.in_flight.iter().all(|&b| b <= 2.0));
}

#[test]
fn the_same_seed_intends_the_same_sends() {
    let a = run(&plan(BACKEND), &Stop::default()).unwrap();
    let b = run(&plan(BACKEND), &Stop::default()).unwrap();
    assert_eq!(a.series[0].intended, b.series[0].intended);
}

#[test]
fn a_daily_cycle_shapes_the_intended_sends_as_in_the_simulator() {
    // 40/s × (1 + 0.9 cos(2π (t − 1 s) / 4 s)): about 63 intended sends
    // in [0, 1 s) around the peak, about 17 in [2 s, 3 s) at the trough.
    let text = BACKEND
        .replace("duration = \"3s\"", "duration = \"4s\"")
        .replace(
            "rate = \"150/s\"",
            "rate = \"40/s\"\ndiurnal = { amplitude = 0.9, period = \"4s\", peak_at = \"1s\" }",
        );
    let rec = run(&plan(&text), &Stop::default()).unwrap();
    let intended = &rec.series[0].intended;
    assert!(
        intended[0] > 2 * intended[2],
        "peak interval {} vs trough {}: {intended:?}",
        intended[0],
        intended[2]
    );
}

const SIDECAR: &str = r#"
[scenario]
name = "sidecar"
duration = "2s"
interval = "500ms"

[[service]]
name = "api"
replicas = 1
# The sidecar lets 1 request through at a time to 4 workers: it, not
# the app, is the bound (1 / 100 ms = 10 req/s).
sidecar = { limit = 1 }
app = { workers = 4, queue = 10, service_time = { dist = "constant", value = "100ms" } }

[[route]]
name = "r"
path = ["api"]

[[client]]
name = "users"
route = "r"
rate = "60/s"
timeout = "2s"
"#;

#[test]
fn a_sidecar_queue_timeout_is_recorded_apart_from_a_full_limit() {
    // One slot held 200 ms, two queue places each waiting at most 50 ms:
    // a waiter times out unless the slot frees within 50 ms of its
    // arrival; an arrival that finds both places taken is refused at once.
    let text = SIDECAR
        .replace(
            "sidecar = { limit = 1 }",
            "sidecar = { limit = 1, queue = 2, queue_timeout = \"50ms\" }",
        )
        .replace("value = \"100ms\"", "value = \"200ms\"");
    let rec = run(&plan(&text), &Stop::default()).unwrap().recording;
    let all = &rec.routes[0].errors;
    assert!(errors(&rec, Cause::QueueTimeout) > 0, "{all:?}");
    assert!(errors(&rec, Cause::LimitRejected) > 0, "{all:?}");
}

#[test]
fn a_sidecar_guard_caps_what_reaches_the_app() {
    let lab = run(&plan(SIDECAR), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let ok = total(&rec.routes[0].successes);
    assert!(ok <= 10 * 2, "{ok} successes through a sidecar limit of 1");
    assert!(ok > 0);
    let refused = errors(rec, Cause::LimitRejected);
    assert!(refused > 0, "a full sidecar refuses");
    assert_eq!(lab.figures.sidecars, 1);
    let c = &rec.components[0];
    assert!(c.limit.iter().all(|&l| l == 1.0), "sidecar limit × pods");
    assert!(c.in_flight.iter().all(|&x| x <= 1.0), "{:?}", c.in_flight);
}

#[test]
fn retries_follow_the_scenario_and_are_recorded_as_attempts() {
    // Everything is refused at once (one worker busy 1 s, no queue), so
    // each request makes exactly max_attempts attempts: no budget.
    let text = BACKEND
        .replace("workers = 2, queue = 0", "workers = 1, queue = 0")
        .replace("value = \"50ms\"", "value = \"5s\"")
        .replace("rate = \"150/s\"", "rate = \"20/s\"")
        .replace(
            "timeout = \"2s\"",
            "timeout = \"10s\"\nretry = { max_attempts = 3, backoff = { kind = \"constant\", base = \"10ms\" } }",
        );
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let r = &lab.recording.routes[0];
    let (first, attempts) = (total(&r.first_attempts), total(&r.attempts));
    // The one request that got the worker made one attempt; the others
    // three, less those whose retries the run's end cut off.
    assert!(attempts <= 3 * first - 2, "{attempts} attempts for {first}");
    assert!(
        attempts >= 3 * (first - 1) - 4,
        "{attempts} attempts for {first}"
    );
    let budgeted = text.replace(
        "base = \"10ms\" } }",
        "base = \"10ms\" } }\nbudget = { kind = \"ratio\", retry_ratio = 0.1, min_retries_per_sec = 1 }",
    );
    let lab = run(&plan(&budgeted), &Stop::default()).unwrap();
    let r = &lab.recording.routes[0];
    let (first, attempts) = (total(&r.first_attempts), total(&r.attempts));
    // Finagle's ratio budget: retries ≤ 10% of requests + 1/s × ttl (10 s) … here ≤ 0.1 × first + 10.
    assert!(
        attempts - first <= first / 10 + 10,
        "{attempts} attempts for {first} under a 10% budget"
    );
}

#[test]
fn the_recording_has_the_simulators_shape_and_reloads() {
    let p = plan(SIDECAR);
    let lab = run(&p, &Stop::default()).unwrap();
    let rec = &lab.recording;
    assert_eq!(rec.intervals(), 4);
    for r in &rec.routes {
        for len in [
            r.first_attempts.len(),
            r.attempts.len(),
            r.successes.len(),
            r.errors.len(),
            r.latency_ms.len(),
            r.latency_mean_ms.len(),
        ] {
            assert_eq!(len, 4);
        }
    }
    let c = &rec.components[0];
    assert_eq!(c.kind, "service");
    assert_eq!(c.replicas, vec![1.0; 4]);
    for s in &lab.series {
        assert_eq!(s.corrected_ms.len(), 4);
        assert_eq!(s.raw_ms.len(), 4);
    }
    // Saved and read back as `stormbreak report` reads it.
    let dir = std::env::temp_dir().join(format!("stormbreak-lab-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("recording.json");
    std::fs::write(&path, serde_json::to_vec(rec).unwrap()).unwrap();
    let back = stormbreak_report::load_recording(&path);
    std::fs::remove_dir_all(&dir).unwrap();
    let back = back.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.routes[0].attempts, rec.routes[0].attempts);
}

#[test]
fn sends_over_the_in_flight_cap_are_dropped_and_invalidate_the_run() {
    let text = BACKEND.replace("value = \"50ms\"", "value = \"1s\"");
    let opts = LabOptions {
        max_in_flight: 1,
        ..Default::default()
    };
    let p = LabPlan::new(&scenario(&text), &opts).unwrap();
    let lab = run(&p, &Stop::default()).unwrap();
    let v = &lab.figures.validity;
    // One request at a time, each held 1 s: at most 4 sends in 3 s.
    assert!(v.intended - v.dropped <= 4, "{v:?}");
    assert_eq!(v.intended, lab.series[0].intended.iter().sum::<u64>());
    assert_eq!(v.dropped, lab.series[0].dropped.iter().sum::<u64>());
    assert!(!v.valid);
    assert!(
        v.reasons
            .iter()
            .any(|r| r.contains("dropped at the in-flight cap")),
        "{:?}",
        v.reasons
    );
}
