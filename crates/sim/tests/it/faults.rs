//! Capacity triggers and faults as timeline actions: each one's effect
//! while it lasts, and its undoing after `for`, read off the recording.

use stormbreak_policy::Nanos;
use stormbreak_sim::Scenario;
use stormbreak_sim::record::{Cause, Recording};

fn run(text: &str) -> Recording {
    crate::common::run_audited(text, None, Nanos::from_secs(5))
}

/// 10-second intervals `[from, to)` of a route's series, summed.
fn sum(v: &[u64], from: usize, to: usize) -> u64 {
    v[from..to].iter().sum()
}

fn errors(rec: &Recording, route: &str, cause: Cause, from: usize, to: usize) -> u64 {
    rec.route(route).unwrap().errors[from..to]
        .iter()
        .map(|e| e[cause as usize])
        .sum()
}

/// One service of 4 pods × 4 workers at 10 ms constant, 100 req/s: ρ = 0.06.
fn base(actions: &str) -> String {
    format!(
        r#"
[scenario]
name = "faults"
duration = "300s"
interval = "10s"
[[lb]]
name = "edge"
nodes = 2
flows_per_node = 1000
[[service]]
name = "api"
replicas = 4
pod_start = "20s"
controller_period = "5s"
sidecar = {{ limit = 8 }}
app = {{ workers = 4, service_time = {{ dist = "constant", value = "10ms" }} }}
[[route]]
name = "r"
path = ["edge", "api"]
[[client]]
name = "users"
route = "r"
rate = "100/s"
timeout = "2s"
{actions}
"#
    )
}

#[test]
fn slow_service_multiplies_and_adds_to_service_times_while_it_lasts() {
    let rec = run(&base(
        r#"
[[action]]
at = "100s"
for = "100s"
do = "slow_service"
service = "api"
factor = 3.0
add = "5ms"
"#,
    ));
    let mean = &rec.route("r").unwrap().latency_mean_ms;
    // Constant 10 ms, no queueing at ρ ≈ 0.06 (0.18 slowed): the latency is
    // the service time itself.
    for (i, &m) in mean.iter().enumerate() {
        let want = if (11..20).contains(&i) { 35.0 } else { 10.0 };
        if i == 10 || i == 20 {
            continue; // the intervals where the change happens mix both
        }
        assert!(
            (m - want).abs() < 1.0,
            "interval {i}: mean latency {m} ms, want {want} ms: {mean:?}"
        );
    }
    let log: Vec<&str> = rec.actions.iter().map(|a| a.what.as_str()).collect();
    assert!(
        log.iter()
            .any(|w| w.starts_with("end of: api: service time × 3")),
        "{log:?}"
    );
}

#[test]
fn a_capacity_cut_turns_spare_capacity_into_refusals_until_it_ends() {
    // 100 req/s at 10 ms need 1 worker in all; one worker and one sidecar
    // slot on 4 pods at 400 req/s (ρ = 1 per pod) refuses a share.
    let text = base(
        r#"
[[client.step]]
at = "0s"
rate = "300/s"
[[action]]
at = "100s"
for = "100s"
do = "set_capacity"
service = "api"
workers = 1
sidecar_limit = 1
"#,
    );
    let rec = run(&text);
    let before = errors(&rec, "r", Cause::LimitRejected, 0, 10);
    let during = errors(&rec, "r", Cause::LimitRejected, 11, 20);
    let after = errors(&rec, "r", Cause::LimitRejected, 21, 30);
    assert_eq!(before, 0);
    assert!(during > 1_000, "the cut refused only {during}");
    assert_eq!(after, 0, "capacity was not restored");
    let api = rec.components.iter().find(|c| c.name == "api").unwrap();
    assert_eq!(api.limit[5], 32.0, "sidecar limit before: {:?}", api.limit);
    assert_eq!(api.limit[15], 4.0, "sidecar limit during: {:?}", api.limit);
    assert_eq!(api.limit[25], 32.0, "sidecar limit after: {:?}", api.limit);
}

