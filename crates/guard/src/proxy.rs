//! The request path, one step per layer: route → shed → rate limit →
//! concurrency limit → retry loop → endpoint. Each step's policy lives in
//! `stormbreak-policy`; this file only wires them in that order.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request, Response, Uri, header};
use http_body::Body as _;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use stormbreak_policy::FieldError;
use stormbreak_policy::limit::AnyLimit;
use stormbreak_policy::retry::{RetryConfig, RetryPolicy};
use stormbreak_policy::shed::{Criticality, Shedder};

use crate::access_log::{AccessLog, Decision, Line, Note};
use crate::attempts::{self, Attempt, RouteRetry};
use crate::balance::Cluster;
use crate::blame::{Blame, ClientBody, ClientFault, Progress};
use crate::body::{self, Body};
use crate::clock::Clock;
use crate::config::{Cidr, ClusterConfig, ForwardPath, GuardConfig, ListenerConfig, RouteConfig};
use crate::dependency::{self, Dependency};
use crate::endpoint::AttemptError;
use crate::failover::{Capacity, Spill};
use crate::headers;
use crate::limit::{ConcurrencyLimit, Refusal};
use crate::metrics::{ClusterGauge, Gauges, LimitGauge, Metrics, RouteMetrics, ShedReason};
use crate::ratelimit::RateLimit;
use crate::restore::{self, Restore, restore_ok};
use crate::route::{self, Matcher};
use crate::shed;
use crate::stats::{Stats, bump};
use crate::target::Target;

/// A route with its policies built.
pub(crate) struct Route {
    pub(crate) name: String,
    index: u32,
    cluster: usize,
    failover: Option<usize>,
    spill: Option<Spill>,
    pub(crate) restore: Restore,
    /// What a request the restore has not admitted gets, when the route
    /// says (else the `[saturation]` answer).
    restore_answer: Option<(u16, Option<stormbreak_policy::Nanos>)>,
    pub(crate) retry: Option<RouteRetry>,
    /// The call each request must pass before it is forwarded.
    dependency: Option<Dependency>,
    retry_non_idempotent: bool,
    retry_buffer_bytes: u64,
    limit: Option<Arc<ConcurrencyLimit>>,
    criticality: Criticality,
    rate_limit: Option<RateLimit>,
    m: Arc<RouteMetrics>,
    /// Requests past admission (shed, restore, rate and concurrency limit)
    /// not yet answered: the in-flight gauge of a route without a `limit`.
    inflight: std::sync::atomic::AtomicU64,
}

/// Per-listener settings the request path needs.
pub(crate) struct ListenerSettings {
    /// Its name, for the access log and restore sites.
    pub(crate) name: String,
    pub(crate) trusted: Vec<Cidr>,
    pub(crate) criticality_header: HeaderName,
    pub(crate) max_body_bytes: u64,
    pub(crate) request_timeout: std::time::Duration,
    /// `proto=` of the `Forwarded` element: `http` or `https`.
    pub(crate) proto: &'static str,
    /// Which path goes upstream.
    pub(crate) forward_path: ForwardPath,
}

impl ListenerSettings {
    pub(crate) fn new(l: &ListenerConfig) -> Self {
        ListenerSettings {
            name: l.name.clone(),
            trusted: l
                .trusted_proxies
                .iter()
                .filter_map(|t| Cidr::parse(t))
                .collect(),
            criticality_header: HeaderName::from_bytes(l.criticality_header.as_bytes())
                .unwrap_or(HeaderName::from_static("x-stormbreak-criticality")),
            max_body_bytes: l.max_body_bytes,
            request_timeout: l.request_timeout.into(),
            proto: if l.tls.is_some() { "https" } else { "http" },
            forward_path: l.forward_path,
        }
    }
}

/// Everything the request path shares.
pub(crate) struct Proxy {
    pub(crate) clock: Clock,
    matchers: Vec<Matcher>,
    order: Vec<usize>,
    pub(crate) routes: Vec<Arc<Route>>,
    /// Each route's config, to tell on reload what changed.
    route_configs: Vec<RouteConfig>,
    pub(crate) clusters: Vec<Arc<Cluster>>,
    /// Each cluster's config, to tell on reload what changed.
    cluster_configs: Vec<ClusterConfig>,
    /// What building this proxy changed in place in the previous one's
    /// state (applied by [`Proxy::commit`] once the reload cannot fail).
    in_place: InPlace,
    pub(crate) shedder: Mutex<Shedder>,
    pub(crate) stats: Arc<Stats>,
    pub(crate) metrics: Arc<Metrics>,
    /// Each listener's name, connection cap (`max_connections` permits) and its size.
    pub(crate) connection_caps: ConnectionCaps,
    /// The access log of this config (shared with the previous one when
    /// `[access_log]` did not change).
    pub(crate) access_log: Option<Arc<AccessLog>>,
    /// `Debug` of `[access_log]`: equal means unchanged on reload.
    pub(crate) access_log_key: String,
}

