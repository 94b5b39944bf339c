//! Istio's DestinationRule lookup: client namespace, then the service's,
//! then the root namespace; `exportTo`; short names, FQDNs and wildcards.
//! Each case where a rule must apply and where it must not.

use crate::common::*;
use stormbreak_audit::chain::HopKind;

/// The fixture without the documents naming these DestinationRules.
fn without(names: &[&str]) -> String {
    read("lookup/mesh.yaml")
        .split("\n---\n")
        .filter(|d| !names.iter().any(|n| d.contains(&format!("name: {n},"))))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// The pool hop of the gateway route's chain, by DestinationRule name.
fn pool_of(text: &str) -> Option<String> {
    let r = audit_texts(&[("mesh.yaml", text)]);
    let c = r
        .chains
        .iter()
        .find(|c| c.object == "VirtualService bookinfo/reviews-edge")
        .expect("the gateway route has a chain");
    c.hops
        .iter()
        .find(|h| h.kind == HopKind::Pool)
        .map(|h| h.name.clone())
}

#[test]
fn the_clients_namespace_comes_first() {
    // The ingress gateway (istio-ingress) is the client: its namespace's
    // rule wins over the service's and the root's.
    let p = pool_of(&read("lookup/mesh.yaml")).expect("a pool");
    assert!(p.contains("istio-ingress/in-client"), "{p}");
}

#[test]
fn then_the_services_namespace_then_the_root() {
    let p = pool_of(&without(&["in-client"])).expect("a pool");
    assert!(p.contains("bookinfo/in-service"), "{p}");
    let p = pool_of(&without(&["in-client", "in-service"])).expect("a pool");
    assert!(
        p.contains("istio-system/in-root"),
        "wildcard in the root: {p}"
    );
}

#[test]
fn rules_off_the_lookup_path_or_for_another_host_never_apply() {
    // Left: a short host resolved in `other` (another service) and an
    // exact FQDN in `other`, a namespace off the lookup path.
    assert_eq!(
        pool_of(&without(&["in-client", "in-service", "in-root"])),
        None
    );
}

#[test]
fn export_to_hides_a_rule_from_other_namespaces() {
    // The service's rule exported to its own namespace only: the gateway
    // in istio-ingress cannot see it and falls through to the root.
    let text = without(&["in-client"]).replace(
        "metadata: {name: in-service, namespace: bookinfo}\nspec:\n",
        "metadata: {name: in-service, namespace: bookinfo}\nspec:\n  exportTo: [\".\"]\n",
    );
    assert!(text.contains("exportTo"));
    let p = pool_of(&text).expect("a pool");
    assert!(p.contains("istio-system/in-root"), "{p}");
    // Exported by name to the client's namespace: visible again.
    let named = text.replace("exportTo: [\".\"]", "exportTo: [istio-ingress]");
    let p = pool_of(&named).expect("a pool");
    assert!(p.contains("bookinfo/in-service"), "{p}");
    // A client-namespace rule exported away from its own namespace is not
    // visible to the client in it.
    let away = read("lookup/mesh.yaml").replace(
        "metadata: {name: in-client, namespace: istio-ingress}\nspec:\n",
        "metadata: {name: in-client, namespace: istio-ingress}\nspec:\n  exportTo: [bookinfo]\n",
    );
    let p = pool_of(&away).expect("a pool");
    assert!(p.contains("bookinfo/in-service"), "{p}");
}

#[test]
fn an_exact_host_beats_a_wildcard_in_the_same_namespace() {
    let text = without(&["in-client", "in-service"]).replace(
        "# Short host:",
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: root-exact, namespace: istio-system}\nspec:\n  host: reviews.bookinfo.svc.cluster.local\n  trafficPolicy:\n    connectionPool:\n      http: {http2MaxRequests: 7}\n---\n# Short host:",
    );
    let p = pool_of(&text).expect("a pool");
    assert!(p.contains("istio-system/root-exact"), "{p}");
}

/// A mesh route to reviews, a caller in `shop` (its env names reviews by
/// `name.namespace:port`) and a DestinationRule in `shop`.
const MESH: &str = "\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels: {istio-injection: enabled}\n---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: reviews-mesh, namespace: bookinfo}\nspec:\n  hosts: [reviews]\n  http:\n  - route:\n    - destination: {host: reviews}\n---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: shop-side, namespace: shop}\nspec:\n  host: reviews.bookinfo.svc.cluster.local\n  trafficPolicy:\n    connectionPool:\n      http: {http2MaxRequests: 3}\n";

