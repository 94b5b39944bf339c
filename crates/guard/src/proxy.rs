//! The request path, one step per layer: route → shed → rate limit →
//! concurrency limit → retry loop → endpoint. Each step's policy lives in
//! `stormbreak-policy`; this file only wires them in that order.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request, Response, header};
use http_body::Body as _;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use stormbreak_policy::FieldError;
use stormbreak_policy::limit::Outcome;
use stormbreak_policy::ramp::StagedRestore;
use stormbreak_policy::shed::{Criticality, Shedder};

use crate::balance::Cluster;
use crate::body::{self, Body, BoxError};
use crate::clock::Clock;
use crate::config::{Cidr, GuardConfig, ListenerConfig, RouteConfig};
use crate::endpoint::AttemptError;
use crate::failover::{Capacity, Spill};
use crate::headers;
use crate::limit::ConcurrencyLimit;
use crate::ratelimit::RateLimit;
use crate::retry::{self, Attempt, RouteRetry};
use crate::route::{self, Matcher};
use crate::shed;
use crate::stats::{Stats, bump};
use stormbreak_policy::failover::Region;

/// A route with its policies built.
pub(crate) struct Route {
    pub(crate) name: String,
    index: u32,
    cluster: usize,
    failover: Option<usize>,
    spill: Option<Spill>,
    restore: Option<Restore>,
    retry: Option<RouteRetry>,
    retry_non_idempotent: bool,
    retry_buffer_bytes: u64,
    limit: Option<Arc<ConcurrencyLimit>>,
    criticality: Criticality,
    rate_limit: Option<RateLimit>,
}

/// A route's staged restore: the policy's coordinator and which site each
/// listener is.
struct Restore {
    state: Mutex<(StagedRestore, Pcg64Mcg)>,
    /// Site of listener `i`, or `None` for a listener not in the restore
    /// (which admits nothing while the restore runs).
    site_of: Vec<Option<usize>>,
}

/// Per-listener settings the request path needs.
pub(crate) struct ListenerSettings {
    /// Position of the listener in the file.
    pub(crate) index: usize,
    pub(crate) trusted: Vec<Cidr>,
    pub(crate) criticality_header: HeaderName,
    pub(crate) max_body_bytes: u64,
    pub(crate) request_timeout: std::time::Duration,
    /// `proto=` of the `Forwarded` element: `http` or `https`.
    pub(crate) proto: &'static str,
}

impl ListenerSettings {
    pub(crate) fn new(index: usize, l: &ListenerConfig) -> Self {
        ListenerSettings {
            index,
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
        }
    }
}

/// Everything the request path shares.
pub(crate) struct Proxy {
    pub(crate) clock: Clock,
    matchers: Vec<Matcher>,
    order: Vec<usize>,
    pub(crate) routes: Vec<Route>,
    pub(crate) clusters: Vec<Cluster>,
    shedder: Mutex<Shedder>,
    pub(crate) stats: Arc<Stats>,
}

/// RFC 9110 §9.2.2: methods whose repetition has the effect of one request.
fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

fn restore_of(
    config: &RouteConfig,
    listeners: &[ListenerConfig],
    clock: Clock,
) -> Result<Option<Restore>, FieldError> {
    let Some(c) = &config.restore else {
        return Ok(None);
    };
    let sites: Vec<&str> = if config.restore_sites.is_empty() {
        listeners.iter().map(|l| l.name.as_str()).collect()
    } else {
        config.restore_sites.iter().map(String::as_str).collect()
    };
    let mut restore = StagedRestore::new(c, sites.len())?;
    restore.start(clock.now());
    Ok(Some(Restore {
        state: Mutex::new((restore, Pcg64Mcg::from_os_rng())),
        site_of: listeners
            .iter()
            .map(|l| sites.iter().position(|s| *s == l.name))
            .collect(),
    }))
}

fn route_of(
    config: &RouteConfig,
    index: usize,
    clusters: &[Cluster],
    listeners: &[ListenerConfig],
    clock: Clock,
) -> Result<Route, FieldError> {
    let cluster_index = |name: &str| clusters.iter().position(|c| c.name == name);
    Ok(Route {
        name: config.name.clone(),
        index: index as u32,
        cluster: cluster_index(&config.cluster).unwrap_or(0),
        failover: config.failover.as_deref().and_then(cluster_index),
        restore: restore_of(config, listeners, clock)?,
        spill: match &config.failover_policy {
            Some(f) => Some(Spill::new(f, clock)?),
            None => None,
        },
        retry: match &config.retry {
            Some(r) => Some(RouteRetry::new(r, config.budget.as_ref())?),
            None => None,
        },
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
    })
}

