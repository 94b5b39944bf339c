//! `--export-scenario`: HPA behavior travels as the autoscaler's
//! `behavior` table and the simulator runs it; every hop of a printed
//! chain is in the export.

use stormbreak_audit::chain::ChainOptions;
use stormbreak_audit::inputs::{Collected, Format, Source};
use stormbreak_policy::autoscale::{ScalingPolicy, ScalingRules};
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
fn a_written_behavior_is_carried_as_the_policy_crates_behavior() {
    let text = export(
        "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 30\n      policies:\n      - {type: Pods, value: 1, periodSeconds: 60}\n",
    );
    let line = text
        .lines()
        .find(|l| l.contains("HPA behavior"))
        .expect("a behavior note");
    assert!(!text.contains("NOT CARRIED: HPA behavior"), "{text}");
    assert!(line.contains("scaleUp defaults"), "{line}");
    assert!(
        line.contains(
            "scaleDown stabilizationWindowSeconds 30, policies [1 pods per 60s], selectPolicy the larger"
        ),
        "{line}"
    );
    let sc = Scenario::parse("cart.toml", &text).expect("the export parses");
    let carried = sc.services[0]
        .autoscaler
        .as_ref()
        .and_then(|a| a.behavior.clone())
        .expect("the autoscaler carries its behavior");
    let down = &carried.scale_down;
    assert_eq!(down.stabilization_window, Some(Nanos::from_secs(30)));
    assert_eq!(
        down.policies.as_deref(),
        Some(&[ScalingPolicy::pods(1, Nanos::from_secs(60))][..])
    );
    // scaleUp was not written: Kubernetes' defaults, spelt out.
    assert_eq!(carried.scale_up, ScalingRules::scale_up_default());
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

// ---------------------------------------------------------------------------
// Issue 41, item 4: the export carries the chain it printed.

use std::collections::BTreeMap;
use std::path::Path;

use stormbreak_audit::chain::{Chain, HopKind};
use stormbreak_audit::inputs::InputOptions;
use stormbreak_audit::model::Inventory;
use stormbreak_policy::Nanos;
use stormbreak_policy::limit::LimitConfig;
use stormbreak_policy::retry::{RetryConfig, RetryOn};

/// Audits a fixture directory: the report's chains and the inventory.
fn audit_dir(name: &str) -> (Vec<Chain>, Inventory) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let c = stormbreak_audit::inputs::collect(
        &[dir],
        &[],
        &InputOptions::default(),
        &mut std::io::empty(),
    )
    .expect("readable");
    let (report, inv) = stormbreak_audit::audit(c, &ChainOptions::default());
    (report.chains, inv)
}

/// Exports with default options and the given `--load`s.
fn export_of(chains: &[Chain], inv: &Inventory, loads: &[(&str, &str)]) -> String {
    let loads: BTreeMap<String, String> = loads
        .iter()
        .map(|(r, l)| (r.to_string(), l.to_string()))
        .collect();
    stormbreak_audit::export::scenario(inv, chains, &ChainOptions::default(), &loads)
        .expect("exports")
}

/// The scenario routes the export wrote for a chain: each is preceded by
/// `# route NAME: CHAIN`.
fn routes_of<'a>(text: &'a str, chain: &Chain) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# route "))
        .filter_map(|l| l.split_once(": "))
        .filter(|(_, c)| *c == chain.route)
        .map(|(n, _)| n)
        .collect()
}

/// The names on a route's path.
fn path<'a>(sc: &'a Scenario, route: &str) -> Vec<&'a str> {
    sc.routes
        .iter()
        .find(|r| r.name.get_ref() == route)
        .map(|r| r.path.iter().map(|p| p.get_ref().as_str()).collect())
        .unwrap_or_default()
}

