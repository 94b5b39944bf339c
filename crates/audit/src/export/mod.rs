//! `--export-scenario`: the audited topology as a Stormbreak scenario
//! (docs/scenarios.md, the format as it stands; the exported file says
//! which format it targets in its first comment). Every number the
//! configs do not give is marked `ASSUMPTION` in a comment.
//!
//! **The export carries the chain it printed.** Every hop of every chain
//! is the scenario element that models it, with the chain's limit (scaled
//! as the chain scales it), or is named in a `# NOT CARRIED` comment
//! saying why; each chain's block opens with a ledger comment, hop →
//! element. Where the element's behaviour differs from the proxy's, a
//! `# GAP:` comment says how. The mapping:
//!
//! - HAProxy frontend (`maxconn`) → an `[[lb]]` of one node with
//!   `flows_per_node` = maxconn (`edge.rs`).
//! - HAProxy backend (Σ active servers' `maxconn`) → a `[[gateway]]` with a
//!   `fixed` limit of that sum and HAProxy's queue (`queue = { size = Σ
//!   maxqueue, timeout = timeout queue }`), its 503 without `Retry-After`
//!   (`edge.rs`).
//! - Istio DestinationRule pool (per calling proxy, × callers) → a
//!   `[[gateway]]` with `instances` = callers and the per-caller limit, a
//!   `queue` of `http1MaxPendingRequests` only where `maxConnections` binds
//!   (else Envoy's immediate 503), before the route's retries (`pool.rs`).
//! - Sidecar and app → each destination workload's `[[service]]`:
//!   `sidecar.limit` per pod, `app.workers`, `replicas` and the autoscaler
//!   (`service.rs`). A Service selecting several workloads gets one route per
//!   workload, the traffic split by their pods.
//! - A destination not among the inputs (HAProxy servers at addresses, a
//!   missing Service) → a stand-in `[[service]]` that saturates after every
//!   hop the chain knows, said so.
//! - Retry layers → `[[gateway]]`s whose `retry` tables are
//!   [`stormbreak_policy::retry::RetryConfig`]s serialised (`retry.rs`):
//!   HAProxy's after its backend, the mesh's after the pool; the clients'
//!   (`--client-attempts`) on each `[[client]]`.
//!
//! Elements modelling one object (a frontend on several chains, a workload
//! several routes reach) are written once and shared. Traffic:
//! `--load ROUTE=RATE`, else 80% of the chain's first-to-saturate capacity
//! by Little's law, else 100/s, split over the chain's routes by pods. An
//! HPA's `behavior`, when not Kubernetes' default, is the autoscaler's
//! `behavior` table, the policy crate's `Behavior` serialised
//! ([`behavior_note`] says so above it).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::time::Duration;

use crate::chain::{Chain, ChainOptions, HopKind};
use crate::model::Inventory;
use crate::units::{show, trim};

mod edge;
mod inline;
mod limit;
mod loads;
mod names;
mod pool;
pub mod retry;
mod service;

use inline::inline;
pub use loads::parse_loads;
use names::{Names, one_line};
pub use service::behavior_note;
use service::{service_block, slots, stand_in};

