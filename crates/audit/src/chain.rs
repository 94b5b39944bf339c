//! The capacity chain of each route, edge to app: each hop's limit in
//! concurrent requests, with the conversion that produced it, and the
//! first hop to saturate.
//!
//! Conversions (each stated in the hop's `how`):
//! - HAProxy connections → requests: one request in flight per connection
//!   (HTTP/1.1 without pipelining).
//! - Istio pools: `maxConnections` × 1 request per connection (HTTP/1.1),
//!   or `http2MaxRequests`; a pool is per caller proxy, so the hop is the
//!   pool × the callers that are known (an ingress gateway's replicas),
//!   else one caller, said so.
//! - A rate (an EnvoyFilter local rate limit, or a proxy's CPU through
//!   Istio's published cost of 0.20 vCPU per 1000 requests/s) → a
//!   concurrency by Little's law, L = λ·W, with an assumed latency W
//!   (`--assume-latency`, default 50 ms): marked assumed.
//! - Pods: per-pod limits × replicas (`spec.replicas`, or the autoscaler's
//!   `minReplicas` when it is larger).

use std::time::Duration;

use serde::Serialize;

use crate::finding::Pos;
use crate::inputs::haproxy::{Config, ConnLimit, Proxy};
use crate::model::{self, InboundKind, Inventory, RetryLayer, Service, Workload, selects};
use crate::units::{show, trim};

/// Istio's published proxy cost: 0.20 vCPU per 1000 requests per second
/// (Istio 1.27 "Performance and Scalability",
/// <https://istio.io/v1.27/docs/ops/deployment/performance-and-scalability/>).
pub const PROXY_CPU_PER_REQUEST: Duration = Duration::from_micros(200);
/// Default latency assumed for Little's law.
pub const DEFAULT_ASSUMED_LATENCY: Duration = Duration::from_millis(50);

/// Options of the chain builder.
#[derive(Debug, Clone)]
pub struct ChainOptions {
    /// Latency assumed to turn a rate into a concurrency.
    pub assumed_latency: Duration,
    /// Attempts the clients make before the edge (not in any config).
    pub client_attempts: u32,
}

impl Default for ChainOptions {
    fn default() -> Self {
        ChainOptions {
            assumed_latency: DEFAULT_ASSUMED_LATENCY,
            client_attempts: 1,
        }
    }
}

/// What a hop is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HopKind {
    /// An HAProxy frontend.
    Frontend,
    /// An HAProxy backend's servers.
    Backend,
    /// An Istio per-caller connection pool (DestinationRule).
    Pool,
    /// The destination pods' sidecars.
    Sidecar,
    /// The destination pods' app containers.
    App,
}

/// One hop of a chain.
#[derive(Debug, Clone, Serialize)]
pub struct Hop {
    /// What it is.
    pub kind: HopKind,
    /// Its name.
    pub name: String,
    /// Concurrent requests it admits (None: unlimited or unknown).
    pub limit: Option<f64>,
    /// True when the configs give no number at all (not "unlimited").
    pub unknown: bool,
    /// How the number was derived, every conversion stated.
    pub how: String,
    /// True when an assumption (latency, defaults) entered the number.
    pub assumed: bool,
    /// Where the limit is written.
    pub pos: Pos,
    /// The object key.
    #[serde(skip)]
    pub object: String,
}

/// One route's chain.
#[derive(Debug, Clone, Serialize)]
pub struct Chain {
    /// Route name.
    pub route: String,
    /// The object that defines the route (key).
    pub object: String,
    /// Where.
    pub pos: Pos,
    /// Hops, edge first.
    pub hops: Vec<Hop>,
    /// Retry layers, outermost first.
    #[serde(serialize_with = "ser_layers")]
    pub retries: Vec<RetryLayer>,
    /// Route timeout of the innermost routing layer.
    #[serde(serialize_with = "ser_dur")]
    pub timeout: Option<Duration>,
    /// Index of the first hop to saturate.
    pub first_to_saturate: Option<usize>,
    /// Destination workload (index in the inventory).
    #[serde(skip)]
    pub workload: Option<usize>,
    /// A retry budget exists on the path (`maxRetries` on the pool).
    pub budget: bool,
    /// Faults the calling proxy injects on the route (a VirtualService's
    /// `fault`): aborted requests never reach the hops, and the route's
    /// own retries do not retry them ([`model::fault`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<model::fault::Fault>,
    /// Every workload the destination Service sends to (all the
    /// Deployments its selector matches, narrowed to the route's subset).
    #[serde(skip)]
    pub workloads: Vec<usize>,
    /// Keys of the objects the chain was built from beyond `object` and its
    /// hops' (a DestinationRule consulted whose pool sets no limit).
    #[serde(skip)]
    pub uses: Vec<String>,
}

fn ser_dur<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&show(*d)),
        None => s.serialize_none(),
    }
}

fn ser_layers<S: serde::Serializer>(l: &[RetryLayer], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(l.len()))?;
    for layer in l {
        seq.serialize_element(&serde_json::json!({
            "layer": layer.what,
            "retries": layer.retries,
            "connection_failure": layer.on[0],
            "status_503": layer.on[1],
            "timeout": layer.on[2],
            "redispatched": layer.redispatch.map(|r| r.moved),
        }))?;
    }
    seq.end()
}

/// Per-pod limits of a workload: (sidecar, app), each with how.
#[derive(Debug, Clone)]
pub struct PodLimits {
    /// The sidecar's inbound limit per pod.
    pub sidecar: Option<(f64, String, bool, Pos)>,
    /// The app's workers per pod.
    pub app: Option<(f64, String)>,
}

impl PodLimits {
    /// True when the sidecar admits fewer requests per pod than the app
    /// can work on: it saturates first. Also returns whether an
    /// assumption entered that comparison.
    pub fn sidecar_first(&self) -> Option<bool> {
        match (&self.sidecar, &self.app) {
            (Some(s), Some(a)) if s.0 < a.0 => Some(s.2),
            _ => None,
        }
    }

