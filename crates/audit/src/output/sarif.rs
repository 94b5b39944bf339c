//! SARIF 2.1.0 through serde-sarif: one run, every rule described with a
//! `helpUri` into docs/audit-rules.md, results with file and line, and
//! suppressed findings carried as results with `suppressions`.

use serde_sarif::sarif::{
    ArtifactLocation, Location, Message, MultiformatMessageString, PhysicalLocation, Region,
    ReportingDescriptor, Result as SarifResult, ResultLevel, Run, Sarif, Suppression, Tool,
    ToolComponent,
};

use crate::Report;
use crate::finding::{Finding, Severity};
use crate::rules::RULES;

/// Where rule documentation lives, relative to the repository root.
pub const RULES_DOC: &str = "docs/audit-rules.md";

fn level(s: Severity) -> ResultLevel {
    match s {
        Severity::Error => ResultLevel::Error,
        Severity::Warning => ResultLevel::Warning,
        Severity::Info => ResultLevel::Note,
    }
}

fn result(f: &Finding, suppressed: Option<&str>) -> SarifResult {
    let region = Region::builder()
        .start_line(f.pos.line.max(1) as i64)
        .build();
    let loc = Location::builder()
        .physical_location(
            PhysicalLocation::builder()
                .artifact_location(
                    ArtifactLocation::builder()
                        .uri(f.pos.file.to_string())
                        .build(),
                )
                .region(region)
                .build(),
        )
        .build();
    let idx = RULES.iter().position(|r| r.id == f.rule).unwrap_or(0) as i64;
    let msg = Message::builder()
        .text(format!("{}: {}", f.object, f.message))
        .build();
    let b = SarifResult::builder()
        .rule_id(f.rule.to_string())
        .rule_index(idx)
        .level(level(f.severity))
        .message(msg)
        .locations(vec![loc]);
    match suppressed {
        Some(why) => b
            .suppressions(vec![
                Suppression::builder()
                    .kind(serde_json::json!("inSource"))
                    .justification(why.to_string())
                    .build(),
            ])
            .build(),
        None => b.build(),
    }
}

/// Where rule helpUris point by default: the rules page in the
/// repository (SARIF requires an absolute URI).
pub fn default_help_base() -> String {
    format!("{}/blob/main/", env!("CARGO_PKG_REPOSITORY"))
}

/// Renders the report as a SARIF log; `base_uri` prefixes rule helpUris
/// (see [`default_help_base`]).
pub fn render(r: &Report, base_uri: &str) -> Sarif {
    let rules: Vec<ReportingDescriptor> = RULES
        .iter()
        .map(|rule| {
            ReportingDescriptor::builder()
                .id(rule.id.to_string())
                .name(rule.name.to_string())
                .short_description(
                    MultiformatMessageString::builder()
                        .text(rule.summary.to_string())
                        .build(),
                )
                .help_uri(format!("{base_uri}{RULES_DOC}#{}", rule.id.to_lowercase()))
                .build()
        })
        .collect();
    let driver = ToolComponent::builder()
        .name("stormbreak-audit")
        .version(env!("CARGO_PKG_VERSION").to_string())
        .rules(rules)
        .build();
    let mut results: Vec<SarifResult> = r.findings.iter().map(|f| result(f, None)).collect();
    results.extend(r.suppressed.iter().map(|(f, why)| result(f, Some(why))));
    let run = Run::builder()
        .tool(Tool::builder().driver(driver).build())
        .results(results)
        .build();
    Sarif::builder()
        .schema(serde_sarif::sarif::SCHEMA_URL.to_string())
        .version(serde_json::json!("2.1.0"))
        .runs(vec![run])
        .build()
}
