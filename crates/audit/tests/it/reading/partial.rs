//! Class 1 (partial inputs are the normal case), class 4 (selectors as
//! Kubernetes applies them) and class 7's property: removing one file
//! never loses a finding about the others unless it depended on that file.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use crate::common::{audit_fixture, audit_texts, fixtures, of, read};
use stormbreak_audit::chain::{Chain, ChainOptions, HopKind};
use stormbreak_audit::inputs::{Collected, Format, Source};
use stormbreak_audit::{Report, audit};

fn chain<'a>(r: &'a Report, route: &str) -> &'a Chain {
    r.chains
        .iter()
        .find(|c| c.route.contains(route))
        .unwrap_or_else(|| {
            let all: Vec<_> = r.chains.iter().map(|c| &c.route).collect();
            panic!("no chain {route:?} among {all:?}")
        })
}

/// The files of a fixture directory, as (name, text), sorted.
fn files(dir: &str) -> Vec<(String, String)> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures().join(dir))
        .expect("fixture dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let text = read(&format!("{dir}/{n}"));
            (format!("{dir}/{n}"), text)
        })
        .collect()
}

fn audit_files(fs: &[(String, String)]) -> Report {
    let v: Vec<(&str, &str)> = fs.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    audit_texts(&v)
}

fn without(fs: &[(String, String)], suffix: &str) -> Vec<(String, String)> {
    let kept: Vec<_> = fs
        .iter()
        .filter(|(n, _)| !n.ends_with(suffix))
        .cloned()
        .collect();
    assert_eq!(kept.len() + 1, fs.len(), "{suffix} in the fixture");
    kept
}

#[test]
fn an_istio_folder_without_workloads_gives_chains_with_unknown_hops() {
    let r = audit_fixture("partial-istio");
    // Before: `0 routes`, the pools dropped without a word.
    assert!(!r.chains.is_empty());
    let c = chain(&r, "VirtualService shop/reviews http[0]");
    let pool = &c.hops[0];
    assert_eq!(pool.kind, HopKind::Pool);
    assert_eq!(pool.object, "DestinationRule shop/reviews");
    assert!(pool.limit.is_some(), "{pool:?}");
    let last = c.hops.last().unwrap();
    assert!(last.unknown && last.limit.is_none(), "{last:?}");
    assert!(
        last.how
            .contains("Service shop/reviews is not among the inputs"),
        "says what would fill it: {}",
        last.how
    );
    assert_eq!(
        c.first_to_saturate,
        Some(0),
        "the known hop saturates first"
    );
    // A rule that needs only the known hops still runs: retries written,
    // no budget on the path.
    assert!(
        of(&r, "SB303")
            .iter()
            .any(|f| f.object == "VirtualService shop/reviews"),
        "{:?}",
        r.findings
    );
    // A DestinationRule no route names still bounds its callers.
    let ratings = chain(&r, "mesh → ratings.shop.svc.cluster.local");
    assert_eq!(ratings.hops[0].kind, HopKind::Pool);
    assert_eq!(ratings.hops[0].limit, Some(8.0));
    assert!(ratings.hops[1].unknown);
}

#[test]
fn chains_text_shows_unknown_hops_not_zero_routes() {
    let r = audit_fixture("partial-istio");
    let text = stormbreak_audit::output::text::render(&r, true);
    assert!(!text.contains(" 0 routes"), "{text}");
    assert!(text.contains("unknown"), "{text}");
    assert!(
        text.contains("add it and the Deployment it selects"),
        "{text}"
    );
}

#[test]
fn an_object_the_audit_cannot_place_is_said_never_dropped() {
    let r = audit_fixture("partial-istio");
    let info: Vec<_> = of(&r, "SB001")
        .into_iter()
        .filter(|f| f.severity == stormbreak_audit::finding::Severity::Info)
        .collect();
    assert_eq!(info.len(), 1, "{info:?}");
    assert_eq!(info[0].object, "DestinationRule shop/external-defaults");
    assert!(info[0].message.contains("*.payments.example.com"));
    assert!(info[0].pos.line > 0, "points at the host");
    // Placed objects are not said to be unplaced.
    let r = audit_fixture("partial-versions");
    assert!(of(&r, "SB001").is_empty(), "{:?}", r.findings);
}

