//! Hostile inputs are bounded: each ends in a finding with a clear message
//! (never a panic, a hang or unbounded memory). Property tests run the
//! parsers over arbitrary bytes within a fixed case budget.

use std::sync::Arc;

use crate::common::*;
use proptest::prelude::*;
use stormbreak_audit::chain::ChainOptions;
use stormbreak_audit::inputs::{self, InputOptions, haproxy, yaml};

fn sb001(r: &stormbreak_audit::Report) -> Vec<String> {
    of(r, "SB001")
        .iter()
        .map(|f| format!("{}: {}", f.pos, f.message))
        .collect()
}

#[test]
fn an_alias_bomb_is_cut_off_by_the_alias_budget() {
    let mut text = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for i in 1..10 {
        let prev = (b'a' + i - 1) as char;
        let cur = (b'a' + i) as char;
        text.push_str(&format!("  {cur}: &{cur} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
    }
    // A kind the audit reads, so the whole document is parsed.
    let text = text.replace("kind: ConfigMap", "kind: Service");
    let r = audit_texts(&[("bomb.yaml", &text)]);
    let e = sb001(&r);
    assert_eq!(e.len(), 1, "{e:?}");
}

#[test]
fn deep_nesting_is_cut_off_by_the_depth_budget() {
    let depth = 100_000;
    let text = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: deep}}\nspec: {}{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let r = audit_texts(&[("deep.yaml", &text)]);
    assert_eq!(sb001(&r).len(), 1, "{:?}", sb001(&r));
    let flow = format!("{}{}", "{a: ".repeat(10_000), "}".repeat(10_000));
    assert_eq!(sb001(&audit_texts(&[("deep.json", &flow)])).len(), 1);
}

#[test]
fn invalid_utf8_is_reported_with_its_line() {
    let mut bytes = b"apiVersion: v1\nkind: Service\nmetadata:\n  name: \xff\xfe\n".to_vec();
    bytes.extend_from_slice(b"spec: {}\n");
    let c = inputs::Collected {
        sources: vec![inputs::Source {
            name: "bad.yaml".into(),
            format: inputs::Format::Yaml,
            bytes,
        }],
        findings: vec![],
    };
    let r = stormbreak_audit::audit(c, &ChainOptions::default()).0;
    let e = sb001(&r);
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with("bad.yaml:4: not UTF-8"), "{e:?}");
}

