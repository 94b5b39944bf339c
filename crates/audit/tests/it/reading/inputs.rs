//! Issue 40, classes 2 and 5, the HAProxy file detection of class 3 and
//! the YAML side of class 6: which files are read, at which versions,
//! how often, and what the audit says about the rest.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use stormbreak_audit::chain::ChainOptions;
use stormbreak_audit::finding::{Finding, Severity};
use stormbreak_audit::inputs::{self, Collected, Format, InputOptions};
use stormbreak_audit::{Report, audit};

use crate::common::{audit_fixture, audit_texts, fixtures, of};

fn collect(paths: &[PathBuf]) -> Collected {
    inputs::collect(paths, &[], &InputOptions::default(), &mut std::io::empty()).expect("readable")
}

fn sb001(r: &Report) -> Vec<&Finding> {
    of(r, "SB001")
}

/// A fresh directory under the system's temporary one.
fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "audit-inputs-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: cart\n  namespace: shop\nspec:\n  selector:\n    app: cart\n  ports:\n  - port: 8080\n";

// ---- class 2: versions and kinds ----

#[test]
fn a_virtual_service_at_an_unknown_istio_version_is_reported_and_not_read() {
    let r = audit_fixture("inputs-versions");
    assert_eq!(r.counts.read.get("VirtualService"), None, "{:?}", r.counts);
    let f = sb001(&r)
        .into_iter()
        .find(|f| f.message.contains("networking.istio.io/v3"))
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert_eq!(f.severity, Severity::Info);
    assert_eq!(f.object, "VirtualService bookshop/reviews");
    assert!(
        f.pos.file.ends_with("reviews.yaml") && f.pos.line == 40,
        "{f:?}"
    );
    for v in ["networking.istio.io/v1", "v1beta1", "v1alpha3", "not read"] {
        assert!(f.message.contains(v), "{v}: {}", f.message);
    }
    // Its ten retries are counted nowhere.
    assert!(
        r.chains
            .iter()
            .all(|c| !c.route.starts_with("VirtualService")),
        "{:?}",
        r.chains.iter().map(|c| &c.route).collect::<Vec<_>>()
    );
    assert!(of(&r, "SB301").is_empty(), "{:#?}", of(&r, "SB301"));
}

#[test]
fn the_same_virtual_service_at_each_known_istio_version_is_read() {
    let text = crate::common::read("inputs-versions/reviews.yaml");
    for v in ["v1", "v1beta1", "v1alpha3"] {
        let t = text.replace(
            "networking.istio.io/v3",
            &format!("networking.istio.io/{v}"),
        );
        let r = audit_texts(&[("reviews.yaml", &t)]);
        assert_eq!(r.counts.read.get("VirtualService"), Some(&1), "{v}");
        assert!(sb001(&r).is_empty(), "{v}: {:#?}", r.findings);
    }
}

#[test]
fn an_hpa_at_v2beta1_is_reported_and_a_knative_service_is_not_taken_for_one() {
    let r = audit_fixture("inputs-versions");
    let hpa = sb001(&r)
        .into_iter()
        .find(|f| f.object == "HorizontalPodAutoscaler bookshop/reviews")
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert_eq!(hpa.severity, Severity::Info);
    assert!(
        hpa.message.contains("autoscaling/v2beta1"),
        "{}",
        hpa.message
    );
    assert!(hpa.message.contains("autoscaling/v2"), "{}", hpa.message);
    assert_eq!(r.counts.read.get("HorizontalPodAutoscaler"), None);
    // Another group's `Service` is a kind the audit does not read, no more.
    assert!(
        !r.findings.iter().any(|f| f.object.contains("ratings")),
        "{:#?}",
        r.findings
    );
    assert_eq!(
        r.counts.skipped.get("Service (serving.knative.dev/v1)"),
        Some(&1)
    );
    assert_eq!(r.counts.read.get("Service"), Some(&1));
}

