//! Every rule where it must fire and where it must stay quiet (a false
//! positive is a bug), on the fixtures under tests/fixtures/.

mod route_policy;

use crate::common::*;
use stormbreak_audit::finding::Severity;

#[test]
fn sb101_container_resource_on_the_app_is_blind_to_a_full_sidecar() {
    let r = audit_fixture("blind");
    let f = of(&r, "SB101");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(
        f[0].severity,
        Severity::Error,
        "stated limits on both sides: an error"
    );
    assert!(f[0].pos.file.ends_with("blind/auth.yaml"));
    assert_eq!(f[0].pos.line, 65, "points at the HPA's metrics");
    assert!(
        f[0].message.contains("10 concurrent requests per pod") && f[0].message.contains("40"),
        "{}",
        f[0].message
    );
}

#[test]
fn sb101_quiet_when_a_metric_sees_the_sidecar_or_a_queue() {
    // Same pods, but the HPA also scales on in-flight requests per pod, and
    // a KEDA queue-length scaler on another sidecar-first workload.
    let r = audit_fixture("blind-quiet");
    assert!(ids(&r).is_empty(), "{:?}", r.findings);
}

#[test]
fn sb101_quiet_when_the_app_saturates_first() {
    let text = read("blind/auth.yaml").replace("http2MaxRequests: 10", "http2MaxRequests: 100");
    let r = audit_texts(&[("auth.yaml", &text)]);
    assert!(of(&r, "SB101").is_empty(), "{:?}", r.findings);
}

#[test]
fn sb102_pod_cpu_cannot_cross_the_target_behind_a_hot_sidecar() {
    let r = audit_fixture("pod-cpu");
    let f = of(&r, "SB102");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(
        f[0].severity,
        Severity::Warning,
        "the sidecar's limit came through an assumed latency"
    );
    assert!(f[0].message.contains("65.9% < 70.0%"), "{}", f[0].message);
}

#[test]
fn sb102_quiet_when_the_target_is_reachable_or_the_sidecar_is_roomy() {
    let low = read("pod-cpu/web.yaml").replace("averageUtilization: 70", "averageUtilization: 50");
    assert!(ids(&audit_texts(&[("web.yaml", &low)])).is_empty());
    let roomy = read("pod-cpu/web.yaml").replace("proxyCPULimit: 100m", "proxyCPULimit: 2000m");
    assert!(ids(&audit_texts(&[("web.yaml", &roomy)])).is_empty());
}

#[test]
fn sb103_no_autoscaler_on_a_sidecar_that_saturates_first() {
    let text = read("blind/auth.yaml");
    let without_hpa = &text[..text.find("apiVersion: autoscaling/v2").unwrap()];
    let r = audit_texts(&[("auth.yaml", without_hpa)]);
    assert_eq!(ids(&r), vec!["SB103"], "{:?}", r.findings);
}

#[test]
fn sb103_quiet_when_nothing_says_which_saturates_first() {
    // Bookinfo states no app concurrency: no claim either way.
    let r = audit_fixture("bookinfo");
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert_eq!(r.chains.len(), 4);
}

#[test]
fn sb101_fires_on_a_helm_chart_whose_namespace_is_not_among_the_inputs() {
    // `helm template` output: no namespace, no Namespace object; the pod's
    // own proxy annotations say it is meshed, so the audit assumes the
    // injection and says so (a warning).
    let r = audit_fixture("sidecar-helm");
    let f = of(&r, "SB101");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Warning);
    for part in [
        "injection assumed: Namespace default is not among the inputs",
        "sidecar.istio.io/proxyCPU",
        "admits 50 concurrent requests per pod",
        "the app has 64 (argument --workers 64 of container \"cart\")",
    ] {
        assert!(f[0].message.contains(part), "{part}: {}", f[0].message);
    }
    // Quiet: the pod opts out, the namespace is there without injection,
    // or nothing in the inputs says the pod has a proxy at all.
    let text = read("sidecar-helm/rendered.yaml");
    let opted_out = text.replacen(
        "      labels:\n        app.kubernetes.io/name: cart\n",
        "      labels:\n        sidecar.istio.io/inject: \"false\"\n        app.kubernetes.io/name: cart\n",
        1,
    );
    let unlabelled =
        format!("{text}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: default}}\n");
    let plain = text
        .replace("        sidecar.istio.io/proxyCPU: \"50m\"\n", "")
        .replace("        sidecar.istio.io/proxyCPULimit: \"200m\"\n", "")
        .replace("      annotations:\n", "");
    for (what, t) in [
        ("opted out", &opted_out),
        ("unlabelled", &unlabelled),
        ("plain", &plain),
    ] {
        assert_ne!(t, &text, "{what}: the fixture changed");
        let r = audit_texts(&[("rendered.yaml", t)]);
        assert!(ids(&r).is_empty(), "{what}: {:?}", r.findings);
    }
}

#[test]
fn sb101_fires_on_an_inbound_pool_when_the_namespace_is_missing() {
    // The 2026-08-17 shape without its Namespace: the Sidecar's inbound
    // pool acts only on an injected pod, so the pod is taken as meshed,
    // said so, and the finding is a warning (an error when the Namespace
    // states the injection, sb101_container_resource_on_the_app_...).
    let text = read("blind/auth.yaml");
    let start = text.find("apiVersion: apps/v1").unwrap();
    let r = audit_texts(&[("auth.yaml", &text[start..])]);
    let f = of(&r, "SB101");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].message
            .contains("Sidecar auth/auth sets an inbound limit on its sidecar")
            && f[0]
                .message
                .contains("Namespace auth is not among the inputs"),
        "{}",
        f[0].message
    );
    // Quiet: the Namespace is there and does not enable injection.
    let unlabelled = text.replace("  labels:\n    istio-injection: enabled\n", "");
    assert_ne!(unlabelled, text);
    let r = audit_texts(&[("auth.yaml", &unlabelled)]);
    assert!(ids(&r).is_empty(), "{:?}", r.findings);
}

#[test]
fn sb103_fires_when_a_proxy_config_sets_the_worker_threads() {
    // Chart defaults (2 cores) but one worker thread mesh-wide: 1 core,
    // 5000 req/s, 250 concurrent at 50 ms, below gunicorn's 8 × 40.
    let r = audit_fixture("sidecar-threads");
    let f = of(&r, "SB103");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    for part in [
        "admits 250 concurrent",
        "ProxyConfig istio-system/mesh-wide (of the root namespace) concurrency: 1",
        "Istio chart defaults",
        "the app has 320 (argument --workers 8 × --threads 40",
    ] {
        assert!(f[0].message.contains(part), "{part}: {}", f[0].message);
    }
    // Quiet: the namespace's own ProxyConfig gives two threads (500
    // concurrent), over the root namespace's.
    let text = read("sidecar-threads/shop.yaml");
    let two = format!(
        "{text}---\napiVersion: networking.istio.io/v1beta1\nkind: ProxyConfig\nmetadata: {{name: shop, namespace: shop}}\nspec:\n  concurrency: 2\n"
    );
    let r = audit_texts(&[("shop.yaml", &two)]);
    assert!(ids(&r).is_empty(), "{:?}", r.findings);
}

#[test]
fn sb103_fires_on_a_kubectl_list_with_a_workload_proxy_config() {
    // proxyCPU alone sets no CPU limit, and the ProxyConfig selecting the
    // pods gives one worker thread: 250 concurrent, below 4 × 128.
    let r = audit_fixture("sidecar-list");
    let f = of(&r, "SB103");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Warning);
    for part in [
        "concurrency 1 worker threads (no CPU limit)",
        "ProxyConfig prod/api (selecting the pod) concurrency: 1",
        "injection assumed",
        "--workers 4 × --threads 128",
    ] {
        assert!(f[0].message.contains(part), "{part}: {}", f[0].message);
    }
    // Quiet: without the ProxyConfig the proxy has no CPU limit and no
    // thread count, so a worker per core of a node the configs do not
    // size: no number, no claim.
    let text = read("sidecar-list/kubectl-get.yaml");
    let cut = text
        .find("- apiVersion: networking.istio.io/v1beta1")
        .unwrap();
    let r = audit_texts(&[("kubectl-get.yaml", &text[..cut])]);
    assert!(ids(&r).is_empty(), "{:?}", r.findings);
}

#[test]
fn sb103_proxy_cpu_alone_leaves_the_proxy_without_a_cpu_limit() {
    // Istio's injection template: any resource annotation replaces the
    // chart's requests and limits whole, so proxyCPU alone means no CPU
    // limit (and no worker-thread bound), not the chart's 2000m.
    let text = read("sidecar-threads/shop.yaml");
    let cut = text.find("apiVersion: networking.istio.io").unwrap();
    let end = text[cut..].find("---\n").unwrap() + cut + 4;
    let base = format!("{}{}", &text[..cut], &text[end..]).replace(
        "\"--workers\", \"8\", \"--threads\", \"40\"",
        "\"--workers\", \"640\"",
    );
    let annotated = |ann: &str| {
        base.replacen(
            "      labels: {app: orders}\n",
            &format!("      labels: {{app: orders}}\n      annotations:\n{ann}"),
            1,
        )
    };
    let cpu_only = annotated("        sidecar.istio.io/proxyCPU: 100m\n");
    let memory_only = annotated("        sidecar.istio.io/proxyMemory: 256Mi\n");
    for (what, t) in [("proxyCPU", &cpu_only), ("proxyMemory", &memory_only)] {
        let r = audit_texts(&[("shop.yaml", t)]);
        assert!(ids(&r).is_empty(), "{what}: {:?}", r.findings);
    }
    // Fires: the chart defaults (2 cores, 500 concurrent < 640), or a
    // stated limit.
    let limited = annotated(
        "        sidecar.istio.io/proxyCPU: 100m\n        sidecar.istio.io/proxyCPULimit: 2000m\n",
    );
    for (what, t) in [("defaults", &base), ("limit", &limited)] {
        let r = audit_texts(&[("shop.yaml", t)]);
        let f = of(&r, "SB103");
        assert_eq!(f.len(), 1, "{what}: {:?}", r.findings);
        assert!(
            f[0].message.contains("admits 500 concurrent"),
            "{what}: {}",
            f[0].message
        );
    }
    let r = audit_texts(&[("shop.yaml", &base)]);
    assert!(
        of(&r, "SB103")[0]
            .message
            .contains("Istio chart defaults global.proxy.resources"),
        "the default is named as such"
    );
}

#[test]
fn sb102_on_istio_defaults_says_the_proxy_numbers_are_assumed() {
    // No proxy annotation: the chart's 100m request and 2000m limit decide
    // the pod's CPU ceiling, and the finding says they are assumed.
    let text = read("pod-cpu/web.yaml")
        .replace("        sidecar.istio.io/proxyCPU: 100m\n", "")
        .replace("        sidecar.istio.io/proxyCPULimit: 100m\n", "")
        .replace(
            "        proxy.istio.io/config: |\n          concurrency: 2\n",
            "",
        )
        .replace("      annotations:\n", "")
        .replace("[\"--workers\", \"40\"]", "[\"--workers\", \"5000\"]")
        .replace("requests: {cpu: \"1\"}", "requests: {cpu: \"4\"}");
    let r = audit_texts(&[("web.yaml", &text)]);
    let f = of(&r, "SB102");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].message.contains("4.1 cores requested")
            && f[0]
                .message
                .contains("the proxy's numbers rest on an assumption: Istio chart defaults"),
        "{}",
        f[0].message
    );
    // proxyCPULimit alone is the request too (Kubernetes copies a limit
    // into a missing request): 4 + 2 cores requested, so the ceiling is
    // (2 + 0.4) / 6 = 40%, under a 50% target; with the chart's 100m
    // request it is 58.5%, over it (quiet).
    let limit_only = text.replacen(
        "      labels: {app: web}\n",
        "      labels: {app: web}\n      annotations:\n        sidecar.istio.io/proxyCPULimit: \"2\"\n",
        1,
    );
    let at_50 = |t: &str| t.replace("averageUtilization: 70", "averageUtilization: 50");
    let r = audit_texts(&[("web.yaml", &at_50(&text))]);
    assert!(of(&r, "SB102").is_empty(), "defaults: {:?}", r.findings);
    let r = audit_texts(&[("web.yaml", &at_50(&limit_only))]);
    let f = of(&r, "SB102");
    assert_eq!(f.len(), 1, "limit only: {:?}", r.findings);
    assert!(
        f[0].message.contains("6 cores requested = 40.0% < 50.0%"),
        "{}",
        f[0].message
    );
}

