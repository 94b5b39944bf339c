//! SB502: HAProxy backup servers without the headroom for the load they
//! take when every active server is down. Without `option allbackups` only
//! the first backup is used (HAProxy 3.0 manual, `backup`, `option
//! allbackups`).

use super::{Ctx, RuleInfo};
use crate::chain::{active_capacity, haproxy_key};
use crate::finding::{Finding, Severity};

/// SB502.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB502",
    name: "backup-without-headroom",
    severity: Severity::Warning,
    summary: "The backup servers that take over hold fewer connections than the active servers they replace.",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for cfg in &ctx.inv.haproxy {
        for b in cfg.proxies.iter().filter(|p| p.is_backend()) {
            let backups: Vec<_> = b
                .servers
                .iter()
                .filter(|s| s.backup && !s.disabled)
                .collect();
            if backups.is_empty() {
                continue;
            }
            let Some(active) = active_capacity(b) else {
                continue;
            };
            let used: Vec<_> = if b.allbackups {
                backups.clone()
            } else {
                backups[..1].to_vec()
            };
            let Some(cap) = used
                .iter()
                .map(|s| s.maxconn.filter(|m| *m > 0))
                .sum::<Option<u64>>()
            else {
                continue;
            };
            if cap < active {
                let which = if b.allbackups {
                    "all backups (option allbackups)".to_string()
                } else {
                    format!(
                        "only the first backup, {} (no option allbackups)",
                        used[0].name
                    )
                };
                out.push(Finding { rule: RULE.id, severity: Severity::Warning, pos: used[0].pos.clone(), object: haproxy_key(cfg, b), message: format!(
                    "backend {}: when the active servers ({active} connections) fail, {which} takes over with {cap} connections",
                    b.name
                ) });
            }
        }
    }
}
