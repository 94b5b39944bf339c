//! `/metrics`: the guard's counters, gauges and latency histograms in the
//! OpenMetrics text format (prometheus-client).
//!
//! Label sets are bounded by the config, never by traffic: `route`,
//! `cluster` and `listener` take the names in the file (at most
//! [`MAX_ITEMS`](crate::config::MAX_ITEMS) of each), `endpoint` a
//! cluster's configured `ip:port`s (at most
//! [`MAX_ENDPOINTS`](crate::config::MAX_ENDPOINTS) per cluster), `class`
//! the five status classes and `reason` a fixed set per family (four shed
//! reasons; three upstream errors; three upstream refusals; six client errors; two access-log
//! drops; four connection closes; seven dependency-call outcomes). No label carries a client key, client address or path.
//!
//! Counters are bumped on the request path through handles resolved once
//! per route and per cluster (no label lookup per request); gauges are
//! read from the live limiters, clusters, endpoints and listeners when
//! scraped. A route or cluster without a concurrency limit exports its
//! in-flight count only: with no limit there is no saturation or queue.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// Latency bucket bounds in seconds: fixed, so histograms from every
/// replica aggregate (Prometheus sums buckets only when their bounds agree).
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabel {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabel {
    cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterClassLabel {
    cluster: String,
    class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterReasonLabel {
    cluster: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabel {
    cluster: String,
    endpoint: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabel {
    listener: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerReasonLabel {
    listener: String,
    reason: &'static str,
}

/// `class` label values, index `status / 100 - 1`.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResponseLabel {
    route: String,
    class: &'static str,
}

/// Why the guard shed a request itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShedReason {
    /// An operator `[[shed]]` rule or admin override.
    Rule,
    /// Shedding by criticality class under saturation.
    Saturation,
    /// A staged restore did not admit it yet.
    Restore,
    /// The route's concurrency limit and queue had no room (or the queue timed out).
    Limit,
}

impl ShedReason {
    const ALL: [ShedReason; 4] = [
        ShedReason::Rule,
        ShedReason::Saturation,
        ShedReason::Restore,
        ShedReason::Limit,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            ShedReason::Rule => "rule",
            ShedReason::Saturation => "saturation",
            ShedReason::Restore => "restore",
            ShedReason::Limit => "limit",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShedLabel {
    route: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabel {
    version: &'static str,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// How one dependency call (`route.dependency`) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DependencyOutcome {
    /// A 2xx answer: the check passed.
    Ok,
    /// Any other answer.
    Status,
    /// Its timeout (or the route's retry deadline) passed first.
    Timeout,
    /// No connection could be made.
    Connect,
    /// The connection broke before an answer.
    Reset,
    /// The dependency cluster's breaker was open.
    BreakerOpen,
    /// No endpoint of the dependency cluster was available, or its
    /// concurrency limit was reached.
    NoEndpoint,
}

impl DependencyOutcome {
    const ALL: [DependencyOutcome; 7] = [
        DependencyOutcome::Ok,
        DependencyOutcome::Status,
        DependencyOutcome::Timeout,
        DependencyOutcome::Connect,
        DependencyOutcome::Reset,
        DependencyOutcome::BreakerOpen,
        DependencyOutcome::NoEndpoint,
    ];

    fn name(self) -> &'static str {
        match self {
            DependencyOutcome::Ok => "ok",
            DependencyOutcome::Status => "bad_status",
            DependencyOutcome::Timeout => "timeout",
            DependencyOutcome::Connect => "connect",
            DependencyOutcome::Reset => "reset",
            DependencyOutcome::BreakerOpen => "breaker_open",
            DependencyOutcome::NoEndpoint => "no_endpoint",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    route: String,
    outcome: &'static str,
}

/// One route's counters, resolved once.
pub(crate) struct RouteMetrics {
    pub(crate) requests: Counter,
    responses: [Counter; 5],
    pub(crate) attempts: Counter,
    pub(crate) retries: Counter,
    pub(crate) budget_denied: Counter,
    pub(crate) rate_limited: Counter,
    shed: [Counter; 4],
    latency: Histogram,
    dependency_calls: [Counter; 7],
    /// Requests answered 502 because their dependency check failed for good.
    pub(crate) dependency_failed: Counter,
    /// Limit refusals by cause: [full, queue timeout].
    limit_refused: [Counter; 2],
}

impl RouteMetrics {
    /// Counts one dependency call and how it ended.
    pub(crate) fn dependency_call(&self, outcome: DependencyOutcome) {
        self.dependency_calls[outcome as usize].inc();
    }

    /// Counts one answer with its status and latency.
    pub(crate) fn answered(&self, status: u16, latency: Duration) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.responses[class].inc();
        self.latency.observe(latency.as_secs_f64());
    }

    /// Counts one refusal of the route's concurrency limit by its cause.
    pub(crate) fn limit_refused(&self, refusal: crate::limit::Refusal) {
        let i = match refusal {
            crate::limit::Refusal::Full => 0,
            crate::limit::Refusal::QueueTimeout => 1,
        };
        self.limit_refused[i].inc();
    }

    /// Counts one request shed for `reason`.
    pub(crate) fn shed(&self, reason: ShedReason) {
        self.shed[reason as usize].inc();
    }
}

/// Why an attempt sent to a cluster got no response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UpstreamError {
    /// The per-try timeout or the overall deadline passed.
    Timeout,
    /// The connection could not be made.
    Connect,
    /// The connection broke before a response head.
    Reset,
}

impl UpstreamError {
    const ALL: [UpstreamError; 3] = [
        UpstreamError::Timeout,
        UpstreamError::Connect,
        UpstreamError::Reset,
    ];

    fn name(self) -> &'static str {
        match self {
            UpstreamError::Timeout => "timeout",
            UpstreamError::Connect => "connect",
            UpstreamError::Reset => "reset",
        }
    }
}

/// Why an attempt was not sent to a cluster at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UpstreamRejected {
    /// The cluster's circuit breaker is open.
    BreakerOpen,
    /// The cluster's concurrency limit is reached.
    Limit,
    /// Every endpoint is ejected or failing health checks.
    NoEndpoint,
}

impl UpstreamRejected {
    const ALL: [UpstreamRejected; 3] = [
        UpstreamRejected::BreakerOpen,
        UpstreamRejected::Limit,
        UpstreamRejected::NoEndpoint,
    ];

    fn name(self) -> &'static str {
        match self {
            UpstreamRejected::BreakerOpen => "breaker_open",
            UpstreamRejected::Limit => "limit",
            UpstreamRejected::NoEndpoint => "no_endpoint",
        }
    }
}

/// One cluster's counters, resolved once.
pub(crate) struct ClusterMetrics {
    /// Attempts sent to one of the cluster's endpoints.
    pub(crate) requests: Counter,
    responses: [Counter; 5],
    errors: [Counter; 3],
    rejected: [Counter; 3],
    latency: Histogram,
}

impl ClusterMetrics {
    /// Counts a sent attempt's end: a response head with its status, or no
    /// response; `latency` from sending to that end.
    pub(crate) fn answered(&self, result: Result<u16, UpstreamError>, latency: Duration) {
        match result {
            Ok(status) => {
                let class = usize::from(status / 100).clamp(1, 5) - 1;
                self.responses[class].inc();
            }
            Err(e) => {
                self.errors[e as usize].inc();
            }
        }
        self.latency.observe(latency.as_secs_f64());
    }

    /// Counts an attempt the cluster refused before sending.
    pub(crate) fn rejected(&self, why: UpstreamRejected) {
        self.rejected[why as usize].inc();
    }
}

/// Live values read at scrape time: one per route, cluster and listener.
pub(crate) struct Gauges {
    pub(crate) route: Vec<(String, LimitGauge)>,
    pub(crate) cluster: Vec<(String, ClusterGauge)>,
    pub(crate) listener: Vec<(String, (u64, u64))>,
}

/// In flight, and a concurrency limit's state when there is one.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LimitGauge {
    /// Through the limiter when there is one; else counted by the route
    /// (admitted, not yet answered) or the cluster (attempts out).
    pub(crate) inflight: u64,
    pub(crate) limit: Option<u64>,
    pub(crate) queued: u64,
}

/// A cluster's state.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClusterGauge {
    pub(crate) limit: LimitGauge,
    pub(crate) endpoints: u64,
    pub(crate) available: u64,
    /// Each endpoint's state, in config order.
    pub(crate) endpoint: Vec<EndpointGauge>,
}

/// One endpoint's state.
#[derive(Clone, Debug, Default)]
pub(crate) struct EndpointGauge {
    /// `ip:port` as configured.
    pub(crate) addr: String,
    /// Attempts in flight to it.
    pub(crate) inflight: u64,
    /// Ejected by outlier detection now; `None` without `outlier`.
    pub(crate) ejected: Option<bool>,
    /// Failing its active health checks now; `None` without `health_check`.
    pub(crate) unhealthy: Option<bool>,
}

/// Every metric family, registered once and kept across config reloads
/// (a route's counters continue while its name stays).
pub(crate) struct Metrics {
    registry: Registry,
    families: RouteFamilies,
    routes: Mutex<Vec<(String, Arc<RouteMetrics>)>>,
    cluster_families: ClusterFamilies,
    clusters: Mutex<Vec<(String, Arc<ClusterMetrics>)>>,
    pub(crate) no_route: Counter,
    /// By [`ClientFault`](crate::blame::ClientFault), in its order.
    client_errors: [Counter; 6],
    access_log_dropped: Family<ReasonLabel, Counter>,
    inflight: Family<RouteLabel, Gauge>,
    limit: Family<RouteLabel, Gauge>,
    saturation: Family<RouteLabel, FloatGauge>,
    queue_depth: Family<RouteLabel, Gauge>,
    up_inflight: Family<ClusterLabel, Gauge>,
    up_limit: Family<ClusterLabel, Gauge>,
    up_saturation: Family<ClusterLabel, FloatGauge>,
    up_endpoints: Family<ClusterLabel, Gauge>,
    up_available: Family<ClusterLabel, Gauge>,
    ep_inflight: Family<EndpointLabel, Gauge>,
    ep_available: Family<EndpointLabel, Gauge>,
    ep_ejected: Family<EndpointLabel, Gauge>,
    ep_unhealthy: Family<EndpointLabel, Gauge>,
    connections: Family<ListenerLabel, Gauge>,
    connection_cap: Family<ListenerLabel, Gauge>,
    connections_closed: Family<ListenerReasonLabel, Counter>,
    admin_auth_failures: Counter,
}

/// The per-route counter families, to resolve a route's handles from.
struct RouteFamilies {
    requests: Family<RouteLabel, Counter>,
    responses: Family<ResponseLabel, Counter>,
    attempts: Family<RouteLabel, Counter>,
    retries: Family<RouteLabel, Counter>,
    budget_denied: Family<RouteLabel, Counter>,
    rate_limited: Family<RouteLabel, Counter>,
    shed: Family<ShedLabel, Counter>,
    latency: Family<RouteLabel, Histogram, fn() -> Histogram>,
    dependency_calls: Family<OutcomeLabel, Counter>,
    dependency_failed: Family<RouteLabel, Counter>,
    limit_refused: Family<ShedLabel, Counter>,
}

/// The per-cluster counter families, to resolve a cluster's handles from.
struct ClusterFamilies {
    requests: Family<ClusterLabel, Counter>,
    responses: Family<ClusterClassLabel, Counter>,
    errors: Family<ClusterReasonLabel, Counter>,
    rejected: Family<ClusterReasonLabel, Counter>,
    latency: Family<ClusterLabel, Histogram, fn() -> Histogram>,
}

impl ClusterFamilies {
    fn new(r: &mut Registry) -> Self {
        let f = ClusterFamilies {
            requests: Family::default(),
            responses: Family::default(),
            errors: Family::default(),
            rejected: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
        };
        r.register(
            "upstream_requests",
            "Attempts sent to one of the cluster's endpoints, by cluster",
            f.requests.clone(),
        );
        r.register(
            "upstream_responses",
            "Response heads received from the cluster, by cluster and status class",
            f.responses.clone(),
        );
        r.register(
            "upstream_errors",
            "Attempts sent to the cluster that got no response, by reason (timeout, connect, reset)",
            f.errors.clone(),
        );
        r.register(
            "upstream_rejected",
            "Attempts the cluster refused before sending, by reason (breaker_open, limit, no_endpoint)",
            f.rejected.clone(),
        );
        r.register(
            "upstream_request_duration_seconds",
            "Time from sending an attempt to its response head or error, by cluster (fixed buckets)",
            f.latency.clone(),
        );
        f
    }

    fn cluster(&self, name: &str) -> ClusterMetrics {
        let l = ClusterLabel {
            cluster: name.to_owned(),
        };
        let reason = |f: &Family<ClusterReasonLabel, Counter>, reason: &'static str| {
            f.get_or_create_owned(&ClusterReasonLabel {
                cluster: name.to_owned(),
                reason,
            })
        };
        ClusterMetrics {
            requests: self.requests.get_or_create_owned(&l),
            responses: CLASSES.map(|class| {
                self.responses.get_or_create_owned(&ClusterClassLabel {
                    cluster: name.to_owned(),
                    class,
                })
            }),
            errors: UpstreamError::ALL.map(|e| reason(&self.errors, e.name())),
            rejected: UpstreamRejected::ALL.map(|e| reason(&self.rejected, e.name())),
            latency: self.latency.get_or_create_owned(&l),
        }
    }
}

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