#[test]
fn sb201_a_pool_of_one_in_front_of_forty_workers() {
    let r = audit_fixture("circuit-breaker");
    let f = of(&r, "SB201");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message.contains("admits 1 concurrent") && f[0].message.contains("can take 40"),
        "{}",
        f[0].message
    );
    assert_eq!(f[0].pos.line, 46, "points at maxConnections");
}

#[test]
fn sb201_quiet_when_the_pool_matches_what_is_behind_it() {
    let r = audit_fixture("edge-quiet");
    assert!(r.findings.is_empty(), "{:?}", r.findings);
}

#[test]
fn sb202_frontend_far_above_its_servers() {
    let r = audit_fixture("edge");
    let f = of(&r, "SB202");
    assert_eq!(f.len(), 1);
    assert!(f[0].message.contains("20000") && f[0].message.contains("1000 server slots"));
    assert_eq!(f[0].pos.line, 13);
}

#[test]
fn sb202_quiet_when_frontend_and_servers_agree() {
    assert!(of(&audit_fixture("edge-quiet"), "SB202").is_empty());
}

const POOL_SCALE: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {istio-injection: enabled}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: cart, namespace: shop}
spec:
  replicas: 4
  selector: {matchLabels: {app: cart}}
  template:
    metadata: {labels: {app: cart}, annotations: {stormbreak.io/workers: "16"}}
    spec:
      containers: [{name: cart, image: cart:1}]
---
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: shop}
spec: {selector: {app: cart}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: cart, namespace: shop}
spec:
  scaleTargetRef: {kind: Deployment, name: cart, apiVersion: apps/v1}
  minReplicas: 4
  maxReplicas: 20
  metrics:
  - type: Pods
    pods: {metric: {name: requests_in_flight}, target: {type: AverageValue, averageValue: "10"}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: cart, namespace: shop}
spec:
  host: cart
  trafficPolicy:
    connectionPool:
      http: {http2MaxRequests: POOL, maxRetries: 10}
"#;

#[test]
fn sb203_per_caller_pool_that_does_not_grow_with_replicas() {
    let r = audit_texts(&[("cart.yaml", &POOL_SCALE.replace("POOL", "48"))]);
    assert_eq!(ids(&r), vec!["SB203"], "{:?}", r.findings);
    assert!(
        r.findings[0].message.contains("20 replicas (320 requests)"),
        "{}",
        r.findings[0].message
    );
}

/// A second, fixed Deployment `cart-v1` behind the same Service, listed
/// first: the autoscaled one is not the first workload.
const CART_V1: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: cart-v1, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: cart, v: "1"}}
  template:
    metadata: {labels: {app: cart, v: "1"}, annotations: {stormbreak.io/workers: "16"}}
    spec:
      containers: [{name: cart, image: cart:1}]
---
"#;

#[test]
fn sb203_sums_every_workload_behind_the_service() {
    // cart-v1 2 × 16 + cart 4 × 16 = 96 at the minimums; 48 ≤ 96 fires
    // although the first workload has no autoscaler; the reach is
    // 2 × 16 + 20 × 16 = 352.
    let text = format!("{CART_V1}{}", POOL_SCALE.replace("POOL", "48"));
    let r = audit_texts(&[("cart.yaml", &text)]);
    let f = of(&r, "SB203");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    let m = &f[0].message;
    assert!(m.contains("2 workloads behind the Service"), "{m}");
    assert!(m.contains("= 96"), "{m}");
    assert!(m.contains("352 requests"), "{m}");
    // 100 is above both minimums together: quiet, although it is below
    // the autoscaled one's reach alone.
    let roomy = format!("{CART_V1}{}", POOL_SCALE.replace("POOL", "100"));
    assert!(of(&audit_texts(&[("cart.yaml", &roomy)]), "SB203").is_empty());
}

#[test]
fn sb203_quiet_when_the_pool_leaves_room_to_scale() {
    let r = audit_texts(&[("cart.yaml", &POOL_SCALE.replace("POOL", "400"))]);
    assert!(r.findings.is_empty(), "{:?}", r.findings);
}

#[test]
fn sb301_amplification_across_haproxy_and_the_gateway_route() {
    let r = audit_fixture("edge");
    let f = of(&r, "SB301");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Error, "16 attempts ≥ 10");
    assert!(f[0].message.contains("16 attempts"), "{}", f[0].message);
}

#[test]
fn sb301_quiet_on_istio_defaults_and_disabled_retries() {
    // Istio's default retries connect failures only, which an outer layer
    // sees as 503 and does not retry: no multiplication.
    assert!(of(&audit_fixture("bookinfo"), "SB301").is_empty());
    assert!(of(&audit_fixture("edge-quiet"), "SB301").is_empty());
}

#[test]
fn sb301_per_failure_class_uses_the_real_defaults() {
    // HAProxy's default retry-on is conn-failure only: with Istio 5xx
    // retries behind it, a 503 is retried by one layer (4×), a connection
    // failure at the pod reaches HAProxy as a 503 (not retried).
    let cfg =
        read("edge/haproxy.cfg").replace("    retries 3\n    retry-on all-retryable-errors\n", "");
    let r = audit_texts(&[
        ("haproxy.cfg", &cfg),
        ("mesh.yaml", &read("edge/mesh.yaml")),
    ]);
    assert!(of(&r, "SB301").is_empty(), "{:?}", r.findings);
    let chain = r
        .chains
        .iter()
        .find(|c| c.route.contains("VirtualService"))
        .unwrap();
    use stormbreak_audit::model::FailureClass;
    let amp = |k| stormbreak_audit::rules::amplification(chain, k).0;
    assert_eq!(amp(FailureClass::Status503), 4);
    assert_eq!(amp(FailureClass::ConnectFailure), 4);
}

#[test]
fn sb302_per_try_times_attempts_over_the_route_timeout() {
    let f = of(&audit_fixture("edge"), "SB302")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(f.len(), 1);
    assert!(
        f[0].message
            .contains("2s × 4 attempts = 8s exceeds the route timeout 5s"),
        "{}",
        f[0].message
    );
}

#[test]
fn sb302_quiet_when_attempts_fit() {
    let text = read("edge/mesh.yaml").replace("timeout: 5s", "timeout: 10s");
    assert!(of(&audit_texts(&[("mesh.yaml", &text)]), "SB302").is_empty());
}

#[test]
fn sb303_no_budget_on_a_retrying_path() {
    assert_eq!(
        of(&audit_fixture("edge"), "SB303").len(),
        2,
        "the HAProxy route and the gateway route"
    );
}

#[test]
fn sb303_quiet_with_max_retries_or_without_written_retries() {
    assert!(of(&audit_fixture("edge-quiet"), "SB303").is_empty());
    assert!(of(&audit_fixture("bookinfo"), "SB303").is_empty());
    let budgeted = format!(
        "{}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: api, namespace: api}}\nspec:\n  host: api\n  trafficPolicy: {{connectionPool: {{http: {{maxRetries: 50}}}}}}\n",
        read("edge/mesh.yaml")
    );
    let r = audit_texts(&[("mesh.yaml", &budgeted)]);
    assert!(of(&r, "SB303").is_empty(), "{:?}", r.findings);
}

#[test]
fn sb401_zero_that_means_unlimited_is_read_and_reported_as_such() {
    let r = audit_fixture("circuit-breaker");
    let f = of(&r, "SB401");
    assert_eq!(f.len(), 1);
    assert!(f[0].message.starts_with("maxRetries: 0"));
    assert_eq!(f[0].pos.line, 50);
    // http1MaxPendingRequests: 0 is unlimited: the pool is not "tiny".
    let text = read("circuit-breaker/httpbin.yaml")
        .replace("maxConnections: 1", "maxConnections: 0")
        .replace("http1MaxPendingRequests: 1", "http1MaxPendingRequests: 0");
    let r = audit_texts(&[("httpbin.yaml", &text)]);
    assert!(
        of(&r, "SB201").is_empty(),
        "0 read as tiny: {:?}",
        r.findings
    );
    assert_eq!(of(&r, "SB401").len(), 3);
    let e = of(&audit_fixture("edge"), "SB401")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert!(e.len() == 1 && e[0].message.contains("maxqueue 0"));
}

#[test]
fn sb401_quiet_on_real_zeros() {
    // attempts: 0 (Istio) and retries 0 (HAProxy) really mean none.
    assert!(of(&audit_fixture("edge-quiet"), "SB401").is_empty());
}

#[test]
fn sb501_outlier_detection_can_eject_the_only_endpoint() {
    let f = of(&audit_fixture("circuit-breaker"), "SB501")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(f.len(), 1);
    // Even at the default 10%, Envoy always lets one host be ejected.
    let text = read("circuit-breaker/httpbin.yaml")
        .replace("maxEjectionPercent: 100", "maxEjectionPercent: 10");
    assert_eq!(of(&audit_texts(&[("h.yaml", &text)]), "SB501").len(), 1);
}

#[test]
fn sb501_quiet_with_enough_endpoints_or_min_health() {
    assert!(of(&audit_fixture("edge-quiet"), "SB501").is_empty());
    let text = read("circuit-breaker/httpbin.yaml").replace(
        "maxEjectionPercent: 100",
        "maxEjectionPercent: 100\n      minHealthPercent: 50",
    );
    assert!(of(&audit_texts(&[("h.yaml", &text)]), "SB501").is_empty());
}

#[test]
fn sb502_backup_without_headroom() {
    let f = of(&audit_fixture("edge"), "SB502")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(f.len(), 1);
    assert!(f[0].message.contains("only the first backup"));
}

#[test]
fn sb502_quiet_with_allbackups_of_equal_capacity() {
    assert!(of(&audit_fixture("edge-quiet"), "SB502").is_empty());
}

#[test]
fn sb001_broken_objects_are_located_and_the_rest_still_runs() {
    let r = audit_fixture("broken");
    let f = of(&r, "SB001");
    assert_eq!(f.len(), 2, "{:?}", r.findings);
    assert_eq!((f[0].pos.line, f[1].pos.line), (13, 21));
    assert!(
        f[0].message
            .contains("expected a whole number, at `replicas: many`"),
        "{}",
        f[0].message
    );
    assert_eq!(
        r.counts.read.get("Service"),
        Some(&2),
        "the good Service and the List item are read"
    );
    assert_eq!(
        r.counts.skipped.get("Widget (example.com/v1)"),
        Some(&1),
        "unknown kinds are counted"
    );
}

#[test]
fn sb001_quiet_on_good_inputs() {
    for d in [
        "blind",
        "blind-quiet",
        "pod-cpu",
        "circuit-breaker",
        "bookinfo",
        "edge",
        "edge-quiet",
    ] {
        assert!(of(&audit_fixture(d), "SB001").is_empty(), "{d}");
    }
}