    /// The per-pod capacity: the smaller of the two, when known.
    pub fn per_pod(&self) -> Option<f64> {
        match (&self.sidecar, &self.app) {
            (Some(s), Some(a)) => Some(s.0.min(a.0)),
            (None, Some(a)) => Some(a.0),
            _ => None,
        }
    }
}

/// The sidecar's and app's per-pod limits.
pub fn pod_limits(inv: &Inventory, w: &Workload, opts: &ChainOptions) -> PodLimits {
    let latency = opts.assumed_latency.as_secs_f64();
    let mut sidecar: Option<(f64, String, bool, Pos)> = None;
    // The description and position are built only for a candidate that
    // is the smallest so far: most are not, and `line_of` scans the text.
    let mut consider = |v: f64, assumed: bool, describe: &dyn Fn() -> (String, Pos)| {
        if sidecar.as_ref().is_none_or(|s| v < s.0) {
            let (how, pos) = describe();
            sidecar = Some((v, how, assumed, pos));
        }
    };
    if let Some(sc) = &w.sidecar {
        if let Some((cores, why)) = sc.usable_cores() {
            let rate = cores / PROXY_CPU_PER_REQUEST.as_secs_f64();
            consider(rate * latency, true, &|| {
                (
                    format!(
                        "proxy {why} ({}) ÷ 0.20 vCPU per 1000 req/s = {} req/s; × assumed latency {} (Little's law) = {} concurrent",
                        sc.source,
                        trim(rate),
                        show(opts.assumed_latency),
                        trim(rate * latency)
                    ),
                    w.src.line_of("annotations"),
                )
            });
        }
        // An inferred injection makes every sidecar number an assumption,
        // said where the number is.
        let inferred = sc.inferred.as_deref();
        let note = |how: String| match inferred {
            Some(why) => format!("{how} [{why}]"),
            None => how,
        };
        // By the namespace index, in inventory order: a scan of every
        // limit per workload made the audit quadratic in services
        // (docs/BENCHMARKS.md §8).
        for l in inv.inbound_in(&w.namespace) {
            if l.selector
                .as_ref()
                .is_some_and(|s| !selects(s, &w.pod_labels))
            {
                continue;
            }
            let what = format!("{} {}/{}", l.kind, l.namespace, l.name);
            match &l.limit {
                InboundKind::Pool(p) => {
                    if let Some((n, how)) = p.in_flight() {
                        consider(n as f64, inferred.is_some(), &|| {
                            (
                                note(format!("{what} inboundConnectionPool: {how}")),
                                l.src.line_of("inboundConnectionPool"),
                            )
                        });
                    }
                }
                InboundKind::RateLimit(r) => consider(r * latency, true, &|| {
                    (
                        note(format!(
                            "{what} local rate limit {} req/s × assumed latency {} (Little's law)",
                            trim(*r),
                            show(opts.assumed_latency)
                        )),
                        l.src.line_of("token_bucket"),
                    )
                }),
                InboundKind::Adaptive(m) => consider(*m as f64, inferred.is_some(), &|| {
                    (
                        note(format!(
                            "{what} adaptive concurrency max_concurrency_limit {m} (the live limit may be lower)"
                        )),
                        l.src.line_of("max_concurrency_limit"),
                    )
                }),
                InboundKind::MaxRequests(m) => consider(*m as f64, inferred.is_some(), &|| {
                    (
                        note(format!("{what} inbound circuit breaker max_requests {m}")),
                        l.src.line_of("max_requests"),
                    )
                }),
            }
        }
    }
    let app = w
        .app()
        .and_then(|c| c.workers.clone())
        .map(|(n, how)| (n as f64, how));
    PodLimits { sidecar, app }
}

/// Replicas a chain is sized at: `spec.replicas`, or the autoscaler's min
/// when larger (an HPA overrides `spec.replicas`).
pub fn replicas(inv: &Inventory, w: &Workload) -> (u32, String) {
    match inv.autoscalers_of(w).iter().map(|a| a.min).max() {
        Some(m) if m > w.replicas => (m, format!("{m} replicas (autoscaler minReplicas)")),
        _ => (w.replicas.max(1), format!("{} replicas", w.replicas.max(1))),
    }
}

fn pod_hops(inv: &Inventory, w: &Workload, opts: &ChainOptions) -> Vec<Hop> {
    let pl = pod_limits(inv, w, opts);
    let (n, rep) = replicas(inv, w);
    let mut hops = Vec::new();
    if w.sidecar.is_some() {
        let (limit, how, assumed, pos) = match pl.sidecar {
            Some((v, how, a, pos)) => {
                (Some(v * n as f64), format!("{how} per pod × {rep}"), a, pos)
            }
            None => (
                None,
                "no inbound limit found".into(),
                false,
                w.src.pos.clone(),
            ),
        };
        hops.push(Hop {
            kind: HopKind::Sidecar,
            name: format!("{} sidecars", w.name),
            limit,
            unknown: false,
            how,
            assumed,
            pos,
            object: w.key(),
        });
    }
    let (limit, how, unknown) = match pl.app {
        Some((v, how)) => (Some(v * n as f64), format!("{how} per pod × {rep}"), false),
        None => (
            None,
            format!(
                "app concurrency not stated (set the pod annotation {} or a workers env/arg)",
                model::workload::WORKERS_ANNOTATION
            ),
            true,
        ),
    };
    hops.push(Hop {
        kind: HopKind::App,
        name: format!("{} app", w.name),
        limit,
        unknown,
        how,
        assumed: false,
        pos: w.src.pos.clone(),
        object: w.key(),
    });
    hops
}

/// A client of a destination: its sidecars each hold their own pool.
struct Caller {
    /// Its namespace (None: not known; the lookup starts at the service's).
    ns: Option<String>,
    /// The ServiceEntry host it calls through (its DestinationRule is
    /// looked up by that host).
    via: Option<model::calls::Via>,
    /// Its pods (one client sidecar each).
    pods: u32,
    /// Who it is, for the `how`.
    who: String,
    /// Its workload's key, when known.
    key: Option<String>,
}