#[test]
fn versions_are_checked_kind_by_kind() {
    let ef = |v: &str| {
        format!(
            "apiVersion: networking.istio.io/{v}\nkind: EnvoyFilter\nmetadata:\n  name: limit\n  namespace: shop\nspec:\n  configPatches: []\n"
        )
    };
    // EnvoyFilter exists only at v1alpha3.
    let r = audit_texts(&[("ef.yaml", &ef("v1alpha3"))]);
    assert!(sb001(&r).is_empty(), "{:#?}", r.findings);
    assert_eq!(r.counts.read.get("EnvoyFilter"), Some(&1));
    let r = audit_texts(&[("ef.yaml", &ef("v1"))]);
    assert_eq!(r.counts.read.get("EnvoyFilter"), None);
    assert_eq!(sb001(&r).len(), 1, "{:#?}", r.findings);
    assert!(
        sb001(&r)[0]
            .message
            .contains("networking.istio.io/v1alpha3")
    );
    // KEDA: v1alpha1 only; a Deployment from before apps/v1.
    for (text, kind) in [
        (
            "apiVersion: keda.sh/v2\nkind: ScaledObject\nmetadata: {name: q}\nspec: {scaleTargetRef: {name: w}, triggers: []}\n",
            "ScaledObject",
        ),
        (
            "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: w}\nspec: {template: {spec: {containers: []}}}\n",
            "Deployment",
        ),
    ] {
        let r = audit_texts(&[("o.yaml", text)]);
        assert_eq!(r.counts.read.get(kind), None, "{kind}");
        let f = sb001(&r);
        assert_eq!(f.len(), 1, "{kind}: {:#?}", r.findings);
        assert_eq!(f[0].severity, Severity::Info);
        assert!(f[0].message.contains("write it as"), "{}", f[0].message);
    }
}

#[test]
fn null_and_empty_documents_are_skipped_as_kubectl_skips_them() {
    for empty in [
        "~\n",
        "null\n",
        "Null # nothing\n",
        "!!null\n",
        "# only a comment\n",
        "\n",
    ] {
        let text = format!("---\n{empty}---\n{SERVICE}---\n{empty}");
        let r = audit_texts(&[("s.yaml", &text)]);
        assert!(sb001(&r).is_empty(), "{empty:?}: {:#?}", r.findings);
        assert_eq!(r.counts.read.get("Service"), Some(&1), "{empty:?}");
    }
    // An empty mapping is no object, and kubectl says so: still reported.
    let r = audit_texts(&[("s.yaml", &format!("{{}}\n---\n{SERVICE}"))]);
    assert_eq!(sb001(&r).len(), 1, "{:#?}", r.findings);
    assert_eq!(sb001(&r)[0].pos.line, 1);
}

#[test]
fn a_list_inside_a_list_is_flattened() {
    let r = audit_fixture("inputs-lists");
    assert!(sb001(&r).is_empty(), "{:#?}", r.findings);
    assert_eq!(r.counts.read.get("Deployment"), Some(&1), "{:?}", r.counts);
    assert_eq!(r.counts.read.get("Service"), Some(&1), "{:?}", r.counts);
    assert!(r.counts.skipped.is_empty(), "{:?}", r.counts.skipped);
    // Each nested item is placed at its outer item's line.
    let lines: Vec<u32> = r
        .chains
        .iter()
        .map(|c| c.pos.line)
        .chain(r.findings.iter().map(|f| f.pos.line))
        .collect();
    assert!(lines.iter().all(|l| *l >= 7), "{lines:?}");
}

