//! Issue 41: the Istio proxy as injection makes it — its CPU from the
//! resource annotations or the chart defaults, its worker threads from the
//! `proxy.istio.io/config` annotation, ProxyConfig resources and the mesh
//! config — and the app's workers as its command line states them.

use stormbreak_audit::Report;
use stormbreak_audit::chain::{Hop, HopKind};

use crate::common::{audit_texts, of};

/// A labelled namespace, one `orders` pod with `annotations` (lines under
/// `annotations:`) and 1000 stated workers, its Service, and `extra`.
fn shop(annotations: &str, extra: &str) -> Report {
    let text = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels: {{istio-injection: enabled}}\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: orders, namespace: shop}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: orders}}}}\n  template:\n    metadata:\n      labels: {{app: orders}}\n      annotations:\n        stormbreak.io/workers: \"1000\"\n{annotations}    spec:\n      containers:\n      - name: orders\n        image: example/orders:1\n        resources: {{requests: {{cpu: \"1\"}}}}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {{name: orders, namespace: shop}}\nspec:\n  selector: {{app: orders}}\n  ports: [{{port: 80}}]\n{extra}"
    );
    audit_texts(&[("shop.yaml", &text)])
}

fn hop(r: &Report, kind: HopKind) -> Hop {
    r.chains
        .iter()
        .flat_map(|c| c.hops.iter())
        .find(|h| h.kind == kind)
        .cloned()
        .unwrap_or_else(|| panic!("a {kind:?} hop: {:?}", r.chains))
}

fn sidecar(r: &Report) -> Hop {
    hop(r, HopKind::Sidecar)
}

/// A ProxyConfig document: `selector` is a `matchLabels` map or empty.
fn proxy_config(ns: &str, name: &str, selector: &str, concurrency: i64) -> String {
    let selector = if selector.is_empty() {
        String::new()
    } else {
        format!("  selector: {{matchLabels: {selector}}}\n")
    };
    format!(
        "---\napiVersion: networking.istio.io/v1beta1\nkind: ProxyConfig\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n{selector}  concurrency: {concurrency}\n"
    )
}

const LIMIT_4: &str = "        sidecar.istio.io/proxyCPULimit: \"4\"\n";

#[test]
fn any_resource_annotation_replaces_the_chart_defaults_whole() {
    // Nothing written: the chart's 2000m limit, 500 concurrent at 50 ms.
    let h = sidecar(&shop("", ""));
    assert_eq!(h.limit, Some(500.0), "{}", h.how);
    assert!(h.how.contains("Istio chart defaults"), "{}", h.how);
    // proxyCPU or proxyMemory alone: no CPU limit, no worker-thread count,
    // so no number (Envoy runs a worker per core of an unsized node).
    for ann in [
        "        sidecar.istio.io/proxyCPU: 100m\n",
        "        sidecar.istio.io/proxyMemory: 1Gi\n",
        "        sidecar.istio.io/proxyMemoryLimit: 1Gi\n",
    ] {
        let h = sidecar(&shop(ann, ""));
        assert_eq!(h.limit, None, "{ann}: {}", h.how);
    }
    // A stated limit is read alone: 500m, 125 concurrent.
    let h = sidecar(&shop("        sidecar.istio.io/proxyCPULimit: 500m\n", ""));
    assert_eq!(h.limit, Some(125.0), "{}", h.how);
}

