//! Scenario files: the TOML a user writes, its validation, and the errors
//! that name `file:line:column`.
//!
//! A scenario describes *structure and behaviour* — components, routes,
//! client populations and their retry habits, timeline actions — and never an
//! outcome: there is no field for an error rate, an amplification or a
//! recovery time. Those come out of the run. The format is documented field
//! by field in `docs/scenarios.md`.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use stormbreak_policy::{Nanos, units};
use toml::Spanned;
use toml::de::DeTable;

use crate::dist::ServiceTimeSpec;

mod hpa;
mod messages;
mod specs;
mod validate;
pub use specs::{FieldProblem, check_budget, check_limit, check_retry};
use stormbreak_policy::autoscale::Behavior;
use stormbreak_policy::budget::BudgetConfig;
use stormbreak_policy::failover::FailoverConfig;
use stormbreak_policy::limit::{LimitConfig, QueueConfig};
use stormbreak_policy::ramp::StagedRestoreConfig;
use stormbreak_policy::retry::{BackoffConfig, RetryConfig};
use stormbreak_policy::shed::{Criticality, SaturationConfig};

/// A parsed, validated scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a scenario: a [scenario] table, then [[lb]], [[gateway]], [[service]], [[route]], [[client]], [[failover]] and [[action]] tables, and optionally [[slo]] and [limits]"
)]
pub struct Scenario {
    /// Name, run length, recording interval, seed.
    pub scenario: Meta,
    /// Load-balancer node pools.
    #[serde(default, rename = "lb")]
    pub lbs: Vec<LbSpec>,
    /// Gateways: a hop with a dependency call and its own retries.
    #[serde(default, rename = "gateway")]
    pub gateways: Vec<GatewaySpec>,
    /// Services made of pods (sidecar + app container).
    #[serde(default, rename = "service")]
    pub services: Vec<ServiceSpec>,
    /// Routes: the chain of components an attempt traverses.
    #[serde(rename = "route")]
    pub routes: Vec<RouteSpec>,
    /// Open-loop client populations.
    #[serde(rename = "client")]
    pub clients: Vec<ClientSpec>,
    /// Capacity-aware failover controllers.
    #[serde(default, rename = "failover")]
    pub failovers: Vec<FailoverSpec>,
    /// Timeline actions.
    #[serde(default, rename = "action")]
    pub actions: Vec<Spanned<ActionSpec>>,
    /// Service-level objectives per route: what a breach is, for
    /// `stormbreak sweep`'s classification (the run itself ignores them).
    #[serde(default, rename = "slo")]
    pub slos: Vec<SloSpec>,
    /// Lower run limits than the engine's defaults (`[limits]`); a scenario
    /// may not raise one (only the command line's `--limit` may).
    #[serde(default)]
    pub limits: LimitsSpec,
    /// What validation found legal but probably unintended (a rate too low
    /// to send anything in the run, …); `stormbreak simulate` prints them.
    #[serde(skip)]
    pub warnings: Vec<ScenarioWarning>,
}

/// A scenario's `[limits]`: any of [`crate::engine::Limits`]'s, each at
/// most its default. A scenario may lower the bounds that protect the
/// machine running it, never lift them: that takes `--limit` on the
/// command line of the machine's owner.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [limits] table like { attempts_in_flight = 1000000 } (names in docs/scenarios.md, \"Limits of a run\")"
)]
pub struct LimitsSpec {
    /// See [`crate::engine::Limits::default_app_queue`].
    #[serde(default)]
    pub default_app_queue: Option<u32>,
    /// See [`crate::engine::Limits::requests_in_flight`].
    #[serde(default)]
    pub requests_in_flight: Option<u32>,
    /// See [`crate::engine::Limits::attempts_in_flight`].
    #[serde(default)]
    pub attempts_in_flight: Option<u32>,
    /// See [`crate::engine::Limits::job_backlog`].
    #[serde(default)]
    pub job_backlog: Option<u64>,
    /// See [`crate::engine::Limits::events_per_sim_second`].
    #[serde(default)]
    pub events_per_sim_second: Option<u64>,
    /// See [`crate::engine::Limits::events_total`].
    #[serde(default)]
    pub events_total: Option<u64>,
}

impl LimitsSpec {
    /// Each limit's name and the value the table gives, in
    /// [`crate::engine::Limits::NAMES`]'s order.
    pub fn values(&self) -> [(&'static str, Option<u64>); 6] {
        [
            ("default_app_queue", self.default_app_queue.map(u64::from)),
            ("requests_in_flight", self.requests_in_flight.map(u64::from)),
            ("attempts_in_flight", self.attempts_in_flight.map(u64::from)),
            ("job_backlog", self.job_backlog),
            ("events_per_sim_second", self.events_per_sim_second),
            ("events_total", self.events_total),
        ]
    }
}

/// The `[scenario]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [scenario] table like { name = \"x\", duration = \"1h\" }"
)]
pub struct Meta {
    /// Used for the default output directory.
    pub name: String,
    /// Free text shown in reports.
    #[serde(default)]
    pub description: String,
    /// Simulated run length.
    pub duration: Nanos,
    /// Recording interval (default 10 s).
    #[serde(default = "default_interval")]
    pub interval: Nanos,
    /// RNG seed (default 1); `--seed` overrides it.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Wall-clock label of simulated time zero, `"HH:MM"` (default `"00:00"`),
    /// so timelines print as the incident's clock.
    #[serde(default)]
    pub clock_origin: Option<String>,
}