impl RouteFamilies {
    fn route(&self, name: &str) -> RouteMetrics {
        let l = RouteLabel {
            route: name.to_owned(),
        };
        let class = |class: &'static str| {
            self.responses.get_or_create_owned(&ResponseLabel {
                route: name.to_owned(),
                class,
            })
        };
        RouteMetrics {
            requests: self.requests.get_or_create_owned(&l),
            responses: CLASSES.map(class),
            attempts: self.attempts.get_or_create_owned(&l),
            retries: self.retries.get_or_create_owned(&l),
            budget_denied: self.budget_denied.get_or_create_owned(&l),
            rate_limited: self.rate_limited.get_or_create_owned(&l),
            shed: ShedReason::ALL.map(|reason| {
                self.shed.get_or_create_owned(&ShedLabel {
                    route: name.to_owned(),
                    reason: reason.name(),
                })
            }),
            latency: self.latency.get_or_create_owned(&l),
            dependency_calls: DependencyOutcome::ALL.map(|outcome| {
                self.dependency_calls.get_or_create_owned(&OutcomeLabel {
                    route: name.to_owned(),
                    outcome: outcome.name(),
                })
            }),
            dependency_failed: self.dependency_failed.get_or_create_owned(&l),
            limit_refused: [
                crate::limit::Refusal::Full,
                crate::limit::Refusal::QueueTimeout,
            ]
            .map(|r| {
                self.limit_refused.get_or_create_owned(&ShedLabel {
                    route: name.to_owned(),
                    reason: r.name(),
                })
            }),
        }
    }
}