/// A gateway's fixed limit and instances.
fn fixed(sc: &Scenario, name: &str) -> Option<(u32, u32)> {
    let g = sc.gateways.iter().find(|g| g.name.get_ref() == name)?;
    match g.limit.as_ref()? {
        LimitConfig::Fixed(f) => Some((f.limit, g.instances)),
        _ => None,
    }
}

/// Checks that every hop of `chain` with a limit is an element of the
/// exported scenario with that limit, scaled as the chain scales it (an
/// LB's nodes × flows, a gateway's instances × fixed limit — callers ×
/// per-caller pool —, Σ over the destination's services of replicas × the
/// per-pod sidecar limit or workers), or is named in a `# NOT CARRIED`
/// comment.
fn carried(text: &str, sc: &Scenario, chain: &Chain) -> Result<(), String> {
    let routes = routes_of(text, chain);
    if routes.is_empty() {
        return Err(format!("no route exported for chain {:?}", chain.route));
    }
    let on_path: Vec<&str> = routes.iter().flat_map(|r| path(sc, r)).collect();
    let mut ends: Vec<&str> = routes
        .iter()
        .filter_map(|r| path(sc, r).last().copied())
        .collect();
    ends.sort();
    ends.dedup();
    for h in &chain.hops {
        let Some(limit) = h.limit else { continue };
        let said = text
            .lines()
            .any(|l| l.starts_with("# NOT CARRIED") && l.contains(&h.name));
        if said {
            continue;
        }
        let ok = match h.kind {
            HopKind::Frontend => sc.lbs.iter().any(|l| {
                on_path.contains(&l.name.get_ref().as_str())
                    && (l.nodes as f64) * (l.flows_per_node as f64) == limit
            }),
            HopKind::Backend | HopKind::Pool => on_path
                .iter()
                .any(|g| fixed(sc, g).is_some_and(|(l, n)| l as f64 * n as f64 == limit)),
            HopKind::Sidecar | HopKind::App => {
                let mut total = 0.0;
                let mut pods = 0.0;
                for e in &ends {
                    let Some(s) = sc.services.iter().find(|s| s.name.get_ref() == e) else {
                        return Err(format!("route end {e} is not a service"));
                    };
                    let per_pod = match (&h.kind, &s.sidecar) {
                        (HopKind::Sidecar, Some(sc)) => sc.limit,
                        _ => s.app.workers,
                    };
                    total += per_pod as f64 * s.replicas as f64;
                    pods += s.replicas as f64;
                }
                // A per-pod limit from Little's law may be fractional: the
                // export writes whole slots, rounded down.
                total <= limit + 1e-9 && limit - total < pods.max(1.0)
            }
        };
        if !ok {
            return Err(format!(
                "hop {:?} {:?} (limit {limit}) of chain {:?} is not carried on routes {routes:?}",
                h.kind, h.name, chain.route
            ));
        }
    }
    Ok(())
}

