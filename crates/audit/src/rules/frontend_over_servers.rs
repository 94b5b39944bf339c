//! SB202: an HAProxy frontend whose maxconn is far above the sum of its
//! backend servers' maxconn: connections pile up in the backend queue
//! while the frontend keeps accepting (HAProxy 3.0 manual, `maxconn`,
//! `maxqueue`, `timeout queue`).

use super::{Ctx, FAR_RATIO, RuleInfo};
use crate::chain::{active_capacity, haproxy_key};
use crate::finding::{Finding, Pos, Severity};

/// SB202.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB202",
    name: "haproxy-frontend-far-above-servers",
    severity: Severity::Warning,
    summary: "An HAProxy frontend accepts at least 4× the connections its backend's servers can hold together.",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for cfg in &ctx.inv.haproxy {
        for f in cfg.proxies.iter().filter(|p| p.is_frontend()) {
            let Some((fmax, line)) = cfg.frontend_limit(f).known() else {
                continue;
            };
            let backends = f.default_backend.iter().chain(f.use_backends.iter());
            for b in backends.filter_map(|n| cfg.backend(n)) {
                let Some(servers) = active_capacity(b) else {
                    continue;
                };
                if servers > 0 && fmax as f64 >= FAR_RATIO * servers as f64 {
                    let queue = b
                        .timeout("queue")
                        .or(b.timeout("connect"))
                        .map(crate::units::show)
                        .unwrap_or_else(|| "unset".into());
                    out.push(Finding { rule: RULE.id, severity: Severity::Warning, pos: Pos::new(&cfg.file, line), object: haproxy_key(cfg, f), message: format!(
                        "frontend {} accepts {fmax} connections but backend {} has {servers} server slots (sum of active servers' maxconn): the rest wait in the queue (timeout queue {queue}) holding client connections",
                        f.name, b.name
                    ) });
                }
            }
        }
    }
}