/// The callers of `svc` the configs show: the ingress gateway for a
/// gateway route, else the sidecar workloads that call it.
fn mesh_callers(inv: &Inventory, callers: &model::calls::CallerMap, svc: &Service) -> Vec<Caller> {
    callers
        .get(&(svc.namespace.clone(), svc.name.clone()))
        .into_iter()
        .flatten()
        .map(|c| {
            let w = &inv.workloads[c.workload];
            let (n, _) = replicas(inv, w);
            let via = c
                .via
                .as_ref()
                .map(|v| format!(" through {}", v.what))
                .unwrap_or_default();
            Caller {
                ns: Some(w.namespace.clone()),
                via: c.via.clone(),
                pods: n,
                who: format!("calling pods ({}/{}) [{}{via}]", w.namespace, w.name, c.how),
                key: Some(w.key()),
            }
        })
        .collect()
}

/// The pool for a destination, summed over its callers: Istio's pool is
/// per client sidecar, so the destination admits Σ (caller pods × the
/// limit that caller's DestinationRule lookup gives). A subset's
/// `connectionPool` replaces the host's (Istio merges traffic policies
/// field by field at the top level). One caller without a limit makes
/// the hop unlimited. Also returns whether every caller's pool carries a
/// retry budget (`maxRetries`).
fn pool_hop(
    inv: &Inventory,
    target: &str,
    home: &str,
    callers: &[Caller],
    subset: Option<&str>,
    uses: &mut Vec<String>,
) -> (Option<Hop>, bool) {
    let unknown = [Caller {
        ns: None,
        via: None,
        pods: 1,
        who: "per caller proxy (callers not in the configs)".into(),
        key: None,
    }];
    let known = !callers.is_empty();
    let callers = if known { callers } else { &unknown[..] };
    let mut total = 0.0;
    let mut parts = Vec::new();
    let mut first: Option<(String, Pos, String)> = None;
    let mut budget = true;
    let mut unlimited = false;
    for c in callers {
        let dr = match &c.via {
            Some(v) => inv.destination_rule_for_host(&v.host, &v.namespace, c.ns.as_deref()),
            None => inv.destination_rule_for_host(target, home, c.ns.as_deref()),
        };
        let Some(dr) = dr else {
            unlimited = true;
            budget = false;
            continue;
        };
        let k = model::key("DestinationRule", &dr.namespace, &dr.name);
        if !uses.contains(&k) {
            uses.push(k);
        }
        let (pool, label) = match subset.and_then(|name| dr.subsets.iter().find(|(n, _)| n == name))
        {
            Some((name, p)) => (p, format!(" subset {name}")),
            None => (&dr.pool, String::new()),
        };
        budget &= pool.max_retries.count().is_some();
        let Some((n, how)) = pool.in_flight() else {
            unlimited = true;
            continue;
        };
        total += n as f64 * c.pods as f64;
        parts.push(format!("{how} × {} {}", c.pods, c.who));
        first.get_or_insert_with(|| {
            (
                format!("DestinationRule {}/{}{label} pool", dr.namespace, dr.name),
                dr.src.line_of(if pool.max_requests.count().is_some() {
                    "http2MaxRequests"
                } else {
                    "maxConnections"
                }),
                model::key("DestinationRule", &dr.namespace, &dr.name),
            )
        });
    }
    let Some((name, pos, object)) = first.filter(|_| !unlimited) else {
        return (None, budget);
    };
    let how = if known {
        format!(
            "a pool is per client sidecar: Σ caller pods × limit = {} = {}",
            parts.join(" + "),
            trim(total)
        )
    } else {
        parts.join(" + ")
    };
    let hop = Hop {
        kind: HopKind::Pool,
        name,
        limit: Some(total),
        unknown: false,
        how,
        assumed: false,
        pos,
        object,
    };
    (Some(hop), budget)
}

/// The per-caller pool a [`HopKind::Pool`] hop was read from: that of the
/// DestinationRule its `object` names, or of the subset its name says
/// (`pool_hop` writes `DestinationRule ns/name subset S pool` when a
/// subset's pool replaced the host's). Read-only, for the scenario export,
/// which models a pool per calling proxy.
pub fn pool_of<'a>(inv: &'a Inventory, hop: &Hop) -> Option<&'a model::PoolLimits> {
    if hop.kind != HopKind::Pool {
        return None;
    }
    let dr = inv
        .destination_rules
        .iter()
        .find(|d| model::key("DestinationRule", &d.namespace, &d.name) == hop.object)?;
    let rest = hop
        .name
        .strip_prefix(&format!("DestinationRule {}/{}", dr.namespace, dr.name))?
        .strip_suffix(" pool")?;
    match rest.strip_prefix(" subset ") {
        Some(subset) => dr.subsets.iter().find(|(n, _)| n == subset).map(|(_, p)| p),
        None => rest.is_empty().then_some(&dr.pool),
    }
}

/// Every workload a Service selects, as indices in inventory order:
/// Kubernetes sends a Service's traffic to each ready pod its selector
/// matches, whichever Deployment made it (v1 and v2 of a workload alike).
fn backing_indices(inv: &Inventory, svc: &Service) -> Vec<usize> {
    inv.selected(&svc.namespace, &svc.selector)
}

