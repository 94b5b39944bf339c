//! `--export-scenario` and HPA behavior: the scenario format has no field
//! for it, so the export says so beside the autoscaler, and the file still
//! parses as a scenario.

use stormbreak_audit::chain::ChainOptions;
use stormbreak_audit::inputs::{Collected, Format, Source};
use stormbreak_sim::scenario::Scenario;

/// An HPA'd cart with the given behavior, exported.
fn export(behavior: &str) -> String {
    let text = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: cart, namespace: shop}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: cart}}}}\n  template:\n    metadata: {{labels: {{app: cart}}, annotations: {{stormbreak.io/workers: \"8\"}}}}\n    spec:\n      containers: [{{name: cart, image: cart:1}}]\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: cart, namespace: shop}}\nspec: {{selector: {{app: cart}}}}\n---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: cart, namespace: shop}}\nspec:\n  hosts: [cart]\n  http:\n  - route:\n    - destination: {{host: cart}}\n---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {{name: cart, namespace: shop}}\nspec:\n  scaleTargetRef: {{kind: Deployment, name: cart, apiVersion: apps/v1}}\n  minReplicas: 2\n  maxReplicas: 10\n  metrics:\n  - type: Resource\n    resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 60}}}}\n{behavior}"
    );
    let c = Collected {
        sources: vec![Source {
            name: "cart.yaml".into(),
            format: Format::Yaml,
            bytes: text.into_bytes(),
        }],
        findings: Vec::new(),
    };
    let opts = ChainOptions::default();
    let (report, inv) = stormbreak_audit::audit(c, &opts);
    stormbreak_audit::export::scenario(&inv, &report.chains, &opts, &Default::default())
        .expect("exports")
}

#[test]
fn a_written_behavior_is_marked_not_carried_and_the_export_still_parses() {
    let text = export(
        "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 30\n      policies:\n      - {type: Pods, value: 1, periodSeconds: 60}\n",
    );
    let line = text
        .lines()
        .find(|l| l.contains("HPA behavior"))
        .expect("a behavior note");
    assert!(line.starts_with("# NOT CARRIED"), "{line}");
    assert!(line.contains("scaleUp defaults"), "{line}");
    assert!(
        line.contains(
            "scaleDown stabilizationWindowSeconds 30, policies [1 pods per 60s], selectPolicy the larger"
        ),
        "{line}"
    );
    assert!(line.contains("has no behavior field"), "{line}");
    assert!(
        text.contains("autoscaler = { metric = \"app_cpu\""),
        "{text}"
    );
    Scenario::parse("cart.toml", &text).expect("the export parses");
}

#[test]
fn default_behavior_loses_nothing_and_is_not_flagged() {
    let text = export("");
    assert!(!text.contains("NOT CARRIED"), "{text}");
    assert!(
        text.contains("# HPA behavior: Kubernetes' defaults, which the simulator's HPA applies"),
        "{text}"
    );
    Scenario::parse("cart.toml", &text).expect("the export parses");
}