impl Metrics {
    /// Counts a connection the guard closed before it could be served:
    /// `at_cap` (its listener was at `max_connections` with
    /// `at_connection_cap = "refuse"`), `per_client` (its address held its
    /// cap), `full` (the admin listener
    /// had nothing to evict) or `evicted` (the admin listener made room for
    /// another). `listener` is a configured name or
    /// `admin`.
    pub(crate) fn connection_closed(&self, listener: &str, reason: &'static str) {
        self.connections_closed
            .get_or_create(&ListenerReasonLabel {
                listener: listener.to_owned(),
                reason,
            })
            .inc();
    }

    /// Counts an admin request refused for a missing or wrong token.
    pub(crate) fn admin_auth_failure(&self) {
        self.admin_auth_failures.inc();
    }

    /// Counts one request its client failed.
    pub(crate) fn client_error(&self, fault: crate::blame::ClientFault) {
        self.client_errors[fault as usize].inc();
    }

    /// Registers every family.
    pub(crate) fn new() -> Self {
        let mut r = Registry::with_prefix("stormbreak_guard");
        let requests = Family::<RouteLabel, Counter>::default();
        let responses = Family::<ResponseLabel, Counter>::default();
        let attempts = Family::<RouteLabel, Counter>::default();
        let retries = Family::<RouteLabel, Counter>::default();
        let budget_denied = Family::<RouteLabel, Counter>::default();
        let rate_limited = Family::<RouteLabel, Counter>::default();
        let shed = Family::<ShedLabel, Counter>::default();
        let latency = Family::<RouteLabel, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let no_route = Counter::default();
        r.register("requests", "Requests received, by route", requests.clone());
        r.register(
            "responses",
            "Responses sent, by route and status class",
            responses.clone(),
        );
        r.register(
            "attempts",
            "Attempts sent upstream (first tries and retries), by route",
            attempts.clone(),
        );
        r.register(
            "retries",
            "Retries sent upstream, by route",
            retries.clone(),
        );
        r.register(
            "budget_denied",
            "Retries the route's retry budget refused",
            budget_denied.clone(),
        );
        r.register(
            "rate_limited",
            "Requests refused by the route's keyed rate limit (429)",
            rate_limited.clone(),
        );
        r.register(
            "shed",
            "Requests the guard shed itself, by route and reason (rule, saturation, restore, limit)",
            shed.clone(),
        );
        r.register(
            "request_duration_seconds",
            "Time from request head to response head, by route (fixed buckets)",
            latency.clone(),
        );
        r.register(
            "no_route",
            "Requests no route matched (404)",
            no_route.clone(),
        );
        let dependency_calls = Family::<OutcomeLabel, Counter>::default();
        r.register(
            "dependency_calls",
            "Calls to the route's dependency (route.dependency), by route and outcome (ok, bad_status, timeout, connect, reset, breaker_open, no_endpoint); a retried check counts each call",
            dependency_calls.clone(),
        );
        let dependency_failed = Family::<RouteLabel, Counter>::default();
        r.register(
            "dependency_failed",
            "Requests answered 502 unforwarded because their dependency check failed for good, by route",
            dependency_failed.clone(),
        );
        let limit_refused = Family::<ShedLabel, Counter>::default();
        r.register(
            "limit_refused",
            "Requests the route's concurrency limit refused, by route and reason: limit (limit reached, queue full or absent) or queue_timeout (waited the queue's timeout); each answer also names it in X-Stormbreak-Refused",
            limit_refused.clone(),
        );
        let client_family = Family::<ReasonLabel, Counter>::default();
        r.register(
            "client_errors",
            "Requests their client failed, by reason (body_incomplete, body_malformed, body_too_large, body_timeout, bad_target, client_closed): counted against no upstream and no policy",
            client_family.clone(),
        );
        let client_errors = crate::blame::ClientFault::ALL
            .map(|f| client_family.get_or_create_owned(&ReasonLabel { reason: f.name() }));
        let m = Metrics {
            families: RouteFamilies {
                requests,
                responses,
                attempts,
                retries,
                budget_denied,
                rate_limited,
                shed,
                latency,
                dependency_calls,
                dependency_failed,
                limit_refused,
            },
            routes: Mutex::new(Vec::new()),
            cluster_families: ClusterFamilies::new(&mut r),
            clusters: Mutex::new(Vec::new()),
            no_route,
            client_errors,
            access_log_dropped: Family::default(),
            inflight: Family::default(),
            limit: Family::default(),
            saturation: Family::default(),
            queue_depth: Family::default(),
            up_inflight: Family::default(),
            up_limit: Family::default(),
            up_saturation: Family::default(),
            up_endpoints: Family::default(),
            up_available: Family::default(),
            ep_inflight: Family::default(),
            ep_available: Family::default(),
            ep_ejected: Family::default(),
            ep_unhealthy: Family::default(),
            connections: Family::default(),
            connection_cap: Family::default(),
            connections_closed: Family::default(),
            admin_auth_failures: Counter::default(),
            registry: Registry::default(),
        };
        let mut m = m;
        r.register(
            "inflight",
            "Requests in flight on the route: through its concurrency limit, or (without one) admitted and not yet answered",
            m.inflight.clone(),
        );
        r.register(
            "limit",
            "The route's current concurrency limit",
            m.limit.clone(),
        );
        r.register(
            "saturation",
            "In flight / limit of the route's concurrency limit: the signal to autoscale on",
            m.saturation.clone(),
        );
        r.register(
            "queue_depth",
            "Requests waiting in the route's admission queue",
            m.queue_depth.clone(),
        );
        r.register(
            "upstream_inflight",
            "Attempts in flight to the cluster: through its concurrency limit, or (without one) sent and not yet answered",
            m.up_inflight.clone(),
        );
        r.register(
            "upstream_limit",
            "The cluster's current concurrency limit",
            m.up_limit.clone(),
        );
        r.register(
            "upstream_saturation",
            "In flight / limit of the cluster's concurrency limit",
            m.up_saturation.clone(),
        );
        r.register(
            "upstream_endpoints",
            "Endpoints configured in the cluster",
            m.up_endpoints.clone(),
        );
        r.register(
            "upstream_endpoints_available",
            "Endpoints neither ejected nor failing health checks",
            m.up_available.clone(),
        );
        r.register(
            "upstream_endpoint_inflight",
            "Attempts in flight to the endpoint",
            m.ep_inflight.clone(),
        );
        r.register(
            "upstream_endpoint_available",
            "1 when the endpoint takes traffic (neither ejected nor failing health checks), else 0",
            m.ep_available.clone(),
        );
        r.register(
            "upstream_endpoint_ejected",
            "1 while outlier detection ejects the endpoint, else 0 (clusters with `outlier` only)",
            m.ep_ejected.clone(),
        );
        r.register(
            "upstream_endpoint_unhealthy",
            "1 while the endpoint fails its active health checks, else 0 (clusters with `health_check` only)",
            m.ep_unhealthy.clone(),
        );
        r.register(
            "connections",
            "Client connections open on the listener",
            m.connections.clone(),
        );
        r.register(
            "connection_cap",
            "The listener's connection cap (max_connections)",
            m.connection_cap.clone(),
        );
        r.register(
            "connections_closed",
            "Connections closed before being served, by listener (a configured name or admin) and reason: at_cap (the listener was at max_connections with at_connection_cap = \"refuse\"), per_client (the address held its share), full (the admin listener had nothing to evict) or evicted (the admin listener made room for another)",
            m.connections_closed.clone(),
        );
        r.register(
            "admin_auth_failures",
            "Admin requests refused for a missing or wrong bearer token",
            m.admin_auth_failures.clone(),
        );
        r.register(
            "access_log_dropped",
            "Access-log lines dropped, by reason: rate (over access_log.rate) or queue_full (the writer fell behind)",
            m.access_log_dropped.clone(),
        );
        r.register(
            "build",
            "The guard's version",
            Info::new(BuildLabel {
                version: env!("CARGO_PKG_VERSION"),
            }),
        );
        m.registry = r;
        m
    }