#[test]
fn a_pool_applies_whether_or_not_the_destination_shows_injection() {
    let fs = files("partial-versions");
    // No VirtualService, pods without a sidecar: the callers' pool still
    // applies (before: no chain at all).
    let r = audit_files(&without(&fs, "reviews-virtualservice.yaml"));
    let c = chain(&r, "mesh → books/reviews");
    assert_eq!(c.hops[0].kind, HopKind::Pool);
    assert_eq!(c.hops[0].limit, Some(200.0));
    // Must not change: without the DestinationRule nothing says these
    // pods are in the mesh, and a plain Service gets no mesh chain.
    let fs = without(&fs, "reviews-virtualservice.yaml");
    let r = audit_files(&without(&fs, "reviews-destinationrule.yaml"));
    assert!(r.chains.is_empty(), "{:?}", r.chains);
}

#[test]
fn a_service_without_its_deployments_names_what_would_fill_the_hop() {
    let fs = files("partial-versions");
    let fs = without(&fs, "reviews-v1.yaml");
    let fs = without(&fs, "reviews-v2.yaml");
    let r = audit_files(&fs);
    let c = chain(&r, "VirtualService books/reviews http[1]");
    assert_eq!(c.hops[0].limit, Some(200.0));
    let last = c.hops.last().unwrap();
    assert!(last.unknown, "{last:?}");
    assert!(
        last.how.contains(
            "add the Deployment selected by Service books/reviews (selector app=reviews)"
        ),
        "{}",
        last.how
    );
}

#[test]
fn a_service_selecting_two_deployments_sums_them_per_subset() {
    let r = audit_fixture("partial-versions");
    // No subset: v1 (HPA min 4 × 8 workers) + v2 (3 × 4) = 44; before,
    // only the first Deployment counted (32).
    let all = chain(&r, "VirtualService books/reviews http[1]");
    let app = all.hops.iter().find(|h| h.kind == HopKind::App).unwrap();
    assert_eq!(app.limit, Some(44.0), "{}", app.how);
    assert!(app.how.contains("selects 2 workloads"), "{}", app.how);
    assert_eq!(all.workloads.len(), 2);
    // Subset v2: only the pods with version=v2 (3 × 4).
    let v2 = chain(&r, "VirtualService books/reviews http[0]");
    let app = v2.hops.iter().find(|h| h.kind == HopKind::App).unwrap();
    assert_eq!(app.limit, Some(12.0), "{}", app.how);
    assert_eq!(app.name, "reviews-v2 app");
}

#[test]
fn subsets_of_a_destination_rule_inside_a_list_pick_their_workloads() {
    // `kubectl get destinationrules -o yaml` writes a List; its items have
    // no text of their own, so subset labels must come from the object as
    // read, not from re-reading a file.
    let fs = files("partial-versions");
    let mut kept = without(&fs, "reviews-destinationrule.yaml");
    let dr = read("partial-versions/reviews-destinationrule.yaml");
    let item: String = dr
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let lead = if i == 0 { "- " } else { "  " };
            format!("{lead}{l}\n")
        })
        .collect();
    kept.push((
        "partial-versions/rules-list.yaml".into(),
        format!("apiVersion: v1\nkind: List\nitems:\n{item}"),
    ));
    let (r, _) = run(&kept);
    let v2 = chain(&r, "VirtualService books/reviews http[0]");
    let app = v2.hops.iter().find(|h| h.kind == HopKind::App).unwrap();
    assert_eq!(app.limit, Some(12.0), "{}", app.how);
    assert_eq!(app.name, "reviews-v2 app");
}

