//! Open-loop arrivals follow their rate schedule: a non-homogeneous Poisson
//! process whose count over [a, b] has mean ∫λ(t)dt (and variance equal to
//! it), checked to within four standard deviations.

use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};

fn first_attempts(client: &str, duration: &str) -> Vec<u64> {
    let text = format!(
        r#"
[scenario]
name = "arrivals"
duration = "{duration}"
interval = "10s"
[[service]]
name = "svc"
replicas = 1
app = {{ workers = 1000, service_time = {{ dist = "constant", value = "1ms" }} }}
[[route]]
name = "r"
path = ["svc"]
{client}
"#
    );
    let sc = Scenario::parse("arrivals.toml", &text).expect("valid");
    let rec = Engine::new(&sc, RunOptions::default())
        .run()
        .expect("the run stays within its bounds");
    rec.route("r").unwrap().first_attempts.clone()
}

fn within_poisson(count: u64, mean: f64, what: &str) {
    let sd = mean.sqrt();
    assert!(
        (count as f64 - mean).abs() < 4.0 * sd,
        "{what}: {count} arrivals, expected {mean:.0} ± {:.0}",
        4.0 * sd
    );
}

#[test]
fn a_linear_ramp_integrates_to_its_area() {
    // 0 → 2 000/s over 100 s starting at 50 s, then flat: the first 50 s see
    // none, the ramp 100 000, the last 50 s 100 000.
    let v = first_attempts(
        "[[client]]\nname = \"u\"\nroute = \"r\"\nrate = 0\ntimeout = \"1s\"\nstep = [{ at = \"50s\", rate = \"2k/s\", ramp = \"100s\" }]",
        "200s",
    );
    assert_eq!(v[..5].iter().sum::<u64>(), 0);
    within_poisson(v[5..15].iter().sum(), 100_000.0, "ramp");
    within_poisson(v[15..20].iter().sum(), 100_000.0, "after the ramp");
}

#[test]
fn a_diurnal_cycle_peaks_and_troughs_where_it_says() {
    // 1 000/s × (1 + 0.5 cos(2π(t − 15 m)/1 h)) over one hour.
    let v = first_attempts(
        "[[client]]\nname = \"u\"\nroute = \"r\"\nrate = \"1k/s\"\ntimeout = \"1s\"\ndiurnal = { amplitude = 0.5, period = \"1h\", peak_at = \"15m\" }",
        "1h",
    );
    // Whole period: the cosine integrates to zero.
    within_poisson(v.iter().sum(), 3_600_000.0, "one period");
    // The 10 s interval ending at 15 m sits at the peak (≈ 1.5 × 10 000), the
    // one ending at 45 m in the trough (≈ 0.5 × 10 000); the cosine is flat
    // enough there that the interval mean is within 0.1% of those values.
    within_poisson(v[89], 15_000.0, "peak interval");
    within_poisson(v[269], 5_000.0, "trough interval");
}

#[test]
fn set_rate_changes_the_rate_from_then_on() {
    let text = r#"
[scenario]
name = "set-rate"
duration = "100s"
[[service]]
name = "svc"
replicas = 1
app = { workers = 1000, service_time = { dist = "constant", value = "1ms" } }
[[route]]
name = "r"
path = ["svc"]
[[client]]
name = "u"
route = "r"
rate = "1k/s"
timeout = "1s"
[[action]]
at = "50s"
do = "set_rate"
client = "u"
rate = "3k/s"
"#;
    let sc = Scenario::parse("set-rate.toml", text).unwrap();
    let rec = Engine::new(&sc, RunOptions::default())
        .run()
        .expect("the run stays within its bounds");
    let v = &rec.route("r").unwrap().first_attempts;
    within_poisson(v[..5].iter().sum(), 50_000.0, "before");
    within_poisson(v[5..10].iter().sum(), 150_000.0, "after");
    assert_eq!(rec.actions.len(), 1);
}

#[test]
fn an_admit_action_gates_a_sites_share_at_the_lb() {
    let text = r#"
[scenario]
name = "admit"
duration = "90s"
[[lb]]
name = "edge"
nodes = 1
flows_per_node = 10000
[[service]]
name = "svc"
replicas = 1
app = { workers = 1000, service_time = { dist = "constant", value = "1ms" } }
[[route]]
name = "r"
path = ["edge", "svc"]
[[client]]
name = "a"
site = "site-a"
route = "r"
rate = "1k/s"
timeout = "1s"
[[client]]
name = "b"
site = "site-b"
route = "r"
rate = "1k/s"
timeout = "1s"
[[action]]
at = "30s"
do = "admit"
lb = "edge"
route = "r"
site = "site-a"
fraction = 0.25
[[action]]
at = "60s"
do = "admit"
lb = "edge"
route = "r"
site = "site-a"
fraction = 1.0
"#;
    let sc = Scenario::parse("admit.toml", text).unwrap();
    let rec = Engine::new(&sc, RunOptions::default())
        .run()
        .expect("the run stays within its bounds");
    let r = rec.route("r").unwrap();
    let shed = |from: usize, to: usize| -> u64 {
        (from..to)
            .map(|i| r.errors[i][stormbreak_sim::record::Cause::Shed403 as usize])
            .sum()
    };
    assert_eq!(shed(0, 3), 0);
    // Site a sends ~30 000 requests in [30 s, 60 s) and 75% are turned away;
    // site b is untouched.
    within_poisson(shed(3, 6), 22_500.0, "shed from site a");
    assert_eq!(shed(6, 9), 0, "the gate is lifted at 60 s");
    assert_eq!(rec.actions.len(), 2);
}