fn default_interval() -> Nanos {
    10 * stormbreak_policy::Nanos::SECOND
}
fn default_seed() -> u64 {
    1
}
fn yes() -> bool {
    true
}
fn default_fanout_delay() -> Nanos {
    50 * stormbreak_policy::Nanos::MILLISECOND
}

/// A `[[lb]]` pool: nodes that each hold a flow for an attempt's whole
/// downstream life (HAProxy `maxconn` per server/frontend).
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an [[lb]] table like { name = \"edge\", nodes = 4, flows_per_node = 3000 }"
)]
pub struct LbSpec {
    /// Component name, referenced by routes.
    pub name: Spanned<String>,
    /// Number of nodes; attempts are spread round-robin over running nodes.
    pub nodes: u32,
    /// Concurrent flows a node can hold; past it new attempts are refused.
    pub flows_per_node: u32,
    /// Client connections (keep-alive) held by the nodes; absent: every
    /// attempt is its own connection, held for its life (the flow).
    #[serde(default)]
    pub connections: Option<LbConnSpec>,
}

/// `[lb.connections]`: HAProxy's connection limit and keep-alive.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a connections table like { maxconn = 20000, keepalive_timeout = \"50s\" }"
)]
pub struct LbConnSpec {
    /// Client connections a node may hold, idle or busy (HAProxy `maxconn`
    /// in `global`/`frontend`); past it a new connection is not accepted.
    pub maxconn: u32,
    /// How long an idle keep-alive connection stays open (HAProxy
    /// `timeout http-keep-alive`; default [`DEFAULT_KEEPALIVE_TIMEOUT`]).
    #[serde(default = "default_keepalive")]
    pub keepalive_timeout: Nanos,
}

/// ASSUMPTION: HAProxy's `timeout http-keep-alive` falls back to `timeout
/// http-request`, then to `timeout client` (HAProxy 2.8 configuration
/// manual, "timeout http-keep-alive"); Debian's packaged `haproxy.cfg` sets
/// `timeout client 50000` (ms) and neither of the others: 50 s.
pub const DEFAULT_KEEPALIVE_TIMEOUT: Nanos = Nanos::from_secs(50);

fn default_keepalive() -> Nanos {
    DEFAULT_KEEPALIVE_TIMEOUT
}

/// `[client.connections]`: the population as `instances` separate client
/// processes, each keeping one keep-alive connection to its route's first
/// LB.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a connections table like { instances = 5000, idle_timeout = \"90s\" }"
)]
pub struct ClientConnSpec {
    /// Client processes sharing the population's rate (each request comes
    /// from one chosen uniformly, so each process sends a Poisson stream
    /// of `rate / instances`); scaled with `--scale`.
    pub instances: u32,
    /// How long the client keeps an idle connection (default
    /// [`DEFAULT_CLIENT_IDLE_TIMEOUT`]); the connection closes at the
    /// sooner of this and the LB's `keepalive_timeout`.
    #[serde(default = "default_client_idle")]
    pub idle_timeout: Nanos,
    /// After its connection is reset or refused, the process waits this
    /// backoff before connecting again, failing its requests at once
    /// meanwhile (gRPC's TRANSIENT_FAILURE); absent: it reconnects at its
    /// next request, as HTTP/1.1 clients do. `BackoffConfig::grpc_connection`
    /// is `{ base = "1s", multiplier = 1.6, max = "120s", jitter = "proportional" }`.
    #[serde(default)]
    pub reconnect_backoff: Option<BackoffConfig>,
}

/// ASSUMPTION: 90 s, the idle timeout of hyper-util's and reqwest's pools
/// (`pool_idle_timeout`) and Go's `http.DefaultTransport`
/// (`IdleConnTimeout`).
pub const DEFAULT_CLIENT_IDLE_TIMEOUT: Nanos = Nanos::from_secs(90);

fn default_client_idle() -> Nanos {
    DEFAULT_CLIENT_IDLE_TIMEOUT
}

