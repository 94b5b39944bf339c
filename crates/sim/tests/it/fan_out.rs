//! The fan-out bug's arithmetic: each failed attempt of an operation spawns
//! `fanout` new ones after `fanout_delay`, at most `fanout_max_in_flight`
//! at once, until `give_up_after`. One event sends a whole burst
//! (`Ev::ClientRetry { sends }`); this checks that every send of it counts.

use stormbreak_policy::Nanos;

#[test]
fn a_failing_operation_makes_thirteen_attempts() {
    // The backend refuses everything at once. An operation started at 0:
    // 1 attempt at 0 s, whose failure spawns 3 (the cap) for 2 s; from
    // then on each failure spawns 1, so 3 attempts every 2 s, at 2, 4, 6
    // and 8 s. The spawn at 6 s is before the 7 s give-up; the one at
    // 8 s is not. 1 + 4 × 3 = 13 attempts an operation.
    let text = r#"
[scenario]
name = "fan-out"
duration = "60s"
interval = "10s"
[[service]]
name = "token"
replicas = 1
app = { workers = 4, service_time = { dist = "constant", value = "1ms" } }
[[route]]
name = "r"
path = ["token"]
[[client]]
name = "editors"
route = "r"
rate = "1000/s"
timeout = "5s"
fanout = 3
fanout_max_in_flight = 3
fanout_delay = "2s"
give_up_after = "7s"
[[action]]
at = "0s"
do = "stall"
targets = ["token"]
mode = "fail"
"#;
    let rec = crate::common::run_audited(text, Some(3), Nanos::from_secs(1));
    let r = &rec.routes[0];
    // After the first 10 s every interval sees operations at every stage:
    // its attempts are 13 times its operations, up to the Poisson swing
    // of the 8 s of arrivals they come from.
    let first: u64 = r.first_attempts[1..].iter().sum();
    let attempts: u64 = r.attempts[1..].iter().sum();
    let ratio = attempts as f64 / first as f64;
    assert!(
        (ratio - 13.0).abs() < 0.2,
        "{attempts} attempts for {first} operations: {ratio:.3}"
    );
    // The first 10 s hold every operation's start but not all their
    // attempts: one started in [0, 2) s makes its 13 inside them, one in
    // [2, 4) s 10, then 7, 4 and 1, so 7 an operation on average.
    let ratio0 = r.attempts[0] as f64 / r.first_attempts[0] as f64;
    assert!(
        (ratio0 - 7.0).abs() < 0.3,
        "first interval: {ratio0:.2} attempts an operation"
    );
}