/// Each listener's name and connection cap, in config order: the
/// listeners' gauges. Owned by the listeners (`crate::listen_set`), which
/// a reload may change.
pub(crate) type ConnectionCaps = Arc<Vec<(String, Arc<crate::listen_set::Cap>)>>;

/// What outlives one config across reloads: the clock every policy's time
/// is on, the counters and the metric families.
pub(crate) struct Shared {
    pub(crate) clock: Clock,
    pub(crate) stats: Arc<Stats>,
    pub(crate) metrics: Arc<Metrics>,
}

impl Shared {
    pub(crate) fn new() -> Self {
        Shared {
            clock: Clock::new(),
            stats: Arc::new(Stats::default()),
            metrics: Arc::new(Metrics::new()),
        }
    }
}

/// RFC 9110 §9.2.2: methods whose repetition has the effect of one request.
fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

fn route_of(
    config: &RouteConfig,
    index: usize,
    clusters: &[Arc<Cluster>],
    listeners: &[ListenerConfig],
    clock: Clock,
    m: Arc<RouteMetrics>,
) -> Result<Route, FieldError> {
    let cluster_index = |name: &str| clusters.iter().position(|c| c.name == name);
    Ok(Route {
        name: config.name.clone(),
        index: index as u32,
        cluster: cluster_index(&config.cluster).unwrap_or(0),
        failover: config.failover.as_deref().and_then(cluster_index),
        restore: restore::of(config, listeners, clock)?,
        restore_answer: config.restore_answer.as_ref().map(|a| a.answer()),
        spill: match &config.failover_policy {
            Some(f) => Some(Spill::new(f, clock)?),
            None => None,
        },
        retry: match &config.retry {
            Some(r) => Some(attempts::route_retry(r, config.budget.as_ref(), None)?),
            None => None,
        },
        dependency: config
            .dependency
            .as_ref()
            .map(|d| Dependency::new(d, cluster_index(&d.cluster).unwrap_or(0))),
        retry_non_idempotent: config.retry_non_idempotent,
        retry_buffer_bytes: config.retry_buffer_bytes,
        limit: match &config.limit {
            Some(l) => Some(ConcurrencyLimit::new(l, config.queue.clone(), clock)?),
            None => None,
        },
        criticality: config.criticality,
        rate_limit: match &config.rate_limit {
            Some(r) => Some(RateLimit::new(r, config.rate_limit_key.clone())?),
            None => None,
        },
        m,
        inflight: std::sync::atomic::AtomicU64::new(0),
    })
}

/// What a reload changes in place rather than rebuilds: routes whose
/// only changes are their `limit` and `retry` tables (the new algorithm
/// and policy, built and so validated, waiting for [`Proxy::commit`]) and
/// clusters whose only change is their endpoint list.
#[derive(Default)]
pub(crate) struct InPlace {
    limits: Vec<(Arc<Route>, AnyLimit)>,
    retries: Vec<(Arc<Route>, RetryConfig)>,
    /// Names of the clusters given a new endpoint list.
    pub(crate) endpoints: Vec<String>,
}

/// `Debug` of `config`, the equality a reload keeps state by.
fn key<T: std::fmt::Debug>(config: &T) -> String {
    format!("{config:?}")
}

/// Whether `a` and `b` differ in nothing but their `limit` and `retry`
/// tables, each present in both or unchanged: the route is kept, its
/// limiter given the new algorithm and its retry the new policy (its
/// budget's state kept, as `POST /retry` keeps it).
fn same_but_policies(a: &RouteConfig, b: &RouteConfig) -> bool {
    let strip = |r: &RouteConfig| {
        let mut r = r.clone();
        r.limit = None;
        r.retry = None;
        key(&r)
    };
    let in_place = |x: bool, y: bool, same: bool| (x && y) || same;
    in_place(
        a.limit.is_some(),
        b.limit.is_some(),
        key(&a.limit) == key(&b.limit),
    ) && in_place(
        a.retry.is_some(),
        b.retry.is_some(),
        key(&a.retry) == key(&b.retry),
    ) && strip(a) == strip(b)
}