fn show_labels(l: &std::collections::BTreeMap<String, String>) -> String {
    l.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A hop whose facts are not among the inputs: its `how` says what would
/// fill it.
fn unknown_hop(name: String, how: String, pos: Pos, object: String) -> Hop {
    Hop {
        kind: HopKind::App,
        name,
        limit: None,
        unknown: true,
        how,
        assumed: false,
        pos,
        object,
    }
}

/// A subset a route names, with the labels its DestinationRule gives it.
struct SubsetPick {
    name: String,
    labels: std::collections::BTreeMap<String, String>,
    dr: String,
}

/// The subset's labels from the DestinationRule the callers apply to
/// `target`; None when the route names no subset or the rule does not
/// define it with labels.
fn subset_pick(
    inv: &Inventory,
    target: &str,
    home: &str,
    callers: &[Caller],
    subset: Option<&str>,
) -> Option<SubsetPick> {
    let name = subset?;
    let viewer = callers.first().and_then(|c| c.ns.as_deref());
    let dr = inv.destination_rule_for_host(target, home, viewer)?;
    let labels = dr
        .subset_labels
        .iter()
        .find(|(n, l)| n == name && !l.is_empty())
        .map(|(_, l)| l.clone())?;
    Some(SubsetPick {
        name: name.to_string(),
        labels,
        dr: format!("DestinationRule {}/{}", dr.namespace, dr.name),
    })
}

/// The destination's pod hops: every workload the Service selects,
/// narrowed to the subset's labels when the route names one, summed
/// (capacity adds across Deployments behind one Service). A missing fact
/// is an unknown hop saying what would fill it. Also returns the
/// workloads.
fn destination_hops(
    inv: &Inventory,
    svc: &Service,
    subset: Option<&SubsetPick>,
    opts: &ChainOptions,
) -> (Vec<Hop>, Vec<usize>) {
    let mut ws = backing_indices(inv, svc);
    if let Some(p) = subset {
        ws.retain(|i| selects(&p.labels, &inv.workloads[*i].pod_labels));
    }
    let who = format!("Service {}/{}", svc.namespace, svc.name);
    if ws.is_empty() {
        let how = if svc.selector.is_empty() {
            format!(
                "{who} has no selector, so its pods are not in the configs: add the workload behind its endpoints"
            )
        } else if let Some(p) = subset {
            format!(
                "no workload selected by {who} carries subset {}'s labels {} ({}): add the Deployment of that version",
                p.name,
                show_labels(&p.labels),
                p.dr
            )
        } else {
            format!(
                "not among the inputs: add the Deployment selected by {who} (selector {})",
                show_labels(&svc.selector)
            )
        };
        let hop = unknown_hop(
            format!("{} pods", svc.name),
            how,
            svc.src.pos.clone(),
            model::key("Service", &svc.namespace, &svc.name),
        );
        return (vec![hop], ws);
    }
    if ws.len() == 1 {
        return (pod_hops(inv, &inv.workloads[ws[0]], opts), ws);
    }
    // Several workloads: one hop per kind, the sum of each workload's.
    let parts: Vec<Vec<Hop>> = ws
        .iter()
        .map(|i| pod_hops(inv, &inv.workloads[*i], opts))
        .collect();
    let names: Vec<&str> = ws.iter().map(|i| inv.workloads[*i].name.as_str()).collect();
    let scope = match subset {
        Some(p) => format!(
            "{who} subset {} ({}) selects {} workloads",
            p.name,
            show_labels(&p.labels),
            ws.len()
        ),
        None => format!("{who} selects {} workloads", ws.len()),
    };
    let mut hops = Vec::new();
    for (kind, label) in [(HopKind::Sidecar, "sidecars"), (HopKind::App, "app")] {
        if !parts.iter().any(|p| p.iter().any(|h| h.kind == kind)) {
            continue;
        }
        // A workload without a sidecar admits at that hop what its app does.
        let each: Vec<&Hop> = parts
            .iter()
            .filter_map(|p| p.iter().find(|h| h.kind == kind).or_else(|| p.last()))
            .collect();
        let unknown = each.iter().any(|h| h.unknown);
        let limit: Option<f64> = each.iter().map(|h| h.limit).sum();
        let terms: Vec<String> = each
            .iter()
            .map(|h| {
                let v = match (h.limit, h.unknown) {
                    (Some(l), _) => trim(l),
                    (None, true) => "unknown".into(),
                    (None, false) => "unlimited".into(),
                };
                format!("{} {v} ({})", h.name, h.how)
            })
            .collect();
        let total = match (limit, unknown) {
            (Some(l), _) => trim(l),
            (None, true) => "unknown".into(),
            (None, false) => "unlimited".into(),
        };
        hops.push(Hop {
            kind,
            name: format!("{} {label}", names.join("+")),
            limit: if unknown { None } else { limit },
            unknown,
            how: format!("{scope}, Σ = {} = {total}", terms.join(" + ")),
            assumed: each.iter().any(|h| h.assumed),
            pos: each[0].pos.clone(),
            object: each[0].object.clone(),
        });
    }
    (hops, ws)
}

/// The namespace a host of the form `name.ns.svc.cluster.local` names.
fn host_namespace(host: &str) -> Option<&str> {
    let rest = host.strip_suffix(&format!(".svc.{}", model::CLUSTER_DOMAIN))?;
    let (_, ns) = rest.split_once('.')?;
    (!ns.is_empty() && !ns.contains('.')).then_some(ns)
}

fn is_ingress(w: &Workload) -> bool {
    w.pod_labels
        .get("istio")
        .is_some_and(|v| v == "ingressgateway")
        || w.name.contains("ingressgateway")
}

/// The Service a server address points at (`name.ns.svc…:port`).
fn service_for_addr<'a>(inv: &'a Inventory, addr: &str) -> Option<&'a Service> {
    let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
    if host.parse::<std::net::IpAddr>().is_ok() || !host.contains('.') {
        return None;
    }
    inv.service_for_host(host, "default")
}

