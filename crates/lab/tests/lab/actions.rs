//! The timeline actions on real parts: each short run shows the action's
//! mechanism in the recording (causes, counts, replicas), never a timing.

use stormbreak_lab::{Stop, run};
use stormbreak_sim::record::Cause;

use crate::common::{errors, plan, total};

const BASE: &str = r#"
[scenario]
name = "actions"
duration = "3s"
interval = "500ms"
seed = 11

[[service]]
name = "api"
replicas = 2
pod_start = "200ms"
controller_period = "200ms"
app = { workers = 4, queue = 20, service_time = { dist = "constant", value = "20ms" } }

[[route]]
name = "r"
path = ["api"]

[[client]]
name = "users"
route = "r"
rate = "40/s"
timeout = "1s"
"#;

fn with(extra: &str) -> String {
    format!("{BASE}\n{extra}")
}

#[test]
fn kill_pods_closes_pods_and_the_controller_replaces_them() {
    let text = with(
        r#"
[[action]]
at = "1s"
do = "kill_pods"
service = "api"
pods = 1
"#,
    );
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let c = &lab.recording.components[0];
    // One pod gone and one replacement started, on a fresh port: three
    // pods in all, never more than two at once.
    assert_eq!(lab.figures.pods, 3);
    assert_eq!(lab.listened.len(), 3);
    assert!(c.replicas.iter().all(|&r| r <= 2.0), "{:?}", c.replicas);
    assert_eq!(*c.replicas.last().unwrap(), 2.0, "{:?}", c.replicas);
    assert_eq!(lab.recording.actions.len(), 1);
}

#[test]
fn a_timed_kill_keeps_the_pods_away_until_it_ends() {
    let text = with(
        r#"
[[action]]
at = "500ms"
do = "kill_pods"
service = "api"
pods = 2
for = "1s"
"#,
    );
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let c = &rec.components[0];
    // No pod may start before the kill's `for` ends: with none, every
    // attempt is `unavailable`, as in the simulator.
    assert!(c.replicas.contains(&0.0), "{:?}", c.replicas);
    assert!(
        errors(rec, Cause::Unavailable) > 0,
        "{:?}",
        rec.routes[0].errors
    );
    assert_eq!(*c.replicas.last().unwrap(), 2.0, "{:?}", c.replicas);
    assert_eq!(lab.figures.pods, 4);
    let what: Vec<&str> = rec.actions.iter().map(|a| a.what.as_str()).collect();
    assert_eq!(
        what,
        [
            "kill 2 pod(s) of api for 1s",
            "end of: kill 2 pod(s) of api for 1s"
        ]
    );
}

#[test]
fn failing_pods_answer_resets_and_heal_after_for() {
    let text = with(
        r#"
[[action]]
at = "1s"
do = "fail_pods"
service = "api"
pods = 2
for = "1s"
"#,
    );
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let resets = errors(rec, Cause::Reset);
    assert!(resets > 0, "{:?}", rec.routes[0].errors);
    // Pods stay in the endpoints: nothing is started or removed.
    assert_eq!(lab.figures.pods, 2);
    assert!(rec.components[0].replicas.iter().all(|&r| r == 2.0));
    // Healed: the last interval is served.
    let last = rec.routes[0].successes.len() - 1;
    assert!(rec.routes[0].successes[last] > 0);
}

#[test]
fn failing_pods_behind_a_sidecar_are_resets_too() {
    let text = with(
        r#"
[[action]]
at = "1s"
do = "fail_pods"
service = "api"
pods = 2
"#,
    )
    .replace("replicas = 2\n", "replicas = 2\nsidecar = { limit = 4 }\n");
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let rec = &lab.recording;
    assert!(errors(rec, Cause::Reset) > 0, "{:?}", rec.routes[0].errors);
    assert_eq!(errors(rec, Cause::Unavailable), 0);
}

#[test]
fn a_stall_that_fails_refuses_and_one_that_hangs_times_out() {
    let fail = with(
        r#"
[[action]]
at = "1s"
do = "stall"
targets = ["api"]
mode = "fail"
for = "1s"
"#,
    );
    let lab = run(&plan(&fail), &Stop::default()).unwrap();
    let rec = &lab.recording;
    assert!(
        errors(rec, Cause::Unavailable) > 0,
        "{:?}",
        rec.routes[0].errors
    );
    assert_eq!(errors(rec, Cause::Timeout), 0);
    // Every attempt during the stall was refused without reaching a pod.
    let hang = fail
        .replace("mode = \"fail\"", "mode = \"hang\"")
        .replace("for = \"1s\"", "for = \"1500ms\"");
    let lab = run(&plan(&hang), &Stop::default()).unwrap();
    let rec = &lab.recording;
    // Attempts hung longer than the 1 s timeout time out; those still hung
    // at the stall's end are reset.
    assert!(
        errors(rec, Cause::Timeout) > 0,
        "{:?}",
        rec.routes[0].errors
    );
    assert!(errors(rec, Cause::Reset) > 0, "{:?}", rec.routes[0].errors);
}

#[test]
fn set_capacity_cuts_the_workers_and_for_restores_them() {
    // 2 pods × 4 workers at 20 ms serve 400/s; cut to 1 worker each at
    // 100 ms service time, 20/s, under 40/s asked: refusals and queueing.
    let text = with(
        r#"
[[action]]
at = "1s"
do = "set_capacity"
service = "api"
workers = 1
for = "1s"
"#,
    )
    .replace("value = \"20ms\"", "value = \"100ms\"")
    .replace("queue = 20", "queue = 0");
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let c = &rec.components[0];
    // The limit gauge (workers × ready pods) shows the cut and its end.
    assert_eq!(c.limit[0], 8.0, "{:?}", c.limit);
    assert!(c.limit.contains(&2.0), "{:?}", c.limit);
    assert_eq!(*c.limit.last().unwrap(), 8.0, "{:?}", c.limit);
    assert!(
        errors(rec, Cause::LimitRejected) > 0,
        "{:?}",
        rec.routes[0].errors
    );
}

#[test]
fn set_retry_changes_the_attempts_of_new_requests() {
    // Every request is refused at once (one busy worker, no queue), so
    // without retries a request is one attempt, and with 3 attempts three.
    let text = with(
        r#"
[[action]]
at = "1500ms"
do = "set_retry"
target = "users"
retry = { max_attempts = 3, backoff = { kind = "constant", base = "10ms" } }
"#,
    )
    .replace("replicas = 2", "replicas = 1")
    .replace("workers = 4, queue = 20", "workers = 1, queue = 0")
    .replace("value = \"20ms\"", "value = \"10s\"");
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let r = &lab.recording.routes[0];
    let first_half: u64 = r.attempts[..3].iter().sum();
    let first_half_firsts: u64 = r.first_attempts[..3].iter().sum();
    assert_eq!(first_half, first_half_firsts, "no retries before set_retry");
    let (a, f) = (total(&r.attempts[4..]), total(&r.first_attempts[4..]));
    assert!(a > 2 * f, "{a} attempts for {f} requests after set_retry");
    assert_eq!(
        lab.recording.actions[0].what,
        "users: retries set to 3 attempt(s)"
    );
}