/// The scenario format version this export writes (docs/scenarios.md as
/// of this release; bump when the format changes).
pub const SCENARIO_FORMAT: &str = "stormbreak scenario format 1";
/// Default traffic when neither `--load` nor a capacity gives one.
pub const DEFAULT_RATE: f64 = 100.0;
/// Sidecar limit written when the configs give none (unlimited in Istio).
pub const UNLIMITED_SIDECAR: u32 = 10_000;
/// App workers written when the configs give none.
pub const ASSUMED_WORKERS: u32 = 16;
/// Workers a pod of a stand-in service has: more than any hop it stands
/// behind should admit, so it never saturates first.
pub const STAND_IN_WORKERS: u32 = 10_000;
/// Timeout written where the configs set none and the proxy waits without
/// end (Istio's route timeout is off by default; HAProxy without `timeout
/// server` or `timeout queue`): the format needs one, and its largest,
/// [`MAX_DURATION`], is the nearest to none. The callers' own timeouts
/// still end their waits.
pub const NO_TIMEOUT: Duration = MAX_DURATION;
/// The format's bounds (docs/scenarios.md, "Limits"): slots
/// (`MAX_SLOTS`), pods and instances (`MAX_PODS`), attempts
/// (`MAX_ATTEMPTS`), a gateway queue (`QueueConfig::MAX_SIZE`) and any
/// duration (`MAX_DURATION`).
pub const MAX_SLOTS: u32 = 10_000_000;
/// See [`MAX_SLOTS`].
pub const MAX_PODS: u32 = 100_000;
/// See [`MAX_SLOTS`].
pub const MAX_ATTEMPTS: u32 = 100;
/// See [`MAX_SLOTS`].
pub const MAX_QUEUE: u32 = stormbreak_policy::limit::QueueConfig::MAX_SIZE;
/// See [`MAX_SLOTS`]; requests a second (`MAX_RATE`).
pub const MAX_RATE: f64 = 1e9;
/// See [`MAX_SLOTS`].
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// A timeout from the configs as the format takes it: zero is "none" in
/// Istio and refused by the format, and a duration past the format's
/// largest is written as that.
pub(crate) fn timeout(d: Option<Duration>) -> Option<Duration> {
    d.filter(|d| !d.is_zero()).map(|d| d.min(MAX_DURATION))
}

/// The scenario as it is written.
#[derive(Debug, Default)]
pub(crate) struct Out {
    /// Component names (LBs, gateways and services share one namespace).
    pub names: Names,
    /// `[[service]]` blocks, first reached first.
    pub services: String,
}

/// One hop's element: its name on the route's path (None: nothing on the
/// path) and its lines of the chain's ledger.
#[derive(Debug, Default)]
pub(crate) struct Placed {
    pub name: Option<String>,
    pub ledger: Vec<String>,
}

/// Where a chain's traffic ends: a `[[service]]` and its pods.
struct End {
    service: String,
    pods: u32,
}

/// Writes the scenario text.
pub fn scenario(
    inv: &Inventory,
    chains: &[Chain],
    opts: &ChainOptions,
    loads: &BTreeMap<String, String>,
) -> Result<String, String> {
    if chains.is_empty() {
        return Err("nothing to export: the audited configs give no route".into());
    }
    if opts.assumed_latency.is_zero() || opts.assumed_latency > MAX_DURATION {
        return Err(format!(
            "--assume-latency {}: the exported service time must be above 0 and at most {}",
            show(opts.assumed_latency),
            show(MAX_DURATION)
        ));
    }
    let lat = show(opts.assumed_latency);
    let mut out = Out::default();
    // Workloads first, named after themselves: their names do not depend
    // on what else the scenario holds.
    for c in chains {
        for wi in &c.workloads {
            workload_service(inv, *wi, opts, &lat, &mut out);
        }
    }
    let mut routes = Names::default();
    let mut used = BTreeSet::new();
    let mut body = String::new();
    for (ci, c) in chains.iter().enumerate() {
        body.push_str(&chain_block(
            inv,
            ci,
            c,
            opts,
            &lat,
            loads,
            &mut out,
            &mut routes,
            &mut used,
        )?);
    }
    for l in loads.keys() {
        if !used.contains(l) {
            return Err(format!(
                "--load {l}=…: no exported route or service named {l:?}; exported routes: {}",
                routes.all().join(", ")
            ));
        }
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Exported by `stormbreak audit --export-scenario` ({SCENARIO_FORMAT}, docs/scenarios.md)."
    );
    let _ = writeln!(
        s,
        "# Limits, replicas, autoscalers and retry policies come from the audited configs;"
    );
    let _ = writeln!(
        s,
        "# every hop of every chain is carried, or a comment says why not; every number the"
    );
    let _ = writeln!(s, "# configs do not give is marked ASSUMPTION.\n");
    let _ = writeln!(
        s,
        "[scenario]\nname = \"audit-export\"\nduration = \"10m\"   # ASSUMPTION: long enough for several HPA syncs\ninterval = \"10s\"\n"
    );
    s.push_str(&out.services);
    s.push_str(&body);
    Ok(s)
}

