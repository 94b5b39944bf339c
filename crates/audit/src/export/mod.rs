//! `--export-scenario`: the audited topology as a Stormbreak scenario
//! (docs/scenarios.md, the format as it stands; the exported file says
//! which format it targets in its first comment). Every number the
//! configs do not give is marked `ASSUMPTION` in a comment.
//!
//! Mapping: each route with a destination workload becomes a `[[route]]`
//! named after the destination (`ns-name`, suffixed `-2`… when several
//! routes reach it); an HAProxy frontend becomes an `[[lb]]` of one node
//! with `flows_per_node` = its maxconn; every retry layer that retries
//! becomes a `[[gateway]]` with that layer's attempts; a workload becomes
//! a `[[service]]` (sidecar limit per pod, app workers, replicas, the
//! autoscaler's metric mapped to `app_cpu`, `pod_cpu` or
//! `sidecar_saturation`). Traffic: `--load ROUTE=RATE`, else 80% of the
//! route's first-to-saturate capacity by Little's law, else 100/s. An
//! HPA's `behavior` has no field in the format: it is written as a
//! comment, marked NOT CARRIED when it is not Kubernetes' default
//! ([`behavior_note`]).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::chain::{Chain, ChainOptions, HopKind};
use crate::model::Inventory;
use crate::units::{show, trim};

mod loads;
mod names;
mod service;

pub use loads::parse_loads;
use names::ident;
pub use service::behavior_note;
use service::service_block;

/// The scenario format version this export writes (docs/scenarios.md as
/// of this release; bump when the format changes).
pub const SCENARIO_FORMAT: &str = "stormbreak scenario format 1";
/// Default traffic when neither `--load` nor a capacity gives one.
pub const DEFAULT_RATE: f64 = 100.0;
/// Sidecar limit written when the configs give none (unlimited in Istio).
pub const UNLIMITED_SIDECAR: u32 = 10_000;
/// App workers written when the configs give none.
pub const ASSUMED_WORKERS: u32 = 16;

/// Writes the scenario text.
pub fn scenario(
    inv: &Inventory,
    chains: &[Chain],
    opts: &ChainOptions,
    loads: &BTreeMap<String, String>,
) -> Result<String, String> {
    let mut s = String::new();
    let lat = show(opts.assumed_latency);
    let _ = writeln!(
        s,
        "# Exported by `stormbreak audit --export-scenario` ({SCENARIO_FORMAT}, docs/scenarios.md)."
    );
    let _ = writeln!(
        s,
        "# Limits, replicas, autoscalers and retry policies come from the audited configs;"
    );
    let _ = writeln!(s, "# every number they do not give is marked ASSUMPTION.\n");
    let _ = writeln!(
        s,
        "[scenario]\nname = \"audit-export\"\nduration = \"10m\"   # ASSUMPTION: long enough for several HPA syncs\ninterval = \"10s\"\n"
    );
    let mut services: BTreeMap<usize, String> = BTreeMap::new();
    let mut body = String::new();
    let mut route_names: BTreeMap<String, usize> = BTreeMap::new();
    let mut used_loads = Vec::new();
    for (ci, c) in chains.iter().enumerate() {
        let Some(wi) = c.workload else { continue };
        let w = &inv.workloads[wi];
        let svc = ident(&format!("{}-{}", w.namespace, w.name));
        services
            .entry(wi)
            .or_insert_with(|| service_block(inv, w, &svc, opts, &lat));
        let n = route_names.entry(svc.clone()).or_default();
        *n += 1;
        let route = if *n == 1 {
            svc.clone()
        } else {
            format!("{svc}-{n}")
        };
        let mut path = Vec::new();
        let _ = writeln!(body, "# route {}: {}", route, c.route);
        if let Some(f) = c.hops.iter().find(|h| h.kind == HopKind::Frontend) {
            let name = format!("lb-{}", ident(&c.route));
            let (flows, note) = match f.limit {
                Some(l) => (l.max(1.0) as u64, format!("# {}", f.how)),
                None => (10_000, format!("# ASSUMPTION: 10000 flows; {}", f.how)),
            };
            let _ = writeln!(
                body,
                "[[lb]]\nname = \"{name}\"\nnodes = 1\nflows_per_node = {flows}   {note}\n"
            );
            path.push(name);
        }
        for (li, l) in c.retries.iter().enumerate() {
            if l.retries == 0 || l.what.starts_with("clients") {
                continue;
            }
            let name = format!("retry-{ci}-{li}");
            let timeout = match l.per_try.or(c.timeout) {
                Some(t) => format!("\"{}\"", show(t)),
                None => "\"15s\"   # ASSUMPTION: no per-try or route timeout in the config".into(),
            };
            let mut on = Vec::new();
            if l.on[0] {
                on.push("\"connect-failure\"");
            }
            if l.on[2] {
                on.push("\"timeout\"");
            }
            let codes = if l.on[1] { "503" } else { "" };
            let _ = writeln!(
                body,
                "# {}\n[[gateway]]\nname = \"{name}\"\ntimeout = {timeout}\nretry = {{ max_attempts = {}, max_attempts_cap = {}, retry_on = [{}], retriable_status_codes = [{codes}], backoff = {{ kind = \"exponential\", base = \"25ms\" }} }}   # base: Envoy's default 25ms\n",
                l.what,
                (1 + l.retries).min(100),
                (1 + l.retries).min(100),
                on.join(", ")
            );
            path.push(name);
        }
        path.push(svc.clone());
        let _ = writeln!(
            body,
            "[[route]]\nname = \"{route}\"\npath = [{}]\n",
            path.iter()
                .map(|p| format!("\"{p}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let (rate, note) = match loads.get(&route).or_else(|| loads.get(&svc)) {
            Some(r) => {
                used_loads.push(route.clone());
                used_loads.push(svc.clone());
                (format!("\"{r}\""), "# --load".to_string())
            }
            None => match c.first_to_saturate.and_then(|i| c.hops[i].limit) {
                Some(l) => {
                    let r = 0.8 * l / opts.assumed_latency.as_secs_f64();
                    (
                        trim(r.max(1.0)),
                        format!(
                            "# ASSUMPTION: 80% of the first hop to saturate ({} concurrent) ÷ assumed latency {lat}",
                            trim(l)
                        ),
                    )
                }
                None => (
                    trim(DEFAULT_RATE),
                    "# ASSUMPTION: default rate, no capacity known".into(),
                ),
            },
        };
        let timeout = c
            .timeout
            .map(|t| format!("\"{}\"", show(t)))
            .unwrap_or_else(|| "\"1s\"   # ASSUMPTION: client timeout".into());
        let _ = writeln!(
            body,
            "[[client]]\nname = \"users-{route}\"\nroute = \"{route}\"\nrate = {rate}   {note}\ntimeout = {timeout}\n"
        );
    }
    for l in loads.keys() {
        if !used_loads.contains(l) {
            return Err(format!(
                "--load {l}=…: no exported route or service named {l:?}; exported routes: {}",
                route_names.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if services.is_empty() {
        return Err("nothing to export: no route reaches a workload in the audited configs".into());
    }
    for b in services.values() {
        s.push_str(b);
    }
    s.push_str(&body);
    Ok(s)
}
