//! Client connections at an LB (`[lb.connections]`, `[client.connections]`):
//! keep-alive holding `maxconn` slots, the law of open connections, closing
//! on a timeout, and a pause's reset with reconnect backoff.

use stormbreak_policy::Nanos;
use stormbreak_sim::Scenario;
use stormbreak_sim::record::{Cause, Recording};

fn run(text: &str) -> Recording {
    crate::common::run_audited(text, None, Nanos::from_secs(7))
}

/// One LB node in front of a fast service; `instances` processes sending
/// `rate` in all.
fn scenario(maxconn: u32, keepalive: &str, instances: u32, rate: &str, extra: &str) -> String {
    format!(
        r#"
[scenario]
name = "conn"
duration = "600s"
interval = "10s"
[[lb]]
name = "edge"
nodes = 2
flows_per_node = 100000
connections = {{ maxconn = {maxconn}, keepalive_timeout = "{keepalive}" }}
[[service]]
name = "api"
replicas = 2
app = {{ workers = 50, service_time = {{ dist = "exponential", mean = "5ms" }} }}
[[route]]
name = "r"
path = ["edge", "api"]
[[client]]
name = "users"
route = "r"
rate = "{rate}"
timeout = "1s"
connections = {{ instances = {instances} }}
{extra}
"#
    )
}

fn mean_after(v: &[f64], from: usize) -> f64 {
    v[from..].iter().sum::<f64>() / (v.len() - from) as f64
}

fn edge(rec: &Recording) -> &stormbreak_sim::record::ComponentSeries {
    rec.components.iter().find(|c| c.name == "edge").unwrap()
}

/// A process has a connection open iff its last request ended less than
/// the idle timeout τ ago (or one is in flight). With Poisson requests at
/// r per process, P = 1 − e^(−rτ): N (1 − e^(−rτ)) connections open in all.
#[test]
fn open_connections_follow_the_keep_alive_law() {
    for (keepalive, tau) in [("50s", 50.0), ("5s", 5.0), ("1s", 1.0)] {
        let rec = run(&scenario(1_000_000, keepalive, 1000, "100/s", ""));
        let open = mean_after(&edge(&rec).connections, 12);
        let r: f64 = 100.0 / 1000.0;
        let want = 1000.0 * (1.0 - (-r * tau).exp());
        assert!(
            (open - want).abs() < 0.05 * want + 3.0,
            "keepalive {keepalive}: {open:.1} open, law says {want:.1}"
        );
    }
}

/// The client's own idle timeout closes first when it is the shorter.
#[test]
fn the_sooner_of_the_two_idle_timeouts_closes_a_connection() {
    let text = scenario(1_000_000, "50s", 1000, "100/s", "").replace(
        "connections = { instances = 1000 }",
        "connections = { instances = 1000, idle_timeout = \"5s\" }",
    );
    let open = mean_after(&edge(&run(&text)).connections, 12);
    let want = 1000.0 * (1.0 - (-0.5f64).exp());
    assert!((open - want).abs() < 0.05 * want + 3.0, "{open} vs {want}");
}

/// Idle keep-alive connections fill `maxconn` while almost no request is in
/// flight: 1 000 processes keep ~993 connections open against 2 × 300.
#[test]
fn idle_keep_alive_connections_exhaust_maxconn_at_low_concurrency() {
    let rec = run(&scenario(300, "50s", 1000, "100/s", ""));
    let route = rec.route("r").unwrap();
    let refused: u64 = route
        .errors
        .iter()
        .map(|e| e[Cause::FlowsExhausted as usize])
        .sum();
    let attempts: u64 = route.attempts.iter().sum();
    let e = edge(&rec);
    let flows = mean_after(&e.in_flight, 12);
    assert!(flows < 2.0, "requests in flight {flows}");
    assert_eq!(mean_after(&e.connections, 12), 600.0);
    // Processes without a connection (~40% of 1 000) get refused when
    // they ask; those holding one are served.
    let share = refused as f64 / attempts as f64;
    assert!((0.25..0.55).contains(&share), "refused share {share}");
    // Without keep-alive the same load never comes near the limit.
    let oneshot = run(&scenario(300, "50s", 1000, "100/s", "")
        .replace("connections = { instances = 1000 }\n", ""));
    let refused: u64 = oneshot
        .route("r")
        .unwrap()
        .errors
        .iter()
        .map(|e| e[Cause::FlowsExhausted as usize])
        .sum();
    assert_eq!(refused, 0);
}

/// A client that times out closes its connection; the LB keeps the slot
/// until the slow request it forwarded ends, and the retry opens a new one.
#[test]
fn a_timed_out_request_keeps_its_slot_until_the_server_answers() {
    // 5 s service against a 1 s timeout; one process, one request at a time
    // (1/s): each request holds its closing connection for 5 s.
    let text = scenario(1_000_000, "50s", 1, "1/s", "").replace(
        "service_time = { dist = \"exponential\", mean = \"5ms\" }",
        "service_time = { dist = \"constant\", value = \"5s\" }",
    );
    assert!(text.contains("value = \"5s\""));
    let rec = run(&text);
    let e = edge(&rec);
    // About 5 requests in flight, each on its own (closing) connection,
    // and the process's own connection, which it dropped at its timeout,
    // is not kept: connections open ≈ flows in flight.
    let conns = mean_after(&e.connections, 12);
    let flows = mean_after(&e.in_flight, 12);
    assert!((flows - 5.0).abs() < 1.5, "{flows}");
    assert!(
        (conns - flows).abs() < 0.6,
        "conns {conns} vs flows {flows}"
    );
}

