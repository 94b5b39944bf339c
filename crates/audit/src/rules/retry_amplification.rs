//! SB301: retry amplification, Π(attempts) across the layers of a path,
//! per failure class. The layer next to the failure sees its class; every
//! layer outside it sees what that layer answers: a proxy answers a
//! connection failure it could not retry away with 503 (Envoy's `UF`,
//! HAProxy's 503), a 503 stays a 503 and a timeout stays a timeout. So
//! Istio's default (connect failures only) does not multiply through a
//! chain of defaults, and `5xx` at two layers does.

use super::{Ctx, RuleInfo};
use crate::chain::Chain;
use crate::finding::{Finding, Severity};
use crate::model::FailureClass;

/// SB301.
pub const RULE: RuleInfo = RuleInfo {
    id: "SB301",
    name: "retry-amplification",
    severity: Severity::Warning,
    summary: "Two or more layers retry the same failure: one request becomes Π(attempts) attempts at the failing hop (error at 10× or more).",
};

/// Attempts at the failing hop for one innermost failure class, and the
/// layers that multiplied it.
pub fn amplification(c: &Chain, class: FailureClass) -> (u64, Vec<String>) {
    let mut product: u64 = 1;
    let mut who = Vec::new();
    let n = c.retries.len();
    for (i, l) in c.retries.iter().enumerate() {
        let seen = if i + 1 == n || class != FailureClass::ConnectFailure {
            class
        } else {
            FailureClass::Status503
        };
        let a = l.attempts(seen) as u64;
        if a > 1 {
            who.push(format!("{a}× {}", l.what));
        }
        product = product.saturating_mul(a);
    }
    (product, who)
}

/// Attempts one request puts on **one failing server** of the chain's
/// HAProxy backend (the innermost HAProxy layer; the other servers
/// healthy), for one failure class: the layer's attempts minus those
/// `option redispatch` sends to another server; when one is sent
/// elsewhere it reaches a healthy server, the request succeeds and no
/// outer layer retries it, else HAProxy answers the failure (a connection
/// failure as a 503) and every outer layer multiplies, at worst back to
/// the same server (`balance source`, hashing, a persistence cookie).
/// None when the chain has no HAProxy layer. Unlike [`amplification`]
/// (every server of the destination failing, where redispatch only moves
/// attempts between failing servers), this figure changes with redispatch.
pub fn one_server_amplification(c: &Chain, class: FailureClass) -> Option<(u64, String)> {
    let i = c.retries.iter().rposition(|l| l.redispatch.is_some())?;
    let l = &c.retries[i];
    let r = l.redispatch?;
    let a = l.attempts(class);
    let (on_server, rescued) = r.on_failing_server(a);
    let mut product = on_server as u64;
    let mut how = if rescued {
        format!(
            "{on_server} on the failing server, then option redispatch sends retry {on_server} to another server, which answers"
        )
    } else if a > 1 {
        format!("{a} on the failing server (no retry goes elsewhere)")
    } else {
        "1 on the failing server".to_string()
    };
    if !rescued {
        let seen = if class == FailureClass::ConnectFailure {
            FailureClass::Status503
        } else {
            class
        };
        for outer in &c.retries[..i] {
            let o = outer.attempts(seen) as u64;
            if o > 1 {
                product = product.saturating_mul(o);
                how.push_str(&format!(", × {o} from {}", outer.what));
            }
        }
    }
    Some((product, how))
}

/// Runs the rule.
pub fn check(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for c in ctx.chains {
        let mut worst: Option<(u64, FailureClass, Vec<String>)> = None;
        let mut all = Vec::new();
        for class in FailureClass::ALL {
            let (p, who) = amplification(c, class);
            all.push(format!("{} {p}×", class.name()));
            if who.len() >= 2 && worst.as_ref().is_none_or(|w| p > w.0) {
                worst = Some((p, class, who));
            }
        }
        if let Some((p, class, who)) = worst {
            let one = one_server_amplification(c, class)
                .map(|(n, how)| {
                    format!("; on one failing HAProxy server (the others healthy): {n} ({how})")
                })
                .unwrap_or_default();
            let sev = if p >= 10 {
                Severity::Error
            } else {
                Severity::Warning
            };
            out.push(Finding {
                rule: RULE.id,
                severity: sev,
                pos: c.pos.clone(),
                object: c.object.clone(),
                message: format!(
                    "route {}: one request can become {p} attempts on a {} ({}); per class: {}{one}",
                    c.route,
                    class.name(),
                    who.join(" × "),
                    all.join(", ")
                ),
            });
        }
    }
}