#[test]
fn a_50_mb_file_is_refused_after_reading_one_byte_past_the_cap() {
    let dir = std::env::temp_dir().join(format!("audit-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.yaml");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(50 * 1024 * 1024).unwrap(); // sparse: 50 MB of NULs
    let c = inputs::collect(
        std::slice::from_ref(&dir),
        &[],
        &InputOptions::default(),
        &mut std::io::empty(),
    )
    .unwrap();
    assert!(c.sources.is_empty());
    assert_eq!(c.findings.len(), 1);
    assert!(
        c.findings[0]
            .message
            .contains("larger than the 16777216 byte limit"),
        "{}",
        c.findings[0].message
    );
    assert!(c.findings[0].message.contains("--max-file-size"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_endless_stream_is_read_only_up_to_the_cap() {
    // /dev/zero through the same bounded reader stdin uses.
    let bytes = inputs::read_bounded(std::io::repeat(b'a'), 1024).unwrap();
    assert_eq!(bytes.len(), 1025);
}

#[test]
fn many_documents_are_each_parsed_on_their_own() {
    let doc = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {selector: {app: s}}\n";
    let bad = "apiVersion: v1\nkind: Service\nmetadata: [\n";
    let mut text = String::new();
    for i in 0..2000 {
        text.push_str(if i % 100 == 0 { bad } else { doc });
        text.push_str("---\n");
    }
    let r = audit_texts(&[("many.yaml", &text)]);
    assert_eq!(sb001(&r).len(), 20);
    assert_eq!(r.counts.read.get("Service"), Some(&1980));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 200, .. ProptestConfig::default() })]

    #[test]
    fn yaml_reader_never_panics_on_arbitrary_text(s in "(?s).{0,400}") {
        let _ = yaml::read_stream(&Arc::from("p.yaml"), &s);
    }

    #[test]
    fn yaml_reader_never_panics_on_manifest_like_text(
        kind in prop::sample::select(vec!["Deployment", "Service", "HorizontalPodAutoscaler", "DestinationRule", "VirtualService", "List", "EnvoyFilter", "ScaledObject", "Sidecar", "HTTPRoute", "ServiceEntry", "Node"]),
        api in prop::sample::select(vec!["v1", "apps/v1", "autoscaling/v2", "autoscaling/v1", "networking.istio.io/v1", "keda.sh/v1alpha1", "gateway.networking.k8s.io/v1"]),
        body in "[a-zA-Z0-9:{}\\[\\], \n-]{0,300}",
    ) {
        let text = format!("apiVersion: {api}\nkind: {kind}\nmetadata: {{name: x}}\nspec:\n  {body}\n");
        let r = audit_texts(&[("p.yaml", &text)]);
        for f in &r.findings {
            prop_assert!(f.pos.line >= 1 && f.pos.line <= 400, "{f:?}");
        }
    }

    #[test]
    fn call_resolution_never_panics_on_hostile_hosts(
        egress in prop::collection::vec("[a-z.*~/-]{0,20}", 0..6),
        entry in prop::collection::vec("[a-z.*-]{0,20}", 0..4),
        addr in "[a-z.:/*-]{0,24}",
        zone in "[a-z0-9-]{0,6}",
    ) {
        let q = |v: &[String]| v.iter().map(|h| format!("{h:?}")).collect::<Vec<_>>().join(", ");
        let text = format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: n1, labels: {{topology.kubernetes.io/zone: {zone:?}}}}}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: a}}\nspec:\n  template:\n    metadata: {{labels: {{app: a, sidecar.istio.io/inject: \"true\"}}, annotations: {{stormbreak.io/calls: {addr:?}}}}}\n    spec:\n      nodeName: n1\n      containers: [{{name: a, env: [{{name: X, value: {addr:?}}}]}}]\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: a}}\nspec: {{selector: {{app: a}}}}\n---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: s}}\nspec:\n  egress:\n  - hosts: [{}]\n---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: e}}\nspec:\n  hosts: [{}]\n  location: MESH_INTERNAL\n  workloadSelector: {{labels: {{app: a}}}}\n  endpoints: [{{address: {addr:?}}}]\n",
            q(&egress), q(&entry)
        );
        let r = audit_texts(&[("p.yaml", &text)]);
        for f in &r.findings {
            prop_assert!(f.pos.line >= 1 && f.pos.line <= 60, "{f:?}");
        }
    }

    #[test]
    fn haproxy_parser_never_panics(s in "(?s)[a-z0-9 \t\n#:._-]{0,400}") {
        let _ = haproxy::parse(&Arc::from("h.cfg"), &s);
    }

    #[test]
    fn haproxy_audit_never_panics_on_section_soup(lines in prop::collection::vec(prop::sample::select(vec![
        "frontend f", "backend b", "listen l", "defaults", "global", "  maxconn 10", "  maxconn 0", "  retries 5",
        "  retry-on all-retryable-errors", "  default_backend b", "  use_backend l", "  server s a.b.svc.cluster.local:80 maxconn 1 backup",
        "  server t 1.2.3.4:80 maxqueue 0", "  option allbackups", "  timeout queue 1s", "  timeout server 9x", "# stormbreak:ignore SB202 ok",
    ]), 0..40)) {
        let text = lines.join("\n");
        let _ = audit_texts(&[("h.cfg", &text)]);
    }
}

#[test]
fn the_file_size_cap_can_be_raised() {
    let dir = std::env::temp_dir().join(format!("audit-cap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("s.yaml"),
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
    )
    .unwrap();
    let small = InputOptions { max_file_bytes: 10 };
    let c = inputs::collect(
        std::slice::from_ref(&dir),
        &[],
        &small,
        &mut std::io::empty(),
    )
    .unwrap();
    assert!(c.sources.is_empty() && c.findings.len() == 1);
    let c = inputs::collect(
        std::slice::from_ref(&dir),
        &[],
        &InputOptions::default(),
        &mut std::io::empty(),
    )
    .unwrap();
    assert_eq!(c.sources.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