impl Proxy {
    /// Builds every policy of a validated config.
    ///
    /// With a `previous` proxy (a reload), state is kept wherever the
    /// config allows: a cluster whose config is unchanged is the same
    /// cluster; one that changed only its endpoints is
    /// [`Cluster::with_endpoints`] of the old; a route unchanged, on the
    /// same clusters (kept or so updated) at the same position, is the
    /// same route, and so is one that changed only its `limit` or `retry`
    /// (its limiter and retry take the new ones on [`Proxy::commit`]).
    pub(crate) fn new(
        config: &GuardConfig,
        shared: &Shared,
        previous: Option<&Proxy>,
        access_log: Option<Arc<AccessLog>>,
        connection_caps: ConnectionCaps,
    ) -> Result<Self, FieldError> {
        let clock = shared.clock;
        let mut clusters = Vec::with_capacity(config.clusters.len());
        // Where each cluster came from in `previous`, when kept or updated.
        let mut origin = Vec::with_capacity(config.clusters.len());
        let mut in_place = InPlace::default();
        for c in &config.clusters {
            let was = previous.and_then(|p| {
                let i = p.cluster_configs.iter().position(|o| o.name == c.name)?;
                Some((i, &p.cluster_configs[i], &p.clusters[i]))
            });
            let (cluster, from) = match was {
                // An unchanged cluster keeps its pool, outlier, health and breaker state.
                Some((i, old, cluster)) if key(old) == key(c) => (cluster.clone(), Some(i)),
                Some((i, old, cluster)) if crate::balance::same_but_endpoints(old, c) => {
                    in_place.endpoints.push(c.name.clone());
                    (Arc::new(cluster.with_endpoints(c)?), Some(i))
                }
                _ => (
                    Arc::new(Cluster::new(c, clock, shared.metrics.cluster(&c.name))?),
                    None,
                ),
            };
            clusters.push(cluster);
            origin.push(from);
        }
        let mut routes = Vec::with_capacity(config.routes.len());
        for (i, r) in config.routes.iter().enumerate() {
            let kept = previous.and_then(|p| {
                let old = p.routes.get(i)?;
                let was = &p.route_configs[i];
                let same_clusters = [
                    Some(old.cluster),
                    old.failover,
                    old.dependency.as_ref().map(|d| d.cluster),
                ]
                .into_iter()
                .flatten()
                .all(|c| origin.get(c).copied().flatten() == Some(c));
                if !same_clusters {
                    return None;
                }
                if key(was) == key(r) {
                    return Some(Ok(old.clone()));
                }
                if !same_but_policies(was, r) {
                    return None;
                }
                Some((|| {
                    if let Some(limit) = r
                        .limit
                        .as_ref()
                        .filter(|_| key(&was.limit) != key(&r.limit))
                    {
                        in_place.limits.push((old.clone(), limit.build()?));
                    }
                    if let Some(retry) = r
                        .retry
                        .as_ref()
                        .filter(|_| key(&was.retry) != key(&r.retry))
                    {
                        // Validated now; installed on commit.
                        RetryPolicy::new(retry)?;
                        in_place.retries.push((old.clone(), retry.clone()));
                    }
                    Ok(old.clone())
                })())
            });
            routes.push(match kept {
                Some(r) => r?,
                None => Arc::new(route_of(
                    r,
                    i,
                    &clusters,
                    &config.listeners,
                    clock,
                    shared.metrics.route(&r.name),
                )?),
            });
        }
        let matchers: Vec<Matcher> = config
            .routes
            .iter()
            .map(|r| Matcher::new(&r.matches))
            .collect();
        let order = route::order(&matchers);
        Ok(Proxy {
            clock,
            matchers,
            order,
            routes,
            route_configs: config.routes.clone(),
            clusters,
            cluster_configs: config.clusters.clone(),
            in_place,
            shedder: Mutex::new(Shedder::new(&config.shed_config())?),
            stats: shared.stats.clone(),
            metrics: shared.metrics.clone(),
            connection_caps,
            access_log,
            access_log_key: format!("{:?}", config.access_log),
        })
    }