#[test]
fn suppressions_by_annotation_and_haproxy_comment_are_counted() {
    let text = read("circuit-breaker/httpbin.yaml").replace("  name: httpbin\nspec:\n  host", "  name: httpbin\n  annotations:\n    ignore-check.stormbreak.io/SB501: \"one replica on purpose: a test fixture\"\nspec:\n  host");
    let r = audit_texts(&[("h.yaml", &text)]);
    assert!(of(&r, "SB501").is_empty());
    assert_eq!(r.suppressed.len(), 1);
    assert_eq!(r.suppressed[0].1, "one replica on purpose: a test fixture");
    let no_reason = text.replace("\"one replica on purpose: a test fixture\"", "\"\"");
    assert_eq!(
        of(&audit_texts(&[("h.yaml", &no_reason)]), "SB501").len(),
        1,
        "a suppression needs a reason"
    );
    let cfg = read("edge/haproxy.cfg").replace(
        "frontend www\n",
        "# stormbreak:ignore SB202 the queue absorbs bursts by design\nfrontend www\n",
    );
    let r = audit_texts(&[("haproxy.cfg", &cfg)]);
    assert!(of(&r, "SB202").is_empty());
    assert_eq!(r.suppressed.len(), 1);
}

#[test]
fn capacity_chain_states_conversions_and_the_first_hop_to_saturate() {
    let r = audit_fixture("edge");
    let c = r
        .chains
        .iter()
        .find(|c| c.route.contains("VirtualService"))
        .unwrap();
    let names: Vec<_> = c.hops.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "haproxy frontend www",
            "haproxy backend mesh",
            "api sidecars",
            "api app"
        ]
    );
    let first = &c.hops[c.first_to_saturate.unwrap()];
    assert_eq!(first.name, "api app");
    assert_eq!(first.limit, Some(160.0));
    assert!(c.hops[0].how.contains("1 request per connection"));
    assert!(c.hops[2].assumed && c.hops[2].how.contains("Little's law"));
}

#[test]
fn every_rule_is_documented_with_sources_and_a_fix() {
    for rule in stormbreak_audit::rules::RULES {
        let text = stormbreak_audit::explain(rule.id)
            .unwrap_or_else(|| panic!("{} undocumented", rule.id));
        for part in [
            "**Severity**",
            "**Rationale**",
            "**Relies on**",
            "**Fix**",
            "https://",
        ] {
            assert!(text.contains(part), "{} lacks {part}", rule.id);
        }
    }
}

#[test]
fn helm_template_kustomize_build_and_json_lists_are_read_with_positions() {
    let r = audit_fixture("rendered");
    assert!(of(&r, "SB001").is_empty(), "{:?}", r.findings);
    for (kind, n) in [
        ("Deployment", 2),
        ("StatefulSet", 1),
        ("Service", 3),
        ("EnvoyFilter", 1),
        ("HTTPRoute", 1),
        ("HorizontalPodAutoscaler", 1),
        ("Namespace", 1),
    ] {
        assert_eq!(r.counts.read.get(kind), Some(&n), "{kind}: {:?}", r.counts);
    }
    // The JSON List's items keep their own lines: the Service is on line 5.
    let search = r
        .chains
        .iter()
        .find(|c| c.route.contains("shop/search"))
        .expect("search chain");
    assert!(search.pos.file.ends_with("list.json"));
    assert_eq!(search.pos.line, 5);
}

#[test]
fn envoyfilter_local_rate_limit_bounds_the_sidecar_by_littles_law() {
    // 100 tokens/s × 50 ms assumed = 5 concurrent per pod, below the 12
    // gunicorn workers; the autoscaling/v1 HPA is pod CPU at 80%.
    let r = audit_fixture("rendered");
    let c = r
        .chains
        .iter()
        .find(|c| c.route.ends_with("shop/cart"))
        .expect("cart chain");
    let sidecar = c
        .hops
        .iter()
        .find(|h| h.kind == stormbreak_audit::chain::HopKind::Sidecar)
        .unwrap();
    assert_eq!(sidecar.limit, Some(15.0), "{}", sidecar.how);
    assert!(sidecar.assumed && sidecar.how.contains("local rate limit 100 req/s"));
    let f = of(&r, "SB102");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Warning);
    // The native sidecar's 50m counts in the pod's requests: 0.25 + 0.05 + 0.1.
    assert!(
        f[0].message.contains("/ 0.4 cores requested"),
        "{}",
        f[0].message
    );
}

#[test]
fn httproute_retry_and_timeouts_are_read() {
    let r = audit_fixture("rendered");
    let c = r
        .chains
        .iter()
        .find(|c| c.route.starts_with("HTTPRoute shop/checkout"))
        .expect("HTTPRoute chain");
    let l = c.retries.last().unwrap();
    assert_eq!(l.retries, 4);
    assert_eq!(l.on, [true, true, false]);
    assert_eq!(c.timeout, Some(std::time::Duration::from_secs(3)));
    // 1s × 5 attempts > 3s.
    assert!(
        of(&r, "SB302")
            .iter()
            .any(|f| f.object == "HTTPRoute shop/checkout")
    );
}

#[test]
fn a_subset_pool_applies_to_routes_that_name_the_subset_only() {
    let base = read("circuit-breaker/httpbin.yaml");
    let dr_start = base
        .find("apiVersion: networking.istio.io/v1\nkind: DestinationRule")
        .unwrap();
    let subset_dr = "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: httpbin\nspec:\n  host: httpbin\n  subsets:\n  - name: v1\n    labels: {version: v1}\n    trafficPolicy:\n      connectionPool:\n        http: {http2MaxRequests: 2}\n";
    let vs = |subset: &str| {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: httpbin\nspec:\n  hosts: [httpbin]\n  http:\n  - route:\n    - destination: {{host: httpbin{subset}}}\n"
        )
    };
    let with = format!("{}{subset_dr}{}", &base[..dr_start], vs(", subset: v1"));
    let r = audit_texts(&[("h.yaml", &with)]);
    let f = of(&r, "SB201");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message.contains("subset v1 pool admits 2"),
        "{}",
        f[0].message
    );
    let without = format!("{}{subset_dr}{}", &base[..dr_start], vs(""));
    assert!(of(&audit_texts(&[("h.yaml", &without)]), "SB201").is_empty());
}

/// A caller fleet for POOL_SCALE's cart: `frontend` (3 pods) calls cart by
/// the env value ADDR.
const CALLER: &str = r#"
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: frontend}}
  template:
    metadata: {labels: {app: frontend}}
    spec:
      containers:
      - name: frontend
        image: frontend:1
        env:
        - {name: CART_ADDR, value: "ADDR"}
"#;

fn with_caller(pool: &str, addr: &str) -> stormbreak_audit::Report {
    let text = POOL_SCALE.replace("POOL", pool) + &CALLER.replace("ADDR", addr);
    audit_texts(&[("cart.yaml", &text)])
}

#[test]
fn sb203_counts_every_calling_pod_and_states_the_formula() {
    // 3 frontend pods × 10 = 30 ≤ 4 replicas × 16 workers = 64: fires,
    // with the arithmetic.
    let r = with_caller("10", "http://cart:8080/api");
    let f = of(&r, "SB203");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    let m = &f[0].message;
    assert!(m.contains("admits 30 requests"), "{m}");
    assert!(m.contains("caller pods × limit"), "{m}");
    assert!(m.contains("4 replicas × 16 per pod = 64"), "{m}");
    assert!(m.contains("calling pods (shop/frontend)"), "{m}");
    // The FQDN with a port and the annotation count the same way.
    let r = with_caller("10", "cart.shop.svc.cluster.local:8080");
    assert_eq!(ids(&r), vec!["SB203"], "{:?}", r.findings);
}

#[test]
fn sb203_quiet_when_the_callers_together_leave_room() {
    // 3 pods × 48 = 144 > 64: the same pool that fires for one unknown
    // caller (sb203_per_caller_pool_that_does_not_grow_with_replicas) is
    // roomy once the three calling sidecars are counted.
    let r = with_caller("48", "http://cart:8080");
    assert!(of(&r, "SB203").is_empty(), "{:?}", r.findings);
    let c = r
        .chains
        .iter()
        .find(|c| c.route.contains("shop/cart"))
        .expect("a chain to cart");
    let pool = c.hops.iter().find(|h| h.limit == Some(144.0));
    assert!(pool.is_some(), "{:?}", c.hops);
}

#[test]
fn sb203_a_bare_word_is_not_an_address() {
    // CART_ADDR=cart is not plainly an address: no caller is counted, so
    // the pool of 48 is read for one caller and fires as before.
    let r = with_caller("48", "cart");
    assert_one_pool_missing_its_callers(&r);
}

#[test]
fn sb203_calls_annotation_names_callers() {
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "no").replace(
            "{labels: {app: frontend}}",
            "{labels: {app: frontend}, annotations: {stormbreak.io/calls: \"cart\"}}",
        );
    let r = audit_texts(&[("cart.yaml", &text)]);
    assert!(of(&r, "SB203").is_empty(), "{:?}", r.findings);
}

#[test]
fn a_destination_rule_host_with_a_dot_is_taken_as_written() {
    // Istio expands only names without a dot: `cart` and the FQDN name
    // cart's Service, `cart.shop` names a host no Service has.
    let pool_hop = |host: &str| {
        let text = POOL_SCALE
            .replace("POOL", "10")
            .replace("  host: cart\n", &format!("  host: {host}\n"));
        let r = audit_texts(&[("cart.yaml", &text)]);
        cart_pool(&r).map(|h| h.limit)
    };
    assert_eq!(pool_hop("cart"), Some(Some(10.0)));
    assert_eq!(pool_hop("cart.shop.svc.cluster.local"), Some(Some(10.0)));
    assert_eq!(pool_hop("cart.shop"), None, "a literal host, not cart's");
}

/// A Sidecar resource for `frontend` with the given egress hosts.
fn egress(hosts: &str) -> String {
    format!(
        "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: frontend, namespace: shop}}\nspec:\n  workloadSelector: {{labels: {{app: frontend}}}}\n  egress:\n  - hosts: {hosts}\n"
    )
}

/// The pool hop of the chain that reaches cart.
fn cart_pool(r: &stormbreak_audit::Report) -> Option<stormbreak_audit::chain::Hop> {
    r.chains
        .iter()
        .find(|c| c.route.ends_with("cart") || c.route.contains("shop/cart"))
        .and_then(|c| {
            c.hops
                .iter()
                .find(|h| h.kind == stormbreak_audit::chain::HopKind::Pool)
                .cloned()
        })
}

#[test]
fn a_sidecar_egress_host_names_a_caller() {
    // frontend's env names no address; its Sidecar imports cart by name:
    // 3 calling pods × 48 = 144 > 64, so SB203 is quiet.
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "no")
        + &egress("[./cart.shop.svc.cluster.local, istio-system/*]");
    let r = audit_texts(&[("cart.yaml", &text)]);
    assert!(of(&r, "SB203").is_empty(), "{:?}", r.findings);
    let pool = cart_pool(&r).expect("a pool hop");
    assert_eq!(pool.limit, Some(144.0), "{}", pool.how);
    assert!(
        pool.how
            .contains("Sidecar egress host cart.shop.svc.cluster.local"),
        "{}",
        pool.how
    );
}

#[test]
fn a_wildcard_egress_host_invents_no_call() {
    // `./*` says what the proxy may reach, not what it calls: no caller.
    let text =
        POOL_SCALE.replace("POOL", "48") + &CALLER.replace("ADDR", "no") + &egress("[\"./*\"]");
    let r = audit_texts(&[("cart.yaml", &text)]);
    assert_one_pool_missing_its_callers(&r);
}

