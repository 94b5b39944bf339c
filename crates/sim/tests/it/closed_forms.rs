//! The engine against queueing theory: M/M/1, M/M/c (Erlang C) and Little's
//! law. Each run is long enough that the sample mean's standard error is well
//! under the 2% tolerance (ρ ≤ 0.8 with ~10⁶ customers).

use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::record::Recording;

fn run(text: &str, seed: u64) -> Recording {
    let sc = Scenario::parse("test.toml", text).expect("valid scenario");
    Engine::new(
        &sc,
        RunOptions {
            seed: Some(seed),
            scale: 1.0,
        },
    )
    .run()
    .expect("the run stays within its bounds")
}

fn mmc(workers: u32, rate_per_s: f64, duration: &str) -> String {
    format!(
        r#"
[scenario]
name = "mmc"
duration = "{duration}"
interval = "10s"
[[service]]
name = "backend"
replicas = 1
app = {{ workers = {workers}, service_time = {{ dist = "exponential", mean = "1ms" }} }}
[[route]]
name = "r"
path = ["backend"]
[[client]]
name = "users"
route = "r"
rate = {rate_per_s}
timeout = "1h"
"#
    )
}

/// Mean sojourn (wait + service) in ms over all intervals, weighted by count.
fn mean_latency_ms(rec: &Recording) -> f64 {
    let r = rec.route("r").unwrap();
    let (mut sum, mut n) = (0.0, 0.0);
    for (m, c) in r.latency_mean_ms.iter().zip(&r.successes) {
        sum += m * *c as f64;
        n += *c as f64;
    }
    sum / n
}

/// Erlang C: probability an arrival waits in M/M/c with offered load a = λ/μ.
fn erlang_c(c: u32, a: f64) -> f64 {
    let rho = a / c as f64;
    let mut term = 1.0; // a^k / k!
    let mut sum = 0.0;
    for k in 0..c {
        if k > 0 {
            term *= a / k as f64;
        }
        sum += term;
    }
    let last = term * a / c as f64; // a^c / c!
    let top = last / (1.0 - rho);
    top / (sum + top)
}

#[test]
fn erlang_c_matches_its_published_values() {
    // Textbook check: c = 2, a = 1 (ρ = 0.5) gives C = 1/3.
    assert!((erlang_c(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
    // c = 1 reduces to ρ.
    assert!((erlang_c(1, 0.7) - 0.7).abs() < 1e-12);
}

#[test]
fn mm1_mean_sojourn_matches_formula() {
    // λ = 500/s, μ = 1000/s: W = 1/(μ − λ) = 2 ms; ρ = 0.5.
    let rec = run(&mmc(1, 500.0, "2000s"), 7);
    let w = mean_latency_ms(&rec);
    assert!(
        (w - 2.0).abs() / 2.0 < 0.02,
        "W = {w} ms, expected 2 ms ± 2%"
    );
    let svc = rec.component("backend").unwrap();
    let util: f64 = svc.app_utilisation.iter().sum::<f64>() / svc.app_utilisation.len() as f64;
    assert!(
        (util - 0.5).abs() / 0.5 < 0.02,
        "utilisation {util}, expected 0.5"
    );
}

#[test]
fn mmc_mean_wait_matches_erlang_c() {
    // c = 10, μ = 1000/s, λ = 8000/s: a = 8, ρ = 0.8.
    // Wq = C(c, a) / (cμ − λ); W = Wq + 1/μ.
    let (c, lambda, mu) = (10, 8000.0, 1000.0);
    let wq_s = erlang_c(c, lambda / mu) / (c as f64 * mu - lambda);
    let expected_wq_ms = wq_s * 1e3;
    let rec = run(&mmc(c, lambda, "800s"), 11);
    let wq = mean_latency_ms(&rec) - 1.0;
    assert!(
        (wq - expected_wq_ms).abs() / expected_wq_ms < 0.02,
        "Wq = {wq} ms, Erlang C says {expected_wq_ms} ms"
    );
    let svc = rec.component("backend").unwrap();
    let util: f64 = svc.app_utilisation.iter().sum::<f64>() / svc.app_utilisation.len() as f64;
    assert!(
        (util - 0.8).abs() / 0.8 < 0.02,
        "utilisation {util}, expected 0.8"
    );
}

#[test]
fn littles_law_holds_on_every_component() {
    // An LB in front of a sidecar-limited service: flows are held while the
    // service works, so each component has its own L, λ and W.
    let text = r#"
[scenario]
name = "little"
duration = "300s"
[[lb]]
name = "edge"
nodes = 2
flows_per_node = 1000
[[service]]
name = "backend"
replicas = 2
sidecar = { limit = 8, queue = 50, queue_timeout = "20ms" }
app = { workers = 10, service_time = { dist = "lognormal", median = "2ms", sigma = 0.6 } }
[[route]]
name = "r"
path = ["edge", "backend"]
[[client]]
name = "users"
route = "r"
rate = "6k/s"
timeout = "1h"
"#;
    let rec = run(text, 3);
    for c in &rec.components {
        let l = c.little;
        let lw = l.throughput_per_s * l.mean_sojourn_s;
        assert!(l.mean_in_system > 1.0, "{}: too idle to test", c.name);
        assert!(
            (l.mean_in_system - lw).abs() / l.mean_in_system < 0.01,
            "{}: L = {}, λW = {lw}",
            c.name,
            l.mean_in_system
        );
    }
}

#[test]
fn same_seed_same_recording_other_seed_differs() {
    let text = mmc(4, 3000.0, "30s");
    let a = serde_json::to_string(&run(&text, 5)).unwrap();
    let b = serde_json::to_string(&run(&text, 5)).unwrap();
    let c = serde_json::to_string(&run(&text, 6)).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
}
