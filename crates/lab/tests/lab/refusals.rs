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
retry = { max_attempts = 2, per_try_timeout = "300ms" }

[[service]]
name = "api"
replicas = 1
sidecar = { limit = 2 }
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
workers = 4

[[action]]
at = "2s"
do = "pause_nodes"
lb = "edge"
nodes = 1

[[action]]
at = "3s"
do = "set_capacity"
service = "api"
sidecar_limit = 1
"#;

#[test]
fn every_unsupported_feature_is_named_at_once() {
    let err = LabPlan::new(&scenario(WIDE), &LabOptions::default()).unwrap_err();
    let PlanError::Unsupported(lines) = &err else {
        panic!("expected a refusal, got {err}");
    };
    let text = err.to_string();
    for needle in [
        "[[gateway]] \"gw\": retry.per_try_timeout",
        "[[client]] \"users\": workers",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    assert_eq!(lines.len(), 2, "{text}");
    // An autoscaled service behind a gateway and a sidecar limit changed
    // mid-run: the guards follow the pods and change limits in place.
    assert!(!text.contains("autoscaler"), "{text}");
    assert!(!text.contains("set_capacity"), "{text}");
    assert!(text.contains("nothing was started"), "{text}");
    assert!(!text.contains("[[lb]]"), "the LB pool runs:\n{text}");
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
fn a_scale_reshapes_pods_as_the_simulator_does() {
    // 2 pods × 4 workers at 0.75 is 1.5 pods' worth: the simulator's
    // FleetScale runs 2 pods of 3 workers (6 = 0.75 × 8), not a refusal.
    let text = SMALL.replace("workers = 2", "workers = 4");
    let opts = LabOptions {
        scale: 0.75,
        ..Default::default()
    };
    let plan = LabPlan::new(&scenario(&text), &opts).unwrap();
    assert_eq!((plan.services[0].pods, plan.services[0].workers), (2, 3));
    let half = LabOptions {
        scale: 0.5,
        ..Default::default()
    };
    let plan = LabPlan::new(&scenario(&text), &half).unwrap();
    assert_eq!((plan.services[0].pods, plan.services[0].workers), (1, 4));
    assert_eq!(plan.clients[0].rate, 5.0);
}

#[test]
fn an_autoscaler_is_planned_at_scale_and_its_max_is_the_pod_bound() {
    let text = SMALL.replace(
        "replicas = 2\n",
        "replicas = 2\nautoscaler = { metric = \"app_cpu\", target = 0.6, min = 2, max = 40, pod_start = \"1s\", \
         behavior = { scale_up = { policies = [{ type = \"Pods\", value = 20, period = \"1m\" }] } } }\n",
    );
    let half = LabOptions {
        scale: 0.5,
        ..Default::default()
    };
    let plan = LabPlan::new(&scenario(&text), &half).unwrap();
    let a = plan.services[0].autoscaler.as_ref().unwrap();
    // min, max and a Pods policy convert with the pods, as in the simulator.
    assert_eq!((a.min, a.max), (1, 20));
    let up = a
        .behavior
        .as_ref()
        .unwrap()
        .scale_up
        .policies
        .as_ref()
        .unwrap();
    assert_eq!(up[0].value, 10);
    // At scale 1 the autoscaler's max (40) is within the 64-pod bound;
    // a max of 100 is not, and is refused before anything starts.
    assert!(LabPlan::new(&scenario(&text), &LabOptions::default()).is_ok());
    let err = LabPlan::new(
        &scenario(&text.replace("max = 40", "max = 100")),
        &LabOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("up to 100 pods"), "{err}");
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

const POOL: &str = r#"
[scenario]
name = "pool"
duration = "10s"

[[lb]]
name = "edge"
nodes = 2
flows_per_node = 10
connections = { maxconn = 100 }

[[service]]
name = "api"
replicas = 2
app = { workers = 2, service_time = { dist = "constant", value = "10ms" } }

[[service]]
name = "web"
replicas = 1
app = { workers = 2, service_time = { dist = "constant", value = "10ms" } }

[[route]]
name = "r"
path = ["edge", "api"]

[[route]]
name = "w"
path = ["edge", "web"]

[[client]]
name = "users"
route = "r"
rate = "10/s"
timeout = "1s"

[[action]]
at = "2s"
do = "kill_pods"
service = "api"
pods = 1

[[action]]
at = "3s"
do = "stall"
targets = ["edge"]
mode = "fail"
for = "1s"

[[action]]
at = "4s"
do = "shed"
lb = "edge"
route = "r"
class = "sheddable"
status = 503
"#;

#[test]
fn lb_pool_features_the_lab_does_not_run_are_named() {
    let err = LabPlan::new(&scenario(POOL), &LabOptions::default()).unwrap_err();
    let text = err.to_string();
    for needle in [
        "[[lb]] \"edge\": connections",
        "[[lb]] \"edge\": forwards to 2 different next hops (api, web)",
        "do = \"stall\" of \"edge\" (the lab stalls services only)",
        "do = \"shed\" with class",
        "do = \"shed\" at \"edge\", which carries 2 routes",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    assert!(
        !text.contains("kill_pods"),
        "the LB follows the pods:\n{text}"
    );
}

const GATEWAYS: &str = r#"
[scenario]
name = "gateways"
duration = "10s"

[[lb]]
name = "edge"
nodes = 1
flows_per_node = 10

[[lb]]
name = "inner"
nodes = 1
flows_per_node = 10

[[gateway]]
name = "gw"
timeout = "1s"
dependency = "auth"
limit = { kind = "fixed", limit = 4 }
saturation = { status = 429 }
retry = { max_attempts = 2, per_try_timeout = "300ms" }

[[service]]
name = "api"
replicas = 1
app = { workers = 2, service_time = { dist = "constant", value = "10ms" } }

[[service]]
name = "authsvc"
replicas = 1
app = { workers = 2, service_time = { dist = "constant", value = "10ms" } }

[[route]]
name = "r"
path = ["edge", "gw", "inner", "api"]

[[route]]
name = "auth"
path = ["edge", "authsvc"]

[[client]]
name = "users"
route = "r"
rate = "10/s"
timeout = "1s"

[[action]]
at = "1s"
do = "pause_nodes"
lb = "inner"
nodes = 1

[[action]]
at = "2s"
do = "set_retry"
target = "gw"
"#;

#[test]
fn gateway_features_the_lab_does_not_run_are_named() {
    let err = LabPlan::new(&scenario(GATEWAYS), &LabOptions::default()).unwrap_err();
    let text = err.to_string();
    for needle in [
        "[[gateway]] \"gw\": retry.per_try_timeout",
        "[[gateway]] \"gw\": saturation.status = 429 behind an LB pool",
        "[[route]] \"r\": LB pool \"inner\" after a gateway",
        "[[route]] \"auth\": LB pool \"edge\" on a gateway's dependency route",
        "[[lb]] \"edge\": forwards to 2 different next hops",
        "do = \"pause_nodes\" of \"inner\", which is behind another LB pool",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    assert!(
        !text.contains("set_retry"),
        "a gateway's retry changes in place:\n{text}"
    );
}

#[test]
fn a_ramp_the_guard_would_run_otherwise_than_the_simulator_is_named() {
    // The ramp of `pools.rs`, with a client of no site and a second ramp
    // at the same LB answering another status.
    let text = format!(
        r#"{}
[[client]]
name = "nowhere"
route = "r"
rate = "40/s"
timeout = "1s"

[[action]]
at = "2s"
do = "ramp"
lb = "edge"
route = "r"
sites = ["a", "b"]
status = 503
"#,
        crate::pools::RAMP
    );
    let err = LabPlan::new(&scenario(&text), &LabOptions::default()).unwrap_err();
    let text = err.to_string();
    for needle in [
        "do = \"ramp\" at \"edge\": client \"nowhere\" (site \"none\") is not among its sites",
        "do = \"ramp\" at \"edge\": another ramp at it names other sites or another status",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    assert!(!text.contains("client \"east\""), "{text}");
}
