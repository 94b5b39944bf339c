//! Regression tests for the hostile-input classes of issue 10, each through
//! the real binary bounded in memory (~2 GB of address space) and wall time
//! (a 20 s hang guard; see `fuzz_cases/bounded.rs`).
//!
//! Each asserts what must hold for any input: a clear error or a bounded
//! run, never a panic, an abort or a hang. Where the input is plainly wrong
//! (a dangling reference, a cycle, an out-of-range field) the test also
//! requires a refusal that names the scenario file and says what is wrong.
//! Where it is legal but extreme (huge counts, tiny or huge rates, a 1 ns
//! clock) the binary may either run it within the bounds or refuse it with
//! an error naming the file: both are acceptable, dying is not.
//!
//! Each class was fixed by the scenario caps (`stormbreak_sim::scenario`'s
//! `MAX_*`) or the engine's run bounds (`stormbreak_sim::engine::Limits`).

use crate::bounded;

use std::path::Path;

use bounded::{HANG_GUARD, Run, TempDir, Verdict, run_bounded};

/// Runs `stormbreak simulate FILE --out DIR --quiet EXTRA…` on `scenario`
/// written to a fresh directory; returns the run and the file's path.
fn simulate(label: &str, scenario: &str, extra: &[&str]) -> (Run, String) {
    let dir = TempDir::new(&format!("hostile-{label}"));
    let file = dir.path().join(format!("{label}.toml"));
    std::fs::write(&file, scenario).unwrap();
    let run = simulate_file(dir.path(), &file, extra);
    (run, file.display().to_string())
}

