//! The recording interval is only the charts' resolution: control loops
//! (HPA sync, failover, staged restore) run on their own clocks, so runs
//! at 5 s, 10 s and 30 s intervals handle the same events in the same
//! order, their counts re-aggregate exactly, and per-path recovery agrees
//! within one interval.

use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::record::Recording;

/// A storm with every control loop in play: a spike on a sidecar-limited
/// service with an app-CPU autoscaler, client retries, a failover
/// controller spilling to a second pool, a 503 shed, then a staged
/// restore site by site with an error guard.
fn scenario(interval: &str) -> String {
    format!(
        r#"
[scenario]
name = "loops"
duration = "30m"
interval = "{interval}"
seed = 7

[[lb]]
name = "edge"
nodes = 2
flows_per_node = 20

[[lb]]
name = "edge2"
nodes = 2
flows_per_node = 60

[[service]]
name = "api"
replicas = 4
sidecar = {{ limit = 8, queue = 8, queue_timeout = "200ms" }}
app = {{ workers = 4, service_time = {{ dist = "exponential", mean = "40ms" }} }}
autoscaler = {{ metric = "app_cpu", target = 0.6, min = 2, max = 12, pod_start = "20s" }}

[[route]]
name = "main"
path = ["edge", "api"]

[[route]]
name = "alt"
path = ["edge2", "api"]

[[client]]
name = "east"
site = "a"
route = "main"
failover_route = "alt"
rate = "150/s"
timeout = "1s"
retry = {{ max_attempts = 3, backoff = {{ kind = "exponential", base = "50ms" }} }}
step = [{{ at = "3m", rate = "900/s" }}, {{ at = "9m", rate = "60/s" }}]

[[client]]
name = "west"
site = "b"
route = "main"
rate = "150/s"
timeout = "1s"
retry = {{ max_attempts = 3, backoff = {{ kind = "exponential", base = "50ms" }} }}
step = [{{ at = "3m", rate = "900/s" }}, {{ at = "9m", rate = "60/s" }}]

[[failover]]
clients = ["east"]
primary = "edge"
secondary = "edge2"
period = "10s"

[[action]]
at = "7m"
do = "shed"
lb = "edge"
route = "main"
status = 503

[[action]]
at = "11m"
do = "ramp"
lb = "edge"
route = "main"
sites = ["a", "b"]
restore = {{ ramp = {{ steps = [0.1, 0.5, 1.0], hold = "1m" }} }}
"#
    )
}

fn run(interval: &str) -> (u64, Recording) {
    let sc = Scenario::parse("loops.toml", &scenario(interval)).unwrap();
    let mut e = Engine::new(&sc, RunOptions::default());
    while e.run_until(e.end()).unwrap() {}
    let digest = e.event_digest();
    (digest, e.finish())
}

/// End of the last interval with any failed first-hop attempt on `route`,
/// in seconds: when the path was last seen failing.
fn last_failure_s(rec: &Recording, route: &str) -> f64 {
    let r = rec.route(route).unwrap();
    let iv = rec.interval.as_nanos() as f64 / 1e9;
    r.errors
        .iter()
        .rposition(|e| e.iter().sum::<u64>() > 0)
        .map_or(0.0, |i| (i + 1) as f64 * iv)
}

#[test]
fn control_loops_ignore_the_recording_interval() {
    let (d5, r5) = run("5s");
    let (d10, r10) = run("10s");
    let (d30, r30) = run("30s");
    assert_eq!(d5, d10, "5 s and 10 s intervals handled different events");
    assert_eq!(d10, d30, "10 s and 30 s intervals handled different events");
    assert_eq!(
        r5.events - r5.routes[0].attempts.len() as u64,
        r10.events - r10.routes[0].attempts.len() as u64
    );

    // The run must exercise the loops it claims to test.
    let api = r30.components.iter().find(|c| c.name == "api").unwrap();
    let peak = api.replicas.iter().cloned().fold(0.0, f64::max);
    assert!(
        peak > 4.0,
        "the autoscaler never scaled up: {:?}",
        api.replicas
    );
    assert!(
        *api.replicas.last().unwrap() < peak,
        "the autoscaler never scaled down"
    );
    let alt: u64 = r30.route("alt").unwrap().attempts.iter().sum();
    assert!(alt > 0, "the failover never spilled");
    assert!(
        r30.actions.iter().any(|a| a.what.contains("complete")),
        "the staged restore never completed: {:?}",
        r30.actions
    );

    // Counts re-aggregate exactly: six 5 s intervals are one 30 s interval.
    for (fine, coarse, k) in [(&r5, &r30, 6), (&r10, &r30, 3), (&r5, &r10, 2)] {
        for (rf, rc) in fine.routes.iter().zip(&coarse.routes) {
            let sum = |v: &[u64]| v.chunks(k).map(|c| c.iter().sum()).collect::<Vec<u64>>();
            assert_eq!(sum(&rf.attempts), rc.attempts, "route {}", rf.name);
            assert_eq!(sum(&rf.successes), rc.successes, "route {}", rf.name);
        }
        let log = |r: &Recording| {
            r.actions
                .iter()
                .map(|a| (a.at, a.what.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(log(fine), log(coarse), "the timeline's log differs");
    }

    // Per-path recovery within one (coarse) interval.
    for route in ["main", "alt"] {
        let (a, b, c) = (
            last_failure_s(&r5, route),
            last_failure_s(&r10, route),
            last_failure_s(&r30, route),
        );
        assert!(a > 0.0, "{route} never failed: the storm did not happen");
        assert!(
            (a - b).abs() <= 10.0 && (b - c).abs() <= 30.0 && (a - c).abs() <= 30.0,
            "{route}: recovered at {a} s, {b} s, {c} s"
        );
    }
}
