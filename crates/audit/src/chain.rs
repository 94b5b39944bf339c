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
use crate::inputs::haproxy::{Config, Proxy};
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
                        consider(n as f64, false, &|| {
                            (
                                format!("{what} inboundConnectionPool: {how}"),
                                l.src.line_of("inboundConnectionPool"),
                            )
                        });
                    }
                }
                InboundKind::RateLimit(r) => consider(r * latency, true, &|| {
                    (
                        format!(
                            "{what} local rate limit {} req/s × assumed latency {} (Little's law)",
                            trim(*r),
                            show(opts.assumed_latency)
                        ),
                        l.src.line_of("token_bucket"),
                    )
                }),
                InboundKind::Adaptive(m) => consider(*m as f64, false, &|| {
                    (
                        format!(
                            "{what} adaptive concurrency max_concurrency_limit {m} (the live limit may be lower)"
                        ),
                        l.src.line_of("max_concurrency_limit"),
                    )
                }),
                InboundKind::MaxRequests(m) => consider(*m as f64, false, &|| {
                    (
                        format!("{what} inbound circuit breaker max_requests {m}"),
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
    svc: &Service,
    callers: &[Caller],
    subset: Option<&str>,
) -> (Option<Hop>, bool) {
    let unknown = [Caller {
        ns: None,
        via: None,
        pods: 1,
        who: "per caller proxy (callers not in the configs)".into(),
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
            None => inv.destination_rule_for(svc, c.ns.as_deref()),
        };
        let Some(dr) = dr else {
            unlimited = true;
            budget = false;
            continue;
        };
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

fn workload_index(inv: &Inventory, svc: &Service) -> Option<usize> {
    inv.workloads
        .iter()
        .position(|w| w.namespace == svc.namespace && selects(&svc.selector, &w.pod_labels))
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
    let (limit, how, line, unknown) = match (f.maxconn, cfg.global_maxconn) {
        (Some((n, l)), _) if n > 0 => (
            Some(n as f64),
            format!("frontend maxconn {n} connections × 1 request per connection"),
            l,
            false,
        ),
        (_, Some((g, l))) if g > 0 => (
            Some(g as f64),
            format!(
                "global maxconn {g} connections × 1 request per connection (the frontend sets none)"
            ),
            l,
            false,
        ),
        _ => (
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
        let m = f
            .maxconn
            .filter(|(m, _)| *m > 0)
            .or(cfg.global_maxconn.filter(|(m, _)| *m > 0))?;
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
                };
                if let Some(svc) = target
                    && let Some(wi) = workload_index(inv, svc)
                {
                    let w = &inv.workloads[wi];
                    if is_ingress(w) {
                        ingress_edges.push(Edge {
                            hops: hops.clone(),
                            layers: layers.clone(),
                        });
                    }
                    chain.hops.extend(pod_hops(inv, w, opts));
                    chain.workload = Some(wi);
                }
                chains.push(chain);
            }
        }
    }
    let ingress = inv.workloads.iter().find(|w| is_ingress(w));
    for ro in &inv.routes {
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
                // them; only an exact Service FQDN matches.
                let Some(svc) = inv.service_for_fqdn(host) else {
                    continue;
                };
                // A Service not exported to the gateway's namespace is no
                // cluster of the gateway: the route reaches nothing there.
                if ro.at_gateway && ingress.is_some_and(|g| !svc.visible_to(&g.namespace)) {
                    continue;
                }
                routed.insert((svc.namespace.clone(), svc.name.clone()));
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
                        });
                    }
                } else {
                    layers.extend(client.iter().cloned());
                    // Only callers whose namespace sees this VirtualService
                    // apply its route (`exportTo`).
                    callers = mesh_callers(inv, &caller_map, svc)
                        .into_iter()
                        .filter(|c| c.ns.as_deref().is_none_or(|ns| ro.visible_to(ns)))
                        .collect();
                }
                let (pool, budget) = pool_hop(inv, svc, &callers, subset.as_deref());
                hops.extend(pool);
                let wi = workload_index(inv, svc);
                if let Some(wi) = wi {
                    hops.extend(pod_hops(inv, &inv.workloads[wi], opts));
                }
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
                    route: format!(
                        "{} {}/{} http[{}] → {}",
                        ro.kind, ro.namespace, ro.name, r.index, svc.name
                    ),
                    object: model::key(ro.kind, &ro.namespace, &ro.name),
                    pos: r.pos.clone(),
                    hops,
                    retries: layers,
                    timeout: r.timeout,
                    first_to_saturate: None,
                    workload: wi,
                    budget,
                });
            }
        }
    }
    for svc in &inv.services {
        if routed.contains(&(svc.namespace.clone(), svc.name.clone())) {
            continue;
        }
        let Some(wi) = workload_index(inv, svc) else {
            continue;
        };
        let w = &inv.workloads[wi];
        if w.sidecar.is_none() || is_ingress(w) {
            continue;
        }
        let (pool, budget) = pool_hop(inv, svc, &mesh_callers(inv, &caller_map, svc), None);
        let mut hops: Vec<Hop> = pool.into_iter().collect();
        hops.extend(pod_hops(inv, w, opts));
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
            workload: Some(wi),
            budget,
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
