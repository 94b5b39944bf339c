//! Suppressions: `ignore-check.stormbreak.io/<RULE>: "reason"` on an
//! object (as kube-linter's `ignore-check.kube-linter.io/<check>`), or
//! `# stormbreak:ignore RULE reason` in haproxy.cfg. A suppression without
//! a reason is not honoured. Suppressed findings are counted and listed.

use std::collections::BTreeMap;

use crate::chain::haproxy_key;
use crate::finding::Finding;
use crate::model::{Ignore, Inventory};

/// Splits findings into (kept, suppressed with the reason).
pub fn apply(inv: &Inventory, findings: Vec<Finding>) -> (Vec<Finding>, Vec<(Finding, String)>) {
    let mut map: BTreeMap<String, Vec<Ignore>> = inv.ignores.clone();
    for cfg in &inv.haproxy {
        for p in &cfg.proxies {
            let list: Vec<Ignore> = cfg
                .file_ignores
                .iter()
                .chain(p.ignores.iter())
                .map(|i| Ignore {
                    rule: i.rule.clone(),
                    reason: i.reason.clone(),
                })
                .collect();
            if !list.is_empty() {
                map.entry(haproxy_key(cfg, p)).or_default().extend(list);
            }
        }
    }
    let mut kept = Vec::new();
    let mut suppressed = Vec::new();
    for f in findings {
        let hit = map.get(&f.object).and_then(|l| {
            l.iter()
                .find(|i| i.rule.eq_ignore_ascii_case(f.rule) && !i.reason.is_empty())
        });
        match hit {
            Some(i) if f.rule != crate::rules::PARSE_ERROR => {
                suppressed.push((f, i.reason.clone()))
            }
            _ => kept.push(f),
        }
    }
    (kept, suppressed)
}