#[test]
fn lists_nested_too_deep_are_reported_not_followed() {
    let mut text = String::new();
    for _ in 0..12 {
        text.push_str("{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [");
    }
    text.push_str(
        "{\"apiVersion\": \"v1\", \"kind\": \"Service\", \"metadata\": {\"name\": \"a\"}}",
    );
    text.push_str(&"]}".repeat(12));
    let r = audit_texts(&[("deep.json", &text)]);
    assert_eq!(r.counts.read.get("Service"), None);
    let f = sb001(&r);
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(f[0].message.contains("nested"), "{}", f[0].message);
    // Two levels are read.
    let two = "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"apiVersion\": \"v1\", \"kind\": \"Service\", \"metadata\": {\"name\": \"a\"}}]}]}";
    let r = audit_texts(&[("two.json", two)]);
    assert_eq!(r.counts.read.get("Service"), Some(&1), "{:#?}", r.findings);
}

#[test]
fn the_same_object_in_two_files_is_a_finding_naming_both() {
    let r = audit_fixture("inputs-dupes");
    let dup: Vec<_> = sb001(&r)
        .into_iter()
        .filter(|f| f.message.contains("defined twice"))
        .collect();
    assert_eq!(dup.len(), 1, "{:#?}", r.findings);
    let f = dup[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.object, "Deployment web/frontend");
    assert!(
        f.pos.file.ends_with("prod/frontend.yaml") && f.pos.line == 1,
        "{f:?}"
    );
    assert!(f.message.contains("base/frontend.yaml:1"), "{}", f.message);
    assert!(f.message.contains("keep one"), "{}", f.message);
}

#[test]
fn same_names_in_other_namespaces_or_kinds_are_not_duplicates() {
    let base = crate::common::read("inputs-dupes/base/frontend.yaml");
    let other_ns = base.replace("namespace: web", "namespace: web-canary");
    let svc = crate::common::read("inputs-dupes/base/service.yaml");
    let r = audit_texts(&[("a.yaml", &base), ("b.yaml", &other_ns), ("c.yaml", &svc)]);
    assert!(sb001(&r).is_empty(), "{:#?}", r.findings);
}

#[cfg(unix)]
#[test]
fn one_file_named_twice_is_read_once() {
    let dir = temp_dir("twice");
    std::fs::write(dir.join("a.yaml"), SERVICE).unwrap();
    std::os::unix::fs::symlink("a.yaml", dir.join("b.yaml")).unwrap();
    let c = collect(&[
        dir.join("a.yaml"),
        dir.join(".").join("a.yaml"),
        dir.join("b.yaml"),
        dir.clone(),
    ]);
    assert_eq!(
        c.sources.len(),
        1,
        "{:?}",
        c.sources.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    assert!(c.findings.is_empty(), "{:?}", c.findings);
    let r = audit(c, &ChainOptions::default()).0;
    assert!(sb001(&r).is_empty(), "{:#?}", r.findings);
    // Two files with the same text are two files.
    std::fs::write(dir.join("copy.yaml"), SERVICE).unwrap();
    assert_eq!(collect(std::slice::from_ref(&dir)).sources.len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- class 5: what a directory holds ----

/// Runs `f` on another thread; fails the test if it takes longer than
/// `secs` (the thread is left behind, blocked: the test binary ends).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("still running after {secs} s: the walk hangs"))
}

fn mkfifo(path: &Path) -> bool {
    match std::process::Command::new("mkfifo").arg(path).status() {
        Ok(s) if s.success() => true,
        other => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "mkfifo is needed under CI: {other:?}"
            );
            eprintln!("skipped: no mkfifo ({other:?})");
            false
        }
    }
}