impl Proxy {
    /// Builds every policy of a validated config.
    pub(crate) fn new(config: &GuardConfig) -> Result<Self, FieldError> {
        let clock = Clock::new();
        let clusters = config
            .clusters
            .iter()
            .map(|c| Cluster::new(c, clock))
            .collect::<Result<Vec<_>, _>>()?;
        let routes = config
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| route_of(r, i, &clusters, &config.listeners, clock))
            .collect::<Result<Vec<_>, _>>()?;
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
            clusters,
            shedder: Mutex::new(Shedder::new(&config.shed_config())?),
            stats: Arc::new(Stats::default()),
        })
    }

    /// Answers one request: the guard's own refusal or the upstream's response.
    pub(crate) async fn handle(
        &self,
        listener: &ListenerSettings,
        peer: SocketAddr,
        request: Request<Incoming>,
    ) -> Response<Body> {
        bump(&self.stats.requests);
        match tokio::time::timeout(
            listener.request_timeout,
            self.route(listener, peer, request),
        )
        .await
        {
            Ok(response) => response,
            Err(_) => shed::reject(504, None, "request timed out at the guard"),
        }
    }

    async fn route(
        &self,
        listener: &ListenerSettings,
        peer: SocketAddr,
        request: Request<Incoming>,
    ) -> Response<Body> {
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > listener.max_body_bytes) {
            return shed::reject(413, None, "request body too large");
        }
        let host = route::request_host(request.uri(), request.headers());
        let Some(index) = route::select(
            &self.matchers,
            &self.order,
            host.as_deref(),
            request.uri().path(),
            request.method(),
            request.headers(),
        ) else {
            bump(&self.stats.no_route);
            return shed::reject(404, None, "no route");
        };
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
        let saturation = route.limit.as_ref().map_or(0.0, |l| l.saturation());
        let decision = self
            .shedder
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .decide(route.index, class, saturation);
        if let Some(answer) = shed::answer(decision) {
            bump(&self.stats.shed);
            return answer;
        }
        // A restore in progress admits each site's current fraction only.
        if let Some(restore) = &route.restore {
            let admitted = restore.site_of[listener.index].is_some_and(|site| {
                let mut s = restore.state.lock().unwrap_or_else(PoisonError::into_inner);
                let (r, rng) = &mut *s;
                r.admit(self.clock.now(), site, rng)
            });
            if !admitted {
                bump(&self.stats.shed);
                let (status, after) = self.saturation_answer();
                return shed::reject(status, after, "restore in progress: not yet admitted");
            }
        }
        if let Some(rate) = &route.rate_limit
            && let Err(wait) = rate.check(self.clock.now(), client, request.headers())
        {
            bump(&self.stats.rate_limited);
            return shed::reject(429, Some(wait.retry_after), "rate limited");
        }
        let permit = match &route.limit {
            Some(limit) => match limit.acquire().await {
                Some(p) => Some(p),
                None => {
                    bump(&self.stats.shed);
                    let (status, after) = self.saturation_answer();
                    return shed::reject(status, after, "over the route's concurrency limit");
                }
            },
            None => None,
        };

        let response = self
            .forward(route, listener, peer, trusted_peer, class, request)
            .await;
        if let Some(p) = permit {
            let overloaded = matches!(response.status().as_u16(), 500..=599);
            p.finish(if overloaded {
                Outcome::Dropped
            } else {
                Outcome::Success
            });
        }
        response
    }

    fn saturation_answer(&self) -> (u16, Option<stormbreak_policy::Nanos>) {
        let shedder = self.shedder.lock().unwrap_or_else(PoisonError::into_inner);
        match shedder
            .saturation()
            .decide(Criticality::Sheddable, f64::INFINITY)
        {
            stormbreak_policy::shed::Decision::Reject {
                status,
                retry_after,
            } => (status, retry_after),
            stormbreak_policy::shed::Decision::Admit => {
                (503, Some(stormbreak_policy::Nanos::SECOND))
            }
        }
    }

    async fn forward(
        &self,
        route: &Route,
        listener: &ListenerSettings,
        peer: SocketAddr,
        trusted_peer: bool,
        class: Criticality,
        request: Request<Incoming>,
    ) -> Response<Body> {
        let (mut parts, incoming) = request.into_parts();
        if !parts.headers.contains_key(header::HOST)
            && let Some(authority) = parts.uri.authority()
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

        let retryable =
            route.retry.is_some() && (route.retry_non_idempotent || idempotent(&parts.method));
        let size = incoming.size_hint().exact();
        let body = if incoming.is_end_stream() {
            ReqBody::Buffered(Bytes::new())
        } else if retryable && size.is_some_and(|n| n <= route.retry_buffer_bytes) {
            match Limited::new(incoming, route.retry_buffer_bytes as usize)
                .collect()
                .await
            {
                Ok(collected) => ReqBody::Buffered(collected.to_bytes()),
                Err(_) => return shed::reject(400, None, "request body could not be read"),
            }
        } else {
            let limited = Limited::new(incoming, listener.max_body_bytes as usize)
                .map_err(BoxError::from)
                .boxed();
            ReqBody::Stream(Mutex::new(Some(limited)))
        };
        let retry = match body {
            ReqBody::Buffered(_) if retryable => route.retry.as_ref(),
            // A streamed body can be sent once only.
            _ => None,
        };

        let attempt = |deadline| self.attempt(route, &parts, &body, deadline);
        let result = retry::run(retry, &self.clock, &self.stats, attempt).await;
        match result {
            Ok(response) => {
                let (mut parts, incoming) = response.into_parts();
                headers::strip_hop_by_hop(&mut parts.headers);
                Response::from_parts(parts, incoming.map_err(BoxError::from).boxed())
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
        }
    }

    /// One attempt: pick an endpoint of the route's cluster (or its failover
    /// when none is left), pass the cluster's breaker and limit, send; all
    /// within `deadline`, whose passing is a failure to every layer here.
    async fn attempt(
        &self,
        route: &Route,
        parts: &http::request::Parts,
        body: &ReqBody,
        deadline: Option<tokio::time::Instant>,
    ) -> Attempt {
        let primary = &self.clusters[route.cluster];
        let cluster = match (route.failover, &route.spill) {
            (Some(f), _) if primary.available() == 0 => &self.clusters[f],
            (Some(f), Some(spill)) if spill.route() == Region::Secondary => &self.clusters[f],
            _ => primary,
        };
        let call = match cluster.admit() {
            Ok(call) => call,
            Err(after) => return Err(AttemptError::CircuitOpen(after)),
        };
        let permit = match &cluster.limit {
            Some(limit) => match limit.acquire().await {
                Some(p) => Some(p),
                None => return Err(AttemptError::NoEndpoint),
            },
            None => None,
        };
        let Some(picked) = cluster.pick() else {
            return Err(AttemptError::NoEndpoint);
        };
        let mut request = Request::from_parts(parts.clone(), body.take());
        *request.extensions_mut() = http::Extensions::new();
        let send = cluster.upstream.send(picked.addr(), request);
        let result = match deadline {
            Some(at) => tokio::time::timeout_at(at, send)
                .await
                .unwrap_or(Err(AttemptError::Timeout)),
            None => send.await,
        };
        let failed = match &result {
            Ok(r) => r.status().is_server_error(),
            Err(_) => true,
        };
        cluster.report(picked.index, failed);
        if let Some(call) = call {
            call.finish(failed);
        }
        if let Some(p) = permit {
            p.finish(if failed {
                Outcome::Dropped
            } else {
                Outcome::Success
            });
        }
        result
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

/// A request body: buffered (replayable) or streamed (sent once).
enum ReqBody {
    Buffered(Bytes),
    Stream(Mutex<Option<Body>>),
}

impl ReqBody {
    fn take(&self) -> Body {
        match self {
            ReqBody::Buffered(b) => body::full(b.clone()),
            ReqBody::Stream(s) => s
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .unwrap_or_else(body::empty),
        }
    }
}

fn parse_class(s: &str) -> Option<Criticality> {
    Criticality::ALL
        .into_iter()
        .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
}