#[test]
fn a_call_the_sidecar_egress_does_not_import_has_no_pool() {
    // The env names cart, but the Sidecar imports only `other`: the call
    // leaves through the PassthroughCluster, where cart's pool does not
    // apply, so frontend is not counted as one of the pool's callers.
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "http://cart:8080")
        + &egress("[./other.shop.svc.cluster.local]");
    let r = audit_texts(&[("cart.yaml", &text)]);
    assert_one_pool_missing_its_callers(&r);
    // With a namespace-wide import it is counted again.
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "http://cart:8080")
        + &egress("[\"./*\"]");
    assert!(of(&audit_texts(&[("cart.yaml", &text)]), "SB203").is_empty());
    // A host without `namespace/` is an SB001 with its line.
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "no")
        + &egress("[cart.shop.svc.cluster.local]");
    let r = audit_texts(&[("cart.yaml", &text)]);
    let bad = of(&r, "SB001");
    assert_eq!(bad.len(), 1, "{:?}", r.findings);
    assert!(
        bad[0].message.contains("namespace/dnsName"),
        "{}",
        bad[0].message
    );
    assert_eq!(bad[0].pos.line, 64, "points at hosts");
}

/// A ServiceEntry in shop with the given location and extra fields.
fn service_entry(host: &str, rest: &str) -> String {
    format!(
        "---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: cart-internal, namespace: shop}}\nspec:\n  hosts: [{host}]\n  ports: [{{number: 80, name: http, protocol: HTTP}}]\n{rest}"
    )
}

#[test]
fn a_service_entry_host_leads_to_the_service_behind_it_with_its_own_rule() {
    // frontend calls cart.internal; a MESH_INTERNAL entry selects cart's
    // pods. The caller's cluster is named by the entry's host, so the
    // DestinationRule on cart.internal (10) applies, not cart's (48):
    // 3 × 10 = 30 ≤ 64, SB203 fires and names the entry.
    let dr = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: cart-internal, namespace: shop}\nspec:\n  host: cart.internal\n  trafficPolicy:\n    connectionPool:\n      http: {http2MaxRequests: 10, maxRetries: 3}\n";
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "http://cart.internal")
        + &service_entry(
            "cart.internal",
            "  location: MESH_INTERNAL\n  resolution: STATIC\n  workloadSelector: {labels: {app: cart}}\n",
        )
        + dr;
    let r = audit_texts(&[("cart.yaml", &text)]);
    assert_eq!(r.counts.read.get("ServiceEntry"), Some(&1));
    let f = of(&r, "SB203");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    let m = &f[0].message;
    assert!(m.contains("admits 30 requests"), "{m}");
    assert!(
        m.contains("through ServiceEntry shop/cart-internal host cart.internal"),
        "{m}"
    );
    // An endpoint address naming the Service leads there too.
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "http://cart.internal")
        + &service_entry(
            "cart.internal",
            "  resolution: DNS\n  endpoints: [{address: cart.shop.svc.cluster.local}]\n",
        )
        + dr;
    assert!(
        of(&audit_texts(&[("cart.yaml", &text)]), "SB203")[0]
            .message
            .contains("admits 30 requests")
    );
}

#[test]
fn an_external_service_entry_is_not_a_call_between_services() {
    // An entry for an external API with no audited workload behind it:
    // frontend's call to it is not a call to cart.
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "https://api.payments.example.com")
        + &service_entry(
            "api.payments.example.com",
            "  location: MESH_EXTERNAL\n  resolution: DNS\n",
        );
    let r = audit_texts(&[("cart.yaml", &text)]);
    assert_one_pool_missing_its_callers(&r);
    // A bad location is an SB001 with its line.
    let bad =
        POOL_SCALE.replace("POOL", "48") + &service_entry("x.example.com", "  location: OUTSIDE\n");
    let r = audit_texts(&[("cart.yaml", &bad)]);
    assert!(
        of(&r, "SB001")[0]
            .message
            .contains("MESH_EXTERNAL or MESH_INTERNAL"),
        "{:?}",
        r.findings
    );
}

#[test]
fn a_mesh_virtual_service_sends_the_call_to_its_destination() {
    // frontend calls cart-front; a mesh VirtualService routes cart-front
    // to cart, so frontend is one of cart's pool callers: 3 × 48 > 64.
    let front = "---\napiVersion: v1\nkind: Service\nmetadata: {name: cart-front, namespace: shop}\nspec: {selector: {app: cart-front}}\n";
    let vs = "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: cart-front, namespace: shop}\nspec:\n  hosts: [cart-front]\n  http:\n  - route:\n    - destination: {host: cart}\n";
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "http://cart-front")
        + front
        + vs;
    let r = audit_texts(&[("cart.yaml", &text)]);
    assert!(of(&r, "SB203").is_empty(), "{:?}", r.findings);
    let pool = cart_pool(&r).expect("a pool hop");
    assert_eq!(pool.limit, Some(144.0), "{}", pool.how);
    assert!(
        pool.how
            .contains("routed by a mesh VirtualService for cart-front"),
        "{}",
        pool.how
    );
    // Without the VirtualService the call stays with cart-front: cart has
    // no known caller.
    let text =
        POOL_SCALE.replace("POOL", "48") + &CALLER.replace("ADDR", "http://cart-front") + front;
    let f = of(&audit_texts(&[("cart.yaml", &text)]), "SB203").len();
    assert_eq!(f, 1);
}

/// An HAProxy backend with dynamic maxconn: three servers minconn 10,
/// maxconn 100, maxqueue 10, fullconn FULL.
const DYNAMIC: &str = "global\n    maxconn 4000\n\nfrontend www\n    bind :80\n    maxconn 3000\n    default_backend app\n\nbackend app\n    FULL\n    server a 10.0.0.1:80 minconn 10 maxconn 100 maxqueue 10\n    server b 10.0.0.2:80 minconn 10 maxconn 100 maxqueue 10\n    server c 10.0.0.3:80 minconn 10 maxconn 100 maxqueue 10\n";

#[test]
fn sb204_fullconn_beyond_what_the_backend_can_hold() {
    // Σ maxconn 300 + Σ maxqueue 30 = 330 < fullconn 1000: each server
    // admits max(10, 100 × L / 1000); the fixed point S = Σ limit(S + 30)
    // is 30 + … below 300.
    let r = audit_texts(&[("haproxy.cfg", &DYNAMIC.replace("FULL", "fullconn 1000"))]);
    let f = of(&r, "SB204");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].pos.line, 10, "points at fullconn");
    assert!(f[0].message.contains("= 330"), "{}", f[0].message);
    // The chain's backend hop uses the dynamic limit, not 300.
    let c = &r.chains[0];
    let be = c
        .hops
        .iter()
        .find(|h| h.name.contains("backend app"))
        .unwrap();
    assert!(be.limit.unwrap() < 300.0, "{be:?}");
    assert!(be.how.contains("dynamic maxconn"), "{}", be.how);
    // Unset, fullconn is 10% of the frontend's maxconn 3000 = 300: within
    // reach, quiet; the chain says where the number came from.
    let r = audit_texts(&[("haproxy.cfg", &DYNAMIC.replace("FULL", ""))]);
    assert!(of(&r, "SB204").is_empty(), "{:?}", r.findings);
    let be = r.chains[0]
        .hops
        .iter()
        .find(|h| h.name.contains("backend app"))
        .unwrap();
    assert!(
        be.how
            .contains("10% of the 1 routing frontends' maxconn 3000"),
        "{}",
        be.how
    );
    assert_eq!(be.limit, Some(300.0), "{be:?}");
}

#[test]
fn sb204_quiet_without_minconn_or_with_an_unbounded_queue() {
    let no_min = DYNAMIC
        .replace("FULL", "fullconn 1000")
        .replace("minconn 10 ", "");
    let r = audit_texts(&[("haproxy.cfg", &no_min)]);
    assert!(of(&r, "SB204").is_empty(), "{:?}", r.findings);
    let be = r.chains[0]
        .hops
        .iter()
        .find(|h| h.name.contains("backend app"))
        .unwrap();
    assert!(be.how.contains("up to 30 more wait"), "{}", be.how);
    let unbounded = DYNAMIC
        .replace("FULL", "fullconn 1000")
        .replace("maxqueue 10", "maxqueue 0");
    assert!(of(&audit_texts(&[("haproxy.cfg", &unbounded)]), "SB204").is_empty());
}

#[test]
fn haproxy_redispatch_says_where_retries_go() {
    let cfg = |opt: &str| {
        format!(
            "frontend www\n    bind :80\n    maxconn 100\n    default_backend app\n\nbackend app\n    retries 3\n{opt}    server a 10.0.0.1:80 maxconn 50\n    server b 10.0.0.2:80 maxconn 50\n"
        )
    };
    let layer = |text: &str| {
        let r = audit_texts(&[("haproxy.cfg", text)]);
        r.chains[0].retries.last().unwrap().clone()
    };
    let none = layer(&cfg(""));
    assert!(
        none.what.contains("every retry goes to the same server"),
        "{}",
        none.what
    );
    let last = layer(&cfg("    option redispatch\n"));
    assert!(
        last.what
            .contains("1 of 3 retries elsewhere; 3 attempts on the server first chosen"),
        "{}",
        last.what
    );
    let every = layer(&cfg("    option redispatch 1\n"));
    assert!(
        every.what.contains("3 of 3 retries elsewhere"),
        "{}",
        every.what
    );
    // Attempts per class are the same with or without redispatch.
    for class in stormbreak_audit::model::FailureClass::ALL {
        assert_eq!(none.attempts(class), last.attempts(class));
    }
    let r = audit_texts(&[("haproxy.cfg", &cfg("    option redispatch x\n"))]);
    let bad = of(&r, "SB001");
    assert_eq!(bad.len(), 1, "a bad interval is an error: {:?}", r.findings);
    assert_eq!(bad[0].pos.line, 8, "with its line");
    assert!(
        bad[0].message.contains("option redispatch"),
        "{}",
        bad[0].message
    );
}

#[test]
fn haproxy_redispatch_changes_the_one_failing_server_figure() {
    use stormbreak_audit::chain::ChainOptions;
    use stormbreak_audit::inputs::{Collected, Format, Source};
    use stormbreak_audit::model::FailureClass;
    use stormbreak_audit::rules::{amplification, one_server_amplification};
    // Clients retry 3 times in all; HAProxy retries 3 on conn-failure.
    let run = |opt: &str, servers: &str| {
        let text = format!(
            "frontend www\n    bind :80\n    maxconn 100\n    default_backend app\n\nbackend app\n    retries 3\n{opt}{servers}"
        );
        let c = Collected {
            sources: vec![Source {
                name: "haproxy.cfg".into(),
                format: Format::Haproxy,
                bytes: text.into_bytes(),
            }],
            findings: Vec::new(),
        };
        let opts = ChainOptions {
            client_attempts: 3,
            ..ChainOptions::default()
        };
        stormbreak_audit::audit(c, &opts).0
    };
    let two = "    server a 10.0.0.1:80 maxconn 50\n    server b 10.0.0.2:80 maxconn 50\n";
    let cf = FailureClass::ConnectFailure;
    // No redispatch: the dead server takes all 4 attempts, HAProxy answers
    // 503 and the clients' 3 attempts multiply: 12.
    let none = run("", two);
    assert_eq!(one_server_amplification(&none.chains[0], cf).unwrap().0, 12);
    // The default interval: retry 3 goes to b and is answered: 3 on a, and
    // the clients never see the failure.
    let last = run("    option redispatch\n", two);
    let (n, how) = one_server_amplification(&last.chains[0], cf).unwrap();
    assert_eq!(n, 3, "{how}");
    assert!(how.contains("sends retry 3 to another server"), "{how}");
    // Every retry elsewhere: only the first attempt hits a.
    let every = run("    option redispatch 1\n", two);
    assert_eq!(one_server_amplification(&every.chains[0], cf).unwrap().0, 1);
    // Every second retry: attempts 1 and 2 on a, retry 2 elsewhere.
    let second = run("    option redispatch 2\n", two);
    assert_eq!(
        one_server_amplification(&second.chains[0], cf).unwrap().0,
        2
    );
    // One server: there is no other one to go to.
    let one = run(
        "    option redispatch 1\n",
        "    server a 10.0.0.1:80 maxconn 50\n",
    );
    assert_eq!(one_server_amplification(&one.chains[0], cf).unwrap().0, 12);
    // Every server failing: redispatch only moves attempts between failing
    // servers, the whole-destination figure is 12 either way.
    for r in [&none, &last, &every] {
        assert_eq!(amplification(&r.chains[0], cf).0, 12);
    }
    // SB301 states both figures.
    let f = of(&last, "SB301");
    assert_eq!(f.len(), 1, "{:?}", last.findings);
    assert!(
        f[0].message.contains("12 attempts on a connection failure")
            && f[0]
                .message
                .contains("on one failing HAProxy server (the others healthy): 3"),
        "{}",
        f[0].message
    );
    let f = of(&none, "SB301");
    assert!(
        f[0].message
            .contains("on one failing HAProxy server (the others healthy): 12"),
        "{}",
        f[0].message
    );
}