fn frontend_hop(cfg: &Config, f: &Proxy) -> Hop {
    let (limit, how, line, unknown) = match cfg.frontend_limit(f) {
        ConnLimit::Own(n, l) => (
            Some(n as f64),
            format!("frontend maxconn {n} connections × 1 request per connection"),
            l,
            false,
        ),
        ConnLimit::Global(g, l) => (
            Some(g as f64),
            format!(
                "global maxconn {g} connections × 1 request per connection (the frontend sets none)"
            ),
            l,
            false,
        ),
        ConnLimit::Unknown(u) => (
            None,
            format!("{u}: unknown to the audit; write the value, or audit the file as rendered"),
            f.pos.line,
            true,
        ),
        ConnLimit::Unset => (
            None,
            "no maxconn: HAProxy derives it from the file-descriptor limit at run time".into(),
            f.pos.line,
            true,
        ),
    };
    Hop {
        kind: HopKind::Frontend,
        name: format!("haproxy frontend {}", f.name),
        limit,
        unknown,
        how,
        assumed: false,
        pos: Pos::new(&cfg.file, line),
        object: haproxy_key(cfg, f),
    }
}

/// The key of an HAProxy section in findings and suppressions.
pub fn haproxy_key(cfg: &Config, p: &Proxy) -> String {
    let kind = match p.kind {
        crate::inputs::haproxy::ProxyKind::Frontend => "frontend",
        crate::inputs::haproxy::ProxyKind::Backend => "backend",
        crate::inputs::haproxy::ProxyKind::Listen => "listen",
    };
    format!("HAProxy {kind} {} ({})", p.name, cfg.file)
}

/// Active servers' total maxconn, None if any is unlimited.
pub fn active_capacity(b: &Proxy) -> Option<u64> {
    let active: Vec<_> = b
        .servers
        .iter()
        .filter(|s| !s.backup && !s.disabled)
        .collect();
    if active.is_empty() {
        return None;
    }
    active.iter().map(|s| s.maxconn.filter(|m| *m > 0)).sum()
}

/// A backend's `fullconn`: as written, else HAProxy's default of 10% of
/// the sum of the `maxconn` of the frontends that may route to it
/// (`default_backend`, `use_backend`, or the listen section itself; a
/// frontend without `maxconn` counts the global one). None when a frontend's
/// limit is unknown.
pub fn fullconn_of(cfg: &Config, b: &Proxy) -> Option<(u64, String)> {
    if let Some((f, _)) = b.fullconn.filter(|(f, _)| *f > 0) {
        return Some((f, format!("fullconn {f}")));
    }
    let mut sum = 0u64;
    let mut n = 0;
    for f in cfg.proxies.iter().filter(|p| p.is_frontend()) {
        let routes = f.name == b.name && f.kind == crate::inputs::haproxy::ProxyKind::Listen
            || f.default_backend.as_deref() == Some(b.name.as_str())
            || f.use_backends.contains(&b.name);
        if !routes {
            continue;
        }
        let m = cfg.frontend_limit(f).known()?;
        sum = sum.saturating_add(m.0);
        n += 1;
    }
    (n > 0).then(|| {
        let f = (sum / 10).max(1);
        (
            f,
            format!("fullconn {f} (not set: 10% of the {n} routing frontends' maxconn {sum})"),
        )
    })
}

/// Most fixed-point steps of [`dynamic_capacity`] (each step only grows
/// the served count; the bound keeps hostile numbers from looping long).
const MAX_DYNAMIC_STEPS: usize = 1000;

/// The dynamic limit of a backend whose servers set `minconn`: a server
/// admits max(minconn, maxconn × L ÷ fullconn), at most maxconn, where L
/// is the backend's load (served + queued). With at most Q queued (the
/// servers' `maxqueue`, all finite), the served count is the fixed point
/// S = Σ limit(S + Q). Returns (S, Σ maxconn, Q) or None when no active
/// server sets `minconn` below its `maxconn`, a `maxconn` is unlimited, or
/// a queue is unlimited (the queue then grows until every server reaches
/// `maxconn`).
pub fn dynamic_capacity(b: &Proxy, fullconn: u64) -> Option<(f64, u64, u64)> {
    let active: Vec<_> = b
        .servers
        .iter()
        .filter(|s| !s.backup && !s.disabled)
        .collect();
    if !active
        .iter()
        .any(|s| s.minconn.is_some_and(|m| s.maxconn.is_some_and(|x| m < x)))
    {
        return None;
    }
    let mut servers = Vec::new();
    let mut q = 0u64;
    for s in &active {
        let max = s.maxconn.filter(|m| *m > 0)?;
        let min = s.minconn.filter(|m| *m > 0).unwrap_or(max).min(max);
        q = q.saturating_add(s.maxqueue.filter(|m| *m > 0)?);
        servers.push((min as f64, max as f64));
    }
    let f = fullconn.max(1) as f64;
    let total_max: f64 = servers.iter().map(|s| s.1).sum();
    let mut served: f64 = servers.iter().map(|s| s.0).sum();
    for _ in 0..MAX_DYNAMIC_STEPS {
        let load = served + q as f64;
        let next: f64 = servers
            .iter()
            .map(|(min, max)| (max * load / f).floor().max(*min).min(*max))
            .sum();
        if next <= served {
            break;
        }
        served = next;
    }
    Some((served, total_max as u64, q))
}

