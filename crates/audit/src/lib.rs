//! `stormbreak-audit`: reads the Kubernetes, Istio, Gateway API, KEDA and
//! HAProxy configs a platform team already has and says, before the
//! incident, which hop saturates first, which autoscaler cannot see it and
//! how many attempts one user request can become.
//!
//! Pipeline: [`inputs`] (files, bounded) → [`model::Inventory`] (typed
//! objects with positions) → [`chain`] (the capacity chain of each route)
//! → [`rules`] (findings) → [`output`] (text, JSON, SARIF); [`export`]
//! writes the topology as a Stormbreak scenario.

pub mod chain;
pub mod finding;
pub mod inputs;
pub mod model;
pub mod output;
pub mod rules;
pub mod suppress;
pub mod units;

use chain::{Chain, ChainOptions};
use finding::{Finding, Severity};
use model::Counts;

/// Everything an audit found.
#[derive(Debug)]
pub struct Report {
    /// Findings not suppressed, sorted by file, line and rule.
    pub findings: Vec<Finding>,
    /// Suppressed findings with their reasons.
    pub suppressed: Vec<(Finding, String)>,
    /// Every route's capacity chain.
    pub chains: Vec<Chain>,
    /// Objects read and skipped, by kind.
    pub counts: Counts,
}

impl Report {
    /// The highest severity among the findings.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
}

/// Runs the audit over collected inputs.
pub fn audit(collected: inputs::Collected, opts: &ChainOptions) -> (Report, model::Inventory) {
    let mut inv = model::load(&collected.sources);
    let chains = chain::build(&inv, opts);
    let mut findings = collected.findings;
    findings.append(&mut inv.findings);
    findings.extend(rules::run(&rules::Ctx {
        inv: &inv,
        chains: &chains,
        opts,
    }));
    let (mut kept, suppressed) = suppress::apply(&inv, findings);
    kept.sort_by(|a, b| (&a.pos, a.rule).cmp(&(&b.pos, b.rule)));
    kept.dedup();
    let counts = inv.counts.clone();
    (
        Report {
            findings: kept,
            suppressed,
            chains,
            counts,
        },
        inv,
    )
}

pub mod export;

/// The rules' documentation, docs/audit-rules.md, as built in.
pub const RULES_DOC: &str = include_str!("../../../docs/audit-rules.md");

/// `--explain RULE`: the rule's section of docs/audit-rules.md.
pub fn explain(rule: &str) -> Option<String> {
    let r = rules::rule(rule)?;
    let head = format!("## {}", r.id);
    let start = RULES_DOC.find(&head)?;
    let rest = &RULES_DOC[start..];
    let end = rest[3..].find("\n## ").map(|i| i + 3).unwrap_or(rest.len());
    Some(rest[..end].trim().to_string())
}
