//! `--emit-k8s-job`: the Indexed Job and its ConfigMap read back as
//! `k8s-openapi`'s types with the fields a cluster needs, an input over
//! ConfigMap's 1 MiB is refused, and a misspelt field would be caught.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use stormbreak_sweep::k8s::{CONFIGMAP_FILE, JOB_FILE, JobOptions, check, manifests};
use stormbreak_sweep::plan::{Plan, SweepSpec};

const SCENARIO: &str = include_str!("../../../../scenarios/capacity-drop.toml");

fn plan(text: &str) -> Plan {
    Plan::new(
        "capacity-drop.toml",
        text,
        SweepSpec::grid(&["action.cut.factor=2..6:10", "action.cut.for=1s..30s:log:10"]),
    )
    .unwrap()
}

fn opts() -> JobOptions {
    JobOptions {
        image: "registry.example/stormbreak:0.1".into(),
        shards: 5,
        parallelism: 3,
        claim: "sweep-out".into(),
    }
}

#[test]
fn the_job_is_indexed_one_shard_per_completion_index() {
    let p = plan(SCENARIO);
    let set = manifests(&p, &opts()).unwrap();
    let job: Job = serde_json::from_slice(set.get(JOB_FILE).unwrap()).unwrap();
    assert_eq!(job.metadata.name.as_deref(), Some("capacity-drop-sweep"));
    let spec = job.spec.unwrap();
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    assert_eq!(spec.completions, Some(5));
    assert_eq!(spec.parallelism, Some(3));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some("registry.example/stormbreak:0.1"));
    let args = c.args.clone().unwrap().join(" ");
    assert!(args.contains("--shard-from-env 5"), "{args}");
    assert!(args.contains("--spec /sweep/sweep.json"), "{args}");
    assert!(
        args.contains("--out /out/shard-$(JOB_COMPLETION_INDEX)"),
        "{args}"
    );
    let vols = pod.volumes.unwrap();
    let claim = vols
        .iter()
        .find_map(|v| v.persistent_volume_claim.as_ref())
        .unwrap();
    assert_eq!(claim.claim_name, "sweep-out");
    let cm_ref = vols.iter().find_map(|v| v.config_map.as_ref()).unwrap();
    assert_eq!(cm_ref.name, "capacity-drop-sweep");

    let cm: ConfigMap = serde_json::from_slice(set.get(CONFIGMAP_FILE).unwrap()).unwrap();
    let data = cm.data.unwrap();
    assert_eq!(data["scenario.toml"], SCENARIO);
    let spec: SweepSpec = serde_json::from_str(&data["sweep.json"]).unwrap();
    assert_eq!(spec, p.spec, "the pods rebuild the same plan");
}

#[test]
fn inputs_over_a_configmaps_mebibyte_are_refused() {
    let padded = format!("{SCENARIO}\n# {}\n", "x".repeat(1024 * 1024));
    let e = manifests(&plan(&padded), &opts()).unwrap_err();
    assert!(e.contains("over a ConfigMap's 1 MiB"), "{e}");
    assert!(e.starts_with("capacity-drop.toml:"), "{e}");
}

#[test]
fn a_field_the_schema_lacks_is_caught() {
    let bad = serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": { "name": "x" },
        "spec": { "completionMod": "Indexed", "template": {} },
    });
    let e = check::<Job>(&bad, "Job").unwrap_err();
    assert!(e.contains("fields Kubernetes' schema does not"), "{e}");
    let bad = serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "spec": { "completions": "five", "template": {} },
    });
    assert!(check::<Job>(&bad, "Job").is_err());
}