fn backend_hop(cfg: &Config, b: &Proxy) -> Hop {
    let n = b
        .servers
        .iter()
        .filter(|s| !s.backup && !s.disabled)
        .count();
    let queue = |b: &Proxy| -> String {
        let qs: Option<u64> = b
            .servers
            .iter()
            .filter(|s| !s.backup && !s.disabled)
            .map(|s| s.maxqueue.filter(|m| *m > 0))
            .sum();
        match qs {
            Some(q) => format!("; up to {q} more wait in the servers' queues (maxqueue)"),
            None => "; queues unbounded (no maxqueue)".into(),
        }
    };
    let dynamic = fullconn_of(cfg, b).and_then(|(f, why)| dynamic_capacity(b, f).map(|d| (d, why)));
    let unknown = b
        .servers
        .iter()
        .filter(|s| !s.backup && !s.disabled)
        .find_map(|s| s.maxconn_unknown().map(|u| (s, u)));
    if let Some((s, u)) = unknown {
        return Hop {
            kind: HopKind::Backend,
            name: format!("haproxy backend {}", b.name),
            limit: None,
            unknown: true,
            how: format!(
                "{n} active servers; {} {u}: unknown to the audit, so their sum is too; write the value, or audit the file as rendered",
                s.name
            ),
            assumed: false,
            pos: s.pos.clone(),
            object: haproxy_key(cfg, b),
        };
    }
    let (limit, how) = match (active_capacity(b), dynamic) {
        (Some(_), Some(((s, max, q), why))) => (
            Some(s),
            format!(
                "dynamic maxconn (minconn with {why}): each server admits max(minconn, maxconn × load ÷ fullconn); with at most {q} queued the servers reach {} of their {max} maxconn connections × 1 request per connection",
                trim(s)
            ),
        ),
        (Some(c), None) => (
            Some(c as f64),
            format!(
                "sum of {n} active servers' maxconn = {c} connections × 1 request per connection{}",
                queue(b)
            ),
        ),
        (None, _) => (
            None,
            format!("{n} active servers, at least one without maxconn (unlimited)"),
        ),
    };
    Hop {
        kind: HopKind::Backend,
        name: format!("haproxy backend {}", b.name),
        limit,
        unknown: false,
        how,
        assumed: false,
        pos: b.pos.clone(),
        object: haproxy_key(cfg, b),
    }
}

/// An edge prefix: hops and retry layers before the mesh.
struct Edge {
    hops: Vec<Hop>,
    layers: Vec<RetryLayer>,
}

