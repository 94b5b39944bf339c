//! `deploy/`: the HPA deserialises into k8s-openapi's types, the
//! prometheus-adapter rules and the KEDA ScaledObject into this file's own
//! serde types (they are config and a CRD, not in k8s-openapi), and all
//! three agree with each other, with the Deployment they scale and with
//! the metric the guard really exports.

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::ConfigMap;
use serde::Deserialize;
use stormbreak_guard::{Guard, GuardConfig};

fn read(path: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn yaml<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> T {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// `deploy/guard.yaml`'s documents: the ConfigMap and the Deployment.
fn guard_objects() -> (ConfigMap, Deployment) {
    let text = read("guard.yaml");
    let docs: Vec<&str> = text.split("\n---\n").collect();
    assert_eq!(docs.len(), 3, "ConfigMap, Deployment, Service");
    (yaml("ConfigMap", docs[0]), yaml("Deployment", docs[1]))
}

/// The metric the autoscalers scale on.
const METRIC: &str = "stormbreak_guard_saturation";

/// prometheus-adapter's config file (only the fields used here; unknown
/// fields are refused so a typo fails the test).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdapterConfig {
    rules: Vec<AdapterRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AdapterRule {
    series_query: String,
    resources: AdapterResources,
    name: AdapterName,
    metrics_query: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdapterResources {
    overrides: std::collections::BTreeMap<String, AdapterResource>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdapterResource {
    resource: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdapterName {
    matches: String,
    #[serde(rename = "as")]
    as_: String,
}

/// A KEDA ScaledObject (keda.sh/v1alpha1), the fields used here.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScaledObject {
    api_version: String,
    kind: String,
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: ScaledObjectSpec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScaledObjectSpec {
    scale_target_ref: ScaleTargetRef,
    min_replica_count: u32,
    max_replica_count: u32,
    polling_interval: u32,
    cooldown_period: u32,
    triggers: Vec<Trigger>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScaleTargetRef {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Trigger {
    #[serde(rename = "type")]
    kind: String,
    metadata: PrometheusTrigger,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PrometheusTrigger {
    server_address: String,
    query: String,
    threshold: String,
}

#[test]
fn the_hpa_deserialises_and_scales_the_guard_on_the_adapters_saturation_metric() {
    let hpa: HorizontalPodAutoscaler = yaml("hpa.yaml", &read("hpa/hpa.yaml"));
    let (_, deployment) = guard_objects();
    let spec = hpa.spec.expect("spec");
    assert_eq!(spec.scale_target_ref.kind, "Deployment");
    assert_eq!(Some(spec.scale_target_ref.name), deployment.metadata.name);
    assert_eq!(hpa.metadata.namespace, deployment.metadata.namespace);
    assert!(spec.min_replicas.is_some_and(|m| m >= 2) && spec.max_replicas >= 2);
    let metrics = spec.metrics.expect("metrics");
    assert_eq!(metrics.len(), 1, "saturation only: CPU idles at the limit");
    let pods = metrics[0].pods.as_ref().expect("a Pods metric");
    assert_eq!(metrics[0].type_, "Pods");
    assert_eq!(pods.metric.name, METRIC);
    assert_eq!(pods.target.type_, "AverageValue");
    let target = pods.target.average_value.as_ref().expect("averageValue");
    assert_eq!(target.0, "700m", "0.7: below 1.0, the point of shedding");

    // The adapter exposes that name, per pod, from the series the guard exports.
    let adapter: ConfigMap = yaml("adapter-rules.yaml", &read("hpa/adapter-rules.yaml"));
    let config = &adapter.data.expect("data")["config.yaml"];
    let rules: AdapterConfig = yaml("adapter config.yaml", config);
    let rule = rules
        .rules
        .iter()
        .find(|r| r.name.as_ == METRIC)
        .expect("a rule exposing the HPA's metric");
    assert!(
        rule.series_query.starts_with(METRIC),
        "{}",
        rule.series_query
    );
    assert_eq!(rule.name.matches, format!("^{METRIC}$"));
    assert_eq!(rule.resources.overrides["pod"].resource, "pod");
    assert_eq!(rule.resources.overrides["namespace"].resource, "namespace");
    assert!(rule.metrics_query.starts_with("max by (<<.GroupBy>>)"));
}

#[test]
fn the_keda_scaled_object_queries_the_same_saturation_for_the_same_deployment() {
    let so: ScaledObject = yaml("scaledobject.yaml", &read("keda/scaledobject.yaml"));
    let (_, deployment) = guard_objects();
    assert_eq!(
        (so.api_version.as_str(), so.kind.as_str()),
        ("keda.sh/v1alpha1", "ScaledObject")
    );
    assert_eq!(
        Some(so.spec.scale_target_ref.name),
        deployment.metadata.name
    );
    assert_eq!(so.metadata.namespace, deployment.metadata.namespace);
    assert!(
        so.spec.min_replica_count >= 2 && so.spec.max_replica_count >= so.spec.min_replica_count
    );
    assert!(so.spec.polling_interval > 0 && so.spec.cooldown_period > 0);
    let [trigger] = &so.spec.triggers[..] else {
        panic!("one trigger")
    };
    assert_eq!(trigger.kind, "prometheus");
    assert!(trigger.metadata.server_address.starts_with("http"));
    assert!(
        trigger.metadata.query.contains(METRIC),
        "{}",
        trigger.metadata.query
    );
    let threshold: f64 = trigger.metadata.threshold.parse().unwrap();
    assert!(threshold > 0.0 && threshold < 1.0, "{threshold}");
}

#[tokio::test]
async fn the_deployed_config_is_valid_and_the_guard_exports_the_metric_scaled_on() {
    let (config_map, deployment) = guard_objects();
    let text = &config_map.data.expect("data")["guard.toml"];
    let config =
        GuardConfig::parse("deploy/guard.yaml guard.toml", text).unwrap_or_else(|e| panic!("{e}"));
    let admin = config.admin.as_ref().expect("[admin]");
    // Prometheus scrapes the admin port from the pod network, so it binds
    // off loopback, which needs the token the Deployment gives from a Secret.
    let env = admin.token_env.as_deref().expect("token_env");
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let var = container
        .env
        .as_ref()
        .unwrap()
        .iter()
        .find(|e| e.name == env)
        .expect("the token variable is set");
    assert!(var.value_from.as_ref().unwrap().secret_key_ref.is_some());
    let port = admin.bind.rsplit(':').next().unwrap();
    let ports = container.ports.as_ref().unwrap();
    assert!(ports.iter().any(|p| p.container_port.to_string() == port));

    // The same routes on loopback export the metric with the route label.
    let mut local = text.replace("0.0.0.0:8080", "127.0.0.1:0");
    local.truncate(local.find("[admin]").unwrap());
    let config = GuardConfig::parse("local.toml", &local).unwrap();
    let guard = Guard::start(&config).await.unwrap();
    let metrics = guard.metrics_text();
    assert!(
        metrics.contains(&format!("{METRIC}{{route=\"api\"}} 0.0\n")),
        "{metrics}"
    );
    guard.shutdown().await;
}
