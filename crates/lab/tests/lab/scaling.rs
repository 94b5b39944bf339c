//! The autoscaler and the replica controller on real pods: the
//! simulator's HPA decides from the sidecar guards' in-flight gauges, pods
//! start on fresh ports and join the balancer set, pods taken out drain
//! and close. Asserted on counts (pods started, replicas recorded,
//! bounds), never on when.
//!
//! The metric is `sidecar_saturation`: the HPA trusts no CPU sample until
//! a pod has been ready for a whole 15 s metrics window in its first
//! 5 minutes (Kubernetes' CPU initialization period, the policy crate's
//! law, which the simulator follows too), so an `app_cpu` HPA does not act
//! in a run of seconds. The app-CPU reading itself is tested in virtual
//! time (`backend.rs`).

use stormbreak_lab::{Stop, run};

use crate::common::{listening, plan};

const HPA: &str = r#"
[scenario]
name = "hpa"
duration = "5s"
interval = "500ms"
seed = 3

[[service]]
name = "api"
replicas = 1
# 2 slots × 1/50 ms = 40 req/s a pod, asked for 80/s: saturation near 1.
sidecar = { limit = 2, queue = 20, queue_timeout = "1s" }
app = { workers = 2, queue = 20, service_time = { dist = "constant", value = "50ms" } }
autoscaler = { metric = "sidecar_saturation", target = 0.5, min = 1, max = 3, pod_start = "200ms", sync_period = "1s" }

[[route]]
name = "r"
path = ["api"]

[[client]]
name = "users"
route = "r"
rate = "80/s"
timeout = "2s"
"#;

#[test]
fn a_busy_app_scales_up_within_max_and_the_new_pods_serve() {
    let lab = run(&plan(HPA), &Stop::default()).unwrap();
    let c = &lab.recording.components[0];
    assert_eq!(c.replicas[0], 1.0, "{:?}", c.replicas);
    let peak = c.replicas.iter().copied().fold(0.0, f64::max);
    assert!(peak >= 2.0, "the HPA never scaled up: {:?}", c.replicas);
    assert!(peak <= 3.0, "over max: {:?}", c.replicas);
    assert!(
        lab.figures.pods >= 2 && lab.figures.pods <= 3,
        "{:?}",
        lab.figures.pods
    );
    // The limit gauge follows the ready pods (sidecar limit × pods).
    for (l, r) in c.limit.iter().zip(&c.replicas) {
        assert_eq!(*l, 2.0 * r);
    }
    // Every pod the run started listened on two ports of its own (app and
    // sidecar); none is left.
    assert_eq!(lab.figures.sidecars, lab.figures.pods);
    assert_eq!(lab.listened.len() as u32, 2 * lab.figures.pods);
    for a in &lab.listened {
        assert!(!listening(*a), "{a} still accepts after the run");
    }
    // One pod's two slots of 50 ms finish at most 20 in an interval of
    // 500 ms (+2 at its edges); an interval with more was served by the
    // new pods too.
    let ok = &lab.recording.routes[0].successes;
    assert!(
        ok.iter().any(|&n| n > 22),
        "{ok:?}: the new pods never served"
    );
}

#[test]
fn an_idle_service_scales_down_and_its_pods_drain_and_close() {
    let text = HPA
        .replace("replicas = 1", "replicas = 3")
        .replace("rate = \"80/s\"", "rate = \"4/s\"")
        .replace(
            "sync_period = \"1s\" }",
            "sync_period = \"1s\", behavior = { scale_down = { stabilization_window = \"0s\" } } }",
        );
    let lab = run(&plan(&text), &Stop::default()).unwrap();
    let c = &lab.recording.components[0];
    assert_eq!(c.replicas[0], 3.0, "{:?}", c.replicas);
    assert_eq!(*c.replicas.last().unwrap(), 1.0, "{:?}", c.replicas);
    assert_eq!(lab.figures.pods, 3, "no pod started for a scale-down");
    // Taking pods out of the set loses no request: each was answered.
    let r = &lab.recording.routes[0];
    let failed: u64 = r.errors.iter().flatten().sum();
    assert_eq!(failed, 0, "{:?}", r.errors);
}