#[test]
fn one_deployment_behind_a_service_is_read_as_before() {
    // Must not change: one Deployment, no subset.
    let fs = files("partial-versions");
    let r = audit_files(&without(&fs, "reviews-v2.yaml"));
    let c = chain(&r, "VirtualService books/reviews http[1]");
    let app = c.hops.iter().find(|h| h.kind == HopKind::App).unwrap();
    assert_eq!(app.limit, Some(32.0));
    assert_eq!(app.name, "reviews-v1 app");
    // A subset no Deployment carries is unknown, and says which labels.
    let v2 = chain(&r, "VirtualService books/reviews http[0]");
    let last = v2.hops.last().unwrap();
    assert!(last.unknown && last.limit.is_none(), "{last:?}");
    assert!(
        last.how.contains("subset v2's labels version=v2"),
        "{}",
        last.how
    );
}

/// The multi-file fixture of the property: both partial fixtures.
fn property_files() -> Vec<(String, String)> {
    let mut fs = files("partial-versions");
    fs.extend(files("partial-istio"));
    fs
}

fn run(fs: &[(String, String)]) -> (Report, stormbreak_audit::model::Inventory) {
    let sources = fs
        .iter()
        .map(|(n, t)| Source {
            name: n.as_str().into(),
            format: Format::Yaml,
            bytes: t.as_bytes().to_vec(),
        })
        .collect();
    audit(
        Collected {
            sources,
            findings: Vec::new(),
        },
        &ChainOptions::default(),
    )
}

/// The files a finding depended on, read off the full run: the file it
/// points at, and the file of every object in its support. The support is
/// the object the finding names and, for every chain that object is part
/// of (the chain's route object, one of its hops' objects, or an object it
/// was built from, `Chain::uses`), all of that chain's objects: its route
/// object, each hop's object and position, and what it was built from (the
/// Service resolved, the DestinationRules consulted, the destination's
/// workloads and their autoscalers, the callers). A retry finding (SB3xx)
/// is about the route's retry policy and budget, which the route and its
/// DestinationRules set: its support is those alone, never the Service or
/// the workloads behind the route (whose absence leaves an unknown hop,
/// not a route without retries).
fn depended_on(
    f: &stormbreak_audit::finding::Finding,
    r: &Report,
    inv: &stormbreak_audit::model::Inventory,
) -> BTreeSet<String> {
    let mut file_of: BTreeMap<String, String> = BTreeMap::new();
    let k = stormbreak_audit::model::key;
    for w in &inv.workloads {
        file_of.insert(w.key(), w.src.pos.file.to_string());
    }
    for s in &inv.services {
        file_of.insert(
            k("Service", &s.namespace, &s.name),
            s.src.pos.file.to_string(),
        );
    }
    for d in &inv.destination_rules {
        file_of.insert(
            k("DestinationRule", &d.namespace, &d.name),
            d.src.pos.file.to_string(),
        );
    }
    for ro in &inv.routes {
        file_of.insert(
            k(ro.kind, &ro.namespace, &ro.name),
            ro.src.pos.file.to_string(),
        );
    }
    for a in &inv.autoscalers {
        file_of.insert(k(a.kind, &a.namespace, &a.name), a.src.pos.file.to_string());
    }
    let retry_rule = f.rule.starts_with("SB3");
    let policy = |o: &String| {
        [
            "DestinationRule ",
            "VirtualService ",
            "HTTPRoute ",
            "HAProxy ",
        ]
        .iter()
        .any(|k| o.starts_with(k))
    };
    let mut files = BTreeSet::from([f.pos.file.to_string()]);
    let mut objects = BTreeSet::from([f.object.clone()]);
    for c in &r.chains {
        let mut of_chain: BTreeSet<String> = c.hops.iter().map(|h| h.object.clone()).collect();
        of_chain.insert(c.object.clone());
        of_chain.extend(c.uses.iter().cloned());
        if !of_chain.contains(&f.object) {
            continue;
        }
        files.insert(c.pos.file.to_string());
        if retry_rule {
            objects.extend(of_chain.into_iter().filter(policy));
        } else {
            files.extend(c.hops.iter().map(|h| h.pos.file.to_string()));
            objects.extend(of_chain);
        }
    }
    files.extend(objects.iter().filter_map(|o| file_of.get(o).cloned()));
    files
}