/// A `[[gateway]]`: calls its dependency route first, then forwards with its
/// own retry policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [[gateway]] table like { name = \"gw\", timeout = \"1s\" }"
)]
pub struct GatewaySpec {
    /// Component name.
    pub name: Spanned<String>,
    /// Route called (and awaited) before forwarding, e.g. an auth route.
    #[serde(default)]
    pub dependency: Option<Spanned<String>>,
    /// Per-try timeout on the dependency call and on the forwarded call.
    pub timeout: Nanos,
    /// Retries of the forwarded call (none when absent).
    #[serde(default)]
    pub retry: Option<RetryConfig>,
    /// Retry budget shared by all calls through this gateway.
    #[serde(default)]
    pub budget: Option<BudgetConfig>,
    /// A concurrency limit per gateway instance, the policy crate's
    /// limiter (`fixed`, `aimd`, `vegas`, `gradient2`, `envoy_gradient`,
    /// `windowed`), as `stormbreak guard` applies a route's `limit`: a
    /// request is admitted while the instance's in-flight count is below
    /// the limit, else refused at once (503, `limit_rejected`); its
    /// round-trip time and outcome feed the algorithm when it completes.
    #[serde(default)]
    pub limit: Option<LimitConfig>,
    /// Gateway instances (processes), each with its own `limit`; requests
    /// go to them in turn. Scaled like a service's `replicas` (default 1).
    #[serde(default = "one_instance")]
    pub instances: u32,
    /// With `limit`: shed requests by criticality class as the instance
    /// fills (the policy crate's saturation shedder, `stormbreak guard`'s
    /// `[saturation]` table): a request of class `c` is answered `status`
    /// when `in flight / limit` of its instance has reached the class's
    /// threshold. Absent, the defaults apply, as in the guard (sheddable
    /// 0.8, sheddable_plus 0.9, critical 1.0, critical_plus 1.2; 503 with
    /// `Retry-After: 1s`), and a refusal by the limit itself gets the same
    /// answer.
    #[serde(default)]
    pub saturation: Option<SaturationConfig>,
    /// With `limit`: an admission queue per instance (the guard's route
    /// `queue`): a request that finds the limit reached waits, at most
    /// `size` at once and each at most `timeout` (then `queue_timeout`,
    /// with the saturation table's answer); a slot coming back admits the
    /// oldest waiter. `size` scales like a `fixed` limit.
    #[serde(default)]
    pub queue: Option<QueueConfig>,
}

fn one_instance() -> u32 {
    1
}

/// A `[[service]]`: identical pods behind a least-loaded balancer.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [[service]] table with name, replicas and app"
)]
pub struct ServiceSpec {
    /// Component name.
    pub name: Spanned<String>,
    /// Pods at time zero (the autoscaler's current replicas).
    pub replicas: u32,
    /// The sidecar proxy in each pod; absent means no sidecar.
    #[serde(default)]
    pub sidecar: Option<SidecarSpec>,
    /// The application container in each pod.
    pub app: AppSpec,
    /// An HPA for this service; absent means fixed replicas.
    #[serde(default)]
    pub autoscaler: Option<AutoscalerSpec>,
    /// Time from a pod's creation until it is ready, for the replacements
    /// the replica controller starts after `kill_pods` (default: the
    /// autoscaler's `pod_start`, else [`DEFAULT_POD_START`]).
    #[serde(default)]
    pub pod_start: Option<Nanos>,
    /// How often the replica controller (the Deployment's ReplicaSet)
    /// checks for missing pods while some are missing (default
    /// [`DEFAULT_CONTROLLER_PERIOD`]).
    #[serde(default = "default_controller_period")]
    pub controller_period: Nanos,
}

/// ASSUMPTION: a pod replaced by its ReplicaSet is ready 30 s after the
/// controller creates it (scheduling, an image already on the node, start-up
/// and a first readiness probe), when neither the service nor its
/// autoscaler says `pod_start`.
pub const DEFAULT_POD_START: Nanos = Nanos::from_secs(30);

/// ASSUMPTION: the replica controller notices a missing pod within 5 s.
/// Kubernetes' ReplicaSet controller is driven by watch events and reacts
/// within about a second; 5 s also covers the kubelet reporting the death.
pub const DEFAULT_CONTROLLER_PERIOD: Nanos = Nanos::from_secs(5);

fn default_controller_period() -> Nanos {
    DEFAULT_CONTROLLER_PERIOD
}

/// `[service.sidecar]`: an Envoy/Istio sidecar's connection-pool limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a sidecar table like { limit = 100, queue = 10, queue_timeout = \"1s\" }"
)]
pub struct SidecarSpec {
    /// Concurrent requests the sidecar forwards to the app (`http2MaxRequests`).
    pub limit: u32,
    /// Requests that may wait for a slot (`http1MaxPendingRequests`); 0 = none.
    #[serde(default)]
    pub queue: u32,
    /// How long a request may wait in that queue.
    #[serde(default)]
    pub queue_timeout: Option<Nanos>,
}

/// `[service.app]`: the application container.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an app table like { workers = 8, service_time = { dist = \"exponential\", mean = \"1ms\" } }"
)]
pub struct AppSpec {
    /// Worker threads: requests processed at once.
    pub workers: u32,
    /// Time a worker spends per request.
    pub service_time: ServiceTimeSpec,
    /// Requests that may wait for a worker (default: unbounded).
    #[serde(default)]
    pub queue: Option<u32>,
    /// Drop queued work whose caller has already given up (default false:
    /// the server keeps working on abandoned attempts — wasted work).
    #[serde(default)]
    pub drop_expired: bool,
}

/// `[service.autoscaler]`: a Kubernetes HPA on one metric.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an autoscaler table like { metric = \"app_cpu\", target = 0.6, min = 2, max = 10, pod_start = \"90s\" }"
)]
pub struct AutoscalerSpec {
    /// Which signal the HPA watches.
    pub metric: ScaleMetric,
    /// Target value (utilisation or saturation as a fraction, e.g. 0.7).
    pub target: f64,
    /// `minReplicas`.
    pub min: u32,
    /// `maxReplicas`.
    pub max: u32,
    /// Time from the scale decision until a new pod is ready.
    pub pod_start: Nanos,
    /// How often the HPA syncs (`--horizontal-pod-autoscaler-sync-period`,
    /// default 15 s as in Kubernetes), independent of the recording interval.
    #[serde(default = "default_hpa_sync")]
    pub sync_period: Nanos,
    /// `spec.behavior`: stabilization windows and rate policies per
    /// direction, the policy crate's [`Behavior`] read unchanged. Absent,
    /// or any direction or field left out: Kubernetes' default for it.
    #[serde(default)]
    pub behavior: Option<Behavior>,
}

