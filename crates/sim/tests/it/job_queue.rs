//! A client population with `workers` is a job queue: at most that many
//! logical requests in flight, the rest waiting in FIFO order, none
//! dropped. A worker is held for the whole request, pauses included, so its
//! throughput is workers / time per job (Little's law) — the mechanism that
//! leaves Actions with a backlog to drain after the 2026-08-17 storm.

use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::record::Recording;

/// Jobs arrive at 20/s; each takes exactly 100 ms at the service, which
/// itself has room for 100 at once. `tail` ends the client's table and
/// must set its `timeout`.
fn run(workers: u32, tail: &str) -> Recording {
    let text = format!(
        r#"
[scenario]
name = "job-queue"
duration = "60s"
interval = "1s"

[[service]]
name = "svc"
replicas = 1
app = {{ workers = 100, service_time = {{ dist = "constant", value = "100ms" }} }}

[[route]]
name = "r"
path = ["svc"]

[[client]]
name = "jobs"
route = "r"
rate = "20/s"
workers = {workers}
{tail}
"#
    );
    let sc = Scenario::parse("jobs.toml", &text).expect("valid");
    Engine::new(&sc, RunOptions::default())
        .run()
        .expect("the run stays within its bounds")
}

#[test]
fn one_worker_dispatches_one_job_per_service_time_and_the_rest_wait() {
    let rec = run(1, r#"timeout = "10s""#);
    let r = rec.route("r").unwrap();
    let done: u64 = r.successes.iter().sum();
    // 1 worker / 100 ms = 10 jobs/s over 60 s, whatever arrives.
    assert!((595..=600).contains(&done), "{done} jobs done");
    assert_eq!(r.errors.iter().flatten().sum::<u64>(), 0);
    // Never more than one job at the service.
    let svc = rec.components.iter().find(|c| c.name == "svc").unwrap();
    assert!(svc.in_flight.iter().all(|&n| n <= 1.0));
    // Arrivals at 20/s, dispatch at 10/s: the job dispatched at T arrived
    // at about T/2, so the oldest waiting job is about T/2 old.
    let wait = *r.job_wait_s.last().unwrap();
    assert!((25.0..=35.0).contains(&wait), "oldest job waited {wait} s");
}

#[test]
fn enough_workers_means_no_wait() {
    let rec = run(10, r#"timeout = "10s""#);
    let r = rec.route("r").unwrap();
    assert!(r.job_wait_s.iter().all(|&w| w < 1.0), "{:?}", r.job_wait_s);
    let done: u64 = r.successes.iter().sum();
    let arrived: u64 = r.first_attempts.iter().sum();
    assert!(arrived - done <= 5, "{arrived} arrived, {done} done");
}

#[test]
fn pauses_between_retries_hold_the_worker() {
    // Every attempt times out (10 ms, against a 100 ms job) and is retried
    // after a fixed 400 ms: each job holds its worker for 3 × 10 ms
    // timeouts + 2 × 400 ms pauses = 0.83 s.
    let rec = run(
        2,
        r#"timeout = "10ms"
retry = { max_attempts = 3, backoff = { kind = "constant", base = "400ms", jitter = "none" } }"#,
    );
    let r = rec.route("r").unwrap();
    let first: u64 = r.first_attempts.iter().sum();
    // 2 workers / 0.83 s ≈ 2.4 jobs/s over 60 s ≈ 144, not the 1 200 arriving.
    assert!((135..=150).contains(&first), "{first} jobs started");
}

#[test]
fn a_backlog_of_jobs_that_fail_on_the_spot_drains_without_recursion() {
    // One worker; its first job holds the LB's only flow for 120 s (the
    // service takes an hour) while 6 000 jobs queue. Then every queued job
    // is refused at once by the LB, which still holds the abandoned flow:
    // the backlog drains in one instant, one event per job (dispatching a
    // job from inside the previous one's failure overflowed the stack).
    let text = r#"
[scenario]
name = "deep"
duration = "200s"
interval = "1s"

[[lb]]
name = "lb"
nodes = 1
flows_per_node = 1

[[service]]
name = "svc"
replicas = 1
app = { workers = 10, service_time = { dist = "constant", value = "1h" } }

[[route]]
name = "r"
path = ["lb", "svc"]

[[client]]
name = "jobs"
route = "r"
rate = "50/s"
workers = 1
timeout = "120s"
"#;
    let sc = Scenario::parse("deep.toml", text).expect("valid");
    let rec = Engine::new(&sc, RunOptions::default())
        .run()
        .expect("the run stays within its bounds");
    let r = rec.route("r").unwrap();
    let started: u64 = r.first_attempts.iter().sum();
    let refused: u64 = r.errors.iter().flatten().sum();
    // Every arrival is eventually dispatched (none dropped), and all but
    // the first fail at the LB.
    assert!(started > 9_000, "{started} jobs started");
    assert!(refused >= started - 2, "{refused} failed of {started}");
    // Before the flow is released the oldest job is ~120 s old; after the
    // instant drain nothing waits.
    assert!(r.job_wait_s[115] > 100.0, "{}", r.job_wait_s[115]);
    assert!(r.job_wait_s[130] < 1.0, "{}", r.job_wait_s[130]);
}