type Seen = BTreeSet<(&'static str, String, String, u32)>;

fn seen(r: &Report) -> Seen {
    r.findings
        .iter()
        .map(|f| (f.rule, f.object.clone(), f.pos.file.to_string(), f.pos.line))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Removing any one file (the files in any order) never makes a
    /// finding about the remaining files disappear unless that finding
    /// depended on the removed file ([`depended_on`]).
    #[test]
    fn removing_one_file_loses_only_findings_that_depended_on_it(
        remove in 0usize..10,
        order in Just((0usize..10).collect::<Vec<_>>()).prop_shuffle(),
    ) {
        let all = property_files();
        prop_assert_eq!(all.len(), 10);
        let (full, inv) = run(&all);
        prop_assert!(!full.findings.is_empty());
        let gone = &all[remove].0;
        let rest: Vec<_> = order
            .iter()
            .filter(|i| **i != remove)
            .map(|i| all[*i].clone())
            .collect();
        let (part, _) = run(&rest);
        let kept = seen(&part);
        for f in &full.findings {
            if f.pos.file.as_ref() == gone.as_str() {
                continue;
            }
            if depended_on(f, &full, &inv).contains(gone) {
                continue;
            }
            prop_assert!(
                kept.contains(&(f.rule, f.object.clone(), f.pos.file.to_string(), f.pos.line)),
                "removing {} lost {} {} at {}: {}",
                gone, f.rule, f.object, f.pos, f.message
            );
        }
    }
}

/// A Service over two single-pod Deployments (v1 and v2 of one app) with
/// outlier detection ejecting up to `percent` % of its endpoints.
fn two_versions_with_outlier(percent: u32) -> Report {
    let deployment = |v: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ratings-{v}\n  namespace: shop\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: ratings, version: {v}}}\n  template:\n    metadata:\n      labels: {{app: ratings, version: {v}}}\n      annotations: {{sidecar.istio.io/inject: \"true\"}}\n    spec:\n      containers:\n      - name: app\n        image: registry.example.com/shop/ratings:{v}\n"
        )
    };
    let svc = "apiVersion: v1\nkind: Service\nmetadata:\n  name: ratings\n  namespace: shop\nspec:\n  selector: {app: ratings}\n  ports: [{port: 80}]\n";
    let dr = format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: ratings\n  namespace: shop\nspec:\n  host: ratings\n  trafficPolicy:\n    outlierDetection:\n      consecutive5xxErrors: 5\n      interval: 10s\n      baseEjectionTime: 30s\n      maxEjectionPercent: {percent}\n"
    );
    let (v1, v2) = (deployment("v1"), deployment("v2"));
    audit_texts(&[
        ("v1.yaml", &v1),
        ("v2.yaml", &v2),
        ("svc.yaml", svc),
        ("dr.yaml", &dr),
    ])
}

#[test]
fn outlier_detection_counts_the_endpoints_of_every_selected_workload() {
    // Two endpoints, at most 50 % ejectable: one, so one always serves.
    // Counting the first Deployment's single pod only, every endpoint
    // looked ejectable.
    let r = two_versions_with_outlier(50);
    assert!(of(&r, "SB501").is_empty(), "{:#?}", of(&r, "SB501"));
    // Must still fire: 100 % of the two may go.
    let r = two_versions_with_outlier(100);
    let f = of(&r, "SB501");
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(f[0].message.contains("all 2 endpoints"), "{}", f[0].message);
}
