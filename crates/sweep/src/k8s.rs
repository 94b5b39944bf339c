//! `--emit-k8s-job DIR`: the manifests that run a sweep's shards as one
//! Kubernetes Indexed Job (`completionMode: Indexed`; Kubernetes
//! documentation, "Jobs", "Completion mode", v1.33), one shard per
//! `JOB_COMPLETION_INDEX`, each writing its `shard.json` to a
//! PersistentVolumeClaim for `stormbreak sweep merge`.
//!
//! * `sweep-configmap.json`: a ConfigMap holding `scenario.toml` and
//!   `sweep.json` (the [`SweepSpec`](crate::plan::SweepSpec)); refused over ConfigMap's 1 MiB
//!   (Kubernetes documentation, "ConfigMaps": "The data stored in a
//!   ConfigMap cannot exceed 1 MiB").
//! * `sweep-job.json`: the Job; its pods mount the ConfigMap at
//!   `/sweep` and the claim at `/out`, and run
//!   `stormbreak sweep /sweep/scenario.toml --spec /sweep/sweep.json
//!   --shard-from-env N --out /out/shard-$(JOB_COMPLETION_INDEX)`.
//!
//! Both are checked by deserialising them into `k8s-openapi`'s types
//! before they are written.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value as Json, json};
use stormbreak_sim::output::OutputSet;

use crate::plan::Plan;

/// ConfigMap's size limit: 1 MiB of data.
pub const MAX_CONFIGMAP_BYTES: usize = 1024 * 1024;
/// The ConfigMap's file name.
pub const CONFIGMAP_FILE: &str = "sweep-configmap.json";
/// The Job's file name.
pub const JOB_FILE: &str = "sweep-job.json";

/// What the manifests need beyond the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOptions {
    /// Container image holding the `stormbreak` binary.
    pub image: String,
    /// Shards: the Job's completions.
    pub shards: usize,
    /// Pods at once (at most `shards`).
    pub parallelism: usize,
    /// An existing PersistentVolumeClaim (ReadWriteMany, so shards on
    /// several nodes can write it) for the shard outputs.
    pub claim: String,
}

/// An object name from the scenario's name: lower-case letters, digits and
/// `-`, at most 52 characters (so suffixes stay within 63).
pub fn object_name(scenario: &str) -> String {
    let mut s = stormbreak_policy::names::slug(scenario);
    s.truncate(46);
    let s = s.trim_end_matches('-');
    if s.is_empty() {
        "stormbreak-sweep".to_owned()
    } else {
        format!("{s}-sweep")
    }
}

/// The ConfigMap and the Job, validated against the Kubernetes types.
pub fn manifests(plan: &Plan, opts: &JobOptions) -> Result<OutputSet, String> {
    if opts.shards == 0 || opts.shards > crate::run::MAX_SHARDS {
        return Err(format!(
            "--shards must be 1 to {}, got {}",
            crate::run::MAX_SHARDS,
            opts.shards
        ));
    }
    if opts.image.trim().is_empty() {
        return Err("--image must name a container image holding stormbreak".to_owned());
    }
    let name = object_name(&plan.name);
    let spec = serde_json::to_string_pretty(&plan.spec).map_err(|e| e.to_string())?;
    let data_bytes = plan.text.len() + spec.len() + "scenario.toml".len() + "sweep.json".len();
    if data_bytes > MAX_CONFIGMAP_BYTES {
        return Err(format!(
            "{}: the scenario and sweep spec take {data_bytes} bytes, over a ConfigMap's 1 MiB \
             ({MAX_CONFIGMAP_BYTES} bytes); ship the scenario in the image or on the volume instead",
            plan.file
        ));
    }
    let labels =
        json!({ "app.kubernetes.io/name": "stormbreak-sweep", "stormbreak.dev/sweep": name });
    let configmap = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": name, "labels": labels },
        "data": { "scenario.toml": plan.text, "sweep.json": spec },
    });
    let parallelism = opts.parallelism.clamp(1, opts.shards);
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "completionMode": "Indexed",
            "completions": opts.shards,
            "parallelism": parallelism,
            // A shard is deterministic: retrying one that failed on a bad
            // node is useful, retrying forever is not.
            "backoffLimitPerIndex": 2,
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "sweep",
                        "image": opts.image,
                        "command": ["stormbreak"],
                        "args": [
                            "sweep", "/sweep/scenario.toml",
                            "--spec", "/sweep/sweep.json",
                            "--shard-from-env", opts.shards.to_string(),
                            // The kubelet expands $(VAR) from the
                            // container's environment, where the Job
                            // controller puts JOB_COMPLETION_INDEX.
                            "--out", "/out/shard-$(JOB_COMPLETION_INDEX)",
                            "--jobs", "1", "--quiet",
                        ],
                        "volumeMounts": [
                            { "name": "sweep", "mountPath": "/sweep", "readOnly": true },
                            { "name": "out", "mountPath": "/out" },
                        ],
                        "resources": { "requests": { "cpu": "1", "memory": "512Mi" } },
                    }],
                    "volumes": [
                        { "name": "sweep", "configMap": { "name": name } },
                        { "name": "out", "persistentVolumeClaim": { "claimName": opts.claim } },
                    ],
                },
            },
        },
    });
    check::<ConfigMap>(&configmap, "ConfigMap")?;
    check::<Job>(&job, "Job")?;
    let mut set = OutputSet::new();
    set.add(CONFIGMAP_FILE, pretty(&configmap)?)
        .add(JOB_FILE, pretty(&job)?);
    Ok(set)
}

fn pretty(v: &Json) -> Result<Vec<u8>, String> {
    let mut b = serde_json::to_vec_pretty(v).map_err(|e| e.to_string())?;
    b.push(b'\n');
    Ok(b)
}

/// Deserialises `v` into the Kubernetes type `T` and back: a field of the
/// wrong type fails the first step, a field the schema does not have
/// (which the types would drop) the comparison.
pub fn check<T>(v: &Json, what: &str) -> Result<T, String>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let typed: T = serde_json::from_value(v.clone())
        .map_err(|e| format!("the {what} manifest does not match Kubernetes' schema: {e}"))?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    if back != *v {
        return Err(format!(
            "the {what} manifest has fields Kubernetes' schema does not: {v} read back as {back}"
        ));
    }
    Ok(typed)
}