fn default_hpa_sync() -> Nanos {
    15 * stormbreak_policy::Nanos::SECOND
}

/// The metric an autoscaler watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(
    rename_all = "snake_case",
    expecting = "\"app_cpu\", \"pod_cpu\" or \"sidecar_saturation\""
)]
pub enum ScaleMetric {
    /// `ContainerResource` CPU of the app container (the 2026-08-17 setting).
    AppCpu,
    /// `Resource` CPU of the whole pod: app and sidecar usage over their requests.
    PodCpu,
    /// A `Pods` metric: sidecar in-flight / limit.
    SidecarSaturation,
}

/// A `[[failover]]`: LB capacity monitoring that spills client populations
/// to their `failover_route` with `stormbreak_policy::failover::Failover`,
/// re-planned every `period` (its own clock, not the recording interval).
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [[failover]] table like { clients = [\"users\"], primary = \"lb-a\", secondary = \"lb-b\" }"
)]
pub struct FailoverSpec {
    /// Client populations that may be spilled (each needs a `failover_route`).
    pub clients: Vec<Spanned<String>>,
    /// The LB pool whose capacity is watched.
    pub primary: Spanned<String>,
    /// The receiving region's LB pool, whose headroom bounds the spill.
    pub secondary: Spanned<String>,
    /// Spill law, smoothing and hysteresis.
    #[serde(default)]
    pub policy: FailoverConfig,
    /// How often the controller measures the two pools and re-plans
    /// (default 10 s).
    #[serde(default = "default_failover_period")]
    pub period: Nanos,
}

/// How often a `[[failover]]` re-plans when its `period` is not given.
pub const DEFAULT_FAILOVER_PERIOD: Nanos = Nanos::from_secs(10);

fn default_failover_period() -> Nanos {
    DEFAULT_FAILOVER_PERIOD
}

/// A `[[route]]`: the components an attempt traverses, in order.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [[route]] table like { name = \"r\", path = [\"edge\", \"svc\"] }"
)]
pub struct RouteSpec {
    /// Route name (what clients and dependencies reference).
    pub name: Spanned<String>,
    /// Component names, edge first; the last must be a service.
    pub path: Vec<Spanned<String>>,
}

/// A `[[client]]` population: open-loop arrivals on one route.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [[client]] table with name, route, rate and timeout"
)]
pub struct ClientSpec {
    /// Population name.
    pub name: Spanned<String>,
    /// Route it calls.
    pub route: Spanned<String>,
    /// Logical requests per second at time zero (Poisson arrivals).
    #[serde(with = "units::rate")]
    pub rate: f64,
    /// Site label (for staged restores that ramp traffic site by site).
    #[serde(default)]
    pub site: Option<String>,
    /// The criticality class its requests carry, as a trusted criticality
    /// header would (Google SRE book ch. 21): gateways shed lower classes
    /// first and LB shed rules may name a class. Child calls (a gateway's
    /// auth check) inherit it. Default `critical`.
    #[serde(default)]
    pub criticality: Criticality,
    /// Route to send the spilled share to after a `shift_traffic` action
    /// (typically the same user path in another region).
    #[serde(default)]
    pub failover_route: Option<Spanned<String>>,
    /// Later changes of the rate.
    #[serde(default, rename = "step")]
    pub steps: Vec<RateStep>,
    /// A daily cycle multiplying the rate (and its steps).
    #[serde(default)]
    pub diurnal: Option<DiurnalSpec>,
    /// Per-attempt timeout: the client abandons an attempt after this.
    pub timeout: Nanos,
    /// Retry behaviour (none when absent).
    #[serde(default)]
    pub retry: Option<RetryConfig>,
    /// Retry budget shared by the population.
    #[serde(default)]
    pub budget: Option<BudgetConfig>,
    /// Wait at least the `Retry-After` a response advertises before
    /// retrying (default true; a scraper or a buggy client sets false).
    #[serde(default = "yes")]
    pub honour_retry_after: bool,
    /// The fan-out bug: every failed attempt spawns this many new attempts
    /// at once instead of one retry (0 = off).
    #[serde(default)]
    pub fanout: u32,
    /// With `fanout`: at most this many attempts of one operation in flight
    /// (default: `fanout`).
    #[serde(default)]
    pub fanout_max_in_flight: Option<u32>,
    /// With `fanout`: delay before spawned attempts are sent (default 50 ms).
    #[serde(default = "default_fanout_delay")]
    pub fanout_delay: Nanos,
    /// With `fanout`: how long a logical operation keeps spawning attempts.
    #[serde(default)]
    pub give_up_after: Option<Nanos>,
    /// A job queue: at most this many logical requests in flight (a
    /// dispatcher's worker pool, scaled with `--scale`); later arrivals
    /// wait in FIFO order and none is dropped. A worker is held for the
    /// whole request, retries and pauses included, so slow or failing
    /// attempts cut the pool's throughput (Little's law).
    #[serde(default)]
    pub workers: Option<u32>,
    /// Keep-alive connections to the route's first LB (which must have
    /// `connections`); absent: one connection per attempt.
    #[serde(default)]
    pub connections: Option<ClientConnSpec>,
}

