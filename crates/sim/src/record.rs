//! The recording: per-interval counters and gauges per route and per
//! component, the actions applied, and how they are written out.
//!
//! Memory grows with the number of intervals (one row per interval and
//! entity), never with the number of requests: latencies go into one HDR
//! histogram per route that is reset every interval.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use stormbreak_policy::Nanos;
use stormbreak_policy::retry::{AttemptOutcome, Pushback};

/// Why an attempt failed, as its caller saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A sidecar, gateway or app queue was full: refused at once (503).
    LimitRejected,
    /// Every running LB node held its maximum of flows: connection refused.
    FlowsExhausted,
    /// Waited in a sidecar queue longer than its queue timeout (503).
    QueueTimeout,
    /// The caller's per-try timeout expired first.
    Timeout,
    /// The dependency call (e.g. auth) failed, so the request failed.
    DependencyFailed,
    /// Nothing to send to: no running LB node or no ready pod.
    Unavailable,
    /// The LB node holding the flow was paused: the connection was reset.
    Reset,
    /// Shed by an operator rule or a staged-restore ramp with 403.
    Shed403,
    /// Shed with 429.
    Shed429,
    /// Shed with 503.
    Shed503,
}

impl Cause {
    /// How a caller sees this failure, as the policy crate's classifier
    /// reads it: a refused connection, a timeout, a reset, or an answer
    /// with the cause's status. `retry_after` is what the answer
    /// advertised, already dropped by callers that ignore it. The
    /// simulator's callers and `stormbreak lab`'s fan-out loop classify
    /// through this one mapping.
    pub fn outcome(self, retry_after: Option<Nanos>) -> AttemptOutcome {
        match self {
            Cause::FlowsExhausted => AttemptOutcome::ConnectFailed,
            Cause::Timeout => AttemptOutcome::Timeout,
            Cause::Reset => AttemptOutcome::Reset,
            c => AttemptOutcome::Response {
                status: c.status().unwrap_or(503),
                retry_after,
                pushback: Pushback::None,
            },
        }
    }

    /// Every cause, in the order of the recording's columns.
    pub const ALL: [Cause; 10] = [
        Cause::LimitRejected,
        Cause::FlowsExhausted,
        Cause::QueueTimeout,
        Cause::Timeout,
        Cause::DependencyFailed,
        Cause::Unavailable,
        Cause::Reset,
        Cause::Shed403,
        Cause::Shed429,
        Cause::Shed503,
    ];

    /// The shed cause for an HTTP status (403, 429, anything else is 503).
    pub fn shed(status: u16) -> Cause {
        match status {
            403 => Cause::Shed403,
            429 => Cause::Shed429,
            _ => Cause::Shed503,
        }
    }

    /// Stable column name.
    pub fn name(self) -> &'static str {
        match self {
            Cause::LimitRejected => "limit_rejected",
            Cause::FlowsExhausted => "flows_exhausted",
            Cause::QueueTimeout => "queue_timeout",
            Cause::Timeout => "timeout",
            Cause::DependencyFailed => "dependency_failed",
            Cause::Unavailable => "unavailable",
            Cause::Reset => "reset",
            Cause::Shed403 => "shed_403",
            Cause::Shed429 => "shed_429",
            Cause::Shed503 => "shed_503",
        }
    }

    /// The HTTP status a caller sees, `None` for transport-level failures.
    pub fn status(self) -> Option<u16> {
        match self {
            Cause::LimitRejected | Cause::QueueTimeout | Cause::Unavailable | Cause::Shed503 => {
                Some(503)
            }
            Cause::Shed403 => Some(403),
            Cause::Shed429 => Some(429),
            Cause::DependencyFailed => Some(502),
            Cause::FlowsExhausted | Cause::Timeout | Cause::Reset => None,
        }
    }
}

/// Counters of one route in the current interval.
#[derive(Debug)]
pub(crate) struct RouteAcc {
    pub first_attempts: u64,
    pub attempts: u64,
    pub successes: u64,
    pub errors: [u64; Cause::ALL.len()],
    pub latency_us: Histogram<u64>,
    pub latency_sum_ns: f64,
}

impl RouteAcc {
    pub fn new() -> Self {
        RouteAcc {
            first_attempts: 0,
            attempts: 0,
            successes: 0,
            errors: [0; Cause::ALL.len()],
            // 1 µs to 1 h at 2 significant digits: ~ 1% precision.
            latency_us: Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("static bounds"),
            latency_sum_ns: 0.0,
        }
    }

    #[inline]
    pub fn record_latency(&mut self, ns: Nanos) {
        self.latency_us
            .saturating_record((ns.as_nanos() / 1000).max(1));
        self.latency_sum_ns += ns.as_nanos() as f64;
    }
}

