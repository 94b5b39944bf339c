//! SB401: a field written as 0 where 0 means "unset, unlimited": Istio's
//! connection pool fields (0 → the default 2³²−1; Istio 1.27 "Destination
//! Rule", ConnectionPoolSettings) and HAProxy's server `maxconn 0` and
//! `maxqueue 0` (unlimited; HAProxy 3.0 manual). The audit reads them as
//! unlimited, never as tiny; this rule tells the owner who may have meant
//! "none". Real zeros (`retries.attempts: 0`, HAProxy `retries 0`) are not
//! reported.

use super::{Ctx, RuleInfo};
use crate::chain::haproxy_key;
use crate::finding::{Finding, Severity};

/// SB401.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB401",
    name: "zero-means-unlimited",
    severity: Severity::Warning,
    summary: "A limit written as 0 means unlimited (Istio pools, HAProxy server maxconn/maxqueue), not zero.",
};

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for dr in &ctx.inv.destination_rules {
        let k = crate::model::key("DestinationRule", &dr.namespace, &dr.name);
        let pools =
            std::iter::once(("", &dr.pool)).chain(dr.subsets.iter().map(|(n, p)| (n.as_str(), p)));
        for (subset, p) in pools {
            for f in &p.zeros {
                let at = if subset.is_empty() {
                    String::new()
                } else {
                    format!(" (subset {subset})")
                };
                out.push(Finding { rule: RULE.id, severity: Severity::Warning, pos: dr.src.line_of(f), object: k.clone(), message: format!("{f}: 0{at} means Istio's default, 2³²−1 (unlimited), not zero; remove it or write the limit you mean") });
            }
        }
    }
    for l in &ctx.inv.inbound {
        if let crate::model::InboundKind::Pool(p) = &l.limit {
            for f in &p.zeros {
                out.push(Finding {
                    rule: RULE.id,
                    severity: Severity::Warning,
                    pos: l.src.line_of(f),
                    object: crate::model::key(l.kind, &l.namespace, &l.name),
                    message: format!("inboundConnectionPool {f}: 0 means unlimited, not zero"),
                });
            }
        }
    }
    for cfg in &ctx.inv.haproxy {
        for b in cfg.proxies.iter().filter(|p| p.is_backend()) {
            for s in &b.servers {
                for (what, v) in [("maxconn", s.maxconn), ("maxqueue", s.maxqueue)] {
                    if v == Some(0) {
                        out.push(Finding {
                            rule: RULE.id,
                            severity: Severity::Warning,
                            pos: s.pos.clone(),
                            object: haproxy_key(cfg, b),
                            message: format!(
                                "server {} {what} 0 means unlimited in HAProxy, not zero",
                                s.name
                            ),
                        });
                    }
                }
            }
        }
    }
}
