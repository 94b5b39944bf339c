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
use std::ops::Range;

use serde::Deserialize;
use stormbreak_policy::{Nanos, units};
use toml::Spanned;

use crate::dist::ServiceTimeSpec;

mod specs;
pub use specs::{BudgetSpec, RetrySpec, check_retry};
use stormbreak_policy::failover::FailoverConfig;
use stormbreak_policy::ramp::StagedRestoreConfig;

/// A parsed, validated scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
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
}

/// The `[scenario]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// Used for the default output directory.
    pub name: String,
    /// Free text shown in reports.
    #[serde(default)]
    pub description: String,
    /// Simulated run length.
    #[serde(with = "units::duration")]
    pub duration: Nanos,
    /// Recording interval (default 10 s).
    #[serde(with = "units::duration", default = "default_interval")]
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
    10 * stormbreak_policy::time::SECOND
}
fn default_seed() -> u64 {
    1
}
fn yes() -> bool {
    true
}
fn default_fanout_delay() -> Nanos {
    50 * stormbreak_policy::time::MILLISECOND
}

/// A `[[lb]]` pool: nodes that each hold a flow for an attempt's whole
/// downstream life (HAProxy `maxconn` per server/frontend).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LbSpec {
    /// Component name, referenced by routes.
    pub name: Spanned<String>,
    /// Number of nodes; attempts are spread round-robin over running nodes.
    pub nodes: u32,
    /// Concurrent flows a node can hold; past it new attempts are refused.
    pub flows_per_node: u32,
}

/// A `[[gateway]]`: calls its dependency route first, then forwards with its
/// own retry policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewaySpec {
    /// Component name.
    pub name: Spanned<String>,
    /// Route called (and awaited) before forwarding, e.g. an auth route.
    #[serde(default)]
    pub dependency: Option<Spanned<String>>,
    /// Per-try timeout on the dependency call and on the forwarded call.
    #[serde(with = "units::duration")]
    pub timeout: Nanos,
    /// Retries of the forwarded call (none when absent).
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// Retry budget shared by all calls through this gateway.
    #[serde(default)]
    pub budget: Option<BudgetSpec>,
}

/// A `[[service]]`: identical pods behind a least-loaded balancer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
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
}

/// `[service.sidecar]`: an Envoy/Istio sidecar's connection-pool limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SidecarSpec {
    /// Concurrent requests the sidecar forwards to the app (`http2MaxRequests`).
    pub limit: u32,
    /// Requests that may wait for a slot (`http1MaxPendingRequests`); 0 = none.
    #[serde(default)]
    pub queue: u32,
    /// How long a request may wait in that queue.
    #[serde(with = "units::opt_duration", default)]
    pub queue_timeout: Option<Nanos>,
}

/// `[service.app]`: the application container.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
    #[serde(with = "units::duration")]
    pub pod_start: Nanos,
    /// How often the HPA syncs (`--horizontal-pod-autoscaler-sync-period`,
    /// default 15 s as in Kubernetes), independent of the recording interval.
    #[serde(with = "units::duration", default = "default_hpa_sync")]
    pub sync_period: Nanos,
}

fn default_hpa_sync() -> Nanos {
    15 * stormbreak_policy::time::SECOND
}

/// The metric an autoscaler watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
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
#[serde(deny_unknown_fields)]
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
    #[serde(with = "units::duration", default = "default_failover_period")]
    pub period: Nanos,
}

/// How often a `[[failover]]` re-plans when its `period` is not given.
pub const DEFAULT_FAILOVER_PERIOD: Nanos = 10 * stormbreak_policy::time::SECOND;

fn default_failover_period() -> Nanos {
    DEFAULT_FAILOVER_PERIOD
}

/// A `[[route]]`: the components an attempt traverses, in order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Route name (what clients and dependencies reference).
    pub name: Spanned<String>,
    /// Component names, edge first; the last must be a service.
    pub path: Vec<Spanned<String>>,
}

/// A `[[client]]` population: open-loop arrivals on one route.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
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
    #[serde(with = "units::duration")]
    pub timeout: Nanos,
    /// Retry behaviour (none when absent).
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// Retry budget shared by the population.
    #[serde(default)]
    pub budget: Option<BudgetSpec>,
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
    #[serde(with = "units::duration", default = "default_fanout_delay")]
    pub fanout_delay: Nanos,
    /// With `fanout`: how long a logical operation keeps spawning attempts.
    #[serde(with = "units::opt_duration", default)]
    pub give_up_after: Option<Nanos>,
    /// A job queue: at most this many logical requests in flight (a
    /// dispatcher's worker pool, scaled with `--scale`); later arrivals
    /// wait in FIFO order and none is dropped. A worker is held for the
    /// whole request, retries and pauses included, so slow or failing
    /// attempts cut the pool's throughput (Little's law).
    #[serde(default)]
    pub workers: Option<u32>,
}