/// An HPA on cart (POOL_SCALE's shape) with the given apiVersion and
/// behavior.
fn hpa(api: &str, behavior: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: cart, namespace: shop}}\nspec:\n  replicas: 10\n  selector: {{matchLabels: {{app: cart}}}}\n  template:\n    metadata: {{labels: {{app: cart}}}}\n    spec:\n      containers: [{{name: cart, image: cart:1}}]\n---\napiVersion: {api}\nkind: HorizontalPodAutoscaler\nmetadata: {{name: cart, namespace: shop}}\nspec:\n  scaleTargetRef: {{kind: Deployment, name: cart, apiVersion: apps/v1}}\n  minReplicas: 10\n  maxReplicas: 40\n  metrics:\n  - type: Pods\n    pods: {{metric: {{name: requests_in_flight}}, target: {{type: AverageValue, averageValue: \"10\"}}}}\n{behavior}"
    )
}

const SLOW_UP: &str = "  behavior:\n    scaleUp:\n      stabilizationWindowSeconds: 60\n      policies:\n      - {type: Pods, value: 1, periodSeconds: 60}\n";

#[test]
fn sb104_a_scale_up_too_slow_for_a_2x_peak_and_v2beta2_is_read() {
    for api in ["autoscaling/v2", "autoscaling/v2beta2"] {
        let r = audit_texts(&[("cart.yaml", &hpa(api, SLOW_UP))]);
        assert_eq!(
            r.counts.read.get("HorizontalPodAutoscaler"),
            Some(&1),
            "{api} read"
        );
        let f = of(&r, "SB104");
        assert_eq!(f.len(), 1, "{api}: {:?}", r.findings);
        // The peak comes just after a sync; the next sees it (15 s). The
        // 60 s window holds the syncs of the last 60 s but not the one
        // 60 s back, so the first pod comes at the fourth sync seeing the
        // peak (15 + 45 s), then 1 pod per 60 s: 10 → 20 at 60 + 9 × 60.
        let m = &f[0].message;
        assert!(m.contains("needs 20 replicas"), "{m}");
        assert!(
            m.contains("gets there in 600 s (the HPA controller's law"),
            "{m}"
        );
        assert_eq!(f[0].pos.line, 23, "points at scaleUp");
    }
    let disabled = SLOW_UP.replace(
        "      policies:\n      - {type: Pods, value: 1, periodSeconds: 60}\n",
        "      selectPolicy: Disabled\n",
    );
    let r = audit_texts(&[("cart.yaml", &hpa("autoscaling/v2", &disabled))]);
    assert!(
        of(&r, "SB104")[0].message.contains("never"),
        "{:?}",
        r.findings
    );
}

#[test]
fn sb104_quiet_on_defaults_fast_policies_and_scale_down_only() {
    for b in [
        String::new(),
        "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 600\n".to_string(),
        // The slow Pods policy beside a Percent one, the larger taken.
        SLOW_UP.to_string() + "      - {type: Percent, value: 100, periodSeconds: 60}\n",
    ] {
        let r = audit_texts(&[("cart.yaml", &hpa("autoscaling/v2", &b))]);
        assert!(r.findings.is_empty(), "{b}: {:?}", r.findings);
    }
    // selectPolicy Min takes the slow one: fires again. So does SB105:
    // the default scaleDown drops 40 → 10 after a 315 s dip, and this
    // scale-up needs far longer than that to bring the 30 pods back.
    let min = SLOW_UP.to_string()
        + "      - {type: Percent, value: 100, periodSeconds: 60}\n      selectPolicy: Min\n";
    assert_eq!(
        ids(&audit_texts(&[("cart.yaml", &hpa("autoscaling/v2", &min))])),
        vec!["SB104", "SB105"]
    );
    // A bad selectPolicy is an SB001 with its line; the rest still runs.
    let bad = SLOW_UP.replace("stabilizationWindowSeconds: 60", "selectPolicy: Fastest");
    let r = audit_texts(&[("cart.yaml", &hpa("autoscaling/v2", &bad))]);
    assert!(
        of(&r, "SB001")[0].message.contains("selectPolicy"),
        "{:?}",
        r.findings
    );
}

#[test]
fn sb105_a_scale_down_window_shorter_than_the_way_back_flaps() {
    // No window, 100% per 15 s: a 15 s dip takes 40 pods to 10; back
    // takes 10 → 20 → 40 (30 s) + the assumed 30 s pod start.
    let b = "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 0\n";
    let r = audit_texts(&[("cart.yaml", &hpa("autoscaling/v2", b))]);
    assert_eq!(ids(&r), vec!["SB105"], "{:?}", r.findings);
    let f = &of(&r, "SB105")[0];
    let m = &f.message;
    assert!(m.contains("a dip of 15 s"), "{m}");
    assert!(
        m.contains("from maxReplicas 40 to 10 in one sync (30 pods)"),
        "{m}"
    );
    assert!(
        m.contains("takes 60 s (scale-up 10 → 40 30 s + pod start 30 s (ASSUMPTION"),
        "{m}"
    );
    // A window of W s acts on a dip of W s: it must cover the way back.
    assert!(m.contains("stabilizationWindowSeconds ≥ 60 s"), "{m}");
    assert_eq!(f.pos.line, 23, "points at scaleDown");
    // A 60 s window is enough for a 30 s start, not for a startup probe
    // that cannot pass before 120 s.
    let b60 = "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 60\n";
    assert!(ids(&audit_texts(&[("cart.yaml", &hpa("autoscaling/v2", b60))])).is_empty());
    let slow_start = hpa("autoscaling/v2", b60).replace(
        "containers: [{name: cart, image: cart:1}]",
        "containers: [{name: cart, image: cart:1, startupProbe: {httpGet: {path: /, port: 8080}, initialDelaySeconds: 120}}]",
    );
    let r = audit_texts(&[("cart.yaml", &slow_start)]);
    let f = of(&r, "SB105");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message
            .contains("pod start ≥ 120 s (startupProbe.initialDelaySeconds 120"),
        "{}",
        f[0].message
    );
}

#[test]
fn sb105_quiet_on_defaults_gentle_policies_and_disabled_scale_down() {
    for b in [
        // Kubernetes' defaults: 300 s window ≥ 60 s back.
        String::new(),
        // No window, but 10% per 60 s removes 4 of 40 per sync.
        "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 0\n      policies:\n      - {type: Percent, value: 10, periodSeconds: 60}\n".to_string(),
        // Scale-down off.
        "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 0\n      selectPolicy: Disabled\n".to_string(),
    ] {
        let r = audit_texts(&[("cart.yaml", &hpa("autoscaling/v2", &b))]);
        assert!(of(&r, "SB105").is_empty(), "{b}: {:?}", r.findings);
    }
}

/// A Gateway API HTTPRoute to cart with the given rule fields.
fn httproute(fields: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: cart, namespace: shop}}\nspec: {{selector: {{app: cart}}}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: cart, namespace: shop}}\nspec:\n  parentRefs: [{{name: edge}}]\n  rules:\n  - backendRefs: [{{name: cart, port: 8080}}]\n{fields}"
    )
}

#[test]
fn httproute_gep_1731_retry_and_gep_1742_timeouts_by_their_field_names() {
    let text = httproute(
        "    timeouts: {request: 10s, backendRequest: 2s}\n    retry: {attempts: 2, codes: [503, 504], backoff: 100ms}\n",
    );
    let r = audit_texts(&[("route.yaml", &text)]);
    let c = r
        .chains
        .iter()
        .find(|c| c.object == "HTTPRoute shop/cart")
        .expect("chain");
    let l = c.retries.last().unwrap();
    assert_eq!((l.retries, l.on), (2, [true, true, true]), "{}", l.what);
    assert!(
        l.what.contains("retry.attempts 2") && l.what.contains("retry.backoff 100ms"),
        "{}",
        l.what
    );
    assert_eq!(
        l.per_try,
        Some(std::time::Duration::from_secs(2)),
        "backendRequest is per attempt"
    );
    assert_eq!(
        c.timeout,
        Some(std::time::Duration::from_secs(10)),
        "request is the route timeout"
    );
    // 2 s × 3 attempts = 6 s ≤ 10 s: SB302 quiet; no SB001.
    assert!(
        of(&r, "SB302").is_empty() && of(&r, "SB001").is_empty(),
        "{:?}",
        r.findings
    );
}

#[test]
fn httproute_unset_attempts_zero_timeouts_and_a_backend_request_over_request() {
    // attempts unset: implementation-specific, not counted.
    let r = audit_texts(&[("route.yaml", &httproute("    retry: {codes: [503]}\n"))]);
    let l = r.chains[0].retries.last().unwrap().clone();
    assert_eq!(l.retries, 0);
    assert!(l.what.contains("implementation-specific"), "{}", l.what);
    // 0s disables a timeout: no route timeout, so SB302 has nothing to compare.
    let r = audit_texts(&[(
        "route.yaml",
        &httproute(
            "    timeouts: {request: 0s, backendRequest: 2s}\n    retry: {attempts: 5, codes: [504]}\n",
        ),
    )]);
    assert_eq!(r.chains[0].timeout, None);
    assert!(
        of(&r, "SB302").is_empty() && of(&r, "SB001").is_empty(),
        "{:?}",
        r.findings
    );
    // backendRequest above request breaks the spec: SB001 at its line.
    let r = audit_texts(&[(
        "route.yaml",
        &httproute("    timeouts:\n      request: 1s\n      backendRequest: 5s\n"),
    )]);
    let f = of(&r, "SB001");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].pos.line, 15, "{:?}", f[0]);
    assert!(
        f[0].message
            .contains("timeouts.backendRequest 5s must be no more than timeouts.request 1s"),
        "{}",
        f[0].message
    );
}

/// A mesh VirtualService in shop routing `cart-front` to DEST, with the
/// `cart-front` Service it stands for; EXTRA goes into its spec.
const FRONT_VS: &str = "---\napiVersion: v1\nkind: Service\nmetadata: {name: cart-front, namespace: shop}\nspec: {selector: {app: cart-front}}\n---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: cart-front, namespace: shop}\nspec:\nEXTRA  hosts: [cart-front]\n  http:\n  - route:\n    - destination: {host: DEST}\n";

