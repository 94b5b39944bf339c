//! The sidecar's queue timeout: a waiter leaves at its deadline, not
//! before and not after, and waiters admitted in time cost no event (the
//! pod keeps one timer for its whole line, `engine/service.rs`).

use stormbreak_policy::Nanos;
use stormbreak_sim::record::{Cause, Recording};

/// Audited every simulated second: the pod's one queue timer keeps its
/// invariant throughout, not only at the end.
fn run(text: &str) -> Recording {
    crate::common::run_audited(text, Some(11), Nanos::from_secs(1))
}

fn scenario(sidecar: &str, service_time: &str, rate: &str, duration: &str) -> String {
    format!(
        r#"
[scenario]
name = "sidecar-queue"
duration = "{duration}"
interval = "10s"
[[service]]
name = "backend"
replicas = 1
sidecar = {sidecar}
app = {{ workers = 64, service_time = {service_time} }}
[[route]]
name = "r"
path = ["backend"]
[[client]]
name = "users"
route = "r"
rate = "{rate}"
timeout = "1h"
"#
    )
}

fn total(rec: &Recording, f: impl Fn(usize) -> u64) -> u64 {
    (0..rec.intervals()).map(f).sum()
}

#[test]
fn a_waiter_leaves_at_its_deadline() {
    // One slot, 10 ms of work each, five times the slot's rate: the line
    // is always long, so waiters reach their 50 ms deadline all the time.
    let rec = run(&scenario(
        r#"{ limit = 1, queue = 1000, queue_timeout = "50ms" }"#,
        r#"{ dist = "constant", value = "10ms" }"#,
        "500/s",
        "20s",
    ));
    let r = &rec.routes[0];
    let ok = total(&rec, |i| r.successes[i]);
    let qt = Cause::ALL
        .iter()
        .position(|&c| c == Cause::QueueTimeout)
        .unwrap();
    let timed_out = total(&rec, |i| r.errors[i][qt]);
    let attempts = total(&rec, |i| r.attempts[i]);
    // The slot never idles once the line forms: 100 answers a second.
    assert!((1990..=2000).contains(&ok), "{ok} answered");
    // Everything else timed out in the line, but those still in it at the
    // end: 50 ms of arrivals, about 25.
    assert!(
        attempts - ok - timed_out <= 45,
        "{attempts} attempts, {ok} answered, {timed_out} timed out"
    );
    // Admitted no later than its deadline: at most 50 ms waiting plus
    // 10 ms of work. A late timer would let a waiter through after 50 ms.
    // (The percentiles come from a histogram good to 3 significant
    // digits: 60 ms reads as up to 60.2.)
    let longest = (0..rec.intervals())
        .map(|i| r.latency_ms[i][3])
        .fold(0.0, f64::max);
    assert!(longest <= 60.0 * 1.005, "an answer took {longest} ms");
    // And timers are not early: with the line this long, some waiters get
    // the slot just before their deadline.
    assert!(longest > 58.0, "the longest answer took only {longest} ms");
}

#[test]
fn waiters_admitted_in_time_cost_no_event() {
    // Four slots at 90 % of their rate: most requests wait a little, none
    // for a second. Each request costs its arrival and its completion; the
    // pod's one queue timer wakes about once a timeout period.
    let rec = run(&scenario(
        r#"{ limit = 4, queue = 1000, queue_timeout = "1s" }"#,
        r#"{ dist = "exponential", mean = "1ms" }"#,
        "3600/s",
        "30s",
    ));
    let r = &rec.routes[0];
    let requests = total(&rec, |i| r.attempts[i]);
    let ok = total(&rec, |i| r.successes[i]);
    assert!(requests > 100_000, "{requests} requests");
    // Nothing timed out: all but the few in flight at the end answered.
    assert!(requests - ok <= 16, "{requests} requests, {ok} answered");
    // Erlang C with 4 slots at ρ = 0.9: about 74 % of requests wait.
    let extra = rec.events - 2 * requests;
    assert!(
        extra <= 2 * 30 + 10,
        "{} events for {requests} requests: {extra} beyond arrivals and completions",
        rec.events
    );
}