#[test]
fn worker_threads_follow_the_precedence_the_running_proxy_gets() {
    // The proxy may use 4 cores (1000 concurrent); each level's thread
    // count caps it at 250 per thread.
    let root = proxy_config("istio-system", "mesh", "", 1);
    let ns = proxy_config("shop", "shop", "", 3);
    let pod = proxy_config("shop", "orders", "{app: orders}", 2);
    let other = proxy_config("shop", "other", "{app: other}", 1);
    let annotation = "        proxy.istio.io/config: |\n          concurrency: 1\n";
    for (what, ann, extra, want, named) in [
        ("none", LIMIT_4, String::new(), 1000.0, "CPU limit 4 cores"),
        (
            "root",
            LIMIT_4,
            root.clone(),
            250.0,
            "ProxyConfig istio-system/mesh (of the root namespace)",
        ),
        (
            "namespace over root",
            LIMIT_4,
            format!("{root}{ns}"),
            750.0,
            "ProxyConfig shop/shop (of the namespace)",
        ),
        (
            "workload over namespace",
            LIMIT_4,
            format!("{root}{ns}{pod}"),
            500.0,
            "ProxyConfig shop/orders (selecting the pod)",
        ),
        (
            "a selector that misses",
            LIMIT_4,
            format!("{ns}{other}"),
            750.0,
            "ProxyConfig shop/shop",
        ),
        (
            "annotation over workload",
            &format!("{LIMIT_4}{annotation}"),
            format!("{ns}{pod}"),
            250.0,
            "proxy.istio.io/config concurrency: 1",
        ),
        (
            "0: every core, capped by the limit",
            LIMIT_4,
            proxy_config("istio-system", "mesh", "", 0),
            1000.0,
            "CPU limit 4 cores",
        ),
        (
            "no CPU limit, bounded by threads",
            "        sidecar.istio.io/proxyCPU: 100m\n",
            root.clone(),
            250.0,
            "concurrency 1 worker threads (no CPU limit)",
        ),
    ] {
        let h = sidecar(&shop(ann, &extra));
        assert_eq!(h.limit, Some(want), "{what}: {}", h.how);
        assert!(h.how.contains(named), "{what}: {}", h.how);
    }
}

#[test]
fn the_mesh_config_sets_worker_threads_below_any_proxy_config() {
    let config_map = |name: &str, mesh: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: istio-system}}\ndata:\n  mesh: |-\n{mesh}"
        )
    };
    let threads_3 = "    defaultConfig:\n      concurrency: 3\n";
    let operator = "---\napiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nmetadata: {name: control-plane, namespace: istio-system}\nspec:\n  profile: default\n  meshConfig:\n    defaultConfig:\n      concurrency: 3\n  values:\n    global:\n      proxy:\n        privileged: false\n";
    let root_1 = proxy_config("istio-system", "mesh", "", 1);
    let elsewhere = "    rootNamespace: istio-config\n    defaultConfig:\n      concurrency: 3\n";
    for (what, extra, want, named) in [
        (
            "ConfigMap",
            config_map("istio", threads_3),
            750.0,
            "ConfigMap istio-system/istio meshConfig.defaultConfig.concurrency: 3",
        ),
        (
            "IstioOperator",
            operator.to_string(),
            750.0,
            "IstioOperator istio-system/control-plane meshConfig.defaultConfig.concurrency: 3",
        ),
        (
            "a root ProxyConfig wins",
            format!("{}{root_1}", config_map("istio", threads_3)),
            250.0,
            "ProxyConfig istio-system/mesh",
        ),
        // Another rootNamespace: the ProxyConfig in istio-system is a
        // namespace's own, not the mesh's.
        (
            "rootNamespace",
            format!("{}{root_1}", config_map("istio", elsewhere)),
            750.0,
            "ConfigMap istio-system/istio",
        ),
        (
            "rootNamespace's ProxyConfig",
            format!(
                "{}{}",
                config_map("istio", elsewhere),
                proxy_config("istio-config", "mesh", "", 1)
            ),
            250.0,
            "ProxyConfig istio-config/mesh (of the root namespace)",
        ),
        // Another revision's mesh config is not this pod's.
        (
            "another revision",
            config_map("istio-canary", threads_3),
            1000.0,
            "CPU limit 4 cores",
        ),
    ] {
        let h = sidecar(&shop(LIMIT_4, &extra));
        assert_eq!(h.limit, Some(want), "{what}: {}", h.how);
        assert!(h.how.contains(named), "{what}: {}", h.how);
    }
    // A ConfigMap that is not a mesh config is skipped, as before.
    let r = shop(
        LIMIT_4,
        &config_map("istio-grafana-dashboards", "    {}\n")
            .replace("mesh: |-", "dashboard.json: |-"),
    );
    assert_eq!(sidecar(&r).limit, Some(1000.0));
    assert!(
        r.findings.iter().all(|f| f.rule != "SB001"),
        "{:?}",
        r.findings
    );
}

