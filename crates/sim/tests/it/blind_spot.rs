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

/// `[service.autoscaler] behavior` in virtual time: the simulated HPA's
/// replica series follows the policy crate's [`StepResponse`] of the same
/// behaviour, sync by sync.
mod behavior {
    use super::run;
    use stormbreak_policy::Nanos;
    use stormbreak_policy::autoscale::{Behavior, StepResponse};
    use stormbreak_sim::record::Recording;

    const FROM: u32 = 2;
    const MAX: u32 = 10;
    const SYNC_S: u64 = 15;
    const INTERVAL_S: u64 = 5;
    /// The load steps up at 61 s, between the syncs at 60 s and 75 s; the
    /// sync at 75 s is the first to see it (14 of its 15 s overloaded).
    const FIRST_SYNC_S: u64 = 75;

    /// One-worker pods of 10/s each; nothing arrives until 61 s (CPU 0,
    /// the HPA holds `min`), then 300/s, three times what `max` pods serve,
    /// so from its first sync on every pod is busy and the recommendation
    /// (≥ 10 × the current replicas at a 0.1 target) stays above `max`:
    /// the response is that of a step from `min` to `max`. `pod_start = 0`
    /// makes the recorded ready pods the replicas the HPA set.
    fn scenario(behavior: &str) -> String {
        format!(
            r#"
[scenario]
name = "hpa-behavior"
duration = "10m"
interval = "{INTERVAL_S}s"

[[service]]
name = "svc"
replicas = {FROM}
app = {{ workers = 1, queue = 10, service_time = {{ dist = "exponential", mean = "100ms" }} }}
autoscaler = {{ metric = "app_cpu", target = 0.1, min = {FROM}, max = {MAX}, pod_start = "0"{behavior} }}

[[route]]
name = "r"
path = ["svc"]

[[client]]
name = "users"
route = "r"
rate = 0
timeout = "10s"

[[client.step]]
at = "61s"
rate = "300/s"
"#
        )
    }

    /// Ready pods 5 s after each sync from the first one after the step
    /// (the gauge of interval i is read at (i + 1) × 5 s, never on a sync).
    fn after_each_sync(rec: &Recording) -> Vec<u32> {
        let replicas = &rec.component("svc").unwrap().replicas;
        let index = |t_s: u64| (t_s / INTERVAL_S - 1) as usize;
        let before = &replicas[..index(FIRST_SYNC_S)];
        assert!(
            before.iter().all(|&r| r == f64::from(FROM)),
            "scaled before the first sync that saw the step: {before:?}"
        );
        (FIRST_SYNC_S + INTERVAL_S..rec.duration.as_nanos() / 1_000_000_000)
            .step_by(SYNC_S as usize)
            .map(|t| replicas[index(t)] as u32)
            .collect()
    }

    fn predicted(behavior: &Behavior, syncs: usize) -> Vec<u32> {
        StepResponse::new(behavior, Nanos::from_secs(SYNC_S), FROM, MAX)
            .take(syncs)
            .map(|(_, r)| r)
            .collect()
    }

    /// One pod per minute: 3 at the first sync, then one more every fourth
    /// sync (each minute's look-back holds one scale event), 10 at 420 s.
    #[test]
    fn a_pods_policy_paces_the_scale_up_as_the_step_response_predicts() {
        let text = scenario(
            r#", behavior = { scale_up = { policies = [{ type = "Pods", value = 1, period = "60s" }] } }"#,
        );
        let rec = run(&text);
        let got = after_each_sync(&rec);
        let sc = stormbreak_sim::Scenario::parse("b.toml", &text).unwrap();
        let b = sc.services[0]
            .autoscaler
            .as_ref()
            .unwrap()
            .behavior
            .clone()
            .unwrap();
        let want = predicted(&b, got.len());
        assert_eq!(got, want);
        // The prediction itself: the slow pace, reaching max at 420 s.
        assert_eq!(&want[..5], [3, 3, 3, 3, 4]);
        assert_eq!(want.iter().position(|&r| r == MAX), Some(28));
    }

    /// Without `behavior`, Kubernetes' defaults: max(100 %, 4 pods) per
    /// 15 s, so 2 → 6 → 10 in two syncs; the run above would fail if its
    /// behaviour were ignored.
    #[test]
    fn without_behavior_the_scale_up_is_kubernetes_default() {
        let rec = run(&scenario(""));
        let got = after_each_sync(&rec);
        let want = predicted(&Behavior::default(), got.len());
        assert_eq!(got, want);
        assert_eq!(&want[..3], [6, 10, 10]);
    }
}