/// `diurnal = { amplitude = 0.3, period = "24h", peak_at = "15h" }`: the
/// rate is multiplied by 1 + amplitude·cos(2π(t − peak_at)/period).
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { amplitude = 0.3, period = \"24h\", peak_at = \"15h\" }"
)]
pub struct DiurnalSpec {
    /// Relative swing, in [0, 1).
    pub amplitude: f64,
    /// Cycle length (default 24 h).
    #[serde(default = "one_day")]
    pub period: Nanos,
    /// Simulated time of the daily peak.
    #[serde(default)]
    pub peak_at: Nanos,
}

fn one_day() -> Nanos {
    24 * 60 * stormbreak_policy::Nanos::MINUTE
}

/// A `[[client.step]]`: from `at`, the rate becomes `rate` (linearly over `ramp`).
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { at = \"5m\", rate = \"100/s\" }"
)]
pub struct RateStep {
    /// When the change starts.
    pub at: Nanos,
    /// The new rate.
    #[serde(with = "units::rate")]
    pub rate: f64,
    /// Length of a linear ramp to the new rate (default: a step).
    #[serde(default)]
    pub ramp: Nanos,
    /// What the step stands for, for `stormbreak sweep` (as on
    /// `[[action]]`): a demand peak written as steps is a trigger, which
    /// ends when its last step's ramp does. No effect on the run itself.
    #[serde(default)]
    pub role: Option<ActionRole>,
}

/// An `[[slo]]`: when a route is in breach. Either bound, or both, may be
/// given; a route breaches while either is exceeded.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an [[slo]] table like { route = \"api\", error_rate = 0.05, window = \"30s\" }"
)]
pub struct SloSpec {
    /// Route name.
    pub route: Spanned<String>,
    /// Largest share of logical requests that may fail over `window`
    /// (1 − successes / requests started), in [0, 1).
    #[serde(default)]
    pub error_rate: Option<f64>,
    /// Sliding window of the error rate, a whole number of recording
    /// intervals, rounded up (default [`DEFAULT_SLO_WINDOW`]).
    #[serde(default = "default_slo_window")]
    pub window: Nanos,
    /// Longest a job of a job-queue population (`workers`) may wait for a
    /// worker (the route's `job_wait_s` series).
    #[serde(default)]
    pub job_wait: Option<Nanos>,
}

/// The error-rate window of an `[[slo]]` that does not give one.
pub const DEFAULT_SLO_WINDOW: Nanos = Nanos::from_secs(10);

fn default_slo_window() -> Nanos {
    DEFAULT_SLO_WINDOW
}

/// What an action stands for, for `stormbreak sweep`'s classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case", expecting = "\"trigger\" or \"operator\"")]
pub enum ActionRole {
    /// Part of what pushes the system (a spike, a capacity drop): recovery
    /// is measured from the end of the last trigger.
    Trigger,
    /// An operator's intervention (shed, restart, retries off): the system
    /// recovering after one did not recover on its own, so observation
    /// ends at the first.
    Operator,
}

/// An `[[action]]` on the timeline. (Unknown fields are still rejected:
/// `kind` is flattened and denies them.)
#[derive(Debug, Clone, Deserialize)]
#[serde(expecting = "an [[action]] table with at and do")]
pub struct ActionSpec {
    /// When it applies.
    pub at: Nanos,
    /// A name for the action, unique in the scenario (letters, digits,
    /// `_` and `-`, not only digits), by which a sweep axis addresses it
    /// (`action.<id>.<field>`).
    #[serde(default)]
    pub id: Option<String>,
    /// Whether the action is a trigger or an operator action (absent:
    /// neither).
    #[serde(default)]
    pub role: Option<ActionRole>,
    /// How long it lasts: the action is undone `for` after `at` (only for
    /// the actions [`ActionKind::revertible`] names; absent: until the end).
    #[serde(default, rename = "for")]
    pub lasts: Option<Nanos>,
    /// What it does.
    #[serde(flatten)]
    pub kind: ActionKind,
}

/// How a stalled component treats the attempts that reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", expecting = "\"hang\" or \"fail\"")]
pub enum StallMode {
    /// Attempts are accepted and never answered: each caller waits for its
    /// own timeout; when the stall ends, the hung attempts are reset.
    Hang,
    /// Attempts are refused at once (connection refused: `unavailable`).
    Fail,
}

