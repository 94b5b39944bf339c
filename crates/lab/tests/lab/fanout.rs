//! The fan-out refresh loop on real parts: a failing service makes each
//! operation multiply its attempts, within the loop's bound; a healthy one
//! gets one attempt per operation. Counts and causes, never timings.

use stormbreak_lab::{LabOptions, LabPlan, PlanError, Stop, run};
use stormbreak_sim::record::Cause;

use crate::common::{errors, plan, scenario, total};

const FANOUT: &str = r#"
[scenario]
name = "fanout"
duration = "2s"
interval = "500ms"
seed = 17

[[service]]
name = "api"
replicas = 1
app = { workers = 8, queue = 20, service_time = { dist = "constant", value = "10ms" } }

[[route]]
name = "r"
path = ["api"]

[[client]]
name = "refresh"
route = "r"
rate = "10/s"
timeout = "1s"
fanout = 2
fanout_max_in_flight = 4
fanout_delay = "50ms"
give_up_after = "300ms"
"#;

#[test]
fn a_failing_service_makes_each_operation_multiply_its_attempts_within_the_bound() {
    // The app closes every connection for the whole run (a crashed app):
    // each attempt is a `reset`, which the default classifier retries, so
    // each failure spawns until give_up_after.
    let text = format!(
        "{FANOUT}\n[[action]]\nat = \"0s\"\ndo = \"fail_pods\"\nservice = \"api\"\npods = 1\n"
    );
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let r = &rec.routes[0];
    let (first, attempts) = (total(&r.first_attempts), total(&r.attempts));
    assert!(first > 0);
    assert!(
        attempts > first,
        "{attempts} attempts for {first} operations"
    );
    // At most 4 places, each held at least 50 ms by a spawned attempt,
    // spawning for 300 ms: 1 + 4 × (1 + 300/50) = 29 attempts an operation.
    assert!(attempts <= 29 * first, "{attempts} attempts for {first}");
    assert_eq!(total(&r.successes), 0);
    let resets = errors(rec, Cause::Reset);
    assert!(resets > first, "{:?}", r.errors);
    let other: u64 = r.errors.iter().flatten().sum::<u64>() - resets;
    assert_eq!(other, 0, "only resets: {:?}", r.errors);
    assert_eq!(lab.series[0].requests_ok.iter().sum::<u64>(), 0);
    assert!(lab.series[0].requests_failed.iter().sum::<u64>() > 0);
    for addr in &lab.listened {
        assert!(!crate::common::listening(*addr), "{addr} still listening");
    }
}

#[test]
fn a_healthy_service_gets_one_attempt_per_operation() {
    let text = FANOUT.replace("fanout = 2", "fanout = 3");
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let r = &lab.recording.routes[0];
    let (first, attempts) = (total(&r.first_attempts), total(&r.attempts));
    assert!(first > 0);
    // Nothing fails, so nothing spawns.
    assert_eq!(attempts, first);
    assert_eq!(r.errors.iter().flatten().sum::<u64>(), 0, "{:?}", r.errors);
    for addr in &lab.listened {
        assert!(!crate::common::listening(*addr), "{addr} still listening");
    }
}

#[test]
fn a_fanout_plan_takes_the_simulators_defaults_and_its_bound() {
    let text = FANOUT.replace("fanout_max_in_flight = 4\n", "");
    let p = plan(&text);
    let f = p.clients[0].fanout.expect("a fan-out population");
    // `fanout_max_in_flight` defaults to `fanout`, as in the simulator.
    assert_eq!((f.fanout, f.max_in_flight), (2, 2));
    assert!(
        plan(&text.replace("fanout = 2\n", "")).clients[0]
            .fanout
            .is_none()
    );
    // 4 096 operations × 100 attempts each is over the lab's bound.
    let wide = FANOUT.replace("fanout_max_in_flight = 4", "fanout_max_in_flight = 100");
    let err = LabPlan::new(&scenario(&wide), &LabOptions::default()).unwrap_err();
    assert!(matches!(err, PlanError::Bound(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("[[client]] \"refresh\": fanout_max_in_flight"),
        "{text}"
    );
}

#[test]
fn a_fanout_delay_under_the_timers_reach_is_refused_by_name() {
    let short = FANOUT.replace("fanout_delay = \"50ms\"", "fanout_delay = \"1ms\"");
    let err = LabPlan::new(&scenario(&short), &LabOptions::default()).unwrap_err();
    assert!(matches!(err, PlanError::Unsupported(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("[[client]] \"refresh\": fanout_delay = 1ms"),
        "{text}"
    );
}

#[test]
fn a_failure_the_retry_on_list_does_not_name_spawns_nothing() {
    // With `retry`, the fan-out spawns on what its `retry_on` retries, as
    // the simulator's caller classifies: resets are not named here, so
    // the crashed app's resets end each operation at its first attempt.
    let text = format!(
        "{}\n[[action]]\nat = \"0s\"\ndo = \"fail_pods\"\nservice = \"api\"\npods = 1\n",
        FANOUT.replace(
            "give_up_after = \"300ms\"",
            "give_up_after = \"300ms\"\nretry = { max_attempts = 2, retry_on = [\"5xx\"] }"
        )
    );
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let r = &lab.recording.routes[0];
    let (first, attempts) = (total(&r.first_attempts), total(&r.attempts));
    assert!(first > 0);
    assert_eq!(attempts, first);
    // Every attempt is a reset, but one in flight at the run's end.
    let resets = errors(&lab.recording, Cause::Reset);
    assert!(
        resets <= attempts && resets + 1 >= attempts,
        "{:?}",
        r.errors
    );
}