const CALLER: &str = "\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: storefront, namespace: shop}\nspec:\n  replicas: 4\n  selector: {matchLabels: {app: storefront}}\n  template:\n    metadata: {labels: {app: storefront}}\n    spec:\n      containers:\n      - name: storefront\n        image: storefront:1\n        env: [{name: REVIEWS_ADDR, value: \"reviews.bookinfo:9080\"}]\n";

fn mesh_pool(text: &str) -> (String, Option<f64>) {
    let r = audit_texts(&[("mesh.yaml", text)]);
    let c = r
        .chains
        .iter()
        .find(|c| c.object == "VirtualService bookinfo/reviews-mesh")
        .expect("the mesh route has a chain");
    let h = c
        .hops
        .iter()
        .find(|h| h.kind == HopKind::Pool)
        .expect("a pool");
    (h.name.clone(), h.limit)
}

#[test]
fn a_mesh_route_applies_each_callers_own_lookup() {
    // The caller in shop finds shop's rule first: 4 pods × 3.
    let (name, limit) = mesh_pool(&(read("lookup/mesh.yaml") + MESH + CALLER));
    assert!(name.contains("shop/shop-side"), "{name}");
    assert_eq!(limit, Some(12.0));
    // No caller known: the lookup starts at the service's namespace and
    // shop's rule is not on it; one caller, said so.
    let (name, limit) = mesh_pool(&(read("lookup/mesh.yaml") + MESH));
    assert!(name.contains("bookinfo/in-service"), "{name}");
    assert_eq!(limit, Some(50.0));
}

#[test]
fn a_gateway_applies_only_virtual_services_exported_to_it() {
    // reviews-edge (bookinfo) is bound to the gateway in istio-ingress:
    // exported to bookinfo only, the gateway never applies it, so it
    // routes nothing and has no chain.
    let chain = |text: &str| {
        audit_texts(&[("mesh.yaml", text)])
            .chains
            .iter()
            .any(|c| c.object == "VirtualService bookinfo/reviews-edge")
    };
    let vs = "metadata: {name: reviews-edge, namespace: bookinfo}\nspec:\n";
    let with = |export: &str| {
        let text = read("lookup/mesh.yaml").replace(vs, &format!("{vs}  exportTo: {export}\n"));
        assert!(text.contains("exportTo"));
        text
    };
    assert!(!chain(&with("[\".\"]")));
    assert!(!chain(&with("[bookinfo]")));
    assert!(chain(&with("[istio-ingress]")));
    assert!(chain(&with("[\"*\"]")));
    assert!(chain(&read("lookup/mesh.yaml")));
}

/// The chains' objects, and the pool hop's `how` of the chain for `object`.
fn chains_and_pool_how(text: &str, object: &str) -> (Vec<String>, Option<String>) {
    let r = audit_texts(&[("mesh.yaml", text)]);
    let objects = r.chains.iter().map(|c| c.object.clone()).collect();
    let how = r
        .chains
        .iter()
        .find(|c| c.object == object)
        .and_then(|c| c.hops.iter().find(|h| h.kind == HopKind::Pool))
        .map(|h| h.how.clone());
    (objects, how)
}

/// The fixture without its gateway route, with the mesh route to reviews
/// (its `hosts` replaced by HOSTS, in namespace NS) and storefront in shop
/// calling `reviews.bookinfo`.
fn mesh_route_with_hosts(hosts: &str, ns: &str) -> String {
    let vs = MESH
        .replace("hosts: [reviews]", &format!("hosts: [{hosts}]"))
        .replace(
            "name: reviews-mesh, namespace: bookinfo",
            &format!("name: reviews-mesh, namespace: {ns}"),
        )
        .replace(
            "destination: {host: reviews}",
            "destination: {host: reviews.bookinfo.svc.cluster.local}",
        );
    assert!(vs.contains(&format!("hosts: [{hosts}]")));
    without(&["reviews-edge"]) + &vs + CALLER
}