/// Builds every route's chain.
pub fn build(inv: &Inventory, opts: &ChainOptions) -> Vec<Chain> {
    let mut chains = Vec::new();
    let client = (opts.client_attempts > 1).then(|| RetryLayer {
        what: format!(
            "clients: {} attempts (--client-attempts; not in any config)",
            opts.client_attempts
        ),
        retries: opts.client_attempts - 1,
        on: [true; 3],
        per_try: None,
        default: false,
        redispatch: None,
    });
    let caller_map = inv.callers();
    let mut ingress_edges: Vec<Edge> = Vec::new();
    let mut routed: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    // Hosts some chain already ends at (a Service's FQDN or a route's host).
    let mut targeted: std::collections::HashSet<String> = std::collections::HashSet::new();
    for cfg in &inv.haproxy {
        for f in cfg.proxies.iter().filter(|p| p.is_frontend()) {
            let mut backends: Vec<&str> = f
                .default_backend
                .iter()
                .map(String::as_str)
                .chain(f.use_backends.iter().map(String::as_str))
                .collect();
            backends.dedup();
            if f.kind == crate::inputs::haproxy::ProxyKind::Listen {
                backends.insert(0, &f.name);
            }
            for bname in backends {
                let Some(b) = cfg.backend(bname) else {
                    continue;
                };
                let mut hops = vec![frontend_hop(cfg, f)];
                if f.kind != crate::inputs::haproxy::ProxyKind::Listen
                    || b.name != f.name
                    || !b.servers.is_empty()
                {
                    hops.push(backend_hop(cfg, b));
                }
                let explicit = b.retries.is_some() || b.retry_on.is_some();
                let mut layers: Vec<RetryLayer> = client.iter().cloned().collect();
                layers.push(
                    RetryLayer::haproxy(b.retries(), &b.retry_on(), explicit).redispatching(
                        b.redispatch_interval,
                        b.servers
                            .iter()
                            .filter(|s| !s.backup && !s.disabled)
                            .count(),
                    ),
                );
                let target = b
                    .servers
                    .iter()
                    .find_map(|s| service_for_addr(inv, &s.addr));
                let mut chain = Chain {
                    route: format!("haproxy {}/{}", f.name, b.name),
                    object: haproxy_key(cfg, b),
                    pos: b.pos.clone(),
                    hops: hops.clone(),
                    retries: layers.clone(),
                    timeout: b.timeout("server"),
                    first_to_saturate: None,
                    workload: None,
                    budget: false,
                    fault: None,
                    workloads: Vec::new(),
                    uses: Vec::new(),
                };
                if let Some(svc) = target {
                    let (dest, ws) = destination_hops(inv, svc, None, opts);
                    if ws.first().is_some_and(|i| is_ingress(&inv.workloads[*i])) {
                        ingress_edges.push(Edge {
                            hops: hops.clone(),
                            layers: layers.clone(),
                        });
                    }
                    chain.hops.extend(dest);
                    built_from(inv, Some(svc), &ws, &[], &mut chain.uses);
                    chain.workload = ws.first().copied();
                    chain.workloads = ws;
                }
                chains.push(chain);
            }
        }
    }
    let ingress = inv.workloads.iter().find(|w| is_ingress(w));
    // A VirtualService that loses every host it names to another routes
    // nothing (said by SB304).
    let lost: std::collections::HashSet<usize> = model::vs_order::shadowed(inv)
        .into_iter()
        .filter(|s| s.everywhere)
        .map(|s| s.loser)
        .collect();
    for (ri, ro) in inv.routes.iter().enumerate() {
        if lost.contains(&ri) {
            continue;
        }
        // A gateway applies only the VirtualServices exported to its
        // namespace (Istio 1.27 "Virtual Service", `exportTo`): one hidden
        // from the ingress gateway routes nothing there.
        if ro.at_gateway && ingress.is_some_and(|g| !ro.visible_to(&g.namespace)) {
            continue;
        }
        // A mesh VirtualService none of whose hosts a call can land on
        // (`reviews.prod` beside Service reviews in prod: calls land on the
        // Service's own host) is attached to nothing and routes nothing
        // (Istio 1.27 "Virtual Service", `hosts`).
        if ro.kind == "VirtualService"
            && !ro.at_gateway
            && !ro.hosts.iter().any(|h| inv.vs_host_applies(h))
        {
            continue;
        }
        for r in &ro.routes {
            for (di, host) in r.destinations.iter().enumerate() {
                let subset = r.subsets.get(di).cloned().flatten();
                // Destinations are resolved at load, as Istio resolves
                // them; only an exact Service FQDN matches. A host whose
                // Service is not among the inputs still gets its chain:
                // the callers' pool applies all the same (partial inputs).
                let svc = inv.service_for_fqdn(host);
                // Without its Service, a host is kept when it is a Service's
                // FQDN (that Service is what is missing) or a
                // DestinationRule names it; a dotted host such as
                // `cart.shop` is taken as written by Istio and reaches
                // nothing (said by [`unplaced`]).
                if svc.is_none()
                    && host_namespace(host).is_none()
                    && inv
                        .destination_rule_for_host(host, &ro.namespace, None)
                        .is_none()
                {
                    continue;
                }
                // A Service not exported to the gateway's namespace is no
                // cluster of the gateway: the route reaches nothing there.
                if let Some(svc) = svc
                    && ro.at_gateway
                    && ingress.is_some_and(|g| !svc.visible_to(&g.namespace))
                {
                    continue;
                }
                let (target, home) = match svc {
                    Some(svc) => {
                        routed.insert((svc.namespace.clone(), svc.name.clone()));
                        (svc.fqdn(), svc.namespace.clone())
                    }
                    None => (
                        host.clone(),
                        host_namespace(host).unwrap_or(&ro.namespace).to_string(),
                    ),
                };
                targeted.insert(target.clone());
                let mut hops = Vec::new();
                let mut layers: Vec<RetryLayer> = Vec::new();
                let mut callers = Vec::new();
                if ro.at_gateway {
                    if let Some(e) = ingress_edges.first() {
                        hops.extend(e.hops.iter().cloned());
                        layers.extend(e.layers.iter().cloned());
                    } else {
                        layers.extend(client.iter().cloned());
                    }
                    if let Some(g) = ingress {
                        let (n, _) = replicas(inv, g);
                        callers.push(Caller {
                            ns: Some(g.namespace.clone()),
                            via: None,
                            pods: n,
                            who: format!("ingress gateway pods ({})", g.name),
                            key: Some(g.key()),
                        });
                    }
                } else {
                    layers.extend(client.iter().cloned());
                    // Only callers whose namespace sees this VirtualService
                    // apply its route (`exportTo`).
                    if let Some(svc) = svc {
                        callers = mesh_callers(inv, &caller_map, svc)
                            .into_iter()
                            .filter(|c| c.ns.as_deref().is_none_or(|ns| ro.visible_to(ns)))
                            .collect();
                    }
                }
                let mut uses = Vec::new();
                let (pool, budget) =
                    pool_hop(inv, &target, &home, &callers, subset.as_deref(), &mut uses);
                hops.extend(pool);
                let pick = subset_pick(inv, &target, &home, &callers, subset.as_deref());
                let ws = match svc {
                    Some(svc) => {
                        let (dest, ws) = destination_hops(inv, svc, pick.as_ref(), opts);
                        hops.extend(dest);
                        ws
                    }
                    None => {
                        hops.push(missing_service_hop(
                            host,
                            r.pos.clone(),
                            &model::key(ro.kind, &ro.namespace, &ro.name),
                        ));
                        Vec::new()
                    }
                };
                built_from(inv, svc, &ws, &callers, &mut uses);
                let wi = ws.first().copied();
                let mut retry = r.retry.clone();
                if ro.kind == "VirtualService"
                    && !ro.at_gateway
                    && wi.is_some_and(|i| inv.workloads[i].sidecar.is_none())
                    && retry.default
                {
                    // No sidecar at the destination's namespace: callers are
                    // assumed to be in the mesh all the same (said so).
                    retry.what.push_str(" (callers assumed in the mesh)");
                }
                layers.push(retry);
                chains.push(Chain {
                    // A route splitting one host by subsets has a chain per
                    // subset: the subset tells them apart.
                    route: format!(
                        "{} {}/{} http[{}] → {}{}",
                        ro.kind,
                        ro.namespace,
                        ro.name,
                        r.index,
                        svc.map_or(host.as_str(), |s| s.name.as_str()),
                        subset
                            .as_deref()
                            .map_or(String::new(), |s| format!(" ({s})"))
                    ),
                    object: model::key(ro.kind, &ro.namespace, &ro.name),
                    pos: r.pos.clone(),
                    hops,
                    retries: layers,
                    timeout: r.timeout,
                    first_to_saturate: None,
                    workload: wi,
                    budget,
                    fault: r.fault.clone(),
                    workloads: ws,
                    uses,
                });
            }
        }
    }
    for svc in &inv.services {
        if routed.contains(&(svc.namespace.clone(), svc.name.clone())) {
            continue;
        }
        let ws = backing_indices(inv, svc);
        if ws.iter().any(|i| is_ingress(&inv.workloads[*i])) {
            continue;
        }
        // A Service whose pods show a sidecar is in the mesh; so is one a
        // DestinationRule names, whatever its pods show or whether they
        // are among the inputs: the rule's pool lives in the callers'
        // proxies.
        let meshed = ws.iter().any(|i| inv.workloads[*i].sidecar.is_some());
        if !meshed && inv.destination_rule_for(svc, None).is_none() {
            continue;
        }
        targeted.insert(svc.fqdn());
        let mut uses = Vec::new();
        let callers = mesh_callers(inv, &caller_map, svc);
        let (pool, budget) = pool_hop(inv, &svc.fqdn(), &svc.namespace, &callers, None, &mut uses);
        let mut hops: Vec<Hop> = pool.into_iter().collect();
        let (dest, ws) = destination_hops(inv, svc, None, opts);
        built_from(inv, Some(svc), &ws, &callers, &mut uses);
        hops.extend(dest);
        let mut layers: Vec<RetryLayer> = client.iter().cloned().collect();
        let mut d = RetryLayer::istio_default();
        d.what
            .push_str(" at the calling sidecar (no VirtualService routes this service)");
        layers.push(d);
        chains.push(Chain {
            route: format!("mesh → {}/{}", svc.namespace, svc.name),
            object: model::key("Service", &svc.namespace, &svc.name),
            pos: svc.src.pos.clone(),
            hops,
            retries: layers,
            timeout: None,
            first_to_saturate: None,
            workload: ws.first().copied(),
            budget,
            fault: None,
            workloads: ws,
            uses,
        });
    }
    // A DestinationRule for a host no Service and no route among the inputs
    // names: its pool still bounds every caller of that host.
    for dr in &inv.destination_rules {
        let host = model::config_host(&dr.host, &dr.namespace);
        if host.starts_with('*') || host.is_empty() || targeted.contains(&host) {
            continue;
        }
        targeted.insert(host.clone());
        let home = host_namespace(&host).unwrap_or(&dr.namespace).to_string();
        let mut uses = Vec::new();
        let (pool, budget) = pool_hop(inv, &host, &home, &[], None, &mut uses);
        if uses.is_empty() {
            // Not visible from the host's namespace (`exportTo`): said by
            // [`unplaced`].
            continue;
        }
        let mut hops: Vec<Hop> = pool.into_iter().collect();
        let object = model::key("DestinationRule", &dr.namespace, &dr.name);
        hops.push(missing_service_hop(&host, dr.src.pos.clone(), &object));
        let mut layers: Vec<RetryLayer> = client.iter().cloned().collect();
        let mut d = RetryLayer::istio_default();
        d.what.push_str(
            " at the calling sidecar (no VirtualService among the inputs routes this host)",
        );
        layers.push(d);
        chains.push(Chain {
            route: format!("mesh → {host}"),
            object,
            pos: dr.src.line_of("host"),
            hops,
            retries: layers,
            timeout: None,
            first_to_saturate: None,
            workload: None,
            budget,
            fault: None,
            workloads: Vec::new(),
            uses,
        });
    }
    for c in &mut chains {
        c.first_to_saturate = c
            .hops
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.limit.map(|l| (i, l)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i);
    }
    chains
}