    /// Applies what [`Proxy::new`] prepared to change in place (the
    /// kept routes' new limits and retry policies); returns (routes whose
    /// limit or retry changed,
    /// clusters whose endpoints changed), by name. Call it once, when the
    /// reload can no longer fail.
    pub(crate) fn commit(&mut self) -> (Vec<String>, Vec<String>) {
        let InPlace {
            limits,
            retries,
            endpoints,
        } = std::mem::take(&mut self.in_place);
        let mut changed: Vec<String> = Vec::with_capacity(limits.len() + retries.len());
        for (route, algorithm) in limits {
            if let Some(l) = &route.limit {
                l.set_algorithm(algorithm);
                changed.push(route.name.clone());
            }
        }
        for (route, config) in retries {
            // Validated by `Proxy::new`: cannot fail here.
            if let Some(r) = &route.retry
                && r.set_policy(&config).is_ok()
                && !changed.contains(&route.name)
            {
                changed.push(route.name.clone());
            }
        }
        (changed, endpoints)
    }

    /// Routes kept from the previous proxy (same `Arc`), by name.
    pub(crate) fn kept_routes(&self, previous: &Proxy) -> Vec<String> {
        self.routes
            .iter()
            .filter(|r| previous.routes.iter().any(|o| Arc::ptr_eq(r, o)))
            .map(|r| r.name.clone())
            .collect()
    }

    /// The OpenMetrics exposition, gauges read now.
    pub(crate) fn metrics_text(&self) -> String {
        // Through the limiter when there is one, else the count kept here.
        let limit = |l: &Option<Arc<ConcurrencyLimit>>, inflight: u64| {
            l.as_ref().map_or(
                LimitGauge {
                    inflight,
                    ..LimitGauge::default()
                },
                |l| l.gauge(),
            )
        };
        let gauges = Gauges {
            route: self
                .routes
                .iter()
                .map(|r| {
                    let inflight = r.inflight.load(std::sync::atomic::Ordering::Acquire);
                    (r.name.clone(), limit(&r.limit, inflight))
                })
                .collect(),
            cluster: self
                .clusters
                .iter()
                .map(|c| {
                    let g = ClusterGauge {
                        limit: limit(&c.limit, c.inflight()),
                        endpoints: c.endpoints.len() as u64,
                        available: c.available() as u64,
                        endpoint: c.endpoint_gauges(),
                    };
                    (c.name.clone(), g)
                })
                .collect(),
            listener: self
                .connection_caps
                .iter()
                .map(|(name, cap)| (name.clone(), cap.gauge()))
                .collect(),
        };
        self.metrics.encode(&gauges)
    }

    /// Answers one request: the guard's own refusal or the upstream's
    /// response; one access-log line (when on, and within its rate).
    pub(crate) async fn handle(
        &self,
        listener: &ListenerSettings,
        peer: SocketAddr,
        request: Request<Incoming>,
    ) -> Response<Body> {
        let mut open = Unanswered {
            proxy: self,
            listener,
            arrived: std::time::SystemTime::now(),
            started: tokio::time::Instant::now(),
            // Only kept for a line: an access log off costs nothing here.
            request: self
                .access_log
                .is_some()
                .then(|| (request.method().clone(), request.uri().path().to_owned())),
            note: Note::default(),
            answered: false,
        };
        let response = self.answer(listener, peer, request, &mut open.note).await;
        open.answered = true;
        open.record(open.note.logged_status(response.status().as_u16()));
        response
    }