#[test]
fn a_virtual_service_host_is_read_as_istio_reads_it() {
    // storefront (shop) calls `reviews.bookinfo`: the call lands on the
    // host of Service reviews in bookinfo, reviews.bookinfo.svc.cluster.local.
    // A VirtualService in bookinfo routes it when one of its hosts, read as
    // Istio reads it, is that host: the short name (read in the
    // VirtualService's namespace) or the FQDN, in any case.
    for hosts in [
        "reviews",
        "reviews.bookinfo.svc.cluster.local",
        "Reviews.Bookinfo.Svc.Cluster.Local",
    ] {
        let (objects, how) = chains_and_pool_how(
            &mesh_route_with_hosts(hosts, "bookinfo"),
            "VirtualService bookinfo/reviews-mesh",
        );
        let how = how.unwrap_or_else(|| panic!("{hosts}: a route chain, got {objects:?}"));
        assert!(
            how.contains(
                "calling pods (shop/storefront) [env or stormbreak.io/calls reviews.bookinfo, routed by a mesh VirtualService for reviews.bookinfo]"
            ),
            "{hosts}: {how}"
        );
        assert!(
            !objects.iter().any(|o| o == "Service bookinfo/reviews"),
            "{hosts}: routed, so no unrouted mesh chain: {objects:?}"
        );
    }
    // A host with a dot is taken as written: `reviews.bookinfo` (and
    // `reviews.bookinfo.svc`) are hosts no Service has, though Kubernetes
    // DNS would complete them to reviews' FQDN. The VirtualService is
    // attached to nothing and has no chain; the call lands on reviews'
    // own host, the unrouted mesh chain.
    for hosts in ["reviews.bookinfo", "reviews.bookinfo.svc"] {
        let (objects, how) = chains_and_pool_how(
            &mesh_route_with_hosts(hosts, "bookinfo"),
            "Service bookinfo/reviews",
        );
        assert!(
            !objects
                .iter()
                .any(|o| o == "VirtualService bookinfo/reviews-mesh"),
            "{hosts}: {objects:?}"
        );
        let how = how.unwrap_or_else(|| panic!("{hosts}: the mesh chain, got {objects:?}"));
        assert!(
            how.contains(
                "calling pods (shop/storefront) [env or stormbreak.io/calls reviews.bookinfo]"
            ),
            "{hosts}: {how}"
        );
        assert!(!how.contains("routed by"), "{hosts}: {how}");
    }
    // The short name in a VirtualService in shop is
    // reviews.shop.svc.cluster.local, whatever namespace the caller or the
    // destination is in: it does not route the call to reviews.bookinfo.
    let (_, how) = chains_and_pool_how(
        &mesh_route_with_hosts("reviews", "shop"),
        "VirtualService shop/reviews-mesh",
    );
    let how = how.expect("its destination is reviews: a chain");
    assert!(how.contains("calling pods (shop/storefront)"), "{how}");
    assert!(!how.contains("routed by"), "{how}");
}

#[test]
fn a_service_export_to_annotation_decides_whether_the_gateway_reaches_it() {
    // reviews-edge (bound to the gateway in istio-ingress) routes to
    // reviews: only when the Service is exported to istio-ingress does the
    // gateway have a cluster for it.
    let chain = |export: &str| {
        let text = read("lookup/mesh.yaml").replace(
            "kind: Service\nmetadata: {name: reviews, namespace: bookinfo}\n",
            &format!(
                "kind: Service\nmetadata:\n  name: reviews\n  namespace: bookinfo\n  annotations:\n    networking.istio.io/exportTo: {export:?}\n"
            ),
        );
        assert!(text.contains("exportTo"));
        let r = audit_texts(&[("mesh.yaml", &text)]);
        // The annotation reads cleanly; the rules Istio's lookup passes
        // over and a route hidden from the gateway are said (SB001 info,
        // placed on no chain), not dropped.
        assert!(
            r.findings
                .iter()
                .all(|f| f.rule != "SB001"
                    || f.severity == stormbreak_audit::finding::Severity::Info),
            "{:?}",
            r.findings
        );
        r.chains
            .iter()
            .any(|c| c.object == "VirtualService bookinfo/reviews-edge")
    };
    for seen in ["", "*", "istio-ingress", "bookinfo, istio-ingress"] {
        assert!(chain(seen), "{seen:?}");
    }
    for hidden in [".", "bookinfo", "~", "other,bookinfo"] {
        assert!(!chain(hidden), "{hidden:?}");
    }
}