/// A pause resets every connection; processes with a gRPC-style reconnect
/// backoff fail their requests at once for about a second after the
/// restart instead of all reconnecting together.
#[test]
fn a_pause_resets_connections_and_clients_reconnect_with_their_backoff() {
    let actions = r#"
[[action]]
at = "300s"
do = "pause_nodes"
lb = "edge"
nodes = 2
for = "10s"
"#;
    let plain = scenario(1_000_000, "50s", 1000, "100/s", actions);
    let rec = run(&plain);
    let e = edge(&rec);
    // Interval 29 ends at 300 s, just after the pause's reset.
    assert_eq!(e.connections[29], 0.0, "{:?}", &e.connections[25..35]);
    assert!(e.connections[28] > 900.0);
    let unavailable = |rec: &Recording, a: usize, b: usize| -> u64 {
        rec.route("r").unwrap().errors[a..b]
            .iter()
            .map(|e| e[Cause::Unavailable as usize])
            .sum()
    };
    // Without a backoff, the requests during the pause fail (no running
    // node) and every request after it is served.
    assert!(unavailable(&rec, 30, 31) > 500);
    assert_eq!(unavailable(&rec, 32, 60), 0);
    let backoff = plain.replace(
        "connections = { instances = 1000 }",
        "connections = { instances = 1000, reconnect_backoff = { kind = \"exponential\", base = \"20s\", multiplier = 1.6, max = \"120s\", jitter = \"proportional\" } }",
    );
    let rec = run(&backoff);
    // Processes reset at 300 s, or refused while the nodes were paused,
    // wait ~20 s (±20%) before connecting again: their requests fail at
    // once until about 330 s, and the LB sees none of them.
    assert!(
        unavailable(&rec, 31, 32) > 500,
        "{}",
        unavailable(&rec, 31, 32)
    );
    assert_eq!(unavailable(&rec, 36, 60), 0);
    let e = edge(&rec);
    let route = rec.route("r").unwrap();
    let lb_arrivals: u64 = e.arrivals[31..32].iter().sum();
    let attempts: u64 = route.attempts[31..32].iter().sum();
    assert!(lb_arrivals < attempts, "{lb_arrivals} of {attempts}");
}

#[test]
fn connection_fields_are_checked_with_their_position() {
    let no_lb_conns = scenario(10, "50s", 10, "1/s", "").replace(
        "connections = { maxconn = 10, keepalive_timeout = \"50s\" }\n",
        "",
    );
    let err = Scenario::parse("c.toml", &no_lb_conns)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "connections needs its route's first hop to be an [[lb]] with a connections table"
        ),
        "{err}"
    );
    assert!(err.starts_with("c.toml:22:"), "{err}");
    let zero = scenario(10, "50s", 0, "1/s", "");
    let err = Scenario::parse("c.toml", &zero).unwrap_err().to_string();
    assert!(err.contains("connections.instances must be ≥ 1"), "{err}");
    let maxconn = scenario(0, "50s", 1, "1/s", "");
    let err = Scenario::parse("c.toml", &maxconn).unwrap_err().to_string();
    assert!(err.contains("connections.maxconn must be ≥ 1"), "{err}");
}

/// `scenarios/keepalive-maxconn.toml`: the keep-alive law at 8 000
/// processes, a `maxconn` cut below the idle connections, and a pause.
#[test]
fn the_keepalive_scenario_shows_idle_connections_exhausting_maxconn() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/keepalive-maxconn.toml"
    ))
    .unwrap();
    let rec = run(&text);
    let e = edge(&rec);
    let law = 8000.0 * (1.0 - (-50.0f64 / 20.0).exp());
    let before = e.connections[60..119].iter().sum::<f64>() / 59.0;
    assert!(
        (before - law).abs() < 0.03 * law,
        "{before} open, law {law}"
    );
    let refused = |a: usize, b: usize| -> u64 {
        rec.route("r").unwrap().errors[a..b]
            .iter()
            .map(|e| e[Cause::FlowsExhausted as usize])
            .sum()
    };
    assert_eq!(refused(0, 119), 0);
    assert!(
        refused(121, 179) > 10_000,
        "the cut refused {}",
        refused(121, 179)
    );
    assert!(e.connections[150] <= 6000.0);
    assert!(e.in_flight[150] < 10.0, "{}", e.in_flight[150]);
    assert_eq!(refused(190, 360), 0);
    assert_eq!(e.connections[239], 0.0, "the pause left connections");
    assert!(e.connections[300] > 0.95 * law);
}
