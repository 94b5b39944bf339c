//! Text: findings grouped by severity, each with `file:line`, then the
//! counts; with `chains`, every route's capacity chain.

use std::fmt::Write;

use crate::Report;
use crate::chain::Chain;
use crate::finding::Severity;
use crate::model::FailureClass;
use crate::units::trim;

/// Renders the report as text.
pub fn render(r: &Report, chains: bool) -> String {
    let mut s = String::new();
    for sev in [Severity::Error, Severity::Warning, Severity::Info] {
        let list: Vec<_> = r.findings.iter().filter(|f| f.severity == sev).collect();
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(s, "{} ({}):", sev.name().to_uppercase(), list.len());
        for f in list {
            let _ = writeln!(s, "  {}: {} {}: {}", f.pos, f.rule, f.object, f.message);
        }
        s.push('\n');
    }
    if chains {
        let _ = writeln!(s, "CAPACITY CHAINS ({}):", r.chains.len());
        for c in &r.chains {
            let _ = writeln!(s, "  {} ({})", c.route, c.pos);
            for (i, h) in c.hops.iter().enumerate() {
                let lim = match (h.limit, h.unknown) {
                    (Some(l), _) => trim(l),
                    (None, true) => "unknown".into(),
                    (None, false) => "unlimited".into(),
                };
                let first = if c.first_to_saturate == Some(i) {
                    "  ← saturates first"
                } else {
                    ""
                };
                let assumed = if h.assumed { " [ASSUMED]" } else { "" };
                let _ = writeln!(
                    s,
                    "    {:<40} {:>10}{assumed}{first}\n      {}",
                    h.name, lim, h.how
                );
            }
            retries(&mut s, c);
        }
        s.push('\n');
    }
    let count = |sev| r.findings.iter().filter(|f| f.severity == sev).count();
    let skipped: usize = r.counts.skipped.values().sum();
    let read: usize = r.counts.read.values().sum();
    let _ = writeln!(
        s,
        "{} errors, {} warnings, {} infos; {} suppressed; {read} objects read, {skipped} skipped (unknown kinds), {} routes",
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Info),
        r.suppressed.len(),
        r.chains.len()
    );
    s
}

/// A chain's retry layers (outermost first), route timeout and injected
/// faults, under its hops.
fn retries(s: &mut String, c: &Chain) {
    let _ = writeln!(s, "    retries, outermost first:");
    if c.retries.is_empty() {
        let _ = writeln!(s, "      none");
    }
    for l in &c.retries {
        let on: Vec<&str> = FailureClass::ALL
            .iter()
            .zip(l.on)
            .filter(|(_, on)| *on)
            .map(|(class, _)| class.name())
            .collect();
        let count = if l.retries == 0 || on.is_empty() {
            "no retries".to_string()
        } else {
            format!("{} retries on {}", l.retries, on.join(", "))
        };
        let _ = writeln!(s, "      {count}: {}", l.what);
    }
    if let Some(t) = c.timeout {
        let _ = writeln!(s, "    route timeout {}", crate::units::show(t));
    }
    if let Some(f) = &c.fault {
        let _ = writeln!(
            s,
            "    fault injection at the calling proxy: {} (before the route's retries)",
            f.describe()
        );
    }
}