fn front_vs(dest: &str, extra: &str) -> String {
    FRONT_VS.replace("DEST", dest).replace("EXTRA", extra)
}

#[test]
fn a_virtual_service_destination_with_a_dot_is_taken_as_written() {
    // Istio reads `destination.host` as its own config: `cart.shop` is a
    // literal host no Service has (Kubernetes DNS would expand it, Istio
    // does not), so the route reaches nothing and cart has no caller.
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "http://cart-front")
        + &front_vs("cart.shop", "");
    let r = audit_texts(&[("cart.yaml", &text)]);
    assert!(
        !r.chains
            .iter()
            .any(|c| c.object == "VirtualService shop/cart-front"),
        "no route to cart: {:?}",
        r.chains.iter().map(|c| &c.route).collect::<Vec<_>>()
    );
    assert_one_pool_missing_its_callers(&r);
    // The short name (read in the VirtualService's namespace) and the
    // FQDN both name cart: frontend's 3 pods × 48 reach its pool.
    for dest in [
        "cart",
        "cart.shop.svc.cluster.local",
        "Cart.Shop.Svc.Cluster.Local",
    ] {
        let text = POOL_SCALE.replace("POOL", "48")
            + &CALLER.replace("ADDR", "http://cart-front")
            + &front_vs(dest, "");
        let r = audit_texts(&[("cart.yaml", &text)]);
        assert!(of(&r, "SB203").is_empty(), "{dest}: {:?}", r.findings);
        assert!(
            r.chains
                .iter()
                .any(|c| c.route == "VirtualService shop/cart-front http[0] → cart"),
            "{dest}"
        );
        assert_eq!(
            cart_pool(&r).expect("a pool hop").limit,
            Some(144.0),
            "{dest}"
        );
    }
    // A short name in another namespace's VirtualService is that
    // namespace's host, whatever namespace the Service is in.
    let other = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "http://cart-front")
        + &front_vs("cart", "").replace(
            "metadata: {name: cart-front, namespace: shop}\nspec:\n  hosts: [cart-front]",
            "metadata: {name: cart-front, namespace: web}\nspec:\n  hosts: [cart-front.shop.svc.cluster.local]",
        );
    assert!(other.contains("namespace: web}\nspec:\n  hosts"));
    let r = audit_texts(&[("cart.yaml", &other)]);
    assert_eq!(of(&r, "SB203").len(), 1, "{:?}", r.findings);
}

/// CALLER moved to namespace `web` (with injection on).
fn web_caller(addr: &str) -> String {
    "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: web, labels: {istio-injection: enabled}}\n"
        .to_string()
        + &CALLER
            .replace("ADDR", addr)
            .replace("namespace: shop", "namespace: web")
}

#[test]
fn virtual_service_export_to_decides_which_callers_it_routes() {
    // frontend in `web` calls cart-front.shop; the VirtualService in shop
    // sends it to cart — only when exported to web.
    let with = |extra: &str| {
        let text = POOL_SCALE.replace("POOL", "48")
            + &web_caller("http://cart-front.shop")
            + &front_vs("cart", extra);
        audit_texts(&[("cart.yaml", &text)])
    };
    for seen in [
        "",
        "  exportTo: [\"*\"]\n",
        "  exportTo: [web]\n",
        "  exportTo: [shop, web]\n",
    ] {
        let r = with(seen);
        assert!(of(&r, "SB203").is_empty(), "{seen}: {:?}", r.findings);
        let pool = cart_pool(&r).expect("a pool hop");
        assert_eq!(pool.limit, Some(144.0), "{seen}: {}", pool.how);
        assert!(
            pool.how.contains("calling pods (web/frontend)"),
            "{}",
            pool.how
        );
    }
    for hidden in [
        "  exportTo: [\".\"]\n",
        "  exportTo: [shop]\n",
        "  exportTo: [\"~\"]\n",
    ] {
        let r = with(hidden);
        // The call stays with the cart-front Service: cart's pool has no
        // known caller.
        let f = of(&r, "SB203");
        assert_eq!(f.len(), 1, "{hidden}: {:?}", r.findings);
        assert!(
            f[0].message.contains("callers not in the configs"),
            "{hidden}: {}",
            f[0].message
        );
    }
}

#[test]
fn service_entry_export_to_decides_who_sees_its_hosts() {
    let dr = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: cart-internal, namespace: shop}\nspec:\n  host: cart.internal\n  trafficPolicy:\n    connectionPool:\n      http: {http2MaxRequests: 10, maxRetries: 3}\n";
    let with = |export: &str| {
        let text = POOL_SCALE.replace("POOL", "48")
            + &web_caller("http://cart.internal")
            + &service_entry(
                "cart.internal",
                &format!(
                    "  location: MESH_INTERNAL\n  resolution: STATIC\n  workloadSelector: {{labels: {{app: cart}}}}\n{export}"
                ),
            )
            + dr;
        audit_texts(&[("cart.yaml", &text)])
    };
    // Visible to web: 3 × 10 = 30 through the entry's host.
    for seen in ["", "  exportTo: [\"*\"]\n", "  exportTo: [web]\n"] {
        let r = with(seen);
        let f = of(&r, "SB203");
        assert_eq!(f.len(), 1, "{seen}: {:?}", r.findings);
        assert!(
            f[0].message.contains("admits 30 requests"),
            "{}",
            f[0].message
        );
        assert!(
            f[0].message
                .contains("through ServiceEntry shop/cart-internal host cart.internal"),
            "{}",
            f[0].message
        );
    }
    // Hidden from web: cart.internal is not in web's registry, no call.
    for hidden in ["  exportTo: [\".\"]\n", "  exportTo: [shop]\n"] {
        let r = with(hidden);
        let f = of(&r, "SB203");
        assert_eq!(f.len(), 1, "{hidden}: {:?}", r.findings);
        assert!(
            f[0].message.contains("callers not in the configs"),
            "{hidden}: {}",
            f[0].message
        );
    }
}

/// A KEDA ScaledObject on cart (hpa()'s Deployment) with the given
/// `advanced` block.
fn keda(advanced: &str) -> String {
    hpa("autoscaling/v2", "")
        .split("\n---\n")
        .next()
        .expect("the Deployment")
        .to_string()
        + "\n---\napiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: cart, namespace: shop}\nspec:\n  scaleTargetRef: {name: cart}\n  minReplicaCount: 10\n  maxReplicaCount: 40\n  triggers:\n  - type: prometheus\n    metadata: {serverAddress: \"http://prom:9090\", query: \"sum(rate(http_requests_total[1m]))\", threshold: \"100\"}\n"
        + advanced
}

#[test]
fn keda_scaled_object_behavior_feeds_sb104_and_sb105() {
    // The behavior KEDA passes to its HPA is read like an HPA's: a slow
    // scale-up (SB104) and a window-less scale-down (SB105).
    let slow_up = SLOW_UP
        .replace("\n  ", "\n      ")
        .replacen("  behavior:", "      behavior:", 1);
    let adv = format!("  advanced:\n    horizontalPodAutoscalerConfig:\n{slow_up}");
    let r = audit_texts(&[("cart.yaml", &keda(&adv))]);
    assert_eq!(r.counts.read.get("ScaledObject"), Some(&1));
    let f = of(&r, "SB104");
    assert_eq!(f.len(), 1, "{adv}: {:?}", r.findings);
    assert!(
        f[0].object.starts_with("ScaledObject shop/cart"),
        "{}",
        f[0].object
    );
    assert!(
        f[0].message.contains("gets there in 600 s"),
        "{}",
        f[0].message
    );
    let fast_down = "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleDown:\n          stabilizationWindowSeconds: 0\n";
    let r = audit_texts(&[("cart.yaml", &keda(fast_down))]);
    assert_eq!(ids(&r), vec!["SB105"], "{:?}", r.findings);
    let f = &of(&r, "SB105")[0];
    assert!(
        f.message.contains("from maxReplicas 40 to 10"),
        "{}",
        f.message
    );
    assert_eq!(f.pos.line, 25, "points at scaleDown");
    // Without `advanced`, or with a gentle one, KEDA's HPA runs
    // Kubernetes' defaults: quiet, and the scenario says so.
    let gentle = "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleDown:\n          stabilizationWindowSeconds: 0\n          policies:\n          - {type: Percent, value: 10, periodSeconds: 60}\n";
    for adv in ["", gentle] {
        let r = audit_texts(&[("cart.yaml", &keda(adv))]);
        assert!(r.findings.is_empty(), "{adv}: {:?}", r.findings);
    }
    // A bad selectPolicy is an SB001 naming the KEDA field.
    let bad = "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleUp: {selectPolicy: Fastest}\n";
    let r = audit_texts(&[("cart.yaml", &keda(bad))]);
    let f = of(&r, "SB001");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message
            .contains("advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.selectPolicy"),
        "{}",
        f[0].message
    );
}

#[test]
fn sb105_starts_from_the_running_replicas_when_the_configs_give_them() {
    // minReplicas 2, maxReplicas 40, scaleDown 4 pods per 15 s with no
    // window. From 40 a dip removes 4 (a tenth): quiet. From the 8 the
    // Deployment runs at, it removes 4 of 8, and getting them back takes
    // 15 s of scale-up + 30 s of pod start: a 15 s dip flaps.
    let b = "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 0\n      policies:\n      - {type: Pods, value: 4, periodSeconds: 15}\n";
    let text = |replicas: &str| {
        hpa("autoscaling/v2", b)
            .replace("  replicas: 10\n", replicas)
            .replace("minReplicas: 10", "minReplicas: 2")
    };
    let r = audit_texts(&[("cart.yaml", &text("  replicas: 8\n"))]);
    let f = of(&r, "SB105");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    let m = &f[0].message;
    assert!(
        m.contains("from spec.replicas 8 of Deployment shop/cart to 4 in one sync (4 pods)"),
        "{m}"
    );
    assert!(m.contains("takes 45 s (scale-up 4 → 8 15 s"), "{m}");
    // No count written (the default 1 is no evidence), one at
    // minReplicas, or one the autoscaler caps: only maxReplicas is left,
    // and from 40 the policy removes a tenth.
    for replicas in ["", "  replicas: 2\n", "  replicas: 1\n", "  replicas: 90\n"] {
        let r = audit_texts(&[("cart.yaml", &text(replicas))]);
        assert!(of(&r, "SB105").is_empty(), "{replicas:?}: {:?}", r.findings);
    }
}

#[test]
fn a_virtual_service_host_with_a_dot_is_taken_as_written() {
    // frontend (shop) calls `cart-front.shop`, which lands on Service
    // cart-front's host; the mesh VirtualService sends it to cart only
    // when one of its hosts, read as Istio reads it, is that host.
    let with_hosts = |hosts: &str| {
        let text = POOL_SCALE.replace("POOL", "48")
            + &CALLER.replace("ADDR", "http://cart-front.shop")
            + &front_vs("cart", "").replace("hosts: [cart-front]", &format!("hosts: [{hosts}]"));
        assert!(text.contains(&format!("hosts: [{hosts}]")));
        audit_texts(&[("cart.yaml", &text)])
    };
    for hosts in ["cart-front", "cart-front.shop.svc.cluster.local"] {
        let r = with_hosts(hosts);
        assert!(of(&r, "SB203").is_empty(), "{hosts}: {:?}", r.findings);
        let pool = cart_pool(&r).expect("a pool hop");
        assert_eq!(pool.limit, Some(144.0), "{hosts}: {}", pool.how);
        assert!(
            pool.how
                .contains("routed by a mesh VirtualService for cart-front.shop"),
            "{hosts}: {}",
            pool.how
        );
    }
    // `cart-front.shop` is the very name frontend calls, but as a
    // VirtualService host it is a literal host no Service has: the call
    // lands on cart-front's own host, cart has no caller, and the
    // VirtualService (attached to nothing) has no chain.
    let r = with_hosts("cart-front.shop");
    assert_one_pool_missing_its_callers(&r);
    assert!(
        !r.chains
            .iter()
            .any(|c| c.object == "VirtualService shop/cart-front"),
        "{:?}",
        r.chains.iter().map(|c| &c.route).collect::<Vec<_>>()
    );
}

