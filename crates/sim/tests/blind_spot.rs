//! The blind spot of 2026-08-17, emerging in the simulator: each pod's
//! sidecar admits 8 requests at a time while its app has 16 workers, so a
//! saturated sidecar caps app CPU at 50%. An HPA on app CPU (target 70%)
//! sees an under-used app and never adds pods — it even removes one —
//! while requests are refused at the sidecar. The same HPA on sidecar
//! saturation scales out and the errors stop.

use stormbreak_sim::Scenario;
use stormbreak_sim::engine::{Engine, RunOptions};
use stormbreak_sim::record::Recording;

fn scenario(metric: &str, target: f64) -> String {
    format!(
        r#"
[scenario]
name = "blind-spot"
duration = "15m"
interval = "10s"

[[service]]
name = "svc"
replicas = 4
sidecar = {{ limit = 8, queue = 8, queue_timeout = "50ms" }}
app = {{ workers = 16, service_time = {{ dist = "exponential", mean = "10ms" }} }}
autoscaler = {{ metric = "{metric}", target = {target}, min = 2, max = 20, pod_start = "30s" }}

[[route]]
name = "r"
path = ["svc"]

[[client]]
name = "users"
route = "r"
rate = "2k/s"
timeout = "1s"

[[client.step]]
at = "2m"
rate = "4k/s"
"#
    )
}

fn run(text: &str) -> Recording {
    let sc = Scenario::parse("blind.toml", text).expect("valid");
    Engine::new(&sc, RunOptions::default())
        .run()
        .expect("the run stays within its bounds")
}

/// Error rate over the last five minutes.
fn late_error_rate(rec: &Recording) -> f64 {
    let r = rec.route("r").unwrap();
    let n = r.attempts.len();
    let (mut failed, mut total) = (0, 0);
    for i in n - 30..n {
        failed += r.failed(i);
        total += r.failed(i) + r.successes[i];
    }
    failed as f64 / total as f64
}

#[test]
fn app_cpu_autoscaler_is_blind_to_a_saturated_sidecar() {
    let rec = run(&scenario("app_cpu", 0.7));
    let svc = rec.component("svc").unwrap();
    let max_replicas = svc.replicas.iter().cloned().fold(0.0, f64::max);
    assert!(
        max_replicas <= 4.0,
        "app-CPU HPA scaled out to {max_replicas}"
    );
    let late_util = svc.app_utilisation[svc.app_utilisation.len() - 1];
    assert!(
        late_util < 0.7,
        "app CPU {late_util} should stay under target"
    );
    let err = late_error_rate(&rec);
    assert!(
        err > 0.15,
        "requests should keep failing at the sidecar, got {err}"
    );
}

#[test]
fn sidecar_saturation_autoscaler_scales_out_and_errors_stop() {
    let rec = run(&scenario("sidecar_saturation", 0.8));
    let svc = rec.component("svc").unwrap();
    let last = *svc.replicas.last().unwrap();
    assert!(last >= 7.0, "expected scale-out to ≥ 7 pods, got {last}");
    let err = late_error_rate(&rec);
    assert!(err < 0.01, "errors should stop once scaled out, got {err}");
}