/// `diurnal = { amplitude = 0.3, period = "24h", peak_at = "15h" }`: the
/// rate is multiplied by 1 + amplitude·cos(2π(t − peak_at)/period).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiurnalSpec {
    /// Relative swing, in [0, 1).
    pub amplitude: f64,
    /// Cycle length (default 24 h).
    #[serde(with = "units::duration", default = "one_day")]
    pub period: Nanos,
    /// Simulated time of the daily peak.
    #[serde(with = "units::duration", default)]
    pub peak_at: Nanos,
}

fn one_day() -> Nanos {
    24 * 60 * stormbreak_policy::time::MINUTE
}

/// A `[[client.step]]`: from `at`, the rate becomes `rate` (linearly over `ramp`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateStep {
    /// When the change starts.
    #[serde(with = "units::duration")]
    pub at: Nanos,
    /// The new rate.
    #[serde(with = "units::rate")]
    pub rate: f64,
    /// Length of a linear ramp to the new rate (default: a step).
    #[serde(with = "units::duration", default)]
    pub ramp: Nanos,
}

/// An `[[action]]` on the timeline. (Unknown fields are still rejected:
/// `kind` is flattened and denies them.)
#[derive(Debug, Clone, Deserialize)]
pub struct ActionSpec {
    /// When it applies.
    #[serde(with = "units::duration")]
    pub at: Nanos,
    /// What it does.
    #[serde(flatten)]
    pub kind: ActionKind,
}