/// FRONT_VS moved to namespace `routing`, its host the FQDN of cart-front
/// and its destination cart's.
fn routing_vs() -> String {
    front_vs("cart.shop.svc.cluster.local", "").replace(
        "metadata: {name: cart-front, namespace: shop}\nspec:\n  hosts: [cart-front]",
        "metadata: {name: cart-front, namespace: routing}\nspec:\n  hosts: [cart-front.shop.svc.cluster.local]",
    )
}

#[test]
fn a_sidecar_egress_imports_a_virtual_service_by_its_namespace_and_host() {
    // frontend calls cart-front; the VirtualService in `routing` sends it
    // to cart. Under a Sidecar whose egress imports only shop's hosts the
    // VirtualService is not in frontend's proxy (Istio imports a
    // VirtualService by the namespace it is in): the call stays with
    // cart-front and cart has no caller.
    let with = |hosts: &str| {
        let text = POOL_SCALE.replace("POOL", "48")
            + &CALLER.replace("ADDR", "http://cart-front")
            + &routing_vs()
            + &egress(hosts);
        assert!(text.contains("namespace: routing}\nspec:\n  hosts"));
        audit_texts(&[("cart.yaml", &text)])
    };
    let r = with("[\"shop/*\"]");
    assert_one_pool_missing_its_callers(&r);
    // Imported by its namespace (or any), the VirtualService routes the call.
    for hosts in [
        "[\"shop/*\", \"routing/*\"]",
        "[\"shop/*\", routing/cart-front.shop.svc.cluster.local]",
        "[\"*/*\"]",
    ] {
        let r = with(hosts);
        assert!(of(&r, "SB203").is_empty(), "{hosts}: {:?}", r.findings);
        let pool = cart_pool(&r).expect("a pool hop");
        assert_eq!(pool.limit, Some(144.0), "{hosts}: {}", pool.how);
        assert!(
            pool.how.contains("routed by a mesh VirtualService"),
            "{hosts}: {}",
            pool.how
        );
    }
    // An egress dnsName is taken as written: `routing/cart-front` imports
    // no `cart-front.shop.svc.cluster.local`.
    let r = with("[\"shop/*\", routing/cart-front]");
    assert_eq!(of(&r, "SB203").len(), 1, "{:?}", r.findings);
}

#[test]
fn a_short_sidecar_egress_host_imports_nothing() {
    // Istio reads an egress dnsName as written: `./cart` is no import of
    // cart.shop.svc.cluster.local, so frontend has no cluster for cart and
    // is not one of its pool's callers (the FQDN is,
    // a_sidecar_egress_host_names_a_caller).
    let text = POOL_SCALE.replace("POOL", "48")
        + &CALLER.replace("ADDR", "no")
        + &egress("[./cart, istio-system/*]");
    let r = audit_texts(&[("cart.yaml", &text)]);
    assert_one_pool_missing_its_callers(&r);
}

/// POOL_SCALE with cart's Service annotated `networking.istio.io/exportTo`
/// (the key quoted, as YAML writers often do).
fn exported_cart(export: &str) -> String {
    let text = POOL_SCALE.replace("POOL", "48").replace(
        "kind: Service\nmetadata: {name: cart, namespace: shop}\n",
        &format!(
            "kind: Service\nmetadata:\n  name: cart\n  namespace: shop\n  annotations:\n    \"networking.istio.io/exportTo\": {export:?}\n"
        ),
    );
    assert!(text.contains("exportTo"));
    text
}

#[test]
fn a_service_export_to_annotation_decides_who_calls_it() {
    // frontend in web calls cart.shop: counted as cart's pool caller
    // (3 × 48 = 144) only when cart is exported to web.
    let direct = |export: &str| {
        let text = exported_cart(export) + &web_caller("http://cart.shop");
        audit_texts(&[("cart.yaml", &text)])
    };
    // Through a VirtualService in shop exported everywhere: the route
    // names cart, but web's proxies have no cluster for a hidden cart.
    let routed = |export: &str| {
        let text =
            exported_cart(export) + &web_caller("http://cart-front.shop") + &front_vs("cart", "");
        audit_texts(&[("cart.yaml", &text)])
    };
    for seen in ["", "*", "web", "shop, web", " web ,shop"] {
        for r in [direct(seen), routed(seen)] {
            assert!(of(&r, "SB203").is_empty(), "{seen:?}: {:?}", r.findings);
            assert!(of(&r, "SB001").is_empty(), "{seen:?}: {:?}", r.findings);
            let pool = cart_pool(&r).expect("a pool hop");
            assert_eq!(pool.limit, Some(144.0), "{seen:?}: {}", pool.how);
            assert!(
                pool.how.contains("calling pods (web/frontend)"),
                "{}",
                pool.how
            );
        }
    }
    for hidden in [".", "shop", "~", "other"] {
        for r in [direct(hidden), routed(hidden)] {
            let f = of(&r, "SB203");
            assert_eq!(f.len(), 1, "{hidden:?}: {:?}", r.findings);
            assert!(
                f[0].message.contains("callers not in the configs"),
                "{hidden:?}: {}",
                f[0].message
            );
            assert!(of(&r, "SB001").is_empty(), "{hidden:?}: {:?}", r.findings);
        }
    }
    // In cart's own namespace `.` and `shop` keep it visible.
    for own in [".", "shop"] {
        let text = exported_cart(own) + &CALLER.replace("ADDR", "http://cart");
        let r = audit_texts(&[("cart.yaml", &text)]);
        assert!(of(&r, "SB203").is_empty(), "{own:?}: {:?}", r.findings);
    }
}

#[test]
fn a_bad_export_to_annotation_is_an_sb001_at_its_line_and_the_rest_runs() {
    for (bad, says) in [
        ("shop,,Web_1", vec!["an empty entry", "\"Web_1\" is not"]),
        (",", vec!["an empty entry"]),
        ("web shop", vec!["\"web shop\" is not"]),
        (&*"n".repeat(64), vec!["is not", "at most 63"]),
    ] {
        let text = exported_cart(bad) + &web_caller("http://cart.shop");
        let r = audit_texts(&[("cart.yaml", &text)]);
        let f = of(&r, "SB001");
        assert_eq!(f.len(), 1, "{bad:?}: {:?}", r.findings);
        let m = &f[0].message;
        assert!(m.contains("networking.istio.io/exportTo"), "{m}");
        for s in says {
            assert!(m.contains(s), "{bad:?}: {m}");
        }
        assert_eq!(f[0].object, "Service shop/cart");
        let line = text[..text.find("\"networking.istio.io/exportTo\"").unwrap()]
            .matches('\n')
            .count() as u32
            + 1;
        assert_eq!(f[0].pos.line, line, "{bad:?}: points at the annotation");
        // The rest still runs: the entries that name no namespace match
        // none, so web does not see cart (and `,` hides it from all).
        assert!(!r.chains.is_empty());
        assert_eq!(of(&r, "SB203").len(), 1, "{bad:?}: {:?}", r.findings);
    }
    // The valid entry of a partly bad value still counts.
    let text = exported_cart("Web_1,web") + &web_caller("http://cart.shop");
    let r = audit_texts(&[("cart.yaml", &text)]);
    assert_eq!(of(&r, "SB001").len(), 1, "{:?}", r.findings);
    assert!(of(&r, "SB203").is_empty(), "{:?}", r.findings);
}

#[test]
fn sb105_status_current_replicas_comes_before_the_targets_spec_replicas() {
    // The sb105_starts_from_the_running_replicas… setup (minReplicas 2,
    // maxReplicas 40, 4 pods per 15 s, no window): from 8 a dip flaps,
    // from 30 (or 40) it removes too few to flap.
    let b = "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 0\n      policies:\n      - {type: Pods, value: 4, periodSeconds: 15}\n";
    let text = |api: &str, replicas: &str, status: &str| {
        hpa(api, b)
            .replace("  replicas: 10\n", replicas)
            .replace("minReplicas: 10", "minReplicas: 2")
            + status
    };
    let status = |n: i64| format!("status:\n  currentReplicas: {n}\n  desiredReplicas: {n}\n");
    // A live export: the HPA's status says 8 are running, whatever the
    // Deployment's manifest was applied at (30, or not written).
    for replicas in ["  replicas: 30\n", ""] {
        let r = audit_texts(&[("cart.yaml", &text("autoscaling/v2", replicas, &status(8)))]);
        let f = of(&r, "SB105");
        assert_eq!(f.len(), 1, "{replicas:?}: {:?}", r.findings);
        assert!(
            f[0].message.contains(
                "from status.currentReplicas 8 of HorizontalPodAutoscaler shop/cart to 4 in one sync (4 pods)"
            ),
            "{}",
            f[0].message
        );
    }
    // autoscaling/v1 too (its status, k8s-openapi's type, is read the
    // same way). v1 runs the default behavior (300 s window, 100% per
    // 15 s), which flaps only when pods start slowly: 400 s here.
    let v1 = |st: &str| {
        hpa("autoscaling/v1", "")
            .replace("  replicas: 10\n", "  replicas: 30\n")
            .replace("minReplicas: 10", "minReplicas: 2")
            .replace(
                "containers: [{name: cart, image: cart:1}]",
                "containers: [{name: cart, image: cart:1, startupProbe: {initialDelaySeconds: 400, httpGet: {path: /, port: 8080}}}]",
            )
            + st
    };
    assert!(v1("").contains("initialDelaySeconds: 400"));
    for (st, from) in [
        (
            status(8),
            "from status.currentReplicas 8 of HorizontalPodAutoscaler shop/cart to 2",
        ),
        (
            String::new(),
            "from spec.replicas 30 of Deployment shop/cart to 2",
        ),
    ] {
        let r = audit_texts(&[("cart.yaml", &v1(&st))]);
        let f = of(&r, "SB105");
        assert_eq!(f.len(), 1, "{st:?}: {:?}", r.findings);
        assert!(f[0].message.contains(from), "{}", f[0].message);
    }
    // The status wins over the spec both ways: 30 running, though the
    // manifest says 8, is quiet.
    let r = audit_texts(&[(
        "cart.yaml",
        &text("autoscaling/v2", "  replicas: 8\n", &status(30)),
    )]);
    assert!(of(&r, "SB105").is_empty(), "{:?}", r.findings);
    // No evidence in the status (0: not synced yet, or scaled to zero;
    // a status without the field): the spec's 8 is used again.
    for st in [status(0), "status: {desiredReplicas: 3}\n".to_string()] {
        let r = audit_texts(&[("cart.yaml", &text("autoscaling/v2", "  replicas: 8\n", &st))]);
        let f = of(&r, "SB105");
        assert_eq!(f.len(), 1, "{st:?}: {:?}", r.findings);
        assert!(
            f[0].message
                .contains("from spec.replicas 8 of Deployment shop/cart"),
            "{}",
            f[0].message
        );
    }
    // A status at the bounds says the count is at the floor (nothing to
    // remove) or the ceiling: only maxReplicas is checked, and quiet.
    for n in [2, 40, 90] {
        let r = audit_texts(&[(
            "cart.yaml",
            &text("autoscaling/v2", "  replicas: 8\n", &status(n)),
        )]);
        assert!(of(&r, "SB105").is_empty(), "{n}: {:?}", r.findings);
    }
    // A negative count is an SB001 at its line; the spec is used.
    let t = text("autoscaling/v2", "  replicas: 8\n", &status(-3));
    let r = audit_texts(&[("cart.yaml", &t)]);
    let bad = of(&r, "SB001");
    assert_eq!(bad.len(), 1, "{:?}", r.findings);
    assert!(
        bad[0].message.contains("status.currentReplicas") && bad[0].message.contains("-3"),
        "{}",
        bad[0].message
    );
    let line = t[..t.find("currentReplicas").unwrap()]
        .matches('\n')
        .count() as u32
        + 1;
    assert_eq!(bad[0].pos.line, line);
    assert_eq!(of(&r, "SB105").len(), 1, "{:?}", r.findings);
    // A status of the wrong type is an SB001 for the HPA, not a panic.
    let t = text(
        "autoscaling/v2",
        "  replicas: 8\n",
        "status: {currentReplicas: many}\n",
    );
    let r = audit_texts(&[("cart.yaml", &t)]);
    assert_eq!(of(&r, "SB001").len(), 1, "{:?}", r.findings);
}