#[test]
fn every_hop_of_every_printed_chain_is_carried_or_said_not_carried() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut failures = Vec::new();
    let mut exported = 0;
    for name in &names {
        let (chains, inv) = audit_dir(name);
        let result = stormbreak_audit::export::scenario(
            &inv,
            &chains,
            &ChainOptions::default(),
            &Default::default(),
        );
        if chains.is_empty() {
            assert!(result.is_err(), "{name}: no chain, yet an export");
            continue;
        }
        let text = match result {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let sc = match Scenario::parse(&format!("{name}.toml"), &text) {
            Ok(sc) => sc,
            Err(e) => {
                failures.push(format!("{name}: the export does not parse: {e}\n{text}"));
                continue;
            }
        };
        exported += 1;
        for c in &chains {
            if let Err(e) = carried(&text, &sc, c) {
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(exported >= 20, "only {exported} fixtures exported");
}

#[test]
fn a_destination_rule_pool_of_30_is_carried_on_its_route_per_caller() {
    let (chains, inv) = audit_dir("pool-30");
    let c = chains
        .iter()
        .find(|c| c.route.starts_with("VirtualService shop/reviews"))
        .expect("the route's chain");
    let first = &c.hops[c.first_to_saturate.expect("a first hop")];
    assert_eq!(first.kind, HopKind::Pool);
    assert_eq!(first.limit, Some(60.0), "30 × 2 calling pods");
    let text = export_of(&chains, &inv, &[]);
    let sc = Scenario::parse("pool-30.toml", &text).expect("the export parses");
    let routes = routes_of(&text, c);
    assert_eq!(routes.len(), 1, "{text}");
    let pools: Vec<(u32, u32)> = path(&sc, routes[0])
        .iter()
        .filter_map(|g| fixed(&sc, g))
        .collect();
    assert_eq!(
        pools,
        vec![(30, 2)],
        "a limit of 30 in each of the 2 callers' proxies\n{text}"
    );
}

#[test]
fn simulating_the_export_above_the_pools_capacity_refuses_at_the_pool_first() {
    let (chains, inv) = audit_dir("pool-30");
    // The pool admits 60 (2 callers × 30), the app 120: at 50 ms, 1 200/s
    // and 2 400/s. 2 000/s fills the pool and not the app.
    let text = export_of(&chains, &inv, &[("shop-reviews", "2000/s")]);
    let text = text.replacen("duration = \"10m\"", "duration = \"20s\"", 1);
    let sc = Scenario::parse("pool-30.toml", &text).expect("the export parses");
    let pool = sc
        .gateways
        .iter()
        .find(|g| fixed(&sc, g.name.get_ref()) == Some((30, 2)))
        .expect("the pool's gateway");
    let rec = stormbreak_sim::engine::Engine::new(&sc, Default::default())
        .run()
        .expect("runs");
    let refused: u64 = rec
        .component(pool.name.get_ref())
        .expect("recorded")
        .rejected
        .iter()
        .sum();
    let svc: u64 = rec
        .component("shop-reviews")
        .expect("the service")
        .rejected
        .iter()
        .sum();
    assert!(refused > 1000, "the pool refused {refused}");
    assert_eq!(
        svc, 0,
        "the service refused {svc}: it is not the first to saturate"
    );
}

#[test]
fn istio_retries_5xx_export_four_attempts_on_connect_failure_503_and_timeout() {
    let (chains, inv) = audit_dir("pool-30");
    let text = export_of(&chains, &inv, &[]);
    let sc = Scenario::parse("pool-30.toml", &text).expect("the export parses");
    let retries: Vec<&RetryConfig> = sc
        .gateways
        .iter()
        .filter_map(|g| g.retry.as_ref())
        .collect();
    assert_eq!(retries.len(), 1, "{text}");
    let r = retries[0];
    assert_eq!(r.max_attempts, 4);
    assert_eq!(r.max_attempts_cap, 4);
    assert_eq!(r.retry_on, vec![RetryOn::ConnectFailure, RetryOn::Timeout]);
    assert_eq!(r.retriable_status_codes, vec![503]);
    assert_eq!(r.per_try_timeout, Some(Nanos::from_secs(2)));
    assert_eq!(
        r.overall_timeout,
        Some(Nanos::from_secs(10)),
        "the route timeout"
    );
}

#[test]
fn every_exported_retry_table_parses_back_to_the_config_its_layer_maps_to() {
    let mut seen = 0;
    for name in [
        "edge",
        "edge-quiet",
        "pool-30",
        "rendered",
        "haproxy-defaults",
        "bookinfo",
    ] {
        let (chains, inv) = audit_dir(name);
        let text = export_of(&chains, &inv, &[]);
        let sc = Scenario::parse(&format!("{name}.toml"), &text).expect("the export parses");
        for (ci, c) in chains.iter().enumerate() {
            for (li, l) in c.retries.iter().enumerate() {
                let gateway = format!("retry-{ci}-{li}");
                let Some(g) = sc.gateways.iter().find(|g| g.name.get_ref() == &gateway) else {
                    assert_eq!(
                        l.retries, 0,
                        "{name}: layer {:?} retries, no {gateway}",
                        l.what
                    );
                    continue;
                };
                let want = stormbreak_audit::export::retry::retry_of(&inv, c, l)
                    .expect("maps")
                    .config;
                assert_eq!(g.retry.as_ref(), Some(&want), "{name}: {gateway}");
                want.validate().expect("valid");
                seen += 1;
            }
        }
    }
    assert!(seen >= 8, "only {seen} retry tables");
}

#[test]
fn every_fixture_with_client_retries_exports_a_scenario_that_parses() {
    let opts = ChainOptions {
        client_attempts: 3,
        ..ChainOptions::default()
    };
    let mut exported = 0;
    for name in [
        "blind",
        "bookinfo",
        "edge",
        "haproxy-template",
        "lookup",
        "partial-istio",
    ] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name);
        let c = stormbreak_audit::inputs::collect(
            &[dir],
            &[],
            &InputOptions::default(),
            &mut std::io::empty(),
        )
        .expect("readable");
        let (report, inv) = stormbreak_audit::audit(c, &opts);
        let text =
            stormbreak_audit::export::scenario(&inv, &report.chains, &opts, &Default::default())
                .expect("exports");
        let sc = Scenario::parse(&format!("{name}.toml"), &text)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        for client in &sc.clients {
            let r = client.retry.as_ref().expect("the clients' 3 attempts");
            assert_eq!(r.max_attempts, 3, "{name}");
        }
        exported += 1;
    }
    assert_eq!(exported, 6);
}

#[test]
fn a_pool_bound_by_max_connections_queues_its_pending_requests_and_one_by_requests_does_not() {
    // Istio's circuit-breaking task: maxConnections 1, http1MaxPendingRequests 1.
    let (chains, inv) = audit_dir("circuit-breaker");
    let text = export_of(&chains, &inv, &[]);
    let sc = Scenario::parse("circuit-breaker.toml", &text).expect("the export parses");
    let pool = sc
        .gateways
        .iter()
        .find(|g| fixed(&sc, g.name.get_ref()) == Some((1, 1)))
        .expect("the pool's gateway");
    let q = pool.queue.as_ref().expect("Envoy's pending queue");
    assert_eq!(q.size, 1, "http1MaxPendingRequests");
    // http2MaxRequests 30: past it, an immediate 503.
    let (chains, inv) = audit_dir("pool-30");
    let text = export_of(&chains, &inv, &[]);
    let sc = Scenario::parse("pool-30.toml", &text).expect("the export parses");
    let pool = sc
        .gateways
        .iter()
        .find(|g| fixed(&sc, g.name.get_ref()) == Some((30, 2)))
        .expect("the pool's gateway");
    assert!(pool.queue.is_none(), "{text}");
    let sat = pool.saturation.as_ref().expect("the refusal's answer");
    assert_eq!((sat.status, sat.retry_after), (503, None), "no Retry-After");
}

// ---------------------------------------------------------------------------
// Issue 41, item 6: an exported HPA behavior simulates the scale-up timing
// the policy crate's HPA computes.

mod hpa_timing {
    use super::*;
    use stormbreak_policy::autoscale::{Behavior, StepResponse};
    use stormbreak_sim::engine::{Engine, RunOptions};

    const FROM: u32 = 2;
    const MAX: u32 = 10;
    const SYNC_S: u64 = 15;
    const INTERVAL_S: u64 = 5;
    /// The load steps up at 61 s; the HPA syncs at 15 s, 30 s, …, so the
    /// sync at 75 s is the first to see it.
    const FIRST_SYNC_S: u64 = 75;

    /// A one-worker Deployment under an HPA at 10 % CPU with one pod a
    /// minute as its scaleUp policy, in the shapes `kubectl` writes.
    const MANIFESTS: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: cart, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: cart}}
  template:
    metadata: {labels: {app: cart}, annotations: {stormbreak.io/workers: \"1\"}}
    spec:
      containers:
      - name: cart
        image: cart:1
        resources: {requests: {cpu: 500m}}
---
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: shop}
spec: {selector: {app: cart}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: cart, namespace: shop}
spec:
  hosts: [cart]
  http:
  - route:
    - destination: {host: cart}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: cart, namespace: shop}
