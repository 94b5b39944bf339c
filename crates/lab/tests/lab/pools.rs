//! LB pools on real guards: a node holds a flow per request in flight
//! and refuses past `flows_per_node` as the simulator's node does
//! (`flows_exhausted`, a refused connection to the caller).

use stormbreak_lab::{Stop, run};
use stormbreak_sim::record::Cause;

use crate::common::{errors, listening, plan, total};

const LB: &str = r#"
[scenario]
name = "lb"
duration = "2s"
interval = "500ms"
seed = 3

# 2 nodes × 2 flows, each held 200 ms by the app: at most 4 in flight,
# about 20 a second through; the app's 16 workers are never the bound.
[[lb]]
name = "edge"
nodes = 2
flows_per_node = 2

[[service]]
name = "api"
replicas = 2
app = { workers = 8, queue = 0, service_time = { dist = "constant", value = "200ms" } }

[[route]]
name = "r"
path = ["edge", "api"]

[[client]]
name = "users"
route = "r"
rate = "60/s"
timeout = "2s"
"#;

#[test]
fn an_lb_node_refuses_past_its_flows_as_flows_exhausted() {
    let lab = run(&plan(LB), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let r = &rec.routes[0];
    let ok = total(&r.successes);
    // 4 flows, each held 200 ms: at most 4 × 10 finish in 2 s.
    assert!(ok > 0 && ok <= 40, "{ok} successes");
    let exhausted = errors(rec, Cause::FlowsExhausted);
    assert!(exhausted > 0, "{:?}", r.errors);
    assert_eq!(errors(rec, Cause::LimitRejected), 0, "{:?}", r.errors);
    // The LB is the first component, as the simulator orders them.
    let (edge, api) = (&rec.components[0], &rec.components[1]);
    assert_eq!((edge.kind.as_str(), api.kind.as_str()), ("lb", "service"));
    assert_eq!(total(&edge.arrivals), total(&r.attempts));
    assert_eq!(total(&edge.rejected), exhausted);
    assert!(edge.limit.iter().all(|&l| l == 4.0), "{:?}", edge.limit);
    assert!(edge.replicas.iter().all(|&n| n == 2.0));
    assert!(
        edge.in_flight.iter().all(|&f| f <= 4.0),
        "{:?}",
        edge.in_flight
    );
    // What the nodes let through reached the app, counted at its pods.
    assert!(total(&api.arrivals) >= ok, "{:?}", api.arrivals);
    assert!(total(&api.arrivals) <= total(&r.attempts) - exhausted);
    assert_eq!(total(&api.rejected), 0);
    // Two backends and two nodes, all closed.
    assert_eq!(lab.listened.len(), 4);
    for a in &lab.listened {
        assert!(!listening(*a), "{a} still accepts after the run");
    }
}

#[test]
fn a_caller_sees_flows_exhausted_as_a_refused_connection() {
    // Retried only on connect failures: had the node's 429 reached the
    // classifier as a response, nothing would be retried.
    let text = LB.replace(
        "timeout = \"2s\"",
        "timeout = \"2s\"\nretry = { max_attempts = 2, retry_on = [\"connect-failure\"], backoff = { kind = \"constant\", base = \"10ms\" } }",
    );
    let rec = run(&plan(&text), &Stop::default()).unwrap().recording;
    let r = &rec.routes[0];
    assert!(
        total(&r.attempts) > total(&r.first_attempts),
        "{} attempts for {} requests",
        total(&r.attempts),
        total(&r.first_attempts)
    );
}

#[test]
fn a_refusal_further_down_passes_through_the_node_with_its_own_cause() {
    // The nodes hold up to 20 flows; the one pod's sidecar lets 1 through
    // and refuses the rest: limit_rejected, counted at the service.
    let text = LB
        .replace("flows_per_node = 2", "flows_per_node = 20")
        .replace("replicas = 2\n", "replicas = 1\nsidecar = { limit = 1 }\n");
    let rec = run(&plan(&text), &Stop::default()).unwrap().recording;
    let refused = errors(&rec, Cause::LimitRejected);
    assert!(refused > 0, "{:?}", rec.routes[0].errors);
    assert_eq!(errors(&rec, Cause::FlowsExhausted), 0);
    assert_eq!(total(&rec.components[0].rejected), 0);
    assert_eq!(total(&rec.components[1].rejected), refused);
}

#[test]
fn paused_nodes_reset_their_flows_and_restarted_ones_serve_again() {
    // Flows are held 300 ms: a pause at 500 ms finds some on node 0.
    let text = LB
        .replace("flows_per_node = 2", "flows_per_node = 50")
        .replace("value = \"200ms\"", "value = \"300ms\"")
        .replace("interval = \"500ms\"", "interval = \"250ms\"")
        .replace("rate = \"60/s\"", "rate = \"30/s\"")
        + r#"
[[action]]
at = "500ms"
do = "pause_nodes"
lb = "edge"
nodes = 1

[[action]]
at = "1s"
do = "restart_nodes"
lb = "edge"
"#;
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let rec = &lab.recording;
    assert!(errors(rec, Cause::Reset) > 0, "{:?}", rec.routes[0].errors);
    let edge = &rec.components[0];
    // One node running while paused, both again after the restart.
    assert!(edge.replicas.contains(&1.0), "{:?}", edge.replicas);
    assert_eq!(edge.replicas.last(), Some(&2.0), "{:?}", edge.replicas);
    assert!(edge.limit.contains(&50.0) && edge.limit.last() == Some(&100.0));
    let what: Vec<&str> = rec.actions.iter().map(|a| a.what.as_str()).collect();
    assert_eq!(what, ["pause 1 node(s) of edge", "restart nodes of edge"]);
    // Two pods, two nodes, the restarted node's new port: all closed.
    assert_eq!(lab.listened.len(), 5);
    for a in &lab.listened {
        assert!(!listening(*a), "{a} still accepts after the run");
    }
}

#[test]
fn a_timed_pause_restarts_its_nodes_when_it_ends() {
    let text = LB
        .replace("flows_per_node = 2", "flows_per_node = 50")
        .replace("interval = \"500ms\"", "interval = \"250ms\"")
        .replace("rate = \"60/s\"", "rate = \"20/s\"")
        + r#"
[[action]]
at = "500ms"
do = "pause_nodes"
lb = "edge"
nodes = 2
for = "500ms"
"#;
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let edge = &rec.components[0];
    // No node running while both are paused: attempts are `unavailable`,
    // refused by the LB; both serve again after.
    assert!(edge.replicas.contains(&0.0), "{:?}", edge.replicas);
    assert_eq!(edge.replicas.last(), Some(&2.0), "{:?}", edge.replicas);
    assert!(
        errors(rec, Cause::Unavailable) > 0,
        "{:?}",
        rec.routes[0].errors
    );
    let what: Vec<&str> = rec.actions.iter().map(|a| a.what.as_str()).collect();
    assert_eq!(what.len(), 2, "{what:?}");
    assert!(
        what[1].starts_with("end of: pause 2 node(s) of edge"),
        "{what:?}"
    );
    assert_eq!(lab.listened.len(), 6);
    for a in &lab.listened {
        assert!(!listening(*a), "{a} still accepts after the run");
    }
}

#[test]
fn a_shed_rule_at_an_lb_refuses_its_route_until_unshed() {
    let text = LB
        .replace("flows_per_node = 2", "flows_per_node = 50")
        .replace("value = \"200ms\"", "value = \"20ms\"")
        .replace("interval = \"500ms\"", "interval = \"250ms\"")
        .replace("rate = \"60/s\"", "rate = \"40/s\"")
        + r#"
[[action]]
at = "500ms"
do = "shed"
lb = "edge"
route = "r"
status = 429
retry_after = "2s"
for = "500ms"
"#;
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let shed = errors(rec, Cause::Shed429);
    assert!(shed > 0, "{:?}", rec.routes[0].errors);
    // The rule is the LB's own refusal, not a flow cap's.
    assert_eq!(errors(rec, Cause::FlowsExhausted), 0);
    assert_eq!(total(&rec.components[0].rejected), shed);
    // Served before the rule and again after it ends.
    let ok = &rec.routes[0].successes;
    assert!(ok[0] > 0 && ok[ok.len() - 1] > 0, "{ok:?}");
    let what: Vec<&str> = rec.actions.iter().map(|a| a.what.as_str()).collect();
    assert!(what[0].starts_with("shed r with 429 at edge"), "{what:?}");
    assert!(what[1].starts_with("end of: shed r"), "{what:?}");
}

const FOLLOW: &str = r#"
[scenario]
name = "follow"
duration = "3500ms"
interval = "500ms"
seed = 5

[[lb]]
name = "edge"
nodes = 1
flows_per_node = 50

# Either pod alone serves 4 / 20 ms = 200/s, five times the offered load.
[[service]]
name = "api"
replicas = 2
pod_start = "300ms"
controller_period = "300ms"
app = { workers = 4, queue = 0, service_time = { dist = "constant", value = "20ms" } }

[[route]]
name = "r"
path = ["edge", "api"]

[[client]]
name = "users"
route = "r"
rate = "40/s"
timeout = "1s"

# The oldest pod goes at 1 s and its replacement is ready about 0.6 s
# later; at 2.2 s the other original goes, leaving the replacement alone.
[[action]]
at = "1s"
do = "kill_pods"
service = "api"
pods = 1

[[action]]
at = "2200ms"
do = "kill_pods"
service = "api"
pods = 1
"#;

#[test]
fn an_lb_node_follows_its_service_pods_through_kills_and_replacements() {
    let lab = run(&plan(FOLLOW), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let r = &rec.routes[0];
    let failed: u64 = r.errors.iter().flatten().sum();
    // Had the node kept forwarding to its first two pods, every request
    // after 2.2 s (about 50) would have failed on a closed port; only what
    // a killed pod held when it went (under one request on average) may.
    assert!(failed <= 4, "{failed} failed: {:?}", r.errors);
    assert!(total(&r.successes) >= 120, "{:?}", r.successes);
    let api = &rec.components[1];
    assert_eq!(api.replicas.first(), Some(&2.0), "{:?}", api.replicas);
    assert!(api.replicas.contains(&1.0), "{:?}", api.replicas);
    // Four pods in all (two replacements) and the node; all closed.
    assert_eq!(lab.listened.len(), 5, "{:?}", lab.listened);
    for a in &lab.listened {
        assert!(!listening(*a), "{a} still accepts after the run");
    }
}

/// Two sites through one LB, ramped one after the other (also the base
/// of the ramp refusals in `refusals.rs`).
pub(crate) const RAMP: &str = r#"
[scenario]
name = "ramp"
duration = "4s"
interval = "500ms"
seed = 9

[[lb]]
name = "edge"
nodes = 1
flows_per_node = 100

[[service]]
name = "api"
replicas = 1
app = { workers = 8, queue = 0, service_time = { dist = "constant", value = "10ms" } }

[[route]]
name = "r"
path = ["edge", "api"]

[[client]]
name = "east"
site = "a"
route = "r"
rate = "40/s"
timeout = "1s"

[[client]]
name = "west"
site = "b"
route = "r"
rate = "40/s"
timeout = "1s"

# Site a at half for 1 s, then whole; site b starts when a is whole, half
# for 1 s, then whole: about 20 + 40 + 20 requests refused 403.
[[action]]
at = "1s"
do = "ramp"
lb = "edge"
route = "r"
sites = ["a", "b"]
restore = { ramp = { steps = [0.5, 1.0], hold = "1s", step_back_after = "0" }, next_site_at_fraction = 1.0 }
"#;

#[test]
fn a_ramp_restores_site_by_site_at_the_lb_as_the_simulator_does() {
    let lab = run(&plan(RAMP), &Stop::default()).unwrap();
    let refused = errors(&lab.recording, Cause::Shed403);
    let sim = stormbreak_sim::engine::Engine::new(
        &crate::common::scenario(RAMP),
        stormbreak_sim::engine::RunOptions {
            seed: None,
            scale: 1.0,
        },
    )
    .run()
    .unwrap();
    let expected = errors(&sim, Cause::Shed403);
    assert!((50..=110).contains(&expected), "simulator: {expected}");
    // Poisson arrivals on both sides: within a third of the simulator's.
    let (lo, hi) = (expected * 2 / 3, expected * 4 / 3);
    assert!(
        (lo..=hi).contains(&refused),
        "lab {refused} refused, simulator {expected}"
    );
    // Refused by the LB itself, and nothing else failed.
    let r = &lab.recording.routes[0];
    let failed: u64 = r.errors.iter().flatten().sum();
    assert_eq!(failed, refused, "{:?}", r.errors);
    assert_eq!(total(&lab.recording.components[0].rejected), refused);
    // After the restore (from 3 s) everything passes.
    let late: u64 = r.errors[6..].iter().flatten().sum();
    assert_eq!(late, 0, "{:?}", r.errors);
}