fn simulate_file(work: &Path, file: &Path, extra: &[&str]) -> Run {
    let out = work.join("out");
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "simulate".as_ref(),
        file.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
        "--quiet".as_ref(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    run_bounded(&args, work, HANG_GUARD)
}

/// The input is wrong: the binary must refuse it cleanly, name the file and
/// say `expect` (what is wrong).
fn assert_refused(label: &str, scenario: &str, extra: &[&str], expect: &str) {
    let (run, file) = simulate(label, scenario, extra);
    match run.judge(Path::new(&file)) {
        Ok(Verdict::Refused) => assert!(
            run.stderr.contains(expect),
            "{label}: refused, but without {expect:?}:\n{}",
            run.stderr_tail(10)
        ),
        Ok(Verdict::Ran) => panic!(
            "{label}: an invalid scenario ran (exit 0) instead of being refused:\n{}",
            run.stdout
        ),
        Err(why) => panic!("{label}: {why}\nstderr:\n{}", run.stderr_tail(10)),
    }
}

/// Legal but extreme: a run within the bounds, or a clean refusal naming
/// the file.
fn assert_bounded(label: &str, scenario: &str, extra: &[&str]) {
    let (run, file) = simulate(label, scenario, extra);
    if let Err(why) = run.judge(Path::new(&file)) {
        panic!("{label}: {why}\nstderr:\n{}", run.stderr_tail(10));
    }
}

/// One service fed by one population: the frame most cases modify.
fn one_service(duration: &str, service: &str, client: &str) -> String {
    format!(
        r#"[scenario]
name = "hostile"
duration = "{duration}"

[[service]]
name = "svc"
{service}

[[route]]
name = "r"
path = ["svc"]

[[client]]
name = "users"
route = "r"
{client}
"#
    )
}

const APP: &str = r#"replicas = 2
app = { workers = 4, queue = 100, service_time = { dist = "exponential", mean = "2ms" } }"#;
const USERS: &str = r#"rate = "200/s"
timeout = "1s""#;

// ------------------------------------------------- (1) dependency cycles

/// Two regions of gateways; `{deps}` sets their dependencies.
fn gateways(deps_a: &str, deps_b: &str) -> String {
    format!(
        r#"[scenario]
name = "cycle"
duration = "10s"

[[gateway]]
name = "gw-a"
timeout = "1s"
{deps_a}

[[gateway]]
name = "gw-b"
timeout = "1s"
{deps_b}

[[service]]
name = "svc"
{APP}

[[route]]
name = "via-a"
path = ["gw-a", "svc"]

[[route]]
name = "via-b"
path = ["gw-b", "svc"]

[[client]]
name = "users"
route = "via-a"
{USERS}
"#
    )
}

#[test]
fn c1_a_gateway_whose_dependency_passes_through_itself_is_refused() {
    // gw-a calls via-a before forwarding; via-a passes through gw-a: one
    // request would spawn dependency calls without end.
    assert_refused(
        "self-dependency",
        &gateways(r#"dependency = "via-a""#, ""),
        &[],
        "dependency cycle",
    );
}

#[test]
fn c1_two_gateways_depending_on_each_other_are_refused() {
    assert_refused(
        "mutual-dependency",
        &gateways(r#"dependency = "via-b""#, r#"dependency = "via-a""#),
        &[],
        "dependency cycle",
    );
}

// ---------------------------------------------------------- (2) failover

/// Two LBs, a population with a failover route, and `{failover}`.
fn failover(failover: &str) -> String {
    format!(
        r#"[scenario]
name = "failover"
duration = "20s"

[[lb]]
name = "east"
nodes = 2
flows_per_node = 100

[[lb]]
name = "west"
nodes = 2
flows_per_node = 100

[[service]]
name = "svc"
{APP}

[[route]]
name = "r-east"
path = ["east", "svc"]

[[route]]
name = "r-west"
path = ["west", "svc"]

[[client]]
name = "users"
route = "r-east"
failover_route = "r-west"
{USERS}

[[failover]]
{failover}
"#
    )
}

#[test]
fn c2_failover_with_an_unknown_client_is_refused() {
    assert_refused(
        "failover-unknown-client",
        &failover(
            r#"clients = ["ghosts"]
primary = "east"
secondary = "west""#,
        ),
        &[],
        "unknown client",
    );
}

#[test]
fn c2_failover_with_an_unknown_lb_is_refused() {
    assert_refused(
        "failover-unknown-lb",
        &failover(
            r#"clients = ["users"]
primary = "east"
secondary = "north""#,
        ),
        &[],
        "unknown lb",
    );
}

#[test]
fn c2_failover_with_a_service_as_primary_is_refused() {
    assert_refused(
        "failover-service-primary",
        &failover(
            r#"clients = ["users"]
primary = "svc"
secondary = "west""#,
        ),
        &[],
        "is not an lb",
    );
}

#[test]
fn c2_failover_deadband_outside_0_1_is_refused() {
    assert_refused(
        "failover-deadband",
        &failover(
            r#"clients = ["users"]
primary = "east"
secondary = "west"
policy = { deadband = 5 }"#,
        ),
        &[],
        "deadband",
    );
}

// ------------------------------------------------------- (3) huge counts

fn huge_replicas(n: u64) -> String {
    one_service(
        "10s",
        &format!(
            r#"replicas = {n}
app = {{ workers = 4, queue = 100, service_time = {{ dist = "exponential", mean = "2ms" }} }}"#
        ),
        USERS,
    )
}

fn huge_lb_nodes(n: u64) -> String {
    format!(
        r#"[scenario]
name = "lb-nodes"
duration = "10s"

[[lb]]
name = "edge"
nodes = {n}
flows_per_node = 10

[[service]]
name = "svc"
{APP}

[[route]]
name = "r"
path = ["edge", "svc"]

[[client]]
name = "users"
route = "r"
{USERS}
"#
    )
}

fn huge_autoscaler_max(n: u64) -> String {
    one_service(
        "60s",
        &format!(
            r#"replicas = 1
app = {{ workers = 1, queue = 10, service_time = {{ dist = "constant", value = "10ms" }} }}
autoscaler = {{ metric = "app_cpu", target = 0.1, min = 1, max = {n}, pod_start = "1s" }}"#
        ),
        // 10× what one pod serves: the HPA keeps scaling up towards `max`.
        r#"rate = "1k/s"
timeout = "1s""#,
    )
}

#[test]
fn c3_replicas_2147483648() {
    assert_bounded("replicas-2p31", &huge_replicas(2_147_483_648), &[]);
}

#[test]
fn c3_replicas_4294967295() {
    assert_bounded("replicas-u32max", &huge_replicas(4_294_967_295), &[]);
}

#[test]
fn c3_replicas_100000000() {
    assert_bounded("replicas-1e8", &huge_replicas(100_000_000), &[]);
}

#[test]
fn c3_lb_nodes_2147483648() {
    assert_bounded("lb-nodes-2p31", &huge_lb_nodes(2_147_483_648), &[]);
}

#[test]
fn c3_lb_nodes_4294967295() {
    assert_bounded("lb-nodes-u32max", &huge_lb_nodes(4_294_967_295), &[]);
}

#[test]
fn c3_autoscaler_max_2147483648() {
    assert_bounded("hpa-max-2p31", &huge_autoscaler_max(2_147_483_648), &[]);
}

#[test]
fn c3_autoscaler_max_4294967295() {
    assert_bounded("hpa-max-u32max", &huge_autoscaler_max(4_294_967_295), &[]);
}

// ------------------------------------------------------- (4) tiny rates

#[test]
fn c4_a_rate_of_1e_minus_12_per_second() {
    assert_bounded(
        "rate-1e-12",
        &one_service(
            "60s",
            APP,
            r#"rate = "1e-12/s"
timeout = "1s""#,
        ),
        &[],
    );
}

#[test]
fn c4_scale_1e_minus_15() {
    assert_bounded(
        "scale-1e-15",
        &one_service("60s", APP, USERS),
        &["--scale", "1e-15"],
    );
}

#[test]
fn c4_set_rate_to_1e_minus_300() {
    let scenario = one_service("60s", APP, USERS)
        + r#"
[[action]]
at = "10s"
do = "set_rate"
client = "users"
rate = 1e-300
"#;
    assert_bounded("set-rate-1e-300", &scenario, &[]);
}

// ------------------------------------- (5) clocks, queues and amplifiers

#[test]
fn c5_a_recording_interval_of_1ns() {
    let scenario = one_service("60s", APP, USERS).replace(
        "duration = \"60s\"",
        "duration = \"60s\"\ninterval = \"1ns\"",
    );
    assert_bounded("interval-1ns", &scenario, &[]);
}

#[test]
fn c5_an_unbounded_app_queue_under_10x_overload_for_an_hour() {
    // 100/s of capacity (one worker, 10 ms), 1 000/s offered, no queue
    // bound: the queue grows by 900 requests a second, 3.2 M by the end.
    assert_bounded(
        "unbounded-queue",
        &one_service(
            "1h",
            r#"replicas = 1
app = { workers = 1, service_time = { dist = "constant", value = "10ms" } }"#,
            r#"rate = "1k/s"
timeout = "1s""#,
        ),
        &[],
    );
}

#[test]
fn c5_a_job_queue_with_one_worker_at_1m_per_second() {
    // Jobs wait in FIFO order and none is dropped: one worker against a
    // million arrivals a second.
    assert_bounded(
        "job-queue-1m",
        &one_service(
            "60s",
            APP,
            r#"rate = "1M/s"
workers = 1
timeout = "1s""#,
        ),
        &[],
    );
}

#[test]
fn c5_fanout_1000_against_a_sidecar_without_queue() {
    // Every refused attempt spawns a thousand more (up to a thousand in
    // flight per operation), and a sidecar with no queue refuses at once.
    assert_bounded(
        "fanout-1000",
        &one_service(
            "60s",
            r#"replicas = 1
sidecar = { limit = 1, queue = 0 }
app = { workers = 1, service_time = { dist = "constant", value = "10ms" } }"#,
            r#"rate = "100/s"
timeout = "1s"
fanout = 1000
give_up_after = "10s""#,
        ),
        &[],
    );
}

#[test]
fn c5_dev_zero_as_a_scenario_is_refused() {
    // An endless file: reading it whole would exhaust memory. (Today this
    // passes because std's read_to_string reserves fallibly and reports
    // "out of memory" once the 2 GB bound is reached; without the bound it
    // would first take all of the machine's memory.)
    let dir = TempDir::new("hostile-dev-zero");
    let run = simulate_file(dir.path(), Path::new("/dev/zero"), &[]);
    match run.judge(Path::new("/dev/zero")) {
        Ok(Verdict::Refused) => {}
        Ok(Verdict::Ran) => panic!("/dev/zero ran as a scenario"),
        Err(why) => panic!("/dev/zero: {why}\nstderr:\n{}", run.stderr_tail(10)),
    }
}

// ------------------------------------------------------ (6) huge rates

#[test]
fn c6_a_rate_of_1e12_per_second() {
    assert_bounded(
        "rate-1e12",
        &one_service(
            "60s",
            APP,
            r#"rate = "1e12/s"
timeout = "1s""#,
        ),
        &[],
    );
}

#[test]
fn c6_a_rate_of_1_8e308_per_second_is_refused() {
    // 1.8e308 is past f64::MAX: not a number of requests at all.
    assert_refused(
        "rate-1.8e308",
        &one_service(
            "60s",
            APP,
            r#"rate = "1.8e308/s"
timeout = "1s""#,
        ),
        &[],
        "rate",
    );
}

#[test]
fn c6_zero_backoff_retries_with_a_billion_attempts() {
    // The LB answers 503 at once from t = 0 and the clients retry at once,
    // up to a billion times: virtual time cannot advance on its own.
    let scenario = format!(
        r#"[scenario]
name = "retry-loop"
duration = "60s"

[[lb]]
name = "edge"
nodes = 1
flows_per_node = 100

[[service]]
name = "svc"
{APP}

[[route]]
name = "r"
path = ["edge", "svc"]

[[client]]
name = "users"
route = "r"
rate = "10/s"
timeout = "1s"
retry = {{ max_attempts = 1000000000, max_attempts_cap = 1000000000, backoff = {{ kind = "constant", base = "0" }} }}

[[action]]
at = "0"
do = "shed"
lb = "edge"
route = "r"
status = 503
"#
    );
    assert_bounded("zero-backoff-1e9", &scenario, &[]);
}

#[test]
fn c6_fanout_delay_of_1ns() {
    // Spawned attempts follow a failure after 1 ns: each generation of the
    // fan-out moves the clock by almost nothing.
    assert_bounded(
        "fanout-delay-1ns",
        &one_service(
            "60s",
            r#"replicas = 1
sidecar = { limit = 1, queue = 0 }
app = { workers = 1, service_time = { dist = "constant", value = "10ms" } }"#,
            r#"rate = "100/s"
timeout = "1s"
fanout = 3
fanout_delay = "1ns"
give_up_after = "10s""#,
        ),
        &[],
    );
}