    async fn answer(
        &self,
        listener: &ListenerSettings,
        peer: SocketAddr,
        mut request: Request<Incoming>,
        note: &mut Note,
    ) -> Response<Body> {
        bump(&self.stats.requests);
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > listener.max_body_bytes) {
            return self.client_fault(ClientFault::TooLarge, note);
        }
        // Rules see one normalised request; a request without one is refused.
        let (selected, rewrite) =
            match Target::of(request.uri(), request.headers(), request.version()) {
                Ok(target) => {
                    let normalized = listener.forward_path == ForwardPath::Normalized;
                    let selected = target.route(
                        &self.matchers,
                        &self.order,
                        request.method(),
                        request.headers(),
                        !normalized,
                    );
                    let rewrite =
                        (normalized && target.rewritten()).then(|| target.path.into_owned());
                    (selected, rewrite)
                }
                Err(refused) => (Err(refused), None),
            };
        let selected = match selected {
            Ok(selected) => selected,
            Err(refused) => {
                note.decision = Decision::Client(ClientFault::BadTarget);
                self.metrics.client_error(ClientFault::BadTarget);
                return shed::reject(400, None, &refused.message());
            }
        };
        // Fail closed: a normalised path that cannot be sent is not
        // replaced by the raw one the rules did not check.
        if let Some(path) = rewrite
            && !with_path(&mut request, &path)
        {
            note.decision = Decision::Client(ClientFault::BadTarget);
            self.metrics.client_error(ClientFault::BadTarget);
            return shed::reject(400, None, "the normalised path cannot be sent");
        }
        let Some(index) = selected else {
            bump(&self.stats.no_route);
            self.metrics.no_route.inc();
            note.decision = Decision::NoRoute;
            return shed::reject(404, None, "no route");
        };
        note.route = Some(index);
        let m = &self.routes[index].m;
        m.requests.inc();
        let started = tokio::time::Instant::now();
        let response = match tokio::time::timeout(
            listener.request_timeout,
            self.route(index, listener, peer, request, note),
        )
        .await
        {
            Ok(response) => response,
            // The upstream's time starts once it has the whole request: a
            // body still arriving when the time is up is the client's.
            Err(_) => match note.body.as_ref().map(|p| p.blame(true)) {
                Some(Blame::Client(fault)) => self.client_fault(fault, note),
                _ => {
                    note.decision = Decision::TimedOut;
                    shed::reject(504, None, "request timed out at the guard")
                }
            },
        };
        m.answered(response.status().as_u16(), started.elapsed());
        response
    }

    async fn route(
        &self,
        index: usize,
        listener: &ListenerSettings,
        peer: SocketAddr,
        request: Request<Incoming>,
        note: &mut Note,
    ) -> Response<Body> {
        let route = &self.routes[index];
        let peer_ip = peer.ip().to_canonical();
        let trusted_peer = headers::is_trusted(&listener.trusted, peer_ip);
        let client = headers::client_ip(&listener.trusted, peer_ip, request.headers());
        let class = trusted_peer
            .then(|| request.headers().get(&listener.criticality_header))
            .flatten()
            .and_then(|v| v.to_str().ok())
            .and_then(parse_class)
            .unwrap_or(route.criticality);

        // Operator rules, then saturation, in the order a gateway applies them.
        if let Some(shed) = shed::decide(&self.shedder, route.index, class, route.limit.as_deref())
        {
            bump(&self.stats.shed);
            let reason = if shed.by_rule {
                ShedReason::Rule
            } else {
                ShedReason::Saturation
            };
            route.m.shed(reason);
            note.decision = Decision::Shed(reason);
            let answer = shed::answer(shed.decision).expect("a shed is a rejection");
            return shed::refused(answer, reason.name());
        }
        // A restore in progress admits each site's current fraction only.
        {
            if !route.restore.admit(self.clock.now(), &listener.name) {
                bump(&self.stats.shed);
                route.m.shed(ShedReason::Restore);
                note.decision = Decision::Shed(ShedReason::Restore);
                let (status, after) = route
                    .restore_answer
                    .unwrap_or_else(|| self.saturation_answer());
                return shed::refused(
                    shed::reject(status, after, "restore in progress: not yet admitted"),
                    ShedReason::Restore.name(),
                );
            }
        }
        if let Some(rate) = &route.rate_limit
            && let Err(wait) = rate.check(self.clock.now(), client, request.headers())
        {
            bump(&self.stats.rate_limited);
            route.m.rate_limited.inc();
            note.decision = Decision::RateLimited;
            return shed::refused(
                shed::reject(429, Some(wait.retry_after), "rate limited"),
                "rate_limit",
            );
        }
        let (parts, incoming) = request.into_parts();
        let (body, retryable) = match self
            .body_of(route, listener, &parts.method, incoming, note)
            .await
        {
            Ok(prepared) => prepared,
            Err(answer) => return answer,
        };
        let permit = match &route.limit {
            Some(limit) => match limit.acquire().await {
                Ok(p) => Some(p),
                Err(refusal) => {
                    bump(&self.stats.shed);
                    route.m.shed(ShedReason::Limit);
                    route.m.limit_refused(refusal);
                    note.decision = Decision::Limited;
                    let (status, after) = self.saturation_answer();
                    let reason = match refusal {
                        Refusal::Full => "over the route's concurrency limit",
                        Refusal::QueueTimeout => {
                            "over the route's concurrency limit: the queue wait timed out"
                        }
                    };
                    return shed::refused(shed::reject(status, after, reason), refusal.name());
                }
            },
            None => None,
        };

        let response = {
            let _inflight = InFlight::enter(&route.inflight);
            self.forward(
                route,
                listener,
                (peer, trusted_peer, class),
                (parts, body, retryable),
                note,
            )
            .await
        };
        // A client's own failure says nothing of the route's capacity or
        // health: the permit is freed without a sample (dropped: `Ignore`).
        if matches!(note.decision, Decision::Client(_)) {
            return response;
        }
        // The restore's error guard holds or steps back the site's ramp.
        let failed = !restore_ok(response.status().as_u16());
        route
            .restore
            .observe(self.clock.now(), &listener.name, !failed);
        if let Some(p) = permit {
            p.finish(crate::limit::outcome_of(response.status().as_u16()));
        }
        response
    }

    fn saturation_answer(&self) -> (u16, Option<stormbreak_policy::Nanos>) {
        shed::full_answer(&self.shedder)
    }

    /// The request's body as it will be sent: buffered when the route may
    /// retry it and it is small enough, else streamed; `Err` with the
    /// answer when the client failed it while it was buffered. Read before
    /// the route's concurrency permit is taken, so a slow upload holds no
    /// permit and feeds no latency sample.
    async fn body_of(
        &self,
        route: &Route,
        listener: &ListenerSettings,
        method: &Method,
        incoming: Incoming,
        note: &mut Note,
    ) -> Result<(ReqBody, bool), Response<Body>> {
        let retryable = route.retry.is_some() && (route.retry_non_idempotent || idempotent(method));
        if incoming.is_end_stream() {
            return Ok((ReqBody::Buffered(Bytes::new()), retryable));
        }
        // Every body the client still has to send is watched, so a
        // failure or a timeout can be laid at the client's door.
        let progress = Progress::new();
        note.body = Some(progress.clone());
        let size = incoming.size_hint().exact();
        if retryable && size.is_some_and(|n| n <= route.retry_buffer_bytes) {
            let limited = Limited::new(incoming, route.retry_buffer_bytes as usize);
            return match ClientBody::new(limited, progress).collect().await {
                Ok(collected) => Ok((ReqBody::Buffered(collected.to_bytes()), retryable)),
                Err(e) => Err(self.client_fault(ClientFault::of(&*e), note)),
            };
        }
        let limited = Limited::new(incoming, listener.max_body_bytes as usize);
        let watched = ClientBody::new(limited, progress.clone());
        Ok((
            ReqBody::Stream(Mutex::new(Some(Body::boxed(watched))), progress),
            retryable,
        ))
    }

    /// Sends the request upstream through the retry loop; `client` is the
    /// peer, whether it is a trusted proxy, and the request's class.
    async fn forward(
        &self,
        route: &Route,
        listener: &ListenerSettings,
        (peer, trusted_peer, class): (SocketAddr, bool, Criticality),
        (mut parts, body, retryable): (http::request::Parts, ReqBody, bool),
        note: &mut Note,
    ) -> Response<Body> {
        // One authority routes and goes upstream: an absolute-form target's
        // or `:authority` replaces `Host` (RFC 9112 §3.2.2), which
        // `Target::of` has already checked names the same host.
        if let Some(authority) = parts.uri.authority()
            && let Ok(v) = HeaderValue::from_str(authority.as_str())
        {
            parts.headers.insert(header::HOST, v);
        }
        headers::strip_hop_by_hop(&mut parts.headers);
        headers::append_forwarded(&mut parts.headers, peer, trusted_peer, listener.proto);
        parts.headers.insert(
            listener.criticality_header.clone(),
            HeaderValue::from_static(class.name()),
        );

        let retry = match body {
            ReqBody::Buffered(_) if retryable => route.retry.as_ref(),
            // A streamed body can be sent once only.
            _ => None,
        };

        // The cluster of the latest attempt (`usize::MAX`: none yet).
        let upstream = std::sync::atomic::AtomicUsize::new(usize::MAX);
        // With no retry and no dependency check, the one attempt takes the
        // head as it is; otherwise each attempt sends a copy.
        let head = if retry.is_none() && route.dependency.is_none() {
            Head::Moved(Mutex::new(Some(parts)))
        } else {
            Head::Copied(parts)
        };
        let attempt = |deadline| self.attempt(route, &head, &body, deadline, &upstream);
        let check = route.dependency.as_ref().and_then(|d| {
            let parts = head.copied()?;
            Some(move |deadline| self.check_dependency(route, d, parts, listener, deadline))
        });
        let (result, tally) =
            attempts::run_checked(retry, &self.stats, Some(&route.m), check, attempt).await;
        note.attempts = tally.attempts;
        note.upstream = Some(upstream.into_inner()).filter(|&i| i != usize::MAX);
        if tally.budget_denied {
            note.decision = Decision::BudgetDenied;
        }
        if tally.check_failed {
            // As a simulated gateway answers `dependency_failed`: 502,
            // whatever the last call's failure was.
            drop(result);
            route.m.dependency_failed.inc();
            note.decision = Decision::DependencyFailed;
            return shed::reject(502, None, "dependency check failed");
        }
        match result {
            Ok(response) => {
                let (mut parts, incoming) = response.into_parts();
                headers::strip_hop_by_hop(&mut parts.headers);
                Response::from_parts(parts, Body::upstream(incoming))
            }
            Err(AttemptError::Timeout) => shed::reject(504, None, "upstream timed out"),
            Err(AttemptError::NoEndpoint) => {
                shed::reject(503, None, "no upstream endpoint available")
            }
            Err(AttemptError::CircuitOpen(after)) => {
                shed::reject(503, after, "upstream circuit breaker open")
            }
            Err(AttemptError::Connect | AttemptError::Reset) => {
                shed::reject(502, None, "upstream connection failed")
            }
            Err(AttemptError::Client(fault)) => self.client_fault(fault, note),
        }
    }

    /// The answer to a request its client failed: its own status, counted
    /// by reason, and no policy told.
    fn client_fault(&self, fault: ClientFault, note: &mut Note) -> Response<Body> {
        note.decision = Decision::Client(fault);
        self.metrics.client_error(fault);
        shed::reject(fault.wire_status(), None, fault.message())
    }

    /// One attempt: the route's cluster (or its failover) chosen, then
    /// through that cluster's stack (`upstream`: breaker, limit, endpoint
    /// choice, `deadline`, the call), whose layers each judge the answer.
    async fn attempt(
        &self,
        route: &Route,
        head: &Head,
        body: &ReqBody,
        deadline: Option<tokio::time::Instant>,
        upstream: &std::sync::atomic::AtomicUsize,
    ) -> Attempt {
        let mut request = Request::from_parts(head.take(), body.take());
        *request.extensions_mut() = http::Extensions::new();
        let streamed = match body {
            ReqBody::Stream(_, progress) => Some(&**progress),
            ReqBody::Buffered(_) => None,
        };
        let failover = crate::upstream::Failover {
            clusters: &self.clusters,
            primary: route.cluster,
            failover: route.failover,
            spill: route.spill.as_ref(),
            chosen: upstream,
        };
        let call = crate::upstream::Call {
            request,
            deadline,
            streamed,
            endpoint: None,
        };
        match crate::upstream::ready_call(failover, call).await {
            Ok(verdict) => verdict.result,
            Err(never) => match never {},
        }
    }

    /// One dependency call for a request with head `parts`, through the
    /// dependency cluster's policies, within its own timeout and
    /// `deadline` (the route's retry deadline); counted by outcome.
    /// Passed on a 2xx, whose body is read (bounded) so its connection
    /// can be reused.
    async fn check_dependency(
        &self,
        route: &Route,
        dependency: &Dependency,
        parts: &http::request::Parts,
        listener: &ListenerSettings,
        deadline: Option<tokio::time::Instant>,
    ) -> attempts::CheckOf<Incoming> {
        let own = tokio::time::Instant::now() + dependency.timeout;
        let deadline = deadline.map_or(own, |d| d.min(own));
        let request = dependency.request(parts, &listener.criticality_header);
        let cluster = &self.clusters[dependency.cluster];
        let call = crate::upstream::Call {
            request,
            deadline: Some(deadline),
            streamed: None,
            endpoint: None,
        };
        let result = crate::upstream::call(cluster, call).await;
        route.m.dependency_call(dependency::outcome_of(&result));
        match result {
            Ok(answer) if answer.status().is_success() => {
                let body = Limited::new(answer.into_body(), dependency::MAX_ANSWER_BYTES);
                let _ = tokio::time::timeout_at(deadline, body.collect()).await;
                Ok(())
            }
            failed => Err(failed),
        }
    }

    /// Feeds route `index`'s spill law with this second's rates.
    pub(crate) fn observe_spill(&self, index: usize) -> Option<f64> {
        let route = &self.routes[index];
        let (spill, secondary) = (route.spill.as_ref()?, &self.clusters[route.failover?]);
        let primary = &self.clusters[route.cluster];
        let capacity = |c: &Cluster| c.endpoint_capacity.unwrap_or(0.0) * c.available() as f64;
        Some(spill.observe(Capacity {
            primary: capacity(primary),
            secondary: capacity(secondary),
            secondary_served: secondary.served.load(std::sync::atomic::Ordering::Relaxed),
        }))
    }

    /// Index of the route named `name`.
    pub(crate) fn route_index(&self, name: &str) -> Option<usize> {
        self.routes.iter().position(|r| r.name == name)
    }

    /// Route names with a spill law, by index.
    pub(crate) fn spill_routes(&self) -> Vec<usize> {
        (0..self.routes.len())
            .filter(|&i| self.routes[i].spill.is_some())
            .collect()
    }

    /// Route index and the keys its rate limiter holds, for tests.
    pub(crate) fn rate_limit_keys(&self, route: &str) -> Option<(usize, usize)> {
        self.routes
            .iter()
            .find(|r| r.name == route)?
            .rate_limit
            .as_ref()
            .map(|r| r.keys())
    }

    /// A route's current concurrency limit.
    pub(crate) fn route_limit(&self, route: &str) -> Option<u32> {
        self.routes
            .iter()
            .find(|r| r.name == route)?
            .limit
            .as_ref()
            .map(|l| l.limit())
    }
}

