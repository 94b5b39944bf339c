//! Route policy as the mesh applies it (issue 41, item 2): HTTPRoute
//! rules run by Istio get Istio's defaults, several VirtualServices for
//! one host resolve as Istio resolves them (SB304), fault injection is on
//! the chain (SB305), and the text chains show every retry layer.

use crate::common::*;
use stormbreak_audit::chain::Chain;
use stormbreak_audit::finding::Severity;
use stormbreak_audit::model::FailureClass;

/// A meshed `ratings` Deployment and Service in `shop`.
const RATINGS: &str = "apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {istio-injection: enabled}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ratings, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: ratings}}
  template:
    metadata: {labels: {app: ratings}, annotations: {stormbreak.io/workers: \"16\"}}
    spec:
      containers: [{name: ratings, image: ratings:1}]
---
apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: shop}
spec:
  selector: {app: ratings}
  ports: [{port: 9080, name: http}]
";

fn gateway(class: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: shop}}
spec:
  gatewayClassName: {class}
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
"
    )
}

fn http_route(parent: &str, rule_extra: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: ratings, namespace: shop}}
spec:
  parentRefs: [{parent}]
  rules:
  - backendRefs: [{{name: ratings, port: 9080}}]
{rule_extra}"
    )
}

fn route_chain<'a>(r: &'a stormbreak_audit::Report, kind: &str) -> &'a Chain {
    r.chains
        .iter()
        .find(|c| c.route.starts_with(kind))
        .unwrap_or_else(|| panic!("no {kind} chain: {:?}", r.chains))
}

#[test]
fn an_httproute_on_an_istio_gateway_gets_istios_default_retries() {
    let text = format!(
        "{RATINGS}---\n{}---\n{}",
        gateway("istio"),
        http_route("{name: edge}", "")
    );
    let r = audit_texts(&[("shop.yaml", &text)]);
    let layer = route_chain(&r, "HTTPRoute").retries.last().unwrap().clone();
    assert_eq!(
        layer.attempts(FailureClass::ConnectFailure),
        3,
        "{}",
        layer.what
    );
    assert_eq!(layer.attempts(FailureClass::Status503), 1);
    assert!(layer.what.contains("class istio"), "{}", layer.what);
}

#[test]
fn an_httproute_on_another_implementation_counts_no_default() {
    let text = format!(
        "{RATINGS}---\n{}---\n{}",
        gateway("envoy-gateway"),
        http_route("{name: edge}", "")
    );
    let r = audit_texts(&[("shop.yaml", &text)]);
    let layer = route_chain(&r, "HTTPRoute").retries.last().unwrap().clone();
    assert_eq!(
        layer.attempts(FailureClass::ConnectFailure),
        1,
        "{}",
        layer.what
    );
    assert!(layer.what.contains("envoy-gateway"), "{}", layer.what);
}

#[test]
fn a_mesh_httproute_on_a_service_is_applied_by_the_callers_with_istios_translation() {
    // GAMMA: the parent is the Service; retry without attempts is 2 in
    // Istio, on connection failures plus the codes.
    let text = format!(
        "{RATINGS}---\n{}",
        http_route(
            "{group: \"\", kind: Service, name: ratings}",
            "    retry: {codes: [503]}\n    timeouts: {request: 10s, backendRequest: 2s}\n"
        )
    );
    let r = audit_texts(&[("shop.yaml", &text)]);
    let c = route_chain(&r, "HTTPRoute");
    let layer = c.retries.last().unwrap();
    assert_eq!(layer.attempts(FailureClass::Status503), 3, "{}", layer.what);
    assert_eq!(layer.per_try, Some(std::time::Duration::from_secs(2)));
    assert_eq!(c.timeout, Some(std::time::Duration::from_secs(10)));
    assert!(
        layer.what.contains("mesh route on Service"),
        "{}",
        layer.what
    );
}