#[cfg(unix)]
#[test]
fn a_fifo_named_yaml_in_a_walked_directory_is_skipped_with_a_message() {
    let dir = temp_dir("fifo");
    std::fs::write(dir.join("a.yaml"), SERVICE).unwrap();
    if !mkfifo(&dir.join("b.yaml")) {
        return;
    }
    let d = dir.clone();
    let c = within(20, move || collect(&[d]));
    assert_eq!(c.sources.len(), 1);
    assert!(c.sources[0].name.ends_with("a.yaml"));
    assert_eq!(c.findings.len(), 1, "{:?}", c.findings);
    let f = &c.findings[0];
    assert!(f.pos.file.ends_with("b.yaml"), "{f:?}");
    assert!(
        f.message.contains("FIFO") && f.message.contains("skipped"),
        "{}",
        f.message
    );
    // A link to it is not followed into it either.
    std::os::unix::fs::symlink("b.yaml", dir.join("c.yaml")).unwrap();
    let d = dir.clone();
    let c = within(20, move || collect(&[d]));
    assert_eq!(c.sources.len(), 1);
    assert_eq!(c.findings.len(), 2, "{:?}", c.findings);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_dangling_symlink_is_reported_and_a_good_one_read() {
    let dir = temp_dir("dangling");
    std::fs::write(dir.join("a.yaml"), SERVICE).unwrap();
    std::os::unix::fs::symlink("gone.yaml", dir.join("old.yaml")).unwrap();
    let c = collect(std::slice::from_ref(&dir));
    assert_eq!(c.sources.len(), 1);
    assert_eq!(c.findings.len(), 1, "{:?}", c.findings);
    let f = &c.findings[0];
    assert!(f.pos.file.ends_with("old.yaml"), "{f:?}");
    assert!(
        f.message.contains("gone.yaml") && f.message.contains("link"),
        "{}",
        f.message
    );
    // A link that leads somewhere is read (once) and says nothing.
    std::fs::remove_file(dir.join("old.yaml")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/b.yaml"), SERVICE.replace("cart", "pay")).unwrap();
    std::os::unix::fs::symlink("sub/b.yaml", dir.join("old.yaml")).unwrap();
    let c = collect(std::slice::from_ref(&dir));
    assert_eq!(c.sources.len(), 2);
    assert!(c.findings.is_empty(), "{:?}", c.findings);
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- class 3 (files): which `.cfg` is HAProxy ----

#[test]
fn a_walk_reads_a_cfg_as_haproxy_by_its_first_section_header() {
    let c = collect(&[fixtures().join("inputs-cfg")]);
    let read: Vec<(&str, Format)> = c
        .sources
        .iter()
        .map(|s| (s.name.rsplit('/').next().unwrap(), s.format))
        .collect();
    assert_eq!(read, vec![("lb.cfg", Format::Haproxy)]);
    assert!(c.findings.is_empty(), "{:?}", c.findings);
    let r = audit(c, &ChainOptions::default()).0;
    assert_eq!(r.counts.read.get("haproxy.cfg"), Some(&1));
}

#[test]
fn sniffing_accepts_each_header_after_comments_and_nothing_else() {
    for head in [
        "global",
        "defaults",
        "frontend www",
        "backend app",
        "listen stats",
        "  defaults base",
    ] {
        let t = format!("# comment\n\n.if defined(EDGE)\n{head}\n    maxconn 10\n");
        assert!(inputs::looks_like_haproxy(t.as_bytes()), "{head}");
    }
    for t in [
        "[metadata]\nname = x\n",
        "define host {\n}\n",
        "globals\n",
        "# backend\n",
        "",
        "key: value\nbackend: x\n",
    ] {
        assert!(!inputs::looks_like_haproxy(t.as_bytes()), "{t:?}");
    }
}

#[test]
fn a_cfg_named_on_the_command_line_is_haproxy_whatever_its_name() {
    let dir = fixtures().join("inputs-cfg");
    let c = collect(&[dir.join("lb.cfg"), dir.join("setup.cfg")]);
    assert!(c.sources.iter().all(|s| s.format == Format::Haproxy));
    assert_eq!(c.sources.len(), 2);
    // A YAML file named on the command line stays YAML.
    let c = collect(&[fixtures().join("inputs-dupes/base/service.yaml")]);
    assert_eq!(c.sources[0].format, Format::Yaml);
}

// ---- class 6 (YAML): messages for people ----

/// The library's budget and option names, and Rust's type names.
const INTERNALS: &[&str] = &[
    "budget", "max_", "serde", "saphyr", "Spanned", "i32", "i64", "u32", "u64", "usize", "struct ",
    "enum ", "Options",
];

#[test]
fn yaml_messages_name_the_line_and_no_library_internals() {
    let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let aliases = {
        let mut t = String::from(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: m\n  labels:\n    a: &a x\n",
        );
        for i in 0..1100 {
            t.push_str(&format!("    k{i}: *a\n"));
        }
        t
    };
    let cases: Vec<(&str, String)> = vec![
        ("deep", format!("apiVersion: v1\nkind: Service\nmetadata: {{name: s}}\nspec: {deep}\n")),
        ("aliases", aliases),
        ("replicas", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: many\n  template: {spec: {containers: []}}\n".into()),
        ("port", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports:\n  - port: 99999999999\n".into()),
        ("flow", "{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\", \"metadata\": {\"name\": \"d\"}, \"spec\": {\"replicas\": \"x\"}}\n".into()),
        ("syntax", "apiVersion: v1\nkind: Service\nmetadata: [\n".into()),
        ("tab", "apiVersion: v1\nkind: Service\nmetadata:\n\tname: s\n".into()),
    ];
    for (what, text) in cases {
        let r = audit_texts(&[("m.yaml", &text)]);
        let f = sb001(&r);
        assert!(!f.is_empty(), "{what}: no finding");
        for f in f {
            assert!(f.pos.line >= 1, "{what}: {f:?}");
            for word in INTERNALS {
                assert!(
                    !f.message.contains(word),
                    "{what}: {word:?} in {:?}",
                    f.message
                );
            }
        }
    }
}

// ---- class 5: big namespaces ----

/// `n` Deployment + Service pairs in one namespace, each Service selecting
/// its own Deployment and each Deployment scaled by its own HPA, as a
/// rendered chart of many small services is; one mesh-internal
/// ServiceEntry selects workloads by label (so the ServiceEntry lookup,
/// which asks every Service what it selects, runs too).
fn pairs(n: usize) -> String {
    let mut t = String::with_capacity(n * 900);
    t.push_str("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata:\n  name: legacy\n  namespace: big\nspec:\n  hosts: [legacy.big.internal]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  workloadSelector:\n    labels: {app: svc0}\n---\n");
    for i in 0..n {
        t.push_str(&format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc{i}\n  namespace: big\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: svc{i}}}\n  template:\n    metadata:\n      labels: {{app: svc{i}, sidecar.istio.io/inject: \"true\"}}\n    spec:\n      containers:\n      - name: app\n        image: registry.example.com/big/svc:1\n        resources: {{requests: {{cpu: 100m}}}}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc{i}\n  namespace: big\nspec:\n  selector: {{app: svc{i}}}\n  ports: [{{port: 80}}]\n---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: svc{i}\n  namespace: big\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: svc{i}}}\n  minReplicas: 2\n  maxReplicas: 10\n  metrics:\n  - type: Resource\n    resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 70}}}}\n  behavior:\n    scaleDown: {{stabilizationWindowSeconds: 0}}\n---\n"
        ));
    }
    t
}

/// Lookup steps counted by `inputs::work` for an audit of `n` pairs.
fn lookups(n: usize) -> (u64, Report) {
    let text = pairs(n);
    inputs::work::take();
    let r = audit_texts(&[("big.yaml", &text)]);
    (inputs::work::take(), r)
}

#[test]
fn work_grows_linearly_with_deployment_service_pairs_in_one_namespace() {
    let (small, r) = lookups(500);
    assert_eq!(r.chains.len(), 500);
    assert!(
        small > 0,
        "no lookup counted: the chain builder counts none"
    );
    let (large, r) = lookups(2000);
    assert_eq!(r.chains.len(), 2000);
    // Four times the objects: four times the work, give or take; the
    // quadratic scan does sixteen times.
    let ratio = large as f64 / small as f64;
    assert!(ratio < 5.0, "{small} → {large} lookups: × {ratio:.1}");
}