/// The `[[service]]` of workload `wi`, written once; its name.
fn workload_service(
    inv: &Inventory,
    wi: usize,
    opts: &ChainOptions,
    lat: &str,
    out: &mut Out,
) -> String {
    let w = &inv.workloads[wi];
    let (name, new) = out.names.of(
        &format!("workload {wi}"),
        &format!("{}-{}", w.namespace, w.name),
    );
    if new {
        out.services
            .push_str(&service_block(inv, w, &name, opts, lat));
    }
    name
}

/// One chain: its ledger, the elements it is the first to reach, and its
/// routes with their clients.
#[allow(clippy::too_many_arguments)]
fn chain_block(
    inv: &Inventory,
    ci: usize,
    c: &Chain,
    opts: &ChainOptions,
    lat: &str,
    loads: &BTreeMap<String, String>,
    out: &mut Out,
    routes: &mut Names,
    used: &mut BTreeSet<String>,
) -> Result<String, String> {
    let mut ledger = vec![format!("# chain: {}", one_line(&c.route))];
    if let Some(h) = c.first_to_saturate.map(|i| &c.hops[i]) {
        ledger.push(format!(
            "#   first to saturate: {} ({} concurrent)",
            one_line(&h.name),
            h.limit.map_or_else(|| "?".into(), trim)
        ));
    }
    let mut blocks = String::new();
    let mut path: Vec<String> = Vec::new();
    let layers = |w: retry::Where| -> Vec<usize> {
        (0..c.retries.len())
            .filter(|i| retry::place(&c.retries[*i]) == w)
            .collect()
    };
    let mut haproxy = layers(retry::Where::Haproxy);
    let mut mesh = layers(retry::Where::Mesh);
    let flush = |idx: &mut Vec<usize>,
                 path: &mut Vec<String>,
                 ledger: &mut Vec<String>,
                 blocks: &mut String|
     -> Result<(), String> {
        for li in idx.drain(..) {
            let p = retry_gateway(inv, ci, c, li, blocks)?;
            ledger.extend(p.ledger);
            path.extend(p.name);
        }
        Ok(())
    };
    for h in &c.hops {
        let placed = match h.kind {
            HopKind::Frontend => edge::frontend(h, out, &mut blocks),
            HopKind::Backend => edge::backend(inv, h, out, &mut blocks)?,
            HopKind::Pool => {
                flush(&mut haproxy, &mut path, &mut ledger, &mut blocks)?;
                pool::gateway(inv, c, h, out, &mut blocks)?
            }
            HopKind::Sidecar | HopKind::App => continue,
        };
        ledger.extend(placed.ledger);
        path.extend(placed.name);
        match h.kind {
            HopKind::Backend => flush(&mut haproxy, &mut path, &mut ledger, &mut blocks)?,
            HopKind::Pool => flush(&mut mesh, &mut path, &mut ledger, &mut blocks)?,
            _ => {}
        }
    }
    flush(&mut haproxy, &mut path, &mut ledger, &mut blocks)?;
    flush(&mut mesh, &mut path, &mut ledger, &mut blocks)?;
    let ends = destinations(inv, c, opts, lat, out, &mut ledger);
    let client_retry = match c
        .retries
        .iter()
        .find(|l| retry::place(l) == retry::Where::Clients && l.retries > 0)
    {
        Some(l) => {
            ledger.push(format!(
                "#   retries: {} → each [[client]]'s retry",
                one_line(&l.what)
            ));
            Some(retry::retry_line(&retry::retry_of(inv, c, l)?)?)
        }
        None => None,
    };
    let mut s = String::new();
    for l in &ledger {
        let _ = writeln!(s, "{l}");
    }
    s.push_str(&blocks);
    let pods: u64 = ends.iter().map(|e| e.pods as u64).sum::<u64>().max(1);
    let capacity = c
        .first_to_saturate
        .and_then(|i| c.hops[i].limit)
        .map(|l| (l, 0.8 * l / opts.assumed_latency.as_secs_f64()));
    for (k, e) in ends.iter().enumerate() {
        let (route, _) = routes.of(&format!("{ci} {k}"), &e.service);
        let mut hops = path.clone();
        hops.push(e.service.clone());
        let share = e.pods as f64 / pods as f64;
        let split = if ends.len() > 1 {
            format!(
                " × this workload's share of the Service's pods ({} of {pods})",
                e.pods
            )
        } else {
            String::new()
        };
        let (rate, note) = match loads.get(&route).or_else(|| loads.get(&e.service)) {
            Some(r) => {
                used.insert(route.clone());
                used.insert(e.service.clone());
                (format!("\"{r}\""), "# --load".to_string())
            }
            None => match capacity.filter(|(_, r)| r.is_finite()) {
                Some((l, r)) => (
                    rate_value(r * share),
                    format!(
                        "# ASSUMPTION: 80% of the first hop to saturate ({} concurrent) ÷ assumed latency {lat}{split}",
                        trim(l)
                    ),
                ),
                None => (
                    rate_value(DEFAULT_RATE * share),
                    format!("# ASSUMPTION: default rate, no capacity known{split}"),
                ),
            },
        };
        let timeout = match timeout(c.timeout) {
            Some(t) => format!("\"{}\"", show(t)),
            None => "\"1s\"   # ASSUMPTION: client timeout".into(),
        };
        let _ = writeln!(
            s,
            "# route {route}: {}\n[[route]]\nname = \"{route}\"\npath = [{}]\n",
            one_line(&c.route),
            hops.iter()
                .map(|p| format!("\"{p}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            s,
            "[[client]]\nname = \"users-{route}\"\nroute = \"{route}\"\nrate = {rate}   {note}\ntimeout = {timeout}"
        );
        if let Some(r) = &client_retry {
            let _ = writeln!(s, "{r}");
        }
        s.push('\n');
    }
    Ok(s)
}

/// A rate the format takes: at least one a second, at most
/// [`MAX_RATE`] (past one arrival a nanosecond the format has no gap).
fn rate_value(r: f64) -> String {
    trim(r.clamp(1.0, MAX_RATE))
}

/// The gateway of retry layer `li` of chain `c`, or a ledger line when the
/// layer does not retry.
fn retry_gateway(
    inv: &Inventory,
    ci: usize,
    c: &Chain,
    li: usize,
    blocks: &mut String,
) -> Result<Placed, String> {
    let l = &c.retries[li];
    if l.retries == 0 {
        return Ok(Placed {
            name: None,
            ledger: vec![format!(
                "#   retries: {}: none → no gateway",
                one_line(&l.what)
            )],
        });
    }
    let name = format!("retry-{ci}-{li}");
    let m = retry::retry_of(inv, c, l)?;
    let (t, why) = retry::per_try(inv, c, l);
    let _ = writeln!(
        blocks,
        "# {}\n[[gateway]]\nname = \"{name}\"\ntimeout = \"{}\"   # {}\n{}\n",
        one_line(&l.what),
        show(t),
        one_line(&why),
        retry::retry_line(&m)?
    );
    Ok(Placed {
        ledger: vec![format!(
            "#   retries: {} → [[gateway]] {name}: max_attempts {}",
            one_line(&l.what),
            m.config.max_attempts
        )],
        name: Some(name),
    })
}

/// Where chain `c` ends: each workload it reaches, or a stand-in for what
/// the configs do not show. Adds the sidecar and app hops to the ledger.
fn destinations(
    inv: &Inventory,
    c: &Chain,
    opts: &ChainOptions,
    lat: &str,
    out: &mut Out,
    ledger: &mut Vec<String>,
) -> Vec<End> {
    if c.workloads.is_empty() {
        return vec![stand_in_end(inv, c, lat, out, ledger)];
    }
    let ends: Vec<(End, service::Slots)> = c
        .workloads
        .iter()
        .map(|wi| {
            let sl = slots(inv, &inv.workloads[*wi], opts);
            let service = workload_service(inv, *wi, opts, lat, out);
            (
                End {
                    service,
                    pods: sl.replicas,
                },
                sl,
            )
        })
        .collect();
    for h in c
        .hops
        .iter()
        .filter(|h| matches!(h.kind, HopKind::Sidecar | HopKind::App))
    {
        let field = if h.kind == HopKind::Sidecar {
            "sidecar.limit"
        } else {
            "app.workers"
        };
        let terms: Vec<String> = ends
            .iter()
            .map(|(e, sl)| {
                let f = if h.kind == HopKind::Sidecar && sl.sidecar.is_none() {
                    "app.workers (no sidecar)"
                } else {
                    field
                };
                format!(
                    "{} {f} {} × {} replicas",
                    e.service,
                    sl.per_pod(h.kind),
                    sl.replicas
                )
            })
            .collect();
        let total: f64 = ends
            .iter()
            .map(|(_, sl)| sl.per_pod(h.kind) as f64 * sl.replicas as f64)
            .sum();
        let pods: f64 = ends.iter().map(|(_, sl)| sl.replicas as f64).sum();
        let limit = match h.limit {
            Some(l) => trim(l),
            None if h.unknown => "unknown".into(),
            None => "unlimited".into(),
        };
        ledger.push(format!(
            "#   {} ({limit}) → [[service]] {}",
            one_line(&h.name),
            terms.join(" + ")
        ));
        match h.limit {
            Some(l) if total > l + 1e-9 || l - total >= pods => ledger.push(format!(
                "# NOT CARRIED: {}: the chain's {} is written as {} (whole slots from 1 to {MAX_SLOTS} per pod, at most {MAX_PODS} pods)",
                one_line(&h.name),
                trim(l),
                trim(total)
            )),
            Some(l) if total < l => ledger.push(format!(
                "#   ({}: {} rounded down to whole slots per pod: {})",
                one_line(&h.name),
                trim(l),
                trim(total)
            )),
            None => ledger.push(format!(
                "#   ({}: no limit in the configs ({}); the service's number is an ASSUMPTION)",
                one_line(&h.name),
                one_line(&h.how)
            )),
            _ => {}
        }
    }
    ends.into_iter().map(|(e, _)| e).collect()
}

/// The stand-in `[[service]]` at the end of a chain that reaches no
/// workload among the inputs.
fn stand_in_end(
    inv: &Inventory,
    c: &Chain,
    lat: &str,
    out: &mut Out,
    ledger: &mut Vec<String>,
) -> End {
    let last = c.hops.last();
    let haproxy = last.filter(|h| matches!(h.kind, HopKind::Frontend | HopKind::Backend));
    let (key, base, why, pods) = match (haproxy, last) {
        (Some(h), _) => {
            let servers = edge::proxy_of(inv, h).map_or(1, edge::active_servers);
            (
                format!("servers {}", h.object),
                format!("{} servers", h.name),
                format!(
                    "the {} behind {}: not among the inputs (no Service at their addresses)",
                    names::plural(servers as u64, "server"),
                    h.name
                ),
                servers,
            )
        }
        (None, Some(h)) => {
            ledger.push(format!(
                "# NOT CARRIED: {}: {}",
                one_line(&h.name),
                one_line(&h.how)
            ));
            (
                format!("missing {}", h.name),
                h.name.clone(),
                format!("{}, not among the inputs", h.name),
                1,
            )
        }
        (None, None) => (
            format!("missing {}", c.route),
            format!("{} destination", c.route),
            format!("the destination of {}", c.route),
            1,
        ),
    };
    let pods = u32::try_from(pods).unwrap_or(MAX_PODS).clamp(1, MAX_PODS);
    let (service, new) = out.names.of(&key, &base);
    if new {
        out.services.push_str(&stand_in(&service, pods, &why, lat));
    }
    ledger.push(format!(
        "#   destination: {} → stand-in [[service]] {service} (never saturates first)",
        one_line(&why)
    ));
    End { service, pods }
}