#[test]
fn an_httproute_without_retry_in_istio_takes_backend_request_as_its_route_timeout() {
    let text = format!(
        "{RATINGS}---\n{}---\n{}",
        gateway("istio"),
        http_route(
            "{name: edge}",
            "    timeouts: {request: 10s, backendRequest: 2s}\n"
        )
    );
    let r = audit_texts(&[("shop.yaml", &text)]);
    let c = route_chain(&r, "HTTPRoute");
    assert_eq!(c.timeout, Some(std::time::Duration::from_secs(2)));
    assert_eq!(c.retries.last().unwrap().per_try, None);
}

#[test]
fn an_httproute_whose_gateway_is_missing_is_istios_only_when_the_inputs_show_istio() {
    let meshed = format!("{RATINGS}---\n{}", http_route("{name: elsewhere}", ""));
    let r = audit_texts(&[("shop.yaml", &meshed)]);
    let layer = route_chain(&r, "HTTPRoute").retries.last().unwrap().clone();
    assert_eq!(
        layer.attempts(FailureClass::ConnectFailure),
        3,
        "{}",
        layer.what
    );
    assert!(layer.what.contains("assumed Istio's"), "{}", layer.what);
    let plain = meshed.replace("labels: {istio-injection: enabled}", "labels: {}");
    let r = audit_texts(&[("shop.yaml", &plain)]);
    let layer = route_chain(&r, "HTTPRoute").retries.last().unwrap().clone();
    assert_eq!(
        layer.attempts(FailureClass::ConnectFailure),
        1,
        "{}",
        layer.what
    );
}

fn vs(name: &str, extra_meta: &str, route: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {name}, namespace: shop{extra_meta}}}
spec:
  hosts: [ratings]
  http:
{route}"
    )
}

const RETRY_5XX: &str = "  - route: [{destination: {host: ratings}}]
    retries: {attempts: 5, retryOn: 5xx}
";
const PLAIN: &str = "  - route: [{destination: {host: ratings}}]
";

#[test]
fn sb304_the_second_mesh_virtual_service_for_a_host_is_dropped() {
    // `a-ratings` sorts first by name: its (default) policy is the one
    // sidecars apply; `b-ratings`'s 5 retries on 5xx never do.
    let text = format!(
        "{RATINGS}---\n{}---\n{}",
        vs("a-ratings", "", PLAIN),
        vs("b-ratings", "", RETRY_5XX)
    );
    let r = audit_texts(&[("shop.yaml", &text)]);
    let f = of(&r, "SB304");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(f[0].object.ends_with("shop/b-ratings"), "{}", f[0].object);
    assert!(f[0].message.contains("shop/a-ratings"), "{}", f[0].message);
    let vs_chains: Vec<_> = r
        .chains
        .iter()
        .filter(|c| c.route.starts_with("VirtualService"))
        .collect();
    assert_eq!(vs_chains.len(), 1, "{:?}", r.chains);
    assert!(vs_chains[0].route.contains("a-ratings"));
    assert!(
        of(&r, "SB301").is_empty(),
        "the dropped 5xx retries amplify nothing"
    );
}

#[test]
fn sb304_creation_time_decides_before_the_name() {
    let text = format!(
        "{RATINGS}---\n{}---\n{}",
        vs(
            "a-ratings",
            ", creationTimestamp: \"2026-03-02T10:00:00Z\"",
            PLAIN
        ),
        vs(
            "b-ratings",
            ", creationTimestamp: \"2026-03-01T10:00:00Z\"",
            RETRY_5XX
        )
    );
    let r = audit_texts(&[("shop.yaml", &text)]);
    let f = of(&r, "SB304");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(f[0].object.ends_with("shop/a-ratings"), "{}", f[0].object);
    assert!(f[0].message.contains("created earlier"), "{}", f[0].message);
}