/// One route's time series, one value per interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSeries {
    /// Route name.
    pub name: String,
    /// Logical requests started (first attempts).
    pub first_attempts: Vec<u64>,
    /// All attempts that entered the route's first hop.
    pub attempts: Vec<u64>,
    /// Attempts answered with success.
    pub successes: Vec<u64>,
    /// Failed attempts per cause, indexed like [`Cause::ALL`].
    pub errors: Vec<[u64; Cause::ALL.len()]>,
    /// Latency percentiles of successful attempts, milliseconds: p50, p90, p99, max.
    pub latency_ms: Vec<[f64; 4]>,
    /// Mean latency of successful attempts, milliseconds.
    pub latency_mean_ms: Vec<f64>,
    /// Job queues (`workers`) of populations on this route: the longest
    /// any job had waited for a worker, seconds — the oldest job still
    /// waiting at the end of the interval, or the longest wait of a job
    /// dispatched during it. Empty when no population has a job queue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub job_wait_s: Vec<f64>,
}

impl RouteSeries {
    /// Failed attempts in interval `i`.
    pub fn failed(&self, i: usize) -> u64 {
        self.errors[i].iter().sum()
    }
}

/// Gauges sampled and counters accumulated for one component per interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentSeries {
    /// Component name.
    pub name: String,
    /// `lb`, `gateway` or `service`.
    pub kind: String,
    /// Attempts that arrived at the component.
    pub arrivals: Vec<u64>,
    /// Attempts it refused (limit, flows, queue timeout, unavailable).
    pub rejected: Vec<u64>,
    /// In flight at the end of the interval (flows for an LB, sidecar
    /// in-flight or app busy workers for a service).
    pub in_flight: Vec<f64>,
    /// The limit `in_flight` is measured against.
    pub limit: Vec<f64>,
    /// Waiting in queues at the end of the interval.
    pub queue: Vec<f64>,
    /// Ready pods (services) or running nodes (LBs).
    pub replicas: Vec<f64>,
    /// Time-averaged app utilisation over the interval (busy / workers).
    pub app_utilisation: Vec<f64>,
    /// LBs with `connections`: client connections open (busy, idle or
    /// closing) at the end of the interval. Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<f64>,
    /// Whole-run Little's-law figures.
    pub little: LittleTotals,
}

/// Whole-run figures of one component for checking Little's law, L = λW.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LittleTotals {
    /// L: time-averaged number of attempts present (queued, in service, or
    /// holding a resource while downstream works).
    pub mean_in_system: f64,
    /// λ: departures per second.
    pub throughput_per_s: f64,
    /// W: mean time an attempt spent in the component, seconds.
    pub mean_sojourn_s: f64,
}

/// A timeline action as it was applied.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppliedAction {
    /// Simulated time (nanoseconds in `recording.json`).
    #[serde(with = "stormbreak_policy::time::count")]
    pub at: Nanos,
    /// Human description.
    pub what: String,
}

/// Everything a run recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recording {
    /// Scenario name.
    pub scenario: String,
    /// Seed used.
    pub seed: u64,
    /// Traffic scale used.
    pub scale: f64,
    /// Interval length (nanoseconds in `recording.json`).
    #[serde(with = "stormbreak_policy::time::count")]
    pub interval: Nanos,
    /// Simulated duration (nanoseconds in `recording.json`).
    #[serde(with = "stormbreak_policy::time::count")]
    pub duration: Nanos,
    /// Seconds after midnight of simulated time zero (for clock labels).
    pub clock_origin_s: u64,
    /// Per route.
    pub routes: Vec<RouteSeries>,
    /// Per component.
    pub components: Vec<ComponentSeries>,
    /// Actions applied, in time order.
    pub actions: Vec<AppliedAction>,
    /// Events processed.
    pub events: u64,
    /// Attempts simulated (all hops).
    pub attempts: u64,
    /// Peak number of attempts in flight at once.
    pub peak_in_flight: usize,
    /// Most events handled per simulated second over one recording interval.
    #[serde(default)]
    pub peak_events_per_s: f64,
    /// Most jobs waiting at once in any job queue.
    #[serde(default)]
    pub peak_job_backlog: u64,
    /// Default bounds that refused work (empty in an honest run).
    #[serde(default)]
    pub bounds_hit: Vec<crate::engine::BoundHit>,
}

impl Recording {
    /// Number of recorded intervals.
    pub fn intervals(&self) -> usize {
        self.routes.first().map_or(0, |r| r.attempts.len())
    }

    /// The route series called `name`.
    pub fn route(&self, name: &str) -> Option<&RouteSeries> {
        self.routes.iter().find(|r| r.name == name)
    }

    /// The component series called `name`.
    pub fn component(&self, name: &str) -> Option<&ComponentSeries> {
        self.components.iter().find(|c| c.name == name)
    }
}