/// What a timeline action does.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case", deny_unknown_fields)]
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
        retry: Option<RetrySpec>,
    },
    /// Add a shed rule at an LB: the route's requests are answered at once
    /// with `status` (403, 429 or 503) and an optional `Retry-After`.
    Shed {
        /// LB pool name.
        lb: String,
        /// Route name.
        route: String,
        /// HTTP status.
        status: u16,
        /// `Retry-After` to advertise (not with 403).
        #[serde(with = "units::opt_duration", default)]
        retry_after: Option<Nanos>,
    },
    /// Remove the route's shed rule at an LB.
    Unshed {
        /// LB pool name.
        lb: String,
        /// Route name.
        route: String,
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

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line_col {
            Some((l, c)) => write!(f, "{}:{}:{}: {}", self.file, l, c, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

struct Checker<'a> {
    file: &'a str,
    text: &'a str,
}

impl Checker<'_> {
    fn at(&self, span: Range<usize>, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.to_owned(),
            line_col: Some(line_col(self.text, span.start)),
            message: message.into(),
        }
    }
    fn whole(&self, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.to_owned(),
            line_col: None,
            message: message.into(),
        }
    }
}

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
    /// ```
    /// let err = stormbreak_sim::Scenario::parse("s.toml", "[scenario]\nname = 1\n").unwrap_err();
    /// assert!(err.to_string().starts_with("s.toml:2:8:"), "{err}");
    /// ```
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError {
            file: file.to_owned(),
            line_col: e.span().map(|s| line_col(text, s.start)),
            message: e.message().trim().to_owned(),
        })?;
        scenario.validate(&Checker { file, text })?;
        Ok(scenario)
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

    fn validate(&self, ck: &Checker) -> Result<(), ScenarioError> {
        let m = &self.scenario;
        if m.duration == 0 {
            return Err(ck.whole("[scenario] duration must be > 0"));
        }
        if m.interval == 0 || m.interval > m.duration {
            return Err(ck.whole("[scenario] interval must be > 0 and ≤ duration"));
        }
        if let Some(c) = &m.clock_origin {
            parse_clock(c).ok_or_else(|| {
                ck.whole(format!(
                    "[scenario] clock_origin: expected \"HH:MM\", got {c:?}"
                ))
            })?;
        }
        let counts = [
            (
                "components",
                self.lbs.len() + self.gateways.len() + self.services.len(),
            ),
            ("routes", self.routes.len()),
            ("clients", self.clients.len()),
            ("failovers", self.failovers.len()),
            ("actions", self.actions.len()),
        ];
        for (what, n) in counts {
            if n > MAX_ENTITIES {
                return Err(ck.whole(format!("at most {MAX_ENTITIES} {what}, got {n}")));
            }
        }
        // Unique component names across kinds.
        let mut seen: HashMap<&str, Range<usize>> = HashMap::new();
        let names = self
            .lbs
            .iter()
            .map(|c| &c.name)
            .chain(self.gateways.iter().map(|c| &c.name))
            .chain(self.services.iter().map(|c| &c.name));
        for n in names {
            if seen.insert(n.get_ref(), n.span()).is_some() {
                return Err(ck.at(
                    n.span(),
                    format!("component name {:?} is used twice", n.get_ref()),
                ));
            }
        }
        let comps = self.components();
        for lb in &self.lbs {
            if lb.nodes == 0 || lb.flows_per_node == 0 {
                return Err(ck.at(
                    lb.name.span(),
                    format!(
                        "lb {:?}: nodes and flows_per_node must be ≥ 1",
                        lb.name.get_ref()
                    ),
                ));
            }
        }
        for s in &self.services {
            let name = s.name.get_ref();
            let err = |msg: String| ck.at(s.name.span(), format!("service {name:?}: {msg}"));
            if s.app.workers == 0 {
                return Err(err("app.workers must be ≥ 1".into()));
            }
            s.app
                .service_time
                .check()
                .map_err(|e| err(format!("app.service_time: {e}")))?;
            if let Some(sc) = &s.sidecar {
                if sc.limit == 0 {
                    return Err(err("sidecar.limit must be ≥ 1".into()));
                }
                if sc.queue > 0 && sc.queue_timeout.is_none() {
                    return Err(err("sidecar.queue > 0 needs sidecar.queue_timeout".into()));
                }
            }
            match &s.autoscaler {
                Some(a) => {
                    if a.min == 0 || a.min > a.max {
                        return Err(err(format!(
                            "autoscaler: expected 1 ≤ min ≤ max, got min {} max {}",
                            a.min, a.max
                        )));
                    }
                    if !(a.target.is_finite() && a.target > 0.0) {
                        return Err(err(format!(
                            "autoscaler.target must be > 0, got {}",
                            a.target
                        )));
                    }
                    if s.replicas < a.min || s.replicas > a.max {
                        return Err(err(format!(
                            "replicas {} outside the autoscaler's [{}, {}]",
                            s.replicas, a.min, a.max
                        )));
                    }
                    if a.sync_period == 0 {
                        return Err(err("autoscaler.sync_period must be > 0".into()));
                    }
                    if a.metric == ScaleMetric::SidecarSaturation && s.sidecar.is_none() {
                        return Err(err(
                            "autoscaler.metric sidecar_saturation needs a [service.sidecar]".into(),
                        ));
                    }
                }
                None if s.replicas == 0 => return Err(err("replicas must be ≥ 1".into())),
                None => {}
            }
        }
        let mut route_names: HashMap<&str, ()> = HashMap::new();
        for r in &self.routes {
            if route_names.insert(r.name.get_ref(), ()).is_some() {
                return Err(ck.at(
                    r.name.span(),
                    format!("route {:?} is defined twice", r.name.get_ref()),
                ));
            }
            if r.path.is_empty() {
                return Err(ck.at(r.name.span(), "route path must name at least one component"));
            }
            if r.path.len() > MAX_HOPS {
                return Err(ck.at(
                    r.name.span(),
                    format!("route path has {} hops; at most {MAX_HOPS}", r.path.len()),
                ));
            }
            for (i, hop) in r.path.iter().enumerate() {
                let last = i + 1 == r.path.len();
                match comps.get(hop.get_ref().as_str()) {
                    None => {
                        return Err(ck.at(
                            hop.span(),
                            format!(
                                "unknown component {:?}: expected one of {}",
                                hop.get_ref(),
                                sorted_names(comps.keys().copied())
                            ),
                        ));
                    }
                    Some(ComponentRef::Service(_)) if !last => {
                        return Err(ck.at(hop.span(), "a service must be the last hop of a route"));
                    }
                    Some(ComponentRef::Lb(_) | ComponentRef::Gateway(_)) if last => {
                        return Err(ck.at(hop.span(), "the last hop of a route must be a service"));
                    }
                    _ => {}
                }
            }
        }
        let route_list = || sorted_names(self.routes.iter().map(|r| r.name.get_ref().as_str()));
        for g in &self.gateways {
            if let Some(d) = &g.dependency {
                if self.route_index(d.get_ref()).is_none() {
                    return Err(ck.at(
                        d.span(),
                        format!(
                            "unknown route {:?}: expected one of {}",
                            d.get_ref(),
                            route_list()
                        ),
                    ));
                }
            }
            if g.timeout == 0 {
                return Err(ck.at(g.name.span(), "gateway timeout must be > 0"));
            }
            check_caller(ck, &g.name, g.retry.as_ref(), g.budget.as_ref())?;
        }
        for c in &self.clients {
            if let Some(f) = &c.failover_route {
                if self.route_index(f.get_ref()).is_none() {
                    return Err(ck.at(
                        f.span(),
                        format!(
                            "unknown route {:?}: expected one of {}",
                            f.get_ref(),
                            route_list()
                        ),
                    ));
                }
            }
            if self.route_index(c.route.get_ref()).is_none() {
                return Err(ck.at(
                    c.route.span(),
                    format!(
                        "unknown route {:?}: expected one of {}",
                        c.route.get_ref(),
                        route_list()
                    ),
                ));
            }
            if c.timeout == 0 {
                return Err(ck.at(c.name.span(), "client timeout must be > 0"));
            }
            let mut last = 0;
            for s in &c.steps {
                if s.at < last {
                    return Err(ck.at(c.name.span(), "client steps must be in time order"));
                }
                last = s.at + s.ramp;
            }
            if let Some(d) = &c.diurnal {
                if !(0.0..1.0).contains(&d.amplitude) || d.period == 0 {
                    return Err(ck.at(
                        c.name.span(),
                        format!(
                            "diurnal: expected 0 ≤ amplitude < 1 and period > 0, got {} and {}",
                            d.amplitude,
                            units::format_duration(d.period)
                        ),
                    ));
                }
            }
            if c.fanout > 0 && c.fanout_delay == 0 {
                return Err(ck.at(c.name.span(), "fanout_delay must be > 0"));
            }
            if c.fanout > 0 && c.give_up_after.is_none() {
                return Err(ck.at(
                    c.name.span(),
                    "fanout needs give_up_after (how long an operation keeps spawning attempts)",
                ));
            }
            if c.workers == Some(0) {
                return Err(ck.at(c.name.span(), "workers must be ≥ 1"));
            }
            if c.workers.is_some() && c.fanout > 0 {
                return Err(ck.at(
                    c.name.span(),
                    "workers (a job queue) cannot be combined with fanout",
                ));
            }
            check_caller(ck, &c.name, c.retry.as_ref(), c.budget.as_ref())?;
        }
        self.check_failovers(ck, &comps)?;
        self.check_dependency_cycles(ck, &comps)?;
        let sites: Vec<&str> = self
            .clients
            .iter()
            .filter_map(|c| c.site.as_deref())
            .collect();
        let mut distinct_sites = sites.clone();
        distinct_sites.sort_unstable();
        distinct_sites.dedup();
        if distinct_sites.len() > MAX_SITES {
            return Err(ck.whole(format!(
                "at most {MAX_SITES} distinct client sites, got {}",
                distinct_sites.len()
            )));
        }
        for spanned in &self.actions {
            let a = spanned.get_ref();
            let here = |msg: String| ck.at(spanned.span(), format!("action: {msg}"));
            let client = |n: &str| {
                self.clients
                    .iter()
                    .position(|c| c.name.get_ref() == n)
                    .ok_or_else(|| here(format!("unknown client {n:?}")))
            };
            let lb = |n: &str| match comps.get(n) {
                Some(ComponentRef::Lb(i)) => Ok(*i),
                _ => Err(here(format!("{n:?} is not an lb"))),
            };
            let route = |n: &str| {
                self.route_index(n).ok_or_else(|| {
                    here(format!(
                        "unknown route {n:?}: expected one of {}",
                        route_list()
                    ))
                })
            };
            if a.at > m.duration {
                return Err(here(format!(
                    "at {} is after the end of the run ({})",
                    units::format_duration(a.at),
                    units::format_duration(m.duration)
                )));
            }
            match &a.kind {
                ActionKind::PauseNodes { lb: name, nodes } => {
                    let i = lb(name)?;
                    if *nodes == 0 || *nodes > self.lbs[i].nodes {
                        return Err(here(format!(
                            "pause_nodes: nodes must be in 1..={}",
                            self.lbs[i].nodes
                        )));
                    }
                }
                ActionKind::RestartNodes { lb: name } => {
                    lb(name)?;
                }
                ActionKind::SetRetry { target, retry } => {
                    let known = self.clients.iter().any(|c| c.name.get_ref() == target)
                        || self.gateways.iter().any(|g| g.name.get_ref() == target);
                    if !known {
                        return Err(here(format!(
                            "set_retry: {target:?} is neither a client nor a gateway"
                        )));
                    }
                    if let Some(r) = retry {
                        check_retry(r).map_err(|e| here(format!("set_retry: {e}")))?;
                    }
                }
                ActionKind::Shed {
                    lb: l,
                    route: r,
                    status,
                    retry_after,
                } => {
                    lb(l)?;
                    let ri = route(r)?;
                    let rule = stormbreak_policy::shed::ShedRule {
                        route: ri as u32,
                        class: None,
                        status: *status,
                        retry_after: *retry_after,
                    };
                    rule.validate().map_err(|e| here(format!("shed: {e}")))?;
                }
                ActionKind::Unshed { lb: l, route: r } => {
                    lb(l)?;
                    route(r)?;
                }
                ActionKind::Ramp {
                    lb: l,
                    route: r,
                    sites: ramp_sites,
                    restore,
                    status,
                } => {
                    lb(l)?;
                    route(r)?;
                    restore.validate().map_err(|e| here(format!("ramp: {e}")))?;
                    if ![403, 429, 503].contains(status) {
                        return Err(here(format!(
                            "ramp: status must be 403, 429 or 503, got {status}"
                        )));
                    }
                    if ramp_sites.is_empty() {
                        return Err(here(
                            "ramp: sites must name at least one client site".into(),
                        ));
                    }
                    for site in ramp_sites {
                        if !sites.contains(&site.as_str()) {
                            return Err(here(format!("ramp: no client has site {site:?}")));
                        }
                    }
                }
                ActionKind::Admit {
                    lb: l,
                    route: r,
                    site,
                    fraction,
                    status,
                } => {
                    lb(l)?;
                    route(r)?;
                    if !(0.0..=1.0).contains(fraction) {
                        return Err(here(format!(
                            "admit: fraction must be in [0, 1], got {fraction}"
                        )));
                    }
                    if ![403, 429, 503].contains(status) {
                        return Err(here(format!(
                            "admit: status must be 403, 429 or 503, got {status}"
                        )));
                    }
                    if let Some(site) = site {
                        if !sites.contains(&site.as_str()) {
                            return Err(here(format!("admit: no client has site {site:?}")));
                        }
                    }
                }
                ActionKind::ShiftTraffic { clients, fraction } => {
                    if !(0.0..=1.0).contains(fraction) {
                        return Err(here(format!(
                            "shift_traffic: fraction must be in [0, 1], got {fraction}"
                        )));
                    }
                    for c in clients {
                        let i = client(c)?;
                        if self.clients[i].failover_route.is_none() {
                            return Err(here(format!(
                                "shift_traffic: client {c:?} has no failover_route"
                            )));
                        }
                    }
                }
                ActionKind::SetRate { client: c, rate } => {
                    client(c)?;
                    if !rate.is_finite() {
                        return Err(here("set_rate: rate must be finite".into()));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Most distinct client `site` labels in one scenario.
pub const MAX_SITES: usize = 255;
/// Most hops on one route.
pub const MAX_HOPS: usize = 64;
/// Most components, routes, client populations or actions of one kind.
pub const MAX_ENTITIES: usize = 10_000;

impl Scenario {
    fn check_failovers(
        &self,
        ck: &Checker,
        comps: &HashMap<&str, ComponentRef>,
    ) -> Result<(), ScenarioError> {
        let lbs = || sorted_names(self.lbs.iter().map(|l| l.name.get_ref().as_str()));
        for f in &self.failovers {
            let lb = |n: &Spanned<String>, role: &str| match comps.get(n.get_ref().as_str()) {
                Some(ComponentRef::Lb(i)) => Ok(*i),
                Some(_) => Err(ck.at(
                    n.span(),
                    format!(
                        "failover {role}: {:?} is not an lb; expected one of {}",
                        n.get_ref(),
                        lbs()
                    ),
                )),
                None => Err(ck.at(
                    n.span(),
                    format!(
                        "failover {role}: unknown lb {:?}; expected one of {}",
                        n.get_ref(),
                        lbs()
                    ),
                )),
            };
            let p = lb(&f.primary, "primary")?;
            let s = lb(&f.secondary, "secondary")?;
            if p == s {
                return Err(ck.at(
                    f.secondary.span(),
                    "failover: primary and secondary must be different lbs",
                ));
            }
            if f.clients.is_empty() {
                return Err(ck.at(
                    f.primary.span(),
                    "failover: clients must name at least one client population",
                ));
            }
            for c in &f.clients {
                match self
                    .clients
                    .iter()
                    .find(|x| x.name.get_ref() == c.get_ref())
                {
                    None => {
                        return Err(ck.at(
                            c.span(),
                            format!(
                                "failover: unknown client {:?}; expected one of {}",
                                c.get_ref(),
                                sorted_names(
                                    self.clients.iter().map(|x| x.name.get_ref().as_str())
                                )
                            ),
                        ));
                    }
                    Some(x) if x.failover_route.is_none() => {
                        return Err(ck.at(
                            c.span(),
                            format!("failover: client {:?} has no failover_route", c.get_ref()),
                        ));
                    }
                    Some(_) => {}
                }
            }
            f.policy
                .validate()
                .map_err(|e| ck.at(f.primary.span(), format!("failover policy: {e}")))?;
            if f.period == 0 {
                return Err(ck.at(f.primary.span(), "failover: period must be > 0"));
            }
        }
        Ok(())
    }

    /// A gateway calls its dependency route before forwarding; if that route
    /// passes through the gateway again (directly or through other
    /// gateways' dependencies), one request would spawn calls without end.
    fn check_dependency_cycles(
        &self,
        ck: &Checker,
        comps: &HashMap<&str, ComponentRef>,
    ) -> Result<(), ScenarioError> {
        // Edges: gateway → every gateway on its dependency route, and every
        // gateway reachable from those by their own dependencies.
        let gateways_on = |route: usize| -> Vec<usize> {
            self.routes[route]
                .path
                .iter()
                .filter_map(|h| match comps.get(h.get_ref().as_str()) {
                    Some(ComponentRef::Gateway(g)) => Some(*g),
                    _ => None,
                })
                .collect()
        };
        let edges: Vec<Vec<usize>> = self
            .gateways
            .iter()
            .map(|g| {
                g.dependency
                    .as_ref()
                    .and_then(|d| self.route_index(d.get_ref()))
                    .map_or_else(Vec::new, gateways_on)
            })
            .collect();
        // Iterative DFS with colours: 0 new, 1 on the stack, 2 done.
        let mut colour = vec![0u8; self.gateways.len()];
        for start in 0..self.gateways.len() {
            if colour[start] != 0 {
                continue;
            }
            let mut stack = vec![(start, 0usize)];
            colour[start] = 1;
            while let Some(&mut (g, ref mut next)) = stack.last_mut() {
                if let Some(&h) = edges[g].get(*next) {
                    *next += 1;
                    match colour[h] {
                        0 => {
                            colour[h] = 1;
                            stack.push((h, 0));
                        }
                        1 => {
                            let mut cycle: Vec<&str> = stack
                                .iter()
                                .skip_while(|(x, _)| *x != h)
                                .map(|(x, _)| self.gateways[*x].name.get_ref().as_str())
                                .collect();
                            cycle.push(self.gateways[h].name.get_ref());
                            let dep = self.gateways[g].dependency.as_ref().expect("has an edge");
                            return Err(ck.at(
                                dep.span(),
                                format!(
                                    "dependency cycle: {} (a gateway's dependency route \
                                     must not lead back to it)",
                                    cycle.join(" → ")
                                ),
                            ));
                        }
                        _ => {}
                    }
                } else {
                    colour[g] = 2;
                    stack.pop();
                }
            }
        }
        Ok(())
    }
}

fn check_caller(
    ck: &Checker,
    owner: &Spanned<String>,
    retry: Option<&RetrySpec>,
    budget: Option<&BudgetSpec>,
) -> Result<(), ScenarioError> {
    if let Some(r) = retry {
        check_retry(r)
            .map_err(|e| ck.at(owner.span(), format!("{:?}: retry: {e}", owner.get_ref())))?;
    }
    if let Some(b) = budget {
        b.check()
            .map_err(|e| ck.at(owner.span(), format!("{:?}: budget: {e}", owner.get_ref())))?;
    }
    Ok(())
}

fn sorted_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut v: Vec<_> = names.collect();
    v.sort_unstable();
    v.join(", ")
}

/// Parses `"HH:MM"` into seconds after midnight.
pub fn parse_clock(s: &str) -> Option<u64> {
    let (h, m) = s.split_once(':')?;
    let (h, m): (u64, u64) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 3600 + m * 60)
}
