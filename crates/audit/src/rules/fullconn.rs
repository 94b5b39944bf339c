//! SB204: an HAProxy backend whose servers set `minconn` only reach their
//! `maxconn` when the backend holds `fullconn` connections (HAProxy 3.0
//! Configuration Manual, `fullconn` and server `minconn`). When `fullconn`
//! (as written, or HAProxy's default of 10% of the routing frontends'
//! `maxconn`) is more than the backend can ever hold — Σ maxconn + Σ
//! maxqueue — the servers never reach `maxconn`: capacity is stranded.

use super::{Ctx, RuleInfo};
use crate::chain::{dynamic_capacity, fullconn_of, haproxy_key};
use crate::finding::{Finding, Pos, Severity};
use crate::units::trim;

/// SB204.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB204",
    name: "haproxy-fullconn-out-of-reach",
    severity: Severity::Warning,
    summary: "A backend's fullconn is above what it can hold (Σ maxconn + Σ maxqueue), so servers with minconn never reach their maxconn.",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for cfg in &ctx.inv.haproxy {
        for b in cfg.proxies.iter().filter(|p| p.is_backend()) {
            let Some((f, why)) = fullconn_of(cfg, b) else {
                continue;
            };
            let Some((served, max, q)) = dynamic_capacity(b, f) else {
                continue;
            };
            let reach = max.saturating_add(q);
            if f <= reach || served >= max as f64 {
                continue;
            }
            let line = b.fullconn.map(|(_, l)| l).unwrap_or(b.pos.line);
            out.push(Finding {
                rule: RULE.id,
                severity: Severity::Warning,
                pos: Pos::new(&cfg.file, line),
                object: haproxy_key(cfg, b),
                message: format!(
                    "backend {}: {why} exceeds what it can hold, Σ maxconn {max} + Σ maxqueue {q} = {reach}; each server admits max(minconn, maxconn × load ÷ fullconn), so at most {} of {max} connections are ever served ({}% of the servers' maxconn)",
                    b.name,
                    trim(served),
                    trim(served * 100.0 / max.max(1) as f64)
                ),
            });
        }
    }
}