/// What a timeline action does.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    tag = "do",
    rename_all = "snake_case",
    deny_unknown_fields,
    expecting = "an action with do = \"pause_nodes\" | \"restart_nodes\" | \"set_retry\" | \"shed\" | \"unshed\" | \"ramp\" | \"admit\" | \"shift_traffic\" | \"set_rate\" | \"slow_service\" | \"set_capacity\" | \"kill_pods\" | \"fail_pods\" | \"stall\" | \"set_lb_limit\""
)]
pub enum ActionKind {
    /// Pause LB nodes: their flows are released (attempts on them fail) and
    /// they admit nothing until restarted.
    PauseNodes {
        /// LB pool name.
        lb: String,
        /// How many nodes, counting from the first.
        nodes: u32,
    },
    /// Restart paused nodes.
    RestartNodes {
        /// LB pool name.
        lb: String,
    },
    /// Replace a client population's or gateway's retry policy (absent
    /// `retry` means no retries).
    SetRetry {
        /// Client or gateway name.
        target: String,
        /// The new policy.
        #[serde(default)]
        retry: Option<RetryConfig>,
    },
    /// Add a shed rule at an LB: the route's requests are answered at once
    /// with `status` (403, 429 or 503) and an optional `Retry-After`.
    Shed {
        /// LB pool name.
        lb: String,
        /// Route name.
        route: String,
        /// Only requests of this criticality class (default: every class).
        #[serde(default)]
        class: Option<Criticality>,
        /// HTTP status.
        status: u16,
        /// `Retry-After` to advertise (not with 403).
        #[serde(default)]
        retry_after: Option<Nanos>,
    },
    /// Remove the route's shed rule at an LB.
    Unshed {
        /// LB pool name.
        lb: String,
        /// Route name.
        route: String,
        /// The class the rule named (default: the rule for every class).
        #[serde(default)]
        class: Option<Criticality>,
    },
    /// Staged restore of a route at an LB, site by site: replaces its shed
    /// rule with a ramp (`stormbreak_policy::ramp::StagedRestore`) that
    /// admits a rising fraction per site and holds while errors are high.
    Ramp {
        /// LB pool name.
        lb: String,
        /// Route name.
        route: String,
        /// Sites in restore order (client `site` labels).
        sites: Vec<String>,
        /// Ramp steps, hold and error guard.
        #[serde(default)]
        restore: StagedRestoreConfig,
        /// Status answered to requests not yet admitted (default 403).
        #[serde(default = "default_ramp_status")]
        status: u16,
    },
    /// Set the admitted fraction of a route at an LB, for one site or all:
    /// a manual staged restore (1.0 removes the gate). Requests not admitted
    /// are answered with `status`.
    Admit {
        /// LB pool name.
        lb: String,
        /// Route name.
        route: String,
        /// A client `site` label; absent means every site.
        #[serde(default)]
        site: Option<String>,
        /// Share admitted, in [0, 1].
        fraction: f64,
        /// Status answered to requests not admitted (default 403).
        #[serde(default = "default_ramp_status")]
        status: u16,
    },
    /// Send `fraction` of the named client populations' new requests to
    /// their `failover_route`.
    ShiftTraffic {
        /// Client population names.
        clients: Vec<String>,
        /// Share in [0, 1].
        fraction: f64,
    },
    /// Change a client population's rate from now on.
    SetRate {
        /// Client population name.
        client: String,
        /// The new rate.
        #[serde(with = "units::rate")]
        rate: f64,
    },
    /// A service slows down (a bad deploy, a noisy neighbour, a slow disk):
    /// every service time that starts from now on is `factor` × its sample
    /// plus `add`. Work already in service keeps its completion time.
    /// `capacity` says the same as `factor` the way a capacity drop is
    /// usually reported: the share of capacity that remains, `factor = 1 /
    /// capacity` (see [`slowdown`]).
    SlowService {
        /// Service name.
        service: String,
        /// Multiplies each service time (default 1; not with `capacity`).
        #[serde(default)]
        factor: Option<f64>,
        /// The share of the service's capacity that remains, in (0, 1]: a
        /// CPU cut by 80% is `capacity = 0.2`, the same as `factor = 5`
        /// (not with `factor`).
        #[serde(default)]
        capacity: Option<f64>,
        /// Fixed latency added to each service time (default 0).
        #[serde(default)]
        add: Nanos,
    },
    /// Set a service's per-pod capacity: app workers (CPU throttling, a
    /// shrunk thread pool) and/or the sidecar's concurrency limit. A cut
    /// admits nothing new until the pods drain below it; running work
    /// finishes.
    SetCapacity {
        /// Service name.
        service: String,
        /// Workers per pod, as in `app.workers` (scaled alike).
        #[serde(default)]
        workers: Option<u32>,
        /// Sidecar limit per pod, as in `sidecar.limit` (scaled alike).
        #[serde(default)]
        sidecar_limit: Option<u32>,
    },
    /// Kill pods (OOM, node loss): their in-flight attempts fail with a
    /// reset and the pods are gone. The replica controller starts
    /// replacements (ready after `pod_start`); with `for`, the lost
    /// capacity cannot be rescheduled until it ends (the node is gone).
    KillPods {
        /// Service name.
        service: String,
        /// How many pods, oldest first (at scale 1; scaled like `replicas`).
        pods: u32,
    },
    /// Pods whose app fails while they stay in the endpoints: every attempt
    /// sent to them is answered at once with a reset (Envoy's 503 `UF`).
    /// Least-request balancing sends them more, since they answer fast.
    FailPods {
        /// Service name.
        service: String,
        /// How many pods, oldest first (scaled like `replicas`).
        pods: u32,
    },
    /// Components stop answering: a dependency, or a whole region (list its
    /// LB pools, gateways and services).
    Stall {
        /// Component names (services, gateways or LB pools).
        targets: Vec<String>,
        /// `hang` (no answer until the caller's timeout) or `fail` (refused
        /// at once).
        mode: StallMode,
    },
    /// Set the flow limit and/or the connection limit (`maxconn`) of an LB
    /// pool's nodes, or of one node.
    SetLbLimit {
        /// LB pool name.
        lb: String,
        /// One node, counting from 0 (default: every node).
        #[serde(default)]
        node: Option<u32>,
        /// The new flow limit per node, as in `flows_per_node` (scaled alike).
        #[serde(default)]
        flows_per_node: Option<u32>,
        /// The new connection limit per node, as in `connections.maxconn`.
        #[serde(default)]
        maxconn: Option<u32>,
    },
}