/// A request on its way to an answer. Dropped unanswered — an HTTP/2
/// client reset its stream, or a connection closed under it — it is
/// still counted (`client_errors_total{reason="client_closed"}`) and
/// logged, with status 499.
struct Unanswered<'a> {
    proxy: &'a Proxy,
    listener: &'a ListenerSettings,
    arrived: std::time::SystemTime,
    started: tokio::time::Instant,
    /// Method and path, when there is an access log.
    request: Option<(Method, String)>,
    note: Note,
    answered: bool,
}

impl Unanswered<'_> {
    /// One access-log line (when on, and within its rate).
    fn record(&self, status: u16) {
        let (Some(log), Some((method, path))) = (&self.proxy.access_log, &self.request) else {
            return;
        };
        let p = self.proxy;
        let note = &self.note;
        log.record(p.clock.now(), || {
            let line = Line {
                time_unix_ms: self
                    .arrived
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                listener: &self.listener.name,
                method: method.as_str(),
                path,
                route: note.route.map(|i| p.routes[i].name.as_str()),
                upstream: note.upstream.map(|i| p.clusters[i].name.as_str()),
                status,
                attempts: note.attempts,
                decision: note.decision.name(),
                shed_reason: note.decision.shed_reason(),
                latency_ms: self.started.elapsed().as_secs_f64() * 1e3,
            };
            serde_json::to_string(&line).unwrap_or_default()
        });
    }
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        self.note.decision = Decision::Client(ClientFault::Gone);
        self.proxy.metrics.client_error(ClientFault::Gone);
        self.record(ClientFault::Gone.status());
    }
}