#[test]
fn a_revisioned_namespace_takes_its_revisions_mesh_config() {
    let text = |ns_labels: &str| {
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels: {ns_labels}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: istio-canary, namespace: istio-system}}\ndata:\n  mesh: |-\n    defaultConfig:\n      concurrency: 1\n---\n\
             apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: orders, namespace: shop}}\nspec:\n  selector: {{matchLabels: {{app: orders}}}}\n  template:\n    metadata:\n      labels: {{app: orders}}\n      annotations: {{stormbreak.io/workers: \"1000\"}}\n    spec:\n      containers: [{{name: orders, image: o}}]\n---\n\
             apiVersion: v1\nkind: Service\nmetadata: {{name: orders, namespace: shop}}\nspec:\n  selector: {{app: orders}}\n"
        )
    };
    let r = audit_texts(&[("shop.yaml", &text("{istio.io/rev: canary}"))]);
    let h = sidecar(&r);
    assert_eq!(h.limit, Some(250.0), "{}", h.how);
    assert!(
        h.how.contains("ConfigMap istio-system/istio-canary"),
        "{}",
        h.how
    );
    // `istio-injection: enabled` is the default revision's, whatever else.
    let r = audit_texts(&[(
        "shop.yaml",
        &text("{istio-injection: enabled, istio.io/rev: canary}"),
    )]);
    assert_eq!(sidecar(&r).limit, Some(500.0), "{}", sidecar(&r).how);
}

#[test]
fn a_concurrency_out_of_range_is_reported_where_it_is_written() {
    let bad = proxy_config("istio-system", "mesh", "", -1);
    let r = shop(LIMIT_4, &bad);
    let f = of(&r, "SB001");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message
            .contains("concurrency: expected 0 to 1024, got -1"),
        "{}",
        f[0].message
    );
    assert_eq!(f[0].object, "ProxyConfig istio-system/mesh");
    // Not read: the CPU limit decides.
    assert_eq!(sidecar(&r).limit, Some(1000.0));
}

#[test]
fn app_workers_are_read_from_shell_lines_and_gunicorn_threads() {
    let app = |container: &str| {
        let text = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop, labels: {{istio-injection: enabled}}}}\n---\n\
             apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: orders, namespace: shop}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: orders}}}}\n  template:\n    metadata: {{labels: {{app: orders}}}}\n    spec:\n      containers:\n      - name: orders\n        image: o\n{container}---\n\
             apiVersion: v1\nkind: Service\nmetadata: {{name: orders, namespace: shop}}\nspec:\n  selector: {{app: orders}}\n"
        );
        let r = audit_texts(&[("orders.yaml", &text)]);
        hop(&r, HopKind::App)
    };
    for (container, per_pod, how) in [
        (
            "        command: [\"/bin/sh\", \"-c\", \"exec gunicorn --workers 8 --bind :8000 app:app\"]\n",
            8.0,
            "argument --workers 8",
        ),
        (
            "        args: [\"gunicorn\", \"-w\", \"4\", \"--threads\", \"16\", \"app:app\"]\n",
            64.0,
            "argument -w 4 × --threads 16",
        ),
        (
            "        env: [{name: GUNICORN_CMD_ARGS, value: \"--workers=3 --threads=5\"}]\n",
            15.0,
            "--workers 3 × --threads 5",
        ),
        (
            "        args: [\"bundle exec puma --workers 2 --threads 1:16\"]\n",
            32.0,
            "--workers 2 × --threads 1:16",
        ),
    ] {
        let h = app(container);
        assert_eq!(h.limit, Some(per_pod * 2.0), "{container}: {}", h.how);
        assert!(h.how.contains(how), "{container}: {}", h.how);
    }
    // A word that is not a number states nothing.
    let h = app("        args: [\"sh\", \"-c\", \"gunicorn --workers ${WORKERS} app:app\"]\n");
    assert!(h.unknown, "{}", h.how);
}