/// The report has one SB203, and it says the pool's callers are not in the
/// configs: the caller under test was not counted as one.
#[track_caller]
fn assert_one_pool_missing_its_callers(r: &stormbreak_audit::Report) {
    let f = of(r, "SB203");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message.contains("callers not in the configs"),
        "{}",
        f[0].message
    );
}

// ---- SB106–SB110: autoscalers that cannot do their job ----

/// A Deployment `cart` in `shop` whose one container has `resources`.
fn cart(resources: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: cart, namespace: shop}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: cart}}}}\n  template:\n    metadata: {{labels: {{app: cart}}}}\n    spec:\n      containers:\n      - name: cart\n        image: cart:1\n{resources}"
    )
}

/// An `autoscaling/v2` HPA in `ns` on `target`, with `metrics` lines.
fn hpa_on(ns: &str, target: &str, min: u32, max: u32, metrics: &str) -> String {
    format!(
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {{name: cart, namespace: {ns}}}\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, {target}}}\n  minReplicas: {min}\n  maxReplicas: {max}\n  metrics:\n{metrics}"
    )
}

const CPU_70: &str = "  - type: Resource\n    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}\n";
const IN_FLIGHT: &str = "  - type: Pods\n    pods: {metric: {name: requests_in_flight}, target: {type: AverageValue, averageValue: \"10\"}}\n";
const CPU_REQUEST: &str = "        resources: {requests: {cpu: 250m}}\n";

#[test]
fn sb106_an_autoscaler_on_a_workload_not_there() {
    let c = cart(CPU_REQUEST);
    // A typo in a namespace whose workloads are here: a warning.
    let typo = hpa_on("shop", "kind: Deployment, name: kart", 2, 10, CPU_70);
    let r = audit_texts(&[("cart.yaml", &c), ("hpa.yaml", &typo)]);
    let f = of(&r, "SB106");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(f[0].message.contains("Deployment kart"), "{}", f[0].message);
    // A namespace with no workload among the inputs: partial, so info.
    let elsewhere = hpa_on("web", "kind: Deployment, name: front", 2, 10, CPU_70);
    let r = audit_texts(&[("cart.yaml", &c), ("hpa.yaml", &elsewhere)]);
    let f = of(&r, "SB106");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Info);
    // Quiet: the target is there, or of a kind the audit does not read.
    for target in ["kind: Deployment, name: cart", "kind: Rollout, name: cart"] {
        let h = hpa_on("shop", target, 2, 10, CPU_70);
        let r = audit_texts(&[("cart.yaml", &c), ("hpa.yaml", &h)]);
        assert!(of(&r, "SB106").is_empty(), "{target}: {:?}", r.findings);
    }
}

#[test]
fn sb107_a_utilisation_target_needs_requests() {
    let h = hpa_on("shop", "kind: Deployment, name: cart", 2, 10, CPU_70);
    // No request, the only metric: the HPA does nothing at all.
    let r = audit_texts(&[("cart.yaml", &cart("")), ("hpa.yaml", &h)]);
    let f = of(&r, "SB107");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Error);
    assert!(
        f[0].message.contains("container(s) cart"),
        "{}",
        f[0].message
    );
    // With another metric, the HPA still scales on that one: a warning.
    let both = hpa_on(
        "shop",
        "kind: Deployment, name: cart",
        2,
        10,
        &format!("{CPU_70}{IN_FLIGHT}"),
    );
    let r = audit_texts(&[("cart.yaml", &cart("")), ("hpa.yaml", &both)]);
    assert_eq!(of(&r, "SB107")[0].severity, Severity::Warning);
    // A memory target with only a CPU request: still none for memory.
    let mem = CPU_70.replace("cpu", "memory");
    let h_mem = hpa_on("shop", "kind: Deployment, name: cart", 2, 10, &mem);
    let r = audit_texts(&[("cart.yaml", &cart(CPU_REQUEST)), ("hpa.yaml", &h_mem)]);
    assert_eq!(of(&r, "SB107").len(), 1, "{:?}", r.findings);
    // The injected proxy counts: proxyMemory alone leaves it without a CPU
    // request (any resource annotation replaces the chart's whole).
    let meshed = |ann: &str| {
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop, labels: {{istio-injection: enabled}}}}\n---\n{}",
            cart(CPU_REQUEST).replacen(
                "metadata: {labels: {app: cart}}",
                &format!("metadata: {{labels: {{app: cart}}, annotations: {{{ann}}}}}"),
                1
            )
        )
    };
    let r = audit_texts(&[
        ("cart.yaml", &meshed("sidecar.istio.io/proxyMemory: 256Mi")),
        ("hpa.yaml", &h),
    ]);
    let f = of(&r, "SB107");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message.contains("container(s) istio-proxy"),
        "{}",
        f[0].message
    );
    let r = audit_texts(&[
        (
            "cart.yaml",
            &meshed("sidecar.istio.io/proxyMemory: 256Mi, sidecar.istio.io/proxyCPU: 50m"),
        ),
        ("hpa.yaml", &h),
    ]);
    assert!(of(&r, "SB107").is_empty(), "{:?}", r.findings);
    // Quiet: a request, a limit alone (copied into the request), or a
    // metric that is not a utilisation.
    for (res, metrics) in [
        (CPU_REQUEST, CPU_70),
        ("        resources: {limits: {cpu: 500m}}\n", CPU_70),
        ("", IN_FLIGHT),
    ] {
        let h = hpa_on("shop", "kind: Deployment, name: cart", 2, 10, metrics);
        let r = audit_texts(&[("cart.yaml", &cart(res)), ("hpa.yaml", &h)]);
        assert!(of(&r, "SB107").is_empty(), "{res:?}: {:?}", r.findings);
    }
}

#[test]
fn sb108_min_equal_to_max_never_scales() {
    let c = cart(CPU_REQUEST);
    let pinned = hpa_on("shop", "kind: Deployment, name: cart", 3, 3, CPU_70);
    let r = audit_texts(&[("cart.yaml", &c), ("hpa.yaml", &pinned)]);
    let f = of(&r, "SB108");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].pos.line, 7, "maxReplicas' line");
    let room = hpa_on("shop", "kind: Deployment, name: cart", 3, 4, CPU_70);
    let r = audit_texts(&[("cart.yaml", &c), ("hpa.yaml", &room)]);
    assert!(of(&r, "SB108").is_empty(), "{:?}", r.findings);
}

const KEDA_CART: &str = "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: cart-keda, namespace: shop}\nspec:\n  scaleTargetRef: {name: cart}\n  minReplicaCount: 2\n  maxReplicaCount: 10\n  triggers:\n  - type: prometheus\n    metadata: {serverAddress: 'http://prometheus:9090', query: 'sum(rate(x[1m]))', threshold: '100'}\n";

#[test]
fn sb109_an_hpa_beside_a_scaled_object_fights_it() {
    let c = cart(CPU_REQUEST);
    let h = hpa_on("shop", "kind: Deployment, name: cart", 2, 10, CPU_70);
    let r = audit_texts(&[("cart.yaml", &c), ("hpa.yaml", &h), ("so.yaml", KEDA_CART)]);
    let f = of(&r, "SB109");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Error);
    let m = &f[0].message;
    assert!(
        m.contains("HorizontalPodAutoscaler cart") && m.contains("ScaledObject cart-keda"),
        "{m}"
    );
    assert!(m.contains("KEDA creates an HPA"), "{m}");
    // Quiet: either one alone, or each on its own workload.
    for set in [vec![("hpa.yaml", h.as_str())], vec![("so.yaml", KEDA_CART)]] {
        let mut files = vec![("cart.yaml", c.as_str())];
        files.extend(set);
        let r = audit_texts(&files);
        assert!(of(&r, "SB109").is_empty(), "{:?}", r.findings);
    }
    let other = hpa_on("shop", "kind: Deployment, name: pay", 2, 10, CPU_70);
    let r = audit_texts(&[
        ("cart.yaml", &c),
        ("hpa.yaml", &other),
        ("so.yaml", KEDA_CART),
    ]);
    assert!(of(&r, "SB109").is_empty(), "{:?}", r.findings);
}

#[test]
fn sb110_autoscaling_v1_drops_metrics_and_behavior() {
    let c = cart(CPU_REQUEST);
    let v1 = |extra: &str| {
        format!(
            "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {{name: cart, namespace: shop}}\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: cart}}\n  minReplicas: 2\n  maxReplicas: 10\n  targetCPUUtilizationPercentage: 60\n{extra}"
        )
    };
    let with = v1(&format!(
        "  metrics:\n{IN_FLIGHT}  behavior:\n    scaleUp: {{stabilizationWindowSeconds: 0}}\n"
    ));
    let r = audit_texts(&[("cart.yaml", &c), ("hpa.yaml", &with)]);
    let f = of(&r, "SB110");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message.contains("no metrics and behavior"),
        "{}",
        f[0].message
    );
    assert_eq!(f[0].pos.line, 9, "the metrics line");
    let plain = v1("");
    let r = audit_texts(&[("cart.yaml", &c), ("hpa.yaml", &plain)]);
    assert!(of(&r, "SB110").is_empty(), "{:?}", r.findings);
}

#[test]
fn the_projects_own_deploy_folder_says_use_one_autoscaler() {
    // deploy/hpa and deploy/keda target the same Deployment and their
    // comments say "apply one, not both": the audit says so too.
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let run = |paths: &[&str]| {
        let ps: Vec<_> = paths.iter().map(|p| deploy.join(p)).collect();
        let c = stormbreak_audit::inputs::collect(
            &ps,
            &[],
            &stormbreak_audit::inputs::InputOptions::default(),
            &mut std::io::empty(),
        )
        .expect("readable");
        stormbreak_audit::audit(c, &stormbreak_audit::chain::ChainOptions::default()).0
    };
    let both = run(&["guard.yaml", "hpa", "keda"]);
    let f = of(&both, "SB109");
    assert_eq!(f.len(), 1, "{:?}", both.findings);
    assert!(
        f[0].message.contains("Deployment edge/stormbreak-guard"),
        "{}",
        f[0].message
    );
    let one = run(&["guard.yaml", "hpa"]);
    assert!(of(&one, "SB109").is_empty(), "{:?}", one.findings);
    // The HPA's target is among the inputs, with what it needs.
    assert!(
        of(&one, "SB106").is_empty() && of(&one, "SB107").is_empty(),
        "{:?}",
        one.findings
    );
}