/// The factor a `slow_service` multiplies service times by: `factor`, or
/// `1 / capacity` (a service left with a share `capacity` of its capacity
/// serves each request in `1 / capacity` times as long), else 1.
pub fn slowdown(factor: Option<f64>, capacity: Option<f64>) -> f64 {
    match (factor, capacity) {
        (Some(f), _) => f,
        (None, Some(c)) => 1.0 / c,
        (None, None) => 1.0,
    }
}

impl ActionKind {
    /// The `do = "…"` name.
    pub fn name(&self) -> &'static str {
        match self {
            ActionKind::PauseNodes { .. } => "pause_nodes",
            ActionKind::RestartNodes { .. } => "restart_nodes",
            ActionKind::SetRetry { .. } => "set_retry",
            ActionKind::Shed { .. } => "shed",
            ActionKind::Unshed { .. } => "unshed",
            ActionKind::Ramp { .. } => "ramp",
            ActionKind::Admit { .. } => "admit",
            ActionKind::ShiftTraffic { .. } => "shift_traffic",
            ActionKind::SetRate { .. } => "set_rate",
            ActionKind::SlowService { .. } => "slow_service",
            ActionKind::SetCapacity { .. } => "set_capacity",
            ActionKind::KillPods { .. } => "kill_pods",
            ActionKind::FailPods { .. } => "fail_pods",
            ActionKind::Stall { .. } => "stall",
            ActionKind::SetLbLimit { .. } => "set_lb_limit",
        }
    }

    /// Whether `for` may undo the action: the capacity triggers and faults,
    /// a pause (the nodes restart) and a shed (the rule is removed). The
    /// others already have their inverse as an action of their own, or no
    /// single state to return to (a ramp runs its own course).
    pub fn revertible(&self) -> bool {
        matches!(
            self,
            ActionKind::PauseNodes { .. }
                | ActionKind::Shed { .. }
                | ActionKind::SlowService { .. }
                | ActionKind::SetCapacity { .. }
                | ActionKind::KillPods { .. }
                | ActionKind::FailPods { .. }
                | ActionKind::Stall { .. }
                | ActionKind::SetLbLimit { .. }
        )
    }
}

fn default_ramp_status() -> u16 {
    403
}

/// A scenario error with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file (or `<builtin:name>`).
    pub file: String,
    /// 1-based line and column, when known.
    pub line_col: Option<(usize, usize)>,
    /// What was wrong and what was expected.
    pub message: String,
}

/// `file:line:col: message`, or `file: message` without a position.
fn write_located(
    f: &mut fmt::Formatter<'_>,
    file: &str,
    line_col: Option<(usize, usize)>,
    message: &str,
) -> fmt::Result {
    match line_col {
        Some((l, c)) => write!(f, "{file}:{l}:{c}: {message}"),
        None => write!(f, "{file}: {message}"),
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_located(f, &self.file, self.line_col, &self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// Something legal but probably not what was meant, with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioWarning {
    /// The file (or `<builtin:name>`).
    pub file: String,
    /// 1-based line and column, when known.
    pub line_col: Option<(usize, usize)>,
    /// What looks wrong and why.
    pub message: String,
}

impl fmt::Display for ScenarioWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_located(f, &self.file, self.line_col, &self.message)
    }
}

/// Why a file over [`MAX_SCENARIO_BYTES`] is refused (shared with the CLI's
/// bounded reader, so both say the same).
pub fn too_large() -> String {
    format!(
        "scenario file is larger than {} MiB, the limit for one scenario \
         (a scenario describes a system, not data)",
        MAX_SCENARIO_BYTES / (1024 * 1024)
    )
}

pub(crate) use stormbreak_spans::line_col;

/// What kind of component a name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComponentRef {
    /// Index into [`Scenario::lbs`].
    Lb(usize),
    /// Index into [`Scenario::gateways`].
    Gateway(usize),
    /// Index into [`Scenario::services`].
    Service(usize),
}