#[test]
fn killed_pods_reset_their_attempts_and_come_back_through_the_replica_controller() {
    // Long service times so the killed pods hold attempts.
    let text = base(
        r#"
[[action]]
at = "100s"
do = "kill_pods"
service = "api"
pods = 2
"#,
    )
    .replace(r#"value = "10ms""#, r#"value = "50ms""#);
    let rec = run(&text);
    let api = rec.components.iter().find(|c| c.name == "api").unwrap();
    // Killed at 100 s (counted in interval 9, which ends then); the
    // controller notices at 105 s; ready 20 s later, at 125 s. Interval
    // i's gauges are read at its end, 10 (i + 1) s.
    assert_eq!(api.replicas[8], 4.0, "{:?}", api.replicas);
    assert_eq!(api.replicas[9], 2.0, "{:?}", api.replicas);
    assert_eq!(api.replicas[11], 2.0, "{:?}", api.replicas);
    assert_eq!(api.replicas[12], 4.0, "{:?}", api.replicas);
    assert!(api.replicas.iter().all(|&r| r <= 4.0), "{:?}", api.replicas);
    let resets = errors(&rec, "r", Cause::Reset, 9, 10);
    assert!(resets > 0, "the kill reset nothing");
    assert_eq!(errors(&rec, "r", Cause::Reset, 10, 30), 0);
}

#[test]
fn a_timed_kill_keeps_the_lost_capacity_unschedulable_until_it_ends() {
    let rec = run(&base(
        r#"
[[action]]
at = "100s"
for = "60s"
do = "kill_pods"
service = "api"
pods = 3
"#,
    ));
    let r = &rec
        .components
        .iter()
        .find(|c| c.name == "api")
        .unwrap()
        .replicas;
    // Gone 100 s – 160 s; rescheduled at 160 s + 5 s, ready 20 s later.
    // Interval i's gauges are read at its end, 10 (i + 1) s.
    for (i, want) in [(8, 4.0), (9, 1.0), (15, 1.0), (17, 1.0), (18, 4.0)] {
        assert_eq!(r[i], want, "interval {i}: {r:?}");
    }
}

#[test]
fn failing_pods_answer_fast_and_least_request_sends_them_more_than_their_share() {
    // 200 req/s at 50 ms: about 2.5 requests on each healthy pod.
    let rec = run(&base(
        r#"
[[client.step]]
at = "0s"
rate = "200/s"
[[action]]
at = "100s"
for = "100s"
do = "fail_pods"
service = "api"
pods = 1
"#,
    )
    .replace(r#"value = "10ms""#, r#"value = "50ms""#));
    let route = rec.route("r").unwrap();
    let attempts = sum(&route.attempts, 11, 20);
    let resets = errors(&rec, "r", Cause::Reset, 11, 20);
    // One pod of four fails. It holds nothing, so the two-choice
    // least-request balancer picks it whenever it is one of the two drawn
    // and the other pod is busy: P = 1 − (3/4)² = 7/16 ≈ 0.44, less the
    // draws where the other pod is idle too and the tie goes to the first.
    let share = resets as f64 / attempts as f64;
    assert!(share > 0.38, "failing share {share:.3} of {attempts}");
    assert!(
        share <= 0.4375 + 0.01,
        "failing share {share:.3} of {attempts}"
    );
    let resets: Vec<u64> = route
        .errors
        .iter()
        .map(|e| e[Cause::Reset as usize])
        .collect();
    assert_eq!(
        errors(&rec, "r", Cause::Reset, 21, 30),
        0,
        "not healed: {resets:?}"
    );
    assert_eq!(errors(&rec, "r", Cause::Reset, 0, 9), 0);
}

#[test]
fn a_hung_dependency_costs_every_caller_its_timeout_and_resets_at_the_end() {
    let rec = run(&base(
        r#"
[[action]]
at = "100s"
for = "50s"
do = "stall"
targets = ["api"]
mode = "hang"
"#,
    ));
    let route = rec.route("r").unwrap();
    // Each attempt that reaches the hung api costs its caller the 2 s
    // timeout, and the LB keeps its flow: the 2 × 1 000 flows are gone
    // after 20 s, and every later attempt is refused at the LB.
    let timeouts = errors(&rec, "r", Cause::Timeout, 9, 16);
    let refused = errors(&rec, "r", Cause::FlowsExhausted, 9, 16);
    let sent = sum(&route.attempts, 10, 15);
    assert!((1_990..=2_000).contains(&timeouts), "{timeouts} timeouts");
    assert!(
        timeouts + refused + 10 >= sent,
        "{timeouts} timeouts + {refused} refused of {sent} sent"
    );
    // (An attempt sent just before 100 s may still succeed in interval 10.)
    assert_eq!(sum(&route.successes, 11, 15), 0);
    let edge = rec.components.iter().find(|c| c.name == "edge").unwrap();
    assert_eq!(edge.in_flight[13], 2_000.0, "{:?}", edge.in_flight);
    // The stall's end resets what hung and frees the flows.
    assert!(edge.in_flight[16] < 10.0, "{:?}", edge.in_flight);
    assert!(sum(&route.successes, 16, 30) > 10_000, "no recovery");
}

#[test]
fn a_failing_stall_refuses_at_once() {
    let rec = run(&base(
        r#"
[[action]]
at = "100s"
for = "50s"
do = "stall"
targets = ["edge"]
mode = "fail"
"#,
    ));
    let unavailable = errors(&rec, "r", Cause::Unavailable, 10, 15);
    let sent = sum(&rec.route("r").unwrap().attempts, 10, 15);
    assert_eq!(unavailable, sent);
    assert_eq!(errors(&rec, "r", Cause::Timeout, 0, 30), 0);
    assert_eq!(errors(&rec, "r", Cause::Unavailable, 15, 30), 0);
}

#[test]
fn an_lb_limit_cut_refuses_flows_and_is_restored() {
    let rec = run(&base(
        r#"
[[action]]
at = "100s"
for = "100s"
do = "set_lb_limit"
lb = "edge"
node = 1
flows_per_node = 1
"#,
    )
    .replace(r#"value = "10ms""#, r#"value = "50ms""#));
    let edge = rec.components.iter().find(|c| c.name == "edge").unwrap();
    assert_eq!(edge.limit[5], 2000.0);
    assert_eq!(edge.limit[15], 1001.0);
    assert_eq!(edge.limit[25], 2000.0);
    let refused = errors(&rec, "r", Cause::FlowsExhausted, 11, 20);
    assert!(refused > 100, "refused {refused}");
    assert_eq!(errors(&rec, "r", Cause::FlowsExhausted, 21, 30), 0);
}

/// `capacity = 0.2` (a fifth of the capacity left) is `factor = 5`: the
/// same run, event for event, and the same log line.
#[test]
fn slow_service_capacity_is_the_inverse_of_factor() {
    let action = |how: &str| {
        base(&format!(
            "[[action]]\nat = \"100s\"\nfor = \"50s\"\ndo = \"slow_service\"\nservice = \"api\"\n{how}\n"
        ))
    };
    let digest = |text: &str| {
        let sc = Scenario::parse("f.toml", text).unwrap_or_else(|e| panic!("{e}"));
        let mut e = stormbreak_sim::engine::Engine::new(&sc, Default::default());
        e.run_until(sc.scenario.duration).unwrap();
        e.event_digest()
    };
    let by_capacity = action("capacity = 0.2");
    assert_eq!(digest(&by_capacity), digest(&action("factor = 5.0")));
    assert_ne!(digest(&by_capacity), digest(&action("factor = 4.0")));
    let rec = run(&by_capacity);
    assert_eq!(rec.actions[0].what, "api: service time × 5 + 0 for 50s");
}

#[test]
fn each_new_action_refuses_bad_fields_with_their_position() {
    let cases = [
        (
            "do = \"slow_service\"\nservice = \"nope\"\nfactor = 2.0",
            "slow_service: \"nope\" is not a service",
        ),
        (
            "do = \"slow_service\"\nservice = \"api\"\nfactor = 0.0",
            "factor must be a number in (0, 1000]",
        ),
        (
            "do = \"slow_service\"\nservice = \"api\"",
            "give factor (≠ 1) or add (> 0)",
        ),
        (
            "do = \"slow_service\"\nservice = \"api\"\nfactor = 5.0\ncapacity = 0.2",
            "give factor or capacity, not both (capacity = C is factor = 1/C)",
        ),
        (
            "do = \"slow_service\"\nservice = \"api\"\ncapacity = 0.0",
            "capacity is the share of capacity that remains, a number in (0, 1], got 0",
        ),
        (
            "do = \"slow_service\"\nservice = \"api\"\ncapacity = 1.5",
            "a number in (0, 1], got 1.5",
        ),
        (
            "do = \"slow_service\"\nservice = \"api\"\ncapacity = 0.0005",
            "capacity 0.0005 is a slowdown of more than 1000×",
        ),
        (
            "do = \"slow_service\"\nservice = \"api\"\ncapacity = 1.0",
            "or capacity (< 1) instead of factor; as written it changes nothing",
        ),
        (
            "do = \"set_capacity\"\nservice = \"api\"",
            "give workers, sidecar_limit or both",
        ),
        (
            "do = \"set_capacity\"\nservice = \"api\"\nworkers = 0",
            "workers must be ≥ 1",
        ),
        (
            "do = \"kill_pods\"\nservice = \"api\"\npods = 0",
            "kill_pods: pods must be ≥ 1",
        ),
        (
            "do = \"stall\"\ntargets = [\"api\", \"api\"]\nmode = \"hang\"",
            "listed twice",
        ),
        (
            "do = \"stall\"\ntargets = [\"x\"]\nmode = \"hang\"",
            "unknown component \"x\"",
        ),
        (
            "do = \"stall\"\ntargets = [\"api\"]\nmode = \"sleep\"",
            "expected `hang` or `fail`",
        ),
        (
            "do = \"set_lb_limit\"\nlb = \"edge\"\nnode = 2\nflows_per_node = 5",
            "node must be in 0..2",
        ),
        (
            "do = \"set_rate\"\nclient = \"users\"\nrate = \"5/s\"\nfor = \"10s\"",
            "set_rate: `for` is not supported",
        ),
        (
            "do = \"fail_pods\"\nservice = \"api\"\npods = 1\nfor = \"0s\"",
            "for must be > 0",
        ),
    ];
    for (action, want) in cases {
        let text = base(&format!("[[action]]\nat = \"10s\"\n{action}\n"));
        let err = Scenario::parse("f.toml", &text)
            .expect_err(action)
            .to_string();
        assert!(err.contains(want), "{action}: {err}");
        // Every message points into the action table (line 25 onward).
        let line: usize = err
            .strip_prefix("f.toml:")
            .and_then(|r| r.split(':').next())
            .and_then(|l| l.parse().ok())
            .unwrap_or_else(|| panic!("no line in {err}"));
        assert!(line >= 25, "{action}: {err}");
    }
}

/// `scenarios/faults-tour.toml` plays every fault in turn: each one shows
/// as errors while it lasts, and the mesh is clean again before the next.
#[test]
fn the_faults_tour_shows_each_fault_and_recovers_between_them() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/faults-tour.toml"
    ))
    .unwrap();
    let rec = run(&text);
    let r = rec.route("main").unwrap();
    // Error share of minute m (six 10 s intervals).
    let share = |m: usize| {
        let (a, b) = (m * 6, m * 6 + 6);
        let failed: u64 = (a..b).map(|i| r.failed(i)).sum();
        failed as f64 / sum(&r.attempts, a, b).max(1) as f64
    };
    let faults = [
        ("slow_service", 5),
        ("set_capacity", 12),
        ("kill_pods", 20),
        ("kill_pods for", 28),
        ("fail_pods", 35),
        ("stall hang", 42),
        ("stall fail", 47),
        ("set_lb_limit", 52),
    ];
    for (what, m) in faults {
        assert!(
            share(m) > 0.005,
            "{what} at minute {m}: error share {}",
            share(m)
        );
    }
    for m in [3, 10, 17, 25, 34, 40, 45, 50, 57] {
        assert!(share(m) < 0.001, "minute {m} not clean: {}", share(m));
    }
    assert_eq!(
        rec.actions
            .iter()
            .filter(|a| a.what.starts_with("end of:"))
            .count(),
        7
    );
}