/// One request counted in a route's in-flight gauge while this lives
/// (also when the client goes away and the future is dropped).
struct InFlight<'a>(&'a std::sync::atomic::AtomicU64);

impl<'a> InFlight<'a> {
    fn enter(n: &'a std::sync::atomic::AtomicU64) -> Self {
        n.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// A request body: buffered (replayable) or streamed (sent once, with
/// how far the client got in sending it).
enum ReqBody {
    Buffered(Bytes),
    Stream(Mutex<Option<Body>>, Arc<Progress>),
}

/// A request's head as its attempts send it.
enum Head {
    /// Copied for each attempt: a retry or a dependency check may follow.
    Copied(http::request::Parts),
    /// Taken whole by the only attempt (no header map copied).
    Moved(Mutex<Option<http::request::Parts>>),
}

impl Head {
    /// The head, for a dependency check: only a copied head has one to
    /// lend (a moved one is never made for a route with a dependency).
    fn copied(&self) -> Option<&http::request::Parts> {
        match self {
            Head::Copied(parts) => Some(parts),
            Head::Moved(_) => None,
        }
    }

    /// The head for one attempt.
    fn take(&self) -> http::request::Parts {
        match self {
            Head::Copied(parts) => parts.clone(),
            Head::Moved(once) => once
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                // `attempts::run_checked` attempts once when there is no retry.
                .expect("a request with no retry is attempted once"),
        }
    }
}

impl ReqBody {
    fn take(&self) -> Body {
        match self {
            ReqBody::Buffered(b) => body::full(b.clone()),
            ReqBody::Stream(s, _) => s
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .unwrap_or_else(body::empty),
        }
    }
}

/// Replaces `request`'s path with `path`, keeping its query; `false`
/// when the result is not a URI.
fn with_path<B>(request: &mut Request<B>, path: &str) -> bool {
    let uri = request.uri();
    let path_and_query = match uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    let Ok(pq) = path_and_query.parse() else {
        return false;
    };
    parts.path_and_query = Some(pq);
    match Uri::from_parts(parts) {
        Ok(rebuilt) => {
            *request.uri_mut() = rebuilt;
            true
        }
        Err(_) => false,
    }
}

fn parse_class(s: &str) -> Option<Criticality> {
    Criticality::ALL
        .into_iter()
        .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
}