#[test]
fn sb304_quiet_for_one_virtual_service_per_host_and_for_gateway_routes_that_merge() {
    let one = format!("{RATINGS}---\n{}", vs("a-ratings", "", RETRY_5XX));
    assert!(of(&audit_texts(&[("shop.yaml", &one)]), "SB304").is_empty());
    // At a gateway both merge; the first matches on a prefix, so the
    // second's routes are reached.
    let gw = |name: &str, route: &str| {
        vs(name, "", route).replace(
            "  hosts: [ratings]",
            "  hosts: [ratings]\n  gateways: [edge]",
        )
    };
    let matched =
        "  - match: [{uri: {prefix: /v1}}]\n    route: [{destination: {host: ratings}}]\n";
    let merged = format!("{RATINGS}---\n{}---\n{}", gw("a", matched), gw("b", PLAIN));
    assert!(of(&audit_texts(&[("shop.yaml", &merged)]), "SB304").is_empty());
    // The first without a match takes everything: the second is never used.
    let shadowed = format!("{RATINGS}---\n{}---\n{}", gw("a", PLAIN), gw("b", matched));
    let r = audit_texts(&[("shop.yaml", &shadowed)]);
    let f = of(&r, "SB304");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(f[0].message.contains("without match"), "{}", f[0].message);
}

const FAULT: &str = "  - route: [{destination: {host: ratings}}]
    fault:
      abort: {httpStatus: 503, percentage: {value: 20}}
      delay: {fixedDelay: 5s, percentage: {value: 10}}
";

#[test]
fn sb305_fault_injection_is_on_the_chain_and_outer_retries_multiply_aborts() {
    let text = format!("{RATINGS}---\n{}", vs("ratings", "", FAULT));
    let c = stormbreak_audit::chain::ChainOptions {
        client_attempts: 3,
        ..Default::default()
    };
    let r = audit_with(&[("shop.yaml", &text)], &c);
    let chain = route_chain(&r, "VirtualService");
    let fault = chain.fault.as_ref().expect("the chain carries the fault");
    assert_eq!(fault.abort, Some((0.2, Some(503))));
    assert_eq!(fault.delay, Some((0.1, std::time::Duration::from_secs(5))));
    let f = of(&r, "SB305");
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message.contains("20% aborted with 503"),
        "{}",
        f[0].message
    );
    assert!(
        f[0].message.contains("3 attempts per aborted request"),
        "{}",
        f[0].message
    );
    let text_out = stormbreak_audit::output::text::render(&r, true);
    assert!(
        text_out
            .contains("fault injection at the calling proxy: 20% aborted with 503; 10% delayed 5s"),
        "{text_out}"
    );
    let json = serde_json::to_value(chain).unwrap();
    assert!(json.get("fault").is_some(), "{json}");
}

#[test]
fn sb305_quiet_without_fault_and_a_bad_share_is_an_input_error() {
    let r = audit_texts(&[(
        "shop.yaml",
        &format!("{RATINGS}---\n{}", vs("ratings", "", PLAIN)),
    )]);
    assert!(of(&r, "SB305").is_empty());
    assert!(route_chain(&r, "VirtualService").fault.is_none());
    let bad = FAULT.replace("value: 20", "value: 120");
    let r = audit_texts(&[(
        "shop.yaml",
        &format!("{RATINGS}---\n{}", vs("ratings", "", &bad)),
    )]);
    let e = of(&r, "SB001");
    assert_eq!(e.len(), 1, "{:?}", r.findings);
    assert!(
        e[0].message.contains("0 to 100") && e[0].pos.line > 0,
        "{}",
        e[0].message
    );
}

#[test]
fn text_chains_show_each_retry_layer_and_the_route_timeout() {
    let route = "  - route: [{destination: {host: ratings}}]
    timeout: 3s
    retries: {attempts: 2, retryOn: 5xx, perTryTimeout: 1s}
";
    let text = format!("{RATINGS}---\n{}", vs("ratings", "", route));
    let c = stormbreak_audit::chain::ChainOptions {
        client_attempts: 2,
        ..Default::default()
    };
    let r = audit_with(&[("shop.yaml", &text)], &c);
    let out = stormbreak_audit::output::text::render(&r, true);
    assert!(out.contains("retries, outermost first:"), "{out}");
    assert!(
        out.contains("1 retries on connection failure, 503, timeout: clients: 2 attempts"),
        "{out}"
    );
    assert!(
        out.contains(
            "2 retries on connection failure, 503, timeout: Istio retries: attempts 2, retryOn 5xx"
        ),
        "{out}"
    );
    assert!(out.contains("route timeout 3s"), "{out}");
}
