//! Helpers shared by the audit's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use stormbreak_audit::chain::ChainOptions;
use stormbreak_audit::inputs::{self, Collected, Format, InputOptions, Source};
use stormbreak_audit::{Report, audit};

/// The fixtures directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Audits a fixture directory with default options.
pub fn audit_fixture(name: &str) -> Report {
    let dir = fixtures().join(name);
    let c = inputs::collect(&[dir], &[], &InputOptions::default(), &mut std::io::empty())
        .expect("readable");
    audit(c, &ChainOptions::default()).0
}

/// Audits in-memory files: (name, text); names ending in .cfg are HAProxy.
pub fn audit_texts(files: &[(&str, &str)]) -> Report {
    audit_with(files, &ChainOptions::default())
}

/// [`audit_texts`] with chain options.
pub fn audit_with(files: &[(&str, &str)], opts: &ChainOptions) -> Report {
    let sources = files
        .iter()
        .map(|(n, t)| Source {
            name: (*n).into(),
            format: if n.ends_with(".cfg") {
                Format::Haproxy
            } else {
                Format::Yaml
            },
            bytes: t.as_bytes().to_vec(),
        })
        .collect();
    audit(
        Collected {
            sources,
            findings: Vec::new(),
        },
        opts,
    )
    .0
}

/// Rule IDs of a report's findings, sorted and deduplicated.
pub fn ids(r: &Report) -> Vec<&'static str> {
    let mut v: Vec<_> = r.findings.iter().map(|f| f.rule).collect();
    v.sort();
    v.dedup();
    v
}

/// Findings of one rule.
pub fn of<'a>(r: &'a Report, rule: &str) -> Vec<&'a stormbreak_audit::finding::Finding> {
    r.findings.iter().filter(|f| f.rule == rule).collect()
}

/// A fixture file's text.
pub fn read(path: &str) -> String {
    std::fs::read_to_string(fixtures().join(path)).expect("fixture")
}