spec:
  scaleTargetRef: {kind: Deployment, name: cart, apiVersion: apps/v1}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 10}}
  behavior:
    scaleUp:
      policies:
      - {type: Pods, value: 1, periodSeconds: 60}
";

    fn exported() -> String {
        let c = Collected {
            sources: vec![Source {
                name: "cart.yaml".into(),
                format: Format::Yaml,
                bytes: MANIFESTS.as_bytes().to_vec(),
            }],
            findings: Vec::new(),
        };
        let opts = ChainOptions::default();
        let (report, inv) = stormbreak_audit::audit(c, &opts);
        stormbreak_audit::export::scenario(&inv, &report.chains, &opts, &Default::default())
            .expect("exports")
    }

    /// The export as written, with only what a step test needs changed:
    /// pods ready at once (so ready pods are the replicas the HPA set), and
    /// the population idle until 61 s, then at three times what `max` pods
    /// serve (10 × 1 worker ÷ the assumed 50 ms), so from its first sync on
    /// the recommendation stays above `max`.
    fn as_step(text: &str) -> String {
        let mut out = String::new();
        for line in text.lines() {
            let line = line.replace("pod_start = \"30s\"", "pod_start = \"0\"");
            let line = if line.starts_with("rate = ") {
                "rate = 0".to_string()
            } else if line.starts_with("interval = ") {
                format!("interval = \"{INTERVAL_S}s\"")
            } else {
                line
            };
            out.push_str(&line);
            out.push('\n');
        }
        out.push_str("\n[[client.step]]\nat = \"61s\"\nrate = \"600/s\"\n");
        out
    }

    #[test]
    fn an_exported_behavior_scales_up_as_the_policy_crates_hpa_computes() {
        let text = exported();
        assert!(text.contains("behavior = {"), "{text}");
        let text = as_step(&text);
        let sc = Scenario::parse("cart.toml", &text).expect("the export parses");
        let a = sc.services[0].autoscaler.as_ref().expect("an autoscaler");
        assert_eq!((a.min, a.max), (FROM, MAX), "{text}");
        let behavior: Behavior = a.behavior.clone().expect("behavior carried");
        let rec = Engine::new(&sc, RunOptions::default())
            .run()
            .expect("the run stays within its bounds");
        let replicas = &rec
            .component(sc.services[0].name.get_ref())
            .unwrap()
            .replicas;
        // Ready pods are gauged at the end of each interval: the gauge 5 s
        // after each sync from the first one after the step.
        let at = |t_s: u64| replicas[(t_s / INTERVAL_S - 1) as usize] as u32;
        let end_s = rec.duration.as_nanos() / 1_000_000_000;
        let got: Vec<u32> = (FIRST_SYNC_S..end_s - INTERVAL_S)
            .step_by(SYNC_S as usize)
            .map(|sync| at(sync + INTERVAL_S))
            .collect();
        let want: Vec<u32> = StepResponse::new(&behavior, Nanos::from_secs(SYNC_S), FROM, MAX)
            .take(got.len())
            .map(|(_, r)| r)
            .collect();
        assert_eq!(got, want, "ready pods after each sync vs the step response");
        // One pod a minute: max is reached seven minutes after the first
        // sync, where Kubernetes' defaults would take two syncs.
        assert_eq!(want.iter().position(|&r| r == MAX), Some(28));
    }
}
