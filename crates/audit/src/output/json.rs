//! JSON, schema `stormbreak.audit/1`: `{schema, summary, findings,
//! suppressed, chains, counts}`. Fields are only ever added within a
//! schema version.

use serde_json::{Value, json};

use crate::Report;
use crate::finding::Severity;

/// The schema name and version.
pub const SCHEMA: &str = "stormbreak.audit/1";

/// Renders the report as a JSON value.
pub fn render(r: &Report) -> Value {
    let count = |sev| r.findings.iter().filter(|f| f.severity == sev).count();
    json!({
        "schema": SCHEMA,
        "summary": {
            "error": count(Severity::Error),
            "warning": count(Severity::Warning),
            "info": count(Severity::Info),
            "suppressed": r.suppressed.len(),
            "routes": r.chains.len(),
        },
        "findings": r.findings,
        "suppressed": r.suppressed.iter().map(|(f, why)| json!({"finding": f, "reason": why})).collect::<Vec<_>>(),
        "chains": r.chains,
        "counts": r.counts,
    })
}
