//! The rules: each has a stable ID, a severity, a rationale, the
//! documentation it relies on and a fix, in docs/audit-rules.md (which
//! `--explain` prints from [`RULES`]). One file per rule.

mod autoscaler_basics;
mod backup_headroom;
mod blind_autoscaler;
mod failover_headroom;
mod fault_injection;
mod frontend_over_servers;
mod fullconn;
mod hop_below;
mod no_budget;
mod outlier_all;
mod per_try;
mod pool_scale;
pub(crate) mod retry_amplification;
mod scale_down_flaps;
mod shadowed_route;
mod slow_scale_up;
mod zero_unlimited;

use crate::chain::{Chain, ChainOptions};
use crate::finding::{Finding, Severity};
use crate::model::Inventory;

pub use retry_amplification::{amplification, one_server_amplification};

/// SB001: an input or object that could not be read.
pub const PARSE_ERROR: &str = "SB001";

/// "Far below": a hop admitting at most 1/FAR_RATIO of its neighbour.
pub const FAR_RATIO: f64 = 4.0;

/// What every rule states about itself.
#[derive(Debug, Clone, Copy)]
pub struct RuleInfo {
    /// Stable ID.
    pub id: &'static str,
    /// Short name.
    pub name: &'static str,
    /// Default severity (some rules also report at another, said in `summary`).
    pub severity: Severity,
    /// One-line summary.
    pub summary: &'static str,
}

/// Every rule, in ID order.
pub const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: PARSE_ERROR,
        name: "unreadable-input",
        severity: Severity::Error,
        summary: "An input file or object could not be read; the rest of the audit still ran.",
    },
    blind_autoscaler::CONTAINER,
    blind_autoscaler::POD_CPU,
    blind_autoscaler::NONE,
    slow_scale_up::RULE,
    scale_down_flaps::RULE,
    autoscaler_basics::TARGET_MISSING,
    autoscaler_basics::NO_REQUESTS,
    autoscaler_basics::PINNED,
    autoscaler_basics::TWO_CONTROLLERS,
    autoscaler_basics::DROPPED_FIELDS,
    hop_below::RULE,
    frontend_over_servers::RULE,
    pool_scale::RULE,
    fullconn::RULE,
    retry_amplification::RULE,
    per_try::RULE,
    no_budget::RULE,
    shadowed_route::RULE,
    fault_injection::RULE,
    zero_unlimited::RULE,
    outlier_all::RULE,
    backup_headroom::RULE,
    failover_headroom::RULE,
];

/// A rule by ID.
pub fn rule(id: &str) -> Option<&'static RuleInfo> {
    RULES.iter().find(|r| r.id.eq_ignore_ascii_case(id))
}

/// What the rules read.
pub struct Ctx<'a> {
    /// The inventory.
    pub inv: &'a Inventory,
    /// The chains.
    pub chains: &'a [Chain],
    /// Options the chains were built with.
    pub opts: &'a ChainOptions,
}

/// Runs every rule.
pub fn run(ctx: &Ctx<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    blind_autoscaler::check(ctx, &mut out);
    slow_scale_up::check(ctx, &mut out);
    scale_down_flaps::check(ctx, &mut out);
    autoscaler_basics::check(ctx, &mut out);
    hop_below::check(ctx, &mut out);
    frontend_over_servers::check(ctx, &mut out);
    pool_scale::check(ctx, &mut out);
    fullconn::check(ctx, &mut out);
    retry_amplification::check(ctx, &mut out);
    per_try::check(ctx, &mut out);
    no_budget::check(ctx, &mut out);
    shadowed_route::check(ctx, &mut out);
    fault_injection::check(ctx, &mut out);
    zero_unlimited::check(ctx, &mut out);
    outlier_all::check(ctx, &mut out);
    backup_headroom::check(ctx, &mut out);
    failover_headroom::check(ctx, &mut out);
    // Objects read but placed on no chain are said, never dropped.
    out.extend(crate::chain::unplaced(ctx.inv, ctx.chains));
    out
}
