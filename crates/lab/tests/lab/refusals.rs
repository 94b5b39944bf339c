//! Every feature the lab cannot run is refused by name, before anything
//! starts; bounds are refused with what to change.

use stormbreak_lab::{LabOptions, LabPlan, PlanError};

use crate::common::scenario;

const WIDE: &str = r#"
[scenario]
name = "wide"
duration = "10s"

[[lb]]
name = "edge"
nodes = 1
flows_per_node = 10

[[gateway]]
name = "gw"
timeout = "1s"

[[service]]
name = "api"
replicas = 1
app = { workers = 2, service_time = { dist = "constant", value = "10ms" } }
autoscaler = { metric = "app_cpu", target = 0.6, min = 1, max = 4, pod_start = "1s" }

[[route]]
name = "r"
path = ["edge", "gw", "api"]

[[client]]
name = "users"
route = "r"
rate = "10/s"
timeout = "1s"
fanout = 2
give_up_after = "5s"

[[action]]
at = "2s"
do = "kill_pods"
service = "api"
pods = 1
"#;

#[test]
fn every_unsupported_feature_is_named_at_once() {
    let err = LabPlan::new(&scenario(WIDE), &LabOptions::default()).unwrap_err();
    let PlanError::Unsupported(lines) = &err else {
        panic!("expected a refusal, got {err}");
    };
    let text = err.to_string();
    for needle in [
        "[[lb]] \"edge\"",
        "[[gateway]] \"gw\"",
        "[[service]] \"api\": autoscaler",
        "[[route]] \"r\": a path of 3 hop(s)",
        "[[client]] \"users\": fanout",
        "do = \"kill_pods\"",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    assert_eq!(lines.len(), 6, "{text}");
    assert!(text.contains("nothing was started"), "{text}");
}

const SMALL: &str = r#"
[scenario]
name = "small"
duration = "10s"

[[service]]
name = "api"
replicas = 2
app = { workers = 2, service_time = { dist = "constant", value = "10ms" } }

[[route]]
name = "r"
path = ["api"]

[[client]]
name = "users"
route = "r"
rate = "10/s"
timeout = "1s"
"#;

#[test]
fn a_scale_that_would_reshape_pods_is_refused() {
    let opts = LabOptions {
        scale: 0.75,
        ..Default::default()
    };
    let err = LabPlan::new(&scenario(SMALL), &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--scale 0.75 gives 1.5 pods"), "{err}");
    let half = LabOptions {
        scale: 0.5,
        ..Default::default()
    };
    let plan = LabPlan::new(&scenario(SMALL), &half).unwrap();
    assert_eq!(plan.services[0].pods, 1);
    assert_eq!(plan.clients[0].rate, 5.0);
}

#[test]
fn runs_longer_than_the_cap_or_too_short_service_times_are_refused() {
    let opts = LabOptions {
        duration_cap: std::time::Duration::from_secs(5),
        ..Default::default()
    };
    let err = LabPlan::new(&scenario(SMALL), &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--duration-cap 5s"), "{err}");
    let fast = SMALL.replace("value = \"10ms\"", "value = \"1ms\"");
    let err = LabPlan::new(&scenario(&fast), &LabOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("millisecond timer"), "{err}");
    let flood = SMALL.replace("rate = \"10/s\"", "rate = \"1M/s\"");
    let err = LabPlan::new(&scenario(&flood), &LabOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("the lab sends at most"), "{err}");
}

#[test]
fn the_shipped_lab_scenarios_are_accepted() {
    for f in ["lab-capacity-drop.toml", "lab-capacity-drop-budget.toml"] {
        let path = format!("{}/../../scenarios/{f}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let plan = LabPlan::new(&scenario(&text), &LabOptions::default())
            .unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(plan.actions.len(), 1, "{f}");
        assert!(
            plan.duration <= stormbreak_policy::Nanos::from_secs(60),
            "{f}"
        );
    }
}
