//! Gateways on real guards: the gateway's limit refuses at its instances,
//! its dependency call is made before forwarding and a failed check is
//! recorded `dependency_failed`, as the simulator records them.

use stormbreak_lab::{Stop, run};
use stormbreak_sim::record::Cause;

use crate::common::{errors_on, listening, plan, total};

const GATEWAY: &str = r#"
[scenario]
name = "gateway"
duration = "2s"
interval = "500ms"
seed = 4

# Plenty of flows: the LB never binds here; it only forwards.
[[lb]]
name = "edge"
nodes = 1
flows_per_node = 500

# 2 instances × a fixed limit of 1, each request held 200 ms by the app:
# at most 2 in flight. Thresholds past 1 never shed by class, so a full
# instance answers with the limit's own refusal (503, limit_rejected).
[[gateway]]
name = "gw"
timeout = "1s"
instances = 2
limit = { kind = "fixed", limit = 1 }
saturation = { thresholds = { sheddable = 2.0, sheddable_plus = 2.0, critical = 2.0, critical_plus = 2.0 } }

[[service]]
name = "api"
replicas = 1
app = { workers = 8, queue = 0, service_time = { dist = "constant", value = "200ms" } }

[[route]]
name = "r"
path = ["edge", "gw", "api"]

[[client]]
name = "users"
route = "r"
rate = "40/s"
timeout = "2s"
"#;

#[test]
fn a_gateway_limit_refuses_at_its_instances_behind_an_lb() {
    let lab = run(&plan(GATEWAY), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let ok = total(&rec.routes[0].successes);
    // 2 slots, each held 200 ms: at most 2 × 10 finish in 2 s.
    assert!(ok > 0 && ok <= 20, "{ok} successes");
    let refused = errors_on(rec, 0, Cause::LimitRejected);
    assert!(refused > 0, "{:?}", rec.routes[0].errors);
    assert_eq!(errors_on(rec, 0, Cause::FlowsExhausted), 0);
    let kinds: Vec<&str> = rec.components.iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(kinds, ["lb", "gateway", "service"]);
    let (edge, gw, api) = (&rec.components[0], &rec.components[1], &rec.components[2]);
    // The gateway counts its refusals at its guards; the LB passed them on.
    assert_eq!(total(&gw.rejected), refused);
    assert_eq!(total(&edge.rejected), 0);
    assert!(total(&gw.arrivals) >= ok + refused, "{:?}", gw.arrivals);
    assert!(gw.limit.iter().all(|&l| l == 2.0), "{:?}", gw.limit);
    assert!(gw.replicas.iter().all(|&n| n == 2.0));
    assert!(gw.in_flight.iter().all(|&f| f <= 2.0), "{:?}", gw.in_flight);
    assert_eq!(total(&api.rejected), 0);
    assert!(total(&api.arrivals) >= ok);
    // A pod, a node and two gateway instances, all closed.
    assert_eq!(lab.listened.len(), 4);
    for a in &lab.listened {
        assert!(!listening(*a), "{a} still accepts after the run");
    }
}

const DEPENDENCY: &str = r#"
[scenario]
name = "dependency"
duration = "2s"
interval = "500ms"
seed = 6

[[gateway]]
name = "gw"
timeout = "1s"
dependency = "auth"

[[service]]
name = "api"
replicas = 1
app = { workers = 8, queue = 0, service_time = { dist = "constant", value = "20ms" } }

# One worker, no queue, 100 ms a check: most checks find it busy and are
# refused, so their requests fail the dependency.
[[service]]
name = "authsvc"
replicas = 1
app = { workers = 1, queue = 0, service_time = { dist = "constant", value = "100ms" } }

[[route]]
name = "r"
path = ["gw", "api"]

[[route]]
name = "auth"
path = ["authsvc"]

[[client]]
name = "users"
route = "r"
rate = "40/s"
timeout = "2s"
"#;

#[test]
fn a_gateway_calls_its_dependency_first_and_a_failed_check_is_dependency_failed() {
    let lab = run(&plan(DEPENDENCY), &Stop::default()).unwrap();
    let rec = &lab.recording;
    let ok = total(&rec.routes[0].successes);
    let failed = errors_on(rec, 0, Cause::DependencyFailed);
    assert!(failed > 0, "{:?}", rec.routes[0].errors);
    // One check at a time, 100 ms each: at most 10 pass a second.
    assert!(ok > 0 && ok <= 21, "{ok} successes");
    // The dependency route records the gateway's calls, as the simulator's.
    let auth = &rec.routes[1];
    // Every success passed a check; a check passed at the run's end may
    // still have its forwarded call at the api (8 workers).
    let passed = total(&auth.successes);
    assert!(
        passed >= ok && passed <= ok + 8,
        "{passed} checks passed, {ok} ok"
    );
    assert!(total(&auth.attempts) >= ok + failed, "{:?}", auth.attempts);
    assert!(total(&auth.first_attempts) >= ok + failed);
    // Only requests that passed the check reach the api.
    let (gw, api, authsvc) = (&rec.components[0], &rec.components[1], &rec.components[2]);
    assert_eq!(gw.kind, "gateway");
    let reached = total(&api.arrivals);
    assert!(
        reached >= ok && reached <= passed,
        "{reached} reached the api"
    );
    assert!(total(&authsvc.rejected) > 0);
    // A call is counted by the gateway when it ends: the one check in
    // service at the run's end has arrived but is not counted yet.
    let (arrived, calls) = (total(&authsvc.arrivals), total(&auth.attempts));
    assert!(
        arrived >= calls && arrived <= calls + 1,
        "{arrived} vs {calls}"
    );
}