impl Scenario {
    /// Parses and validates `text`; errors name `file:line:column`.
    ///
    /// A text over [`MAX_SCENARIO_BYTES`] is refused before parsing. Values
    /// that are legal but probably unintended are kept in
    /// [`Scenario::warnings`].
    ///
    /// ```
    /// let err = stormbreak_sim::Scenario::parse("s.toml", "[scenario]\nname = 1\n").unwrap_err();
    /// assert!(err.to_string().starts_with("s.toml:2:8:"), "{err}");
    /// ```
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        if text.len() > MAX_SCENARIO_BYTES {
            // The whole file is the problem: there is no line to point at.
            return Err(ScenarioError {
                file: file.to_owned(),
                line_col: None,
                message: too_large(),
            });
        }
        let serde_error = |e: toml::de::Error| ScenarioError {
            file: file.to_owned(),
            line_col: e.span().map(|s| line_col(text, s.start)),
            message: messages::user_terms(e.message().trim()),
        };
        // One parse into the span-carrying document; the typed structs are
        // read from a copy of it, and the document is kept for positions.
        let doc = DeTable::parse(text).map_err(serde_error)?;
        let mut scenario = Scenario::deserialize(toml::de::Deserializer::from(doc.clone()))
            .map_err(serde_error)?;
        let doc = stormbreak_spans::Spans::new(doc);
        let ck = validate::Checker::new(file, text, &doc);
        scenario.validate(&ck)?;
        scenario.warnings = ck.into_warnings();
        Ok(scenario)
    }

    /// Whether `text` reads into the scenario's types, without the checks
    /// of values, references and graph that [`Scenario::parse`] adds after
    /// it. `stormbreak sweep` asks it which kind of value a field takes: a
    /// float field written `factor = 5` still takes `2.5`, an integer field
    /// does not.
    pub fn check_types(file: &str, text: &str) -> Result<(), ScenarioError> {
        if text.len() > MAX_SCENARIO_BYTES {
            return Err(ScenarioError {
                file: file.to_owned(),
                line_col: None,
                message: too_large(),
            });
        }
        let serde_error = |e: toml::de::Error| ScenarioError {
            file: file.to_owned(),
            line_col: e.span().map(|s| line_col(text, s.start)),
            message: messages::user_terms(e.message().trim()),
        };
        let doc = DeTable::parse(text).map_err(serde_error)?;
        Scenario::deserialize(toml::de::Deserializer::from(doc)).map_err(serde_error)?;
        Ok(())
    }

    /// Component names to kinds.
    pub fn components(&self) -> HashMap<&str, ComponentRef> {
        let mut m = HashMap::new();
        for (i, c) in self.lbs.iter().enumerate() {
            m.insert(c.name.get_ref().as_str(), ComponentRef::Lb(i));
        }
        for (i, c) in self.gateways.iter().enumerate() {
            m.insert(c.name.get_ref().as_str(), ComponentRef::Gateway(i));
        }
        for (i, c) in self.services.iter().enumerate() {
            m.insert(c.name.get_ref().as_str(), ComponentRef::Service(i));
        }
        m
    }

    /// Index of the route called `name`.
    pub fn route_index(&self, name: &str) -> Option<usize> {
        self.routes.iter().position(|r| r.name.get_ref() == name)
    }
}

// Limits. Each bounds what one scenario may ask of the engine so that a
// typo (an extra zero, "1e12/s") is refused at load time, with its
// position, instead of exhausting memory or overflowing a clock later.
// They are listed in the "Limits" section of docs/scenarios.md.

/// Most distinct client `site` labels in one scenario.
pub const MAX_SITES: usize = 255;
/// Most hops on one route.
pub const MAX_HOPS: usize = 64;
/// Most components, routes, client populations or actions of one kind.
pub const MAX_ENTITIES: usize = 10_000;
/// Most pods of one service: `replicas` and an autoscaler's `max` (every
/// pod is simulated, so this bounds the pod slab), and a gateway's
/// `instances` (each has its own limiter).
pub const MAX_PODS: u32 = 100_000;
/// Most nodes in one `[[lb]]` pool.
pub const MAX_NODES: u32 = 10_000;
/// Largest concurrency or queue length: `flows_per_node`, sidecar `limit`
/// and `queue`, app `workers` and `queue`, client `workers`, the largest
/// limit a gateway `limit` may reach.
pub const MAX_SLOTS: u32 = 10_000_000;
/// Largest `slow_service` factor: a thousand-fold slowdown is already a
/// stall; beyond it, use `stall`.
pub const MAX_SLOWDOWN: f64 = 1000.0;
/// Most client processes of one population (`connections.instances`):
/// each is a row of the engine's connection table.
pub const MAX_INSTANCES: u32 = 10_000_000;
/// Largest client `fanout` (attempts spawned per failed attempt).
pub const MAX_FANOUT: u32 = 100;
/// Largest client `fanout_max_in_flight`.
pub const MAX_FANOUT_IN_FLIGHT: u32 = 10_000;
/// Largest retry `max_attempts`, whatever `max_attempts_cap` says (the
/// policy crate only enforces the user-settable cap, gRPC's 5 by default).
pub const MAX_ATTEMPTS: u32 = 100;
/// Most recording intervals in a run (`duration / interval`): each one is a
/// row of every recorded series.
pub const MAX_INTERVALS: u64 = 200_000;
/// Longest run, and longest duration any field may hold: far beyond any
/// incident, and small enough that no clock sum can overflow.
pub const MAX_DURATION: Nanos = Nanos::from_secs(30 * 24 * 3600);
/// Highest rate, per second: one arrival per nanosecond. Above it the gap
/// between arrivals rounds to zero nanoseconds and cannot be represented.
pub const MAX_RATE: f64 = 1e9;
/// Largest lognormal `sigma`: at 4 the mean is already e⁸ ≈ 3 000 × the
/// median; beyond it samples overflow the nanosecond clock.
pub const MAX_SIGMA: f64 = 4.0;
/// Largest scenario file, in bytes (4 MiB; the incident scenario is 20 KiB).
pub const MAX_SCENARIO_BYTES: usize = 4 * 1024 * 1024;

/// Parses `"HH:MM"` into seconds after midnight.
pub fn parse_clock(s: &str) -> Option<u64> {
    let (h, m) = s.split_once(':')?;
    let (h, m): (u64, u64) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 3600 + m * 60)
}