/// The hop of a destination whose Service is not among the inputs.
fn missing_service_hop(host: &str, pos: Pos, object: &str) -> Hop {
    let what = match host_namespace(host) {
        Some(ns) => format!("Service {ns}/{}", host.split('.').next().unwrap_or(host)),
        None => format!("the Service or ServiceEntry for {host}"),
    };
    unknown_hop(
        format!("{host} pods"),
        format!(
            "{what} is not among the inputs: add it and the Deployment it selects (the callers' pool applies all the same)"
        ),
        pos,
        object.to_string(),
    )
}

/// Objects read but placed on no chain, each said (info, SB001) with why,
/// never dropped without a word: a DestinationRule no chain consults, a
/// VirtualService or HTTPRoute that routes no chain.
pub fn unplaced(inv: &Inventory, chains: &[Chain]) -> Vec<crate::finding::Finding> {
    let mut placed: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for c in chains {
        placed.insert(&c.object);
        placed.extend(c.hops.iter().map(|h| h.object.as_str()));
        placed.extend(c.uses.iter().map(String::as_str));
    }
    let mut out = Vec::new();
    let mut say = |object: String, pos: Pos, message: String| {
        out.push(crate::finding::Finding {
            rule: crate::rules::PARSE_ERROR,
            severity: crate::finding::Severity::Info,
            pos,
            object,
            message,
        });
    };
    for dr in &inv.destination_rules {
        let k = model::key("DestinationRule", &dr.namespace, &dr.name);
        if placed.contains(k.as_str()) {
            continue;
        }
        let host = model::config_host(&dr.host, &dr.namespace);
        let why = if host.starts_with('*') {
            format!("its wildcard host {host} matches no Service or route among the inputs")
        } else {
            format!(
                "its exportTo hides it from the proxies that call {host}, or another rule wins Istio's lookup for them"
            )
        };
        say(
            k,
            dr.src.line_of("host"),
            format!(
                "read, but placed on no capacity chain: {why}; add the Services it is meant for, or check its host and exportTo"
            ),
        );
    }
    for ro in &inv.routes {
        let k = model::key(ro.kind, &ro.namespace, &ro.name);
        if placed.contains(k.as_str()) {
            continue;
        }
        let why = if ro.routes.iter().all(|r| r.destinations.is_empty()) {
            "it has no HTTP route with a destination".to_string()
        } else if ro.kind == "VirtualService"
            && !ro.at_gateway
            && !ro.hosts.iter().any(|h| inv.vs_host_applies(h))
        {
            format!(
                "none of its hosts ({}) is a host calls land on (a Service's own FQDN): Istio attaches it to nothing",
                ro.hosts.join(", ")
            )
        } else {
            let hosts: Vec<&str> = ro
                .routes
                .iter()
                .flat_map(|r| r.destinations.iter().map(String::as_str))
                .collect();
            format!(
                "its destinations ({}) name no Service among the inputs and no Service FQDN (Istio takes a dotted host as written), or its exportTo hides it from the proxies that would apply it",
                hosts.join(", ")
            )
        };
        say(
            k,
            ro.src.pos.clone(),
            format!("read, but placed on no capacity chain: {why}"),
        );
    }
    out
}

/// Records in `uses` what a chain was built from beyond its hops: the
/// Service resolved, the autoscalers sizing its workloads, the callers'
/// workloads.
fn built_from(
    inv: &Inventory,
    svc: Option<&Service>,
    ws: &[usize],
    callers: &[Caller],
    uses: &mut Vec<String>,
) {
    let mut add = |k: String| {
        if !uses.contains(&k) {
            uses.push(k);
        }
    };
    if let Some(svc) = svc {
        add(model::key("Service", &svc.namespace, &svc.name));
    }
    for i in ws {
        let w = &inv.workloads[*i];
        add(w.key());
        for a in inv.autoscalers_of(w) {
            add(model::key(a.kind, &a.namespace, &a.name));
        }
    }
    for c in callers {
        if let Some(k) = &c.key {
            add(k.clone());
        }
    }
}