    /// The access log's drop counters: over its rate, and queue full.
    pub(crate) fn access_log_drops(&self) -> (Counter, Counter) {
        let by = |reason| {
            self.access_log_dropped
                .get_or_create_owned(&ReasonLabel { reason })
        };
        (by("rate"), by("queue_full"))
    }

    /// Route `name`'s counters: the same handles for the same name, so
    /// they continue across reloads. At most one entry per route name ever
    /// configured.
    pub(crate) fn route(&self, name: &str) -> Arc<RouteMetrics> {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, m)) = routes.iter().find(|(n, _)| n == name) {
            return m.clone();
        }
        let m = Arc::new(self.families.route(name));
        routes.push((name.to_owned(), m.clone()));
        m
    }

    /// Cluster `name`'s counters: the same handles for the same name, so
    /// they continue across reloads. At most one entry per cluster name
    /// ever configured.
    pub(crate) fn cluster(&self, name: &str) -> Arc<ClusterMetrics> {
        let mut clusters = self.clusters.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, m)) = clusters.iter().find(|(n, _)| n == name) {
            return m.clone();
        }
        let m = Arc::new(self.cluster_families.cluster(name));
        clusters.push((name.to_owned(), m.clone()));
        m
    }

    /// The OpenMetrics text of every family, gauges set from `gauges` first.
    pub(crate) fn encode(&self, gauges: &Gauges) -> String {
        // Gauges describe the config in force: a route or cluster gone
        // since a reload leaves no stale series.
        for f in [&self.inflight, &self.limit, &self.queue_depth] {
            f.clear();
        }
        self.saturation.clear();
        for f in [
            &self.up_inflight,
            &self.up_limit,
            &self.up_endpoints,
            &self.up_available,
        ] {
            f.clear();
        }
        for f in [
            &self.ep_inflight,
            &self.ep_available,
            &self.ep_ejected,
            &self.ep_unhealthy,
        ] {
            f.clear();
        }
        self.up_saturation.clear();
        for (name, g) in &gauges.route {
            let l = RouteLabel {
                route: name.clone(),
            };
            // Without a limit there is no queue and no saturation: in flight only.
            self.inflight.get_or_create(&l).set(g.inflight as i64);
            if let Some(limit) = g.limit {
                self.limit.get_or_create(&l).set(limit as i64);
                self.saturation
                    .get_or_create(&l)
                    .set(g.inflight as f64 / limit.max(1) as f64);
                self.queue_depth.get_or_create(&l).set(g.queued as i64);
            }
        }
        for (name, g) in &gauges.cluster {
            let l = ClusterLabel {
                cluster: name.clone(),
            };
            self.up_inflight
                .get_or_create(&l)
                .set(g.limit.inflight as i64);
            if let Some(limit) = g.limit.limit {
                self.up_limit.get_or_create(&l).set(limit as i64);
                self.up_saturation
                    .get_or_create(&l)
                    .set(g.limit.inflight as f64 / limit.max(1) as f64);
            }
            self.up_endpoints.get_or_create(&l).set(g.endpoints as i64);
            self.up_available.get_or_create(&l).set(g.available as i64);
            for e in &g.endpoint {
                let l = EndpointLabel {
                    cluster: name.clone(),
                    endpoint: e.addr.clone(),
                };
                let available = !e.ejected.unwrap_or(false) && !e.unhealthy.unwrap_or(false);
                self.ep_inflight.get_or_create(&l).set(e.inflight as i64);
                self.ep_available
                    .get_or_create(&l)
                    .set(i64::from(available));
                if let Some(ejected) = e.ejected {
                    self.ep_ejected.get_or_create(&l).set(i64::from(ejected));
                }
                if let Some(unhealthy) = e.unhealthy {
                    self.ep_unhealthy
                        .get_or_create(&l)
                        .set(i64::from(unhealthy));
                }
            }
        }
        for (name, (open, cap)) in &gauges.listener {
            let l = ListenerLabel {
                listener: name.clone(),
            };
            self.connections.get_or_create(&l).set(*open as i64);
            self.connection_cap.get_or_create(&l).set(*cap as i64);
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturation_is_in_flight_over_limit_only_where_there_is_a_limit_and_in_flight_is_everywhere()
    {
        let m = Metrics::new();
        let text = m.encode(&Gauges {
            route: vec![
                (
                    "a".to_owned(),
                    LimitGauge {
                        inflight: 3,
                        limit: Some(4),
                        queued: 2,
                    },
                ),
                (
                    "b".to_owned(),
                    LimitGauge {
                        inflight: 7,
                        ..LimitGauge::default()
                    },
                ),
            ],
            cluster: vec![(
                "c".to_owned(),
                ClusterGauge {
                    limit: LimitGauge {
                        inflight: 1,
                        limit: Some(8),
                        queued: 0,
                    },
                    endpoints: 2,
                    available: 1,
                    endpoint: vec![
                        EndpointGauge {
                            addr: "127.0.0.1:1".to_owned(),
                            inflight: 1,
                            ejected: Some(false),
                            unhealthy: None,
                        },
                        EndpointGauge {
                            addr: "127.0.0.1:2".to_owned(),
                            inflight: 0,
                            ejected: Some(true),
                            unhealthy: None,
                        },
                    ],
                },
            )],
            listener: vec![("l".to_owned(), (5, 100))],
        });
        for want in [
            "stormbreak_guard_saturation{route=\"a\"} 0.75\n",
            "stormbreak_guard_queue_depth{route=\"a\"} 2\n",
            "stormbreak_guard_upstream_saturation{cluster=\"c\"} 0.125\n",
            "stormbreak_guard_upstream_endpoints_available{cluster=\"c\"} 1\n",
            "stormbreak_guard_connections{listener=\"l\"} 5\n",
            "stormbreak_guard_connection_cap{listener=\"l\"} 100\n",
            "stormbreak_guard_inflight{route=\"b\"} 7\n",
            "stormbreak_guard_upstream_endpoint_available{cluster=\"c\",endpoint=\"127.0.0.1:1\"} 1\n",
            "stormbreak_guard_upstream_endpoint_available{cluster=\"c\",endpoint=\"127.0.0.1:2\"} 0\n",
            "stormbreak_guard_upstream_endpoint_ejected{cluster=\"c\",endpoint=\"127.0.0.1:2\"} 1\n",
            "stormbreak_guard_upstream_endpoint_inflight{cluster=\"c\",endpoint=\"127.0.0.1:1\"} 1\n",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        for absent in ["saturation", "limit", "queue_depth"] {
            assert!(
                !text.contains(&format!("stormbreak_guard_{absent}{{route=\"b\"}}")),
                "a route without a limit has no {absent}"
            );
        }
        assert!(
            !text.contains("stormbreak_guard_upstream_endpoint_unhealthy{"),
            "no health checks, no unhealthy gauge"
        );
    }
}
